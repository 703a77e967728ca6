"""The state dir's ``lock`` and ``status.json`` by name, and ``status.json`` read as a JSON object: what a reader
needs that pays for no record type (``statusline``, which Claude Code waits for after every message, reads four
of its fields; :mod:`.statusfile` builds the typed :class:`~copilot_otel.daemon.statusfile.DaemonStatus` on it).
"""

from __future__ import annotations

import os
from pathlib import Path

from .._platform import _quick
from ..common.errors import StateError
from ..common.jsonobject import NotAJsonObject, json_object

# Not `from typing import …`: `statusline`'s hook imports this module and pays for nothing else.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["LOCK_FILE", "STATUS_FILE", "daemon_alive", "read_status"]

LOCK_FILE = "lock"
STATUS_FILE = "status.json"


def read_status(state_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """Read the ``status.json`` a daemon wrote in ``state_dir``; ``None`` if there is none.

    Raises:
        StateError: The file exists but cannot be read or is not a JSON object.
    """
    path = Path(state_dir) / STATUS_FILE
    try:
        data = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise StateError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        return json_object(data)
    except NotAJsonObject as exc:
        raise StateError(f"{path} is {exc}") from exc


def daemon_alive(pid: object) -> bool:
    """Whether the pid a status names (any JSON value: an older or damaged file's) is a live process (the one
    check, for ``status`` and ``statusline``: :func:`~copilot_otel._platform._quick.pid_alive`)."""
    return isinstance(pid, int) and not isinstance(pid, bool) and _quick.pid_alive(pid)
