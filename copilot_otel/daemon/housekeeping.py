"""The daemon's periodic care of what it follows: prompts whose CLI is gone, the backfill's progress, the status.

Nothing here reads a log's lines; it decides when a followed file's open prompt must be closed (its CLI exited, or
it stayed quiet past ``idle_timeout``), when an unterminated last line may be folded, and it sums up what the
daemon is doing for ``status``, the live gauges and the backfill lines. Every "how long has it been quiet" is on the
monotonic clock (:meth:`~copilot_otel.daemon.followed.FollowedFile.idle_s`), so a wall-clock step of an hour (NTP, a
VM resumed) closes nothing early and live keeps matching replay.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from ..common.display import count
from ..loop.agentloop import LiveStats
from ..model.activity import CloseReason, Detection, PromptRun
from ..projections.catalog import (
    LIVE_MAX_DURATION,
    LIVE_MAX_IDENTICAL_TOOL_CALLS,
    LIVE_MAX_TOOL_CALLS,
    LIVE_MAX_TOOL_ERROR_STREAK,
    LIVE_MAX_TURNS,
    LIVE_PROMPTS,
)
from ..sources.sessions import owner_pids, pid_alive
from .followed import FollowedFile, Read
from .statusfile import OpenPrompt
from .tracker import Tracker

__all__ = [
    "OWNER_CHECK_S",
    "OWNER_GRACE_S",
    "BackfillProgress",
    "Housekeeping",
    "LivePrompt",
]

logger = logging.getLogger("copilot_otel.daemon")

# How often prompts still open are checked for a vanished owner process.
OWNER_CHECK_S = 2.0
# A CLI that just started may not have written its inuse lock yet: wait this long after the last line.
OWNER_GRACE_S = 5.0
# While history is being read, a progress line this often.
BACKFILL_PROGRESS_S = 5.0
# Open prompts listed in status, the oldest first.
_STATUS_PROMPTS = 50


@dataclass(frozen=True, slots=True)
class LivePrompt:
    """A prompt in progress, as the live gauges and ``status`` show it."""

    session_id: str
    stats: LiveStats
    running_s: float


class Housekeeping:
    """Owner and idle closing of open prompts, and the folding of unterminated last lines.

    Args:
        tracker: The followed files (its ``attention`` set is what is looked at).
        idle_timeout_s: A prompt quiet this long is closed as ``idle_timeout``.
        clock: Monotonic seconds (injected by tests).
    """

    def __init__(
        self, tracker: Tracker, idle_timeout_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.tracker = tracker
        self.idle_timeout_s = idle_timeout_s
        self._clock = clock

    def close_abandoned(self) -> None:
        """Close prompts whose CLI is gone (``inuse.<pid>.lock`` names a dead process) or that idled too long; fold
        a last line left without its newline once its file has been quiet and its CLI is gone, or idled out.

        The line is folded before its prompt is closed, as ``replay`` folds it before the end of the file closes
        the prompt: closed first, the prompt would miss it, and the line would open a prompt of its own.
        """
        tracker = self.tracker
        now = self._clock()
        for f in tracker.attending():
            if f.pending:
                continue
            idle_s = f.idle_s(now)
            if f.unterminated_waiting and (
                idle_s >= self.idle_timeout_s or (idle_s >= OWNER_GRACE_S and not _owner_alive(f))
            ):
                self._fold_unterminated(f)
            if not f.has_open_prompt:
                tracker.update(f)
                continue
            if f.fold is None:
                # A checkpointed open prompt not re-read yet: read it first, decide on the next check.
                f.pending = True
                tracker.update(f)
                continue
            reason: CloseReason | None = None
            if idle_s >= self.idle_timeout_s:
                reason = "idle_timeout"
            elif f.session.folder is not None and idle_s >= OWNER_GRACE_S and not _owner_alive(f):
                reason = "owner_exited"
            if reason is not None:
                f.close_prompt(reason)
                tracker.update(f)

    def _fold_unterminated(self, f: FollowedFile) -> None:
        tracker = self.tracker
        if not tracker.descriptors.opening(f):
            return
        outcome = f.fold_unterminated()
        if outcome.how is Read.NO_DESCRIPTOR and outcome.error is not None:
            tracker.descriptors.out_of_descriptors(
                outcome.error
            )  # the real EMFILE/ENFILE, as a read reports it
        tracker.update(f)

    def live_prompts(self, now_ns: int) -> list[LivePrompt]:
        """Every prompt still open, with the session it belongs to."""
        out = []
        for f in self.tracker.attending():
            if f.fold is not None:
                for stats in f.fold.live_stats():
                    out.append(
                        LivePrompt(f.fold.ctx.session_id, stats, max(0, now_ns - stats.started_ns) / 1e9)
                    )
        return out


def _owner_alive(f: FollowedFile) -> bool:
    """Whether a CLI process still holds the session (its ``inuse.<pid>.lock`` names a live process)."""
    folder = f.session.folder
    return folder is not None and any(pid_alive(pid) for pid in owner_pids(folder))


class BackfillProgress:
    """History being read: a progress line every few seconds, one line when it is done, and the runaway
    detections found in it summed up there (live ones are warnings of their own)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.pending: set[str] = set()
        self.sessions = 0
        self.spans = 0
        self.detections: dict[str, int] = {}
        self.started = 0.0
        self._last_line = 0.0
        self._clock = clock

    def add(self, key: str) -> None:
        if not self.pending and not self.sessions:
            self.started = self._last_line = self._clock()
        self.pending.add(key)
        self.sessions += 1

    def finished(self, key: str) -> None:
        self.pending.discard(key)

    def detected(self, reason: str) -> None:
        self.detections[reason] = self.detections.get(reason, 0) + 1

    def report(self, waiting: int = 0) -> None:
        """The progress line (every few seconds) or the "done" line; ``waiting``: history found but not followed yet
        (the tracker admits it in batches), counted as not read."""
        if not self.sessions:
            return
        now = self._clock()
        if self.pending or waiting:
            if now - self._last_line >= BACKFILL_PROGRESS_S:
                self._last_line = now
                logger.info(
                    "backfill: %s of %s read, %s",
                    f"{self.sessions - len(self.pending):,}",
                    count(self.sessions + waiting, "session"),
                    count(self.spans, "span"),
                )
            return
        found = ""
        if self.detections:
            found = "; runaway detections in the history: " + ", ".join(
                f"{reason} {count}" for reason, count in sorted(self.detections.items())
            )
        logger.info(
            "backfill done: %s, %s in %.1f s%s",
            count(self.sessions, "session"),
            count(self.spans, "span"),
            now - self.started,
            found,
        )
        self.sessions = self.spans = 0
        self.detections = {}


@dataclass
class Outcomes:
    """What the records of the followed logs said, counted for ``status``."""

    detections: dict[str, int] = field(default_factory=dict)
    prompts_closed: dict[str, int] = field(default_factory=dict)

    def count(self, record: Detection | PromptRun) -> None:
        if isinstance(record, Detection):
            self.detections[record.reason] = self.detections.get(record.reason, 0) + 1
        else:
            self.prompts_closed[record.outcome] = self.prompts_closed.get(record.outcome, 0) + 1


def open_prompt_rows(prompts: Iterable[LivePrompt]) -> list[OpenPrompt]:
    """The prompts still open, for ``status`` (at most 50, the oldest first)."""
    ordered = sorted(prompts, key=lambda p: p.stats.started_ns)[:_STATUS_PROMPTS]
    return [
        OpenPrompt(
            p.session_id,
            p.stats.started_ns / 1e9,
            p.stats.last_event_ns / 1e9,
            p.stats.turns,
            p.stats.tool_calls,
        )
        for p in ordered
    ]


def live_gauges(prompts: list[LivePrompt]) -> Mapping[str, float]:
    """The live gauges by name (:mod:`copilot_otel.semconv`), from the prompts in progress."""
    return {
        LIVE_PROMPTS: float(len(prompts)),
        LIVE_MAX_TURNS: float(max((p.stats.turns for p in prompts), default=0)),
        LIVE_MAX_TOOL_CALLS: float(max((p.stats.tool_calls for p in prompts), default=0)),
        LIVE_MAX_DURATION: max((p.running_s for p in prompts), default=0.0),
        LIVE_MAX_IDENTICAL_TOOL_CALLS: float(max((p.stats.identical_streak for p in prompts), default=0)),
        LIVE_MAX_TOOL_ERROR_STREAK: float(max((p.stats.error_streak for p in prompts), default=0)),
    }
