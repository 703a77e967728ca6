"""The router of the projections: each activity record to the spans, log events and metric points it becomes."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..model.activity import (
    Abort,
    AgentRun,
    Compaction,
    Detection,
    HookRun,
    ModeChange,
    ModelCall,
    Notification,
    PermissionWait,
    PromptRun,
    PromptStarted,
    Record,
    SelfReport,
    SessionError,
    SessionImported,
    SessionResumed,
    SessionShutdown,
    SessionStarted,
    SessionWarning,
    TaskComplete,
    ToolCall,
    Turn,
)
from ..model.records import Emission
from ..settings.content import ContentPolicy
from . import catalog, copilot, genai, langfuse, logs, metrics, ours, spans, vendors
from . import openinference as oi
from .prices import Cost, PriceTable

# One table for every session a process projects: each model's rates are worked out once.
_PRICES = PriceTable()
# Prompts whose calls' costs are being added up for their root span; past this many open at once (a daemon
# following sessions whose prompts never end), the oldest are forgotten.
_OPEN_PROMPTS_MAX = 64

__all__ = ["Projector"]


class Projector:
    """Turns activity records into the emissions the exporters send.

    Args:
        content: Where captured content goes: on spans (``on_spans``) and/or on details events (``on_events``).
        agent: The coding agent that wrote the session (the fold's ``LoopState.agent``: ``copilot``,
            ``claude-code``, ``codex``): every span, log record and metric point says it (``copilot_otel.agent``),
            and the spans carry that agent's own vocabulary (:mod:`.vendors`). ``None``: not said (the Copilot
            CLI's vocabulary and no agent attribute, as before the fold named the agent).
    """

    def __init__(self, content: ContentPolicy, agent: str | None = None) -> None:
        self._agent = agent
        self._vocab = vendors.vocabulary(agent)
        self._captures = bool(content.enabled)
        self._spans_content = content.on_spans
        self._events_content = content.on_events and self._captures
        # The totals of the last shutdown during a prompt: its log event comes first, then the prompt's root
        # span carries the same totals as a span event (one slot: a shutdown closes its prompt at once).
        self._shutdown: tuple[SessionShutdown, dict[str, Any]] | None = None
        # trace id -> [USD of its priced calls, its calls left unpriced, its calls priced]: the root says them.
        self._prompt_costs: dict[int, list[float]] = {}

    def project(self, records: Iterable[Record]) -> list[Emission]:
        """Every span, log record and measurement the records make, in record order."""
        out: list[Emission] = []
        for rec in records:
            _ROUTES[type(rec)](self, rec, out)
        agent = self._agent
        if agent is not None:
            key = ours.AGENT
            for emission in out:
                # Every emission's attributes are a dict the projections built for it just now (a metric's may be
                # shared by its points: they all get the same value).
                emission.attributes[key] = agent  # type: ignore[index]
        return out

    # One method per record type; a backfill projects hundreds of thousands of records, so the route is a dict
    # lookup on the type rather than a chain of isinstance checks.
    def _tool_call(self, rec: ToolCall, out: list[Emission]) -> None:
        out.append(spans.tool_call(rec, self._spans_content, self._vocab))
        metrics.tool_call(out, rec)

    def _model_call(self, rec: ModelCall, out: list[Emission]) -> None:
        content = spans.chat_content(rec) if self._captures else {}
        error_type = genai.model_call_error(rec)  # the span's and the metrics' (worked out once)
        span = spans.model_call(rec, content if self._spans_content else None, error_type, self._vocab)
        out.append(span)
        if self._events_content:
            out.append(logs.inference_details(rec, content))
        metrics.model_call(out, rec, error_type)
        self._cost(rec, span.attributes, out)

    def _cost(self, rec: ModelCall, attrs: Any, out: list[Emission]) -> None:
        """A call paid per token: its cost on its span (OpenInference's and Langfuse's names) and the cost
        counter, added up for its prompt's root; a call that could not be priced is counted for the root (a
        sub-agent's log of its own has its own projector: its calls reach the root with the prompt's record)."""
        cost = _PRICES.cost(rec)
        if cost is None:
            return
        open_ = self._prompt_costs.get(rec.trace_id)
        if open_ is None:
            if len(self._prompt_costs) >= _OPEN_PROMPTS_MAX:
                del self._prompt_costs[next(iter(self._prompt_costs))]
            open_ = self._prompt_costs[rec.trace_id] = [0.0, 0, 0]
        if isinstance(cost, Cost):
            oi.cost(attrs, cost.input_usd, cost.output_usd)
            langfuse.cost(attrs, cost.input_usd, cost.output_usd)
            infer = {genai.PROVIDER: rec.provider, genai.REQUEST_MODEL: rec.model}
            metrics.measure(out, catalog.COST, cost.total_usd, infer, rec.source_offset)
            open_[0] += cost.total_usd
            open_[2] += 1
        else:
            open_[1] += 1

    def _turn(self, rec: Turn, out: list[Emission]) -> None:
        out.append(spans.turn(rec, self._vocab))

    def _prompt_run(self, rec: PromptRun, out: list[Emission]) -> None:
        root = spans.prompt_run(rec, self._shutdown_totals, self._vocab)
        costs = self._prompt_costs.pop(rec.trace_id, None)
        if rec.subagent_calls:
            costs = self._subagent_costs(rec, costs, root.attributes)
        if costs is not None:
            attrs: Any = root.attributes
            if costs[2]:  # a prompt none of whose calls could be priced has no cost, not 0
                attrs[ours.PROMPT_COST] = costs[0]
            if costs[1]:
                attrs[ours.PROMPT_UNPRICED_CALLS] = int(costs[1])
        if rec.subagents_unread:
            root.attributes[ours.PROMPT_SUBAGENTS_UNREAD] = rec.subagents_unread  # type: ignore[index]
        if rec.subagents_running:
            root.attributes[ours.PROMPT_SUBAGENTS_RUNNING] = rec.subagents_running  # type: ignore[index]
        out.append(root)
        metrics.prompt_run(out, rec, self._agent)
        out.append(logs.prompt_ended(rec, self._vocab))

    @staticmethod
    def _subagent_costs(rec: PromptRun, costs: list[float] | None, attrs: Any) -> list[float]:
        """The prompt's costs with its sub-agents' calls made in logs of their own (their spans, and the cost
        counter's points, are those logs' folds'): the root's cost is its whole trace's, their part said apart."""
        costs = costs if costs is not None else [0.0, 0, 0]
        usd = 0.0
        priced = 0
        for call in rec.subagent_calls:
            cost = _PRICES.cost(call)
            if isinstance(cost, Cost):
                usd += cost.total_usd
                priced += 1
            elif cost is not None:
                costs[1] += 1
        if priced:
            costs[0] += usd
            costs[2] += priced
            attrs[ours.PROMPT_SUBAGENT_COST] = usd
        return costs

    def _agent_run(self, rec: AgentRun, out: list[Emission]) -> None:
        out.append(spans.agent_run(rec, self._vocab))
        metrics.agent_run(out, rec)

    def _prompt_started(self, rec: PromptStarted, out: list[Emission]) -> None:
        out.append(logs.prompt_started(rec, self._vocab))

    def _detection(self, rec: Detection, out: list[Emission]) -> None:
        metrics.detection(out, rec)
        out.append(logs.detection(rec))

    def _session_started(self, rec: SessionStarted, out: list[Emission]) -> None:
        metrics.session_event(out, "started", rec.source_offset)
        out.append(logs.session_started(rec))

    def _session_resumed(self, rec: SessionResumed, out: list[Emission]) -> None:
        metrics.session_event(out, "resumed", rec.source_offset)
        out.append(logs.session_resumed(rec))

    def _session_shutdown(self, rec: SessionShutdown, out: list[Emission]) -> None:
        metrics.session_shutdown(out, rec)
        totals = copilot.shutdown_totals(rec)
        if rec.trace_id is not None:
            self._shutdown = (rec, totals)
        out.append(logs.session_shutdown(rec, dict(totals)))  # a copy: the log event adds the session's ids

    def _shutdown_totals(self, rec: SessionShutdown) -> dict[str, Any]:
        """The totals of ``rec`` for its span event: those its log event was made with, else worked out now."""
        last, self._shutdown = self._shutdown, None
        if last is not None and last[0] is rec:
            return last[1]
        return copilot.shutdown_totals(rec)

    def _session_error(self, rec: SessionError, out: list[Emission]) -> None:
        metrics.session_error(out, rec)
        out.append(logs.session_error(rec, self._vocab))

    def _abort(self, rec: Abort, out: list[Emission]) -> None:
        metrics.abort(out, rec)
        out.append(logs.abort(rec, self._vocab))

    def _compaction(self, rec: Compaction, out: list[Emission]) -> None:
        if rec.complete:
            out.append(logs.compaction(rec, self._vocab))

    def _hook_run(self, rec: HookRun, out: list[Emission]) -> None:
        out.append(spans.hook_run(rec))

    def _session_warning(self, rec: SessionWarning, out: list[Emission]) -> None:
        metrics.session_warning(out, rec)
        out.append(logs.session_warning(rec))

    def _session_imported(self, rec: SessionImported, out: list[Emission]) -> None:
        out.append(logs.session_imported(rec))

    def _permission(self, rec: PermissionWait, out: list[Emission]) -> None:
        out.append(spans.permission(rec))

    def _notification(self, rec: Notification, out: list[Emission]) -> None:
        out.append(logs.notification(rec))

    def _task_complete(self, rec: TaskComplete, out: list[Emission]) -> None:
        out.append(logs.task_complete(rec))

    def _mode_change(self, rec: ModeChange, out: list[Emission]) -> None:
        out.append(logs.mode_change(rec))


_ROUTES: dict[type, Callable[[Projector, Any, list[Emission]], None]] = {
    ToolCall: Projector._tool_call,
    ModelCall: Projector._model_call,
    Turn: Projector._turn,
    PromptRun: Projector._prompt_run,
    AgentRun: Projector._agent_run,
    PromptStarted: Projector._prompt_started,
    Detection: Projector._detection,
    SessionStarted: Projector._session_started,
    SessionResumed: Projector._session_resumed,
    SessionShutdown: Projector._session_shutdown,
    SessionError: Projector._session_error,
    Abort: Projector._abort,
    Compaction: Projector._compaction,
    PermissionWait: Projector._permission,
    HookRun: Projector._hook_run,
    SessionWarning: Projector._session_warning,
    SessionImported: Projector._session_imported,
    Notification: Projector._notification,
    TaskComplete: Projector._task_complete,
    ModeChange: Projector._mode_change,
    SelfReport: lambda self, rec, out: (
        None
    ),  # for show and report: nothing of it is exported (see SelfReport)
}
