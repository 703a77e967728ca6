"""Find Copilot CLI session logs: change notifications as a hint, a full rescan as the truth.

Session logs live in ``<root>/<sessionId>/events.jsonl`` and, for old CLI versions, in flat
``<root>/<sessionId>.jsonl`` files; ``root`` is normally ``~/.copilot/session-state``.

:meth:`Discovery.request_scan` lists them with ``os.scandir`` and one ``stat`` per session directory (no file
content is read): it is the source of truth and the daemon asks for it periodically (reliability rule 8).
:meth:`Discovery.start` adds low latency: the platform's watcher (:meth:`~._platform.Platform.dir_watcher`: one
inotify descriptor with a watch on ``root`` and on each session folder on Linux, watchdog's FSEvents or
``ReadDirectoryChangesW`` tree watch elsewhere) leads to ``on_change(path)`` for every created, modified, moved or
deleted session log. The watcher is only a hint, because notifications can be lost:

* a new session directory is scanned as soon as its creation is seen, after its watch is added, so a file written
  before the watch existed is still reported (checklist #11);
* a kernel queue overflow (``IN_Q_OVERFLOW``) is followed by one full
  scan reporting every file (#12); the inotify watcher first adds watches for the folders that came meanwhile (one
  listing of the root), nothing else re-walks the tree;
* if the watcher cannot start (inotify missing, its instance or watch limit reached, NFS, ...) discovery logs one
  warning and polls: a rescan plus one ``stat`` per file every ``poll_interval_s`` (#13, #40); a session folder
  that appears later and cannot be watched (``fs.inotify.max_user_watches`` reached) does the same. Then
  :attr:`Discovery.degraded` says why, ``mode`` is ``"polling"`` and ``status``/``doctor`` show both.

``root`` may not exist yet (Copilot never ran): discovery checks for it every ``poll_interval_s`` and
starts watching when it appears; the same happens if ``root`` is deleted and re-created. Whenever a watch
(or polling) starts, ``on_change`` is called once for every session log already present, so nothing
created before the watch existed is missed.

``on_change`` runs on the watcher's or discovery's own thread and must be cheap and thread-safe (the daemon
adds the path to a set and sets an ``Event``). The same path may be reported many times (one per
append): consumers read to EOF and never count events. Exceptions from ``on_change`` are logged and
swallowed so they cannot kill the watcher.
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
from typing import TYPE_CHECKING, Literal

from .._platform import DirWatcher, WatchSink, current
from ..sources.sessions import stays_inside

if TYPE_CHECKING:
    from .._platform._watchdog import ObserverFactory

__all__ = [
    "EVENTS_FILE",
    "LEGACY_SUFFIX",
    "Discoveries",
    "Discovery",
    "DiscoveryMode",
    "Layout",
    "WatcherFactory",
]

logger = logging.getLogger(__name__)

EVENTS_FILE = "events.jsonl"
LEGACY_SUFFIX = ".jsonl"
# How often to look for a missing root, check the watched root is still the same directory, and (in
# polling mode) rescan. One stat per second is negligible; polling 10k files costs ~10-20 ms per round.
DEFAULT_POLL_INTERVAL_S = 1.0
# A failing on_change (or a failing scan) is logged at most this often.
_CALLBACK_ERROR_LOG_INTERVAL_S = 60.0
# In polling mode (no notifications) the scan is the mechanism; with a huge history it is also the main cost, so its
# period grows until it takes at most this share of one core (100,000 sessions: a ~1 s scan every ~50 s; the files
# with an open prompt are stat-polled four times a second by the daemon whatever this says).
_POLL_SHARE = 0.02
# Why discovery polls, by the error that stopped the watcher (``status`` and ``doctor`` show it).
_DEGRADED = {
    errno.ENOSPC: "inotify watches exhausted",
    errno.EMFILE: "inotify instances exhausted",
    errno.ENOSYS: "no inotify on this system",
}
_RAISE_LIMIT = (
    " (raise the limit, e.g. sysctl fs.inotify.max_user_watches=524288, and restart to watch again)"
)

DiscoveryMode = Literal["stopped", "waiting", "inotify", "polling"]
WatcherFactory = Callable[[str, WatchSink], DirWatcher]
# What a scan keeps of a log: the hash of its (inode, size, mtime_ns), one int (a scan of 100,000 logs holds 100,000
# of them: tuples of three ints cost ~16 MB more). Only compared for equality, within one process.
_StatKey = int


class _Scan:
    """The truth: every session log under the root now, with its stat (the ones refused are said once, with why).

    Its own piece because the daemon's periodic rescan, polling, the catch-up after a watch starts or events were lost,
    and a new folder's check all ask the same questions of the tree, with the same link rules."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._refused: set[str] = set()  # the paths said to be skipped
        self.errors = 0
        self._last_error_log = float("-inf")
        self._real_root: str | None = None

    def stats(self) -> dict[str, _StatKey]:
        """Path -> hash of (inode, size, mtime_ns) of every session log under root (empty if root is missing)."""
        found: dict[str, _StatKey] = {}
        try:
            it = os.scandir(self.root)
        except (FileNotFoundError, NotADirectoryError):
            return found
        except OSError as exc:
            self.failed(exc)
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
                        if not self.inside(path):
                            self.refuse(path, "it is a link that leads out of the session-state folder")
                            continue
                        st = os.stat(path)
                except OSError:
                    continue  # no events.jsonl (yet), or vanished meanwhile
                if stat.S_ISREG(st.st_mode):
                    found[path] = hash((st.st_ino, st.st_size, st.st_mtime_ns))
                else:
                    self.refuse(path, "it is not a regular file (a FIFO, a device or a folder)")
        return found

    def failed(self, exc: OSError) -> None:
        """The root could not be listed: counted, and said at most once a minute."""
        self.errors += 1
        now = time.monotonic()
        if now - self._last_error_log >= _CALLBACK_ERROR_LOG_INTERVAL_S:
            self._last_error_log = now
            logger.warning("cannot scan %s: %s (%d failed scans so far)", self.root, exc, self.errors)

    depth = 1  # a folder per session, directly in the root

    def wants_folder(self, relative: str) -> bool:
        return True

    def logs_in(self, directory: str) -> list[str]:
        """The session log of a session folder that just appeared, if it has one already."""
        path = os.path.join(directory, EVENTS_FILE)
        try:
            return [path] if stat.S_ISREG(os.stat(path).st_mode) else []
        except OSError:
            return []

    def log_of_removed(self, directory: str) -> str | None:
        """The log that went away with a session folder (``None``: only a full scan can tell)."""
        return os.path.join(directory, EVENTS_FILE)

    def is_session_log(self, path: str) -> bool:
        parent, name = os.path.split(path)
        if parent == self.root:
            return name.endswith(LEGACY_SUFFIX)
        return name == EVENTS_FILE and os.path.dirname(parent) == self.root

    def inside(self, path: str) -> bool:
        """:func:`~copilot_otel.sources.sessions.stays_inside` the session-state folder (its resolved path read once)."""
        real_root = self._real_root or os.path.realpath(self.root)
        self._real_root = real_root
        return stays_inside(path, real_root)

    def refuse(self, path: str, why: str) -> None:
        """A session log that is not read: said once per path (every scan finds it again), and counted."""
        if path in self._refused:
            return
        self._refused.add(path)
        logger.warning("skipped %s: %s; it is not read", path, why)


class _TreeScan:
    """The truth for a deeper tree of another agent's logs (Claude Code's ``projects``, Codex's ``sessions``,
    Gemini CLI's ``tmp``): the same questions as :class:`_Scan`, with the same link rules, over folders down to
    :attr:`depth`.

    The layouts are the ones :func:`copilot_otel.sources.claude_code.reader.scan`, :func:`copilot_otel.sources.codex.reader.
    scan` and :func:`copilot_otel.sources.gemini.reader.scan` read (``tests/test_daemon_other_agents.py`` holds them equal over every fixture); here they are folder and
    file names only, as for Copilot's, because discovery sits below the readers. A scan lists each wanted folder once
    (``scandir``) and ``lstat``s each log; no file is opened.

    Args:
        root: The agent's log folder.
        depth: How deep below ``root`` folders are listed and watched.
        wants: Whether a folder (its path parts below ``root``) may hold logs or folders that do.
        is_log: Whether a file (its folder's parts below ``root``, its name) is a session log.
    """

    def __init__(
        self,
        root: str,
        depth: int,
        wants: Callable[[tuple[str, ...]], bool],
        is_log: Callable[[tuple[str, ...], str], bool],
    ) -> None:
        self.root = root
        self.depth = depth
        self._wants = wants
        self._is_log = is_log
        self._scan = _Scan(root)  # its link check, refusals and error reports

    @property
    def errors(self) -> int:
        return self._scan.errors

    def stats(self) -> dict[str, _StatKey]:
        found: dict[str, _StatKey] = {}
        self._walk(self.root, (), found)
        return found

    def logs_in(self, directory: str) -> list[str]:
        parts = self._parts(directory)
        if parts is None:
            return []
        found: dict[str, _StatKey] = {}
        self._walk(directory, parts, found)
        return sorted(found)

    def log_of_removed(self, directory: str) -> str | None:
        return None  # a folder of a deeper tree may have held many logs: a full scan tells which

    def wants_folder(self, relative: str) -> bool:
        return self._wants(tuple(relative.split(os.sep)))

    def is_session_log(self, path: str) -> bool:
        parts = self._parts(os.path.dirname(path))
        return (
            parts is not None
            and len(parts) <= self.depth
            and all(self._wants(parts[: i + 1]) for i in range(len(parts)))
            and self._is_log(parts, os.path.basename(path))
        )

    def _parts(self, directory: str) -> tuple[str, ...] | None:
        if directory == self.root:
            return ()
        prefix = self.root + os.sep
        return tuple(directory[len(prefix) :].split(os.sep)) if directory.startswith(prefix) else None

    def _walk(self, top: str, top_parts: tuple[str, ...], found: dict[str, _StatKey]) -> None:
        pending = [(top, top_parts)]
        seen: set[str] = set()
        while pending:
            folder, parts = pending.pop()
            try:
                it = os.scandir(folder)
            except (FileNotFoundError, NotADirectoryError):
                continue
            except OSError as exc:
                if folder == self.root:
                    self._scan.failed(exc)
                continue
            with it:
                for entry in it:
                    try:
                        self._entry(entry, parts, pending, seen, found)
                    except OSError:
                        continue  # vanished or unreadable meanwhile: the next scan sees what is there

    def _entry(
        self,
        entry: os.DirEntry[str],
        parts: tuple[str, ...],
        pending: list[tuple[str, tuple[str, ...]]],
        seen: set[str],
        found: dict[str, _StatKey],
    ) -> None:
        linked = entry.is_symlink()
        if entry.is_dir():
            inner = (*parts, entry.name)
            if len(inner) > self.depth or not self._wants(inner):
                return
            if linked:
                if not self._scan.inside(entry.path):
                    self._scan.refuse(entry.path, "it is a link that leads out of the agent's log folder")
                    return
                real = os.path.realpath(entry.path)
                if real in seen:
                    return  # a link loop, or a second way to one folder
                seen.add(real)
            pending.append((entry.path, inner))
            return
        if not self._is_log(parts, entry.name):
            return
        st = entry.stat(follow_symlinks=False)
        if stat.S_ISLNK(st.st_mode):
            if not self._scan.inside(entry.path):
                self._scan.refuse(entry.path, "it is a link that leads out of the agent's log folder")
                return
            st = os.stat(entry.path)
        if stat.S_ISREG(st.st_mode):
            found[entry.path] = hash((st.st_ino, st.st_size, st.st_mtime_ns))
        else:
            self._scan.refuse(entry.path, "it is not a regular file (a FIFO, a device or a folder)")


def _claude_code_folder(parts: tuple[str, ...]) -> bool:
    # projects/<project>/<session>/subagents: only a session's subagents folder below its session folder
    return len(parts) < 3 or parts[2] == "subagents"


def _claude_code_log(parts: tuple[str, ...], name: str) -> bool:
    if not name.endswith(".jsonl"):
        return False
    return len(parts) == 1 or (len(parts) == 3 and parts[2] == "subagents" and name.startswith("agent-"))


def _codex_log(parts: tuple[str, ...], name: str) -> bool:
    return name.startswith("rollout-") and name.endswith(
        ".jsonl"
    )  # sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl


def _gemini_folder(parts: tuple[str, ...]) -> bool:
    # tmp/<project>/chats/<session id>: only a project's chats folder, and the session folders in it
    return len(parts) < 2 or parts[1] == "chats"


def _gemini_log(parts: tuple[str, ...], name: str) -> bool:
    # tmp/<project>/chats/session-<time>-<id>.jsonl, and a sub-agent's tmp/<project>/chats/<session id>/<id>.jsonl
    if not name.endswith(".jsonl") or len(parts) < 2:
        return False
    return len(parts) == 3 or name.startswith("session-")


Layout = Literal["copilot", "claude-code", "codex", "gemini"]
_ScanOf = _Scan | _TreeScan


def _scan_for(layout: Layout, root: str) -> _ScanOf:
    if layout == "claude-code":
        return _TreeScan(root, 3, _claude_code_folder, _claude_code_log)
    if layout == "codex":
        return _TreeScan(root, 3, lambda parts: True, _codex_log)
    if layout == "gemini":
        return _TreeScan(root, 3, _gemini_folder, _gemini_log)
    return _Scan(root)


class _Reports:
    """The caller's callbacks, guarded: they run on the watcher's and discovery's threads, which a bug in them must
    not kill, so a failure is counted and logged at most once a minute."""

    def __init__(self, on_change: Callable[[Path], None], on_resync: Callable[[], None] | None) -> None:
        self._on_change = on_change
        self._on_resync = on_resync
        self.errors = 0
        self._last_error_log = float("-inf")

    def change(self, path: str) -> None:
        try:
            self._on_change(Path(path))
        except Exception:
            self.errors += 1
            now = time.monotonic()
            if now - self._last_error_log >= _CALLBACK_ERROR_LOG_INTERVAL_S:
                self._last_error_log = now
                logger.exception(
                    "discovery on_change callback failed for %s (%d failures so far)", path, self.errors
                )

    def everything(self, stats: Callable[[], dict[str, _StatKey]]) -> None:
        """Tell the caller to compare a full scan (``on_resync``), or, without one, report every log in ``stats()``."""
        if self._on_resync is None:
            for path in sorted(stats()):
                self.change(path)
            return
        try:
            self._on_resync()
        except Exception:
            logger.exception("discovery on_resync callback failed")


class _Hints(WatchSink):
    """The watcher's events made into reports (on the watcher's thread); what needs the supervisor (a lost root, an
    overflow's full scan, watches exhausted) is flagged and the supervisor woken."""

    def __init__(self, scan: _ScanOf, reports: _Reports, wake: threading.Event) -> None:
        self._scan = scan
        self._reports = reports
        self._wake = wake
        self.lost_events = threading.Event()
        self.cannot_cover: OSError | None = None

    def changed(self, path: str) -> None:
        if self._scan.is_session_log(path):
            self._reports.change(path)

    def folder_added(self, path: str) -> None:
        for log in self._scan.logs_in(path):
            self._reports.change(log)

    def folder_removed(self, path: str) -> None:
        log = self._scan.log_of_removed(path)
        if log is not None:
            self._reports.change(log)  # its log went away with it
        else:
            self._reports.everything(self._scan.stats)  # its logs went with it: which, a full scan tells

    def watch_depth(self) -> int:
        return self._scan.depth

    def wants_folder(self, relative: str) -> bool:
        return self._scan.wants_folder(relative)

    def root_lost(self) -> None:
        self._wake.set()  # the supervisor sees the root gone (or replaced) and re-establishes the watch

    def overflowed(self) -> None:
        self.lost_events.set()
        self._wake.set()

    def exhausted(self, error: OSError) -> None:
        self.cannot_cover = error
        self._wake.set()


class _Poll:
    """Polling mode (no watcher): each round compares a full scan with the previous one and reports the difference.

    Its period grows with its cost (at most :data:`_POLL_SHARE` of a core), so 100,000 idle sessions stay cheap."""

    def __init__(self, scan: _ScanOf, reports: _Reports) -> None:
        self._scan = scan
        self._reports = reports
        self._previous: dict[str, _StatKey] = {}
        self.cost_s = 0.0

    def once(self) -> None:
        started = time.monotonic()
        current_stats = self._scan.stats()
        self.cost_s = time.monotonic() - started
        previous, self._previous = self._previous, current_stats
        if not previous:
            self._reports.everything(lambda: current_stats)  # the first poll: everything is new
            return
        for path, key in current_stats.items():
            if previous.get(path) != key:
                self._reports.change(path)
        for path in previous.keys() - current_stats.keys():
            self._reports.change(path)


class Discovery:
    """Discover session logs under ``root`` and report changes to ``on_change``.

    Args:
        root: The ``session-state`` directory (need not exist yet).
        on_change: Called with the path of a session log that appeared, changed, moved or vanished.
        poll_interval_s: Period of the root check and, in polling mode, of the rescan.
        force_polling: Never watch (e.g. a known network filesystem).
        watcher_factory: Builds the watcher from ``(root, sink)`` (default: :meth:`~._platform.Platform.dir_watcher`).
        observer_factory: Watch through watchdog with this observer instead (tests: a late or a real-path observer).
        on_resync: Called instead of reporting every session log one by one when a watch (or polling) starts or
            events were lost: the caller compares a full scan (:meth:`request_scan`) with what it knows (the daemon,
            which knows 100,000 logs by their stat and would otherwise take 100,000 calls and ``stat``s at each start).
        layout: Whose logs ``root`` holds: Copilot's ``session-state`` (a folder per session, one level), Claude
            Code's ``projects`` (``<project>/<session>.jsonl`` and ``<project>/<session>/subagents/agent-*.jsonl``)
            or Codex's ``sessions`` (``YYYY/MM/DD/rollout-*.jsonl``); the deeper trees are watched to their depth.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        on_change: Callable[[Path], None],
        *,
        poll_interval_s: float = DEFAULT_POLL_INTERVAL_S,
        force_polling: bool = False,
        watcher_factory: WatcherFactory | None = None,
        observer_factory: ObserverFactory | None = None,
        on_resync: Callable[[], None] | None = None,
        layout: Layout = "copilot",
    ) -> None:
        if poll_interval_s <= 0:
            raise ValueError(f"Expected poll_interval_s to be > 0, got {poll_interval_s!r}")
        self._root = Path(root)
        self._root_str = os.fspath(self._root)
        self._poll_interval_s = poll_interval_s
        self._force_polling = force_polling
        if observer_factory is not None:
            watcher_factory = _watchdog_with(observer_factory)
        self._watcher_factory = watcher_factory or current.dir_watcher
        self._scan = _scan_for(layout, self._root_str)
        self.layout = layout
        self._reports = _Reports(on_change, on_resync)
        self._wake = (
            threading.Event()
        )  # root lost / overflow / a scan asked for: act before the next poll tick
        self._hints = _Hints(self._scan, self._reports, self._wake)
        self._poll = _Poll(self._scan, self._reports)
        self._scan_for: Callable[[dict[str, _StatKey], float], None] | None = None
        self._trim_at = (
            0.0  # when to give a scan's (or a watch's set-up) freed memory back to the OS; 0: not due
        )
        self._watcher: DirWatcher | None = None
        self._watched_root: tuple[int, int] | None = None  # (dev, ino) of the root being watched
        self._mode: DiscoveryMode = "stopped"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._state_lock = threading.Lock()
        self.degraded = ""
        """Why discovery polls although watching was wanted ("inotify watches exhausted"), or ""."""

    @property
    def root(self) -> Path:
        """The watched ``session-state`` directory."""
        return self._root

    @property
    def mode(self) -> DiscoveryMode:
        """``"inotify"`` (watching), ``"polling"`` (fallback), ``"waiting"`` (no root) or ``"stopped"``."""
        return self._mode

    @property
    def description(self) -> str:
        """``mode`` with the reason it is degraded: ``"polling (inotify watches exhausted)"``."""
        return f"{self._mode} ({self.degraded})" if self.degraded and self._mode == "polling" else self._mode

    def start(self, *, background: bool = False) -> None:
        """Start watching and the supervisor thread that handles a late root, fallback polling and overflows.

        The watch is set up before this returns (so nothing written after it is missed), unless ``background``: then
        the supervisor sets it up (100,000 session folders take a moment to watch) and calls ``on_resync`` once it is
        up, so the caller's scan then covers what changed meanwhile.
        """
        if self._thread is not None:
            raise RuntimeError("Discovery.start() called twice")
        self._stop.clear()
        self._mode = "waiting"
        if background:
            self._wake.set()  # the supervisor's first tick runs at once
        else:
            self._tick()
        self._thread = threading.Thread(target=self._run, name="copilot-otel-discovery", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the watcher and the supervisor thread (idempotent); waits at most ``timeout_s``."""
        self._stop.set()
        self._wake.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)
        self._stop_watcher(timeout_s)
        self._mode = "stopped"

    def __enter__(self) -> Discovery:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def request_scan(self, deliver: Callable[[dict[str, _StatKey], float], None]) -> None:
        """Scan on discovery's thread and hand ``deliver`` the result and what it cost (seconds), soon.

        The result: every session log under ``root`` now (``<id>/events.jsonl`` and legacy ``<id>.jsonl``), path →
        the hash of its ``(inode, size, mtime_ns)``; one ``scandir`` of ``root`` plus one ``stat`` per session
        directory, no file opened; a missing ``root`` gives an empty scan. Path strings, not ``Path`` objects: the
        daemon's periodic rescan of thousands of idle sessions compares them with the keys it follows and builds a
        ``Path`` only for new ones.

        A scan of 100,000 session folders takes a second or more; done here, the caller's loop keeps reading live
        logs meanwhile (it only compares the result, which is quick). Requests made while one waits are one scan.
        Before :meth:`start` (or after :meth:`stop`) the scan runs at once on the calling thread.
        """
        if self._thread is None:
            started = time.monotonic()
            deliver(self._scan.stats(), time.monotonic() - started)
            return
        self._scan_for = deliver
        self._wake.set()

    # -- the supervisor (discovery's thread) --------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            period = self._poll_interval_s
            if self._mode == "polling":
                period = max(period, self._poll.cost_s / _POLL_SHARE)
            if self._scan_for is None:
                self._wake.wait(period)
            self._wake.clear()
            if self._stop.is_set():
                break
            try:
                self._scan_requested()  # first: a watch being built (seconds) must not delay it
                self._tick()
                if self._trim_at and time.monotonic() >= self._trim_at:
                    self._trim_at = 0.0
                    current.release_free_memory()
            except Exception:
                logger.exception("discovery supervisor failed; retrying in %.1f s", self._poll_interval_s)

    def _scan_requested(self) -> None:
        deliver, self._scan_for = self._scan_for, None
        if deliver is None:
            return
        started = time.monotonic()
        stats = self._scan.stats()
        try:
            deliver(stats, time.monotonic() - started)
        except Exception:
            logger.exception("discovery scan callback failed")
        self._memory_freed_soon()

    def _memory_freed_soon(self) -> None:
        """A scan handed over (the caller drops it once compared) or a watch built: on a later tick, once that memory
        is freed, give it back to the OS (at 100,000 sessions ~8 MiB would otherwise stay in the process)."""
        self._trim_at = time.monotonic() + min(self._poll_interval_s, 1.0)

    def _root_id(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self._root_str)
        except OSError:
            return None
        return (st.st_dev, st.st_ino) if stat.S_ISDIR(st.st_mode) else None

    def _tick(self) -> None:
        """One supervisor step: follow the root's existence, keep a watch or poll, handle overflows."""
        with self._state_lock:
            root_id = self._root_id()
            if root_id is None:
                if self._mode == "inotify":
                    logger.info("%s disappeared; waiting for it to be re-created", self._root_str)
                    self._stop_watcher(5.0)
                if self._mode != "polling":
                    self._mode = "waiting"
                    return
            if self._mode == "polling":
                self._poll.once()
                return
            watcher = self._watcher
            if self._mode == "inotify" and root_id == self._watched_root and watcher and watcher.alive():
                if self._hints.cannot_cover is not None:
                    self._stop_watcher(5.0)
                    self._fall_back(self._hints.cannot_cover)
                elif self._hints.lost_events.is_set():
                    self._hints.lost_events.clear()
                    logger.warning("inotify queue overflowed below %s: rescanning everything", self._root_str)
                    self._reports.everything(self._scan.stats)
                return
            # Need a (new) watch: first start, root (re-)created, or the watcher ended.
            self._stop_watcher(5.0)
            if self._force_polling:
                self._mode = "polling"
                self._poll.once()
                return
            self._start_watcher(root_id)

    def _start_watcher(self, root_id: tuple[int, int] | None) -> None:
        self._hints.lost_events.clear()
        self._hints.cannot_cover = None
        try:
            watcher = self._watcher_factory(self._root_str, self._hints)
            watcher.start()
        except FileNotFoundError:
            self._mode = "waiting"  # the root went away meanwhile: the next tick looks again
            return
        except (
            Exception
        ) as exc:  # OSError (ENOSPC watch limit, EMFILE instances, no inotify), or a broken platform
            self._fall_back(exc)
            return
        self._watcher = watcher
        self._watched_root = root_id
        self._mode = "inotify"
        self._reports.everything(self._scan.stats)
        self._memory_freed_soon()

    def _fall_back(self, exc: Exception) -> None:
        """The watcher could not start, or cannot cover every session folder: say why once, and poll from now on."""
        code = exc.errno if isinstance(exc, OSError) else None
        self.degraded = _DEGRADED.get(code or 0) or f"cannot watch: {exc}"
        logger.warning(
            "cannot watch %s for changes (%s); falling back to polling every %.1f s%s",
            self._root_str,
            exc,
            self._poll_interval_s,
            _RAISE_LIMIT if code == errno.ENOSPC else "",
        )
        self._mode = "polling"
        self._poll.once()

    def _stop_watcher(self, timeout_s: float) -> None:
        watcher, self._watcher = self._watcher, None
        self._watched_root = None
        if watcher is not None:
            watcher.stop(timeout_s)


def _watchdog_with(observer_factory: ObserverFactory) -> WatcherFactory:
    """A watcher factory that watches through watchdog with the given observer."""
    from .._platform._watchdog import WatchdogWatcher

    def build(root: str, sink: WatchSink) -> DirWatcher:
        return WatchdogWatcher(root, sink, observer_factory)

    return build


class Discoveries:
    """The discovery of several agents' log folders as one (the daemon's): a :class:`Discovery` per folder, each
    with its layout, watcher and supervisor, reporting to the same callbacks.

    A folder that does not exist is that agent not installed: its discovery waits for it (as for a missing
    ``session-state``), and when it appears its logs are followed. :meth:`request_scan` hands over one scan of every
    folder (the caller compares it with everything it tracks, so it must never see one folder's scan alone).

    Args:
        roots: Each folder and whose logs it holds.
        on_change, on_resync, poll_interval_s, force_polling, watcher_factory: As for :class:`Discovery`, shared.
    """

    def __init__(
        self,
        roots: list[tuple[Path, Layout]],
        on_change: Callable[[Path], None],
        *,
        on_resync: Callable[[], None] | None = None,
        poll_interval_s: float = DEFAULT_POLL_INTERVAL_S,
        force_polling: bool = False,
        watcher_factory: WatcherFactory | None = None,
    ) -> None:
        self.parts = [
            Discovery(
                root,
                on_change,
                poll_interval_s=poll_interval_s,
                force_polling=force_polling,
                watcher_factory=watcher_factory,
                on_resync=on_resync,
                layout=layout,
            )
            for root, layout in roots
        ]

    @property
    def mode(self) -> DiscoveryMode:
        """The least of the folders that exist: ``polling`` if one is polled, ``inotify`` if every one is watched,
        ``waiting`` while none exists (an agent not installed does not count)."""
        modes = {part.mode for part in self.parts} - {"waiting"}
        for mode in ("stopped", "polling", "inotify"):
            if mode in modes:
                return mode
        return "waiting"

    @property
    def description(self) -> str:
        """As :attr:`Discovery.description` (what ``status`` and ``doctor`` read: ``polling (…)`` is a warning) when
        the folders that exist agree, else each one's by agent; an agent not installed is left out."""
        there = [part for part in self.parts if part.mode != "waiting"]
        said = {part.description for part in there}
        if not there:
            return "waiting"
        if len(said) == 1:
            return said.pop()
        return ", ".join(f"{part.layout} {part.description}" for part in there)

    def start(self, *, background: bool = False) -> None:
        for part in self.parts:
            part.start(background=background)

    def stop(self, timeout_s: float = 5.0) -> None:
        for part in self.parts:
            part.stop(timeout_s)

    def request_scan(self, deliver: Callable[[dict[str, _StatKey], float], None]) -> None:
        """:meth:`Discovery.request_scan` of every folder, handed to ``deliver`` as one scan (their costs added)
        once the last has answered, on that one's thread."""
        if not self.parts:
            deliver({}, 0.0)  # no folder to scan: an empty scan, at once
            return
        gather = _Gather(len(self.parts), deliver)
        for part in self.parts:
            part.request_scan(gather.part)


class _Gather:
    """One scan made of several folders' scans, each answered on its own discovery's thread. A folder asked again
    before it answered answers only the newer request (:meth:`Discovery.request_scan` coalesces): that request's
    gather completes, an older one is dropped unanswered."""

    def __init__(self, parts: int, deliver: Callable[[dict[str, _StatKey], float], None]) -> None:
        self._left = parts
        self._deliver = deliver
        self._stats: dict[str, _StatKey] = {}
        self._cost_s = 0.0
        self._lock = threading.Lock()

    def part(self, stats: dict[str, _StatKey], cost_s: float) -> None:
        with self._lock:
            self._stats.update(stats)
            self._cost_s += cost_s
            self._left -= 1
            done = self._left == 0
        if done:
            self._deliver(self._stats, self._cost_s)
