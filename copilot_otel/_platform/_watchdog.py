"""The session folders watched through watchdog: macOS (FSEvents) and Windows (``ReadDirectoryChangesW``).

Both watch a whole tree with one handle, so a recursive watchdog observer costs the same at 100 session folders as
at 100,000. On Linux watchdog's inotify backend needs a watch per folder and keeps ~660 bytes of Python objects for
each (66 MiB at 100,000 folders, 4 s to set up), so Linux uses :class:`~._linux.InotifyWatcher` instead; this one
still runs there in the CI's no-POSIX pass and for tests that hand discovery an observer of their own.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

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

from ._watch import WatchSink

if TYPE_CHECKING:
    from watchdog.observers.api import BaseObserver

__all__ = ["ObserverFactory", "WatchdogWatcher"]

logger = logging.getLogger("copilot_otel.daemon.discover")

ObserverFactory = Callable[[], "BaseObserver"]
# Events that can mean "a session log appeared, grew or went away". Opened/closed events are left out on purpose:
# our own reads would otherwise wake the daemon.
_EVENT_FILTER: list[type[FileSystemEvent]] = [
    FileCreatedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileDeletedEvent,
    DirCreatedEvent,
    DirMovedEvent,
    DirDeletedEvent,
]
# watchdog >= 7 logs this (logger below) when the kernel's inotify queue overflowed; it has no handler callback.
_OVERFLOW_LOGGER = "watchdog.observers.inotify_c"
_OVERFLOW_TEXT = "Inotify queue overflowed"


class WatchdogWatcher:
    """A :class:`~._portable.DirWatcher` over a recursive watchdog observer, translating its events for the sink.

    ``observer_factory`` builds the observer (default: watchdog's native one for this OS).
    """

    def __init__(self, root: str, sink: WatchSink, observer_factory: ObserverFactory | None = None) -> None:
        self._root = root
        self._sink = sink
        self._factory = observer_factory
        self._observer: BaseObserver | None = None
        # The root with symlinks resolved, when that differs: FSEvents reports real paths, so a root reached through
        # a symlink (/tmp is /private/tmp on macOS; synced folders) would match no event.
        self._real_prefix: str | None = None
        self._overflow_filter = _OverflowFilter(sink)

    def start(self) -> None:
        if self._factory is None:
            from watchdog.observers import Observer

            self._factory = Observer
        real = os.path.realpath(self._root)
        self._real_prefix = real if real != self._root else None
        observer = self._factory()
        observer.daemon = True
        observer.schedule(_Handler(self), self._root, recursive=True, event_filter=_EVENT_FILTER)
        observer.start()
        self._observer = observer
        logging.getLogger(_OVERFLOW_LOGGER).addFilter(self._overflow_filter)

    def alive(self) -> bool:
        return self._observer is not None and self._observer.is_alive()

    def stop(self, timeout_s: float) -> None:
        logging.getLogger(_OVERFLOW_LOGGER).removeFilter(self._overflow_filter)
        observer, self._observer = self._observer, None
        if observer is None:
            return

        # watchdog's stop() joins its inotify reader thread without a timeout, and that thread can miss the wake-up
        # when the stop comes right after the start (a Ctrl-C as the daemon starts hung it for good). Stop it on a
        # helper thread and wait a bounded time: a stuck reader is a daemon thread, left behind.
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

    def _as_given(self, path: str) -> str:
        """An event path under the resolved root, spelled under the root as configured."""
        real = self._real_prefix
        if real is not None and (path == real or path.startswith(real + os.sep)):
            return self._root + path[len(real) :]
        return path

    def on_event(self, event: FileSystemEvent) -> None:
        src = self._as_given(os.fsdecode(event.src_path))
        dest = self._as_given(os.fsdecode(event.dest_path)) if event.dest_path else ""
        sink, root = self._sink, self._root
        if not event.is_directory:
            sink.changed(src)
            if dest:
                sink.changed(dest)
            return
        gone = isinstance(event, (DirDeletedEvent, DirMovedEvent))
        if src == root and gone:
            sink.root_lost()
        elif self._watched(src) and gone:
            sink.folder_removed(src)
        elif self._watched(src) and isinstance(event, DirCreatedEvent):
            sink.folder_added(src)
        if dest and self._watched(dest):
            sink.folder_added(dest)

    def _watched(self, path: str) -> bool:
        """A folder below the root within the sink's depth that it wants (a session folder, for Copilot)."""
        prefix = self._root + os.sep
        if not path.startswith(prefix):
            return False
        relative = path[len(prefix) :]
        return relative.count(os.sep) < self._sink.watch_depth() and self._sink.wants_folder(relative)


class _Handler(FileSystemEventHandler):
    def __init__(self, watcher: WatchdogWatcher) -> None:
        super().__init__()
        self._watcher = watcher

    def on_any_event(self, event: FileSystemEvent) -> None:
        try:
            self._watcher.on_event(event)
        except Exception:
            logger.exception("discovery failed to handle %r", event)


class _OverflowFilter(logging.Filter):
    """Spot watchdog's overflow warning (watchdog has no overflow callback for handlers)."""

    def __init__(self, sink: WatchSink) -> None:
        super().__init__()
        self._sink = sink

    def filter(self, record: logging.LogRecord) -> bool:
        if str(record.msg).startswith(_OVERFLOW_TEXT):
            self._sink.overflowed()
        return True
