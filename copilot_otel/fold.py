"""Fold stage: session events in, finished span / log / metric records out. Pure: no I/O, no clock.

One :class:`SessionFold` follows one session log. It keeps only what is still open (the current prompt, its
agents, turns and tools) and hands out each span the moment it is complete, so the live daemon can export a tool
span as soon as its ``tool.execution_complete`` is read.

The trace model (see docs/design.md and the README's picture)::

    invoke_agent                          one trace per human prompt (root, AGENT)
    ├── turn 0                            one per assistant.turn_start…turn_end (CHAIN)
    │   ├── chat gpt-4.1                  the turn's model call (LLM, CLIENT)
    │   ├── execute_tool bash             each tool execution (TOOL)
    │   └── execute_tool task
    │       └── invoke_agent explore      a sub-agent, with its own turns, chats and tools
    └── turn 1 …

Timestamps and ids come only from the events, so the same log always folds to the same records. What the fold
keeps open between events (the prompt, its agents, turns and tools, and the checkpointed session context) is in
:mod:`copilot_otel.foldstate`, and the runaway rules in :mod:`copilot_otel.runaway`; this module holds the event
handlers that move that state and emit the records, including each runaway detection.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from . import ids, messages
from . import semconv as sc
from .content import ContentKind, ContentPolicy, argument_hash, capture_json, capture_text
from .foldstate import (
    Agent,
    Chat,
    Prompt,
    SessionContext,
    Tool,
    Turn,
    Usage,
    as_dict,
    as_float,
    as_int,
    as_str,
    put_if_set,
)
from .records import (
    Emission,
    Event,
    LogRecord,
    Measurement,
    Severity,
    SpanEventRecord,
    SpanKind,
    SpanRecord,
    StatusCode,
)
from .runaway import (
    Detection,
    RunawayThresholds,
    check_burn,
    check_errors,
    check_identical,
    check_turns,
)

# RunawayThresholds is re-exported: it is part of FoldSettings, and callers import both from here.
__all__ = ["FoldSettings", "LiveStats", "RunawayThresholds", "SessionContext", "SessionFold"]

_STATUS_MESSAGE_MAX = 512


# Events read only for their content (the system prompt, 20-50 KB a line, and reasoning): parse skips them
# without decoding unless their capture switch is on.
_CONTENT_ONLY_TYPES = {
    ContentKind.SYSTEM_PROMPT: b"system.message",
    ContentKind.REASONING: b"assistant.reasoning",
}


@dataclass(frozen=True, slots=True)
class FoldSettings:
    """Everything the fold needs besides the events; injected so the fold stays pure."""

    content: ContentPolicy = field(default_factory=ContentPolicy)
    runaway: RunawayThresholds = field(default_factory=RunawayThresholds)

    @property
    def undecoded_types(self) -> frozenset[bytes]:
        """Event types parse may skip without decoding: those read only for content that is not captured."""
        return frozenset(
            event_type for kind, event_type in _CONTENT_ONLY_TYPES.items() if not self.content.allows(kind)
        )


@dataclass(frozen=True, slots=True)
class LiveStats:
    """What the live gauges show about a prompt in progress."""

    trace_id: int
    span_id: int
    started_ns: int
    last_event_ns: int
    turns: int
    tool_calls: int
    identical_streak: int
    error_streak: int


class SessionFold:
    """Folds one session's events into spans, log events and measurements.

    Usage::

        fold = SessionFold(session_id_hint, settings)
        for event in events:
            emit(fold.feed(event))
        emit(fold.close(reason="file_ended"))

    Args:
        session_id: The session id from the folder or file name; replaced by ``session.start.sessionId``.
        settings: Content policy and runaway thresholds.
        context: A snapshot from :meth:`context_snapshot` when resuming from a checkpoint.
    """

    def __init__(
        self,
        session_id: str,
        settings: FoldSettings | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> None:
        self.settings = settings or FoldSettings()
        self.ctx = SessionContext.from_dict(context) if context else SessionContext(session_id=session_id)
        self._prompts: dict[str, Prompt] = {}
        self._current: Prompt | None = None
        # agent routing: envelope agentId / spawning toolCallId → (prompt, agent)
        self._by_agent_id: dict[str, tuple[Prompt, Agent]] = {}
        self._by_task_call: dict[str, tuple[Prompt, Agent]] = {}
        self._tool_owner: dict[str, Prompt] = {}
        self._out: list[Emission] = []
        self._offset = 0

    # ------------------------------------------------------------------ public API
    @property
    def last_event_ns(self) -> int:
        """Timestamp of the latest event folded (kept in the context so a resumed fold knows it)."""
        return self.ctx.last_event_ns

    @last_event_ns.setter
    def last_event_ns(self, value: int) -> None:
        self.ctx.last_event_ns = value

    def context_snapshot(self) -> dict[str, Any]:
        """Session context to store in a checkpoint (see the resume model in docs/design.md)."""
        return self.ctx.to_dict()

    def resume_point(self) -> tuple[int, dict[str, Any]] | None:
        """Where a restarted fold must begin to rebuild the open prompts, and the context it needs there.

        ``None`` when no prompt is open (resuming at the current offset with :meth:`context_snapshot` is enough).
        """
        if not self._prompts:
            return None
        oldest = min(self._prompts.values(), key=lambda p: p.start_offset)
        return oldest.start_offset, dict(oldest.context_at_open)

    @property
    def has_open_prompt(self) -> bool:
        return bool(self._prompts)

    def live_stats(self) -> list[LiveStats]:
        """Progress of each prompt still open, for the live gauges."""
        return [
            LiveStats(
                trace_id=p.trace_id,
                span_id=p.root.span_id,
                started_ns=p.start_ns,
                last_event_ns=p.last_ns,
                turns=p.turns_total,
                tool_calls=p.tool_calls,
                identical_streak=p.identical_streak,
                error_streak=p.error_streak,
            )
            for p in self._prompts.values()
        ]

    def feed(self, event: Event) -> list[Emission]:
        """Fold one event; returns the records it completed (often none)."""
        self._out = []
        self._offset = event.end_offset
        if event.time_ns <= 0:
            # No usable timestamp on this line: date it at the previous event rather than lose it.
            event = replace(event, time_ns=self.last_event_ns)
        if event.time_ns > self.last_event_ns:
            self.last_event_ns = event.time_ns
        handler = _HANDLERS.get(event.type)
        if handler is not None:
            handler(self, event)
        return self._out

    def close(self, reason: str, time_ns: int | None = None) -> list[Emission]:
        """Close everything still open (end of file, owner gone, idle timeout); marks it incomplete.

        Args:
            reason: Why the work is closed, recorded as ``copilot_otel.incomplete.reason``.
            time_ns: When; defaults to the last event seen (never the wall clock).
        """
        self._out = []
        for prompt in list(self._prompts.values()):
            self._close_prompt(
                prompt, time_ns or max(prompt.last_ns, prompt.start_ns), reason, incomplete=True
            )
        return self._out

    # ------------------------------------------------------------------ helpers
    def _sid(self, *parts: str) -> int:
        return ids.span_id(self.ctx.session_id, *parts)

    def _unique_sid(self, prompt: Prompt, *parts: str) -> int:
        """A span id from ``parts``, made unique within the prompt if a log repeats ids (deterministic: the
        prompt is always re-folded from its first line)."""
        key = "\x1f".join(parts)
        seen = prompt.used_keys.get(key, 0)
        prompt.used_keys[key] = seen + 1
        return self._sid(*parts) if seen == 0 else self._sid(*parts, f"#{seen}")

    def _common(self, op: str | None) -> dict[str, Any]:
        attrs: dict[str, Any] = {}
        if op:
            attrs[sc.OPERATION] = op
        attrs[sc.PROVIDER] = self.ctx.provider or "github"
        attrs[sc.CONVERSATION] = self.ctx.session_id
        attrs[sc.SESSION_ID] = self.ctx.session_id
        return attrs

    def _measure(self, name: str, value: float, attrs: Mapping[str, Any] | None = None) -> None:
        spec = sc.METRICS_BY_NAME[name]
        self._out.append(Measurement(name, value, attrs or {}, spec.instrument, self._offset))

    def _log(
        self,
        name: str,
        time_ns: int,
        body: str,
        attrs: dict[str, Any],
        prompt: Prompt | None,
        severity: Severity = Severity.INFO,
        *,
        span_id: int | None = None,
    ) -> None:
        """Emit a log event in the prompt's trace, on ``span_id`` if given, else on the prompt's root span."""
        attrs.setdefault(sc.SESSION_ID, self.ctx.session_id)
        attrs.setdefault(sc.CONVERSATION, self.ctx.session_id)
        self._out.append(
            LogRecord(
                event_name=name,
                time_ns=time_ns,
                severity=severity,
                body=body,
                attributes=attrs,
                trace_id=prompt.trace_id if prompt else None,
                span_id=span_id if span_id is not None else (prompt.root.span_id if prompt else None),
                source_offset=self._offset,
            )
        )

    def _takes_content(self, events: bool) -> bool:
        """Whether captured content has somewhere to go: spans, or (for chat messages) the details log event.

        Only the chat's input and output messages go on ``gen_ai.client.inference.operation.details`` events;
        everything else (agent input/output, tool arguments and results on tool spans, titles) is span content,
        so under ``EVENT_ONLY`` it is not captured at all rather than put where it was not asked for.
        """
        policy = self.settings.content
        return bool(policy.enabled) and (policy.on_spans or (events and policy.on_events))

    def _capture(self, text: Any, kind: ContentKind, *, events: bool = False) -> str | None:
        """``text`` scrubbed and cut if ``kind`` may be captured for spans (or, with ``events``, for the chat
        messages, which may go on spans, the details event or both), else ``None``."""
        if not isinstance(text, str) or not self._takes_content(events):
            return None
        return capture_text(text, kind, self.settings.content)

    def _capture_json(self, value: Any, kind: ContentKind, *, events: bool = False) -> str | None:
        """As :meth:`_capture`, for a JSON-like value: valid, scrubbed, length-bounded JSON text."""
        if value is None or not self._takes_content(events):
            return None
        return capture_json(value, kind, self.settings.content)

    # ------------------------------------------------------------------ prompts
    def _open_prompt(self, event: Event, human: bool) -> Prompt:
        context_at_open = self.ctx.to_dict()
        # The prompt's trace id comes from its first event's id alone, so it is the same whether the log is
        # read from its start or from the middle (--backfill none, a restart). Logs that reuse event ids (trimmed
        # third-party fixtures) get a repeat counter, kept in the checkpointed context.
        if event.id == self.ctx.last_prompt_event_id:
            self.ctx.prompt_id_repeats += 1
            key = f"{event.id}#{self.ctx.prompt_id_repeats}"
        else:
            self.ctx.last_prompt_event_id = event.id
            self.ctx.prompt_id_repeats = 0
            key = event.id
        trace = ids.trace_id(self.ctx.session_id, key)
        root = Agent(
            span_id=self._sid("root", key),
            parent_span_id=None,
            name=None,
            start_ns=event.time_ns,
            model=self.ctx.model,
            last_ns=event.time_ns,
        )
        prompt = Prompt(
            key=key,
            trace_id=trace,
            root=root,
            start_ns=event.time_ns,
            start_offset=event.offset,
            interaction_id=as_str(event.data.get("interactionId")),
            human=human,
            last_ns=event.time_ns,
            context_at_open=context_at_open,
        )
        self._prompts[key] = prompt
        self._current = prompt
        self.ctx.prompts_started += 1
        if human:
            root.input_text = self._capture(event.data.get("content"), ContentKind.PROMPTS)
            attrs: dict[str, Any] = {"copilot_otel.prompt.index": self.ctx.prompts_started - 1}
            put_if_set(attrs, "github.copilot.interaction_id", prompt.interaction_id)
            put_if_set(attrs, "copilot_otel.prompt.delivery", as_str(event.data.get("delivery")))
            self._log("copilot_otel.prompt.started", event.time_ns, "prompt started", attrs, prompt)
        return prompt

    def _ensure_prompt(self, event: Event) -> Prompt:
        """The prompt that agent activity belongs to; activity with none open starts a synthetic one."""
        if self._current is not None:
            return self._current
        prompt = self._open_prompt(event, human=False)
        prompt.root.input_text = None
        return prompt

    def _close_prompt(self, prompt: Prompt, time_ns: int, reason: str | None, incomplete: bool) -> None:
        for agent in list(prompt.agents.values()):
            if not agent.closed:
                self._close_agent(prompt, agent, time_ns, reason or "prompt_closed", incomplete=True)
        self._close_agent(prompt, prompt.root, time_ns, reason, incomplete=incomplete)
        if incomplete and prompt.outcome == "completed":
            prompt.outcome = "incomplete"
        if incomplete and prompt.incomplete_reason is None:
            prompt.incomplete_reason = reason
        self._emit_root(prompt, time_ns)
        self._prompts.pop(prompt.key, None)
        if self._current is prompt:
            self._current = None
        for agent_id, (p, _) in list(self._by_agent_id.items()):
            if p is prompt:
                del self._by_agent_id[agent_id]
        for call_id, (p, _) in list(self._by_task_call.items()):
            if p is prompt:
                del self._by_task_call[call_id]
        for call_id in list(prompt.tools):
            self._tool_owner.pop(call_id, None)

    def _finish_current(self) -> None:
        """End the current prompt (a new one begins) where its activity stopped, unless background sub-agents
        still run: it then lingers until they end."""
        prompt = self._current
        if prompt is None:
            return
        self._current = None
        if any(a.background and not a.closed for a in prompt.agents.values()):
            return
        self._close_prompt(prompt, prompt.last_ns, None, incomplete=False)

    def _maybe_close_lingering(self, prompt: Prompt) -> None:
        if prompt is not self._current and all(a.closed for a in prompt.agents.values()):
            self._close_prompt(prompt, prompt.last_ns, None, incomplete=False)

    def _touch(self, prompt: Prompt, agent: Agent, time_ns: int) -> None:
        if time_ns > prompt.last_ns:
            prompt.last_ns = time_ns
        if time_ns > agent.last_ns:
            agent.last_ns = time_ns
        if agent.turn is not None and time_ns > agent.turn.last_ns:
            agent.turn.last_ns = time_ns

    # ------------------------------------------------------------------ routing
    def _route(self, event: Event) -> tuple[Prompt, Agent]:
        """Which prompt and agent an activity event belongs to (envelope agentId, else parentToolCallId)."""
        if event.agent_id is not None:
            hit = self._by_agent_id.get(event.agent_id) or self._by_task_call.get(event.agent_id)
            if hit is not None:
                return hit
        parent_call = as_str(event.data.get("parentToolCallId"))
        if parent_call is not None:
            hit = self._by_task_call.get(parent_call)
            if hit is not None:
                if event.agent_id is not None:
                    self._by_agent_id[event.agent_id] = hit
                return hit
            return self._start_subagent(event, parent_call, None)
        if event.agent_id is not None:
            return self._start_subagent(event, None, None)
        prompt = self._ensure_prompt(event)
        return prompt, prompt.root

    def _start_subagent(
        self, event: Event, task_call_id: str | None, data: Mapping[str, Any] | None
    ) -> tuple[Prompt, Agent]:
        """Create a sub-agent under the ``task`` tool span that spawned it."""
        prompt: Prompt | None = None
        parent_span: int | None = None
        if task_call_id is not None:
            owner = self._tool_owner.get(task_call_id)
            if owner is not None:
                prompt = owner
                parent_span = owner.tools[task_call_id].span_id
        if prompt is None:
            parent_agent_id = as_str((data or {}).get("parentId"))
            hit = self._by_agent_id.get(parent_agent_id) if parent_agent_id else None
            prompt = hit[0] if hit else self._ensure_prompt(event)
        key = event.agent_id or task_call_id or event.id
        if parent_span is None:
            # The spawning task call is unknown (log starts mid-way): hang the agent under the root.
            parent_span = prompt.root.span_id
        agent = Agent(
            span_id=self._unique_sid(prompt, "agent", key),
            parent_span_id=parent_span,
            name=None,
            start_ns=event.time_ns,
            agent_id=event.agent_id,
            task_call_id=task_call_id,
            model=self.ctx.model,
            last_ns=event.time_ns,
        )
        prompt.agents[key] = agent
        if event.agent_id:
            self._by_agent_id[event.agent_id] = (prompt, agent)
        if task_call_id:
            self._by_task_call[task_call_id] = (prompt, agent)
        return prompt, agent

    # ------------------------------------------------------------------ session events
    def _on_session_start(self, event: Event) -> None:
        d = event.data
        self.ctx.session_id = as_str(d.get("sessionId")) or self.ctx.session_id
        self.ctx.copilot_version = as_str(d.get("copilotVersion")) or self.ctx.copilot_version
        self.ctx.producer = as_str(d.get("producer")) or self.ctx.producer
        self.ctx.model = as_str(d.get("selectedModel")) or self.ctx.model
        self._apply_context(d.get("context"))
        self._measure("copilot_otel.session.count", 1, {sc.SESSION_EVENT: "started"})
        attrs: dict[str, Any] = {}
        put_if_set(attrs, "copilot_otel.cli.version", self.ctx.copilot_version)
        put_if_set(attrs, sc.REQUEST_MODEL, self.ctx.model)
        self._log("copilot_otel.session.started", event.time_ns, "session started", attrs, None)

    def _on_session_resume(self, event: Event) -> None:
        d = event.data
        if self._prompts:
            # The previous process ended without closing its prompt (killed): close it where it stopped.
            for prompt in list(self._prompts.values()):
                self._close_prompt(prompt, prompt.last_ns, "session_resumed", incomplete=True)
        self.ctx.model = as_str(d.get("selectedModel")) or self.ctx.model
        self._apply_context(d.get("context"))
        self._measure("copilot_otel.session.count", 1, {sc.SESSION_EVENT: "resumed"})
        self._log("copilot_otel.session.resumed", event.time_ns, "session resumed", {}, None)

    def _apply_context(self, context: Any) -> None:
        if not isinstance(context, dict):
            return
        self.ctx.cwd = as_str(context.get("cwd")) or self.ctx.cwd
        self.ctx.git_root = as_str(context.get("gitRoot")) or self.ctx.git_root
        self.ctx.repository = as_str(context.get("repository")) or self.ctx.repository
        self.ctx.branch = as_str(context.get("branch")) or self.ctx.branch
        self.ctx.head_commit = as_str(context.get("headCommit")) or self.ctx.head_commit

    def _on_context_changed(self, event: Event) -> None:
        self._apply_context(event.data)

    def _on_model_change(self, event: Event) -> None:
        model = as_str(event.data.get("newModel"))
        if model is None:
            return
        if event.agent_id is not None or event.data.get("source") == "agent":
            hit = self._by_agent_id.get(event.agent_id or "")
            if hit is not None:
                hit[1].model = model
            return
        self.ctx.model = model
        if self._current is not None:
            self._current.root.model = model

    def _on_shutdown(self, event: Event) -> None:
        d = event.data
        prompt = self._current
        totals: dict[str, Any] = {}
        put_if_set(totals, "copilot_otel.shutdown.type", as_str(d.get("shutdownType")))
        premium = as_float(d.get("totalPremiumRequests"))
        snapshot = as_dict(d.get("accountingSnapshot"))
        if premium is None:
            premium = as_float(snapshot.get("totalPremiumRequestCost"))
        put_if_set(totals, "github.copilot.total_premium_requests", premium)
        put_if_set(totals, "github.copilot.total_nano_aiu", as_float(d.get("totalNanoAiu")))
        put_if_set(totals, "github.copilot.total_api_duration_ms", as_float(d.get("totalApiDurationMs")))
        changes = as_dict(d.get("codeChanges"))
        added = as_int(changes.get("linesAdded")) or 0
        removed = as_int(changes.get("linesRemoved")) or 0
        files = changes.get("filesModified")
        totals["github.copilot.lines_added"] = added
        totals["github.copilot.lines_removed"] = removed
        totals["github.copilot.files_modified_count"] = (
            len(files) if isinstance(files, list) else as_int(changes.get("filesModifiedCount")) or 0
        )
        metrics = as_dict(d.get("modelMetrics"))
        for model, m in metrics.items():
            if not isinstance(m, dict):
                continue
            usage = as_dict(m.get("usage"))
            for key, field_name in (
                ("inputTokens", "input_tokens"),
                ("outputTokens", "output_tokens"),
                ("cacheReadTokens", "cache_read_tokens"),
                ("cacheWriteTokens", "cache_write_tokens"),
            ):
                put_if_set(
                    totals, f"copilot_otel.session.models.{model}.{field_name}", as_int(usage.get(key))
                )
            req = as_dict(m.get("requests"))
            put_if_set(totals, f"copilot_otel.session.models.{model}.requests", as_int(req.get("count")))
            if not self.ctx.saw_usage_records:
                # Logs without per-call usage records (CLI < 1.0.102): account cost from the session totals.
                self._measure_total(
                    "copilot_otel.premium_requests",
                    f"premium:{model}",
                    as_float(req.get("cost")),
                    {sc.REQUEST_MODEL: model},
                )
                self._measure_total(
                    "copilot_otel.nano_aiu",
                    f"nano_aiu:{model}",
                    as_float(m.get("totalNanoAiu")),
                    {sc.REQUEST_MODEL: model},
                )
        self._measure_total("github.copilot.code.lines_added", "lines_added", added)
        self._measure_total("copilot_otel.code.lines_removed", "lines_removed", removed)
        self._measure("copilot_otel.session.count", 1, {sc.SESSION_EVENT: "shutdown"})
        if prompt is not None:
            prompt.add_event(SpanEventRecord("github.copilot.session.shutdown", event.time_ns, dict(totals)))
            if not self.ctx.saw_usage_records:
                prompt.root.model = prompt.root.model or self.ctx.model
        self._log("copilot_otel.session.shutdown", event.time_ns, "session shutdown", totals, prompt)
        for open_prompt in list(self._prompts.values()):
            incomplete = any(not a.closed for a in open_prompt.agents.values()) or self._has_open_work(
                open_prompt
            )
            self._close_prompt(
                open_prompt,
                max(open_prompt.last_ns, open_prompt.start_ns),
                "session_shutdown" if incomplete else None,
                incomplete=incomplete,
            )

    def _measure_total(
        self, name: str, key: str, total: float | None, attrs: Mapping[str, Any] | None = None
    ) -> None:
        """Count the growth of a cumulative session total since the last ``session.shutdown`` reported it."""
        if total is None:
            return
        delta = total - self.ctx.reported_totals.get(key, 0.0)
        if delta > 0:
            self._measure(name, delta, attrs)
            self.ctx.reported_totals[key] = total

    @staticmethod
    def _has_open_work(prompt: Prompt) -> bool:
        return bool(prompt.tools) or (prompt.root.turn is not None and not prompt.root.turn.synthetic)

    def _on_session_error(self, event: Event) -> None:
        d = event.data
        error_type = as_str(d.get("errorType")) or "error"
        message = as_str(d.get("message")) or error_type
        prompt, agent = self._route(event) if (event.agent_id or self._current) else (None, None)
        self._measure("copilot_otel.errors", 1, {sc.ERROR_TYPE: error_type})
        attrs: dict[str, Any] = {
            sc.ERROR_TYPE: error_type,
            "exception.message": message[:_STATUS_MESSAGE_MAX],
        }
        put_if_set(attrs, "github.copilot.error_status_code", as_int(d.get("statusCode")))
        if prompt is not None and agent is not None:
            self._touch(prompt, agent, event.time_ns)
            ev_attrs = {
                "exception.type": error_type,
                "exception.message": message[:_STATUS_MESSAGE_MAX],
                "github.copilot.error_type": error_type,
            }
            put_if_set(ev_attrs, "github.copilot.error_status_code", as_int(d.get("statusCode")))
            prompt.add_event(SpanEventRecord("gen_ai.client.operation.exception", event.time_ns, ev_attrs))
            turn = agent.turn
            if turn is not None and not turn.chat.emitted:
                self._emit_chat(prompt, agent, turn, event.time_ns, StatusCode.ERROR, error_type, message)
            agent.status = StatusCode.ERROR
            agent.error_type = error_type
            agent.status_message = message[:_STATUS_MESSAGE_MAX]
            if agent is prompt.root:
                prompt.outcome = "error"
        self._log(
            "copilot_otel.session.error",
            event.time_ns,
            message[:_STATUS_MESSAGE_MAX],
            attrs,
            prompt,
            Severity.ERROR,
        )

    def _on_abort(self, event: Event) -> None:
        prompt = self._current
        reason = as_str(event.data.get("reason")) or "unknown"
        self._measure("copilot_otel.errors", 1, {sc.ERROR_TYPE: "aborted"})
        if prompt is None:
            self._log(
                "copilot_otel.abort",
                event.time_ns,
                f"aborted: {reason}",
                {"github.copilot.abort_reason": reason},
                None,
                Severity.WARN,
            )
            return
        self._touch(prompt, prompt.root, event.time_ns)
        prompt.add_event(
            SpanEventRecord(
                "github.copilot.session.abort", event.time_ns, {"github.copilot.abort_reason": reason}
            )
        )
        prompt.outcome = "aborted"
        prompt.incomplete_reason = "aborted"
        # Everything still running was cancelled by the abort: close tools and pending model calls now.
        for agent in [prompt.root, *prompt.agents.values()]:
            if agent.closed:
                continue
            turn = agent.turn
            if turn is not None and not turn.chat.emitted:
                self._emit_chat(
                    prompt, agent, turn, event.time_ns, StatusCode.UNSET, None, None, cancelled=True
                )
        for call_id, tool in list(prompt.tools.items()):
            self._end_tool(
                prompt,
                tool,
                event.time_ns,
                success=False,
                error_type="cancelled",
                message="Operation aborted",
                incomplete="aborted",
            )
            del prompt.tools[call_id]
        prompt.root.status = StatusCode.ERROR
        prompt.root.error_type = "cancelled"
        prompt.root.status_message = f"aborted: {reason}"
        self._log(
            "copilot_otel.abort",
            event.time_ns,
            f"prompt aborted: {reason}",
            {"github.copilot.abort_reason": reason},
            prompt,
            Severity.WARN,
        )

    def _on_compaction(self, event: Event) -> None:
        prompt = self._current
        d = event.data
        name = (
            "github.copilot.session.compaction_start"
            if event.type.endswith("start")
            else "github.copilot.session.compaction_complete"
        )
        attrs: dict[str, Any] = {}
        for key, out in (
            ("preCompactionTokens", "github.copilot.pre_tokens"),
            ("postCompactionTokens", "github.copilot.post_tokens"),
            ("tokensRemoved", "github.copilot.tokens_removed"),
            ("messagesRemoved", "github.copilot.messages_removed"),
            ("currentTokens", "github.copilot.current_tokens"),
            ("tokenLimit", "github.copilot.token_limit"),
        ):
            put_if_set(attrs, out, as_int(d.get(key)))
        put_if_set(attrs, "github.copilot.compaction.trigger", as_str(d.get("trigger")))
        if isinstance(d.get("success"), bool):
            attrs["github.copilot.compaction.success"] = d["success"]
        if prompt is not None:
            prompt.add_event(SpanEventRecord(name, event.time_ns, attrs))
            self._touch(prompt, prompt.root, event.time_ns)
        if name.endswith("complete"):
            self._log("copilot_otel.compaction", event.time_ns, "context compacted", dict(attrs), prompt)
            used = d.get("compactionTokensUsed")
            if isinstance(used, dict) and not self.ctx.saw_usage_records and prompt is not None:
                usage = Usage(
                    input=as_int(used.get("inputTokens")) or 0,
                    output=as_int(used.get("outputTokens")) or 0,
                    cache_read=as_int(used.get("cacheReadTokens")) or 0,
                    cache_write=as_int(used.get("cacheWriteTokens")) or 0,
                    calls=1,
                )
                self._standalone_chat(
                    prompt,
                    event,
                    usage,
                    as_str(used.get("model")) or self.ctx.model,
                    as_float(used.get("duration")),
                    "compaction",
                )

    def _on_truncation(self, event: Event) -> None:
        prompt = self._current
        if prompt is None:
            return
        d = event.data
        attrs: dict[str, Any] = {}
        for key, out in (
            ("tokenLimit", "github.copilot.token_limit"),
            ("preTruncationTokensInMessages", "github.copilot.pre_tokens"),
            ("postTruncationTokensInMessages", "github.copilot.post_tokens"),
            ("tokensRemovedDuringTruncation", "github.copilot.tokens_removed"),
            ("messagesRemovedDuringTruncation", "github.copilot.messages_removed"),
        ):
            put_if_set(attrs, out, as_int(d.get(key)))
        prompt.add_event(SpanEventRecord("github.copilot.session.truncation", event.time_ns, attrs))

    def _on_skill(self, event: Event) -> None:
        if self._current is None:
            return
        attrs: dict[str, Any] = {}
        put_if_set(attrs, "github.copilot.skill.name", as_str(event.data.get("name")))
        put_if_set(attrs, "github.copilot.skill.plugin_name", as_str(event.data.get("pluginName")))
        put_if_set(attrs, "github.copilot.skill.trigger", as_str(event.data.get("trigger")))
        self._current.add_event(SpanEventRecord("github.copilot.skill.invoked", event.time_ns, attrs))

    # ------------------------------------------------------------------ messages
    def _on_system_message(self, event: Event) -> None:
        """The system prompt, decoded only when its own capture switch is on (parse skips it otherwise).

        The root agent's goes into the session context (old logs write it once, before the first prompt; newer
        ones with each prompt); a sub-agent's to that agent. Never opens a prompt.
        """
        text = self._capture(event.data.get("content"), ContentKind.SYSTEM_PROMPT)
        if text is None:
            return
        if event.agent_id is None:
            self.ctx.system_prompt = text
            return
        hit = self._by_agent_id.get(event.agent_id)
        if hit is not None:
            hit[1].system_text = text

    def _on_reasoning(self, event: Event) -> None:
        """A reasoning block of the current model call, decoded only when its capture switch is on."""
        text = self._capture(event.data.get("content"), ContentKind.REASONING, events=True)
        if text is None or (event.agent_id is None and not self._prompts):
            return
        _, agent = self._route(event)
        if agent.turn is not None:
            agent.turn.chat.reasoning_text.append(text)

    def _on_user_message(self, event: Event) -> None:
        d = event.data
        source = as_str(d.get("source"))
        if event.agent_id is not None or (source or "").startswith("agent-"):
            # A sub-agent's task prompt: the start of that agent's work, not a human prompt.
            prompt, agent = self._route(event)
            self._touch(prompt, agent, event.time_ns)
            if agent.input_text is None:
                agent.input_text = self._capture(d.get("content"), ContentKind.PROMPTS)
            self._queue_user_message(agent, d.get("content"))
            return
        delivery = as_str(d.get("delivery"))
        injected = source is not None or d.get("isAutopilotContinuation") is True or delivery == "steering"
        if injected and self._current is not None:
            prompt = self._current
            attrs: dict[str, Any] = {"github.copilot.user.message.source": source or delivery or "autopilot"}
            put_if_set(attrs, "github.copilot.user.message.interaction_id", as_str(d.get("interactionId")))
            put_if_set(attrs, "github.copilot.user.message.turn_id", as_str(d.get("turnId")))
            if d.get("isAutopilotContinuation") is True:
                attrs["copilot_otel.autopilot_continuation"] = True
            text = self._capture(d.get("content"), ContentKind.PROMPTS)
            put_if_set(attrs, "copilot_otel.user.message.content", text)
            prompt.add_event(SpanEventRecord("github.copilot.user.message", event.time_ns, attrs))
            self._touch(prompt, prompt.root, event.time_ns)
            self._queue_user_message(prompt.root, d.get("content"))
            return
        # A new human prompt (idle or queued delivery), or an injected message with no prompt open.
        self._finish_current()
        prompt = self._open_prompt(event, human=not injected)
        attrs = {"github.copilot.user.message.source": source or "user"}
        put_if_set(attrs, "github.copilot.user.message.interaction_id", prompt.interaction_id)
        prompt.add_event(SpanEventRecord("github.copilot.user.message", event.time_ns, attrs))
        self._queue_user_message(prompt.root, d.get("content"))

    def _queue_user_message(self, agent: Agent, content: Any) -> None:
        """Keep a user message (or a sub-agent's task prompt) for the input messages of the agent's next call."""
        text = self._capture(content, ContentKind.PROMPTS, events=True)
        if text is not None:
            agent.pending_input.append(messages.user_message(text))

    def _on_turn_start(self, event: Event) -> None:
        prompt, agent = self._route(event)
        agent.uses_turn_events = True
        if agent.turn is not None:
            # A turn_start without the previous turn_end: close the old one where its activity stopped.
            self._end_turn(prompt, agent, agent.turn.last_ns, incomplete="no_turn_end")
        self._begin_turn(prompt, agent, event, event.time_ns, synthetic=False)
        self._touch(prompt, agent, event.time_ns)

    def _begin_turn(self, prompt: Prompt, agent: Agent, event: Event, start_ns: int, synthetic: bool) -> Turn:
        index = agent.turn_count
        agent.turn_count += 1
        prompt.turns_total += 1
        turn = Turn(
            span_id=self._sid("turn", prompt.key, str(agent.span_id), str(index)),
            index=index,
            turn_id=as_str(event.data.get("turnId")),
            interaction_id=as_str(event.data.get("interactionId")) or prompt.interaction_id,
            start_ns=start_ns,
            synthetic=synthetic,
            last_ns=max(start_ns, event.time_ns),
        )
        agent.turn = turn
        if agent.pending_input:
            # The turn's model call is the first to see what arrived since the previous one.
            turn.chat.input_messages = agent.pending_input
            agent.pending_input = []
        self._detect(prompt, check_turns(prompt, self.settings.runaway, event.time_ns))
        return turn

    def _on_turn_end(self, event: Event) -> None:
        prompt, agent = self._route(event)
        self._touch(prompt, agent, event.time_ns)
        if agent.turn is None:
            return
        self._end_turn(prompt, agent, event.time_ns)

    def _end_turn(self, prompt: Prompt, agent: Agent, end_ns: int, incomplete: str | None = None) -> None:
        turn = agent.turn
        if turn is None:
            return
        agent.turn = None
        if not turn.chat.emitted:
            chat = turn.chat
            if incomplete is not None and chat.end_ns is None:
                self._emit_chat(prompt, agent, turn, end_ns, StatusCode.UNSET, None, None, cancelled=True)
            elif chat.end_ns is None and chat.records == 0 and not turn.synthetic:
                # The turn ended without any model response or usage: the model call failed (the CLI logs the
                # retries' outcome as session.error right after turn_end).
                self._emit_chat(
                    prompt,
                    agent,
                    turn,
                    end_ns,
                    StatusCode.ERROR,
                    "ModelCallError",
                    "the model call returned no response",
                )
            else:
                self._emit_chat(prompt, agent, turn, chat.end_ns or end_ns, StatusCode.UNSET, None, None)
        attrs: dict[str, Any] = self._common(None)
        attrs["copilot_otel.turn.index"] = turn.index
        put_if_set(attrs, "github.copilot.turn_id", turn.turn_id)
        put_if_set(attrs, "github.copilot.interaction_id", turn.interaction_id)
        attrs[sc.OI_KIND] = "CHAIN"
        attrs["copilot_otel.turn.tool_calls"] = turn.tool_calls
        if agent.name:
            attrs[sc.AGENT_NAME] = agent.name
        if turn.synthetic:
            attrs["copilot_otel.turn.synthetic"] = True
        if incomplete:
            attrs["copilot_otel.incomplete"] = True
            attrs["copilot_otel.incomplete.reason"] = incomplete
        self._span(
            prompt,
            turn.span_id,
            agent.span_id,
            f"turn {turn.index}",
            SpanKind.INTERNAL,
            turn.start_ns,
            max(end_ns, turn.last_ns),
            attrs,
        )

    def _on_usage_record(self, event: Event) -> None:
        usage = event.data.get("usage")
        if not isinstance(usage, dict):
            return
        self.ctx.saw_usage_records = True
        prompt, agent = self._route(event)
        self._touch(prompt, agent, event.time_ns)
        provider = self._provider_from_usage(usage)
        if provider:
            self.ctx.provider = provider
        u = Usage(
            input=as_int(usage.get("inputTokens")) or 0,
            output=as_int(usage.get("outputTokens")) or 0,
            cache_read=as_int(usage.get("cacheReadTokens")) or 0,
            cache_write=as_int(usage.get("cacheWriteTokens")) or 0,
            cost=as_float(usage.get("cost")) or 0.0,
            nano_aiu=as_float(usage.get("totalNanoAiu"))
            or as_float(
                (usage.get("copilotUsage") or {}).get("totalNanoAiu")
                if isinstance(usage.get("copilotUsage"), dict)
                else None
            )
            or 0.0,
            calls=1,
        )
        self._detect(prompt, check_burn(prompt, self.settings.runaway, event.time_ns, u.input + u.output))
        turn = agent.turn
        model = as_str(usage.get("model"))
        if turn is None or turn.chat.emitted:
            self._standalone_chat(
                prompt, event, u, model, as_float(usage.get("duration")), "usage_record", usage
            )
            return
        chat = turn.chat
        chat.usage.add(u)
        chat.records += 1
        chat.model = chat.model or model
        chat.response_id = as_str(usage.get("apiCallId")) or chat.response_id
        chat.finish_reason = as_str(usage.get("finishReason")) or chat.finish_reason
        chat.ttft_ms = as_float(usage.get("timeToFirstTokenMs")) if chat.ttft_ms is None else chat.ttft_ms
        server = as_float(usage.get("duration"))
        if server is not None:
            chat.server_ms = (chat.server_ms or 0.0) + server
        chat.initiator = chat.initiator or as_str(usage.get("initiator"))

    @staticmethod
    def _provider_from_usage(usage: Mapping[str, Any]) -> str | None:
        if usage.get("isByok") is True:
            return as_str(usage.get("providerType")) or "byok"
        if usage.get("isByok") is False:
            return "github"
        return None

    def _standalone_chat(
        self,
        prompt: Prompt,
        event: Event,
        usage: Usage,
        model: str | None,
        duration_ms: float | None,
        origin: str,
        raw: Mapping[str, Any] | None = None,
    ) -> None:
        """A model call outside any turn (e.g. compaction): a chat span under the agent's span."""
        _, agent = (prompt, prompt.root) if event.agent_id is None else self._route(event)
        start = event.time_ns - int((duration_ms or 0) * 1_000_000)
        turn = Turn(
            span_id=self._unique_sid(prompt, "chat-standalone", event.id),
            index=-1,
            turn_id=None,
            interaction_id=prompt.interaction_id,
            start_ns=max(start, prompt.start_ns),
            synthetic=True,
        )
        turn.chat.usage = usage
        turn.chat.records = 1
        turn.chat.model = model
        turn.chat.server_ms = duration_ms
        if raw is not None:
            turn.chat.response_id = as_str(raw.get("apiCallId"))
            turn.chat.finish_reason = as_str(raw.get("finishReason"))
            turn.chat.initiator = as_str(raw.get("initiator"))
        self._emit_chat(
            prompt,
            agent,
            turn,
            event.time_ns,
            StatusCode.UNSET,
            None,
            None,
            parent=agent.span_id,
            span_id=turn.span_id,
            origin=origin,
        )

    def _on_assistant_message(self, event: Event) -> None:
        prompt, agent = self._route(event)
        d = event.data
        turn = agent.turn
        if turn is None or (turn.synthetic and turn.chat.emitted):
            if turn is not None:
                self._end_turn(prompt, agent, turn.last_ns)
            start = agent.last_ns if agent.last_ns else event.time_ns
            turn = self._begin_turn(prompt, agent, event, min(start, event.time_ns), synthetic=True)
        self._touch(prompt, agent, event.time_ns)
        chat = turn.chat
        chat.end_ns = event.time_ns
        chat.response_model = as_str(d.get("model")) or chat.response_model
        chat.response_id = chat.response_id or as_str(d.get("apiCallId"))
        if chat.records == 0:
            out = as_int(d.get("outputTokens"))
            if out:
                chat.usage.output += out
        content = d.get("content")
        if isinstance(content, str) and content:
            chat.message_text.append(content)
            agent.output_text = content
        if not chat.reasoning_text:
            # The same text as the assistant.reasoning line, which some CLI versions do not persist.
            reasoning = self._capture(d.get("reasoningText"), ContentKind.REASONING, events=True)
            if reasoning is not None:
                chat.reasoning_text.append(reasoning)
        requests = d.get("toolRequests")
        if isinstance(requests, list) and requests:
            chat.tool_requests.extend(requests)
        if turn.synthetic:
            # Old logs: no turn events; the message is the end of the model call.
            self._emit_chat(prompt, agent, turn, event.time_ns, StatusCode.UNSET, None, None)

    # ------------------------------------------------------------------ tools
    def _on_tool_start(self, event: Event) -> None:
        d = event.data
        call_id = as_str(d.get("toolCallId"))
        if call_id is None:
            return
        prompt, agent = self._route(event)
        self._touch(prompt, agent, event.time_ns)
        turn = agent.turn
        if turn is not None and not turn.chat.emitted:
            self._emit_chat(
                prompt, agent, turn, turn.chat.end_ns or event.time_ns, StatusCode.UNSET, None, None
            )
        name = as_str(d.get("toolName")) or "unknown"
        arguments = d.get("arguments")
        desc = d.get("toolDescription")
        tool = Tool(
            span_id=self._unique_sid(prompt, "tool", call_id, event.id),
            parent_span_id=turn.span_id if turn is not None else agent.span_id,
            call_id=call_id,
            name=name,
            start_ns=event.time_ns,
            arguments=arguments,
            args_hash=argument_hash(arguments),
            mcp_server=as_str(d.get("mcpServerName")),
            agent=agent,
            description=as_str(desc.get("description")) if isinstance(desc, dict) else None,
        )
        if call_id in prompt.tools:
            # The same call id started twice (should not happen): close the first as incomplete.
            old = prompt.tools.pop(call_id)
            self._end_tool(
                prompt,
                old,
                event.time_ns,
                success=False,
                error_type="cancelled",
                message="restarted",
                incomplete="restarted",
            )
        prompt.tools[call_id] = tool
        self._tool_owner[call_id] = prompt
        prompt.tool_calls += 1
        agent.tool_calls += 1
        if turn is not None:
            turn.tool_calls += 1
        self._detect(
            prompt, check_identical(prompt, self.settings.runaway, event.time_ns, name, tool.args_hash)
        )

    def _on_tool_complete(self, event: Event) -> None:
        d = event.data
        call_id = as_str(d.get("toolCallId"))
        if call_id is None:
            return
        prompt = self._tool_owner.get(call_id)
        if prompt is None or call_id not in prompt.tools:
            return
        tool = prompt.tools.pop(call_id)
        self._tool_owner.pop(call_id, None)
        self._touch(prompt, tool.agent, event.time_ns)
        success = d.get("success") is not False
        error = as_dict(d.get("error"))
        message = as_str(error.get("message")) if error else None
        self._end_tool(
            prompt,
            tool,
            event.time_ns,
            success=success,
            error_type=None if success else "ToolError",
            message=message,
            data=d,
        )

    def _end_tool(
        self,
        prompt: Prompt,
        tool: Tool,
        end_ns: int,
        *,
        success: bool,
        error_type: str | None,
        message: str | None,
        incomplete: str | None = None,
        data: Mapping[str, Any] | None = None,
    ) -> None:
        attrs = self._common("execute_tool")
        attrs[sc.TOOL_NAME] = tool.name
        attrs["gen_ai.tool.call.id"] = tool.call_id
        attrs[sc.TOOL_TYPE] = "extension" if tool.mcp_server else "function"
        put_if_set(attrs, "gen_ai.tool.description", tool.description)
        put_if_set(attrs, "copilot_otel.tool.mcp_server", tool.mcp_server)
        attrs["copilot_otel.tool.arguments_hash"] = tool.args_hash
        attrs[sc.OI_KIND] = "TOOL"
        attrs["tool.name"] = tool.name
        attrs["tool_call.id"] = tool.call_id
        if tool.name == "report_intent":
            attrs["copilot_otel.tool.report_intent"] = True
        if tool.agent.name:
            attrs[sc.AGENT_NAME] = tool.agent.name
        status = StatusCode.UNSET
        status_message = None
        if not success:
            status = StatusCode.ERROR
            attrs[sc.ERROR_TYPE] = error_type or "ToolError"
            status_message = (message or attrs[sc.ERROR_TYPE])[:_STATUS_MESSAGE_MAX]
            attrs["langfuse.observation.level"] = "ERROR"
            attrs["langfuse.observation.status_message"] = status_message
        if data is not None:
            shell = data.get("shellExecution")
            if isinstance(shell, dict):
                put_if_set(attrs, "process.exit.code", as_int(shell.get("exitCode")))
            if data.get("isUserRequested") is True:
                attrs["copilot_otel.tool.user_requested"] = True
            edits = data.get("fileEdits")
            if isinstance(edits, list):
                attrs["copilot_otel.tool.file_edits"] = len(edits)
            error = data.get("error")
            if isinstance(error, dict):
                put_if_set(attrs, "github.copilot.error_code", as_str(error.get("code")))
            args = self._capture_json(tool.arguments, ContentKind.TOOL_ARGUMENTS)
            if args is not None:
                attrs["gen_ai.tool.call.arguments"] = args
                attrs["tool.parameters"] = args
                attrs["input.value"] = args
                attrs["input.mime_type"] = "application/json"
            result = data.get("result")
            result_text = result.get("content") if isinstance(result, dict) else None
            if result_text is None and message:
                result_text = message
            captured = self._capture(result_text, ContentKind.TOOL_RESULTS, events=True)
            if captured is not None:
                if self.settings.content.on_spans:
                    attrs["gen_ai.tool.call.result"] = captured
                    attrs["output.value"] = captured
                    attrs["output.mime_type"] = "text/plain"
                # The result goes back to the model in the agent's next call, in the order tools complete.
                tool.agent.pending_input.append(messages.tool_result_message(tool.call_id, captured))
        elif self.settings.content.enabled:
            args = self._capture_json(tool.arguments, ContentKind.TOOL_ARGUMENTS)
            if args is not None:
                attrs["gen_ai.tool.call.arguments"] = args
                attrs["input.value"] = args
        if incomplete:
            attrs["copilot_otel.incomplete"] = True
            attrs["copilot_otel.incomplete.reason"] = incomplete
        events: tuple[SpanEventRecord, ...] = ()
        if status is StatusCode.ERROR and error_type == "ToolError":
            events = (
                SpanEventRecord(
                    "gen_ai.client.operation.exception",
                    end_ns,
                    {"exception.type": "ToolError", "exception.message": status_message or ""},
                ),
            )
        end = max(end_ns, tool.start_ns)
        self._span(
            prompt,
            tool.span_id,
            tool.parent_span_id,
            f"execute_tool {tool.name}",
            SpanKind.INTERNAL,
            tool.start_ns,
            end,
            attrs,
            status,
            status_message,
            events,
        )
        duration = (end - tool.start_ns) / 1e9
        metric_attrs: dict[str, Any] = {sc.TOOL_NAME: tool.name, sc.TOOL_TYPE: attrs[sc.TOOL_TYPE]}
        if not success:
            metric_attrs[sc.ERROR_TYPE] = attrs[sc.ERROR_TYPE]
        self._measure("gen_ai.execute_tool.duration", duration, metric_attrs)
        self._measure(
            "github.copilot.tool.call.count", 1, {sc.TOOL_NAME: tool.name, "success": str(success).lower()}
        )
        self._measure("github.copilot.tool.call.duration", duration, {sc.TOOL_NAME: tool.name})
        if incomplete is None:
            self._detect(prompt, check_errors(prompt, self.settings.runaway, end_ns, success))

    # ------------------------------------------------------------------ sub-agents
    def _on_subagent_started(self, event: Event) -> None:
        d = event.data
        call_id = as_str(d.get("toolCallId"))
        hit = None
        if event.agent_id:
            hit = self._by_agent_id.get(event.agent_id)
        if hit is None and call_id:
            hit = self._by_task_call.get(call_id)
        if hit is None:
            prompt, agent = self._start_subagent(event, call_id, d)
        else:
            prompt, agent = hit
            if event.agent_id and event.agent_id not in self._by_agent_id:
                self._by_agent_id[event.agent_id] = hit
        agent.name = as_str(d.get("agentName")) or agent.name
        agent.display_name = as_str(d.get("agentDisplayName"))
        agent.description = as_str(d.get("agentDescription"))
        agent.model = as_str(d.get("model")) or agent.model
        agent.background = d.get("executionMode") == "background"
        agent.start_ns = min(agent.start_ns, event.time_ns)
        self._touch(prompt, agent, event.time_ns)

    def _on_subagent_end(self, event: Event) -> None:
        d = event.data
        call_id = as_str(d.get("toolCallId"))
        hit = (self._by_agent_id.get(event.agent_id) if event.agent_id else None) or (
            self._by_task_call.get(call_id) if call_id else None
        )
        if hit is None:
            return
        prompt, agent = hit
        self._touch(prompt, agent, event.time_ns)
        if event.type == "subagent.failed":
            agent.status = StatusCode.ERROR
            agent.error_type = agent.error_type or "SubagentError"
            agent.status_message = (as_str(d.get("error")) or "sub-agent failed")[:_STATUS_MESSAGE_MAX]
        elif d.get("cancelled") is True:
            agent.status = StatusCode.ERROR
            agent.error_type = "cancelled"
        self._close_agent(prompt, agent, event.time_ns, None, incomplete=False, totals=d)
        self._maybe_close_lingering(prompt)

    def _close_agent(
        self,
        prompt: Prompt,
        agent: Agent,
        time_ns: int,
        reason: str | None,
        incomplete: bool,
        totals: Mapping[str, Any] | None = None,
    ) -> None:
        if agent.closed:
            return
        agent.closed = True
        # Tools of this agent still open: cancelled (as the CLI's own export marks them).
        for call_id, tool in list(prompt.tools.items()):
            if tool.agent is agent:
                self._end_tool(
                    prompt,
                    tool,
                    max(time_ns, tool.start_ns),
                    success=False,
                    error_type="cancelled",
                    message="never completed",
                    incomplete=reason or "agent_ended",
                )
                del prompt.tools[call_id]
                self._tool_owner.pop(call_id, None)
        turn = agent.turn
        if turn is not None:
            # A synthetic turn (old logs) simply ends with its last activity; a real one left open is unfinished.
            if turn.synthetic:
                self._end_turn(prompt, agent, turn.last_ns)
            else:
                self._end_turn(
                    prompt, agent, time_ns, incomplete=(reason or "no_turn_end") if incomplete else None
                )
        if agent is prompt.root:
            return
        attrs = self._common("invoke_agent")
        put_if_set(attrs, sc.AGENT_NAME, agent.name)
        put_if_set(attrs, "gen_ai.agent.id", agent.agent_id)
        put_if_set(attrs, "gen_ai.agent.description", agent.description)
        put_if_set(attrs, "copilot_otel.agent.display_name", agent.display_name)
        put_if_set(attrs, sc.REQUEST_MODEL, agent.model)
        put_if_set(attrs, "copilot_otel.agent.task_call_id", agent.task_call_id)
        attrs["github.copilot.turn_count"] = agent.turn_count
        attrs["copilot_otel.agent.tool_calls"] = agent.tool_calls
        agent.usage.to_attrs(attrs)
        attrs[sc.OI_KIND] = "AGENT"
        if agent.background:
            attrs["copilot_otel.agent.background"] = True
        if totals is not None:
            put_if_set(attrs, "copilot_otel.agent.total_tokens", as_int(totals.get("totalTokens")))
            put_if_set(attrs, "copilot_otel.agent.total_tool_calls", as_int(totals.get("totalToolCalls")))
        put_if_set(attrs, "input.value", agent.input_text)
        out = self._capture(agent.output_text, ContentKind.RESPONSES)
        put_if_set(attrs, "output.value", out)
        attrs.update(messages.agent_attributes(agent.input_text, out, agent.system_text))
        if agent.error_type:
            attrs[sc.ERROR_TYPE] = agent.error_type
        if incomplete:
            attrs["copilot_otel.incomplete"] = True
            attrs["copilot_otel.incomplete.reason"] = reason or "incomplete"
        end = max(time_ns, agent.last_ns)
        self._span(
            prompt,
            agent.span_id,
            agent.parent_span_id,
            f"invoke_agent {agent.name or 'agent'}",
            SpanKind.INTERNAL,
            agent.start_ns,
            end,
            attrs,
            agent.status,
            agent.status_message,
        )
        metric_attrs: dict[str, Any] = {sc.AGENT_NAME: agent.name or "agent"}
        put_if_set(metric_attrs, sc.ERROR_TYPE, agent.error_type)
        self._measure("gen_ai.invoke_agent.duration", (end - agent.start_ns) / 1e9, metric_attrs)

    # ------------------------------------------------------------------ emitting spans
    def _span(
        self,
        prompt: Prompt,
        span_id: int,
        parent: int | None,
        name: str,
        kind: SpanKind,
        start_ns: int,
        end_ns: int,
        attrs: dict[str, Any],
        status: StatusCode = StatusCode.UNSET,
        status_message: str | None = None,
        events: tuple[SpanEventRecord, ...] = (),
    ) -> None:
        if end_ns > prompt.end_ns:
            prompt.end_ns = end_ns
        self._out.append(
            SpanRecord(
                trace_id=prompt.trace_id,
                span_id=span_id,
                parent_span_id=parent,
                name=name,
                kind=kind,
                start_ns=start_ns,
                end_ns=max(end_ns, start_ns),
                attributes=attrs,
                status=status,
                status_message=status_message if status is StatusCode.ERROR else None,
                events=events,
                source_offset=self._offset,
            )
        )

    def _emit_chat(
        self,
        prompt: Prompt,
        agent: Agent,
        turn: Turn,
        end_ns: int,
        status: StatusCode,
        error_type: str | None,
        message: str | None,
        *,
        cancelled: bool = False,
        parent: int | None = None,
        span_id: int | None = None,
        origin: str | None = None,
    ) -> None:
        chat = turn.chat
        if chat.emitted:
            return
        chat.emitted = True
        model = chat.model or chat.response_model or agent.model or self.ctx.model or "unknown"
        attrs = self._common("chat")
        attrs[sc.REQUEST_MODEL] = model
        attrs[sc.RESPONSE_MODEL] = chat.response_model or model
        put_if_set(attrs, "gen_ai.response.id", chat.response_id)
        finish = chat.finish_reason
        if status is StatusCode.ERROR or cancelled:
            finish = "error"
        elif finish is None and chat.end_ns is not None:
            finish = "tool_calls" if chat.tool_requests else "stop"
        if finish:
            attrs["gen_ai.response.finish_reasons"] = (finish,)
        chat.usage.to_attrs(attrs)
        if chat.records == 0:
            attrs["copilot_otel.usage.estimated"] = True
        if chat.ttft_ms is not None:
            attrs["gen_ai.response.time_to_first_chunk"] = chat.ttft_ms / 1000.0
        put_if_set(attrs, "github.copilot.server_duration", chat.server_ms)
        put_if_set(attrs, "github.copilot.initiator", chat.initiator)
        put_if_set(attrs, "github.copilot.turn_id", turn.turn_id)
        put_if_set(attrs, "github.copilot.interaction_id", turn.interaction_id)
        if chat.records > 1:
            attrs["copilot_otel.chat.calls"] = chat.records
        if agent.name:
            attrs[sc.AGENT_NAME] = agent.name
        if origin:
            attrs["copilot_otel.chat.origin"] = origin
        attrs[sc.OI_KIND] = "LLM"
        attrs["llm.model_name"] = model
        attrs["llm.provider"] = attrs[sc.PROVIDER]
        attrs["llm.token_count.prompt"] = chat.usage.input
        attrs["llm.token_count.completion"] = chat.usage.output
        attrs["llm.token_count.total"] = chat.usage.input + chat.usage.output
        attrs["llm.token_count.prompt_details.cache_read"] = chat.usage.cache_read
        attrs["llm.token_count.prompt_details.cache_write"] = chat.usage.cache_write
        content = self._chat_content(chat, finish)
        policy = self.settings.content
        if policy.on_spans:
            attrs.update(content)
        if cancelled:
            attrs[sc.ERROR_TYPE] = "cancelled"
            attrs["copilot_otel.incomplete"] = True
            attrs["copilot_otel.incomplete.reason"] = "aborted"
        if status is StatusCode.ERROR:
            attrs[sc.ERROR_TYPE] = error_type or "ModelCallError"
        start = turn.start_ns
        end = max(end_ns, start)
        span_id = span_id or self._sid("chat", str(turn.span_id))
        self._span(
            prompt,
            span_id,
            parent or turn.span_id,
            f"chat {model}",
            SpanKind.CLIENT,
            start,
            end,
            attrs,
            status,
            (message or error_type or "model call failed")[:_STATUS_MESSAGE_MAX]
            if status is StatusCode.ERROR
            else None,
        )
        if policy.on_events and policy.enabled:
            self._emit_inference_details(prompt, span_id, end, attrs, content)
        agent.usage.add(chat.usage)
        if finish:
            agent.last_finish_reason = finish
        # metrics
        seconds = (chat.server_ms / 1000.0) if chat.server_ms is not None else (end - start) / 1e9
        infer = {sc.PROVIDER: attrs[sc.PROVIDER], sc.REQUEST_MODEL: model}
        op = {sc.OPERATION: "chat", **infer}
        if sc.ERROR_TYPE in attrs:
            op[sc.ERROR_TYPE] = attrs[sc.ERROR_TYPE]
        self._measure("gen_ai.client.operation.duration", seconds, op)
        self._measure("gen_ai.client.inference.duration", seconds, op)
        if chat.ttft_ms is not None:
            self._measure("gen_ai.client.inference.time_to_first_chunk", chat.ttft_ms / 1000.0, infer)
        if chat.usage.calls or chat.usage.output:
            base = {sc.OPERATION: "chat", **infer}
            self._measure("gen_ai.client.token.usage", chat.usage.input, {sc.TOKEN_TYPE: "input", **base})
            self._measure("gen_ai.client.token.usage", chat.usage.output, {sc.TOKEN_TYPE: "output", **base})
            self._measure("gen_ai.client.inference.operation.input_tokens", chat.usage.input, infer)
            self._measure("gen_ai.client.inference.operation.output_tokens", chat.usage.output, infer)
            mod = {**infer, sc.TOKEN_MODALITY: "text"}
            for metric, value in (
                ("gen_ai.client.inference.usage.input_tokens", chat.usage.input),
                ("gen_ai.client.inference.usage.output_tokens", chat.usage.output),
                ("gen_ai.client.inference.usage.cache_read.input_tokens", chat.usage.cache_read),
                ("gen_ai.client.inference.usage.cache_write.input_tokens", chat.usage.cache_write),
            ):
                if value:
                    self._measure(metric, value, mod)
        if chat.usage.cost and chat.initiator in (None, "user"):
            # Premium requests are billed per prompt the user sends (times the model's multiplier), not per
            # follow-up call of the agent loop; the span keeps every call's cost as the CLI's own export does.
            self._measure("copilot_otel.premium_requests", chat.usage.cost, {sc.REQUEST_MODEL: model})
        if chat.usage.nano_aiu:
            self._measure("copilot_otel.nano_aiu", chat.usage.nano_aiu, {sc.REQUEST_MODEL: model})

    def _chat_content(self, chat: Chat, finish: str | None) -> dict[str, str]:
        """A chat's captured messages (:func:`messages.chat_attributes`); empty when nothing is captured.

        The input is what this call sent that the agent's previous call did not (as the CLI's own export
        reports it): the user's message, or the results of the tools the previous call asked for, queued as they
        were captured. The output is the reasoning, the assistant's text and the tool calls it requested, each
        captured (scrubbed, cut) on its own; a part whose kind may not be captured is left out.
        """
        text = (
            self._capture("\n".join(chat.message_text), ContentKind.RESPONSES, events=True)
            if chat.message_text
            else None
        )
        calls = (
            [self._tool_call_part(r) for r in chat.tool_requests if isinstance(r, dict)]
            if self.settings.content.allows(ContentKind.TOOL_ARGUMENTS)
            else []
        )
        return messages.chat_attributes(chat.input_messages, chat.reasoning_text, text, calls, finish)

    def _tool_call_part(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """One ``toolRequests`` entry of an assistant message as a ``tool_call`` message part."""
        return messages.tool_call_part(
            as_str(request.get("toolCallId")) or as_str(request.get("id")),
            as_str(request.get("name")),
            self._capture_json(request.get("arguments"), ContentKind.TOOL_ARGUMENTS, events=True),
        )

    def _emit_inference_details(
        self,
        prompt: Prompt,
        span_id: int,
        time_ns: int,
        span_attrs: Mapping[str, Any],
        content: Mapping[str, str],
    ) -> None:
        """The chat's ``gen_ai.client.inference.operation.details`` log event (``EVENT_ONLY``/``SPAN_AND_EVENT``).

        It carries the same message JSON as the span would, so a backend that keeps logs but not span
        attributes (or keeps them longer, or with other access rules) has the conversation; it sits on the chat
        span (trace and span id) so the two join. One per chat, with whatever messages were captured.
        """
        attrs: dict[str, Any] = {sc.OPERATION: "chat"}
        for key in (
            sc.PROVIDER,
            sc.REQUEST_MODEL,
            sc.RESPONSE_MODEL,
            "gen_ai.response.id",
            "gen_ai.response.finish_reasons",
        ):
            put_if_set(attrs, key, span_attrs.get(key))
        for key in ("gen_ai.input.messages", "gen_ai.output.messages"):
            put_if_set(attrs, key, content.get(key))
        model = span_attrs[sc.REQUEST_MODEL]
        self._log(
            "gen_ai.client.inference.operation.details",
            time_ns,
            f"chat {model}",
            attrs,
            prompt,
            span_id=span_id,
        )

    def _emit_root(self, prompt: Prompt, time_ns: int) -> None:
        root = prompt.root
        attrs = self._common("invoke_agent")
        ctx = self.ctx
        put_if_set(attrs, sc.REQUEST_MODEL, root.model or ctx.model)
        attrs["github.copilot.turn_count"] = root.turn_count
        attrs["copilot_otel.prompt.turns_total"] = prompt.turns_total
        attrs["copilot_otel.prompt.tool_calls"] = prompt.tool_calls
        attrs["copilot_otel.prompt.outcome"] = prompt.outcome
        root.usage.to_attrs(attrs)
        if root.last_finish_reason:
            attrs["gen_ai.response.finish_reasons"] = (root.last_finish_reason,)
        put_if_set(attrs, "github.copilot.interaction_id", prompt.interaction_id)
        put_if_set(attrs, "copilot_otel.cli.version", ctx.copilot_version)
        put_if_set(attrs, "copilot_otel.session.cwd", ctx.cwd)
        put_if_set(attrs, "github.copilot.git.repo", ctx.repository)
        put_if_set(attrs, "github.copilot.git.branch", ctx.branch)
        put_if_set(attrs, "github.copilot.git.sha", ctx.head_commit)
        put_if_set(attrs, "copilot_otel.session.git_root", ctx.git_root)
        title = self._capture(ctx.title, ContentKind.PROMPTS)
        put_if_set(attrs, "copilot_otel.session.title", title)
        attrs["langfuse.trace.name"] = title or "copilot prompt"
        attrs[sc.OI_KIND] = "AGENT"
        attrs["github.copilot.agent.type"] = "builtin"
        if not prompt.human:
            attrs["copilot_otel.prompt.synthetic"] = True
        out = self._capture(root.output_text, ContentKind.RESPONSES)
        put_if_set(attrs, "input.value", root.input_text)
        put_if_set(attrs, "output.value", out)
        if root.input_text is not None:
            attrs["input.mime_type"] = "text/plain"
        attrs.update(messages.agent_attributes(root.input_text, out, ctx.system_prompt))
        if root.error_type:
            attrs[sc.ERROR_TYPE] = root.error_type
        if prompt.incomplete_reason:
            attrs["copilot_otel.incomplete"] = True
            attrs["copilot_otel.incomplete.reason"] = prompt.incomplete_reason
        if prompt.dropped_events:
            attrs["copilot_otel.span_events.dropped"] = prompt.dropped_events
        end = max(prompt.end_ns, prompt.last_ns, time_ns if prompt.incomplete_reason else 0, prompt.start_ns)
        status = StatusCode.ERROR if prompt.outcome == "error" else root.status
        if prompt.outcome == "aborted":
            # An abort is the user's choice: ERROR/cancelled as the CLI's own export does for aborted tools.
            status = StatusCode.ERROR
        self._span(
            prompt,
            root.span_id,
            None,
            "invoke_agent",
            SpanKind.INTERNAL,
            prompt.start_ns,
            end,
            attrs,
            status,
            root.status_message,
            tuple(prompt.events),
        )
        # metrics and the prompt-ended log event
        metric_attrs: dict[str, Any] = {sc.AGENT_NAME: "copilot"}
        put_if_set(metric_attrs, sc.ERROR_TYPE, root.error_type)
        self._measure("gen_ai.invoke_agent.duration", (end - prompt.start_ns) / 1e9, metric_attrs)
        self._measure("github.copilot.agent.turn.count", root.turn_count, {sc.OPERATION: "invoke_agent"})
        self._measure("copilot_otel.prompt.count", 1, {sc.PROMPT_OUTCOME: prompt.outcome})
        self._measure("copilot_otel.prompt.tool_calls", prompt.tool_calls)
        log_attrs: dict[str, Any] = {
            sc.PROMPT_OUTCOME: prompt.outcome,
            "github.copilot.turn_count": root.turn_count,
            "copilot_otel.prompt.turns_total": prompt.turns_total,
            "copilot_otel.prompt.tool_calls": prompt.tool_calls,
            "copilot_otel.prompt.duration_s": (end - prompt.start_ns) / 1e9,
            "gen_ai.usage.input_tokens": root.usage.input,
            "gen_ai.usage.output_tokens": root.usage.output,
        }
        put_if_set(log_attrs, "copilot_otel.incomplete.reason", prompt.incomplete_reason)
        self._log(
            "copilot_otel.prompt.ended",
            end,
            f"prompt {prompt.outcome}",
            log_attrs,
            prompt,
            Severity.WARN if prompt.outcome in ("error", "aborted") else Severity.INFO,
        )

    # ------------------------------------------------------------------ runaway detection
    def _detect(self, prompt: Prompt, detection: Detection | None) -> None:
        """Emit a rule's detection, if it fired: a span event on the root span, a counter, a WARN log event."""
        if detection is None:
            return
        reason = detection.reason
        attrs: dict[str, Any] = {sc.RUNAWAY_REASON: reason, **detection.detail}
        prompt.add_event(SpanEventRecord("copilot_otel.runaway.detected", detection.time_ns, dict(attrs)))
        self._measure("copilot_otel.runaway.detections", 1, {sc.RUNAWAY_REASON: reason})
        attrs["copilot_otel.prompt.turns_total"] = prompt.turns_total
        attrs["copilot_otel.prompt.tool_calls"] = prompt.tool_calls
        self._log(
            "copilot_otel.runaway.detected",
            detection.time_ns,
            f"runaway agent detected: {reason}",
            attrs,
            prompt,
            Severity.WARN,
        )


_HANDLERS = {
    "session.start": SessionFold._on_session_start,
    "session.resume": SessionFold._on_session_resume,
    "session.shutdown": SessionFold._on_shutdown,
    "session.error": SessionFold._on_session_error,
    "session.context_changed": SessionFold._on_context_changed,
    "session.model_change": SessionFold._on_model_change,
    "session.compaction_start": SessionFold._on_compaction,
    "session.compaction_complete": SessionFold._on_compaction,
    "session.truncation": SessionFold._on_truncation,
    "session.usage_record": SessionFold._on_usage_record,
    "skill.invoked": SessionFold._on_skill,
    "abort": SessionFold._on_abort,
    "user.message": SessionFold._on_user_message,
    "system.message": SessionFold._on_system_message,
    "assistant.reasoning": SessionFold._on_reasoning,
    "assistant.turn_start": SessionFold._on_turn_start,
    "assistant.turn_end": SessionFold._on_turn_end,
    "assistant.message": SessionFold._on_assistant_message,
    "tool.execution_start": SessionFold._on_tool_start,
    "tool.execution_complete": SessionFold._on_tool_complete,
    "subagent.started": SessionFold._on_subagent_started,
    "custom_agent.started": SessionFold._on_subagent_started,
    "subagent.completed": SessionFold._on_subagent_end,
    "subagent.failed": SessionFold._on_subagent_end,
    "custom_agent.completed": SessionFold._on_subagent_end,
    "custom_agent.failed": SessionFold._on_subagent_end,
}
