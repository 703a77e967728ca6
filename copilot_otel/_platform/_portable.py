"""The platform interface, implemented with calls every OS has; the base of every implementation.

Linux and macOS (:mod:`._posix`) replace the reads and the directory fsync with the POSIX calls; Windows
(:mod:`._windows`) replaces the open, the rename and the stop events with Win32 ones. What stays here is shared
by all: the one-daemon lock (:mod:`filelock`), process liveness (:mod:`psutil`) and the XDG default directories.
"""

from __future__ import annotations

import _thread
import contextlib
import errno
import io
import os
import signal
import socket
import stat
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Literal

from . import _quick
from ._quick import APP_NAME
from ._watch import DirWatcher, WatchSink

if TYPE_CHECKING:  # imported where used: replay, show and report never lock or look at processes (~65 ms)
    from filelock import FileLock

__all__ = [
    "APP_NAME",
    "DefaultDirs",
    "DirWatcher",
    "LockHeld",
    "NotARegularFile",
    "Platform",
    "ProcessFacts",
    "ServiceManager",
    "WatchSink",
]

ServiceManager = Literal["systemd", "launchd", "task-scheduler"]
StopHandler = Callable[[str], None]  # called on a thread of its own, never in a signal handler
# A process created this long after its ``inuse`` lock file was written cannot be the one that wrote it
# (creation times are rounded to clock ticks, the lock's mtime to the filesystem's granularity).
_START_SLACK_S = 2.0
# os.replace over a file that another process has open without share-delete (an indexer, antivirus, `status`
# reading status.json) fails on Windows with a sharing violation for a few milliseconds: retry for this long.
_REPLACE_RETRY_S = 1.0
# The error text of a refused link (OSError's own for ELOOP, "Too many levels of symbolic links", misleads).
_LINK_REFUSED = (
    "is a symbolic link; copilot-otel never writes through links in its state directory (remove it)"
)
# What max_open_files() says where the OS has no limit to read (Windows' C runtime allows 8192).
DEFAULT_MAX_OPEN_FILES = 1024


class LockHeld(Exception):
    """Another process holds the lock; ``owner`` is its pid as text (``"unknown"`` if unreadable)."""

    def __init__(self, owner: str) -> None:
        super().__init__(f"held by pid {owner}")
        self.owner = owner


class NotARegularFile(OSError):
    """A file read beside a log is something else (a FIFO, a device, a folder): it is not read."""

    def __init__(self, path: str | os.PathLike[str], mode: int) -> None:
        self.kind = file_kind(mode)
        super().__init__(errno.EINVAL, f"is {self.kind}, not a regular file", os.fspath(path))


def file_kind(mode: int) -> str:
    """What a ``st_mode`` names, as a message says it ("a FIFO", "a character device" ...)."""
    for test, kind in (
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return kind
    return "not a regular file"


@dataclass(frozen=True, slots=True)
class DefaultDirs:
    """Where copilot-otel keeps its files when no setting says otherwise."""

    state: Path
    """Checkpoints, the lock, ``status.json``, the embedded OTLP file, service logs."""
    config: Path
    """The folder of ``config.toml`` (and ``service.env`` on Linux)."""


@dataclass(frozen=True, slots=True)
class ProcessFacts:
    """What the runaway interrupt checks about a process before it signals it (:mod:`copilot_otel.daemon.interrupt`).

    Attributes:
        pid: The process id.
        same_user: Whether it runs as the user this process runs as (``None``: not knowable).
        name: The process name (``copilot`` for the native CLI binary).
        exe: Its executable's path ("" when not readable).
        cmdline: Its arguments ("" ones when not readable).
        create_time: When it started (Unix seconds).
        terminal: Its controlling terminal (``/dev/pts/3``) or ``None``.
        environ: The few environment variables that say which terminal multiplexer pane it runs in
            (``TMUX``, ``TMUX_PANE``); empty when not readable.
    """

    pid: int
    same_user: bool | None
    name: str
    exe: str
    cmdline: tuple[str, ...]
    create_time: float
    terminal: str | None
    environ: Mapping[str, str]


_PANE_VARS = ("TMUX", "TMUX_PANE")


class Platform:
    """Portable implementation of the interface (see :mod:`copilot_otel._platform`)."""

    name = "portable"
    service_manager: ServiceManager | None = None
    open_flags: int = getattr(os, "O_BINARY", 0) | getattr(os, "O_NOINHERIT", 0) | getattr(os, "O_CLOEXEC", 0)
    """Added to every ``os.open`` of ours: no text-mode translation (Windows), not inherited by children."""

    # -- files ---------------------------------------------------------------------------------------

    def open_shared(self, path: str | os.PathLike[str]) -> int:
        """Open ``path`` read-only; the writer may append to, rename or delete it while it is open."""
        return os.open(path, os.O_RDONLY | self.open_flags)

    def open_regular(self, path: str | os.PathLike[str]) -> int:
        """Open a regular file read-only without ever waiting, as :meth:`open_shared` does (the writer may delete it
        meanwhile): a file read beside a log (a sub-agent's ``.meta.json``, a parent's log, a session's
        ``workspace.yaml``) that someone replaced by a FIFO must not block its reader until a writer comes, nor
        one linked to ``/dev/zero`` feed it forever.

        Here, where ``O_NONBLOCK`` does not exist (Windows, which has no FIFO in a folder), the path is checked
        before the open and the descriptor after it.

        Raises:
            NotARegularFile: it is a FIFO, a device, a folder or a socket (nothing was read of it).
            OSError: any error of the open (``FileNotFoundError`` when it is not there).
        """
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise NotARegularFile(path, st.st_mode)
        return _regular_or_closed(path, self.open_shared(path))

    def pread(self, fd: int, length: int, offset: int) -> bytes:
        """Read up to ``length`` bytes at ``offset`` (may return fewer). Here: seek + read, so one thread per fd
        (the tailer's rule anyway)."""
        os.lseek(fd, offset, os.SEEK_SET)
        return os.read(fd, length)

    def read_into(self, fd: int, buffer: bytearray, offset: int) -> int:
        """Read into ``buffer`` at ``offset``; returns the byte count (0 at end of file). No copy: scanning a
        20 MB line stays within one buffer of memory."""
        os.lseek(fd, offset, os.SEEK_SET)
        with io.FileIO(fd, "rb", closefd=False) as raw:
            return raw.readinto(buffer) or 0

    def replace(self, src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        """Rename ``src`` over ``dst`` atomically, retrying for up to a second while ``dst`` is held open."""
        deadline = time.monotonic() + _REPLACE_RETRY_S
        delay = 0.005
        while True:
            try:
                self._rename(src, dst)
                return
            except PermissionError as exc:
                if not _is_sharing_violation(exc) or time.monotonic() + delay > deadline:
                    raise
            # A short bounded retry in the caller's own thread (there is no stop event to wait on here).
            time.sleep(delay)
            delay = min(delay * 2, 0.1)

    def _rename(self, src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        os.replace(src, dst)

    def fsync_dir(self, directory: str | os.PathLike[str]) -> None:
        """Make renames in ``directory`` durable; a no-op where a directory cannot be opened as a file."""

    def open_private(self, path: str | os.PathLike[str], flags: int, *, exclusive: bool = False) -> int:
        """Open (creating it, mode 0600) a file of ours in the state directory for writing, never through a link.

        ``flags`` are the access flags (``os.O_WRONLY | os.O_APPEND`` ...); ``exclusive`` makes it a new file only
        (``O_EXCL``: fails with :class:`FileExistsError` when anything, a link included, has the name), what every
        temporary is. Here, where ``O_NOFOLLOW`` does not exist (Windows), a link is refused by an ``lstat`` before
        the open: a link planted in between is not caught, which takes write access to the state directory, and the
        directory is the user's own (``%LOCALAPPDATA%`` is private by its ACL; creating a link on Windows takes
        the privilege or Developer Mode as well).

        Raises:
            OSError: ``ELOOP`` when ``path`` is a symbolic link; any error of the open.
        """
        if not exclusive and os.path.islink(path):
            raise OSError(errno.ELOOP, _LINK_REFUSED, os.fspath(path))
        return os.open(path, self._private_flags(flags, exclusive), 0o600)

    def _private_flags(self, flags: int, exclusive: bool) -> int:
        return flags | os.O_CREAT | (os.O_EXCL if exclusive else 0) | self.open_flags

    def private_dir_problem(self, path: str | os.PathLike[str]) -> str | None:
        """Why the existing directory ``path`` is not safe for our state (other users could plant links or files
        in it), or ``None``. Here nothing is checked: Windows guards directories by ACLs, and the default state
        directory (``%LOCALAPPDATA%``) is private to its user; reading ACLs is not done."""
        return None

    def max_open_files(self) -> int:
        """How many descriptors this process may hold (the soft ``RLIMIT_NOFILE`` on POSIX). Here a fixed
        default: Windows has no such per-process limit to read (its C runtime allows 8192 descriptors)."""
        return DEFAULT_MAX_OPEN_FILES

    def release_free_memory(self) -> None:
        """Hand memory the process freed back to the OS, after a burst of short-lived objects (a scan of 100,000
        session folders builds and drops ~20 MiB). Here nothing: only glibc's allocator needs telling."""

    def dir_watcher(self, root: str, sink: WatchSink) -> DirWatcher:
        """A watcher of the session-state folder ``root`` and the session folders in it, reporting to ``sink``.

        Here watchdog's native observer (FSEvents on macOS, ``ReadDirectoryChangesW`` on Windows): both watch a whole
        tree with one handle, so their cost does not grow with the number of session folders. Linux replaces it
        (inotify needs one watch per folder, which watchdog keeps at ~660 bytes each)."""
        from ._watchdog import WatchdogWatcher

        return WatchdogWatcher(root, sink)

    def user_id(self) -> int | None:
        """This process's numeric user id (POSIX), or ``None`` where users have none (Windows)."""
        return None

    # -- the one-daemon lock -------------------------------------------------------------------------

    def lock_exclusive(self, path: str | os.PathLike[str]) -> FileLock:
        """Take the lock file ``path`` without waiting and write our pid in it.

        The lock is :class:`filelock.FileLock` (``flock`` on Unix, ``LockFileEx`` on Windows): the OS drops it
        when the process dies, so a crash never leaves a stale lock. The file stays on release.

        Raises:
            LockHeld: Another process (or another store in this one) holds it.
            OSError: The file cannot be created or locked.
        """
        from filelock import FileLock, Timeout

        lock = FileLock(
            os.fspath(path),
            timeout=0,
            mode=0o600,
            thread_local=False,  # taken by the daemon's constructor, released by whichever thread closes it
            preserve_lock_file=True,
            on_acquired=_write_pid,
        )
        try:
            lock.acquire()
        except Timeout:
            raise LockHeld(self.read_lock_owner(path)) from None
        return lock

    def read_lock_owner(self, path: str | os.PathLike[str]) -> str:
        """The pid written in a lock file, or ``"unknown"`` (:func:`._quick.lock_owner`)."""
        return _quick.lock_owner(path)

    # -- processes -----------------------------------------------------------------------------------

    def process_alive(self, pid: int, started_before: float | None = None) -> bool:
        """Whether process ``pid`` runs, and (with ``started_before``, Unix seconds) started no later than that.

        ``started_before`` is when the process is known to have existed already (the mtime of the lock file it
        wrote): a process with that pid created afterwards is another program that got the pid recycled. Never
        sends a signal (on Windows ``os.kill(pid, 0)`` would send Ctrl+C).
        """
        if pid <= 0:
            return False
        import psutil

        try:
            process = psutil.Process(pid)
            if started_before is not None and process.create_time() > started_before + _START_SLACK_S:
                return False
            return bool(process.is_running())
        except psutil.NoSuchProcess:
            return False
        except psutil.AccessDenied:
            return True  # it exists; someone else's

    # -- acting on a runaway (daemon/interrupt.py, daemon/notify.py) --------------------------

    can_interrupt = True
    start_slack_s = _START_SLACK_S
    """How much later than its ``inuse`` lock's mtime a process may have been created and still be its writer."""
    """Whether :meth:`send_interrupt` can reach a CLI running in another terminal (not on Windows)."""

    def process_facts(self, pid: int) -> ProcessFacts | None:
        """What is knowable about process ``pid`` (:mod:`psutil`), or ``None`` when no such process runs."""
        if pid <= 0:
            return None
        import psutil

        try:
            process = psutil.Process(pid)
            create_time = process.create_time()
            # What the process is first, whose it is last: a process that drops to another user and then execs
            # (setpriv, su, sudo -u) changes from (us, launcher) to (them, program), so read in this order no
            # mix of the two ever looks like (us, program). Each read is fresh (no oneshot cache) for that reason.
            name = process.name()
            exe, cmdline, terminal, environ = "", (), None, {}
            with contextlib.suppress(psutil.AccessDenied, psutil.ZombieProcess, OSError):
                exe = process.exe()
            with contextlib.suppress(psutil.AccessDenied, psutil.ZombieProcess, OSError):
                cmdline = tuple(process.cmdline())
            with contextlib.suppress(psutil.AccessDenied, psutil.ZombieProcess, OSError, AttributeError):
                terminal = process.terminal()  # type: ignore[attr-defined,unused-ignore]  # not on Windows
            with contextlib.suppress(psutil.AccessDenied, psutil.ZombieProcess, OSError):
                full = process.environ()
                environ = {k: full[k] for k in _PANE_VARS if k in full}
            try:
                same_user: bool | None = process.username() == psutil.Process().username()
            except (psutil.AccessDenied, KeyError):
                same_user = None
            if (
                not process.is_running()
            ):  # the pid was reused while we read: those facts are not one process's
                return None
        except psutil.NoSuchProcess:
            return None
        return ProcessFacts(pid, same_user, name, exe, cmdline, create_time, terminal, environ)

    def process_holds_open(self, pid: int, path: str | os.PathLike[str]) -> bool | None:
        """Whether process ``pid`` has the file at ``path`` open (:mod:`psutil`: ``/proc/<pid>/fd`` on Linux, the
        process's file table on macOS); ``None`` when that cannot be read (another user's process, an OS that does
        not say). Compared by identity (device and inode), not by name, so a path spelled through a link matches.

        This is the proof the runaway interrupt asks for: the Copilot CLI holds its session's ``inuse.<pid>.hold``
        open while it runs, so a process that holds it is this session's CLI on this machine (a pid read from a
        lock on a home folder shared between hosts names a process on another machine, which holds nothing here).
        """
        import psutil

        try:
            want = os.stat(path)
        except OSError:
            return False
        try:
            opened = psutil.Process(pid).open_files()
        except psutil.NoSuchProcess:
            return False
        except (psutil.AccessDenied, psutil.ZombieProcess, OSError, NotImplementedError):
            return None
        for item in opened:
            try:
                st = os.stat(item.path)
            except OSError:
                continue
            if (st.st_dev, st.st_ino) == (want.st_dev, want.st_ino):
                return True
        return False

    def send_interrupt(self, pid: int) -> None:
        """What a Ctrl-C in the CLI's terminal sends: SIGINT (raises ``OSError`` when it cannot be sent)."""
        os.kill(pid, signal.SIGINT)

    def notification_command(
        self, title: str, body: str, find: Callable[[str], str | None]
    ) -> list[str] | None:
        """The command that shows a desktop notification, or ``None`` where there is no way to (``find`` is
        :func:`shutil.which`). Here: the freedesktop notification service, through ``notify-send`` or
        ``gdbus``."""
        if (notify_send := find("notify-send")) is not None:
            return [notify_send, "--app-name=copilot-otel", "--urgency=critical", title, body]
        if (gdbus := find("gdbus")) is not None:
            return [
                gdbus,
                "call",
                "--session",
                "--dest=org.freedesktop.Notifications",
                "--object-path=/org/freedesktop/Notifications",
                "--method=org.freedesktop.Notifications.Notify",
                "'copilot-otel'",
                "uint32 0",
                "''",
                _gvariant_string(title),
                _gvariant_string(body),
                "@as []",
                "@a{sv} {'urgency': <byte 2>}",
                "int32 -1",
            ]
        return None

    # -- stopping ------------------------------------------------------------------------------------

    def stop_signals(self) -> tuple[signal.Signals, ...]:
        """The signals that ask a daemon to stop."""
        return (signal.SIGTERM, signal.SIGINT)

    @contextlib.contextmanager
    def watch_stop(self, on_stop: StopHandler) -> Iterator[None]:
        """Call ``on_stop(name)`` for every stop request while the block runs, on a thread of its own.

        A Python signal handler runs in the main thread between two of its bytecodes, possibly while that thread
        holds a lock (an Event's while it waits on it, the thread table's while it starts a thread, a log
        handler's): a handler that sets an Event, starts a thread or logs can deadlock the process for good. So
        the handler here does nothing: the interpreter's C-level handler writes the signal's number to a socket
        (``signal.set_wakeup_fd``) and a thread reading it calls ``on_stop``, where taking locks is safe. When
        ``on_stop`` raises ``KeyboardInterrupt`` (a second stop request: stop waiting), the main thread gets it
        as from a Ctrl-C.
        """
        stops = {int(sig): sig.name for sig in self.stop_signals()}
        forced: list[bool] = []  # a list, not an Event: the handler must not take a lock

        def handler(signum: int, _frame: FrameType | None) -> None:
            if forced:
                raise KeyboardInterrupt

        reader, writer = socket.socketpair()
        writer.setblocking(False)  # set_wakeup_fd wants it so: the C handler must never block

        def pump() -> None:
            while True:
                try:
                    data = reader.recv(64)
                except OSError:
                    return
                if not data:
                    return
                for signum in data:
                    name = stops.get(signum)
                    if name is None or forced:  # forced: the interrupt below comes back through here too
                        continue
                    try:
                        on_stop(name)
                    except KeyboardInterrupt:
                        forced.append(True)
                        _thread.interrupt_main(signal.SIGINT)

        previous_fd = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
        previous = {sig: signal.signal(sig, handler) for sig in self.stop_signals()}
        thread = threading.Thread(target=pump, name="copilot-otel-stop-signals", daemon=True)
        thread.start()
        try:
            yield
        finally:
            for sig, old in previous.items():
                signal.signal(sig, old)
            signal.set_wakeup_fd(previous_fd)
            writer.close()  # the reader sees the end and the thread returns
            thread.join(1.0)
            reader.close()

    # -- defaults ------------------------------------------------------------------------------------

    def home(self, env: Mapping[str, str]) -> Path:
        """The user's home directory under ``env`` (``HOME``, else the OS's idea of it): :func:`._quick.home`."""
        return _quick.home(env)

    def default_dirs(self, env: Mapping[str, str]) -> DefaultDirs:
        """XDG base directories (:func:`._quick.default_dirs`): ``$XDG_STATE_HOME`` / ``$XDG_CONFIG_HOME`` when
        absolute, else ``~/.local/state`` and ``~/.config``."""
        return DefaultDirs(*_quick.default_dirs(env, "xdg"))

    def worker_start_method(self, protocol: str) -> str:
        """How replay starts worker processes: ``spawn`` (a fresh interpreter) unless forking is known safe."""
        return "spawn"

    def spawn_detached(self, argv: Sequence[str]) -> None:
        """Start ``argv`` and leave it running on its own, apart from the caller's process group
        (:func:`._quick.spawn_detached`: POSIX, its own session)."""
        _quick.spawn_detached(argv)


def _gvariant_string(text: str) -> str:
    """``text`` as a GVariant text-format string literal (what ``gdbus call`` parses its arguments as)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _regular_or_closed(path: str | os.PathLike[str], fd: int) -> int:
    """``fd`` if it is a regular file's; else it is closed and :class:`NotARegularFile` raised."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise NotARegularFile(path, mode)
    return fd


def _write_pid(fd: int) -> None:
    """filelock's ``on_acquired``: the holder's pid, for the "already running (pid N)" message."""
    payload = b"\n" * _quick.PID_OFFSET + f"{os.getpid()}\n".encode()
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, payload)
    os.ftruncate(fd, len(payload))


def _is_sharing_violation(exc: OSError) -> bool:
    # ERROR_ACCESS_DENIED (5), ERROR_SHARING_VIOLATION (32), ERROR_LOCK_VIOLATION (33); EACCES elsewhere
    # means permissions, which a retry does not fix.
    return getattr(exc, "winerror", None) in (5, 32, 33) or (os.name == "nt" and exc.errno == errno.EACCES)
