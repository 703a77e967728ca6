"""Test helpers for the other sources' readers: a file's views, and mutated copies of real lines.

A reader must return a view or a ``BadLine`` for every mutation (every value replaced by every wrong JSON type),
and every field and property of the view must read without raising, a field as its declared type or ``None``.
"""

from __future__ import annotations

import inspect
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from copilot_otel.model.inputs import Event
from copilot_otel.model.records import BadLine, RecordBase
from copilot_otel.sources import read_blob
from copilot_otel.sources.fields import Field

LineReader = Callable[[bytes, int, int, int], Event | BadLine]

WRONG: list[Any] = [None, True, 0, -1.5, 2**60, "", "x", [], [None, 1], {}, {"type": 1, "text": 2}]
# Lines kept per record kind: their shapes repeat, and a codex session_meta line is 40 KB.
PER_KIND = 3


def views(path: Path, read_line: LineReader) -> list[Event]:
    """Every line of a real fixture read as a view (they have no bad line)."""
    out = []
    for item in read_blob(path.read_bytes(), read_line):
        assert isinstance(item, Event), item
        out.append(item)
    return out


def _kind(obj: dict[str, Any]) -> str:
    payload = obj.get("payload")
    inner = payload.get("type") if isinstance(payload, dict) else None
    return f"{obj.get('type')}.{inner}.{obj.get('subtype')}"


def _mutations(obj: dict[str, Any]) -> Iterator[Any]:
    """``obj`` with one value replaced, at each of its first three levels, by each wrong value."""
    for key, value in obj.items():
        for wrong in WRONG:
            yield {**obj, key: wrong}
        if isinstance(value, dict):
            for inner in _mutations(value) if len(orjson.dumps(value)) < 20_000 else iter(()):
                yield {**obj, key: inner}
        if isinstance(value, list):
            for i, item in enumerate(value[:3]):
                for wrong in WRONG:
                    yield {**obj, key: [*value[:i], wrong, *value[i + 1 :]]}
                if isinstance(item, dict):
                    for inner in _mutations(item):
                        yield {**obj, key: [*value[:i], inner, *value[i + 1 :]]}


def _read_all(view: object, records: tuple[type[RecordBase], ...]) -> int:
    """Read every field and property of ``view`` (and of the records they return); the number read."""
    read = 0
    for name, member in inspect.getmembers(type(view)):
        if name.startswith("_") or not isinstance(member, Field | property):
            continue
        value = getattr(view, name)
        read += 1
        if isinstance(member, Field):
            wanted = {"text": str, "count": int, "amount": float, "flag": bool}.get(member.kind)
            if wanted is not None:
                assert value is None or type(value) is wanted, (type(view).__name__, name, value)
        for item in value if isinstance(value, tuple) else (value,):
            if isinstance(item, records):
                read += _read_all(item, records)
    return read


def assert_never_raises(
    lines: list[bytes],
    read_line: LineReader,
    records: list[type[RecordBase]],
) -> None:
    """Each of ``lines`` (up to :data:`PER_KIND` of each kind), mutated every way, cut short, read in full."""
    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for line in lines:
        obj = orjson.loads(line)
        if len(by_kind[_kind(obj)]) < PER_KIND:
            by_kind[_kind(obj)].append(obj)
    variants = 0
    read = 0
    for objs in by_kind.values():
        for obj in objs:
            line = orjson.dumps(obj)
            for cut in (1, len(line) // 2, len(line) - 1):
                assert isinstance(read_line(line[:cut], 0, cut, 1), BadLine)
            for mutated in _mutations(obj):
                view = read_line(orjson.dumps(mutated), 0, 1, 1)
                variants += 1
                if isinstance(view, Event):
                    read += _read_all(view, tuple(records))
    assert variants > 1_000 and read > variants
