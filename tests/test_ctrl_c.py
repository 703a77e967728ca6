"""A Ctrl-C typed in a terminal right as ``copilot-otel run`` starts stops it cleanly, every time.

The "hang after 'stopping: delivering what is queued'" seen in a tmux test was not the daemon's: the daemon had
saved its state and exited 0, and was left a zombie that the tmux server (3.3a) never reaped, so tmux never set the
pane's exit status. A 20-line Python program that exits on Ctrl-C shows the same under tmux 3.3a (7 of 30 runs
with two busy cores). So the exit status here is read from a shell that runs the daemon and reaps it itself, not
from tmux; the terminal (a real pseudo-terminal, with the real Ctrl-C of its line discipline) is still tmux's.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from copilot_otel.daemon.state import read_checkpoints
from tests.conftest import CLI_GENERATED, SERIAL
from tests.waiting import until

# Serial: a Ctrl-C "right as it starts" races the daemon's first checkpoint; beside the benchmark's CPU hog it
# once came before any (1 of 12 attempts in four `-n 2` runs).
pytestmark = [pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"), SERIAL]

_EXITED = re.compile(r"copilot-otel exited with status (\d+)")


def _console_script() -> list[str]:
    script = Path(sys.executable).parent / "copilot-otel"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "copilot_otel"]


@pytest.mark.parametrize("attempt", range(3))
def test_ctrl_c_right_as_run_starts_stops_it_cleanly(tmp_path: Path, attempt: int) -> None:
    home = tmp_path / "home"
    shutil.copytree(CLI_GENERATED / "multi-tool", home / ".copilot" / "session-state" / "multi-tool")
    state = tmp_path / "state"
    conf = tmp_path / "tmux.conf"
    conf.write_text("set -g remain-on-exit on\nset -g status off\n")
    base = ["tmux", "-L", f"copilot-otel-ctrl-c-{os.getpid()}-{attempt}", "-f", str(conf)]
    # The shell reaps the daemon and prints its status; `trap : INT` keeps the shell itself alive through the Ctrl-C
    # (a caught signal is reset to its default across exec, so the daemon gets Ctrl-C as usual).
    script = 'trap : INT; "$@"; echo "copilot-otel exited with status $?"; sleep 30'
    command = ["sh", "-c", script, "sh", *_console_script(), "run", "--state-dir", str(state)]
    env = ["-e", f"HOME={home}", "-e", "COPILOT_OTEL_METRICS=false"]
    subprocess.run(
        [*base, "new-session", "-d", "-x", "200", "-y", "50", *env, " ".join(f"'{p}'" for p in command)],
        check=True,
        timeout=30,
    )

    def screen() -> str:
        return subprocess.run(
            [*base, "capture-pane", "-p", "-J", "-S", "-"], capture_output=True, text=True, timeout=30
        ).stdout

    try:
        until(lambda: " following " in screen(), 30, "the following line", detail=screen)
        subprocess.run([*base, "send-keys", "C-c"], check=True, timeout=30)  # right as it starts
        until(lambda: _EXITED.search(screen()), 30, "its exit status after Ctrl-C", detail=screen)
        text = screen()
    finally:
        subprocess.run([*base, "kill-server"], capture_output=True, timeout=30)
    match = _EXITED.search(text)
    assert match is not None and match.group(1) == "0", text
    assert "received SIGINT" in text and "Traceback" not in text
    # The 10 s promise is kept by the daemon's own shutdown deadline, which says so when it has to end a stop
    # ("did not stop within 10s"); the test's wall clock on a busy machine is no measure of it.
    assert "did not stop" not in text and "did not exit" not in text, "no deadline had to end it"
    status = json.loads((state / "status.json").read_text())
    assert status["backlog_spans"] == 0, "what was read was delivered before it exited"
    # What was read is checkpointed; a Ctrl-C that lands before the first log was read (on a busy machine the
    # history waits its turn) leaves nothing to save, and saves nothing.
    assert bool(read_checkpoints(state)) == (status["lines_read"] > 0), "the checkpoints were saved"
