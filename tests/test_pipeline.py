"""``Pipeline.feed_blob`` (replay, ``show``, the library) folds a log exactly as ``feed`` does line by line (the
daemon): the same steps, drops, records and emissions, and the same counters, on every fixture log with the
lines a real log can hold besides events (blank, CRLF-blank, torn, not UTF-8, not an object, no type, too
long, an unterminated last line). ``feed_blob`` only leaves out the steps that completed nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from copilot_otel.pipeline import MAX_LINE_BYTES, Pipeline, Step, split_lines
from tests.conftest import FIXTURES, all_fixture_logs
from tests.test_one_path import BAD_LINES

LOGS = all_fixture_logs() + sorted((FIXTURES / "cli-shapes").glob("*/events.jsonl"))


def _hostile(data: bytes) -> bytes:
    lines = data.splitlines(keepends=True)
    too_long = b'{"type":"x","data":"' + b"a" * MAX_LINE_BYTES + b'"}\n'
    torn_tail = b'{"type":"assistant.turn_start","data":{"turnId":"9"'  # no newline: the file ends mid-line
    return b"".join(lines[:3]) + b"".join(BAD_LINES) + too_long + b"".join(lines[3:]) + torn_tail


def _by_line(blob: bytes, session_id: str) -> tuple[list[Step], Pipeline]:
    pipeline = Pipeline(session_id)
    steps = [step for item in split_lines(blob) if (step := pipeline.feed(item)) != Step()]
    return steps, pipeline


@pytest.mark.parametrize("log", LOGS, ids=[f"{p.parent.name}/{p.name}" for p in LOGS])
def test_feed_blob_folds_as_feed_does(log: Path) -> None:
    blob = _hostile(log.read_bytes())
    expected, by_line = _by_line(blob, "s")
    whole = Pipeline("s")
    got = list(whole.feed_blob(blob))
    assert got == expected
    assert [s.drop.reason.value for s in got if s.drop] == [s.drop.reason.value for s in expected if s.drop]
    assert any(s.drop and s.drop.reason.value == "too_long" for s in got)
    assert (whole.lines, whole.events, whole.line_number) == (
        by_line.lines,
        by_line.events,
        by_line.line_number,
    )
    assert whole.close("file_ended") == by_line.close("file_ended")
