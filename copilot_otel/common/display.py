"""What a message, a log line, a terminal or a file we write may show: one place for secrets and control characters.

Two kinds of text reach the user that must not be shown as they are (see ``docs/threat-model.md``):

* **Secrets in settings.** An endpoint URL may carry a password (``http://alice:secret@host:4318``) or a token in
  its query string; a webhook URL's path is its credential (Slack, Teams). :func:`url` and :func:`webhook` are the
  only way such a URL is written into a message, a log line or a status file; :func:`scrub` masks the userinfo
  of any URL (or bare ``user:password@host``) inside free text such as a library's exception message. Header
  values are never formatted at all (``config`` says "set").
* **Log content.** The session logs hold text the agent's tools read from files and command output an attacker
  may control. A terminal obeys escape sequences in it (an OSC 52 clipboard write, a title change, a screen
  clear), so every character that is not printable is shown as a visible stand-in before it reaches a terminal:
  :func:`printable` for plain strings, :func:`neutralise` for a ``rich`` console (every segment it renders, so
  tables, trees and cells built anywhere are covered), :class:`SafeLogFilter` for every log record.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import PurePath

# Not `from typing import TYPE_CHECKING`: `statusline`'s hook imports this module and pays for nothing else.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import logging
    from typing import Any

    from rich.console import Console, RenderHook

__all__ = [
    "SafeLogFilter",
    "count",
    "duration",
    "message",
    "neutralise",
    "printable",
    "scrub",
    "tokens",
    "url",
    "webhook",
]

MASK = "***"


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``1 session``, ``2 sessions``, ``12,345 spans``: how every message of ours says how many (with thousands
    separators, and the singular for one)."""
    return f"{n:,} {noun if n == 1 else (plural or noun + 's')}"


def tokens(value: float) -> str:
    """A token count as a table cell: exact under 10,000, then 12.3k / 4.5M / 1.2B (columns stay narrow)."""
    value = round(value)
    if value < 10_000:
        return f"{int(value):,}"
    if value < 1_000_000:
        return f"{value / 1000:.1f}k"
    if value < 1_000_000_000:
        return f"{value / 1e6:.1f}M"
    return f"{value / 1e9:.1f}B"


def duration(seconds: float) -> str:
    """A span of time as a table cell: ``4m05s`` under an hour, ``2h07m`` above (no seconds that nobody reads)."""
    whole = round(seconds)
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def url(value: str) -> str:
    """``value`` as a message may show it: userinfo replaced by ``***@``, a query string by ``***``.

    A value that is not a URL (a bare ``host:port`` for gRPC) gets the same treatment for a ``user@`` part.
    """
    from urllib.parse import urlsplit, urlunsplit  # on use: `statusline`'s hook imports this module

    parts = urlsplit(value if "://" in value else f"//{value}")
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MASK}@" + netloc.rsplit("@", 1)[1]
    shown = urlunsplit((parts.scheme, netloc, parts.path, MASK if parts.query else "", parts.fragment))
    return shown if "://" in value else shown.removeprefix("//")


def webhook(value: str) -> str:
    """A webhook URL as a message may show it: scheme and host only (a Slack or Teams webhook's path is its
    credential)."""
    from urllib.parse import urlsplit

    parts = urlsplit(value)
    return f"{parts.scheme}://{parts.hostname}/{MASK}"


# ``scheme://user[:password]@`` and a bare ``user:password@host`` (a gRPC target in a resolver's message).
_URL_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^\s/@]+@")
_BARE_USERINFO = re.compile(r"(?<![\w.+-])[^\s/@:'\"]+:[^\s/@'\"]+@(?=[\w\[])")


def scrub(text: str) -> str:
    """``text`` with the credentials of every URL in it masked (``***@``): for messages we did not write."""
    if "@" not in text:
        return text
    return _BARE_USERINFO.sub(f"{MASK}@", _URL_USERINFO.sub(rf"\1{MASK}@", text))


# C0 controls but newline and tab, DEL, and C1 controls (0x9b is CSI on terminals that read 8-bit controls).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_CONTROL_OR_NEWLINE = re.compile("[\x00-\x1f\x7f-\x9f]")


def _picture(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    if code < 0x20:
        return chr(0x2400 + code)  # the Unicode "control pictures": ESC shows as ␛, BEL as ␇
    if code == 0x7F:
        return "\u2421"  # ␡
    return f"\\x{code:02x}"


def printable(text: str, lines: bool = True) -> str:
    """``text`` with every control character (but newline and tab while ``lines``) shown as a visible stand-in
    (ESC as ␛, BEL as ␇), so a terminal never obeys a sequence that came from a log."""
    control = _CONTROL if lines else _CONTROL_OR_NEWLINE
    return control.sub(_picture, text) if control.search(text) else text


def message(text: str) -> str:
    """A message built from text we did not all write (a collector's answer, a log's field, an exception) as a
    terminal may show it: URL credentials masked, control characters visible."""
    return printable(scrub(text))


@cache
def _neutralise_hook() -> type[RenderHook]:
    """The render hook class, built on first use: ``rich`` is imported by the commands that draw, not by every
    command that imports this module (``--help``, ``config``, the daemon's log lines)."""
    from rich.console import (
        ConsoleOptions,
        ConsoleRenderable,
        RenderableType,
        RenderHook,
        RenderResult,
    )
    from rich.segment import Segment

    class Neutralised:
        """A renderable drawn as ``inner`` is, with control characters of its text made visible (the style
        codes ``rich`` adds itself are not text, so colours stay)."""

        def __init__(self, inner: RenderableType) -> None:
            self.inner = inner

        def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
            for segment in console.render(self.inner, options):
                if segment.control is None and _CONTROL.search(segment.text):
                    yield Segment(printable(segment.text), segment.style)
                else:
                    yield segment

    class NeutraliseHook(RenderHook):
        def process_renderables(self, renderables: list[ConsoleRenderable]) -> list[ConsoleRenderable]:
            return [Neutralised(r) for r in renderables]

    return NeutraliseHook


def neutralise(console: Console) -> Console:
    """``console`` with every renderable it prints neutralised (see :func:`printable`); returns it."""
    console.push_render_hook(_neutralise_hook()())
    return console


def _safe(value: Any) -> Any:
    """A log argument neutralised: one line (a newline in a folder name must not forge a log line), no control
    characters, no URL credentials. Numbers and other objects stay as they are (``%d``, ``%r`` still work)."""
    if isinstance(value, str | BaseException | PurePath):
        return printable(scrub(str(value)), lines=False)
    return value


class SafeLogFilter:
    """Neutralises every record a handler writes: control characters made visible and URL credentials masked,
    in the message and in each argument (a folder name, an exception text), so a log line can neither carry a
    secret nor drive the terminal or journal viewer that shows it.

    A filter is anything with this ``filter`` method (:meth:`logging.Handler.addFilter`); not a subclass of
    :class:`logging.Filter`, so that importing this module does not import :mod:`logging` (``statusline``'s
    hook, which logs nothing, imports it)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = printable(scrub(record.msg)) if isinstance(record.msg, str) else _safe(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(_safe(arg) for arg in record.args)
        elif isinstance(record.args, dict):
            record.args = {key: _safe(arg) for key, arg in record.args.items()}
        if record.exc_info and not record.exc_text:
            import logging

            record.exc_text = printable(scrub(logging.Formatter().formatException(record.exc_info)))
        return True
