"""The fault-injection checklist's last cases (reliability reference, section 2: #10, #26, #33, #39, #42).

Same harness as ``test_daemon.py``: real files, the daemon as a real child process, the real OTLP receiver. After
each fault the spans received must be what ``copilot-otel replay`` exports from the final logs, each exactly once.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tests import test_daemon
from tests.conftest import CLI_GENERATED
from tests.daemon_process import DaemonProcess, assert_delivered_like_replay
from tests.otlp_receiver import OtlpReceiver
from tests.test_daemon import _write

env = test_daemon.env  # the fixture: state dir, session-state root, receiver, daemons stopped at the end


def _exactly_once(receiver: OtlpReceiver, paths: list[Path], tmp: Path) -> None:
    """Delivered like replay, and not one span twice (nothing re-sent)."""
    assert_delivered_like_replay(receiver, paths, tmp)
    time.sleep(1.0)  # a span sent twice would have arrived by now
    twice = [k for k, n in Counter(s["span_id"] for s in receiver.spans()).items() if n > 1]
    assert twice == [], f"{len(twice)} spans were sent again"


def _checkpoints(state: Path) -> dict[str, Any]:
    checkpoints: dict[str, Any] = json.loads((state / "state.json").read_text())["checkpoints"]
    return checkpoints


def _status(state: Path) -> dict[str, Any]:
    status: dict[str, Any] = json.loads((state / "status.json").read_text())
    return status


def _warnings(d: DaemonProcess) -> list[str]:
    return [line for line in d.output().splitlines() if "WARNING" in line or "ERROR" in line]


# -------------------------------------------------------------------------- #26 clock skew: end before start
def test_a_tool_that_ends_before_it_starts_is_clamped_and_counted(env: dict[str, Any]) -> None:
    root = env["root"]
    log = root / "skewed" / "events.jsonl"
    # the clock stepped back an hour between the second bash's start and its completion
    text = (CLI_GENERATED / "multi-tool" / "events.jsonl").read_text()
    assert text.count("2026-11-29T17:11:32.618Z") == 1
    _write(log, text.replace("2026-11-29T17:11:32.618Z", "2026-11-29T16:11:32.618Z").encode())
    d = env["daemon"]()
    _exactly_once(env["receiver"], [log], env["tmp"])  # live == replay
    time.sleep(1.5)  # a status write
    assert d.terminate() == 0
    spans = env["receiver"].spans()
    assert all(s["end_ns"] >= s["start_ns"] for s in spans)
    bash = [s for s in spans if s["name"] == "execute_tool bash" and s["end_ns"] == s["start_ns"]]
    assert len(bash) == 1, "the skewed tool ends at its start"
    assert _status(env["state"])["values_dropped"] == {"end_before_start": 1}
    said = [line for line in d.output().splitlines() if "end_before_start" in line]
    assert len(said) == 1 and "an end 3599.952 s before its start" in said[0], said
