"""Property-based tests of the input side: real fixture lines, mutated (issue 22, fuzzing).

Every input starts as a real line of a committed CLI log (``tests/fixtures``), decoded and mutated the ways a
log written by another CLI version, a crash or an attacker could be: a value's type swapped, a number out of
range, a huge string, control characters, invalid UTF-8 bytes, a line cut short. Whatever comes in:

* nothing raises out of :func:`~copilot_otel.sources.copilot.parse.parse_line`, the typed events' fields or the pipeline;
* every line is accounted for: an event, a counted drop with a reason, or a type skipped by its prefix; and a
  value the event's type cannot read (``data`` not an object, a field of the wrong type) is a counted
  ``wrong_shape`` dropped value;
* live equals replay: the lines fed one by one through :meth:`Pipeline.feed` (the daemon) give the same steps
  as the whole file through :meth:`Pipeline.feed_blob` (``replay``).

The seed is fixed (``derandomize``, no example database) and the example counts bounded so the file runs in a
few seconds; the number of inputs tried is printed in the terminal summary (``conftest.FUZZ_INPUTS``).
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from copilot_otel.model.inputs import Event
from copilot_otel.model.records import BadLine, DropReason
from copilot_otel.pipeline import Pipeline, Step, split_lines
from copilot_otel.sources.copilot.events import CLASSES, CopilotEvent
from copilot_otel.sources.copilot.parse import SKIPPED_TYPES, parse_line
from copilot_otel.sources.fields import Field
from tests.conftest import FUZZ_INPUTS, all_fixture_logs

FUZZ = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=2_000,  # about 10 s for the file on a shared 2-core machine
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
HUGE = 200_000  # characters: beyond any real value, well under the pipeline's line limit


@cache
def _real_lines() -> tuple[bytes, ...]:
    """One line of each event type in each fixture log (a few hundred), in a fixed order."""
    seen: dict[tuple[str, str], bytes] = {}
    for path in all_fixture_logs():
        for line in path.read_bytes().splitlines():
            try:
                kind = json.loads(line).get("type")
            except (ValueError, AttributeError):
                continue
            seen.setdefault((path.name, str(kind)), line)
    return tuple(seen.values())


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths of every value inside ``value`` (objects and arrays included)."""
    out = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _leaves(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out += _leaves(item, (*path, index))
    return out


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    value[head] = _replace(value[head], rest, new)
    return value


_CONTROL = st.sampled_from(["\x1b]52;c;aGk=\x07", "\x1b[2J", "\x1b]0;t\x07", "\x00", "\r", "\u2028", "\x9b"])
_REPLACEMENTS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([2**53, -(2**53), 2**63, 2**64, 1e300, -1e300, 0.5, -0.0]),
    st.text(max_size=20),
    st.builds(lambda c, n: c * n, st.sampled_from(["x", "é", "\x1b"]), st.sampled_from([HUGE])),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.none(), max_size=3),
    _CONTROL,
)


@st.composite
def mutated_lines(draw: st.DrawFn) -> bytes:
    """A real line with one to three mutations of its JSON, then maybe of its bytes."""
    line = draw(st.sampled_from(_real_lines()))
    obj = json.loads(line)
    for _ in range(draw(st.integers(1, 3))):
        paths = _leaves(obj)
        path = draw(st.sampled_from(paths))
        old = _get(obj, path)
        if isinstance(old, str) and draw(st.booleans()):
            new: Any = old + draw(_CONTROL)  # control characters inside a real value
        else:
            new = draw(_REPLACEMENTS)
        obj = _replace(obj, path, new)
    data = json.dumps(obj, ensure_ascii=draw(st.booleans())).encode()
    how = draw(st.sampled_from(["as is", "as is", "invalid utf-8", "cut", "cr"]))
    if how == "invalid utf-8":
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80\x80"])) + data[at:]
    elif how == "cut":
        data = data[: draw(st.integers(0, len(data)))]
    elif how == "cr":
        data += b"\r"
    return data


def _get(value: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        value = value[key]
    return value


def _read_every_field(event: Event) -> list[Field[Any]]:
    """What the agent loop could read: every declared field and property of the event's class; returns the
    fields."""
    fields = []
    for cls in type(event).__mro__:
        for name, attr in vars(cls).items():
            if isinstance(attr, Field | property):
                getattr(event, name)
            if isinstance(attr, Field):
                fields.append(attr)
    return fields


def _fits(kind: str, value: Any) -> bool:
    """Whether a field of ``kind`` can read ``value`` (a number out of range counts: it has its own reason)."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    return {
        "text": isinstance(value, str),
        "count": number and (isinstance(value, int) or value.is_integer() or abs(value) >= 2**53),
        "amount": number,
        "flag": isinstance(value, bool),
    }.get(kind, True)


def _raw(event: Event, field: Field[Any]) -> Any:
    value = event.data.get(field.key)
    if field.inner is not None:
        value = value.get(field.inner) if isinstance(value, dict) else None
    return value


@FUZZ
@given(mutated_lines())
def test_parse_and_typed_fields_never_raise_and_every_line_is_accounted_for(line: bytes) -> None:
    FUZZ_INPUTS["parse"] += 1
    result = parse_line(line, 0, len(line) + 1, 1)
    if result is None:
        assert line.startswith(tuple(b'{"type":"' + kind + b'"' for kind in SKIPPED_TYPES))
        return
    if isinstance(result, BadLine):
        assert isinstance(result.reason, DropReason) and result.reason.value
        return
    assert isinstance(result, CLASSES.get(result.type, CopilotEvent))
    fields = _read_every_field(result)
    shapes = [detail for reason, detail in dict.fromkeys(result.dropped) if reason is DropReason.WRONG_SHAPE]
    if type(result) is CopilotEvent:
        return  # a type the loop does not read: nothing of it is lost
    data = orjson.loads(line).get("data")
    if data is not None and not isinstance(data, dict):
        assert any("data is" in detail for detail in shapes), shapes  # its fields all read as absent
        return
    for field in fields:  # a value present but of the wrong type reads as absent: it must be counted
        value = _raw(result, field)
        if value is not None and not _fits(field.kind, value):
            assert any(f" {field.key}" in detail for detail in shapes), (field.key, value, shapes)


def _steps(steps: list[Step]) -> list[tuple[Any, ...]]:
    return [(s.records, s.emissions, s.drop, s.values_dropped) for s in steps if s != Step()]


@settings(FUZZ, max_examples=500)
@given(
    st.lists(mutated_lines(), min_size=1, max_size=12), st.lists(st.sampled_from(_real_lines()), max_size=12)
)
def test_live_equals_replay_over_mutated_logs(mutated: list[bytes], real: list[bytes]) -> None:
    FUZZ_INPUTS["live == replay"] += 1
    lines = [line for pair in zip(real, mutated, strict=False) for line in pair] + mutated[len(real) :]
    blob = b"\n".join(line.replace(b"\n", b" ") for line in lines) + b"\n"
    replayed = Pipeline("fuzz")
    whole = _steps([*replayed.feed_blob(blob), replayed.close("file_ended")])
    live = Pipeline("fuzz")
    one_by_one = _steps([*(live.feed(item) for item in split_lines(blob)), live.close("file_ended")])
    assert one_by_one == whole
    drops = sum(1 for step in whole if step[2] is not None)
    assert (replayed.lines, replayed.events) == (live.lines, live.events)
    assert replayed.lines >= replayed.events + drops  # the rest: types skipped by their prefix, never lost
