"""The platform seam (``copilot_otel._platform``): the Linux/macOS implementations against real files and real
processes, the portable one that Windows builds on, the pure logic of the Windows and macOS ones, and the CI's
no-POSIX mode that proves the package does not need POSIX at all."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from watchdog.observers import Observer

from copilot_otel._platform import LockHeld, Platform, current, for_platform
from copilot_otel._platform._darwin import Darwin, launchd_domains
from copilot_otel._platform._linux import Linux
from copilot_otel._platform._windows import Windows
from copilot_otel.daemon.discover import Discovery
from copilot_otel.sources.sessions import owner_pids, pid_alive
from tests.conftest import CLI_GENERATED, lock_held_elsewhere
from tests.daemon_process import DaemonProcess
from tests.otlp_receiver import OtlpReceiver
from tests.test_discover import Changes
from tests.waiting import until

ROOT = Path(__file__).resolve().parent.parent
NO_POSIX = ROOT / ".ci" / "no_posix"


def _no_posix_python(code: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(NO_POSIX)}
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[str]]:
    """A real process that lives until the test ends."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE, text=True
    )
    try:
        yield proc
    finally:
        proc.communicate("", timeout=10)


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


# ============================================================================================ no-POSIX mode
def test_every_module_imports_without_posix() -> None:
    """What a Windows Python lacks is missing here (.ci/no_posix): the whole package still imports, picks the
    portable implementation, and a future ``import fcntl`` in copilot_otel fails."""
    result = _no_posix_python(
        "import importlib, os, pkgutil, copilot_otel\n"
        "assert not hasattr(os, 'pread') and not hasattr(os, 'O_CLOEXEC')\n"
        "names = [m.name for m in pkgutil.walk_packages(copilot_otel.__path__, 'copilot_otel.')]\n"
        "for name in names:\n"
        "    if name != 'copilot_otel.__main__':\n"
        "        importlib.import_module(name)\n"
        "from copilot_otel._platform import current\n"
        "print(len(names), current.name)\n"
        "try:\n"
        "    exec('import fcntl', {'__name__': 'copilot_otel.future_module'})\n"
        "except ModuleNotFoundError as exc:\n"
        "    print('blocked:', exc.name)\n"
    )
    assert result.returncode == 0, result.stderr
    count, name = result.stdout.splitlines()[0].split()
    assert int(count) >= 30 and name == "portable"
    assert "blocked: fcntl" in result.stdout


def test_the_cli_runs_without_posix(tmp_path: Path) -> None:
    """``copilot-otel show --json`` end to end in the no-POSIX mode: reads a real log through the portable seam."""
    log = CLI_GENERATED / "plain-question" / "events.jsonl"
    env = {**os.environ, "PYTHONPATH": str(NO_POSIX)}
    result = subprocess.run(
        [sys.executable, "-m", "copilot_otel", "show", "--json", str(log)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert len(json.loads(result.stdout)["spans"]) >= 3


# ============================================================================================ selection
def test_the_current_implementation_is_the_native_one() -> None:
    native = hasattr(os, "pread")  # false only in the no-POSIX run, which gets the portable base
    assert type(current) is (Linux if native else Platform)
    assert for_platform("win32").name == "windows"
    assert for_platform("darwin").name == ("darwin" if native else "portable")
    assert Linux().service_manager == "systemd" and Darwin().service_manager == "launchd"


# ============================================================================================ positional reads
@pytest.mark.parametrize("impl", [current, Platform()], ids=["native", "portable"])
def test_positional_reads_and_shared_open(tmp_path: Path, impl: Platform) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"0123456789\nabc\n")
    fd = impl.open_shared(path)
    try:
        assert impl.pread(fd, 4, 11) == b"abc\n"
        assert impl.pread(fd, 3, 2) == b"234"
        buffer = bytearray(8)
        assert impl.read_into(fd, buffer, 8) == 7 and bytes(buffer[:7]) == b"89\nabc\n"
        assert impl.read_into(fd, buffer, 100) == 0
        # The writer may replace the name while we hold the file (what FILE_SHARE_DELETE allows on Windows).
        os.replace(path, tmp_path / "renamed.jsonl")
        assert impl.pread(fd, 3, 0) == b"012"
        assert not os.get_inheritable(fd)
    finally:
        os.close(fd)


@pytest.mark.parametrize("impl", [current, Platform()], ids=["native", "portable"])
def test_replace_and_directory_fsync(tmp_path: Path, impl: Platform) -> None:
    (tmp_path / "new").write_bytes(b"new")
    (tmp_path / "old").write_bytes(b"old")
    impl.replace(tmp_path / "new", tmp_path / "old")
    impl.fsync_dir(tmp_path)
    assert (tmp_path / "old").read_bytes() == b"new" and not (tmp_path / "new").exists()
    with pytest.raises(FileNotFoundError):
        impl.replace(tmp_path / "missing", tmp_path / "old")


# ============================================================================================ the lock
def test_lock_names_its_holder_and_dies_with_it(tmp_path: Path) -> None:
    lock = current.lock_exclusive(tmp_path / "lock")
    assert current.read_lock_owner(tmp_path / "lock") == str(os.getpid())
    with pytest.raises(LockHeld) as held:
        current.lock_exclusive(tmp_path / "lock")
    assert held.value.owner == str(os.getpid())
    lock.release()
    assert (tmp_path / "lock").exists()  # kept, so a waiting daemon and a status reader see the same file
    current.lock_exclusive(tmp_path / "lock").release()


def test_a_lock_recently_taken_by_a_running_process_is_seen_without_a_lock_call(tmp_path: Path) -> None:
    """What ``statusline``'s hook asks before it starts a refresh (``_quick.recently_locked``): the lock taken by
    another process (the real lock, in a real one), a file older than asked about, the file marked released while
    its holder still runs, then that holder gone."""
    from copilot_otel._platform import _quick

    lock = tmp_path / "statusline.lock"
    with lock_held_elsewhere(lock) as pid:
        assert _quick.lock_owner(lock) == str(pid)
        assert _quick.recently_locked(lock, time.time() - 60)
        assert not _quick.recently_locked(lock, time.time() + 60), "taken before the moment asked about"
        _quick.mark_released(lock)  # what the refresh does just before it releases the lock
        assert not _quick.recently_locked(lock, time.time() - 60), "released, though its process still runs"
        assert (
            _quick.lock_owner(lock) == "unknown" and lock.stat().st_mtime == 0
        )  # both said, either suffices
        lock.write_text(f"\n{pid}\n")  # as if taken again just now: its pid alone decides below
        assert _quick.recently_locked(lock, time.time() - 60)
    assert not _quick.recently_locked(lock, time.time() - 60), "its holder is gone"
    assert not _quick.recently_locked(tmp_path / "missing.lock", 0)


# ============================================================================================ processes
def test_process_liveness_and_identity(sleeper: subprocess.Popen[str]) -> None:
    assert current.process_alive(sleeper.pid)
    assert current.process_alive(sleeper.pid, started_before=time.time())
    # Known to exist an hour ago: the process with this pid now is younger, so it is another program.
    assert not current.process_alive(sleeper.pid, started_before=time.time() - 3600)
    assert not current.process_alive(_dead_pid())
    assert not current.process_alive(0) and not current.process_alive(-1)
    assert current.process_alive(1)  # init: someone else's process still counts as alive


def test_a_recycled_pid_is_not_the_cli(tmp_path: Path, sleeper: subprocess.Popen[str]) -> None:
    """``inuse.<pid>.lock`` files: the CLI's own (written after it started) counts; one written before the
    process that now has its pid was created does not; a dead one is reported (and found dead)."""
    folder = tmp_path / "session"
    folder.mkdir()
    dead = _dead_pid()
    (folder / f"inuse.{sleeper.pid}.lock").write_bytes(b"")
    (folder / f"inuse.{dead}.lock").write_bytes(b"")
    assert sorted(owner_pids(folder)) == sorted([sleeper.pid, dead])
    assert pid_alive(sleeper.pid) and not pid_alive(dead)
    hour_ago = time.time() - 3600
    os.utime(folder / f"inuse.{sleeper.pid}.lock", (hour_ago, hour_ago))
    assert owner_pids(folder) == [dead]


def test_daemon_closes_a_prompt_whose_cli_pid_was_recycled(
    tmp_path: Path, receiver: OtlpReceiver, sleeper: subprocess.Popen[str]
) -> None:
    """A real daemon, a prompt left open by a CLI that is gone, its pid now taken by an unrelated live process:
    the prompt is closed as ``owner_exited`` (``os.kill(pid, 0)`` alone would keep it open for 30 minutes)."""
    root = tmp_path / "session-state"
    folder = root / "0a000001-0000-4000-8000-00000000abcd"
    folder.mkdir(parents=True)
    lines = (CLI_GENERATED / "plain-question" / "events.jsonl").read_bytes().splitlines(keepends=True)
    (folder / "events.jsonl").write_bytes(b"".join(lines[:4]))  # session.start … assistant.turn_start
    lock = folder / f"inuse.{sleeper.pid}.lock"
    lock.write_bytes(b"")
    hour_ago = time.time() - 3600
    os.utime(lock, (hour_ago, hour_ago))
    quiet = time.time() - 10  # written a little while ago (an hour would make it an idle_timeout instead)
    os.utime(folder / "events.jsonl", (quiet, quiet))
    daemon = DaemonProcess(root, tmp_path / "state", receiver.http_endpoint, tmp_path / "daemon.log").start()
    try:

        def closed(r: OtlpReceiver) -> bool:
            return any(
                s["parent_span_id"] is None
                and s["attributes"].get("copilot_otel.incomplete.reason") == "owner_exited"
                for s in r.spans()
            )

        receiver.wait_for(closed, timeout=60)
    finally:
        assert daemon.terminate() == 0, daemon.output()[-2000:]


# ============================================================================================ stop signals
def test_watch_stop_reports_signals_by_name_and_restores_handlers() -> None:
    seen: list[tuple[str, str]] = []
    arrived = threading.Event()

    def on_stop(name: str) -> None:
        seen.append((name, threading.current_thread().name))
        arrived.set()

    before = signal.getsignal(signal.SIGTERM)
    with current.watch_stop(on_stop):
        os.kill(os.getpid(), signal.SIGTERM)
        assert arrived.wait(5)
    # on a thread of its own, never in the signal handler (which runs in the main thread)
    assert seen == [("SIGTERM", "copilot-otel-stop-signals")]
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_stop_signal_never_deadlocks_a_main_thread_that_holds_a_lock() -> None:
    """The daemon's stop handler sets Events and starts a thread. Run in the signal handler, as it once was, a
    signal that lands while the main thread holds that Event's lock (it waits on it every pass) deadlocks the
    process for good; here the signal lands exactly then, in a process of its own so that a hang is a timeout."""
    script = textwrap.dedent(
        """
        import os, signal, threading, time
        from copilot_otel._platform import current
        stopped = threading.Event()
        with current.watch_stop(lambda name: stopped.set()):
            with stopped._cond:  # what Event.wait holds around its check of the flag
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.3)  # not a wait: holds the lock while the signal is handled, the case under test
            print("stopped" if stopped.wait(5) else "not stopped")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    assert done.stdout.strip() == "stopped", done.stderr


def test_a_second_stop_request_interrupts_the_main_thread() -> None:
    """The daemon's handler raises KeyboardInterrupt at a second signal (stop waiting for delivery): the main
    thread gets it, as from a Ctrl-C, wherever it is waiting."""
    requests: list[str] = []

    def on_stop(name: str) -> None:
        requests.append(name)
        if len(requests) > 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt), current.watch_stop(on_stop):
        os.kill(os.getpid(), signal.SIGTERM)
        until(lambda: requests == ["SIGTERM"], 10, "the first stop request handled")
        os.kill(os.getpid(), signal.SIGINT)
        # Not a wait: the main thread blocked elsewhere, as the daemon's is; the second signal ends it at once.
        time.sleep(5)
    assert requests == ["SIGTERM", "SIGINT"]


# ============================================================================================ Windows (pure logic)
def test_windows_home_prefers_userprofile() -> None:
    windows = Windows()
    assert windows.home({"USERPROFILE": r"C:\Users\dev", "HOME": "/c/Users/dev"}) == Path(r"C:\Users\dev")
    assert windows.home({"HOME": "/c/Users/dev"}) == Path("/c/Users/dev")


def test_windows_default_dirs_are_appdata(monkeypatch: pytest.MonkeyPatch) -> None:
    # platformdirs asks the shell for the folders on Windows; elsewhere its documented override stands in.
    monkeypatch.setenv("WIN_PD_OVERRIDE_LOCAL_APPDATA", r"C:\Users\dev\AppData\Local")
    monkeypatch.setenv("WIN_PD_OVERRIDE_APPDATA", r"C:\Users\dev\AppData\Roaming")
    dirs = Windows().default_dirs({"USERPROFILE": r"C:\Users\dev"})
    assert str(dirs.state).replace("/", "\\") == r"C:\Users\dev\AppData\Local\copilot-otel"
    assert str(dirs.config).replace("/", "\\") == r"C:\Users\dev\AppData\Roaming\copilot-otel"
    explicit = Windows().default_dirs({"XDG_STATE_HOME": "/x/state", "XDG_CONFIG_HOME": "/x/config"})
    assert (explicit.state, explicit.config) == (
        Path("/x/state/copilot-otel"),
        Path("/x/config/copilot-otel"),
    )


def test_windows_stop_requests() -> None:
    names = {sig.name for sig in Windows().stop_signals()}
    assert {"SIGINT", "SIGTERM"} <= names
    assert ("SIGBREAK" in names) == hasattr(signal, "SIGBREAK")
    assert Windows().worker_start_method("http/protobuf") == "spawn"


# ============================================================================================ macOS (pure logic)
def test_macos_default_dirs(_isolated_home: Path) -> None:
    env: dict[str, Any] = {"HOME": str(_isolated_home)}
    support = _isolated_home / "Library" / "Application Support" / "copilot-otel"
    assert Darwin().default_dirs(env).state == support and Darwin().default_dirs(env).config == support
    # An earlier version's XDG directories stay where they are.
    (_isolated_home / ".local" / "state" / "copilot-otel").mkdir(parents=True)
    assert Darwin().default_dirs(env).state == _isolated_home / ".local" / "state" / "copilot-otel"
    assert Darwin().default_dirs({**env, "XDG_CONFIG_HOME": "/x"}).config == Path("/x/copilot-otel")


def test_macos_and_linux_worker_start_methods() -> None:
    assert Darwin().worker_start_method("http/protobuf") == "spawn"
    assert Linux().worker_start_method("http/protobuf") == "fork"
    assert Linux().worker_start_method("grpc") == "spawn"
    assert launchd_domains(501) == ["gui/501", "user/501"]


def test_linux_default_dirs_are_unchanged(_isolated_home: Path) -> None:
    env = {"HOME": str(_isolated_home)}
    assert Linux().default_dirs(env).state == _isolated_home / ".local" / "state" / "copilot-otel"
    assert Linux().default_dirs(env).config == _isolated_home / ".config" / "copilot-otel"
    xdg = Linux().default_dirs({**env, "XDG_STATE_HOME": "/s", "XDG_CONFIG_HOME": "relative"})
    assert xdg.state == Path("/s/copilot-otel") and xdg.config == _isolated_home / ".config" / "copilot-otel"


class _RealPathObserver(Observer):  # type: ignore[misc,valid-type]  # watchdog's platform alias
    """The native watcher, scheduled on the resolved path: it then reports real paths, as FSEvents does."""

    def schedule(self, handler: Any, path: str, **kwargs: Any) -> Any:
        return super().schedule(handler, os.path.realpath(path), **kwargs)


def test_a_symlinked_session_root_matches_real_path_events(tmp_path: Path) -> None:
    """A session root reached through a symlink (macOS's /tmp, a synced folder) whose watcher reports real
    paths: changes are still reported, under the root as configured."""
    real = tmp_path / "real-session-state"
    real.mkdir()
    root = tmp_path / "via-link"
    root.symlink_to(real, target_is_directory=True)
    changes = Changes()
    discovery = Discovery(root, changes, poll_interval_s=0.05, observer_factory=_RealPathObserver)
    discovery.start()
    try:
        log = root / "0a000001-0000-4000-8000-00000000f00d" / "events.jsonl"
        log.parent.mkdir()
        log.write_bytes(b"{}\n")
        assert changes.wait_for(log, timeout=5.0)
        changes.clear()
        with open(real / log.parent.name / "events.jsonl", "ab") as fh:
            fh.write(b"{}\n")
        assert changes.wait_for(log, timeout=5.0)
        assert discovery.mode == "inotify"
        assert all(str(p).startswith(str(root)) for p in changes.paths)
    finally:
        discovery.stop()
