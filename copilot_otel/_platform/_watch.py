"""What a directory watcher is to discovery: the two sides of its interface, apart from the watchers themselves.

Its own module so that the watchers (:mod:`._linux`'s inotify, :mod:`._watchdog`) and the portable base that picks
one can all name these types without importing one another.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["DirWatcher", "WatchSink"]


class WatchSink(Protocol):
    """What a :class:`DirWatcher` reports, from its own thread; each call must be quick and must not raise.

    Only hints: discovery's scans are the truth, so a watcher may report a path twice or for a file that is not a
    session log (discovery filters), but must report an overflow when it knows it lost events.
    """

    def changed(self, path: str) -> None:
        """A file in the root or in a session folder was created, written, moved (either name) or deleted."""

    def folder_added(self, path: str) -> None:
        """A folder appeared in the root, or deeper within :meth:`watch_depth` (created or moved in), called once its
        own watch is in place."""

    def folder_removed(self, path: str) -> None:
        """A folder left the root, or a watched folder below it (deleted or moved away)."""

    def root_lost(self) -> None:
        """The root itself was deleted, moved or unmounted: this watcher sees nothing any more."""

    def overflowed(self) -> None:
        """Events were lost (the kernel's queue overflowed); the watches are whole again when this is called."""

    def exhausted(self, error: OSError) -> None:
        """A folder that appeared cannot be watched (``ENOSPC``: the watch limit): the watcher no longer covers
        the tree."""

    def watch_depth(self) -> int:
        """How deep below the root folders are watched: 1 for Copilot's ``session-state`` (a folder per session);
        3 for Claude Code's ``projects/<project>/<session>/subagents`` and Codex's ``sessions/YYYY/MM/DD``. A watcher
        that needs a watch per folder (inotify) lists a folder's subfolders only above this depth."""
        return 1

    def wants_folder(self, relative: str) -> bool:
        """Whether a folder at ``relative`` (below the root, ``os.sep``-separated, at most :meth:`watch_depth`
        deep) may hold session logs or the folders that do (Claude Code: only ``subagents`` at the third level)."""
        return True


class DirWatcher(Protocol):
    """Watches one session-state folder for :class:`WatchSink`; started and stopped by discovery's thread."""

    def start(self) -> None:
        """Watch the root and every folder in it before returning; ``OSError`` if that cannot be done (``ENOSPC``,
        ``EMFILE``, no inotify), with nothing left open."""

    def alive(self) -> bool:
        """Still watching (false once the root was lost or the reading thread ended)."""

    def stop(self, timeout_s: float) -> None:
        """Stop watching and release the watches; waits at most ``timeout_s`` for the reading thread."""
