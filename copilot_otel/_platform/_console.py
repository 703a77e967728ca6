"""Text for people on any console: Unicode where the stream can encode it, ASCII where it cannot.

A Windows console or a redirected stream is often cp1252 (or another legacy code page), which has no box
drawing, check marks or arrows; Python raises ``UnicodeEncodeError`` for them. :func:`text_streams` puts a thin
layer over ``sys.stdout``/``sys.stderr`` for one command when they cannot encode our glyphs: the glyphs become
their ASCII spellings (:data:`ASCII_SPELLINGS`), any other character the code page lacks (a session title in
another script) becomes ``?``, and rich, which reads the stream's encoding, draws trees and tables in ASCII by
itself. Machine-readable output (``--json``) does not go through the text layer: :func:`utf8_stdout` is the byte
stream under it, always written as UTF-8.
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Iterator
from typing import IO, TextIO, cast

__all__ = ["ASCII_SPELLINGS", "can_encode_glyphs", "text_streams", "utf8_stdout"]

# Every non-ASCII glyph copilot-otel prints, with what it becomes on a stream that cannot encode it.
ASCII_SPELLINGS = {
    "✓": "+",
    "✗": "x",
    "→": "->",
    "·": "-",
    "…": "...",
    "“": '"',
    "”": '"',
    "─": "-",
    "│": "|",
    "├": "+",
    "└": "`",
    "━": "-",
}
_TRANSLATION = str.maketrans(ASCII_SPELLINGS)
_GLYPHS = "".join(ASCII_SPELLINGS)


def can_encode_glyphs(stream: object) -> bool:
    """Whether ``stream``'s encoding has every glyph we print (UTF-8 does; cp1252 and ASCII do not)."""
    encoding = getattr(stream, "encoding", None) or "ascii"
    try:
        _GLYPHS.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


class _AsciiGlyphs(io.TextIOBase):
    """Writes to ``raw`` with our glyphs spelled in ASCII and anything else unencodable as ``?``."""

    def __init__(self, raw: TextIO) -> None:
        super().__init__()
        self._raw = raw
        if isinstance(raw, io.TextIOWrapper):
            with contextlib.suppress(ValueError, io.UnsupportedOperation):
                raw.reconfigure(errors="replace")

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._raw.encoding  # rich reads it and draws ASCII trees and tables for a non-UTF encoding

    @property
    def buffer(self) -> IO[bytes]:
        return cast(IO[bytes], getattr(self._raw, "buffer"))  # noqa: B009 - TextIO does not declare it

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._raw.write(text.translate(_TRANSLATION))
        return len(text)

    def flush(self) -> None:
        self._raw.flush()

    def isatty(self) -> bool:
        return self._raw.isatty()

    def fileno(self) -> int:
        return self._raw.fileno()


@contextlib.contextmanager
def text_streams() -> Iterator[None]:
    """For the duration of one command, make ``sys.stdout``/``sys.stderr`` safe for whatever we print."""
    saved = sys.stdout, sys.stderr
    if sys.stdout is not None and not can_encode_glyphs(sys.stdout):
        sys.stdout = cast(TextIO, _AsciiGlyphs(sys.stdout))
    if sys.stderr is not None and not can_encode_glyphs(sys.stderr):
        sys.stderr = cast(TextIO, _AsciiGlyphs(sys.stderr))
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        sys.stdout, sys.stderr = saved


def utf8_stdout() -> IO[bytes]:
    """Standard output as bytes (the text layer flushed first): what ``--json`` writes UTF-8 to."""
    sys.stdout.flush()
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:  # a text-only replacement (an embedding application): decode into it
        return cast(IO[bytes], _Utf8Into(sys.stdout))
    return cast(IO[bytes], buffer)


class _Utf8Into(io.RawIOBase):
    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self._stream = stream

    def writable(self) -> bool:
        return True

    def write(self, data: bytes) -> int:  # type: ignore[override]
        self._stream.write(bytes(data).decode("utf-8"))
        return len(data)

    def flush(self) -> None:
        self._stream.flush()
