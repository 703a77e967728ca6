"""A real ``copilot-otel run`` child process, and the "delivered exactly like replay" check.

Shared by the fault-injection suite, the live runaway test and the real-CLI end-to-end test.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from copilot_otel.cli import main
from copilot_otel.daemon.state import read_checkpoints
from tests.otlp_receiver import OtlpReceiver
from tests.waiting import until

ROOT = Path(__file__).resolve().parent.parent


class DaemonProcess:
    """``python -m copilot_otel run`` as a child process, with short intervals so tests run fast."""

    def __init__(
        self,
        session_state: Path,
        state_dir: Path,
        endpoint: str,
        log: Path,
        *extra: str,
        env: dict[str, str] | None = None,
        wrap: tuple[str, ...] = (),
    ) -> None:
        # ``wrap``: a command the daemon runs under (``prlimit --nofile=64:64 --``, ``unshare ...``); it must exec
        # the daemon, so that the signals sent to the child reach it.
        self.args = [
            *wrap,
            sys.executable,
            "-m",
            "copilot_otel",
            "run",
            "--session-state",
            str(session_state),
            "--state-dir",
            str(state_dir),
            "--endpoint",
            endpoint,
            "--rescan-interval",
            "0.5",
            "--export-delay",
            "0.2",
            *extra,
        ]
        self.env = {**os.environ, "COPILOT_OTEL_METRICS": "false", **(env or {})}
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, ready: bool = True) -> DaemonProcess:
        self._offset = self.log.stat().st_size if self.log.exists() else 0
        self._fh = open(self.log, "ab")  # noqa: SIM115 - closed in wait()
        self.proc = subprocess.Popen(
            self.args, env=self.env, stdout=self._fh, stderr=subprocess.STDOUT, cwd=ROOT
        )
        if ready:
            self.wait_ready()
        return self

    def wait_ready(self, timeout: float = 20.0) -> None:
        """Until the daemon logged that it follows the folder (its signal handlers are installed by then), or
        exited."""

        def ready() -> bool:
            text = self.log.read_bytes()[self._offset :].decode(errors="replace")
            return " following " in text or (self.proc is not None and self.proc.poll() is not None)

        until(ready, timeout, "daemon ready", detail=lambda: self.output()[-2000:])

    def terminate(self, timeout: float = 20.0) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.wait(timeout)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.wait(10)

    def wait(self, timeout: float) -> int:
        assert self.proc is not None
        rc = self.proc.wait(timeout)
        self._fh.close()
        return rc

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def until(self, what: str, check: Callable[[], bool], timeout: float = 20.0) -> None:
        """Wait for ``check()`` to hold, failing with ``what`` and the daemon's last lines if it does not."""
        until(check, timeout, what, detail=lambda: self.output()[-3000:])


def checkpointed_at_end(state: Path, logs: list[Path]) -> bool:
    """Whether every one of ``logs`` is checkpointed at its end in ``state`` (all its lines delivered or kept)."""
    checkpoints = read_checkpoints(state)
    return all(
        str(log) in checkpoints and checkpoints[str(log)].acked_offset == log.stat().st_size for log in logs
    )


def _strip(span: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in span.items() if k not in ("resource",)}


def expected_spans(paths: list[Path], tmp: Path) -> dict[str, dict[str, Any]]:
    """What ``copilot-otel replay`` exports for these logs (into its own receiver)."""
    with OtlpReceiver() as other:
        assert (
            main(
                [
                    "replay",
                    *map(str, paths),
                    "--endpoint",
                    other.http_endpoint,
                    "--no-progress",
                    "--state-dir",
                    str(tmp / "replay-state"),
                ]
            )
            == 0
        )
        return {s["span_id"]: _strip(s) for s in other.spans()}


def assert_delivered_like_replay(
    receiver: OtlpReceiver, paths: list[Path], tmp: Path, timeout: float = 20
) -> None:
    want = expected_spans(paths, tmp)
    receiver.wait_for(lambda r: {s["span_id"] for s in r.spans()} >= set(want), timeout)
    got: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for span in receiver.spans():
        got[span["span_id"]].append(_strip(span))
    assert set(got) == set(want), "exactly the spans replay produces"
    for span_id, copies in got.items():
        for copy in copies:
            assert copy == want[span_id], f"span {copies[0]['name']} was exported with different content"
