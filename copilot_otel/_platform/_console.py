"""Text for people on any console: Unicode glyphs where the stream can encode them, ASCII where it cannot.

A Windows console or a redirected stream is often cp1252 (or another legacy code page), which has no box
drawing, check marks or arrows; Python raises ``UnicodeEncodeError`` for them. :func:`glyphs_for` picks the
glyph set a stream can take, and :func:`prepare_text_stream` makes any other unencodable character (a session
title in another script) a ``?`` instead of a crash. Machine-readable output (``--json``) does not go through
the text layer at all: :func:`utf8_stdout` is the byte stream, always UTF-8.
"""

from __future__ import annotations

import contextlib
import io
import sys
from dataclasses import dataclass
from typing import IO, TextIO, cast

__all__ = ["ASCII", "UNICODE", "Glyphs", "glyphs_for", "prepare_text_stream", "utf8_stdout"]


@dataclass(frozen=True, slots=True)
class Glyphs:
    """The symbols human-readable output uses."""

    ok: str
    fail: str
    arrow: str
    dot: str
    ellipsis: str
    open_quote: str
    close_quote: str
    rule: str

    def chars(self) -> str:
        return "".join(
            (
                self.ok,
                self.fail,
                self.arrow,
                self.dot,
                self.ellipsis,
                self.open_quote,
                self.close_quote,
                self.rule,
            )
        )


UNICODE = Glyphs(
    ok="✓", fail="✗", arrow="→", dot="·", ellipsis="…", open_quote="“", close_quote="”", rule="─"
)
ASCII = Glyphs(
    ok="+", fail="x", arrow="->", dot="-", ellipsis="...", open_quote='"', close_quote='"', rule="-"
)
# What rich draws trees and tables with (it falls back to ASCII itself when the encoding is not UTF-*).
_BOX = "│├└─"


def glyphs_for(stream: TextIO | None) -> Glyphs:
    """:data:`UNICODE` when ``stream``'s encoding can encode every glyph (and rich's box drawing), else :data:`ASCII`."""
    encoding = getattr(stream, "encoding", None) or "ascii"
    try:
        (UNICODE.chars() + _BOX).encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return ASCII
    return UNICODE


def prepare_text_stream(stream: TextIO) -> None:
    """Let ``stream`` replace what its encoding cannot represent instead of raising (idempotent)."""
    if isinstance(stream, io.TextIOWrapper) and stream.errors == "strict":
        with contextlib.suppress(ValueError, io.UnsupportedOperation):
            stream.reconfigure(errors="replace")


def utf8_stdout() -> IO[bytes]:
    """Standard output as bytes (flush the text layer first): what ``--json`` writes UTF-8 to."""
    sys.stdout.flush()
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:  # replaced by a text-only object (an embedding application, a test harness)
        return cast(IO[bytes], _TextBytes(sys.stdout))
    return buffer  # type: ignore[no-any-return]


class _TextBytes(io.RawIOBase):
    """A byte sink that decodes UTF-8 into a text stream that has no ``buffer``."""

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
