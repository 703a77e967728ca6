"""Outbox: batches records for export on one worker thread and reports which source lines are delivered.

The daemon appends each file's records in file order, followed by a :class:`Marker` saying "everything of
this file up to ``offset`` has been handed over". The worker delivers records in batches (retrying for as long
as it takes, see :class:`~copilot_otel.deliver.export.Sender`) and only then releases the markers that preceded them;
the daemon checkpoints a file at a marker once that marker and every earlier marker of the file are delivered.
So a checkpoint never runs ahead of the collector, and nothing acknowledged is ever read twice.

Records are cut into batches by the one batcher (:mod:`~copilot_otel.deliver.batcher`, the same as replay's):
at most :data:`~copilot_otel.deliver.batcher.BATCH_RECORDS` records each, the markers among them travelling with
them; a lane's batch is sent when it is full, when the lane went quiet or when its oldest record waited too long.

Two lanes keep a backfill from delaying live sessions: records of files that have caught up with their end go
to the *live* lane, which the worker always drains first; history goes to the *backfill* lane. Each lane has a
cap; when the backfill lane is full the daemon simply stops reading history (the log files are the buffer).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..model.records import LogRecord, SpanRecord
from . import batcher
from .batcher import Batch
from .export import Sender

logger = logging.getLogger(__name__)

# A burst is over when nothing new arrived for this long: send now rather than wait for the full delay.
LINGER_S = 0.05
# At shutdown, how long past its deadline the worker may take to notice the stop (a wait or a request in progress).
_ABANDON_S = 0.5


@dataclass(frozen=True, slots=True)
class Marker:
    """Everything of ``key``'s file up to ``offset`` has been queued (see the module docstring).

    Attributes:
        key: The file's key (its path).
        seq: Per-file sequence number, increasing.
        offset: The acknowledged offset this marker allows.
        safe_offset: Where a restarted fold must begin reading (start of the oldest open prompt).
        context: The fold's session context at ``safe_offset``.
        identity: The file identity the offsets refer to.
        forget: The file is gone: drop its checkpoint once this marker is delivered.
        size: The file's size when it was read up to ``offset`` (0: unknown), stored with the checkpoint so that
            a restart knows an unchanged file from one ``stat``, without opening it.
        mtime_ns: Its modification time then.
    """

    key: str
    seq: int
    offset: int
    safe_offset: int
    context: dict[str, Any] | None
    identity: Any
    forget: bool = False
    size: int = 0
    mtime_ns: int = 0


@dataclass
class _Lane:
    name: str
    cap: int
    items: deque[SpanRecord | LogRecord | Marker] = field(default_factory=deque)
    records: int = 0
    oldest_ns: float = 0.0
    last_put: float = 0.0


class Outbox:
    """Thread-safe queue + exporter worker.

    Args:
        sender: Delivers batches (its ``stop`` flag interrupts retries at shutdown).
        on_delivered: Called on the worker thread with the markers whose records were all delivered.
        delay_s: The longest a record waits to be batched (``OTEL_BSP_SCHEDULE_DELAY``).
        live_cap: Records allowed in the live lane.
        backfill_cap: Records allowed in the backfill lane.
    """

    def __init__(
        self,
        sender: Sender,
        on_delivered: Callable[[list[Marker]], None],
        delay_s: float = 1.0,
        live_cap: int = 20_000,
        backfill_cap: int = 20_000,
    ) -> None:
        self.sender = sender
        self.on_delivered = on_delivered
        self.delay_s = delay_s
        self._live = _Lane("live", live_cap)
        self._backfill = _Lane("backfill", backfill_cap)
        self._cond = threading.Condition()
        self._closing = False
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="copilot-otel-export", daemon=True)
        self.in_flight = 0
        # Records taken for a batch whose delivery gave up (only a stop or the shutdown deadline ends one).
        self._undelivered = 0

    # ------------------------------------------------------------------ producer side (daemon thread)
    def start(self) -> None:
        self._thread.start()

    def has_room(self, live: bool) -> bool:
        lane = self._live if live else self._backfill
        return lane.records < lane.cap

    @property
    def backlog(self) -> int:
        """Records not delivered yet: both lanes, the batch in flight and any batch given up at shutdown."""
        return self._live.records + self._backfill.records + self.in_flight + self._undelivered

    def put(self, records: list[SpanRecord | LogRecord], marker: Marker, live: bool) -> None:
        """Queue a file's records followed by its marker. Never blocks: the caller checks :meth:`has_room`."""
        lane = self._live if live else self._backfill
        now = time.monotonic()
        with self._cond:
            if records:
                if lane.records == 0:
                    lane.oldest_ns = now
                lane.items.extend(records)
                lane.records += len(records)
            lane.items.append(marker)
            lane.last_put = now
            self._cond.notify()

    # ------------------------------------------------------------------ worker
    def _take(self, lane: _Lane) -> tuple[Batch, list[Marker]]:
        batch, markers = batcher.take(lane.items)
        lane.records -= len(batch)
        lane.oldest_ns = time.monotonic() if lane.records else 0.0
        return batch, markers

    def _ready(self, lane: _Lane, now: float) -> bool:
        if not lane.items:
            return False
        if self._closing or lane.records >= batcher.BATCH_RECORDS or lane.records == 0:
            return True
        return now - lane.oldest_ns >= self.delay_s or now - lane.last_put >= LINGER_S

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    now = time.monotonic()
                    if self._stopped:
                        return
                    lane = next((ln for ln in (self._live, self._backfill) if self._ready(ln, now)), None)
                    if lane is not None:
                        batch, markers = self._take(lane)
                        self.in_flight = len(batch)
                        break
                    if self._closing and not self._live.items and not self._backfill.items:
                        return
                    self._cond.wait(timeout=LINGER_S if (self._live.items or self._backfill.items) else 1.0)
            try:
                self._deliver(batch, markers)
            except Exception:  # the one deliberate catch-all: a bug here must not stop exporting for good
                logger.exception(
                    "unexpected error while exporting; the batch will be read again after restart"
                )
            finally:
                self.in_flight = 0

    def _deliver(self, batch: Batch, markers: list[Marker]) -> None:
        if batch:
            outcome = self.sender.deliver(batch.spans, batch.logs, max_retry_s=None)
            if not outcome.delivered:
                # Only a stop or the shutdown deadline interrupts an unbounded retry: leave these lines
                # unacknowledged (they are read again at the next start) and count them as not delivered.
                self._undelivered += len(batch)
                return
        if markers:
            self.on_delivered(markers)

    # ------------------------------------------------------------------ shutdown
    def close(self, timeout_s: float) -> bool:
        """Deliver what is queued within ``timeout_s``, then stop; True when everything was delivered.

        The sender gives up at the deadline (no request outlives it, no backoff sleeps past it); a request the
        transport cannot interrupt is abandoned on this daemon thread after :data:`_ABANDON_S` more. What was
        not delivered stays unacknowledged and is counted in :attr:`backlog`.
        """
        deadline = time.monotonic() + timeout_s
        self.sender.give_up_at = deadline
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join(max(0.0, deadline - time.monotonic()))
        if self._thread.is_alive():
            self.sender.stop.set()  # type: ignore[attr-defined]
            with self._cond:
                self._stopped = True
                self._cond.notify_all()
            self._thread.join(_ABANDON_S)
            return False
        return self.backlog == 0
