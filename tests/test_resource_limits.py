"""Resource limits (issue 15, points 5 and 6): a small descriptor limit and exhausted inotify watches.

The daemon is a real child process under a real kernel limit: ``prlimit`` sets its ``RLIMIT_NOFILE``, and a user
namespace of its own gets a tiny ``max_inotify_watches`` (``/proc/sys/user/max_inotify_watches`` is per user
namespace, so nothing outside the test's namespace is affected). Everything is delivered to the real OTLP receiver.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from copilot_otel.cli import main
from tests.conftest import CLI_GENERATED
from tests.daemon_process import DaemonProcess
from tests.otlp_receiver import OtlpReceiver
from tests.waiting import until

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="prlimit and inotify are Linux's")

_TEMPLATE_ID = b"0a000001-0000-4000-8000-000000000001"


def _sessions(root: Path, n: int, prefix: str = "0c") -> None:
    """``n`` copies of the plain-question session, each with its own session id."""
    template = (CLI_GENERATED / "plain-question" / "events.jsonl").read_bytes()
    assert _TEMPLATE_ID in template
    for i in range(n):
        sid = f"{prefix}{i:06d}-0000-4000-8000-000000000000"
        folder = root / sid
        folder.mkdir(parents=True)
        (folder / "events.jsonl").write_bytes(template.replace(_TEMPLATE_ID, sid.encode()))


def _roots(receiver: OtlpReceiver) -> set[str]:
    return {s["trace_id"] for s in receiver.spans() if s["parent_span_id"] is None}


# Descriptors the daemon inherits without knowing (a service manager or a parent that leaks them): with 40 of the
# 64 taken, its log cache meets EMFILE and has to shrink (the back-pressure path), not warn once per file.
_HOG = (
    sys.executable,
    "-c",
    "import os, sys\n"
    "for _ in range(40): os.set_inheritable(os.open(os.devnull, os.O_RDONLY), True)\n"
    "os.execv(sys.argv[1], sys.argv[1:])",
)


@pytest.mark.skipif(shutil.which("prlimit") is None, reason="needs prlimit (util-linux)")
@pytest.mark.parametrize(
    ("limit", "hog"),
    [
        pytest.param(64, (), id="ulimit-64"),
        pytest.param(64, _HOG, id="ulimit-64-with-40-taken"),
    ],
)
def test_500_sessions_under_a_small_descriptor_limit_are_all_delivered_without_a_warning_storm(
    tmp_path: Path, receiver: OtlpReceiver, limit: int, hog: tuple[str, ...]
) -> None:
    root, state = tmp_path / "session-state", tmp_path / "state"
    _sessions(root, 500)
    wrap = ("prlimit", f"--nofile={limit}:{limit}", "--", *hog)
    d = DaemonProcess(root, state, receiver.http_endpoint, tmp_path / "daemon.log", wrap=wrap).start()
    try:
        receiver.wait_for(lambda r: len(_roots(r)) >= 500, 180)
        assert d.proc is not None
        held = sum(1 for fd in Path(f"/proc/{d.proc.pid}/fd").iterdir())
    finally:
        rc = d.terminate(timeout=40)
    assert rc == 0
    assert len(_roots(receiver)) == 500
    assert len(receiver.spans()) == 500 * 3
    assert held < limit
    out = d.output()
    emfile = [
        line
        for line in out.splitlines()
        if "Too many open files" in line or "out of file descriptors" in line
    ]
    print(
        f"ulimit -n {limit}, {len(hog) and 40} taken: {len(emfile)} descriptor warnings, {held} held at the end"
    )
    assert not [line for line in emfile if "cannot read" in line], "no warning per file"
    if hog:
        # back-pressure: said once (rate-limited, with a count), the cache shrank, everything arrived
        assert (
            len(emfile) == 1
            and "out of file descriptors" in emfile[0]
            and "reads deferred so far" in emfile[0]
        )
    else:
        assert emfile == [], "sized from the limit: the limit is never reached"
        assert "Traceback" not in out


def _namespace_with_watches(n: int) -> tuple[str, ...] | None:
    """A command prefix running the daemon in a user namespace of its own allowed ``n`` inotify watches."""
    if shutil.which("unshare") is None:
        return None
    wrap = (
        "unshare",
        "--user",
        "--map-root-user",
        "sh",
        "-c",
        f'echo {n} > /proc/sys/user/max_inotify_watches && exec "$@"',
        "sh",
    )
    probe = subprocess.run(
        [*wrap, "cat", "/proc/sys/user/max_inotify_watches"], capture_output=True, text=True
    )
    return wrap if probe.returncode == 0 and probe.stdout.strip() == str(n) else None


def _status(state: Path) -> dict[str, object]:
    try:
        status: dict[str, object] = json.loads((state / "status.json").read_text())
    except (OSError, ValueError):
        return {}
    return status


def _wait_status(state: Path, key: str, value: object, timeout: float) -> dict[str, object]:
    def reached() -> dict[str, object] | None:
        status = _status(state)
        return status if status.get(key) == value else None

    return until(reached, timeout, f"status with {key}={value!r}", detail=lambda: _status(state))


def test_exhausted_inotify_watches_are_said_once_shown_and_polled(
    tmp_path: Path,
    receiver: OtlpReceiver,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # One watch in the daemon's namespace: the root is watched, no session folder is (watchdog skips them silently).
    wrap = _namespace_with_watches(1)
    if wrap is None:
        pytest.skip("cannot make a user namespace with its own inotify limit here")
    root, state = tmp_path / "session-state", tmp_path / "state"
    _sessions(root, 5)
    quiet = root / "0d000000-0000-4000-8000-000000000000"
    quiet.mkdir()
    (quiet / "events.jsonl").write_bytes(b"")  # a session folder whose log is written later
    # A long rescan: a file the watcher misses would wait 6 x 5 s for the safety-net rescan.
    d = DaemonProcess(
        root, state, receiver.http_endpoint, tmp_path / "daemon.log", "--rescan-interval", "5", wrap=wrap
    ).start()
    try:
        receiver.wait_for(lambda r: len(_roots(r)) >= 5, 60)
        _wait_status(state, "discovery", "polling (inotify watches exhausted)", 30)
        # status and doctor say it
        monkeypatch.setenv("COLUMNS", "400")
        assert main(["status", "--state-dir", str(state)]) == 0
        assert "file watching  polling (inotify watches exhausted)" in capsys.readouterr().out
        main(["doctor", "--state-dir", str(state), "--endpoint", receiver.http_endpoint, "--timeout", "5"])
        doctor_out = " ".join(capsys.readouterr().out.split())
        assert (
            "file watching: the daemon (pid" in doctor_out
            and "polling (inotify watches exhausted)" in doctor_out
        )
        receiver.clear()  # (doctor's test span)
        # latency: the quiet session's log is written now, in a folder no watch covers
        template = (CLI_GENERATED / "plain-question" / "events.jsonl").read_bytes()
        sid = quiet.name
        started = time.monotonic()
        (quiet / "events.jsonl").write_bytes(template.replace(_TEMPLATE_ID, sid.encode()))
        receiver.wait_for_spans(3, 40)
        latency = time.monotonic() - started
    finally:
        assert d.terminate() == 0
    print(f"latency with inotify watches exhausted: {latency:.2f}s")
    assert latency < 5, f"found by polling within seconds, not by the 30 s rescan ({latency:.1f}s)"
    out = d.output()
    # one line, naming the limit to raise (the watcher's own wording: "the inotify watch limit ... is reached")
    said = [line for line in out.splitlines() if "max_user_watches" in line]
    assert len(said) == 1 and "WARNING" in said[0] and "falling back to polling" in said[0], said
    assert "Traceback" not in out
