"""The session logs' descriptors as a bounded cache, apart from the registry of what is followed.

A tracker knows which logs are followed and which have work; how many of their descriptors may be open at once is
another concern with its own state (an order of use, a cap that EMFILE lowers and time raises again, a moment
before which no new descriptor is tried), so it is a class of its own: :class:`Descriptors`. Any number of
sessions can then be followed under any ``ulimit -n``: the least recently used descriptors are closed beyond the
cap (a closed tailer keeps its offset, and reopens and re-validates at its next read).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ..common.ratelimit import RateLimitedLog
from .followed import IDLE_CLOSE_S, FollowedFile

__all__ = ["FD_RETRY_S", "MAX_OPEN_TAILERS", "MIN_OPEN_TAILERS", "Descriptors", "open_tailer_cap"]

# Open file descriptors kept for session logs at most; the least recently used are closed beyond this. Below it,
# half of what the process's descriptor limit (RLIMIT_NOFILE) leaves beside a reserve for the interpreter, sockets,
# the state and the libraries (the daemon itself holds about ten).
MAX_OPEN_TAILERS = 256
MIN_OPEN_TAILERS = 4
FD_RESERVE = 24
# After "too many open files" (EMFILE/ENFILE), files not open yet wait this long before the next attempt.
FD_RETRY_S = 0.5


def open_tailer_cap(max_open_files: int) -> int:
    """How many session logs may be open at once under a descriptor limit (64 → 20, 1024 → 256)."""
    return max(MIN_OPEN_TAILERS, min(MAX_OPEN_TAILERS, (max_open_files - FD_RESERVE) // 2))


class Descriptors:
    """The followed files' descriptors: at most :attr:`cap` open, the least recently used closed beyond it.

    Args:
        files: The tracker's followed files by key (the same dict: a file forgotten there is no longer closed here).
        max_open_files: The process's descriptor limit.
        log: The daemon's rate-limited log.
        clock: Monotonic seconds (injected by tests).
    """

    def __init__(
        self,
        files: Mapping[str, FollowedFile],
        *,
        max_open_files: int,
        log: RateLimitedLog,
        clock: Callable[[], float],
    ) -> None:
        self._files = files
        self._log = log
        self._clock = clock
        # Keys of files read since their descriptor was last closed, least recently used first (an ordered dict).
        self._maybe_open: dict[str, None] = {}
        self._limit_cap = open_tailer_cap(max_open_files)
        self.cap = self._limit_cap  # lowered after EMFILE, raised again while none comes
        self._retry_at = 0.0
        self.exhausted = 0  # reads deferred because the process or the system ran out of descriptors
        self._exhausted_at_check = 0

    def opening(self, f: FollowedFile) -> bool:
        """About to use ``f``'s descriptor: make room for it (closing the least recently used beyond the cap) and
        mark it most recently used. False while descriptors ran out a moment ago and ``f`` holds none."""
        if not f.tailer.is_open:
            if self._clock() < self._retry_at:
                return False
            self._make_room(self.cap - 1)
        self._maybe_open.pop(f.key, None)
        self._maybe_open[f.key] = None
        return True

    def out_of_descriptors(self, exc: OSError) -> None:
        """EMFILE/ENFILE: back-pressure, not a per-file error. Hold fewer descriptors and try again shortly."""
        self.exhausted += 1
        self._prune()
        held = len(self._maybe_open)
        self.cap = max(MIN_OPEN_TAILERS, min(self.cap, held * 3 // 4))
        self._make_room(self.cap)
        self._retry_at = self._clock() + FD_RETRY_S
        self._log.warning(
            "fd:exhausted",
            "out of file descriptors (%s) with %d session logs open: holding at most %d from now on and reading "
            "the others as descriptors free up (%d reads deferred so far; raise 'ulimit -n' to follow more at once)",
            exc.strerror or exc,
            held,
            self.cap,
            self.exhausted,
        )

    def close_idle(self, now: float) -> None:
        """Close descriptors unused for a minute, and let a cap lowered by EMFILE grow back while none comes.

        Only files read since their last close are looked at.
        """
        self._prune()
        for key in list(self._maybe_open):
            f = self._files[key]
            if not f.pending and now - f.last_used >= IDLE_CLOSE_S:
                f.release()
                f.tailer.close()
                del self._maybe_open[key]
        if self.exhausted == self._exhausted_at_check and self.cap < self._limit_cap:
            self.cap = min(self._limit_cap, self.cap + max(1, self.cap // 4))
        self._exhausted_at_check = self.exhausted

    def _prune(self) -> None:
        """Forget files in the cache whose tailer closed by itself (a file finished, or idle)."""
        self._maybe_open = {
            key: None for key in self._maybe_open if (f := self._files.get(key)) and f.tailer.is_open
        }

    def _make_room(self, keep: int) -> None:
        if len(self._maybe_open) <= keep:
            return
        self._prune()
        excess = len(self._maybe_open) - keep
        for key in list(self._maybe_open)[: max(0, excess)]:  # least recently used first
            # (a pending file's offset is kept: it is reopened and re-validated)
            self._files[key].tailer.close()
            del self._maybe_open[key]
