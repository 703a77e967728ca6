"""What a backfill tells the user: replay's progress moves as worker processes finish, ``run`` says when the
history is done, and runaways found in the history are one summary line while live ones stay warnings.

Real parts only: the real receiver over a socket, a real ``copilot-otel run`` child process, worker processes.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

import copilot_otel.replay as replay_module
from copilot_otel.replay import Progress, replay
from copilot_otel.settings.config import load_config
from tests.conftest import CLI_GENERATED
from tests.daemon_process import DaemonProcess
from tests.otlp_receiver import OtlpReceiver
from tests.runaway import build_runaway_log, iter_runaway_lines

HOUR_AGO = time.time() - 3600


def _history(root: Path, names: list[str]) -> None:
    for name in names:
        shutil.copytree(CLI_GENERATED / name, root / f"0000{name:0>8}"[:12])
    for log in root.glob("*/events.jsonl"):
        os.utime(log, (HOUR_AGO, HOUR_AGO))


def test_replay_progress_moves_while_workers_are_still_busy(
    tmp_path: Path, receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With worker processes the progress once came only when every worker had finished (``0/?`` meanwhile).

    One worker's first request is held by the collector for 3 s (a ``Retry-After``); the other worker's
    sessions finish meanwhile, and progress must be reported for them while that request is still held.
    """
    root = tmp_path / "session-state"
    _history(root, ["multi-tool", "failing-tool", "subagent", "resumed", "plain-question", "aborted"])
    monkeypatch.setattr(replay_module, "CHUNK_BYTES", 1)  # a chunk per session: six chunks for two workers
    receiver.fail_next(1, "retry_after", signal="traces", retry_after_s=3.0)
    config = load_config(
        {
            "endpoint": receiver.http_endpoint,
            "workers": "2",
            "session_state": str(root),
            "metrics_enabled": "false",
        }
    )
    seen: list[tuple[Progress, int]] = []

    def on_progress(p: Progress) -> None:
        seen.append((p, len(receiver.spans())))  # what the collector had stored when the progress came

    report = replay([root], config, on_progress=on_progress)
    assert report.exit_code == 0 and report.sessions == 6
    done = [p.sessions_done for p, _ in seen]
    assert done[0] == 0 and seen[0][0].sessions_total == 6, "the total is known before any work (not 0/?)"
    assert done == sorted(done) and done[-1] == 6
    stored = len(receiver.spans())
    early = [p.sessions_done for p, count in seen if p.sessions_done > 0 and count < stored]
    assert early, f"no progress while the held worker was still busy: {done}"


def test_run_says_backfill_done_and_sums_up_historic_runaways(tmp_path: Path, receiver: OtlpReceiver) -> None:
    root = tmp_path / "session-state"
    _history(root, ["multi-tool", "resumed"])
    build_runaway_log(root, turns=30, session_id="0a0000f1-0000-4000-8000-0000000000a1")
    build_runaway_log(root, turns=30, session_id="0a0000f1-0000-4000-8000-0000000000a2")
    for log in root.glob("*/events.jsonl"):
        os.utime(log, (HOUR_AGO, HOUR_AGO))
    daemon = DaemonProcess(root, tmp_path / "state", receiver.http_endpoint, tmp_path / "daemon.log").start()
    try:
        daemon.until("backfill done line", lambda: "backfill done" in daemon.output())
        # A runaway written now is live: its detection is a warning of its own.
        live = root / "0a0000f1-0000-4000-8000-0000000000b1" / "events.jsonl"
        live.parent.mkdir()
        with open(live, "a") as fh:
            for line in iter_runaway_lines(turns=30, session_id="0a0000f1-0000-4000-8000-0000000000b1"):
                fh.write(line)
                fh.flush()
        daemon.until(
            "live runaway warning",
            lambda: "runaway agent in 0a0000f1-0000-4000-8000-0000000000b1" in daemon.output(),
        )
    finally:
        assert daemon.terminate() == 0
    lines = daemon.output().splitlines()
    done = [line for line in lines if "backfill done" in line]
    assert len(done) == 1, lines
    spans = sum(1 for s in receiver.spans())
    assert "backfill done: 4 sessions, " in done[0] and " spans in " in done[0], done[0]
    assert 0 < int(done[0].split("4 sessions, ")[1].split(" spans")[0]) <= spans
    # Two historic runaways (each: too many turns, and identical tool calls): one summary, no warning each.
    assert done[0].endswith("; runaway detections in the history: identical_tool_calls 2, turns 2"), done[0]
    warned = [line for line in lines if "WARNING" in line and "runaway agent" in line]
    assert all("0000000000b1" in line for line in warned) and warned, lines
