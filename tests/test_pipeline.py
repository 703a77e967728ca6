"""The readers of a whole log (replay, ``show``, the library) fold it exactly as the daemon does line by line:
``Pipeline.feed_file`` (the log read in chunks), ``feed_chunks`` (the log cut anywhere, down to one byte a chunk)
and ``feed_blob`` give the same steps, drops, records and emissions, and the same counters, as ``feed`` over the
tailer's lines, on every fixture log with the lines a real log can hold besides events (blank, CRLF-blank, a CRLF
event, torn, not UTF-8, not an object, no type, too long, an unterminated last line). They only leave out the
steps that completed nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from copilot_otel.common.errors import SourceError
from copilot_otel.pipeline import MAX_LINE_BYTES, Pipeline, Step, split_lines
from copilot_otel.sources.tail import FileTailer, TailItem
from tests.conftest import FIXTURES, all_fixture_logs
from tests.test_one_path import BAD_LINES

LOGS = all_fixture_logs() + sorted((FIXTURES / "cli-shapes").glob("*/events.jsonl"))


# Reads of the daemon's tailer in the reference: small, so its lines straddle reads too.
TAILER_CHUNK_BYTES = 4_096
# A run without a newline longer than this (the too-long line) is cut near its ends only: a 16 MiB line in
# one-byte chunks would take minutes, and what matters is that it begins and ends in tiny chunks.
LONG_RUN_BYTES = 65_536


def _hostile(data: bytes) -> bytes:
    lines = data.splitlines(keepends=True)
    too_long = b'{"type":"x","data":"' + b"a" * MAX_LINE_BYTES + b'"}\n'
    torn_tail = b'{"type":"assistant.turn_start","data":{"turnId":"9"'  # no newline: the file ends mid-line
    crlf = lines[3].rstrip(b"\n") + b"\r\n"  # an event written with a Windows line end
    return b"".join(lines[:3]) + b"".join(BAD_LINES) + too_long + crlf + b"".join(lines[4:]) + torn_tail


def _tailed(path: Path) -> list[TailItem]:
    """The daemon's framing: the tailer's batches to the end of the file, then the last line without a newline
    (which the daemon folds once the file has gone quiet)."""
    items: list[TailItem] = []
    with FileTailer(path, read_chunk_bytes=TAILER_CHUNK_BYTES) as tailer:
        while True:
            batch = tailer.read_lines()
            items.extend(batch.lines)
            if batch.at_eof:
                break
        last = tailer.read_unterminated()
        if last is not None:
            items.append(last)
    return items


def _by_line(items: list[TailItem], session_id: str) -> tuple[list[Step], Pipeline]:
    pipeline = Pipeline(session_id)
    steps = [step for item in items if (step := pipeline.feed(item)) != Step()]
    return steps, pipeline


def _pieces(blob: bytes, size: int) -> Iterator[bytes]:
    """``blob`` cut every ``size`` bytes, so that lines straddle chunk boundaries everywhere (a ``\r`` and its
    ``\n`` in two chunks, a line in many); a run of more than :data:`LONG_RUN_BYTES` without a newline is
    crossed in one piece that stops ``size`` bytes before the run's end."""
    pos = 0
    while pos < len(blob):
        newline = blob.find(b"\n", pos)
        run = (len(blob) if newline < 0 else newline) - pos
        step = run - size if run > max(LONG_RUN_BYTES, 2 * size) else size
        yield blob[pos : pos + step]
        pos += step


@pytest.fixture(scope="module", params=LOGS, ids=[f"{p.parent.name}/{p.name}" for p in LOGS])
def hostile(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fixture log with every kind of non-event line written into it, on disk."""
    log: Path = request.param
    path = tmp_path_factory.mktemp("hostile") / "events.jsonl"
    path.write_bytes(_hostile(log.read_bytes()))
    return path


def _assert_same_fold(got: list[Step], whole: Pipeline, expected: list[Step], by_line: Pipeline) -> None:
    assert got == expected
    assert [s.drop.reason.value for s in got if s.drop] == [s.drop.reason.value for s in expected if s.drop]
    assert any(s.drop and s.drop.reason.value == "too_long" for s in got)
    assert (whole.lines, whole.events, whole.line_number) == (
        by_line.lines,
        by_line.events,
        by_line.line_number,
    )
    assert whole.close("file_ended") == by_line.close("file_ended")


def test_split_lines_frames_as_the_tailer_does(hostile: Path) -> None:
    """``split_lines`` (the reference of tools and tests) gives the daemon's items, the unterminated line too."""
    assert list(split_lines(hostile.read_bytes())) == _tailed(hostile)


def test_feed_blob_folds_as_feed_does(hostile: Path) -> None:
    expected, by_line = _by_line(_tailed(hostile), "s")
    whole = Pipeline("s")
    got = list(whole.feed_blob(hostile.read_bytes()))
    _assert_same_fold(got, whole, expected, by_line)


@pytest.mark.parametrize("size", [1, 2, 7, 64, 4_096])
def test_feed_chunks_folds_as_feed_does_however_the_log_is_cut(hostile: Path, size: int) -> None:
    expected, by_line = _by_line(_tailed(hostile), "s")
    streamed = Pipeline("s")
    got = list(streamed.feed_chunks(_pieces(hostile.read_bytes(), size)))
    _assert_same_fold(got, streamed, expected, by_line)


def test_feed_file_folds_as_feed_does(hostile: Path) -> None:
    """What replay, ``show`` and the library read: the file in chunks (small here, so lines straddle reads)."""
    expected, by_line = _by_line(_tailed(hostile), "s")
    streamed = Pipeline("s")
    got = list(streamed.feed_file(hostile, chunk_bytes=4_093))
    _assert_same_fold(got, streamed, expected, by_line)


@pytest.mark.parametrize("size", [7, 1 << 20])
def test_the_length_limit_holds_across_chunks(tmp_path: Path, size: int) -> None:
    """A line of exactly the limit is read (here: not JSON), one byte more is ``too_long``, whether it ends
    with its newline or with the log, however many chunks it spans: as the tailer frames them."""
    event = (
        b'{"type":"session.info","data":{"message":"m"},"id":"e1","timestamp":"2026-01-01T00:00:00.000Z"}\n'
    )
    at_limit, over = b"x" * MAX_LINE_BYTES, b"x" * (MAX_LINE_BYTES + 1)
    path = tmp_path / "events.jsonl"
    path.write_bytes(event + at_limit + b"\n" + over + b"\n" + event + over)
    expected, by_line = _by_line(_tailed(path), "s")
    streamed = Pipeline("s")
    got = list(streamed.feed_chunks(_pieces(path.read_bytes(), size)))
    assert [s.drop.reason.value for s in got if s.drop] == ["invalid_json", "too_long", "too_long"]
    assert got == expected
    assert (
        (streamed.lines, streamed.events, streamed.line_number)
        == (5, 2, 5)
        == (
            by_line.lines,
            by_line.events,
            by_line.line_number,
        )
    )


def test_a_log_that_cannot_be_read_is_a_source_error(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="cannot read"):
        list(Pipeline("s").feed_file(tmp_path / "gone.jsonl"))
