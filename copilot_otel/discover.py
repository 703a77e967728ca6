"""Find Copilot CLI session logs: inotify (watchdog) as a hint, a full rescan as the truth.

Session logs live in ``<root>/<sessionId>/events.jsonl`` and, for old CLI versions, in flat
``<root>/<sessionId>.jsonl`` files; ``root`` is normally ``~/.copilot/session-state``.

:meth:`Discovery.scan` lists them with ``os.scandir`` and one ``stat`` per session directory (no file
content is read): it is the source of truth and the daemon calls it periodically (reliability rule 8).
:meth:`Discovery.start` adds low latency: a watchdog observer on ``root`` (recursive) calls
``on_change(path)`` for every created, modified, moved or deleted session log. The watcher is only a
hint, because inotify loses events silently:

* a new session directory is scanned as soon as its creation is seen, so a file written before the
  watch on the directory exists is still reported (checklist #11);
* a kernel queue overflow (watchdog rebuilds its watches and logs "Inotify queue overflowed") is
  counted in :attr:`Discovery.overflows` and followed by a full scan reporting every file (#12);
* if the observer cannot start at all (inotify instance/watch limit, NFS, ...) discovery logs one
  warning and polls: a rescan plus one ``stat`` per file every ``poll_interval_s`` (#13, #40);
* watchdog skips sub-directories it cannot watch (``max_user_watches`` reached) without telling anyone, so
  discovery checks, after the observer starts and whenever session directories appear, that each one is really
  watched (the platform seam reads the inotify instance's watch list). A session directory left unwatched on two
  checks in a row means the watches are exhausted: one warning, the observer is stopped (its watches go back to
  the system) and discovery polls for the rest of the run; :attr:`Discovery.degraded` says why, and ``mode`` is
  ``"polling"``. A root that cannot be watched at all (ENOSPC, EMFILE) is reported the same way.

``root`` may not exist yet (Copilot never ran): discovery checks for it every ``poll_interval_s`` and
starts watching when it appears; the same happens if ``root`` is deleted and re-created. Whenever a watch
(or polling) starts, ``on_change`` is called once for every session log already present, so nothing
created before the watch existed is missed.

``on_change`` runs on watchdog's or discovery's own thread and must be cheap and thread-safe (the daemon
adds the path to a set and sets an ``Event``). The same path may be reported many times (one per
append): consumers read to EOF and never count events. Exceptions from ``on_change`` are logged and
swallowed so they cannot kill the observer.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver

from ._platform import current
from .sessions import stays_inside

__all__ = ["EVENTS_FILE", "LEGACY_SUFFIX", "Discovery", "DiscoveryMode", "ObserverFactory"]

logger = logging.getLogger(__name__)

EVENTS_FILE = "events.jsonl"
LEGACY_SUFFIX = ".jsonl"
# How often to look for a missing root, check the watched root is still the same directory, and (in
# polling mode) rescan. One stat per second is negligible; polling 10k files costs ~10-20 ms per round.
DEFAULT_POLL_INTERVAL_S = 1.0
# Events that can mean "a session log appeared, grew or went away". Opened/closed events are left
# out on purpose: our own reads would otherwise wake the daemon.
_EVENT_FILTER: list[type[FileSystemEvent]] = [
    FileCreatedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileDeletedEvent,
    DirCreatedEvent,
    DirMovedEvent,
    DirDeletedEvent,
]
# watchdog >= 7 logs this (logger below) when the kernel's inotify queue overflowed and events were lost.
_WATCHDOG_OVERFLOW_LOGGER = "watchdog.observers.inotify_c"
_WATCHDOG_OVERFLOW_TEXT = "Inotify queue overflowed"

# A failing on_change (or a failing scan) is logged at most this often.
_CALLBACK_ERROR_LOG_INTERVAL_S = 60.0

DiscoveryMode = Literal["stopped", "waiting", "inotify", "polling"]
ObserverFactory = Callable[[], BaseObserver]
# What a scan keeps of a log: the hash of its (inode, size, mtime_ns), one int (a scan of 100,000 logs holds 100,000
# of them: tuples of three ints cost ~16 MB more). Only compared for equality, within one process.
_StatKey = int


# In polling mode (no notifications) the scan is the mechanism; with a huge history it is also the main cost, so its
# period grows until it takes at most this share of one core (100,000 sessions: a ~1 s scan every ~50 s; the files
# with an open prompt are stat-polled four times a second by the daemon whatever this says).
_POLL_SHARE = 0.02


class Discovery:
    """Discover session logs under ``root`` and report changes to ``on_change``.

    Args:
        root: The ``session-state`` directory (need not exist yet).
        on_change: Called with the path of a session log that appeared, changed, moved or vanished.
        poll_interval_s: Period of the root check and, in polling mode, of the rescan.
        force_polling: Never use inotify (e.g. a known network filesystem).
        observer_factory: Builds the watchdog observer (default: the platform's native ``Observer``).
        on_resync: Called instead of reporting every session log one by one when a watch (or polling) starts or
            events were lost: the caller compares a full :meth:`scan_stats` with what it knows (the daemon, which
            knows 100,000 logs by their stat and would otherwise take 100,000 calls and ``stat``s at each start).
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        on_change: Callable[[Path], None],
        *,
        poll_interval_s: float = DEFAULT_POLL_INTERVAL_S,
        force_polling: bool = False,
        observer_factory: ObserverFactory = Observer,
        on_resync: Callable[[], None] | None = None,
    ) -> None:
        if poll_interval_s <= 0:
            raise ValueError(f"Expected poll_interval_s to be > 0, got {poll_interval_s!r}")
        self._root = Path(root)
        self._root_str = os.fspath(self._root)
        self._on_change = on_change
        self._poll_interval_s = poll_interval_s
        self._force_polling = force_polling
        self._observer_factory = observer_factory
        self._on_resync = on_resync
        self._scan_for: Callable[[dict[str, _StatKey], float], None] | None = None
        # In polling mode a poll costs one stat per session: it runs at most this share of the time.
        self._poll_cost_s = 0.0
        self._observer: BaseObserver | None = None
        self._watched_root: tuple[int, int] | None = None  # (dev, ino) of the root being watched
        # The root with symlinks resolved, when that differs: FSEvents (macOS) reports real paths, so a root reached
        # through a symlink (/tmp is /private/tmp there; synced folders) would match no event.
        self._real_prefix: str | None = None
        self._polled: dict[str, _StatKey] = {}
        self._real_root: str | None = None
        self.refused: dict[str, str] = {}
        """Session logs not read, and why (a link out of the folder, a FIFO): each said once."""
        self._mode: DiscoveryMode = "stopped"
        self._stop = threading.Event()
        self._wake = threading.Event()  # root deleted / overflow: act before the next poll tick
        self._overflowed = threading.Event()
        self._thread: threading.Thread | None = None
        self._state_lock = threading.Lock()
        self._overflow_filter = _OverflowFilter(self)
        self.overflows = 0
        """inotify queue overflows seen (each triggers a full scan)."""
        self.observer_failures = 0
        """Times the observer could not be started (then discovery polls)."""
        self.callback_errors = 0
        """Exceptions raised by ``on_change`` (logged at most once a minute, then swallowed)."""
        self._last_callback_error_log = float("-inf")
        self.scan_errors = 0
        """Scans of ``root`` that failed (EMFILE, EACCES...; logged at most once a minute)."""
        self._last_scan_error_log = float("-inf")
        self.degraded = ""
        """Why discovery polls although inotify was wanted ("inotify watches exhausted"), or ""."""
        self._verify_watches = False  # session directories appeared: check they are really watched
        self._unwatched: set[int] = set()  # inodes of session directories found unwatched on the last check

    @property
    def root(self) -> Path:
        """The watched ``session-state`` directory."""
        return self._root

    @property
    def mode(self) -> DiscoveryMode:
        """``"inotify"`` (watching), ``"polling"`` (fallback), ``"waiting"`` (no root) or ``"stopped"``."""
        return self._mode

    def scan_stats(self) -> dict[str, int]:
        """Every session log under ``root`` now, with the hash of its ``(inode, size, mtime_ns)``: what :meth:`scan`
        lists, and what a caller that knows logs by their stat compares without a ``stat`` of its own."""
        return self._scan_stat()

    def scan(self) -> list[str]:
        """Every session log under ``root`` now, sorted: ``<id>/events.jsonl`` and legacy ``<id>.jsonl``.

        One ``scandir`` of ``root`` plus one ``stat`` per session directory; no file is opened. A missing
        ``root`` gives an empty list. Path strings, not ``Path`` objects: the daemon's periodic rescan of
        thousands of idle sessions compares them with the keys it follows and builds a ``Path`` only for new ones.
        """
        return sorted(self._scan_stat())

    def start(self, *, background: bool = False) -> None:
        """Start watching and the supervisor thread that handles a late root, fallback polling and overflows.

        The watch is set up before this returns (so nothing written after it is missed), unless ``background``: then
        the supervisor sets it up (a recursive inotify watch of 100,000 session folders takes seconds) and calls
        ``on_resync`` once it is up, so the caller's scan then covers what changed meanwhile.
        """
        if self._thread is not None:
            raise RuntimeError("Discovery.start() called twice")
        self._stop.clear()
        logging.getLogger(_WATCHDOG_OVERFLOW_LOGGER).addFilter(self._overflow_filter)
        self._mode = "waiting"
        if background:
            self._wake.set()  # the supervisor's first tick runs at once
        else:
            self._tick()
        self._thread = threading.Thread(target=self._run, name="copilot-otel-discovery", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the observer and the supervisor thread (idempotent); waits at most ``timeout_s``."""
        self._stop.set()
        self._wake.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)
        self._stop_observer(timeout_s)
        logging.getLogger(_WATCHDOG_OVERFLOW_LOGGER).removeFilter(self._overflow_filter)
        self._mode = "stopped"

    def __enter__(self) -> Discovery:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- scanning --------------------------------------------------------------------------------

    def _scan_stat(self) -> dict[str, _StatKey]:
        """Path -> (inode, size, mtime_ns) of every session log under root."""
        found: dict[str, _StatKey] = {}
        try:
            it = os.scandir(self._root_str)
        except (FileNotFoundError, NotADirectoryError):
            return found
        except OSError as exc:
            self.scan_errors += 1
            now = time.monotonic()
            if now - self._last_scan_error_log >= _CALLBACK_ERROR_LOG_INTERVAL_S:
                self._last_scan_error_log = now
                logger.warning(
                    "cannot scan %s: %s (%d failed scans so far)", self._root_str, exc, self.scan_errors
                )
            return found
        with it:
            for entry in it:
                try:
                    if entry.is_dir():
                        path = os.path.join(entry.path, EVENTS_FILE)
                        st = os.lstat(path)  # the one syscall a session costs: a regular file needs no other
                        linked = entry.is_symlink()
                    elif entry.name.endswith(LEGACY_SUFFIX):
                        path = entry.path
                        st = entry.stat(follow_symlinks=False)
                        linked = False
                    else:
                        continue
                    if linked or stat.S_ISLNK(st.st_mode):
                        if not self._inside(path):
                            self._refuse(path, "it is a link that leads out of the session-state folder")
                            continue
                        st = os.stat(path)
                except OSError:
                    continue  # no events.jsonl (yet), or vanished meanwhile
                if stat.S_ISREG(st.st_mode):
                    found[path] = hash((st.st_ino, st.st_size, st.st_mtime_ns))
                else:
                    self._refuse(path, "it is not a regular file (a FIFO, a device or a folder)")
        return found

    def _inside(self, path: str) -> bool:
        """:func:`~copilot_otel.sessions.stays_inside` the session-state folder (its resolved path read once)."""
        real_root = self._real_root or os.path.realpath(self._root_str)
        self._real_root = real_root
        return stays_inside(path, real_root)

    def _refuse(self, path: str, why: str) -> None:
        """A session log that is not read: said once per path (every scan finds it again), and counted."""
        if path in self.refused:
            return
        self.refused[path] = why
        logger.warning("skipped %s: %s; it is not read", path, why)

    def _is_session_log(self, path: str) -> bool:
        parent, name = os.path.split(path)
        if parent == self._root_str:
            return name.endswith(LEGACY_SUFFIX)
        return name == EVENTS_FILE and os.path.dirname(parent) == self._root_str

    def _notify(self, path: str) -> None:
        try:
            self._on_change(Path(path))
        except Exception:
            self.callback_errors += 1
            now = time.monotonic()
            if now - self._last_callback_error_log >= _CALLBACK_ERROR_LOG_INTERVAL_S:
                self._last_callback_error_log = now
                logger.exception(
                    "discovery on_change callback failed for %s (%d failures so far)",
                    path,
                    self.callback_errors,
                )

    def _notify_all(self) -> None:
        if self._on_resync is not None:
            try:
                self._on_resync()
            except Exception:
                logger.exception("discovery on_resync callback failed")
            return
        for path in sorted(self._scan_stat()):
            self._notify(path)

    def _scan_session_dir(self, directory: str) -> None:
        """A session directory appeared: report its log now (the watch may have come too late)."""
        path = os.path.join(directory, EVENTS_FILE)
        try:
            st = os.stat(path)
        except OSError:
            return
        if stat.S_ISREG(st.st_mode):
            self._notify(path)

    # -- watchdog callbacks (watchdog's thread) ---------------------------------------------------

    def _as_given(self, path: str) -> str:
        """An event path under the resolved root, spelled under the root as configured."""
        real = self._real_prefix
        if real is not None and (path == real or path.startswith(real + os.sep)):
            return self._root_str + path[len(real) :]
        return path

    def _on_event(self, event: FileSystemEvent) -> None:
        src = self._as_given(os.fsdecode(event.src_path))
        dest = self._as_given(os.fsdecode(event.dest_path)) if event.dest_path else ""
        if event.is_directory:
            if src == self._root_str and isinstance(event, (DirDeletedEvent, DirMovedEvent)):
                self._wake.set()  # the root itself went away: the supervisor re-establishes the watch
                return
            if os.path.dirname(src) == self._root_str and isinstance(event, (DirDeletedEvent, DirMovedEvent)):
                self._notify(os.path.join(src, EVENTS_FILE))  # its log went away with it
            if isinstance(event, DirCreatedEvent) and os.path.dirname(src) == self._root_str:
                self._scan_session_dir(src)
                self._verify_watches = True
            if dest and os.path.dirname(dest) == self._root_str:
                self._scan_session_dir(dest)
                self._verify_watches = True
            return
        if self._is_session_log(src):
            self._notify(src)
        if dest and self._is_session_log(dest):
            self._notify(dest)

    def _on_overflow(self) -> None:
        self.overflows += 1
        self._overflowed.set()
        self._wake.set()

    # -- supervisor ------------------------------------------------------------------------------

    def request_scan(self, deliver: Callable[[dict[str, _StatKey], float], None]) -> None:
        """Scan on discovery's thread and hand ``deliver`` the result and what it cost (seconds), soon.

        A scan of 100,000 session folders takes a second or more; done here, the caller's loop keeps reading live
        logs meanwhile (it only compares the result, which is quick). Requests made while one waits are one scan.
        Before :meth:`start` (or after :meth:`stop`) the scan runs at once on the calling thread.
        """
        if self._thread is None:
            started = time.monotonic()
            deliver(self._scan_stat(), time.monotonic() - started)
            return
        self._scan_for = deliver
        self._wake.set()

    def _scan_requested(self) -> None:
        deliver, self._scan_for = self._scan_for, None
        if deliver is None:
            return
        started = time.monotonic()
        stats = self._scan_stat()
        try:
            deliver(stats, time.monotonic() - started)
        except Exception:
            logger.exception("discovery scan callback failed")

    def _run(self) -> None:
        while not self._stop.is_set():
            period = self._poll_interval_s
            if self._mode == "polling":
                period = max(period, self._poll_cost_s / _POLL_SHARE)
            if self._scan_for is None:
                self._wake.wait(period)
            self._wake.clear()
            if self._stop.is_set():
                break
            try:
                self._scan_requested()  # first: a watch being built (seconds) must not delay it
                self._tick()
            except Exception:
                logger.exception("discovery supervisor failed; retrying in %.1f s", self._poll_interval_s)

    def _tick(self) -> None:
        """One supervisor step: follow the root's existence, keep a watch or poll, handle overflows."""
        with self._state_lock:
            try:
                st = os.stat(self._root_str)
                root_id: tuple[int, int] | None = (st.st_dev, st.st_ino) if stat.S_ISDIR(st.st_mode) else None
            except OSError:
                root_id = None
            if root_id is None:
                if self._mode == "inotify":
                    logger.info("%s disappeared; waiting for it to be re-created", self._root_str)
                    self._stop_observer(5.0)
                if self._mode != "polling":
                    self._mode = "waiting"
                    return
            if self._mode == "polling":
                self._poll_once()
                return
            if self._mode == "inotify" and root_id == self._watched_root and self._observer_alive():
                if self._overflowed.is_set():
                    self._overflowed.clear()
                    logger.warning("inotify queue overflowed below %s: rescanning everything", self._root_str)
                    self._notify_all()
                if self._verify_watches and self._watches_exhausted():
                    self._stop_observer(5.0)
                    self._mode = "polling"
                    self._poll_once()
                return
            # Need a (new) watch: first start, root (re-)created, or the observer died.
            self._stop_observer(5.0)
            real = os.path.realpath(self._root_str)
            self._real_prefix = real if real != self._root_str else None
            if self._force_polling or not self._start_observer():
                self._mode = "polling"
                self._poll_once()
                return
            self._watched_root = root_id
            self._mode = "inotify"
            self._overflowed.clear()
            self._verify_watches = True  # on the next tick, once the observer has added its watches
            self._notify_all()

    def _start_observer(self) -> bool:
        handler = _Handler(self)
        try:
            observer = self._observer_factory()
            observer.daemon = True
            observer.schedule(handler, self._root_str, recursive=True, event_filter=_EVENT_FILTER)
            observer.start()
        except Exception as exc:  # OSError (ENOSPC watch limit, EMFILE instances), or a broken platform
            self.observer_failures += 1
            if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EMFILE):
                self.degraded = (
                    "inotify watches exhausted"
                    if exc.errno == errno.ENOSPC
                    else "inotify instances exhausted"
                )
            logger.warning(
                "cannot watch %s for changes (%s); falling back to polling every %.1f s",
                self._root_str,
                exc,
                self._poll_interval_s,
            )
            return False
        self._observer = observer
        return True

    def _watches_exhausted(self) -> bool:
        """True when a session directory stayed unwatched on two checks in a row (then it says so, once).

        Twice, because a directory created a moment ago may not have its watch yet. One ``scandir`` of the root and
        one read of the watch list; done only after the observer started or session directories appeared.
        """
        watched = current.inotify_watched_inodes()
        if watched is None:  # cannot tell on this OS
            self._verify_watches = False
            return False
        try:
            with os.scandir(self._root_str) as it:
                dirs = {entry.inode() for entry in it if entry.is_dir(follow_symlinks=False)}
        except OSError:
            return False  # (retried on the next tick)
        unwatched = dirs - watched
        confirmed = unwatched & self._unwatched
        self._unwatched = unwatched
        if not unwatched:
            self._verify_watches = False
        if not confirmed:
            return False
        self.degraded = "inotify watches exhausted"
        logger.warning(
            "inotify watches exhausted: %d of %d session folders in %s cannot be watched (fs.inotify.max_user_watches "
            "reached); polling every %.1f s from now on (raise the limit, e.g. sysctl fs.inotify.max_user_watches="
            "524288, and restart to watch again)",
            len(unwatched),
            len(dirs),
            self._root_str,
            self._poll_interval_s,
        )
        return True

    @property
    def description(self) -> str:
        """``mode`` with the reason it is degraded: ``"polling (inotify watches exhausted)"``."""
        return f"{self._mode} ({self.degraded})" if self.degraded and self._mode == "polling" else self._mode

    def _observer_alive(self) -> bool:
        return self._observer is not None and self._observer.is_alive()

    def _stop_observer(self, timeout_s: float) -> None:
        observer, self._observer = self._observer, None
        self._watched_root = None
        if observer is None:
            return

        # watchdog's stop() joins its inotify reader thread without a timeout, and that thread can miss the
        # wake-up when the stop comes right after the start (a Ctrl-C as the daemon starts hung it for good).
        # Stop it on a helper thread and wait a bounded time: a stuck reader is a daemon thread, left behind.
        def stop() -> None:
            try:
                observer.stop()
                if observer.is_alive() and observer is not threading.current_thread():
                    observer.join(timeout_s)
            except Exception:
                logger.exception("stopping the watchdog observer failed")

        stopper = threading.Thread(target=stop, name="copilot-otel-observer-stop", daemon=True)
        stopper.start()
        stopper.join(timeout_s)
        if stopper.is_alive():
            logger.warning("the file watcher did not stop within %.0fs; leaving it behind", timeout_s)

    def _poll_once(self) -> None:
        started = time.monotonic()
        current = self._scan_stat()
        self._poll_cost_s = time.monotonic() - started
        previous, self._polled = self._polled, current
        if not previous and self._on_resync is not None:
            self._notify_all()  # the first poll: the caller compares the whole scan itself
            return
        for path, key in current.items():
            if previous.get(path) != key:
                self._notify(path)
        for path in previous.keys() - current.keys():
            self._notify(path)


class _Handler(FileSystemEventHandler):
    def __init__(self, discovery: Discovery) -> None:
        super().__init__()
        self._discovery = discovery

    def on_any_event(self, event: FileSystemEvent) -> None:
        try:
            self._discovery._on_event(event)  # the handler is part of Discovery
        except Exception:
            logger.exception("discovery failed to handle %r", event)


class _OverflowFilter(logging.Filter):
    """Spot watchdog's overflow warning (watchdog has no overflow callback for handlers)."""

    def __init__(self, discovery: Discovery) -> None:
        super().__init__()
        self._discovery = discovery

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg == _WATCHDOG_OVERFLOW_TEXT or str(record.msg).startswith(_WATCHDOG_OVERFLOW_TEXT):
            self._discovery._on_overflow()
        return True
