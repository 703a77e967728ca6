"""The daemon's parts in-process: a followed file, the tracker and the housekeeping over real CLI captures, with a
list standing in for the outbox (the only fake: delivery is what we decide to acknowledge, in what order).

What is checked is the resume model itself: every span a log implies is put out exactly once across restarts from
any acknowledged point, acknowledgements out of order never move a checkpoint past an undelivered batch, a settled
log is forgotten by the tracker and found again by its stat alone, and the idle rules run on the monotonic clock
(a wall-clock step, seen as a log whose mtime is an hour off, closes nothing).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest

from copilot_otel.common.ratelimit import RateLimitedLog
from copilot_otel.daemon.followed import FollowedFile, Shared
from copilot_otel.daemon.housekeeping import Housekeeping
from copilot_otel.daemon.state import Checkpoint, StateStore
from copilot_otel.daemon.tracker import Tracker
from copilot_otel.deliver.outbox import Marker
from copilot_otel.deliver.route import RateLimitedDrops, Router
from copilot_otel.loop.agentloop import FoldSettings
from copilot_otel.model.activity import Detection, PromptRun, Record
from copilot_otel.model.records import LogRecord, SpanRecord
from copilot_otel.pipeline import Pipeline
from copilot_otel.settings.config import Backfill
from copilot_otel.settings.content import ContentPolicy
from copilot_otel.sources.sessions import SessionFile
from copilot_otel.sources.tail import FileTailer

from .conftest import CLI_GENERATED, FIXTURES
from .test_fixture_shapes import FEATURE_SHAPES

SETTINGS = FoldSettings(content=ContentPolicy())


class ListOutbox:
    """What the outbox is to a followed file: batches of records, each followed by its marker."""

    def __init__(self) -> None:
        self.batches: list[tuple[list[SpanRecord | LogRecord], Marker]] = []

    def put(self, records: list[SpanRecord | LogRecord], marker: Marker, live: bool) -> None:
        self.batches.append((list(records), marker))

    def spans(self) -> list[SpanRecord]:
        return [r for records, _ in self.batches for r in records if isinstance(r, SpanRecord)]


class Heard:
    def __init__(self) -> None:
        self.records: list[Record] = []

    def on_record(self, f: FollowedFile, record: Record) -> list[SpanRecord | LogRecord]:
        assert isinstance(record, (Detection, PromptRun))
        self.records.append(record)
        return []


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _shared(outbox: ListOutbox) -> Shared:
    log = RateLimitedLog(logging.getLogger("test"))
    router = Router(None, logs_enabled=True, say=RateLimitedDrops(log))
    return Shared(SETTINGS, Backfill("all"), router, outbox, Heard(), log)


def _replayed(path: Path) -> list[SpanRecord]:
    """What replay makes of the whole log (the reference)."""
    pipeline = Pipeline(path.parent.name, SETTINGS)
    spans = [
        e
        for step in pipeline.feed_blob(path.read_bytes())
        for e in step.emissions
        if isinstance(e, SpanRecord)
    ]
    spans += [e for e in pipeline.close("file_ended").emissions if isinstance(e, SpanRecord)]
    return spans


def _key(span: SpanRecord) -> tuple[Any, ...]:
    return (span.trace_id, span.span_id, span.name, span.start_ns, span.end_ns, span.status)


def _session(tmp_path: Path, name: str) -> tuple[Path, list[bytes]]:
    source = CLI_GENERATED / name / "events.jsonl"
    if not source.exists():  # the real CLI's agent-loop feature captures (tests/realcli/shapes.py)
        source = FIXTURES / "cli-shapes" / name / "events.jsonl"
    folder = tmp_path / "session-state" / source.parent.name
    folder.mkdir(parents=True)
    return folder / "events.jsonl", source.read_bytes().splitlines(keepends=True)


@pytest.mark.parametrize("name", ["multi-tool", "subagent", "resumed", "failing-tool", *FEATURE_SHAPES])
def test_restarts_from_every_acknowledged_point_put_out_each_span_once(tmp_path: Path, name: str) -> None:
    """Written line by line, read after each line; a restart from each checkpoint the acknowledgements allowed,
    with the un-acknowledged batches lost as a crash would lose them: the spans put out after the restart plus
    those acknowledged before are exactly replay's, none twice."""
    path, lines = _session(tmp_path, name)
    path.write_bytes(b"")
    outbox = ListOutbox()
    f = FollowedFile(SessionFile.from_path(path), FileTailer(path), _shared(outbox), live=True)
    with path.open("ab") as out:
        for line in lines:
            out.write(line)
            out.flush()
            f.read(1 << 20)
    expected = sorted(map(_key, _replayed(path)))
    assert sorted(map(_key, outbox.spans())) == expected  # live, line by line == replay
    for cut in range(1, len(outbox.batches) + 1):
        delivered = outbox.batches[:cut]
        marker = delivered[-1][1]
        checkpoint = Checkpoint(marker.identity, marker.safe_offset, marker.offset, marker.context)
        again = ListOutbox()
        restarted = FollowedFile(
            SessionFile.from_path(path),
            FileTailer(path, offset=checkpoint.safe_offset, identity=checkpoint.identity),
            _shared(again),
            context=checkpoint.context,
            suppress_until=checkpoint.acked_offset,
            live=True,
        )
        restarted.read(1 << 30)
        before = [_key(r) for records, _ in delivered for r in records if isinstance(r, SpanRecord)]
        after = [_key(s) for s in again.spans()]
        assert not set(before) & set(after), f"re-sent after a restart at batch {cut}"
        if restarted.fold is not None:  # what the end of the file closes, as replay closes it
            after += [
                _key(e) for e in restarted.fold.close("file_ended").emissions if isinstance(e, SpanRecord)
            ]
        assert sorted(before + after) == expected, f"restart at batch {cut}"


def test_acknowledgements_out_of_order_move_the_checkpoint_in_order(tmp_path: Path) -> None:
    path, lines = _session(tmp_path, "multi-tool")
    path.write_bytes(b"".join(lines))
    outbox = ListOutbox()
    f = FollowedFile(SessionFile.from_path(path), FileTailer(path), _shared(outbox), live=True)
    for _ in range(50):
        f.read(4096)  # many small batches, each with its marker
    markers = [m for _, m in outbox.batches]
    assert len(markers) >= 3
    assert list(f.acked(markers[2])) == []  # 1 and 2 are not delivered yet: nothing may move
    assert [m.seq for m in f.acked(markers[0])] == [1]
    assert [m.seq for m in f.acked(markers[1])] == [2, 3]
    assert not f.all_acked or len(markers) == 3


def _tracker(tmp_path: Path, outbox: ListOutbox, clock: Clock) -> Tracker:
    state = StateStore(tmp_path / "state")
    shared = _shared(outbox)

    def follow(session: SessionFile, checkpoint: Checkpoint | None) -> FollowedFile:
        if checkpoint is None:
            return FollowedFile(session, FileTailer(session.path), shared, live=True, clock=clock)
        tailer = FileTailer(session.path, offset=checkpoint.safe_offset, identity=checkpoint.identity)
        return FollowedFile(
            session,
            tailer,
            shared,
            context=checkpoint.context,
            suppress_until=checkpoint.acked_offset,
            live=True,
            clock=clock,
        )

    return Tracker(state, follow, max_open_files=1024, log=shared.log, clock=clock)


def _scan_of(path: Path) -> dict[str, int]:
    """What discovery's scan reports of one log."""
    st = os.stat(path)
    return {str(path): hash((st.st_ino, st.st_size, st.st_mtime_ns))}


def _drain(tracker: Tracker, outbox: ListOutbox) -> None:
    """Read everything pending and acknowledge every batch (a collector that accepts all)."""
    while tracker.pending:
        live, history = tracker.work()
        for f in [*live, *history]:
            tracker.read(f, 1 << 20)
    tracker.apply_acks([m for _, m in outbox.batches])
    outbox.batches.clear()


def test_a_settled_log_is_forgotten_and_found_again_by_its_stat(tmp_path: Path) -> None:
    clock = Clock()
    path, lines = _session(tmp_path, "plain-question")
    path.write_bytes(b"".join(lines))
    outbox = ListOutbox()
    tracker = _tracker(tmp_path, outbox, clock)
    tracker.scan(_scan_of(path))
    _drain(tracker, outbox)
    clock.now += 3600  # an hour later (monotonic): quiet, descriptor closed, nothing in flight
    tracker.settle(clock.now)
    assert not tracker.files and len(tracker) == 1  # known by its stat only: no tailer, no fold
    tracker.scan(_scan_of(path))
    assert not tracker.files and not tracker.pending  # unchanged: not even opened
    with path.open("ab") as out:
        out.write(lines[-1])  # the CLI appends (an event repeated: any line will do)
    tracker.scan(_scan_of(path))
    assert str(path) in tracker.files and tracker.pending  # changed: followed again, from its checkpoint
    f = tracker.files[str(path)]
    assert f.tailer.offset == len(b"".join(lines))  # resumed at the acknowledged end, not read from 0
    tracker.state.close()


def test_a_restart_knows_settled_logs_without_opening_them(tmp_path: Path) -> None:
    clock = Clock()
    path, lines = _session(tmp_path, "plain-question")
    path.write_bytes(b"".join(lines))
    outbox = ListOutbox()
    tracker = _tracker(tmp_path, outbox, clock)
    tracker.scan(_scan_of(path))
    _drain(tracker, outbox)
    tracker.state.flush()
    tracker.state.close()
    again = _tracker(tmp_path, ListOutbox(), clock)
    again.restore()
    again.scan(_scan_of(path))
    assert again.resumed == 1 and not again.files and not again.pending  # no tailer was made: nothing opened


@pytest.mark.parametrize("step_s", [3600.0, -3600.0])
def test_a_wall_clock_step_closes_no_live_prompt(tmp_path: Path, step_s: float) -> None:
    """The old rule compared the wall clock with the log's mtime: a forward step of an hour closed a live prompt
    as idle_timeout after 20 s of silence. Now an open prompt idles on the monotonic clock only."""
    clock = Clock()
    path, lines = _session(tmp_path, "multi-tool")
    split = next(i for i, line in enumerate(lines) if b'"assistant.turn_start"' in line) + 1
    path.write_bytes(b"".join(lines[:split]))  # the prompt is open, mid-turn
    (path.parent / f"inuse.{os.getpid()}.lock").write_text("")  # its CLI runs (this process stands in for it)
    outbox = ListOutbox()
    tracker = _tracker(tmp_path, outbox, clock)
    tracker.scan(_scan_of(path))
    _drain(tracker, outbox)
    f = tracker.files[str(path)]
    assert f.has_open_prompt
    st = os.stat(path)
    # The wall clock steps: to the daemon the log now looks an hour old (or an hour in the future).
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - int(step_s * 1e9)))
    clock.now += 20  # 20 s of silence by the monotonic clock
    Housekeeping(tracker, idle_timeout_s=600, clock=clock).close_abandoned()
    assert f.has_open_prompt, "a wall-clock step closed a live prompt"
    with path.open("ab") as out:
        out.write(b"".join(lines[split:]))
    tracker.changed([str(path)])
    _drain(tracker, outbox)
    heard = f.shared.listener
    assert isinstance(heard, Heard)
    outcomes = [r.outcome for r in heard.records if isinstance(r, PromptRun)]
    reference = Pipeline(path.parent.name, SETTINGS)
    replay_outcomes = [
        r.outcome
        for step in reference.feed_blob(path.read_bytes())
        for r in step.records
        if isinstance(r, PromptRun)
    ]
    assert outcomes == replay_outcomes and "idle_timeout" not in outcomes


def test_an_open_prompt_idles_out_on_the_monotonic_clock(tmp_path: Path) -> None:
    clock = Clock()
    path, lines = _session(tmp_path, "multi-tool")
    split = next(i for i, line in enumerate(lines) if b'"assistant.turn_start"' in line) + 1
    path.write_bytes(b"".join(lines[:split]))
    (path.parent / f"inuse.{os.getpid()}.lock").write_text(
        ""
    )  # its CLI runs: only the idle rule can close it
    outbox = ListOutbox()
    tracker = _tracker(tmp_path, outbox, clock)
    tracker.scan(_scan_of(path))
    _drain(tracker, outbox)
    f = tracker.files[str(path)]
    housekeeping = Housekeeping(tracker, idle_timeout_s=600, clock=clock)
    clock.now += 599
    housekeeping.close_abandoned()
    assert f.has_open_prompt
    clock.now += 2
    housekeeping.close_abandoned()
    assert not f.has_open_prompt
    heard = f.shared.listener
    assert isinstance(heard, Heard)
    closed = [r for r in heard.records if isinstance(r, PromptRun)]
    assert [r.incomplete_reason for r in closed] == ["idle_timeout"]
