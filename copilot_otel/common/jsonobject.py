"""One check of a JSON document that must be an object: a state file, ``status.json``, a dead letter, a checkpoint's
context, a Windows task's settings, a line of a session log read for its time.

Each read its bytes, parsed them and checked for a ``dict`` on its own, with its own parser and its own idea of what
failed; :func:`json_object` is that check, and :class:`NotAJsonObject` its one error, which says which of the
three ways the bytes failed (empty, not JSON, JSON of another kind) in words a caller can put after a path:
``f"{path} is {exc}"``.

The standard library's parser, not orjson: a dead letter that orjson could not write (an integer beyond 64 bits)
was written by the ``json`` module, and must read back exact (orjson reads such an integer as a float) and at all
(``json`` writes ``NaN``, which orjson refuses). The documents are small or read once; ``json`` is loaded anyway.
"""

from __future__ import annotations

import json

# Not `from typing import …`: `statusline`'s hook imports this module and pays for nothing else.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["NotAJsonObject", "json_object"]


class NotAJsonObject(ValueError):
    """The bytes are empty, not JSON, or JSON of another kind (a list, a string, ``null``).

    A ``ValueError``, as the parser's own errors are, so a caller that reads many documents and skips bad ones
    keeps one ``except``. The message completes ``"<path> is "``: ``empty``, ``not valid JSON: <why>``,
    ``not a JSON object``.
    """


def json_object(data: bytes | str) -> dict[str, Any]:
    """The JSON object ``data`` holds (UTF-8 bytes, or text).

    Raises:
        NotAJsonObject: ``data`` is empty (or only whitespace), is not valid JSON, or holds a JSON value that is not
            an object.
    """
    if not data.strip():
        raise NotAJsonObject("empty")
    try:
        value = json.loads(data)
    except (
        ValueError,
        RecursionError,
    ) as exc:  # JSONDecodeError, UnicodeDecodeError; a document nested too deep
        raise NotAJsonObject(f"not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise NotAJsonObject("not a JSON object")
    return value
