"""parse_timestamp: the CLI's own timestamp form is read by a fast path that re-uses the whole second; every
form must give what ``datetime.fromisoformat`` gives, in any order (the fast path's caches must never leak a
neighbour's value)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from copilot_otel.model.timestamps import parse_timestamp

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _reference(text: str) -> int:
    dt = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    delta = dt - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 10**9 + delta.microseconds * 1_000


_MOMENTS = st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(2200, 1, 1))


@st.composite
def _timestamps(draw: st.DrawFn) -> str:
    moment = draw(_MOMENTS)
    digits = draw(st.integers(0, 6))
    fraction = f"{moment.microsecond:06d}"[:digits]
    base = moment.strftime("%Y-%m-%dT%H:%M:%S") + (f".{fraction}" if digits else "")
    suffix = draw(st.sampled_from(["Z", "z", "+00:00", "+05:30", "-08:00", ""]))
    return base + suffix


@given(st.lists(_timestamps(), min_size=1, max_size=20))
def test_every_form_in_any_order_reads_as_fromisoformat(values: list[str]) -> None:
    for value in values:
        assert parse_timestamp(value) == _reference(value), value


def test_events_of_one_second_share_it_and_keep_their_fraction() -> None:
    second = "2026-05-26T16:14:36"
    got = [parse_timestamp(f"{second}.{f}Z") for f in ("213", "2", "999999", "000001", "213")]
    base = _reference(f"{second}Z")
    assert got == [
        base + 213_000_000,
        base + 200_000_000,
        base + 999_999_000,
        base + 1_000,
        base + 213_000_000,
    ]
    assert parse_timestamp("2026-05-26T16:14:37.5Z") == base + 1_500_000_000  # the next second is read anew


@pytest.mark.parametrize(
    "value", ["", "yesterday", "2026-05-26T16:14:36.\u0661\u0662\u0663Z", "2026-13-01T00:00:00Z"]
)
def test_what_is_not_a_timestamp_raises_value_error(value: str) -> None:
    with pytest.raises(ValueError):
        parse_timestamp(value)


def test_a_timestamp_with_more_than_microseconds_is_read_as_fromisoformat_reads_it() -> None:
    value = "2026-05-26T16:14:36.1234567Z"  # 7 digits: not the fast path
    try:
        expected = _reference(value)
    except ValueError:
        with pytest.raises(ValueError):
            parse_timestamp(value)
    else:
        assert parse_timestamp(value) == expected
