"""Act on a runaway, not only report it: notify the user, and (opt-in) interrupt the CLI.

The daemon hands every :class:`~copilot_otel.model.activity.Detection` it delivers (and, with ``notify_prompt_errors``,
every prompt that ended in error) to :class:`RunawayActions` together with what it knows of the session
(:class:`SessionView`). The action per reason comes from :class:`~copilot_otel.settings.policy.RunawayPolicy` (the ``runaway_action`` setting):

* ``none``: only the span event, metric and log event every detection already gets;
* ``notify``: also a desktop notification and/or a webhook (:mod:`copilot_otel.daemon.notify`);
* ``interrupt``: notify, and interrupt the session's CLI the way Ctrl-C would (:mod:`copilot_otel.daemon.interrupt`),
  at most once per prompt and reason, only a process verified to be that session's CLI, or in dry-run mode
  only log what it would do. Every attempt is a WARN log line, a log event and a span event
  ``copilot_otel.runaway.interrupted`` (on a span ``copilot_otel.runaway.interrupt`` under the prompt's root)
  and, when it acted (or would have), the counter ``copilot_otel.runaway.interrupted``.

The policy and its parser live in :mod:`copilot_otel.settings.policy` (the settings table parses it at every start).
``runaway_action_repositories`` limits the actions to some repositories (``owner/name``) or folders.
"""

from __future__ import annotations

import logging
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..model.records import AttrValue, LogRecord, SpanRecord
from ..projections import actions, catalog
from .interrupt import Outcome, interrupt_session, unprovable
from .notify import MAX_WAITING, Burst, DesktopChannel, Notice, Notifier, WebhookChannel

if TYPE_CHECKING:
    from ..deliver.metrics import Metrics
    from ..model.activity import Detection, PromptRun
    from ..settings.config import Config
    from ..settings.policy import RunawayPolicy

__all__ = ["RunawayActions", "SessionView", "describe_policy"]

logger = logging.getLogger(__name__)

# Prompts remembered for "once per prompt and reason" (oldest forgotten first).
_REMEMBER = 4096
# A detection whose line is older than this is history (a backfill, a catch-up after a pause): reported, never
# acted on. Nobody wants a notification about yesterday's loop, and its lock may name a pid reused since.
MAX_AGE_S = 120.0
# One notification log line this often at most; those held back are summed up in one line (a storm of 200
# detections is two lines, not 200).
NOTICE_LOG_EVERY_S = 60.0


@dataclass(frozen=True, slots=True)
class SessionView:
    """What the daemon knows of a session when it acts (``title`` only when prompts are captured).

    ``agent``: another agent's session (``claude-code``, ``codex``, ``gemini``), whose CLI cannot be proven (no lock names its
    process: :func:`copilot_otel.daemon.interrupt.unprovable`); ``None``: Copilot CLI's."""

    session_id: str
    folder: Path | None
    repository: str | None = None
    branch: str | None = None
    cwd: str | None = None
    title: str | None = None
    agent: str | None = None


@dataclass
class ActionStats:
    """What the actions did, for ``status`` (and tests)."""

    notified: int = 0
    interrupts: dict[str, int] = field(default_factory=dict)
    notifications: dict[str, int] = field(default_factory=dict)


class RunawayActions:
    """Applies the policy to detections; the daemon calls it on its main loop, notices go out on a worker.

    Args:
        policy: The action per reason.
        repositories: Act only for these repositories / folders (empty: everywhere).
        dry_run: Log what an interrupt would do instead of doing it.
        notify_prompt_errors: Also notify when a prompt ends in error.
        notifier: Where notices go (``None``: nowhere, the log line stays).
        interrupt: Interrupts a session folder's CLI (:func:`copilot_otel.daemon.interrupt.interrupt_session`).
        clock: Unix nanoseconds, for the interrupt's log and span events.
    """

    def __init__(
        self,
        policy: RunawayPolicy,
        *,
        repositories: Sequence[str] = (),
        dry_run: bool = False,
        notify_prompt_errors: bool = False,
        notifier: Notifier | None = None,
        interrupt: Callable[..., Outcome] | None = None,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self.policy = policy
        self.repositories = tuple(repositories)
        self.dry_run = dry_run
        self.notify_prompt_errors = notify_prompt_errors
        self.notifier = notifier
        if interrupt is None:
            interrupt = interrupt_session
        self._interrupt = interrupt
        self._clock = clock
        self._done: OrderedDict[tuple[str, int, str, str], None] = OrderedDict()
        self.stats = ActionStats()
        self._pending_counts: list[tuple[str, dict[str, AttrValue]]] = []
        self._logged_at = -float("inf")
        self._held: list[Notice] = []  # notified but not logged yet (see NOTICE_LOG_EVERY_S)

    @classmethod
    def from_config(cls, config: Config) -> RunawayActions | None:
        """The actions ``config`` asks for, or ``None`` when it asks for none (the default)."""
        policy: RunawayPolicy = config.runaway_action
        if not policy.active and not config.notify_prompt_errors:
            return None
        channels: list[Any] = []
        if config.notify_desktop:
            channels.append(DesktopChannel())
        if config.notify_webhook:
            channels.append(WebhookChannel(config.notify_webhook, config.webhook_format))
        return cls(
            policy,
            repositories=config.runaway_action_repositories,
            dry_run=config.runaway_dry_run,
            notify_prompt_errors=config.notify_prompt_errors,
            notifier=Notifier(channels).start(),
        )

    # ------------------------------------------------------------------ entry points
    def on_detection(self, detection: Detection, view: SessionView) -> list[SpanRecord | LogRecord]:
        """Notify and/or interrupt for one detection; returns the interrupt's log and span records to export."""
        action = self.policy.action_for(detection.reason)
        if action == "none" or not self._applies(view):
            return []
        age_s = (self._clock() - detection.time_ns) / 1e9
        if age_s > MAX_AGE_S:
            logger.debug(
                "not acting on a %s detection in %s: %.0fs old", detection.reason, view.session_id, age_s
            )
            return []
        if not self._first(view.session_id, detection.trace_id, detection.reason, "act"):
            return []  # once per prompt and reason (a streak rule re-arms within a prompt)
        out: list[SpanRecord | LogRecord] = []
        result, detail = "notified", ""
        if action == "interrupt":
            # Another agent's CLI leaves no lock naming its process: the interrupt degrades to the notice.
            outcome = (
                unprovable(view.agent)
                if view.agent is not None
                else self._interrupt(view.folder, dry_run=self.dry_run)
            )
            result, detail = outcome.result, outcome.detail
            out = self._record_interrupt(detection, view, outcome)
        self._notify(self._notice(detection, view, result, detail))
        return out

    def on_prompt_end(self, run: PromptRun, view: SessionView) -> None:
        """With ``notify_prompt_errors``: notify once when a prompt ends in error."""
        if not self.notify_prompt_errors or run.outcome != "error" or not self._applies(view):
            return
        if (self._clock() - run.end_ns) / 1e9 > MAX_AGE_S:
            return
        if not self._first(view.session_id, run.trace_id, "prompt_error", "notify"):
            return
        self._notify(
            Notice(
                catalog.PROMPT_ERROR_EVENT,
                view.session_id,
                "prompt_error",
                "notified",
                run.end_ns,
                turns=run.turns_total,
                tool_calls=run.tool_calls,
                repository=view.repository,
                branch=view.branch,
                title=view.title,
            )
        )

    def drain(self, metrics: Metrics | None) -> None:
        """On the daemon's thread: count what the notifier did and the interrupts since the last call, and log
        the notices held back once their interval is over."""
        if self._held and time.monotonic() - self._logged_at >= NOTICE_LOG_EVERY_S:
            self._log_held()
        notifier = self.notifier
        if notifier is not None:
            while not notifier.outcomes.empty():
                channel, result = notifier.outcomes.get_nowait()
                key = f"{channel}:{result}"
                self.stats.notifications[key] = self.stats.notifications.get(key, 0) + 1
                if metrics is not None:
                    metrics.count(
                        catalog.NOTIFICATIONS,
                        1,
                        {catalog.NOTIFY_CHANNEL: channel, catalog.NOTIFY_OUTCOME: result},
                    )
        pending, self._pending_counts = self._pending_counts, []
        if metrics is not None:
            for name, attrs in pending:
                metrics.count(name, 1, attrs)

    def close(self, timeout_s: float = 2.0) -> None:
        """Log what was held back and send what is waiting (within ``timeout_s``)."""
        self._log_held()
        if self.notifier is not None:
            self.notifier.close(timeout_s)

    def describe(self) -> str:
        """One line for ``doctor``: what happens on a detection."""
        if not self.policy.active:
            return "runaway action: none (detections are only reported)"
        return describe_policy(self.policy, self.dry_run, self.repositories)

    # ------------------------------------------------------------------ helpers
    def _applies(self, view: SessionView) -> bool:
        if not self.repositories:
            return True
        for entry in self.repositories:
            if os.path.isabs(entry):
                if view.cwd and (view.cwd == entry or view.cwd.startswith(entry.rstrip("/\\") + os.sep)):
                    return True
            elif view.repository and view.repository.lower() == entry.lower():
                return True
        return False

    def _first(self, session_id: str, trace_id: int, reason: str, what: str) -> bool:
        key = (session_id, trace_id, reason, what)
        if key in self._done:
            return False
        self._done[key] = None
        if len(self._done) > _REMEMBER:
            self._done.popitem(last=False)
        return True

    def _notice(self, detection: Detection, view: SessionView, result: str, detail: str) -> Notice:
        return Notice(
            catalog.RUNAWAY_EVENT,
            view.session_id,
            detection.reason,
            result,
            detection.time_ns,
            threshold=detection.threshold,
            turns=detection.turns_total,
            tool_calls=detection.tool_calls,
            tool_name=detection.tool_name,
            repository=view.repository,
            branch=view.branch,
            title=view.title,
            detail=detail,
        )

    def _notify(self, notice: Notice) -> None:
        self.stats.notified += 1
        now = time.monotonic()
        if now - self._logged_at >= NOTICE_LOG_EVERY_S:
            self._log_held()
            self._logged_at = now
            logger.warning("%s: %s", notice.headline(), notice.body())
        elif len(self._held) < MAX_WAITING:
            self._held.append(notice)
        if self.notifier is not None:
            self.notifier.submit(notice)

    def _log_held(self) -> None:
        """One line for the notices held back since the last line (see :class:`~copilot_otel.daemon.notify.Burst`)."""
        if not self._held:
            return
        held = self._held[0] if len(self._held) == 1 else Burst(tuple(self._held))
        self._held = []
        self._logged_at = time.monotonic()
        logger.warning("%s: %s", held.headline(), held.body())

    def _record_interrupt(
        self, detection: Detection, view: SessionView, outcome: Outcome
    ) -> list[SpanRecord | LogRecord]:
        self.stats.interrupts[outcome.result] = self.stats.interrupts.get(outcome.result, 0) + 1
        acted = outcome.result in ("interrupted", "dry_run")
        (logger.error if outcome.result == "failed" else logger.warning)(
            "runaway %s in %s: %s: %s", detection.reason, view.session_id, outcome.result, outcome.detail
        )
        for pid, refusal in outcome.refusals:
            logger.warning("not interrupting pid %d of %s: %s", pid, view.session_id, refusal.detail)
        span, log, counted = actions.interrupt(
            detection,
            view.session_id,
            result=outcome.result,
            detail=outcome.detail,
            method=outcome.method,
            pid=outcome.pid,
            dry_run=self.dry_run,
            now_ns=self._clock(),
        )
        if acted:
            self._pending_counts.append((catalog.RUNAWAY_INTERRUPTED, counted))
        return [span, log]


def describe_policy(policy: RunawayPolicy, dry_run: bool, repositories: Sequence[str]) -> str:
    """What happens on a detection, in one line (``doctor``)."""
    text = f"runaway action: {policy}"
    if policy.interrupts:
        text += " (dry run: interrupts are only logged)" if dry_run else " (interrupts the CLI)"
    if repositories:
        text += f"; only in {', '.join(repositories)}"
    return text
