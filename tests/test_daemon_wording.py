"""What a real ``copilot-otel run`` tells the user at its start and during a live runaway: each line true, each
said once.

Real daemon processes against a tmp session-state folder and the real receiver; the runaway is built from real CLI
lines (tests/runaway.py), its timestamps moved to now so that it is live (the actions act only on recent
detections). The desktop notification is off: its line in the log is what is checked.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from datetime import datetime, timezone
from pathlib import Path

from copilot_otel.model.timestamps import parse_timestamp
from tests.conftest import CLI_GENERATED
from tests.daemon_process import DaemonProcess
from tests.otlp_receiver import OtlpReceiver
from tests.runaway import DEFAULT_SESSION_ID, iter_runaway_lines

FRESH_CLAIM = "every session file is read from the start"


def _lines(daemon: DaemonProcess) -> list[str]:
    return daemon.output().splitlines()


def _now_lines(lines: list[str]) -> list[str]:
    """``lines`` with every timestamp moved by one offset so that the last one is now."""
    events = [json.loads(line) for line in lines]
    shift = time.time_ns() - parse_timestamp(events[-1]["timestamp"])
    out = []
    for event in events:
        moment = datetime.fromtimestamp((parse_timestamp(event["timestamp"]) + shift) / 1e9, timezone.utc)
        event["timestamp"] = moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        out.append(json.dumps(event, separators=(",", ":")) + "\n")
    return out


def test_a_live_runaway_with_a_notification_is_one_warning_line(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    root = tmp_path / "session-state"
    log = root / DEFAULT_SESSION_ID / "events.jsonl"
    daemon = DaemonProcess(
        root,
        tmp_path / "state",
        receiver.http_endpoint,
        tmp_path / "daemon.log",
        "--runaway-action",
        "notify",
        env={"COPILOT_OTEL_NOTIFY_DESKTOP": "false"},
    ).start()
    try:
        log.parent.mkdir(parents=True)
        with open(log, "a") as fh:
            for line in _now_lines(list(iter_runaway_lines(turns=12, seconds_per_turn=0.5))):
                fh.write(line)
                fh.flush()
        daemon.until("notice", lambda: "Runaway agent detected" in daemon.output())
    finally:  # (a second line for the same detection would come on the same pass, which the stop lets end)
        assert daemon.terminate() == 0
    warned = [line for line in _lines(daemon) if "WARNING" in line and "identical" in line]
    # On main: "runaway agent in …: identical_tool_calls" and then the notice, for one detection.
    assert len(warned) == 1, warned
    assert "Runaway agent detected in 0a0000f1: identical tool calls (bash)" in warned[0]


def test_backfill_none_says_what_it_does_not_that_every_file_is_read(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    root = tmp_path / "session-state"
    shutil.copytree(CLI_GENERATED / "multi-tool", root / "0a000001-0000-4000-8000-000000000001")
    daemon = DaemonProcess(
        root, tmp_path / "state", receiver.http_endpoint, tmp_path / "daemon.log", "--backfill", "none"
    ).start()
    assert daemon.terminate() == 0
    out = daemon.output()
    assert FRESH_CLAIM not in out and "exported from its start" not in out, out
    assert (
        "--backfill none: of the sessions already on disk, only what is written from now on is exported"
        in out
    )
    assert receiver.spans() == []

    other = DaemonProcess(root, tmp_path / "state2", receiver.http_endpoint, tmp_path / "all.log").start()
    other.until("spans", lambda: len(receiver.spans()) > 0)
    assert other.terminate() == 0
    assert "no checkpoints yet: every session log on disk is exported from its start" in other.output()

    since = DaemonProcess(
        root, tmp_path / "state3", receiver.http_endpoint, tmp_path / "since.log", "--backfill", "2026-11-01"
    ).start()
    assert since.terminate() == 0
    said = [line for line in _lines(since) if "--backfill" in line]
    assert len(said) == 1 and "--backfill 2026-11-01 00:00 " in said[0], said  # the moment, not microseconds
    assert "the prompts that started since then are exported (by the events' own times)" in said[0]


def test_logs_written_in_the_last_minute_get_a_backfill_done_line(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    """A history copied in a moment ago (every mtime is now): on main the daemon read it and said nothing."""
    root = tmp_path / "session-state"
    for name in ("multi-tool", "failing-tool"):
        shutil.copytree(CLI_GENERATED / name, root / f"0000{name}")
        (root / f"0000{name}" / "events.jsonl").touch()  # copied as `cp` copies: written now
    daemon = DaemonProcess(root, tmp_path / "state", receiver.http_endpoint, tmp_path / "daemon.log").start()
    try:
        daemon.until("backfill done line", lambda: "backfill done" in daemon.output())
    finally:
        assert daemon.terminate() == 0
    done = [line for line in _lines(daemon) if "backfill done" in line]
    assert len(done) == 1 and "backfill done: 2 sessions, " in done[0], done
    spans = int(done[0].split("2 sessions, ")[1].split(" spans")[0])
    assert spans > 0


def test_a_missing_session_state_folder_is_waited_for_and_said_once(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    root = tmp_path / "not-yet" / "session-state"
    daemon = DaemonProcess(root, tmp_path / "state", receiver.http_endpoint, tmp_path / "daemon.log").start()
    try:
        daemon.until("waiting line", lambda: "waiting for" in daemon.output())
        status = tmp_path / "state" / "status.json"
        daemon.until(  # three rescans: the line is not repeated
            "three scans", lambda: status.exists() and json.loads(status.read_text())["scans"] >= 3
        )
        shutil.copytree(CLI_GENERATED / "multi-tool", root / "0a000001-0000-4000-8000-000000000001")
        daemon.until("spans", lambda: len(receiver.spans()) > 0)
        daemon.until("appeared line", lambda: "appeared" in daemon.output())
    finally:
        assert daemon.terminate() == 0
    waiting = [line for line in _lines(daemon) if "waiting for" in line]
    assert len(waiting) == 1, waiting
    # Every agent's folder looked in, in one line (none of them exists under the test's HOME).
    home = Path(os.environ["HOME"])
    assert (
        f"waiting for {root}, {home / '.claude' / 'projects'}, {home / '.codex' / 'sessions'} or "
        f"{home / '.gemini' / 'tmp'} to appear: "
        "none exists yet" in waiting[0]
    ), waiting
    assert sum(f"{root} appeared: following its sessions" in line for line in _lines(daemon)) == 1
    assert "exported from its start" not in daemon.output(), "nothing is on disk to export"
