"""Timestamps of the logs: ISO-8601 text → Unix nanoseconds, within what an encoder carries.

Every source's log dates its records in ISO-8601 (Copilot CLI's, Claude Code's, Codex CLI's, Gemini CLI's), and
the loop reads one too (a session start's ``start_time``, which dates an imported transcript), so the parsing is
the model's: pure, shared by the sources' readers above it and by the loop, which may not import a source.
"""

from __future__ import annotations

from datetime import datetime, timezone

from .inputs import Dropped
from .records import DropReason

__all__ = ["MAX_TIME_NS", "parse_timestamp", "timestamp_ns"]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
# Timestamps an event may carry: after 1970 and before 2**63 ns (2262-04-11). OTLP's fixed64 would take times up to
# 2554, but a time also goes into the fold's sums (an end is a start plus a duration) and into backends that keep
# int64 nanoseconds. Outside, or unparsable, it is dropped (counted as ``bad_timestamp``) and the event kept.
MAX_TIME_NS = 2**63
# One-entry cache: neighbouring events very often share the timestamp's date-and-hour prefix, but parsing the
# full string is already fast; the cache only saves re-parsing exact duplicates (parallel tool events).
_last_ts: tuple[str, int] = ("", 0)
# The last whole second parsed ("YYYY-MM-DDTHH:MM:SS") and its Unix nanoseconds.
_last_second: tuple[str, int] = ("", 0)
# Nanoseconds per unit of a fraction of n digits.
_FRACTION_SCALE: tuple[int, ...] = (10**9, 10**8, 10**7, 10**6, 10**5, 10**4, 10**3)


def parse_timestamp(value: str) -> int:
    """ISO-8601 (``2026-05-26T16:14:36.213Z`` and offsets) → Unix nanoseconds.

    Raises:
        ValueError: the value is not an ISO-8601 timestamp.
    """
    global _last_ts, _last_second
    if value == _last_ts[0]:
        return _last_ts[1]
    # The CLI's own form (whole seconds, then 1-6 digits of fraction, then Z): events of one second share the
    # expensive part, so only the fraction is read for the second and later ones.
    fraction = value[20:-1]
    if (
        value[19:20] == "."
        and value[-1:] == "Z"
        and 0 < len(fraction) < 7
        and fraction.isdigit()
        and fraction.isascii()
    ):
        prefix = value[:19]
        if prefix == _last_second[0]:
            base = _last_second[1]
        else:
            base = _seconds_ns(prefix + "+00:00")
            _last_second = (prefix, base)
        ns = base + int(fraction) * _FRACTION_SCALE[len(fraction)]
    else:
        text = value[:-1] + "+00:00" if value.endswith(("Z", "z")) else value
        ns = _seconds_ns(text)
    _last_ts = (value, ns)
    return ns


def timestamp_ns(value: object, dropped: Dropped) -> int | None:
    """A timestamp of the log as Unix nanoseconds, or ``None`` (noted in ``dropped`` as a ``bad_timestamp`` value)
    when it is not a string, does not parse, or lies outside what an encoder carries (1970 to 2262)."""
    try:
        ns = parse_timestamp(value) if isinstance(value, str) else -1
    except ValueError:
        ns = -1
    if 0 < ns < MAX_TIME_NS:
        return ns
    dropped.append((DropReason.BAD_TIMESTAMP, repr(value)[:80]))
    return None


def _seconds_ns(text: str) -> int:
    dt = datetime.fromisoformat(text)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    delta = dt - _EPOCH
    ns: int = (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000
    return ns
