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

from ._portable import ServiceManager
from ._posix import Posix
from ._watch import DirWatcher, WatchSink

__all__ = ["InotifyWatcher", "Linux", "decode_events"]

logger = logging.getLogger("copilot_otel.daemon.discover")

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
# IN_MOVE_SELF: a folder moved out of the root must lose its watch (its events would come under a wrong name).
_FOLDER_MASK = _CHANGES | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK
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

    def release_free_memory(self) -> None:
        # glibc keeps freed heap pages (the big dict tables of a scan land on its heap, not in pymalloc's arenas)
        # until told: ~8 MiB at 100,000 sessions. musl has no malloc_trim and returns memory by itself.
        try:
            trim = getattr(_libc(), "malloc_trim", None)
        except OSError:
            return
        if trim is not None:
            trim(0)

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


class _WdTable:
    """``wd -> session folder name``, as a list indexed by ``wd`` (8 bytes a folder, where a dict costs ~80: 100,000
    folders take 9 MiB with their names instead of 17).

    Linux numbers a descriptor's watches 1, 2, 3, ... and never reuses a number before it wraps at ``INT_MAX``
    (``idr_alloc_cyclic``), so the list is as long as the watches this descriptor ever made (one per folder watched
    at start, one per folder created since). A number far past the end (another allocator) goes to a dict instead.
    """

    _FAR = 1 << 16  # a wd this far past the list's end is kept in the dict

    def __init__(self) -> None:
        self._names: list[str | None] = [None]
        self._far: dict[int, str] = {}
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def get(self, wd: int) -> str | None:
        return self._names[wd] if 0 <= wd < len(self._names) else self._far.get(wd)

    def __setitem__(self, wd: int, name: str) -> None:
        self._count += self.get(wd) is None
        if 0 <= wd < len(self._names) + self._FAR:
            if wd >= len(self._names):
                self._names.extend([None] * (wd + 1 - len(self._names)))
            self._names[wd] = name
        else:
            self._far[wd] = name

    def pop(self, wd: int, default: None = None) -> str | None:
        name = self.get(wd)
        if name is not None:
            self._count -= 1
            if 0 <= wd < len(self._names):
                self._names[wd] = None
            else:
                del self._far[wd]
        return name

    def items(self) -> Iterator[tuple[int, str]]:
        yield from ((wd, name) for wd, name in enumerate(self._names) if name is not None)
        yield from self._far.items()

    def values(self) -> Iterator[str]:
        return (name for _, name in self.items())

    def clear(self) -> None:
        self._names, self._far, self._count = [None], {}, 0


class InotifyWatcher:
    """A :class:`~._portable.DirWatcher` on one inotify descriptor: a watch on the root and one per session folder.

    Why not watchdog here: its recursive inotify watch keeps ~660 bytes of Python objects per folder (66 MiB and 4 s
    for 100,000 session folders) and, after a queue overflow, deletes and re-adds every watch of the tree. Here a
    folder costs one kernel watch and one ``wd -> name`` entry (~100 bytes: the name and a list slot), and an
    overflow costs one listing of the root, adding watches only for the folders that appeared meanwhile. Events are read on one thread
    that sleeps in ``poll(2)`` (no timeout: idle, it costs nothing), woken by a pipe to stop.

    A new folder is reported to the sink after its watch is added, so the scan it triggers sees any file written
    before the watch existed. A folder renamed within the root keeps its watch (``inotify_add_watch`` on the new name
    returns the same ``wd``, which takes the new name, before the folder's own ``IN_MOVE_SELF`` arrives); one moved
    out of the root gets its ``IN_MOVE_SELF`` without that and its watch is removed. ``watch_limit`` stands in for ``fs.inotify.max_user_watches`` (tests: the real limit
    cannot be lowered unprivileged); reaching either gives ``ENOSPC``.
    """

    def __init__(self, root: str, sink: WatchSink, *, watch_limit: int | None = None) -> None:
        self._root = root
        self._sink = sink
        self._limit = watch_limit
        self._fd = -1
        self._wake: tuple[int, int] | None = None  # the stop pipe (read end, write end)
        self._root_wd = -1
        self._folders = _WdTable()  # wd -> folder below the root (its name; deeper: its relative path)
        self._depth = max(1, sink.watch_depth())
        self._renamed: set[int] = (
            set()
        )  # watches given a new name whose folder's IN_MOVE_SELF is still to come
        self._thread: threading.Thread | None = None
        self._lost = False

    @property
    def watched_folders(self) -> set[str]:
        """The folders watched now, by their path below the root (a session folder's name at the first level)."""
        return set(self._folders.values())

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
        self._renamed.clear()

    # -- watches ---------------------------------------------------------------------------------

    def _add(self, path: str, mask: int) -> int:
        if self._limit is not None and len(self._folders) + (self._root_wd >= 0) >= self._limit:
            code = errno.ENOSPC
        else:
            wd: int = _libc().inotify_add_watch(self._fd, os.fsencode(path), mask)
            if wd >= 0:
                return wd
            code = ctypes.get_errno()
        if code == errno.ENOSPC:  # (its strerror, "No space left on device", would mislead)
            raise OSError(code, "the inotify watch limit (fs.inotify.max_user_watches) is reached", path)
        raise OSError(code, os.strerror(code), path)

    def _watch_folder(self, name: str) -> bool:
        """Watch ``root/name`` (``name`` a path below the root); a folder that vanished or is a link is left alone
        (false), ``ENOSPC`` raises."""
        try:
            wd = self._add(os.path.join(self._root, name), _FOLDER_MASK)
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                raise
            return False
        previous = self._folders.get(wd)
        if previous is not None and previous != name:
            self._renamed.add(wd)  # the same folder under a new name: renamed within the root
            self._rename_below(previous, name)
        self._folders[wd] = name
        return True

    def _rename_below(self, old: str, new: str) -> None:
        """The watched folders below a renamed one take its new name (their watches stay)."""
        prefix = old + os.sep
        for wd, name in list(self._folders.items()):
            if name.startswith(prefix):
                self._folders[wd] = new + name[len(old) :]

    def _subfolders(self, name: str) -> list[str]:
        """The folders in ``root/name`` (``""``: the root) the sink wants watched; one listing, no ``stat``."""
        folder = os.path.join(self._root, name) if name else self._root
        try:
            with os.scandir(folder) as it:
                names = [entry.name for entry in it if entry.is_dir(follow_symlinks=False)]
        except OSError:
            if not name:
                raise  # the root cannot be listed: the watch cannot start
            return []  # gone meanwhile
        children = [os.path.join(name, child) if name else child for child in names]
        return [child for child in children if self._sink.wants_folder(child)]

    def _watch_below(self, name: str) -> None:
        """Watch the wanted folders below ``root/name``, down to the sink's depth: a folder that appears may come
        with folders in it already (``mkdir -p``, a move, a CLI that creates ``<session>/subagents`` at once)."""
        if name.count(os.sep) + 1 >= self._depth:
            return
        for child in self._subfolders(name):
            if self._watch_folder(child):
                self._watch_below(child)

    def _watch_folders(self) -> None:
        """Watch every folder of the tree not watched yet, and forget those gone (at start and after an overflow).

        One listing of the root (and, for a deeper tree, of each watched folder above the sink's depth), no
        ``stat``: the entries' types come with the listing."""
        present: set[str] = set()
        level = [""]
        for _ in range(self._depth):
            level = [child for name in level for child in self._subfolders(name)]
            present.update(level)
        for wd in [wd for wd, name in self._folders.items() if name not in present]:
            self._folders.pop(wd)
        missing = present - set(self._folders.values())
        for done, name in enumerate(sorted(missing)):
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
                self._folders.pop(wd, None)
            elif mask & IN_MOVE_SELF:
                self._moved(wd)
            elif name and (folder := self._folders.get(wd)) is not None:
                if not mask & IN_ISDIR:
                    changed[os.path.join(self._root, folder, name)] = None
                elif folder.count(os.sep) + 1 < self._depth:
                    self._folder_event(os.path.join(folder, name), mask)
        for path in changed:
            self._sink.changed(path)

    def _root_event(self, mask: int, name: str, changed: dict[str, None]) -> None:
        if not name:
            if mask & _ROOT_GONE:
                self._lost = True
                self._sink.root_lost()
            return
        if not mask & IN_ISDIR:
            changed[os.path.join(self._root, name)] = None
        else:
            self._folder_event(name, mask)

    def _folder_event(self, name: str, mask: int) -> None:
        """A folder ``name`` (below the root, within the sink's depth) appeared or went away."""
        if not self._sink.wants_folder(name):
            return
        path = os.path.join(self._root, name)
        if mask & (IN_CREATE | IN_MOVED_TO):
            try:
                if self._watch_folder(name):
                    self._watch_below(name)
            except OSError as exc:
                self._sink.exhausted(exc)
            # After its watch: the scan it causes sees what came before the watch.
            self._sink.folder_added(path)
        elif mask & (IN_DELETE | IN_MOVED_FROM):  # its watch goes with IN_IGNORED, or at its IN_MOVE_SELF
            self._sink.folder_removed(path)

    def _moved(self, wd: int) -> None:
        """A watched folder was renamed: still ours if the root's ``IN_MOVED_TO`` gave its watch the new name."""
        if wd in self._renamed:
            self._renamed.discard(wd)
        elif (name := self._folders.pop(wd, None)) is not None:  # moved out of the tree: no longer ours
            _libc().inotify_rm_watch(self._fd, wd)
            for below, inner in list(self._folders.items()):  # nor are the folders it took with it
                if inner.startswith(name + os.sep):
                    self._folders.pop(below)
                    _libc().inotify_rm_watch(self._fd, below)

    def _overflowed(self) -> None:
        """The kernel dropped events: folders may have come or gone unseen. Mend the watches, then tell the sink."""
        try:
            self._watch_folders()
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                self._sink.exhausted(exc)
        self._sink.overflowed()
