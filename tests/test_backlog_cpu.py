"""A full backlog is a pause, not a busy loop (reliability: "burns CPU or never finishes").

With the collector down and the backlog at its cap, the daemon cannot read further (the log files are the
buffer): it must wait, not spin. Measured on a real daemon process over 20 s of its own CPU time (``/proc``-free:
``os.times`` of a child is only known at exit, so the process's ``psutil`` counters are read).
"""

from __future__ import annotations

import json
import shutil
import socket
import time
from pathlib import Path

import psutil

from tests.conftest import CLI_GENERATED, SERIAL
from tests.daemon_process import DaemonProcess
from tests.waiting import until

pytestmark = SERIAL  # it measures the daemon's CPU share

CAP = 200
WINDOW_S = 20.0
MAX_CPU_SHARE = 0.05


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_cpu_stays_low_at_the_backlog_cap_with_the_collector_down(tmp_path: Path) -> None:
    root, state = tmp_path / "root", tmp_path / "state"
    root.mkdir()
    daemon = DaemonProcess(
        root,
        state,
        f"http://127.0.0.1:{_closed_port()}",
        tmp_path / "daemon.log",
        env={"COPILOT_OTEL_BACKLOG_CAP": str(CAP)},
    ).start()
    try:
        # Live sessions (written after the start), many more spans than the cap.
        for n in range(40):
            shutil.copytree(CLI_GENERATED / "multi-tool", root / f"s{n:02d}")

        def backlog() -> int:
            status = state / "status.json"
            return int(json.loads(status.read_text()).get("backlog_spans") or 0) if status.exists() else 0

        until(lambda: backlog() >= CAP, 60, "the backlog at the cap", detail=backlog)
        assert daemon.proc is not None
        proc = psutil.Process(daemon.proc.pid)
        before = proc.cpu_times()
        time.sleep(WINDOW_S)  # not a wait: the window the daemon's CPU use is measured over
        after = proc.cpu_times()
        used = (after.user - before.user) + (after.system - before.system)
        assert used < WINDOW_S * MAX_CPU_SHARE, f"{used:.2f} s of CPU in {WINDOW_S:.0f} s at the backlog cap"
    finally:
        daemon.kill()
    assert "Traceback" not in daemon.output()
