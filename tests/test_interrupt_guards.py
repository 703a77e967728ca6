"""Who may be interrupted, and the channels notices go to, with real processes and real services.

The guard cases: an ``inuse.<pid>.lock`` that names another program, a dead pid, a pid reused after the CLI
exited, another user's process: nothing is signalled (the process is still running afterwards) and the log says
why. The stand-in CLI is a copy of ``sleep`` named ``copilot`` (so only the check under test can refuse it; SIGINT
ends it, so a signal that got through would show). Desktop notifications go to a real session D-Bus with a small
notification service on it (``org.freedesktop.Notifications``), webhooks to a real local HTTP server.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from copilot_otel._platform import current, for_platform
from copilot_otel.daemon.act import RunawayActions, SessionView
from copilot_otel.daemon.interrupt import interrupt_session
from copilot_otel.daemon.notify import Burst, DesktopChannel, Notice, Notifier, WebhookChannel
from copilot_otel.model.activity import Detection
from copilot_otel.settings.policy import parse_policy
from tests.waiting import until
from tests.webhook_receiver import WebhookReceiver

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes and signals")


@pytest.fixture(scope="module")
def fake_cli() -> Iterator[Path]:
    """``sleep`` under the name ``copilot``, in a folder every user may read (for the other-user case)."""
    folder = Path(tempfile.mkdtemp(prefix="copilot-otel-fakecli-", dir="/tmp"))
    folder.chmod(0o755)
    binary = folder / "copilot"
    shutil.copy(shutil.which("sleep") or "/bin/sleep", binary)
    binary.chmod(0o755)
    yield binary
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
        p.wait(5)


def _start(
    procs: list[subprocess.Popen[bytes]], argv: list[str], holds: Path | None = None
) -> subprocess.Popen[bytes]:
    """Start the stand-in; with ``holds`` (a session folder) it holds that folder's ``inuse.<pid>.hold`` open, as
    the real CLI does while it runs (its standard input, opened before the start and renamed to its pid after)."""
    stdin: Any = subprocess.DEVNULL
    if holds is not None:
        holds.mkdir(parents=True, exist_ok=True)
        pending = holds / "starting.hold"
        pending.write_text("")
        stdin = pending.open("rb")
    p = subprocess.Popen(argv, stdin=stdin)
    if holds is not None:
        stdin.close()
        (holds / "starting.hold").rename(holds / f"inuse.{p.pid}.hold")
    procs.append(p)
    names = (Path(argv[-2]).name, Path(argv[0]).name)

    def execed() -> bool:  # exec() has replaced the forked python: its name is the binary's
        facts = current.process_facts(p.pid)
        return facts is not None and facts.name in names

    until(execed, 5, "the process's exec")
    return p


def _lock(folder: Path, pid: int, written: float | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lock = folder / f"inuse.{pid}.lock"
    lock.write_text("")
    if written is not None:
        os.utime(lock, (written, written))
    return lock


def _detection() -> Detection:
    return Detection(
        "identical_tool_calls", time.time_ns(), 5, tool_name="bash", session_id="s1", trace_id=7, span_id=9
    )


def _act(folder: Path, caplog: pytest.LogCaptureFixture) -> list[Any]:
    actions = RunawayActions(parse_policy("interrupt"))
    with caplog.at_level(logging.WARNING, logger="copilot_otel"):
        return actions.on_detection(_detection(), SessionView("s1", folder))


def _result(records: list[Any]) -> str:
    return str(records[0].attributes["copilot_otel.interrupt.result"])


def test_the_verified_cli_is_interrupted(
    tmp_path: Path, fake_cli: Path, procs: list[subprocess.Popen[bytes]], caplog: pytest.LogCaptureFixture
) -> None:
    """The positive control: with every check passing the signal goes out (and ends the stand-in)."""
    p = _start(procs, [str(fake_cli), "30"], holds=tmp_path / "s1")
    _lock(tmp_path / "s1", p.pid)
    records = _act(tmp_path / "s1", caplog)
    assert _result(records) == "interrupted"
    assert p.wait(5) == -2  # SIGINT
    assert f"send SIGINT to pid {p.pid}" in caplog.text


def test_dry_run_only_logs(
    tmp_path: Path, fake_cli: Path, procs: list[subprocess.Popen[bytes]], caplog: pytest.LogCaptureFixture
) -> None:
    p = _start(procs, [str(fake_cli), "30"], holds=tmp_path / "s1")
    _lock(tmp_path / "s1", p.pid)
    actions = RunawayActions(parse_policy("interrupt"), dry_run=True)
    with caplog.at_level(logging.WARNING, logger="copilot_otel"):
        records = actions.on_detection(_detection(), SessionView("s1", tmp_path / "s1"))
        again = actions.on_detection(_detection(), SessionView("s1", tmp_path / "s1"))
    assert _result(records) == "dry_run" and again == []  # once per prompt and reason
    assert f"dry run, would send SIGINT to pid {p.pid}" in caplog.text
    assert p.poll() is None


def test_a_lock_naming_another_program_is_refused(
    tmp_path: Path, procs: list[subprocess.Popen[bytes]], caplog: pytest.LogCaptureFixture
) -> None:
    p = _start(procs, [shutil.which("sleep") or "/bin/sleep", "30"])
    _lock(tmp_path / "s1", p.pid)
    assert _result(_act(tmp_path / "s1", caplog)) == "refused"
    assert p.poll() is None
    assert "not the Copilot CLI" in caplog.text and f"pid {p.pid}" in caplog.text


def test_a_dead_pid_is_refused(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    _lock(tmp_path / "s1", gone.pid)
    assert _result(_act(tmp_path / "s1", caplog)) == "refused"
    assert f"no process has pid {gone.pid}" in caplog.text


def test_a_pid_reused_after_the_cli_exited_is_refused(
    tmp_path: Path, fake_cli: Path, procs: list[subprocess.Popen[bytes]], caplog: pytest.LogCaptureFixture
) -> None:
    """A copilot-named process that started after the lock was written got a dead CLI's pid."""
    p = _start(procs, [str(fake_cli), "30"])
    _lock(tmp_path / "s1", p.pid, written=time.time() - 60)
    assert _result(_act(tmp_path / "s1", caplog)) == "refused"
    assert p.poll() is None
    assert "after inuse." in caplog.text and "another process got its pid" in caplog.text


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="starting a process as another user needs root and setpriv",
)
def test_another_users_process_is_refused(
    tmp_path: Path, fake_cli: Path, procs: list[subprocess.Popen[bytes]], caplog: pytest.LogCaptureFixture
) -> None:
    setpriv = shutil.which("setpriv") or "setpriv"
    p = _start(procs, [setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups", str(fake_cli), "30"])
    # setpriv runs as us until it has dropped to nobody and exec'd the CLI: act on the CLI, not on setpriv
    import psutil

    until(lambda: psutil.Process(p.pid).name() == fake_cli.name, 10, "setpriv's exec of the CLI")
    _lock(tmp_path / "s1", p.pid)
    assert _result(_act(tmp_path / "s1", caplog)) == "refused"
    assert p.poll() is None
    assert "belongs to another user" in caplog.text


def test_no_lock_means_the_cli_is_not_running(tmp_path: Path) -> None:
    (tmp_path / "s1").mkdir()
    outcome = interrupt_session(tmp_path / "s1")
    assert outcome.result == "no_lock" and "not running" in outcome.detail


# ------------------------------------------------------------------------------------------------ notifications
def _notice() -> Notice:
    return Notice(
        "copilot_otel.runaway.detected",
        "s1",
        "identical_tool_calls",
        "notified",
        0,
        5,
        6,
        5,
        "bash",
        "octo/app",
    )


def test_webhook_failures_are_counted_and_never_raised(caplog: pytest.LogCaptureFixture) -> None:
    with WebhookReceiver(status=500) as failing:
        notifier = Notifier([WebhookChannel(failing.url)]).start()
        with caplog.at_level(logging.WARNING, logger="copilot_otel"):
            notifier.submit(_notice())
            notifier.submit(_notice())
            notifier.close(5)
    outcomes = [notifier.outcomes.get_nowait() for _ in range(notifier.outcomes.qsize())]
    assert outcomes == [("webhook", "failed"), ("webhook", "failed")]
    assert caplog.text.count("HTTP 500 from the webhook") == 1  # rate-limited


def test_the_exact_desktop_commands() -> None:
    """The command each OS's notifier runs (where a real service cannot run here: macOS, Windows)."""
    every = {name: f"/usr/bin/{name}" for name in ("notify-send", "gdbus", "osascript", "powershell")}
    title, body = _notice().headline(), _notice().body()
    mac = for_platform("darwin").notification_command(title, body, every.get)
    assert mac == [
        "/usr/bin/osascript",
        "-e",
        f'display notification "{body}" with title "Runaway agent detected in octo/app"',
    ]
    linux = for_platform("linux").notification_command(title, body, every.get)
    assert linux == ["/usr/bin/notify-send", "--app-name=copilot-otel", "--urgency=critical", title, body]
    windows = for_platform("win32").notification_command(title, body, every.get)
    assert windows is not None and windows[:4] == [
        "/usr/bin/powershell",
        "-NoProfile",
        "-NonInteractive",
        "-Command",
    ]
    assert "'Runaway agent detected in octo/app'" in windows[4]
    assert for_platform("linux").notification_command(title, body, lambda _: None) is None


_INTROSPECT = """<node><interface name="org.freedesktop.Notifications">
<method name="Notify"><arg type="s" direction="in"/><arg type="u" direction="in"/><arg type="s" direction="in"/>
<arg type="s" direction="in"/><arg type="s" direction="in"/><arg type="as" direction="in"/>
<arg type="a{sv}" direction="in"/><arg type="i" direction="in"/><arg type="u" direction="out"/></method>
</interface></node>"""


@pytest.fixture
def notification_service(tmp_path: Path) -> Iterator[tuple[str, list[tuple[Any, ...]]]]:
    """A private session bus (dbus-daemon) with a notification service that records each Notify call."""
    if shutil.which("dbus-daemon") is None or shutil.which("gdbus") is None:
        pytest.skip("needs dbus-daemon and gdbus (Debian: dbus-daemon, libglib2.0-bin)")
    from jeepney import HeaderFields, MessageType, new_method_return
    from jeepney.bus_messages import message_bus
    from jeepney.io.blocking import open_dbus_connection

    address = f"unix:path={tmp_path / 'bus'}"
    config = tmp_path / "session.conf"
    config.write_text(
        '<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN" '
        '"http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd"><busconfig><type>session</type>'
        f'<listen>{address}</listen><auth>EXTERNAL</auth><policy context="default">'
        '<allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/></policy>'
        "</busconfig>"
    )
    bus = subprocess.Popen(["dbus-daemon", f"--config-file={config}", "--nofork", "--nopidfile"])
    until(lambda: (tmp_path / "bus").exists(), 5, "dbus-daemon's socket")
    calls: list[tuple[Any, ...]] = []
    stop = threading.Event()
    conn = open_dbus_connection(bus=address)
    conn.send_and_get_reply(message_bus.RequestName("org.freedesktop.Notifications"))

    def serve() -> None:
        while not stop.is_set():
            try:
                msg = conn.receive(timeout=0.2)
            except TimeoutError:
                continue
            if msg.header.message_type != MessageType.method_call:
                continue
            member = msg.header.fields.get(HeaderFields.member)
            if member == "Notify":
                calls.append(msg.body)
                conn.send(new_method_return(msg, "u", (len(calls),)))
            elif member == "Introspect":
                conn.send(new_method_return(msg, "s", (_INTROSPECT,)))

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    yield address, calls
    stop.set()
    server.join(2)
    conn.close()
    bus.terminate()
    bus.wait(5)


def test_desktop_notification_reaches_a_real_notification_service(
    notification_service: tuple[str, list[tuple[Any, ...]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    address, calls = notification_service
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", address)
    # notify-send is not installed on the CI image; its gdbus fallback speaks the same protocol.
    channel = DesktopChannel(find=lambda name: None if name == "notify-send" else shutil.which(name))
    notice = _notice()
    channel.send(notice)
    assert len(calls) == 1
    app, replaces, _icon, summary, body, actions, hints, _timeout = calls[0]
    assert (app, replaces, summary, body, actions) == (
        "copilot-otel",
        0,
        notice.headline(),
        notice.body(),
        [],
    )
    assert hints["urgency"] == ("y", 2)
    assert "copilot-otel show s1" in body


def test_windows_notifies_instead_of_interrupting(
    tmp_path: Path, fake_cli: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    """Windows' implementation (its process checks are the portable psutil ones, so they run here)."""
    p = _start(procs, [str(fake_cli), "30"], holds=tmp_path / "s1")
    _lock(tmp_path / "s1", p.pid)
    outcome = interrupt_session(tmp_path / "s1", platform=for_platform("win32"))
    assert outcome.result == "unsupported" and "cannot interrupt" in outcome.detail
    assert p.poll() is None


class _Slow:
    """A channel that takes its time (a webhook that hangs), released by the test."""

    name = "slow"

    def __init__(self) -> None:
        self.release = threading.Event()
        self.sent = 0

    def send(self, notice: Notice | Burst) -> None:
        self.release.wait(5)
        self.sent += 1


def test_a_slow_channel_never_blocks_submit_and_overflow_is_counted() -> None:
    slow = _Slow()
    # Sent as soon as it arrives (no gathering, no interval), so the worker is held by the first one.
    notifier = Notifier([slow], queue_size=1, coalesce_s=0, min_interval_s=0).start()
    for _ in range(4):
        # one in the worker's hands, one queued, the rest dropped; a blocking submit would never get past here,
        # since the channel is released only afterwards
        notifier.submit(_notice())
    slow.release.set()
    notifier.close(5)
    outcomes = [notifier.outcomes.get_nowait() for _ in range(notifier.outcomes.qsize())]
    dropped = outcomes.count(("queue", "dropped"))
    assert dropped >= 1 and outcomes.count(("slow", "sent")) + dropped == 4  # outcomes are per notice


def test_a_live_cli_of_another_session_is_refused(
    tmp_path: Path, fake_cli: Path, procs: list[subprocess.Popen[bytes]], caplog: pytest.LogCaptureFixture
) -> None:
    """Every identity check passes (same user, named copilot, started before the lock), but the CLI holds another
    session open: a stale lock here names it (a synced or restored folder, or a home shared between hosts, where
    the pid is a process on another machine). Before, it was signalled."""
    p = _start(procs, [str(fake_cli), "30"], holds=tmp_path / "s2")
    _lock(tmp_path / "s2", p.pid)
    _lock(tmp_path / "s1", p.pid)
    (tmp_path / "s1" / f"inuse.{p.pid}.hold").write_text("")  # the stale pair in this session's folder
    records = _act(tmp_path / "s1", caplog)
    assert _result(records) == "refused"
    assert "does not hold" in caplog.text and "another machine" in caplog.text
    assert p.poll() is None


def test_a_lock_without_its_hold_file_is_not_proof(
    tmp_path: Path, fake_cli: Path, procs: list[subprocess.Popen[bytes]], caplog: pytest.LogCaptureFixture
) -> None:
    p = _start(procs, [str(fake_cli), "30"])
    _lock(tmp_path / "s1", p.pid)
    records = _act(tmp_path / "s1", caplog)
    assert _result(records) == "refused" and "cannot prove" in caplog.text
    assert p.poll() is None
