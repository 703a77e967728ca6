"""A wall-clock step while a prompt is live: the daemon's output still equals replay's.

The daemon runs as a real process under libfaketime (Debian's ``libfaketime``, installed by ``.ci/run``) with only
the wall clock faked (``FAKETIME_DONT_FAKE_MONOTONIC``): the step is what NTP or a resumed VM does to
``CLOCK_REALTIME``, and the monotonic clock runs on. Before, idle decisions compared the wall clock with the log's
mtime: a forward step of an hour closed a live prompt as ``idle_timeout`` after a few seconds of silence, and the
rest of the prompt came out as other spans than replay's. The fake is the only part not ours; what it fakes is the
time of day the kernel would report.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from tests import test_daemon
from tests.daemon_process import assert_delivered_like_replay
from tests.test_daemon import _lines, _status, _write

env = test_daemon.env

LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")


@pytest.mark.skipif(
    not LIBFAKETIME.exists() and not os.environ.get("CI"), reason="needs Debian's libfaketime"
)
@pytest.mark.parametrize("step", ["+3600", "-3600"])
def test_a_wall_clock_step_while_a_prompt_is_live(env: dict[str, Any], step: str) -> None:
    assert LIBFAKETIME.exists(), "libfaketime is installed by .ci/run"
    offset = env["tmp"] / "faketime"
    offset.write_text("+0\n")
    lines = _lines("multi-tool")
    log = env["root"] / "multi-tool" / "events.jsonl"
    split = next(i for i, line in enumerate(lines) if b'"assistant.turn_start"' in line) + 1
    _write(log, b"".join(lines[:split]))  # the prompt is open, mid-turn
    (log.parent / f"inuse.{os.getpid()}.lock").write_text("")  # its CLI runs (this process stands in for it)
    d = env["daemon"](
        "--idle-timeout",
        "600",
        env={
            "LD_PRELOAD": str(LIBFAKETIME),
            "FAKETIME_TIMESTAMP_FILE": str(offset),
            "FAKETIME_NO_CACHE": "1",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        },
    )
    env["receiver"].wait_for(lambda r: len(r.logs()) >= 1, 15)  # what the open prompt has so far is out
    offset.write_text(f"{step}\n")  # the wall clock steps by an hour
    # Two status writes (5 s apart) dated by the stepped clock: by the second, owner and idle checks (every 2 s)
    # have run on the stepped clock past the 5 s owner grace.
    stepped: set[float] = set()

    def stepped_twice() -> bool:
        updated = _status(env["state"]).get("updated_at")
        if updated is not None and abs(updated - time.time()) > 1800:
            stepped.add(updated)
        return len(stepped) >= 2

    d.until("two status writes on the stepped clock", stepped_twice, 30)
    _write(log, b"".join(lines[split:]))  # the prompt goes on and ends
    assert_delivered_like_replay(env["receiver"], [log], env["tmp"])
    assert d.terminate() == 0
    assert "closed an unfinished prompt" not in d.output()
    shutil.rmtree(log.parent)
