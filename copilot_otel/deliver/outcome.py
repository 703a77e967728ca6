"""What a delivery achieved, and how patiently it is retried: the types the sender and its helpers share.

Apart from :mod:`~copilot_otel.deliver.export` so that the helpers the sender is split into (the keeping of
dead letters in :mod:`~copilot_otel.deliver.keep`) can speak of a delivery and wait as it does without importing
the sender.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Protocol

# Backoff between attempts: exponential from 0.5 s, capped so a recovered collector is noticed quickly.
BACKOFF_START_S = 0.5
BACKOFF_MAX_S = 30.0


class StopFlag(Protocol):
    """Anything with ``is_set()`` and ``wait(timeout)``, e.g. ``threading.Event``."""

    def is_set(self) -> bool: ...

    def wait(self, timeout: float | None = None) -> bool: ...


@dataclass
class DeliveryStats:
    """Counters of the sender's work, shared with status reporting and self-metrics.

    Attributes:
        unencodable: Records dropped because the encoder could not write one of their values.
        rejected: Records a collector's ``partial_success`` said it rejected (which ones it does not say).
        rejected_message: What the last such answer said.
        shrunk: Records whose captured content was cut so that they fit in one request.
        endpoint_error: What to fix about the endpoint while it refuses us (empty once it accepts again).
    """

    spans_sent: int = 0
    logs_sent: int = 0
    dead_lettered: int = 0
    unencodable: int = 0
    rejected: int = 0
    rejected_message: str = ""
    shrunk: int = 0
    retries: int = 0
    failed_batches: int = 0
    last_success_ns: int = 0
    last_error: str = ""
    endpoint_error: str = ""
    consecutive_failures: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


@dataclass(frozen=True, slots=True)
class Delivery:
    """Outcome of delivering one batch.

    Attributes:
        delivered: Every record was accepted, dead-lettered, dropped or reported rejected by the collector (the
            caller may checkpoint past them).
        dead_lettered: Records permanently rejected and written to the dead-letter file.
        error: Why delivery gave up (deadline passed, stop requested, endpoint refused us, a dead letter that could
            not be written), when ``delivered`` is False.
        dropped: Records the encoder could not write (also in the dead-letter file, with the reason).
        endpoint: Delivery failed because of the endpoint (credentials, path), not the collector's health.
        rejected: Records a ``partial_success`` answer said were rejected (counted, not re-sent).
    """

    delivered: bool
    dead_lettered: int = 0
    error: str = ""
    dropped: int = 0
    endpoint: bool = False
    rejected: int = 0

    def __add__(self, other: Delivery) -> Delivery:
        """This batch's counts and the next one's; delivered while both are (the first error is kept)."""
        return Delivery(
            self.delivered and other.delivered,
            self.dead_lettered + other.dead_lettered,
            self.error or other.error,
            self.dropped + other.dropped,
            self.endpoint or other.endpoint,
            self.rejected + other.rejected,
        )
