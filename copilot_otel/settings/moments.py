"""One grammar for a moment, read by every flag that takes one (``replay``/``report`` ``--since``/``--until``,
``run --backfill``), so the same text means the same time everywhere.

=========================================  ============================================================
Form                                       Means
=========================================  ============================================================
``2026-11-01``, ``20261101`` (ccusage)     that whole day: ``--since`` from its first moment, ``--until``
                                           up to and including it
``2026-11``                                that whole month, the same way
``2026-11-01T09:00``, ``2026-11-01 09:00``  that moment; local time (or ``report --tz``) unless it says
``…+01:00``, ``…Z``                        otherwise
``30m``, ``12h``, ``7d``, ``2w`` (``s``)    that long before now: ``7d`` is 168 hours ago
``today``, ``yesterday``                   that whole day
``this-week``, ``this-month``, ``last-month``  from Monday / the 1st; a month as a whole
=========================================  ============================================================

Pure: the clock (``now_ns``) and the zone days are cut in are passed in, so the same text and clock always
give the same nanoseconds. A text names a stretch of time (a day, a month, or one instant); a lower bound is
its first moment, an upper bound the moment just after it, so ``--since X --until X`` is all of ``X``.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta, timezone, tzinfo

from ..common.errors import ConfigError

__all__ = ["FORMS", "local_time", "parse_moment", "parse_span", "parse_window"]

FORMS = (
    "a date (2026-11-01 or 20261101), a month (2026-11), a datetime (2026-11-01T09:00, …+01:00, …Z), "
    "a time ago (30m, 12h, 7d, 2w), today, yesterday, this-week, this-month or last-month"
)

_AGO = re.compile(r"(\d{1,9})\s*([smhdw])")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400}
_COMPACT_DATE = re.compile(r"(\d{4})(\d{2})(\d{2})")  # ccusage's --since 20250525
_MONTH = re.compile(r"\d{4}-\d{2}")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def parse_moment(
    text: str, *, now_ns: int, zone: tzinfo | None = None, end: bool = False, name: str = "a moment"
) -> int:
    """A lower (``end=False``) or upper (``end=True``, exclusive) bound in Unix nanoseconds.

    Args:
        text: Any form of the grammar (module docstring).
        now_ns: The clock: what ``7d`` and ``today`` count from.
        zone: The zone days and datetimes without an offset are read in; ``None`` is the local zone.
        end: An upper bound: the moment just after what ``text`` names (a day: the next day's start).
        name: The flag or setting, for the error (``--since``).

    Raises:
        ConfigError: ``text`` is none of the forms; the message names them all.
    """
    first, after = parse_span(text, now_ns=now_ns, zone=zone, name=name)
    return after if end else first


def parse_window(
    since: str | None, until: str | None, *, now_ns: int, zone: tzinfo | None = None
) -> tuple[int | None, int | None]:
    """The ``--since``/``--until`` pair as Unix nanoseconds (``None`` where a flag is not given).

    A window that ends before it starts is a mistake in the command, not an empty answer: a report or replay over it
    would say "no sessions" and send the user looking for missing data.

    Raises:
        ConfigError: Either moment is none of the forms, or ``--until`` is not after ``--since``.
    """
    since_ns = parse_moment(since, now_ns=now_ns, zone=zone, name="--since") if since else None
    until_ns = parse_moment(until, now_ns=now_ns, zone=zone, end=True, name="--until") if until else None
    if since_ns is not None and until_ns is not None and until_ns <= since_ns:
        raise ConfigError(
            f"--since {since!r} is not before --until {until!r}: nothing lies between them (swap the two?)"
        )
    return since_ns, until_ns


def parse_span(
    text: str, *, now_ns: int, zone: tzinfo | None = None, name: str = "a moment"
) -> tuple[int, int]:
    """The stretch of time ``text`` names, as ``(first, after)`` Unix nanoseconds (equal for an instant).

    Raises:
        ConfigError: ``text`` is none of the forms.
    """
    value = text.strip().lower()
    try:
        span = _span(value, now_ns, zone)
    except (ValueError, OverflowError, OSError):  # 2026-02-30, year 0, a date past 9999
        span = None
    if span is None:
        raise ConfigError(f"Expected {name} to be {FORMS}, got {text!r}")
    return span


def _span(value: str, now_ns: int, zone: tzinfo | None) -> tuple[int, int] | None:
    if match := _AGO.fullmatch(value):
        instant = now_ns - int(match.group(1)) * _UNIT_S[match.group(2)] * 1_000_000_000
        return instant, instant
    today = local_time(now_ns, zone).date()
    days = _days(value, today)
    if days is not None:
        first, last = days
        return _start_of(first, zone), _start_of(last + timedelta(days=1), zone)
    if not any(c.isdigit() for c in value):
        return None
    if value.endswith("z"):  # Python 3.10's fromisoformat does not accept "Z"
        value = value[:-1] + "+00:00"
    moment = datetime.fromisoformat(value.upper())
    if moment.tzinfo is None:
        moment = moment.astimezone() if zone is None else moment.replace(tzinfo=zone)
    instant = (moment - _EPOCH) // timedelta(microseconds=1) * 1_000
    return instant, instant


def _days(value: str, today: date) -> tuple[date, date] | None:
    """The first and last day of a day-sized form, or ``None`` when ``value`` is not one."""
    if value == "today":
        return today, today
    if value == "yesterday":
        day = today - timedelta(days=1)
        return day, day
    if value == "this-week":
        return today - timedelta(days=today.weekday()), today
    if value == "this-month":
        return today.replace(day=1), _month_end(today)
    if value == "last-month":
        last = today.replace(day=1) - timedelta(days=1)
        return last.replace(day=1), last
    if match := _COMPACT_DATE.fullmatch(value):
        day = date(int(match.group(1)), int(match.group(2)), int(match.group(3)))
        return day, day
    if _MONTH.fullmatch(value):
        first = date.fromisoformat(value + "-01")
        return first, _month_end(first)
    if _DATE.fullmatch(value):
        day = date.fromisoformat(value)
        return day, day
    return None


def _month_end(day: date) -> date:
    following = (day.replace(day=28) + timedelta(days=4)).replace(day=1)
    return following - timedelta(days=1)


def local_time(time_ns: int, zone: tzinfo | None) -> datetime:
    """A moment as an aware datetime in ``zone`` (the local zone when ``None``)."""
    seconds = time_ns / 1e9
    return (
        datetime.fromtimestamp(seconds).astimezone()
        if zone is None
        else datetime.fromtimestamp(seconds, zone)
    )


def _start_of(day: date, zone: tzinfo | None) -> int:
    """A day's first moment in ``zone`` (local when ``None``), in Unix nanoseconds."""
    naive = datetime(day.year, day.month, day.day)
    aware = naive.astimezone() if zone is None else naive.replace(tzinfo=zone)
    return int(aware.timestamp()) * 1_000_000_000
