"""``replay --since/--until`` and ``run --backfill DATE`` select prompts by the events' own time.

The ``resumed`` capture holds two prompts four seconds apart (17:12:15 and 17:12:19 UTC on 2026-11-29). Copying
it (as a user copying old logs to a new machine would) gives the file a new modification time; what is
selected must not change with it.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from copilot_otel.cli import main
from tests.conftest import CLI_GENERATED, replay_into
from tests.daemon_process import DaemonProcess
from tests.otlp_receiver import OtlpReceiver

RESUMED = CLI_GENERATED / "resumed"
BETWEEN = "2026-11-29T17:12:17Z"  # after the first prompt, before the second


def _copied(tmp_path: Path) -> Path:
    root = tmp_path / "session-state"
    folder = root / "8f0c0000-0000-4000-8000-00000000resu"
    shutil.copytree(RESUMED, folder)
    now = time.time()
    os.utime(folder / "events.jsonl", (now, now))  # touched: new by its mtime, old by its events
    return root


def _prompts(receiver: OtlpReceiver) -> list[str]:
    """The user prompts that arrived, by their root span's start (seconds of the minute)."""
    return sorted(
        time.strftime("%H:%M:%S", time.gmtime(s["start_ns"] / 1e9))
        for s in receiver.spans()
        if s["parent_span_id"] is None
    )


def test_replay_since_selects_prompts_by_event_time(tmp_path: Path, receiver: OtlpReceiver) -> None:
    root = _copied(tmp_path)
    assert replay_into(receiver, root, extra=("--since", BETWEEN)) == 0
    assert _prompts(receiver) == ["17:12:19"]
    # The whole prompt is in: its model calls and tool call too, and nothing of the first prompt.
    traces = {s["trace_id"] for s in receiver.spans()}
    assert len(traces) == 1
    assert {s["name"].split(" ")[0] for s in receiver.spans()} >= {"chat", "execute_tool"}
    assert all(log["trace_id"] in traces or log["trace_id"] is None for log in receiver.logs())


def test_replay_until_keeps_the_earlier_prompt(tmp_path: Path, receiver: OtlpReceiver) -> None:
    root = _copied(tmp_path)
    assert replay_into(receiver, root, extra=("--until", BETWEEN)) == 0
    assert _prompts(receiver) == ["17:12:15"]


def test_replay_window_by_day_and_outside_it(tmp_path: Path, receiver: OtlpReceiver) -> None:
    root = _copied(tmp_path)
    assert replay_into(receiver, root, extra=("--since", "2026-11-30")) == 0
    assert receiver.spans() == []  # the copy is new on disk, its prompts are not
    assert replay_into(receiver, root, extra=("--since", "2026-11-28", "--until", "2026-11-29")) == 0
    assert _prompts(receiver) == ["17:12:15", "17:12:19"]  # --until DAY includes that day


def test_replay_refuses_a_moment_it_cannot_read(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "--since", "last tuesday", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("copilot-otel: error: Expected --since to be a date") and err.count("\n") == 1


def test_run_backfill_date_ignores_a_touched_old_file(tmp_path: Path, receiver: OtlpReceiver) -> None:
    """``--backfill DATE`` once exported every file modified since DATE, whole: a copied log counted as new."""
    root = _copied(tmp_path)
    daemon = DaemonProcess(
        root, tmp_path / "state", receiver.http_endpoint, tmp_path / "daemon.log", "--backfill", BETWEEN
    ).start()
    try:
        receiver.wait_for(lambda r: any(s["parent_span_id"] is None for s in r.spans()), timeout=20)
    finally:
        assert daemon.terminate() == 0  # its stop flushes: anything of the first prompt has come by then
    assert _prompts(receiver) == ["17:12:19"], daemon.output()[-2000:]
