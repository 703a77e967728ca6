"""Linux: systemd user units, XDG directories, fork for replay workers."""

from __future__ import annotations

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
