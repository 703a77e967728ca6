"""One rate limit for our own warnings: a burst of the same problem is one line, not thousands.

A bad line repeated in every session of a backfill, a collector down for an hour, a file that cannot be read at
every pass, a webhook that keeps failing: each is said once per interval per *key* (the kind of problem, with the
file or the channel when it matters), and the next line says how many were held back (``(+41 similar since)``).
The counters and metrics still count every occurrence; only the log is thinned (house style: logfire's
``DiskRetryer._should_log``, OTel's ``DuplicateFilter``). The daemon, the exporter and the notifier all say it
this way, in these words.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["DEFAULT_INTERVAL_S", "RateLimitedLog"]

# A problem that persists is said twice a minute at most: often enough to be noticed in journald, rarely enough
# that a backfill of 100,000 sessions with the same bad line does not fill it.
DEFAULT_INTERVAL_S = 30.0


class RateLimitedLog:
    """At most one line per key per interval; the rest are counted and summed up in the next line of that key.

    Safe to share between threads (the exporter's workers, the notifier's worker and the thread that submits to
    it): the bookkeeping is under a lock, the logging call outside it.

    Args:
        logger: Where the lines go.
        interval_s: The shortest time between two lines of one key (a call may give its own).
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
        self._lock = threading.Lock()

    def warning(self, key: str, msg: str, *args: Any) -> bool:
        """Log ``msg % args`` at WARNING unless ``key`` was said within the interval; True if it was logged."""
        return self.log(logging.WARNING, key, msg, *args)

    def log(self, level: int, key: str, msg: str, *args: Any, interval_s: float | None = None) -> bool:
        """Like :meth:`warning`, at ``level``; ``interval_s`` replaces the default interval for this key's line
        (a reminder about a misconfigured endpoint is rarer than a retry line)."""
        now = self._clock()
        every = self.interval_s if interval_s is None else interval_s
        with self._lock:
            if now - self._last.get(key, float("-inf")) < every:
                self._suppressed[key] = self._suppressed.get(key, 0) + 1
                return False
            suppressed = self._suppressed.pop(key, 0)
            self._last[key] = now
        suffix = f" (+{suppressed} similar since)" if suppressed else ""
        self.logger.log(level, "%s%s", msg % args if args else msg, suffix)
        return True

    def reset(self, prefix: str) -> None:
        """Forget the keys starting with ``prefix``: the next occurrence is said at once again (the collector
        accepted again, so a new refusal is news)."""
        with self._lock:
            for key in [k for k in self._last if k.startswith(prefix)]:
                del self._last[key]
                self._suppressed.pop(key, None)
