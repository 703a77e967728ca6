"""Linux: systemd user units, XDG directories, fork for replay workers."""

from __future__ import annotations

import os

from ._portable import ServiceManager
from ._posix import Posix

__all__ = ["Linux"]


class Linux(Posix):
    """Linux (and other POSIX systems that are not macOS)."""

    name = "linux"
    service_manager: ServiceManager | None = "systemd"

    def worker_start_method(self, protocol: str) -> str:
        # fork starts workers without re-importing anything; the parent holds no threads at that point (metrics
        # are aggregated, not given to the SDK) and its HTTP session is not used by the children. gRPC channels
        # must not cross a fork, so gRPC replays spawn fresh interpreters instead.
        return "spawn" if protocol == "grpc" else "fork"

    def inotify_watched_inodes(self) -> set[int] | None:
        # Each inotify descriptor's /proc/self/fdinfo lists one "inotify wd:<n> ino:<hex> sdev:<hex> ..." line per
        # watch: the one way to learn which directories a library's inotify instance really covers.
        try:
            fds = os.listdir("/proc/self/fd")
        except OSError:
            return None
        watched: set[int] = set()
        for fd in fds:
            try:
                if os.readlink(f"/proc/self/fd/{fd}") != "anon_inode:inotify":
                    continue
                with open(f"/proc/self/fdinfo/{fd}", encoding="ascii") as fh:
                    for line in fh:
                        if line.startswith("inotify wd:"):
                            ino = next(part for part in line.split() if part.startswith("ino:"))
                            watched.add(int(ino[4:], 16))
            except (OSError, StopIteration, ValueError):
                continue
        return watched
