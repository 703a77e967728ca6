"""The first start over a history without checkpoints: followed a batch at a time, read in order, each log once.

A first start over 100,000 sessions once followed every log at once (a tailer and a fold each, ~12 KB, and memory
the process kept afterwards) and sorted every pending log at every loop pass (228 s of CPU at 100,000 sessions,
more than linear). The tracker now keeps the history waiting as paths, follows :data:`ADMIT_BATCH` at a time, and
hands out the pending history from an ordered queue. What is checked here is the algorithm (how many logs are
followed at once, in which order they are read, how many a pass touches), over real CLI captures and the real
tracker; the speed itself is the benchmark's (``benchmarks/run.py --only-daemon "first start"``).
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import pytest

from copilot_otel.daemon.followed import FollowedFile
from copilot_otel.daemon.housekeeping import BackfillProgress
from copilot_otel.daemon.state import Checkpoint, StateStore
from copilot_otel.daemon.tracker import ADMIT_BATCH, Tracker
from copilot_otel.sources.sessions import SessionFile
from copilot_otel.sources.tail import FileTailer
from tests.conftest import CLI_GENERATED
from tests.daemon_process import DaemonProcess, assert_delivered_like_replay
from tests.otlp_receiver import OtlpReceiver
from tests.test_followed import Clock, ListOutbox, _shared

TEMPLATE_ID = b"0a000001-0000-4000-8000-000000000001"  # the session id of the plain-question capture


def _history(root: Path, sessions: int) -> list[Path]:
    """``sessions`` copies of the real plain-question capture, each under its own session id, two days old."""
    template = (CLI_GENERATED / "plain-question" / "events.jsonl").read_bytes()
    assert TEMPLATE_ID in template
    old = time.time() - 2 * 86400
    paths = []
    for i in range(sessions):
        sid = f"0f{i:06d}-0000-4000-8000-000000000000"
        path = root / sid / "events.jsonl"
        path.parent.mkdir(parents=True)
        path.write_bytes(template.replace(TEMPLATE_ID, sid.encode()))
        os.utime(path, (old, old))
        paths.append(path)
    return paths


def _stats(paths: list[Path]) -> dict[str, int]:
    """What discovery's scan reports of these logs."""
    stats = {}
    for path in paths:
        st = os.stat(path)
        stats[str(path)] = hash((st.st_ino, st.st_size, st.st_mtime_ns))
    return stats


def _history_tracker(tmp_path: Path, outbox: ListOutbox, clock: Clock) -> Tracker:
    """The real tracker, following new logs as the daemon follows old history (not live, two days quiet), and
    letting every new log wait its turn (the daemon's policy for history it reads whole)."""
    shared = _shared(outbox)

    def follow(session: SessionFile, checkpoint: Checkpoint | None) -> FollowedFile:
        assert checkpoint is None
        return FollowedFile(
            session, FileTailer(session.path), shared, live=False, idle_for_s=2 * 86400, clock=clock
        )

    return Tracker(
        StateStore(tmp_path / "state"),
        follow,
        max_open_files=1024,
        log=shared.log,
        clock=clock,
        waits=lambda key: True,
    )


def test_history_without_checkpoints_is_followed_a_batch_at_a_time(tmp_path: Path) -> None:
    sessions = ADMIT_BATCH * 3 + 17
    paths = _history(tmp_path / "session-state", sessions)
    outbox, clock = ListOutbox(), Clock()
    tracker = _history_tracker(tmp_path, outbox, clock)
    tracker.scan(_stats(paths))
    # Found, not followed: paths only, and counted (status and the progress line see them).
    assert not tracker.files and tracker.waiting == sessions and len(tracker) == sessions
    most_followed, passes, read = 0, 0, []
    while tracker.pending or tracker.waiting:
        live, history = tracker.work()
        assert not live
        most_followed = max(most_followed, len(tracker.files))
        for f, _ in zip(history, range(40), strict=False):  # a slice: the pass ends after some reads
            tracker.read(f, 1 << 20)
            read.append(f.key)
        clock.now += 1.0
        tracker.apply_acks([m for _, m in outbox.batches])  # delivered: settled history is forgotten
        del outbox.batches[:]
        passes += 1
    assert most_followed == ADMIT_BATCH  # never the whole history at once
    assert sorted(read) == sorted(map(str, paths))  # every log read, each once (a small log: one read)
    assert not tracker.files and tracker.waiting == 0 and len(tracker) == sessions  # all known by their stat
    assert passes == -(-sessions // 40)
    tracker.state.close()


def test_the_history_is_read_least_recently_read_first_and_a_pass_touches_what_it_reads(
    tmp_path: Path,
) -> None:
    """A big log read a MiB a pass goes behind the others each time; files handed out but not read (the slice
    ended) keep their place; a pass reads each file at most once."""
    paths = _history(tmp_path / "session-state", 5)
    big = paths[2]
    chunk = big.read_bytes()
    with big.open("ab") as out:
        for _ in range(3 * (1 << 20) // len(chunk) + 1):  # > 3 MiB: four reads of a MiB
            out.write(chunk.replace(TEMPLATE_ID, b"0f000002-0000-4000-8000-000000000000"))
    outbox, clock = ListOutbox(), Clock()
    tracker = _history_tracker(tmp_path, outbox, clock)
    tracker.scan(_stats(paths))
    order: list[list[str]] = []
    for limit in (2, 1, 10, 10, 10, 10):
        _, history = tracker.work()
        took: list[str] = []
        for f in history:
            if len(took) == limit:
                break  # the slice is over: this one was handed out, not read
            clock.now += 0.001
            tracker.read(f, 1 << 20)
            took.append(Path(f.key).parent.name[:8])
        order.append(took)
    assert not tracker.pending
    n = [p.parent.name[:8] for p in paths]
    # Pass 1 reads 0 and 1 and hands out 2, which keeps its place; pass 2 reads 2 (a MiB of it) and hands out 3;
    # pass 3 reads 3 and 4, which were read less recently than 2, then 2 again; then 2 alone until its end.
    assert order == [[n[0], n[1]], [n[2]], [n[3], n[4], n[2]], [n[2]], [n[2]], []]
    tracker.state.close()


def test_the_progress_line_counts_the_history_still_waiting(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    progress = BackfillProgress(clock)
    progress.add("a")
    progress.finished("a")  # the first batch is read; 300 more are waiting to be followed
    clock.now += 10
    with caplog.at_level(logging.INFO, logger="copilot_otel.daemon"):
        progress.report(waiting=300)
        assert [r.getMessage() for r in caplog.records] == ["backfill: 1 of 301 sessions read, 0 spans"]
        progress.add("b")
        progress.finished("b")
        progress.report(waiting=0)
    assert caplog.records[-1].getMessage().startswith("backfill done: 2 sessions")


def test_a_first_start_over_more_history_than_a_batch_exports_it_all_like_replay(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    """The daemon end to end: more sessions than a batch, every span delivered as replay makes it, and the
    "backfill done" line counts every session (not the first batch)."""
    root = tmp_path / "session-state"
    paths = _history(root, ADMIT_BATCH + 40)
    log = tmp_path / "daemon.log"
    d = DaemonProcess(root, tmp_path / "state", receiver.http_endpoint, log).start()
    try:
        assert_delivered_like_replay(receiver, paths, tmp_path, timeout=120)
        d.until("backfill done line", lambda: "backfill done" in d.output(), 60)
    finally:
        assert d.terminate() == 0
    said = [line for line in d.output().splitlines() if "backfill done" in line]
    assert len(said) == 1 and f"backfill done: {len(paths)} sessions" in said[0], said
