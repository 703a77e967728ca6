"""One rate limit for the daemon's own warnings: a burst of the same problem is one line, not thousands.

A bad line repeated in every session of a backfill, a collector down for an hour, a file that cannot be read at
every pass: each is said once per interval per *key* (the kind of problem, with the file when it matters), and the
next line says how many were held back (``(+41 similar since)``). The counters and metrics still count every
occurrence; only the log is thinned (house style: logfire's ``DiskRetryer._should_log``, OTel's ``DuplicateFilter``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

__all__ = ["DEFAULT_INTERVAL_S", "RateLimitedLog"]

# A problem that persists is said twice a minute at most: often enough to be noticed in journald, rarely enough
# that a backfill of 100,000 sessions with the same bad line does not fill it.
DEFAULT_INTERVAL_S = 30.0


class RateLimitedLog:
    """At most one line per key per interval; the rest are counted and summed up in the next line of that key.

    Args:
        logger: Where the lines go.
        interval_s: The shortest time between two lines of one key.
        clock: Monotonic seconds (injected by tests).
    """

    def __init__(
        self,
        logger: logging.Logger,
        interval_s: float = DEFAULT_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.interval_s = interval_s
        self._clock = clock
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}

    def warning(self, key: str, msg: str, *args: Any) -> bool:
        """Log ``msg % args`` at WARNING unless ``key`` was said within the interval; True if it was logged."""
        return self.log(logging.WARNING, key, msg, *args)

    def log(self, level: int, key: str, msg: str, *args: Any) -> bool:
        """Like :meth:`warning`, at ``level``."""
        now = self._clock()
        if now - self._last.get(key, float("-inf")) < self.interval_s:
            self._suppressed[key] = self._suppressed.get(key, 0) + 1
            return False
        suppressed = self._suppressed.pop(key, 0)
        self._last[key] = now
        suffix = f" (+{suppressed} similar since)" if suppressed else ""
        self.logger.log(level, "%s%s", msg % args if args else msg, suffix)
        return True
