"""Keeping what no collector will take: a rejected or unencodable record is written to the dead-letter file, or held.

Apart from the sender (:class:`~copilot_otel.deliver.export.Sender`), which decides *that* a record is not to be
sent again, because keeping one has rules of its own: a record neither delivered nor in the dead-letter file must
never be passed by a checkpoint, so a dead letter that cannot be written (a full disk) holds the delivery, which
the daemon retries with backoff and a bounded caller (``replay``) fails at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..common.ratelimit import RateLimitedLog
from ..model.records import LogRecord, SpanRecord
from .batcher import describe
from .deadletter import DeadLetters
from .outcome import BACKOFF_MAX_S, BACKOFF_START_S, Delivery, DeliveryStats, StopFlag

# How the sender waits before trying again: the seconds to wait, or the Delivery that gives up (a deadline).
Wait = Callable[[float | None, float, float | None, str], float | Delivery]


class Keeper:
    """Writes dead letters durably, counts them and says so, rate-limited.

    Args:
        path: The dead-letter file (JSON lines), or ``None`` to only count what is rejected.
        description: The transport the records were for (written with each dead letter).
        stats: The sender's counters (``dead_lettered``, ``unencodable``, ``failed_batches``, ``last_error``).
        log: The sender's rate-limited log.
        stop: Interrupts a wait to write again (the daemon's stop event).
        wait: The sender's backoff: how long to wait before writing again, or the :class:`Delivery` that gives up.
    """

    def __init__(
        self,
        path: Path | None,
        description: str,
        stats: DeliveryStats,
        log: RateLimitedLog,
        stop: StopFlag,
        wait: Wait,
    ) -> None:
        self.path = path
        self._description = description
        self._stats = stats
        self._log = log
        self._stop = stop
        self._wait = wait

    def rejected(
        self, signal: str, record: Any, reason: str, request: bytes, deadline: float | None
    ) -> Delivery:
        """Keep a record a collector rejected for good, with ``request`` holding it alone, so that
        ``copilot-otel dead-letters resend`` can send it again exactly."""
        kept = self._keep(signal, record, reason, request, deadline)
        if not kept.delivered:
            return kept
        with self._stats.lock:
            self._stats.dead_lettered += 1
        self._log.log(
            logging.WARNING,
            f"dead:{signal}",
            "collector permanently rejected a %s record (%s); dead-lettered in %s",
            signal,
            reason,
            self.path,
        )
        return Delivery(True, dead_lettered=1)

    def unencodable(self, signal: str, record: Any, reason: str, deadline: float | None) -> Delivery:
        """Drop a record the encoder cannot write (kept in the dead-letter file with the reason); the rest of its
        batch is sent."""
        kept = self._keep(signal, record, reason, None, deadline)
        if not kept.delivered:
            return kept
        with self._stats.lock:
            self._stats.unencodable += 1
        self._log.log(
            logging.WARNING,
            f"unencodable:{signal}",
            "dropped a %s record that cannot be encoded (%s; %s); the rest of its batch is sent",
            signal,
            reason,
            describe(record),
        )
        return Delivery(True, dropped=1)

    def _keep(
        self, signal: str, record: Any, reason: str, request: bytes | None, deadline: float | None
    ) -> Delivery:
        """Write a dead letter durably, or hold (see the module docstring)."""
        if self.path is None:
            return Delivery(True)
        backoff = BACKOFF_START_S
        while True:
            try:
                DeadLetters(self.path).append(
                    signal, reason, _record_json(record), request, self._description
                )
            except OSError as exc:
                why = f"cannot write the dead-letter file {self.path}: {exc.strerror or exc}"
            else:
                return Delivery(True)
            with self._stats.lock:
                self._stats.last_error = why
            if deadline is not None:
                self._stats.failed_batches += 1
                return Delivery(False, error=f"{why}; a record the collector rejected was not kept")
            wait = self._wait(None, backoff, deadline, why)
            if isinstance(wait, Delivery):
                return wait
            backoff = min(backoff * 2, BACKOFF_MAX_S)
            self._log.log(
                logging.ERROR,
                "dead-letter-write",
                "%s — holding the rejected %s record and what follows it (nothing is checkpointed past it); "
                "retrying until it can be written",
                why,
                signal,
            )
            if self._stop.wait(wait):
                return Delivery(False, error=f"stopped while holding a dead letter: {why}")


def _record_json(record: Any) -> dict[str, Any]:
    """What a dead letter says of its record, readable without decoding the request."""
    if isinstance(record, SpanRecord):
        return {
            "trace_id": f"{record.trace_id:032x}",
            "span_id": f"{record.span_id:016x}",
            "name": record.name,
            "start_ns": record.start_ns,
            "end_ns": record.end_ns,
            "attributes": dict(record.attributes),
        }
    if isinstance(record, LogRecord):
        return {
            "event_name": record.event_name,
            "time_ns": record.time_ns,
            "attributes": dict(record.attributes),
        }
    return {"repr": repr(record)}
