"""Linux: systemd user units, XDG directories, fork for replay workers, and the inotify watcher of session folders."""

from __future__ import annotations

import ctypes
import errno
import functools
import logging
import os
import select
import struct
import sys
import threading
from collections.abc import Iterator

from ._portable import DirWatcher, ServiceManager, WatchSink
from ._posix import Posix

__all__ = ["InotifyWatcher", "Linux", "decode_events"]

logger = logging.getLogger("copilot_otel.discover")

# inotify(7): <sys/inotify.h>.
IN_MODIFY = 0x2
IN_MOVED_FROM = 0x40
IN_MOVED_TO = 0x80
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_UNMOUNT = 0x2000
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ONLYDIR = 0x1000000
IN_DONT_FOLLOW = 0x2000000
IN_EXCL_UNLINK = 0x4000000
IN_ISDIR = 0x40000000
# What can mean "a session log appeared, grew or went away": no open/close events (our own reads would wake us).
_CHANGES = IN_CREATE | IN_MODIFY | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE
_ROOT_MASK = _CHANGES | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR  # the root may be reached through a link
# A session folder that is a link is not watched (discovery follows a link only after checking where it leads).
_FOLDER_MASK = _CHANGES | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK
_ROOT_GONE = IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT | IN_IGNORED
# struct inotify_event: int wd; uint32_t mask, cookie, len; char name[len] (NUL-padded).
_EVENT = struct.Struct("iIII")
_READ_SIZE = 64 * 1024  # room for ~2,000 events; the kernel never splits one across reads


class Linux(Posix):
    """Linux (and other POSIX systems that are not macOS)."""

    name = "linux"
    service_manager: ServiceManager | None = "systemd"

    def worker_start_method(self, protocol: str) -> str:
        # fork starts workers without re-importing anything; the parent holds no threads at that point (metrics
        # are aggregated, not given to the SDK) and its HTTP session is not used by the children. gRPC channels
        # must not cross a fork, so gRPC replays spawn fresh interpreters instead.
        return "spawn" if protocol == "grpc" else "fork"

    def dir_watcher(self, root: str, sink: WatchSink) -> DirWatcher:
        """One inotify descriptor with a watch on the root and on each session folder (:class:`InotifyWatcher`)."""
        return InotifyWatcher(root, sink)


@functools.cache
def _libc() -> ctypes.CDLL:
    """The C library's three inotify calls (glibc and musl both have them; ``ENOSYS`` where they are missing)."""
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
    except AttributeError:
        raise OSError(errno.ENOSYS, "the C library has no inotify") from None
    return libc


def _last_error(what: str) -> OSError:
    code = ctypes.get_errno()
    return OSError(code, os.strerror(code), what)


def decode_events(data: bytes) -> Iterator[tuple[int, int, str]]:
    """``(wd, mask, name)`` of each ``struct inotify_event`` in a buffer ``read(2)`` returned (``name`` is "" for an
    event on the watched folder itself and for ``IN_Q_OVERFLOW``, whose ``wd`` is -1)."""
    offset, size = 0, _EVENT.size
    while offset + size <= len(data):
        wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
        offset += size
        name = data[offset : offset + length].split(b"\0", 1)[0]
        offset += length
        yield wd, mask, os.fsdecode(name)


class InotifyWatcher:
    """A :class:`~._portable.DirWatcher` on one inotify descriptor: a watch on the root and one per session folder.

    Why not watchdog here: its recursive inotify watch keeps ~660 bytes of Python objects per folder (66 MiB and 4 s
    for 100,000 session folders) and, after a queue overflow, deletes and re-adds every watch of the tree. Here a
    folder costs one kernel watch and two dict entries (``wd -> name``, ``name -> wd``), and an overflow costs one
    listing of the root, adding watches only for the folders that appeared meanwhile. Events are read on one thread
    that sleeps in ``poll(2)`` (no timeout: idle, it costs nothing), woken by a pipe to stop.

    A new folder is reported to the sink after its watch is added, so the scan it triggers sees any file written
    before the watch existed. ``watch_limit`` stands in for ``fs.inotify.max_user_watches`` (tests: the real limit
    cannot be lowered unprivileged); reaching either gives ``ENOSPC``.
    """

    def __init__(self, root: str, sink: WatchSink, *, watch_limit: int | None = None) -> None:
        self._root = root
        self._sink = sink
        self._limit = watch_limit
        self._fd = -1
        self._wake: tuple[int, int] | None = None  # the stop pipe (read end, write end)
        self._root_wd = -1
        self._folders: dict[int, str] = {}  # wd -> session folder name
        self._wds: dict[str, int] = {}  # session folder name -> wd
        self._thread: threading.Thread | None = None
        self._lost = False

    @property
    def watched_folders(self) -> set[str]:
        """Names of the session folders watched now."""
        return set(self._wds)

    def start(self) -> None:
        if (
            sys.platform == "win32"
        ):  # (never: this module runs on Linux; so that mypy --platform win32 passes)
            raise OSError(errno.ENOSYS, "no inotify")
        libc = _libc()
        fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)  # IN_NONBLOCK and IN_CLOEXEC are these
        if fd < 0:
            raise _last_error("inotify_init1")
        self._fd = fd
        try:
            self._root_wd = self._add(self._root, _ROOT_MASK)
            self._watch_folders()
            self._wake = os.pipe()
        except BaseException:
            self._close()
            raise
        self._thread = threading.Thread(target=self._run, name="copilot-otel-inotify", daemon=True)
        self._thread.start()

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and not self._lost

    def stop(self, timeout_s: float) -> None:
        thread, self._thread = self._thread, None
        if thread is not None and self._wake is not None:
            os.write(self._wake[1], b"\0")
            if thread is not threading.current_thread():
                thread.join(timeout_s)
            if thread.is_alive():
                logger.warning("the file watcher did not stop within %.0fs; leaving it behind", timeout_s)
                return  # its descriptors stay open: closing them under a running reader could hit a reused number
        self._close()

    def _close(self) -> None:
        for fd in (self._fd, *(self._wake or ())):
            if fd >= 0:
                os.close(fd)
        self._fd, self._wake, self._root_wd = -1, None, -1
        self._folders.clear()
        self._wds.clear()

    # -- watches ---------------------------------------------------------------------------------

    def _add(self, path: str, mask: int) -> int:
        if self._limit is not None and len(self._folders) + (self._root_wd >= 0) >= self._limit:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
        wd: int = _libc().inotify_add_watch(self._fd, os.fsencode(path), mask)
        if wd < 0:
            raise _last_error(path)
        return wd

    def _watch_folder(self, name: str) -> None:
        """Watch ``root/name``; a folder that vanished or is a link is left alone, ``ENOSPC`` raises."""
        try:
            wd = self._add(os.path.join(self._root, name), _FOLDER_MASK)
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                raise
            return
        previous = self._folders.get(wd)  # the same folder under another name (a move we did not see)
        if previous is not None and previous != name:
            self._wds.pop(previous, None)
        self._folders[wd] = name
        self._wds[name] = wd

    def _watch_folders(self) -> None:
        """Watch every folder of the root not watched yet, and forget those gone (at start and after an overflow).

        One listing of the root, no ``stat``: the entries' types come with the listing."""
        with os.scandir(self._root) as it:
            present = [entry.name for entry in it if entry.is_dir(follow_symlinks=False)]
        for name in self._wds.keys() - set(present):
            self._folders.pop(self._wds.pop(name), None)
        missing = [name for name in present if name not in self._wds]
        for done, name in enumerate(missing):
            try:
                self._watch_folder(name)
            except OSError:
                raise OSError(
                    errno.ENOSPC,
                    f"the inotify watch limit (fs.inotify.max_user_watches) is reached: {len(missing) - done:,} of "
                    f"{len(present):,} session folders cannot be watched",
                    self._root,
                ) from None

    # -- events (the reading thread) ---------------------------------------------------------------

    def _run(self) -> None:
        if sys.platform == "win32" or self._wake is None:  # (never)
            return
        poller = select.poll()
        poller.register(self._fd, select.POLLIN)
        poller.register(self._wake[0], select.POLLIN)
        while True:
            if any(fd == self._wake[0] for fd, _ in poller.poll()):
                return
            try:
                data = os.read(self._fd, _READ_SIZE)
            except BlockingIOError:
                continue
            except OSError:
                logger.exception("reading inotify events of %s failed; the watch is rebuilt", self._root)
                self._lost = True
                return
            try:
                self.dispatch(data)
            except Exception:
                logger.exception("discovery failed to handle inotify events of %s", self._root)
            if self._lost:
                return

    def dispatch(self, data: bytes) -> None:
        """Act on a buffer of events as ``read(2)`` returned it; a file changed many times in it is reported once."""
        changed: dict[str, None] = {}
        for wd, mask, name in decode_events(data):
            if mask & IN_Q_OVERFLOW:
                self._overflowed()
            elif wd == self._root_wd:
                self._root_event(mask, name, changed)
            elif mask & IN_IGNORED:  # the folder was deleted (or its watch removed): forget it
                folder = self._folders.pop(wd, None)
                if folder is not None and self._wds.get(folder) == wd:
                    del self._wds[folder]
            elif name and not mask & IN_ISDIR and (folder := self._folders.get(wd)) is not None:
                changed[os.path.join(self._root, folder, name)] = None
        for path in changed:
            self._sink.changed(path)

    def _root_event(self, mask: int, name: str, changed: dict[str, None]) -> None:
        if not name:
            if mask & _ROOT_GONE:
                self._lost = True
                self._sink.root_lost()
            return
        path = os.path.join(self._root, name)
        if not mask & IN_ISDIR:
            changed[path] = None
        elif mask & (IN_CREATE | IN_MOVED_TO):
            try:
                self._watch_folder(name)
            except OSError as exc:
                self._sink.exhausted(exc)
            self._sink.folder_added(
                path
            )  # after its watch: the scan it causes sees what came before the watch
        elif mask & (IN_DELETE | IN_MOVED_FROM):
            wd = self._wds.pop(name, None)
            if wd is not None:
                self._folders.pop(wd, None)
                if mask & IN_MOVED_FROM:  # the watch follows the folder out of the root: drop it
                    _libc().inotify_rm_watch(self._fd, wd)
            self._sink.folder_removed(path)

    def _overflowed(self) -> None:
        """The kernel dropped events: folders may have come or gone unseen. Mend the watches, then tell the sink."""
        try:
            self._watch_folders()
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                self._sink.exhausted(exc)
        self._sink.overflowed()
