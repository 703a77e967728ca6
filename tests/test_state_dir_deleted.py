"""The state directory deleted while the daemon runs (issue 15, point 11): it is re-created and re-locked, the
state is saved again, and a second daemon can never share it.

Real daemons as child processes, the real OTLP receiver, real fixtures.
"""

from __future__ import annotations

import shutil
import signal
import sys
from pathlib import Path

import pytest

from copilot_otel.common.errors import StateError
from copilot_otel.daemon.state import DB_FILE, Checkpoint, read_checkpoints
from tests.conftest import CLI_GENERATED
from tests.daemon_process import DaemonProcess, assert_delivered_like_replay
from tests.otlp_receiver import OtlpReceiver
from tests.waiting import until

pytestmark = pytest.mark.skipif(
    sys.platform == "win32", reason="Windows does not delete a directory holding an open file"
)


def _checkpoints(state: Path) -> dict[str, Checkpoint]:
    try:
        return read_checkpoints(state)
    except StateError:  # (being re-created)
        return {}


def _acked(state: Path, log: Path) -> int | None:
    checkpoint = _checkpoints(state).get(str(log))
    return checkpoint.acked_offset if checkpoint is not None else None


def test_a_deleted_state_dir_is_recreated_relocked_and_saved(tmp_path: Path, receiver: OtlpReceiver) -> None:
    root, state = tmp_path / "session-state", tmp_path / "state"
    shutil.copytree(CLI_GENERATED / "multi-tool", root / "multi-tool")
    first = root / "multi-tool" / "events.jsonl"
    d = DaemonProcess(root, state, receiver.http_endpoint, tmp_path / "daemon.log").start()
    try:
        until(
            lambda: _acked(state, first) == first.stat().st_size,
            30,
            "ack",
        )
        shutil.rmtree(state)
        # re-created, locked and saved within a few seconds, with what was checkpointed before
        until(
            lambda: (state / "lock").exists() and str(first) in _checkpoints(state), 10, "the state dir back"
        )
        # a second daemon on the same path is refused: the directory is locked again
        second = DaemonProcess(root, state, receiver.http_endpoint, tmp_path / "second.log").start(
            ready=False
        )
        assert second.wait(30) == StateError.exit_code
        assert "another copilot-otel daemon is already using" in second.output()
        # the first keeps working and keeps saving: a new session is delivered and checkpointed
        shutil.copytree(CLI_GENERATED / "failing-tool", root / "failing-tool")
        later = root / "failing-tool" / "events.jsonl"
        assert_delivered_like_replay(receiver, [first, later], tmp_path)
        until(
            lambda: _acked(state, later) == later.stat().st_size,
            10,
            "ack",
        )
    finally:
        rc = d.terminate()
    assert rc == 0
    out = d.output()
    assert sum("was deleted while the daemon runs" in line for line in out.splitlines()) == 1
    assert "Traceback" not in out
    assert _acked(state, first) == first.stat().st_size


def test_a_daemon_whose_deleted_state_dir_was_taken_over_stops_without_writing_there(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    root, state = tmp_path / "session-state", tmp_path / "state"
    shutil.copytree(CLI_GENERATED / "plain-question", root / "plain-question")
    d = DaemonProcess(root, state, receiver.http_endpoint, tmp_path / "daemon.log").start()
    second = None
    try:
        receiver.wait_for_spans(3, 30)
        assert d.proc is not None
        d.proc.send_signal(
            signal.SIGSTOP
        )  # frozen: it cannot notice the deletion before the second one starts
        shutil.rmtree(state)
        second = DaemonProcess(root, state, receiver.http_endpoint, tmp_path / "second.log").start()
        until(lambda: (state / DB_FILE).exists(), 10, "the second daemon's state")
        d.proc.send_signal(signal.SIGCONT)
        assert d.wait(30) == StateError.exit_code, "the first one must stop, not share the directory"
        out = d.output()
        assert "took over" in out and "this daemon stops without writing there" in out
        assert "Traceback" not in out
        # the second one is the owner and still works
        assert second.proc is not None and second.proc.poll() is None
        shutil.copytree(CLI_GENERATED / "failing-tool", root / "failing-tool")
        assert_delivered_like_replay(
            receiver,
            [root / "plain-question" / "events.jsonl", root / "failing-tool" / "events.jsonl"],
            tmp_path,
        )
    finally:
        if d.proc is not None and d.proc.poll() is None:
            d.proc.send_signal(signal.SIGCONT)
            d.kill()
        if second is not None:
            assert second.terminate() == 0
