"""The agent loop: a pure state machine from session events to neutral activity records.

One :class:`AgentLoop` follows one session log. It keeps only what is still open (the current prompt, its
agents, turns and tools; :mod:`copilot_otel.foldstate`) and hands out each record of
:mod:`copilot_otel.activity` the moment its work is complete, so the live daemon can export a tool call as soon
as its ``tool.execution_complete`` is read.

The loop it follows::

    prompt                               a human prompt, to where its work ends (one trace)
    ├── turn 0                           assistant.turn_start … turn_end of the main agent
    │   ├── model call                   the turn's call to the model (usage record, assistant.message)
    │   ├── tool call bash               each tool execution
    │   └── tool call task
    │       └── agent explore            a sub-agent, with its own turns, model calls and tools
    └── turn 1 …

Pure: no I/O, no clock, no attribute names. Timestamps and ids come only from the events, so the same log always
gives the same records; what may be kept of the content passes the injected :class:`~copilot_otel.content.
ContentGate`; the runaway rules (:mod:`copilot_otel.runaway`) say when a prompt runs away. Everything a backend
sees is decided later, by the projections (:mod:`copilot_otel.project`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import events as ev
from . import ids
from .activity import (
    Abort,
    AgentRun,
    Compaction,
    Detection,
    HookRun,
    InputMessage,
    ModeChange,
    ModelCall,
    ModelTotals,
    Notification,
    Outcome,
    PermissionWait,
    PromptRun,
    PromptStarted,
    Record,
    SessionError,
    SessionFacts,
    SessionImported,
    SessionResumed,
    SessionShutdown,
    SessionStarted,
    SessionWarning,
    SkillInvoked,
    TaskComplete,
    ToolCall,
    ToolRequest,
    Truncation,
    Turn,
    Usage,
    UserMessage,
)
from .content import ContentGate, ContentKind, ContentPolicy, argument_hash
from .events import Event
from .foldstate import Agent, Hook, Prompt, SessionContext, Tool
from .foldstate import Turn as OpenTurn
from .parse import timestamp_ns
from .records import DropReason, replace
from .runaway import RunawayThresholds, check_burn, check_errors, check_identical, check_turns

# The provider of model calls when no usage record has said otherwise: the CLI's own model API.
OWN_API = "github"

__all__ = ["AgentLoop", "FoldSettings", "LiveStats", "RunawayThresholds", "SessionContext"]

# A session.start whose startTime is this much older than the event itself opens an imported transcript
# (``copilot sessions import`` dates the session by the transcript and stamps its events with the import's time;
# in every other log the two are milliseconds apart).
IMPORT_GAP_NS = 60 * 1_000_000_000
# Who refused a call that a preToolUse hook's output denied (the CLI's code says only ``denied``).
HOOK_DENIAL = "preToolUse hook"

# Events read only for their content (the system prompt, 20-50 KB a line, and reasoning): parse skips them
# without decoding unless their capture switch is on.
_CONTENT_ONLY_TYPES = {
    ContentKind.SYSTEM_PROMPT: b"system.message",
    ContentKind.REASONING: b"assistant.reasoning",
}


def _not_before(end_ns: int, start_ns: int) -> int:
    """An end dated before its start (the clock stepped back between the two events) becomes the start, and is
    counted as a dropped value (``end_before_start``); an unknown end (0) is not one."""
    if end_ns >= start_ns:
        return end_ns
    if end_ns:
        ev.drop_value(
            DropReason.END_BEFORE_START, f"an end {(start_ns - end_ns) / 1e9:.3f} s before its start"
        )
    return start_ns


@dataclass(frozen=True, slots=True)
class FoldSettings:
    """Everything the loop and the projections need besides the events; injected so both stay pure."""

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


class AgentLoop:
    """Follows one session's agent loop and returns the activity records each event completes.

    Usage::

        loop = AgentLoop(session_id_hint, settings)
        for event in events:
            handle(loop.feed(event))
        handle(loop.close(reason="file_ended"))

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
        self.gate = ContentGate(self.settings.content)
        self.ctx = SessionContext.from_dict(context) if context else SessionContext(session_id=session_id)
        self._prompts: dict[str, Prompt] = {}
        self._current: Prompt | None = None
        # agent routing: envelope agentId / spawning toolCallId → (prompt, agent)
        self._by_agent_id: dict[str, tuple[Prompt, Agent]] = {}
        self._by_task_call: dict[str, tuple[Prompt, Agent]] = {}
        self._tool_owner: dict[str, Prompt] = {}
        # Agents told by a system.notification that background work finished: the CLI's next message for them
        # is its own (it reads the result), not a model call. And the tool calls such messages asked for.
        self._notified: set[str | None] = set()
        self._cli_calls: set[str] = set()
        # What came before the prompt it belongs to: hooks (sessionStart, userPromptSubmitted) and user-invoked
        # skills, written before their user.message; the next prompt to open takes them.
        self._pending_hooks: dict[str, Hook] = {}
        self._pending_notes: list[tuple[int, SkillInvoked]] = []  # (offset of its line, note)
        # Where the first of them was read, and the context then: a restart must re-fold from there.
        self._pending_at: tuple[int, dict[str, Any]] | None = None
        # A turn that ended with no answer and no usage: the model call failed or was cut. What follows says
        # which (session.error: its status; abort: cancelled); anything else: no response.
        self._unanswered: list[tuple[Prompt, Agent, OpenTurn, int]] = []
        self._out: list[Record] = []
        self._offset = 0

    # ------------------------------------------------------------------ public API
    @property
    def last_event_ns(self) -> int:
        """Timestamp of the latest event folded (kept in the context so a resumed loop knows it)."""
        return self.ctx.last_event_ns

    @last_event_ns.setter
    def last_event_ns(self, value: int) -> None:
        self.ctx.last_event_ns = value

    def context_snapshot(self) -> dict[str, Any]:
        """Session context to store in a checkpoint (see the resume model in docs/design.md)."""
        return self.ctx.to_dict()

    def resume_point(self) -> tuple[int, dict[str, Any]] | None:
        """Where a restarted loop must begin to rebuild the open prompts, and the context it needs there.

        ``None`` when no prompt is open (resuming at the current offset with :meth:`context_snapshot` is enough).
        """
        starts = [(p.start_offset, p.context_at_open) for p in self._prompts.values()]
        if self._pending_at is not None:
            starts.append(self._pending_at)  # hooks or a skill waiting for their prompt
        if not starts:
            return None
        offset, context = min(starts, key=lambda start: start[0])
        return offset, dict(context)

    @property
    def has_open_prompt(self) -> bool:
        """A prompt is open, or what belongs to the next one was read (the fold must be kept for it)."""
        return bool(self._prompts) or self._pending_at is not None

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

    def feed(self, event: Event) -> list[Record]:
        """Fold one event; returns the records it completed (often none)."""
        self._out = []
        self._offset = event.end_offset
        ctx = self.ctx
        if event.time_ns <= 0:
            # No usable timestamp on this line: date it at the previous event rather than lose it.
            event = replace(event, time_ns=ctx.last_event_ns)
        elif event.time_ns > ctx.last_event_ns:
            ctx.last_event_ns = event.time_ns
        handler = _HANDLERS.get(event.__class__)
        if self._unanswered and handler not in _KEEPS_UNANSWERED:
            self._flush_unanswered()
        if ctx.imported and self._read_imported(event):
            return self._out
        if handler is not None:
            handler(self, event)
        return self._out

    def close(self, reason: str, time_ns: int | None = None) -> list[Record]:
        """Close everything still open (end of file, owner gone, idle timeout); marks it incomplete.

        Args:
            reason: Why the work is closed (``file_ended``, ``owner_gone``, ...).
            time_ns: When; defaults to the last event seen (never the wall clock).
        """
        self._out = []
        self._adopt_pending(None)
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

    def _ended(self, prompt: Prompt, end_ns: int) -> None:
        """Work of ``prompt`` ended at ``end_ns``: the prompt lasts at least until then."""
        if end_ns > prompt.end_ns:
            prompt.end_ns = end_ns

    # ------------------------------------------------------------------ prompts
    def _open_prompt(
        self, event: Event, message: ev.UserMessage | None = None, human: bool = False
    ) -> Prompt:
        """Open a prompt (a trace) at ``event``: a human ``message``, or other activity (then synthetic)."""
        # Re-folded from where its hooks or skill were read, when it has any (see resume_point).
        context_at_open = self._pending_at[1] if self._pending_at is not None else self.ctx.to_dict()
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
        # Hooks and a user-invoked skill written before the prompt's message are part of handling it.
        start_ns = min(
            [
                event.time_ns,
                *(h.start_ns for h in self._pending_hooks.values()),
                *(n.time_ns for _, n in self._pending_notes),
            ]
        )
        root = Agent(
            span_id=self._sid("root", key),
            parent_span_id=None,
            name=self.ctx.agent_name,
            start_ns=start_ns,
            model=self.ctx.model,
            last_ns=event.time_ns,
        )
        prompt = Prompt(
            key=key,
            trace_id=trace,
            root=root,
            start_ns=start_ns,
            # A restart re-folds the prompt from its first line, the hooks and skills before its message included.
            start_offset=self._pending_at[0] if self._pending_at is not None else event.offset,
            interaction_id=event.interaction_id,
            human=human,
            agent_mode=(message.agent_mode if message is not None else None) or self.ctx.mode,
            last_ns=event.time_ns,
            context_at_open=context_at_open,
        )
        self._prompts[key] = prompt
        self._current = prompt
        self.ctx.prompts_started += 1
        self._take_pending(prompt)
        if human and message is not None:
            root.input_text = self.gate.text(message.content, ContentKind.PROMPTS)
            self._out.append(
                PromptStarted(
                    session_id=self.ctx.session_id,
                    time_ns=event.time_ns,
                    trace_id=trace,
                    span_id=root.span_id,
                    index=self.ctx.prompts_started - 1,
                    interaction_id=prompt.interaction_id,
                    delivery=message.delivery,
                    source_offset=self._offset,
                )
            )
        return prompt

    def _ensure_prompt(self, event: Event) -> Prompt:
        """The prompt that agent activity belongs to; activity with none open starts a synthetic one."""
        if self._current is not None:
            return self._current
        return self._open_prompt(event)

    def _close_prompt(self, prompt: Prompt, time_ns: int, reason: str | None, incomplete: bool) -> None:
        self._flush_unanswered(prompt)
        for hook in list(prompt.hooks.values()):
            self._emit_hook(prompt, hook, time_ns, reason or "prompt_closed")
        for request_id in list(prompt.permissions):
            self._end_permission(prompt, request_id, time_ns, None, reason or "prompt_closed")
        for agent in list(prompt.agents.values()):
            if not agent.closed:
                self._close_agent(prompt, agent, time_ns, reason or "prompt_closed", incomplete=True)
        self._close_agent(prompt, prompt.root, time_ns, reason, incomplete=incomplete)
        if incomplete and prompt.outcome == "completed":
            prompt.outcome = "incomplete"
        if incomplete and prompt.incomplete_reason is None:
            prompt.incomplete_reason = reason
        self._emit_prompt(prompt, time_ns)
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
        parent_call = event.parent_tool_call_id
        if parent_call is not None:
            hit = self._by_task_call.get(parent_call)
            if hit is not None:
                if event.agent_id is not None:
                    self._by_agent_id[event.agent_id] = hit
                return hit
            return self._start_subagent(event, parent_call)
        if event.agent_id is not None:
            return self._start_subagent(event, None)
        prompt = self._ensure_prompt(event)
        return prompt, prompt.root

    def _start_subagent(
        self, event: Event, task_call_id: str | None, parent_agent_id: str | None = None
    ) -> tuple[Prompt, Agent]:
        """Create a sub-agent under the ``task`` tool call that spawned it."""
        prompt: Prompt | None = None
        parent_span: int | None = None
        if task_call_id is not None:
            owner = self._tool_owner.get(task_call_id)
            if owner is not None:
                prompt = owner
                parent_span = owner.tools[task_call_id].span_id
        if prompt is None:
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
    def _on_session_start(self, event: ev.SessionStart) -> None:
        ctx = self.ctx
        ctx.session_id = event.session_id or ctx.session_id
        ctx.copilot_version = event.copilot_version or ctx.copilot_version
        ctx.producer = event.producer or ctx.producer
        ctx.model = event.selected_model or ctx.model
        ctx.reasoning_effort = event.reasoning_effort or ctx.reasoning_effort
        self._apply_context(event.context)
        started = timestamp_ns(event.start_time) if event.start_time is not None else None
        if started is not None and event.time_ns - started > IMPORT_GAP_NS > 0:
            # An imported transcript follows (until the next CLI process): dated by the transcript.
            ctx.imported = {"time_ns": started, "imported_ns": event.time_ns}
        self._out.append(
            SessionStarted(
                self.ctx.session_id, event.time_ns, self.ctx.copilot_version, self.ctx.model, self._offset
            )
        )

    def _on_session_resume(self, event: ev.SessionResume) -> None:
        if self._prompts:
            # The previous process ended without closing its prompt (killed): close it where it stopped.
            for prompt in list(self._prompts.values()):
                self._close_prompt(prompt, prompt.last_ns, "session_resumed", incomplete=True)
        self._notified.clear()  # a new CLI process: what the previous one was told does not carry over
        self.ctx.model = event.selected_model or self.ctx.model
        self.ctx.reasoning_effort = event.reasoning_effort or self.ctx.reasoning_effort
        self._apply_context(event.context)
        self._out.append(SessionResumed(self.ctx.session_id, event.time_ns, self._offset))

    def _apply_context(self, context: ev.Context | None) -> None:
        if context is None:
            return
        ctx = self.ctx
        ctx.cwd = context.cwd or ctx.cwd
        ctx.git_root = context.git_root or ctx.git_root
        ctx.repository = context.repository or ctx.repository
        ctx.branch = context.branch or ctx.branch
        ctx.head_commit = context.head_commit or ctx.head_commit

    def _on_context_changed(self, event: ev.ContextChanged) -> None:
        self._apply_context(event.context)

    def _on_model_change(self, event: ev.ModelChange) -> None:
        model = event.new_model
        if event.agent_id is None and not event.from_agent and event.says_reasoning_effort:
            self.ctx.reasoning_effort = event.reasoning_effort  # None: the model's default from now on
        if model is None:
            return
        if event.agent_id is not None or event.from_agent:
            hit = self._by_agent_id.get(event.agent_id or "")
            if hit is not None:
                hit[1].model = model
            return
        # The session's model from now on. A prompt that already ran keeps the model its calls used (a change
        # between prompts, from the SDK or a resume, belongs to the next one; see _emit_chat).
        self.ctx.model = model

    def _on_shutdown(self, event: ev.Shutdown) -> None:
        self._adopt_pending(event)
        prompt = self._current
        models: list[ModelTotals] = []
        premium_delta: list[tuple[str, float]] = []
        nano_delta: list[tuple[str, float]] = []
        for m in event.models:
            models.append(
                ModelTotals(
                    m.model,
                    m.input_tokens,
                    m.output_tokens,
                    m.cache_read_tokens,
                    m.cache_write_tokens,
                    m.requests,
                )
            )
            if not self.ctx.saw_usage_records:
                # Logs without per-call usage records (CLI < 1.0.102): account cost from the session totals.
                self._grown(premium_delta, m.model, f"premium:{m.model}", m.cost)
                self._grown(nano_delta, m.model, f"nano_aiu:{m.model}", m.nano_aiu)
        added, removed = event.lines_added or 0, event.lines_removed or 0
        added_delta: list[tuple[str, float]] = []
        removed_delta: list[tuple[str, float]] = []
        self._grown(added_delta, "", "lines_added", added)
        self._grown(removed_delta, "", "lines_removed", removed)
        record = SessionShutdown(
            session_id=self.ctx.session_id,
            time_ns=event.time_ns,
            trace_id=prompt.trace_id if prompt else None,
            span_id=prompt.root.span_id if prompt else None,
            shutdown_type=event.shutdown_type,
            premium_requests=event.premium_requests,
            nano_aiu=event.nano_aiu,
            api_duration_ms=event.api_duration_ms,
            lines_added=added,
            lines_removed=removed,
            files_modified=event.files_modified,
            models=tuple(models),
            premium_delta=tuple(premium_delta),
            nano_aiu_delta=tuple(nano_delta),
            lines_added_delta=added_delta[0][1] if added_delta else 0.0,
            lines_removed_delta=removed_delta[0][1] if removed_delta else 0.0,
            source_offset=self._offset,
        )
        if prompt is not None:
            prompt.add_note(record)
            if not self.ctx.saw_usage_records:
                prompt.root.model = prompt.root.model or self.ctx.model
        self._out.append(record)
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

    def _grown(self, out: list[tuple[str, float]], label: str, key: str, total: float | None) -> None:
        """The growth of a cumulative session total since the last ``session.shutdown`` reported it."""
        if total is None:
            return
        delta = total - self.ctx.reported_totals.get(key, 0.0)
        if delta > 0:
            out.append((label, delta))
            self.ctx.reported_totals[key] = total

    @staticmethod
    def _has_open_work(prompt: Prompt) -> bool:
        return bool(prompt.tools) or (prompt.root.turn is not None and not prompt.root.turn.synthetic)

    def _on_session_error(self, event: ev.SessionError) -> None:
        error_type = event.error_type or "error"
        message = event.message or error_type
        prompt, agent = self._route(event) if (event.agent_id or self._current) else (None, None)
        record = SessionError(
            session_id=self.ctx.session_id,
            time_ns=event.time_ns,
            trace_id=prompt.trace_id if prompt else None,
            span_id=prompt.root.span_id if prompt else None,
            error_type=error_type,
            message=message,
            status_code=event.status_code,
            source_offset=self._offset,
        )
        # The provider's HTTP status is the failed call's error.type, as the semconv for HTTP errors has it.
        failure = str(event.status_code) if event.status_code is not None else error_type
        if prompt is not None and agent is not None:
            self._touch(prompt, agent, event.time_ns)
            prompt.add_note(record)
            turn = agent.turn
            if turn is not None and not turn.chat.emitted:
                self._emit_chat(prompt, agent, turn, event.time_ns, Outcome.ERROR, failure, message)
            self._flush_unanswered(prompt, Outcome.ERROR, failure, message)
            agent.status = Outcome.ERROR
            agent.error_type = failure
            agent.status_message = message
            if agent is prompt.root:
                prompt.outcome = "error"
        self._out.append(record)

    def _on_abort(self, event: ev.Abort) -> None:
        prompt = self._current
        reason = event.reason or "unknown"
        record = Abort(
            session_id=self.ctx.session_id,
            time_ns=event.time_ns,
            trace_id=prompt.trace_id if prompt else None,
            span_id=prompt.root.span_id if prompt else None,
            reason=reason,
            source_offset=self._offset,
        )
        if prompt is None:
            self._out.append(record)
            return
        self._touch(prompt, prompt.root, event.time_ns)
        prompt.add_note(record)
        prompt.outcome = "aborted"
        prompt.incomplete_reason = "aborted"
        # A call the user cut (its turn already ended, unanswered) was cancelled, not left without a response.
        self._flush_unanswered(prompt, Outcome.CANCELLED)
        # Everything still running was cancelled by the abort: close tools and pending model calls now.
        for agent in [prompt.root, *prompt.agents.values()]:
            if agent.closed:
                continue
            turn = agent.turn
            if turn is not None and not turn.chat.emitted:
                self._emit_chat(prompt, agent, turn, event.time_ns, Outcome.CANCELLED, None, None)
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
        prompt.root.status = Outcome.ERROR
        prompt.root.error_type = "cancelled"
        prompt.root.status_message = f"aborted: {reason}"
        self._out.append(record)

    def _on_compaction(self, event: ev.Compaction) -> None:
        # A compaction outside any prompt (/compact) is work of its own: it gets a trace (not a human prompt).
        prompt = self._current or self._ensure_prompt(event)
        record = Compaction(
            session_id=self.ctx.session_id,
            time_ns=event.time_ns,
            trace_id=prompt.trace_id,
            span_id=prompt.root.span_id,
            complete=event.complete,
            trigger=event.trigger,
            success=event.success,
            pre_tokens=event.pre_tokens,
            post_tokens=event.post_tokens,
            tokens_removed=event.tokens_removed,
            messages_removed=event.messages_removed,
            current_tokens=event.current_tokens,
            token_limit=event.token_limit,
            source_offset=self._offset,
        )
        prompt.add_note(record)
        self._touch(prompt, prompt.root, event.time_ns)
        if not event.complete:
            return
        self._out.append(record)
        call = event.call
        # The compaction's own model call: the CLI writes no usage record for it, only these totals.
        if call is not None:
            usage = Usage(
                input=call.input_tokens,
                output=call.output_tokens,
                cache_read=call.cache_read_tokens,
                cache_write=call.cache_write_tokens,
                calls=1,
            )
            self._standalone_chat(
                prompt, event, usage, call.model or self.ctx.model, call.duration_ms, "compaction"
            )

    def _on_truncation(self, event: ev.Truncation) -> None:
        prompt = self._current
        if prompt is None:
            return
        prompt.add_note(
            Truncation(
                time_ns=event.time_ns,
                token_limit=event.token_limit,
                pre_tokens=event.pre_tokens,
                post_tokens=event.post_tokens,
                tokens_removed=event.tokens_removed,
                messages_removed=event.messages_removed,
            )
        )

    def _on_skill(self, event: ev.SkillInvoked) -> None:
        note = SkillInvoked(event.time_ns, event.name, event.plugin, event.trigger, event.source)
        if event.trigger == "user-invoked" or self._current is None:
            # Typed as /<skill>: written before the user.message it belongs to; the next prompt takes it.
            self._pending_notes.append((event.offset, note))
            self._hold(event)
            return
        self._current.add_note(note)

    # ------------------------------------------------------------------ messages
    def _on_system_message(self, event: ev.SystemMessage) -> None:
        """The system prompt, decoded only when its own capture switch is on (parse skips it otherwise).

        The root agent's goes into the session context (old logs write it once, before the first prompt; newer
        ones with each prompt); a sub-agent's to that agent. Never opens a prompt.
        """
        text = self.gate.text(event.content, ContentKind.SYSTEM_PROMPT)
        if text is None:
            return
        if event.agent_id is None:
            self.ctx.system_prompt = text
            return
        hit = self._by_agent_id.get(event.agent_id)
        if hit is not None:
            hit[1].system_text = text

    def _on_reasoning(self, event: ev.Reasoning) -> None:
        """A reasoning block of the current model call, decoded only when its capture switch is on."""
        text = self.gate.text(event.content, ContentKind.REASONING, events=True)
        if text is None or (event.agent_id is None and not self._prompts):
            return
        _, agent = self._route(event)
        if agent.turn is not None:
            agent.turn.chat.reasoning_text.append(text)

    def _on_user_message(self, event: ev.UserMessage) -> None:
        source = event.source
        if event.agent_id is not None or (source or "").startswith("agent-"):
            # A sub-agent's task prompt: the start of that agent's work, not a human prompt.
            prompt, agent = self._route(event)
            self._touch(prompt, agent, event.time_ns)
            if agent.input_text is None:
                agent.input_text = self.gate.text(event.content, ContentKind.PROMPTS)
            self._queue_user_message(agent, event.content)
            return
        delivery = event.delivery
        injected = source is not None or event.autopilot_continuation or delivery == "steering"
        if injected and self._current is not None:
            prompt = self._current
            prompt.add_note(
                UserMessage(
                    time_ns=event.time_ns,
                    source=source or delivery or "autopilot",
                    interaction_id=event.interaction_id,
                    turn_id=event.turn_id,
                    autopilot_continuation=event.autopilot_continuation,
                    content=self.gate.text(event.content, ContentKind.PROMPTS),
                )
            )
            self._touch(prompt, prompt.root, event.time_ns)
            self._queue_user_message(prompt.root, event.content)
            return
        # A new human prompt (idle or queued delivery), or an injected message with no prompt open.
        self._finish_current()
        prompt = self._open_prompt(event, event, human=not injected)
        prompt.add_note(
            UserMessage(
                time_ns=event.time_ns,
                source=source or "user",
                interaction_id=prompt.interaction_id,
                opening=True,
            )
        )
        self._queue_user_message(prompt.root, event.content)

    def _queue_user_message(self, agent: Agent, content: Any) -> None:
        """Keep a user message (or a sub-agent's task prompt) for the input messages of the agent's next call."""
        text = self.gate.text(content, ContentKind.PROMPTS, events=True)
        if text is not None:
            agent.pending_input.append(InputMessage(text))

    def _on_turn_start(self, event: ev.TurnStart) -> None:
        prompt, agent = self._route(event)
        agent.uses_turn_events = True
        if agent.turn is not None:
            # A turn_start without the previous turn_end: close the old one where its activity stopped.
            self._end_turn(prompt, agent, agent.turn.last_ns, incomplete="no_turn_end")
        self._begin_turn(prompt, agent, event, event.time_ns, synthetic=False)
        self._touch(prompt, agent, event.time_ns)

    def _begin_turn(
        self,
        prompt: Prompt,
        agent: Agent,
        event: ev.TurnStart | ev.AssistantMessage,
        start_ns: int,
        synthetic: bool,
    ) -> OpenTurn:
        index = agent.turn_count
        agent.turn_count += 1
        prompt.turns_total += 1
        turn = OpenTurn(
            span_id=self._sid("turn", prompt.key, str(agent.span_id), str(index)),
            index=index,
            turn_id=event.turn_id,
            interaction_id=event.interaction_id or prompt.interaction_id,
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

    def _on_turn_end(self, event: ev.TurnEnd) -> None:
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
                self._emit_chat(prompt, agent, turn, end_ns, Outcome.CANCELLED, None, None)
            elif chat.end_ns is None and chat.records == 0 and not turn.synthetic:
                # The turn ended without any model response or usage: the model call failed, or the user cut it.
                # The CLI says which right after turn_end (session.error with the provider's status, or abort).
                self._unanswered.append((prompt, agent, turn, end_ns))
            else:
                self._emit_chat(prompt, agent, turn, chat.end_ns or end_ns, Outcome.OK, None, None)
        end = max(end_ns, turn.last_ns)
        self._ended(prompt, end)
        # Positional, in the record's field order: a backfill builds one per span, and matching keywords
        # costs more than building the record.
        self._out.append(
            Turn(
                self.ctx.session_id,  # session_id
                self.ctx.provider or OWN_API,  # provider
                prompt.trace_id,  # trace_id
                turn.span_id,  # span_id
                agent.span_id,  # parent_span_id
                turn.index,  # index
                turn.turn_id,  # turn_id
                turn.interaction_id,  # interaction_id
                turn.start_ns,  # start_ns
                _not_before(end, turn.start_ns),  # end_ns
                turn.tool_calls,  # tool_calls
                agent.name,  # agent_name
                turn.synthetic,  # synthetic
                incomplete,  # incomplete_reason
                self._offset,  # source_offset
            )
        )

    def _on_usage_record(self, event: ev.UsageRecord) -> None:
        report = event.usage
        if report is None:
            return
        self.ctx.saw_usage_records = True
        prompt, agent = self._route(event)
        self._touch(prompt, agent, event.time_ns)
        if report.provider:
            self.ctx.provider = report.provider
        u = Usage(
            input=report.input_tokens,
            output=report.output_tokens,
            cache_read=report.cache_read_tokens,
            cache_write=report.cache_write_tokens,
            cost=report.cost,
            nano_aiu=report.nano_aiu,
            calls=1,
            reasoning=report.reasoning_tokens,
        )
        self._detect(
            prompt, check_burn(prompt, self.settings.runaway, event.time_ns, (u.input or 0) + (u.output or 0))
        )
        turn = agent.turn
        if turn is None or turn.chat.emitted:
            self._standalone_chat(prompt, event, u, report.model, report.duration_ms, "usage_record", report)
            return
        chat = turn.chat
        chat.usage.add(u)
        chat.records += 1
        chat.model = chat.model or report.model
        chat.response_id = report.api_call_id or chat.response_id
        chat.finish_reason = report.finish_reason or chat.finish_reason
        chat.ttft_ms = report.ttft_ms if chat.ttft_ms is None else chat.ttft_ms
        if report.duration_ms is not None:
            chat.server_ms = (chat.server_ms or 0.0) + report.duration_ms
        chat.initiator = chat.initiator or report.initiator
        chat.reasoning_effort = report.reasoning_effort or chat.reasoning_effort

    def _standalone_chat(
        self,
        prompt: Prompt,
        event: Event,
        usage: Usage,
        model: str | None,
        duration_ms: float | None,
        origin: str,
        record: ev.Usage | None = None,
    ) -> None:
        """A model call outside any turn (e.g. compaction): under the agent, not a turn."""
        _, agent = (prompt, prompt.root) if event.agent_id is None else self._route(event)
        start = event.time_ns - int((duration_ms or 0) * 1_000_000)
        turn = OpenTurn(
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
        if record is not None:
            turn.chat.response_id = record.api_call_id
            turn.chat.finish_reason = record.finish_reason
            turn.chat.initiator = record.initiator
            turn.chat.reasoning_effort = record.reasoning_effort
        self._emit_chat(
            prompt,
            agent,
            turn,
            event.time_ns,
            Outcome.OK,
            None,
            None,
            parent=agent.span_id,
            span_id=turn.span_id,
            origin=origin,
        )

    def _on_assistant_message(self, event: ev.AssistantMessage) -> None:
        prompt, agent = self._route(event)
        if agent.agent_id in self._notified and not event.has_model_call_ids:
            # The CLI's own message after a notification (it reads the finished agent or shell): no model call,
            # no turn. Its tool calls are the CLI's too.
            self._notified.discard(agent.agent_id)
            self._touch(prompt, agent, event.time_ns)
            for request in event.tool_requests:
                if request.call_id is not None:
                    self._cli_calls.add(request.call_id)
            return
        turn = agent.turn
        if turn is None or (turn.synthetic and turn.chat.emitted):
            if turn is not None:
                self._end_turn(prompt, agent, turn.last_ns)
            start = agent.last_ns if agent.last_ns else event.time_ns
            turn = self._begin_turn(prompt, agent, event, min(start, event.time_ns), synthetic=True)
        self._touch(prompt, agent, event.time_ns)
        chat = turn.chat
        chat.end_ns = event.time_ns
        chat.response_model = event.model or chat.response_model
        chat.response_id = chat.response_id or event.api_call_id
        if chat.records == 0 and event.output_tokens:
            chat.usage.output = (chat.usage.output or 0) + event.output_tokens
        content = event.content
        if isinstance(content, str) and content:
            chat.message_text.append(content)
            agent.output_text = content
        if not chat.reasoning_text:
            # The same text as the assistant.reasoning line, which some CLI versions do not persist.
            reasoning = self.gate.text(event.reasoning_text, ContentKind.REASONING, events=True)
            if reasoning is not None:
                chat.reasoning_text.append(reasoning)
        if event.has_tool_requests:
            chat.asked_for_tools = True
            if self.settings.content.allows(ContentKind.TOOL_ARGUMENTS):
                chat.tool_requests.extend(event.tool_requests)
        if turn.synthetic:
            # Old logs: no turn events; the message is the end of the model call.
            self._emit_chat(prompt, agent, turn, event.time_ns, Outcome.OK, None, None)

    # ------------------------------------------------------------------ tools
    def _on_tool_start(self, event: ev.ToolStart) -> None:
        call_id = event.call_id
        if call_id is None:
            return
        prompt, agent = self._route(event)
        self._touch(prompt, agent, event.time_ns)
        cli = call_id in self._cli_calls
        # The CLI's own calls belong to the agent, not to the turn whose model call may still be running.
        turn = None if cli else agent.turn
        if turn is not None and not turn.chat.emitted:
            self._emit_chat(prompt, agent, turn, turn.chat.end_ns or event.time_ns, Outcome.OK, None, None)
        name = event.name or "unknown"
        arguments = event.arguments
        tool = Tool(
            span_id=self._unique_sid(prompt, "tool", call_id, event.id),
            parent_span_id=turn.span_id if turn is not None else agent.span_id,
            call_id=call_id,
            name=name,
            start_ns=event.time_ns,
            arguments=arguments,
            args_hash=argument_hash(arguments),
            mcp_server=event.mcp_server,
            agent=agent,
            description=event.description,
            cli_initiated=cli,
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
        if not cli:  # the agent loop's own repetitions only
            self._detect(
                prompt, check_identical(prompt, self.settings.runaway, event.time_ns, name, tool.args_hash)
            )

    def _on_tool_complete(self, event: ev.ToolComplete) -> None:
        call_id = event.call_id
        if call_id is None:
            return
        prompt = self._tool_owner.get(call_id)
        if prompt is None or call_id not in prompt.tools:
            return
        tool = prompt.tools.pop(call_id)
        self._tool_owner.pop(call_id, None)
        self._touch(prompt, tool.agent, event.time_ns)
        success = event.success
        # A call the user (or a --deny-tool rule) refused is not a tool failure: it never ran.
        failure = "denied" if event.error_code == "denied" else "ToolError"
        self._end_tool(
            prompt,
            tool,
            event.time_ns,
            success=success,
            error_type=None if success else failure,
            message=event.error_message,
            completion=event,
        )

    def _on_external_tool(self, event: ev.ExternalToolRequested) -> None:
        # An extension (or SDK client) runs a call already started: the same call, so its span, not a second.
        prompt = self._tool_owner.get(event.call_id or "")
        tool = prompt.tools.get(event.call_id or "") if prompt is not None else None
        if tool is not None:
            tool.external = True

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
        completion: ev.ToolComplete | None = None,
    ) -> None:
        """Hand on a tool call: completed (``completion``), or cut short (``incomplete`` says why)."""
        exit_code = None
        user_requested = False
        file_edits = None
        error_code = None
        result_text = None
        if completion is not None:
            exit_code = completion.exit_code
            user_requested = completion.user_requested
            file_edits = completion.file_edits
            error_code = completion.error_code
            text = completion.result
            if text is None and message:
                text = message
            result_text = self.gate.text(text, ContentKind.TOOL_RESULTS, events=True)
            if result_text is not None:
                # The result goes back to the model in the agent's next call, in the order tools complete.
                tool.agent.pending_input.append(InputMessage(result_text, tool.call_id))
        end = _not_before(end_ns, tool.start_ns)
        self._ended(prompt, end)
        # Positional, in the record's field order: a backfill builds one per span, and matching keywords
        # costs more than building the record.
        self._out.append(
            ToolCall(
                self.ctx.session_id,  # session_id
                self.ctx.provider or OWN_API,  # provider
                prompt.trace_id,  # trace_id
                tool.span_id,  # span_id
                tool.parent_span_id,  # parent_span_id
                tool.call_id,  # call_id
                tool.name,  # name
                tool.start_ns,  # start_ns
                end,  # end_ns
                tool.description,  # description
                tool.mcp_server,  # mcp_server
                tool.args_hash,  # arguments_hash
                tool.agent.name,  # agent_name
                success,  # success
                None if success else (error_type or "ToolError"),  # error_type
                message,  # message
                incomplete,  # incomplete_reason
                completion is not None,  # completed
                exit_code,  # exit_code
                user_requested,  # user_requested
                file_edits,  # file_edits
                error_code,  # error_code
                self.gate.json(tool.arguments, ContentKind.TOOL_ARGUMENTS),  # arguments_json
                result_text,  # result_text
                self._offset,  # source_offset
                tool.cli_initiated,  # cli_initiated
                None if success else tool.denied_by,  # denied_by
                tool.hooks_ns / 1e9 if tool.hooks_ns else None,  # hooks_s
                completion.sandboxed if completion is not None else None,  # sandboxed
                tool.external,  # external
            )
        )
        self._cli_calls.discard(tool.call_id)
        if incomplete is None and not tool.cli_initiated:
            self._detect(prompt, check_errors(prompt, self.settings.runaway, end_ns, success))

    # ------------------------------------------------------------------ sub-agents
    def _on_subagent_started(self, event: ev.SubagentStarted) -> None:
        call_id = event.tool_call_id
        hit = None
        if event.agent_id:
            hit = self._by_agent_id.get(event.agent_id)
        if hit is None and call_id:
            hit = self._by_task_call.get(call_id)
        if hit is None:
            prompt, agent = self._start_subagent(event, call_id, event.parent_agent_id)
        else:
            prompt, agent = hit
            if event.agent_id and event.agent_id not in self._by_agent_id:
                self._by_agent_id[event.agent_id] = hit
        agent.name = event.name or agent.name
        agent.display_name = event.display_name
        agent.description = event.description
        agent.model = event.model or agent.model
        agent.background = event.background
        agent.start_ns = min(agent.start_ns, event.time_ns)
        self._touch(prompt, agent, event.time_ns)

    def _on_subagent_end(self, event: ev.SubagentEnded) -> None:
        call_id = event.tool_call_id
        hit = (self._by_agent_id.get(event.agent_id) if event.agent_id else None) or (
            self._by_task_call.get(call_id) if call_id else None
        )
        if hit is None:
            return
        prompt, agent = hit
        self._touch(prompt, agent, event.time_ns)
        if event.failed:
            agent.status = Outcome.ERROR
            agent.error_type = agent.error_type or "SubagentError"
            agent.status_message = event.error or "sub-agent failed"
        elif event.cancelled:
            agent.status = Outcome.ERROR
            agent.error_type = "cancelled"
        self._close_agent(prompt, agent, event.time_ns, None, incomplete=False, ended=event)
        self._maybe_close_lingering(prompt)

    def _close_agent(
        self,
        prompt: Prompt,
        agent: Agent,
        time_ns: int,
        reason: str | None,
        incomplete: bool,
        ended: ev.SubagentEnded | None = None,
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
        end = max(time_ns, agent.last_ns)
        self._ended(prompt, end)
        self._out.append(
            AgentRun(
                session_id=self.ctx.session_id,
                provider=self.ctx.provider or OWN_API,
                trace_id=prompt.trace_id,
                span_id=agent.span_id,
                parent_span_id=agent.parent_span_id,
                start_ns=agent.start_ns,
                end_ns=_not_before(end, agent.start_ns),
                name=agent.name,
                agent_id=agent.agent_id,
                description=agent.description,
                display_name=agent.display_name,
                model=agent.model,
                task_call_id=agent.task_call_id,
                turn_count=agent.turn_count,
                tool_calls=agent.tool_calls,
                usage=agent.usage,
                background=agent.background,
                total_tokens=ended.total_tokens if ended is not None else None,
                total_tool_calls=ended.total_tool_calls if ended is not None else None,
                input_text=agent.input_text,
                output_text=self.gate.text(agent.output_text, ContentKind.RESPONSES),
                system_text=agent.system_text,
                outcome=agent.status,
                error_type=agent.error_type,
                status_message=agent.status_message,
                incomplete_reason=(reason or "incomplete") if incomplete else None,
                source_offset=self._offset,
            )
        )

    # ------------------------------------------------------------------ model calls and prompts
    def _emit_chat(
        self,
        prompt: Prompt,
        agent: Agent,
        turn: OpenTurn,
        end_ns: int,
        outcome: Outcome,
        error_type: str | None,
        message: str | None,
        *,
        parent: int | None = None,
        span_id: int | None = None,
        origin: str | None = None,
    ) -> None:
        chat = turn.chat
        if chat.emitted:
            return
        chat.emitted = True
        model = chat.model or chat.response_model or agent.model or self.ctx.model or "unknown"
        finish = chat.finish_reason
        if outcome is not Outcome.OK:
            finish = "error"
        elif finish is None and chat.end_ns is not None:
            finish = "tool_calls" if chat.asked_for_tools else "stop"
        gate = self.gate
        text = (
            gate.text("\n".join(chat.message_text), ContentKind.RESPONSES, events=True)
            if chat.message_text
            else None
        )
        # Kept only when tool arguments may be captured (see _on_assistant_message).
        requests = [
            ToolRequest(r.call_id, r.name, gate.json(r.arguments, ContentKind.TOOL_ARGUMENTS, events=True))
            for r in chat.tool_requests
        ]
        start = turn.start_ns
        end = _not_before(end_ns, start)
        self._ended(prompt, end)
        # Positional, in the record's field order: a backfill builds one per span, and matching keywords
        # costs more than building the record.
        self._out.append(
            ModelCall(
                self.ctx.session_id,  # session_id
                self.ctx.provider or OWN_API,  # provider
                prompt.trace_id,  # trace_id
                span_id or self._sid("chat", str(turn.span_id)),  # span_id
                parent or turn.span_id,  # parent_span_id
                start,  # start_ns
                end,  # end_ns
                model,  # model
                chat.response_model or model,  # response_model
                chat.response_id,  # response_id
                finish,  # finish_reason
                chat.usage,  # usage
                chat.records,  # calls
                chat.ttft_ms,  # ttft_ms
                chat.server_ms,  # server_ms
                chat.initiator,  # initiator
                turn.turn_id,  # turn_id
                turn.interaction_id,  # interaction_id
                agent.name,  # agent_name
                origin,  # origin
                outcome,  # outcome
                (error_type or "ModelCallError") if outcome is Outcome.ERROR else None,  # error_type
                message,  # message
                chat.input_messages,  # input_messages
                chat.reasoning_text,  # reasoning
                text,  # output_text
                requests,  # tool_requests
                self._offset,  # source_offset
                # The call's own (its usage record), else the session's for the main agent's calls.
                chat.reasoning_effort or (self.ctx.reasoning_effort if agent is prompt.root else None),
            )
        )
        agent.usage.add(chat.usage)
        if finish:
            agent.last_finish_reason = finish
        if agent is prompt.root and chat.records:
            agent.model = model  # a prompt's model is the one its calls used

    def _emit_prompt(self, prompt: Prompt, time_ns: int) -> None:
        root = prompt.root
        ctx = self.ctx
        end = max(prompt.end_ns, prompt.last_ns, time_ns if prompt.incomplete_reason else 0, prompt.start_ns)
        self._out.append(
            PromptRun(
                session_id=ctx.session_id,
                provider=self.ctx.provider or OWN_API,
                trace_id=prompt.trace_id,
                span_id=root.span_id,
                start_ns=prompt.start_ns,
                end_ns=end,
                model=root.model or ctx.model,
                turn_count=root.turn_count,
                turns_total=prompt.turns_total,
                tool_calls=prompt.tool_calls,
                outcome=prompt.outcome,
                usage=root.usage,
                last_finish_reason=root.last_finish_reason,
                interaction_id=prompt.interaction_id,
                facts=SessionFacts(
                    cli_version=ctx.copilot_version,
                    cwd=ctx.cwd,
                    repository=ctx.repository,
                    branch=ctx.branch,
                    head_commit=ctx.head_commit,
                    git_root=ctx.git_root,
                    title=self.gate.text(ctx.title, ContentKind.PROMPTS),
                    system_prompt=ctx.system_prompt,
                ),
                agent_mode=prompt.agent_mode,
                human=prompt.human,
                input_text=root.input_text,
                output_text=self.gate.text(root.output_text, ContentKind.RESPONSES),
                # An abort is the user's choice: an error (cancelled), as the CLI's own export marks aborted tools.
                error=prompt.outcome in ("error", "aborted") or root.status is Outcome.ERROR,
                error_type=root.error_type,
                status_message=root.status_message,
                incomplete_reason=prompt.incomplete_reason,
                notes=prompt.notes,
                dropped_notes=prompt.dropped_notes,
                source_offset=self._offset,
                agent_name=root.name,
                reasoning_effort=ctx.reasoning_effort,
            )
        )

    # ------------------------------------------------------------------ what the CLI itself says
    def _on_notification(self, event: ev.SystemNotification) -> None:
        """Background work finished: noted on the prompt; the CLI's next message for that agent is its own."""
        prompt = self._current
        record = Notification(
            session_id=self.ctx.session_id,
            time_ns=event.time_ns,
            trace_id=prompt.trace_id if prompt else None,
            span_id=prompt.root.span_id if prompt else None,
            kind=event.kind or "unknown",
            agent_id=event.notified_agent_id,
            agent_type=event.agent_type,
            shell_id=event.shell_id,
            exit_code=event.exit_code,
            source_offset=self._offset,
        )
        # The notification is addressed to the agent that owns the envelope (the main agent when absent).
        self._notified.add(event.agent_id)
        if prompt is not None:
            prompt.add_note(record)
            self._touch(prompt, prompt.root, event.time_ns)
        self._out.append(record)

    def _on_task_complete(self, event: ev.TaskComplete) -> None:
        prompt = self._current
        record = TaskComplete(
            session_id=self.ctx.session_id,
            time_ns=event.time_ns,
            trace_id=prompt.trace_id if prompt else None,
            span_id=prompt.root.span_id if prompt else None,
            success=event.success,
            outcome=event.outcome,
            summary=self.gate.text(event.summary, ContentKind.RESPONSES),
            source_offset=self._offset,
        )
        if prompt is not None:
            prompt.add_note(record)
            self._touch(prompt, prompt.root, event.time_ns)
        self._out.append(record)

    def _on_mode_changed(self, event: ev.ModeChanged) -> None:
        prompt = self._current
        record = ModeChange(
            session_id=self.ctx.session_id,
            time_ns=event.time_ns,
            trace_id=prompt.trace_id if prompt else None,
            span_id=prompt.root.span_id if prompt else None,
            previous=event.previous,
            new=event.new,
            source_offset=self._offset,
        )
        self.ctx.mode = record.new or self.ctx.mode
        if prompt is not None:
            prompt.add_note(record)
        self._out.append(record)

    def _on_permission_requested(self, event: ev.PermissionRequested) -> None:
        request_id = event.request_id
        if request_id is None:
            return
        call_id = event.tool_call_id
        prompt = self._tool_owner.get(call_id or "") or self._current
        if prompt is None:
            return
        prompt.permissions[request_id] = (call_id, event.kind, event.time_ns)
        self._touch(prompt, prompt.root, event.time_ns)

    def _on_permission_completed(self, event: ev.PermissionCompleted) -> None:
        request_id = event.request_id
        for prompt in self._prompts.values():
            if request_id in prompt.permissions:
                self._touch(prompt, prompt.root, event.time_ns)
                self._end_permission(prompt, request_id, event.time_ns, event.result, None)
                return

    def _end_permission(
        self, prompt: Prompt, request_id: str, end_ns: int, result: str | None, incomplete: str | None
    ) -> None:
        call_id, kind, start_ns = prompt.permissions.pop(request_id)
        tool = prompt.tools.get(call_id) if call_id else None
        end = _not_before(end_ns, start_ns)
        self._ended(prompt, end)
        self._out.append(
            PermissionWait(
                session_id=self.ctx.session_id,
                provider=self.ctx.provider or OWN_API,
                trace_id=prompt.trace_id,
                span_id=self._unique_sid(prompt, "permission", request_id),
                parent_span_id=tool.span_id if tool is not None else prompt.root.span_id,
                start_ns=start_ns,
                end_ns=end,
                request_id=request_id,
                kind=kind,
                tool_call_id=call_id,
                tool_name=tool.name if tool is not None else None,
                result=result,
                incomplete_reason=incomplete,
                source_offset=self._offset,
            )
        )

    # ------------------------------------------------------------------ hooks, warnings, agents, imports
    def _flush_unanswered(
        self,
        prompt: Prompt | None = None,
        outcome: Outcome = Outcome.ERROR,
        error_type: str | None = None,
        message: str | None = None,
    ) -> None:
        """Emit the model calls of turns that ended unanswered (of ``prompt`` only, when given): failed with
        ``error_type`` and ``message``, cancelled, or, when nothing said why, without a response."""
        keep: list[tuple[Prompt, Agent, OpenTurn, int]] = []
        for entry in self._unanswered:
            owner, agent, turn, end_ns = entry
            if prompt is not None and owner is not prompt:
                keep.append(entry)
            elif outcome is Outcome.ERROR and error_type is None:
                self._emit_chat(
                    owner,
                    agent,
                    turn,
                    end_ns,
                    Outcome.ERROR,
                    "ModelCallError",
                    "the model call returned no response",
                )
            else:
                self._emit_chat(owner, agent, turn, end_ns, outcome, error_type, message)
        self._unanswered = keep

    def _take_pending(self, prompt: Prompt) -> None:
        """A new prompt takes the hooks and user-invoked skills written before its message."""
        for _, note in self._pending_notes:
            prompt.add_note(note)
        self._pending_notes = []
        self._pending_at = None
        pending, self._pending_hooks = self._pending_hooks, {}
        for hook in pending.values():
            hook.parent_span_id = prompt.root.span_id
            if hook.end_ns is None:
                prompt.hooks[hook.invocation_id] = hook
            else:
                self._emit_hook(prompt, hook, hook.end_ns, None)

    def _adopt_pending(self, event: Event | None) -> None:
        """Hooks or a skill still waiting when the session ends without a prompt: a synthetic prompt of their
        own takes them (dated and named by the first of them), rather than losing them."""
        if self._pending_at is None or self._current is not None:
            return
        offset = self._pending_at[0]
        first_ns = min(
            [
                *(h.start_ns for h in self._pending_hooks.values()),
                *(n.time_ns for _, n in self._pending_notes),
            ]
        )
        anchor = event or Event("pending", f"pending@{offset}", first_ns, {}, None, offset, offset)
        self._open_prompt(replace(anchor, time_ns=first_ns) if event is not None else anchor)

    def _hold(self, event: Event) -> None:
        """Something for the next prompt was read at ``event``: a restart must re-fold from its line."""
        if self._pending_at is None:
            self._pending_at = (event.offset, self.ctx.to_dict())

    def _on_hook_start(self, event: ev.HookStart) -> None:
        """A hook begins: under the tool call it decides on (preToolUse names the calls) or follows (postToolUse
        names the tool: its latest open call), else under the prompt; before any prompt, it waits for one."""
        invocation = event.invocation_id
        if invocation is None:
            return
        ids = event.tool_call_ids
        call_id = ids[0] if ids else None
        prompt = (self._tool_owner.get(call_id) if call_id else None) or self._current
        tool = prompt.tools.get(call_id) if prompt is not None and call_id else None
        if tool is None and prompt is not None and event.tool_name is not None:
            named = [t for t in prompt.tools.values() if t.name == event.tool_name]
            tool = max(named, key=lambda t: t.start_ns) if named else None
        hook = Hook(
            invocation_id=invocation,
            hook_type=event.hook_type or "unknown",
            start_ns=event.time_ns,
            offset=event.offset,
            tool_call_id=tool.call_id if tool is not None else call_id,
            tool_name=tool.name if tool is not None else event.tool_name,
        )
        if prompt is None:
            self._pending_hooks[invocation] = hook
            self._hold(event)
            return
        hook.parent_span_id = tool.span_id if tool is not None else prompt.root.span_id
        prompt.hooks[invocation] = hook
        self._touch(prompt, prompt.root, event.time_ns)

    def _on_hook_end(self, event: ev.HookEnd) -> None:
        invocation = event.invocation_id
        if invocation is None:
            return
        prompt = None
        hook = self._pending_hooks.get(invocation)
        if hook is None:
            prompt = next((p for p in self._prompts.values() if invocation in p.hooks), None)
            if prompt is None:
                return
            hook = prompt.hooks[invocation]
        hook.end_ns = event.time_ns
        hook.success = event.success
        hook.error_message = event.error_message
        hook.error_source = event.error_source
        denied = event.denied_calls
        hook.denied_calls = len(denied)
        if prompt is None:
            return  # it waits for its prompt
        for call_id in denied:
            tool = prompt.tools.get(call_id)
            if tool is not None:
                tool.denied_by = HOOK_DENIAL
        owner = prompt.tools.get(hook.tool_call_id) if hook.tool_call_id is not None else None
        if owner is not None:
            owner.hooks_ns += max(0, event.time_ns - hook.start_ns)
        self._touch(prompt, prompt.root, event.time_ns)
        self._emit_hook(prompt, hook, event.time_ns, None)

    def _emit_hook(self, prompt: Prompt, hook: Hook, end_ns: int, incomplete: str | None) -> None:
        prompt.hooks.pop(hook.invocation_id, None)
        end = _not_before(hook.end_ns if hook.end_ns is not None else end_ns, hook.start_ns)
        self._ended(prompt, end)
        self._out.append(
            HookRun(
                session_id=self.ctx.session_id,
                provider=self.ctx.provider or OWN_API,
                trace_id=prompt.trace_id,
                span_id=self._unique_sid(prompt, "hook", hook.invocation_id),
                parent_span_id=hook.parent_span_id or prompt.root.span_id,
                start_ns=hook.start_ns,
                end_ns=end,
                invocation_id=hook.invocation_id,
                hook_type=hook.hook_type,
                tool_call_id=hook.tool_call_id,
                tool_name=hook.tool_name,
                success=hook.success,
                error_message=hook.error_message,
                error_source=hook.error_source,
                denied_calls=hook.denied_calls,
                incomplete_reason=incomplete if hook.end_ns is None else None,
                source_offset=self._offset,
            )
        )

    def _on_warning(self, event: ev.SessionWarning) -> None:
        prompt = self._current
        record = SessionWarning(
            session_id=self.ctx.session_id,
            time_ns=event.time_ns,
            trace_id=prompt.trace_id if prompt else None,
            span_id=prompt.root.span_id if prompt else None,
            warning_type=event.warning_type or "unknown",
            message=event.message,
            source_offset=self._offset,
        )
        if prompt is not None:
            prompt.add_note(record)
            self._touch(prompt, prompt.root, event.time_ns)
        self._out.append(record)

    def _on_agent_selected(self, event: ev.AgentSelected) -> None:
        """The main agent is a custom one (``copilot --agent``): it names the roots from now on. A sub-agent's
        selection (it has an ``agentId``) is read from its ``subagent.started``."""
        if event.agent_id is not None or event.parent_tool_call_id is not None or event.name is None:
            return
        self.ctx.agent_name = event.name
        if self._current is not None:
            self._current.root.name = event.name

    def _read_imported(self, event: Event) -> bool:
        """Whether ``event`` belongs to an imported transcript (and was counted): its messages and tools ran
        elsewhere, not as model calls or turns here. The first event of real work ends the imported part."""
        imported = self.ctx.imported
        kind = event.__class__
        if kind is ev.UserMessage and event.interaction_id is None:
            key = "user_messages"
        elif kind is ev.AssistantMessage and event.interaction_id is None:
            key = "assistant_messages"
        elif kind is ev.ToolStart:
            key = "tool_calls"
        elif kind is ev.ToolComplete:
            return True
        else:
            if kind in _ENDS_IMPORT:
                self._emit_imported()
            return False
        imported[key] = imported.get(key, 0) + 1
        return True

    def _emit_imported(self) -> None:
        imported, self.ctx.imported = self.ctx.imported, {}
        self._out.append(
            SessionImported(
                session_id=self.ctx.session_id,
                time_ns=imported.get("time_ns", 0),
                imported_ns=imported.get("imported_ns", 0),
                user_messages=imported.get("user_messages", 0),
                assistant_messages=imported.get("assistant_messages", 0),
                tool_calls=imported.get("tool_calls", 0),
                source_offset=self._offset,
            )
        )

    # ------------------------------------------------------------------ runaway detection
    def _detect(self, prompt: Prompt, detection: Detection | None) -> None:
        """Hand on a rule's detection, if it fired, noted on the prompt."""
        if detection is None:
            return
        detection.session_id = self.ctx.session_id
        detection.trace_id = prompt.trace_id
        detection.span_id = prompt.root.span_id
        detection.turns_total = prompt.turns_total
        detection.tool_calls = prompt.tool_calls
        detection.source_offset = self._offset
        prompt.add_note(detection)
        self._out.append(detection)


# Dispatch by the event's class: one per CLI event type the loop reads (copilot_otel.events decodes them).
_HANDLERS: dict[type[Event], Callable[[AgentLoop, Any], None]] = {
    ev.SessionStart: AgentLoop._on_session_start,
    ev.SessionResume: AgentLoop._on_session_resume,
    ev.Shutdown: AgentLoop._on_shutdown,
    ev.SessionError: AgentLoop._on_session_error,
    ev.ContextChanged: AgentLoop._on_context_changed,
    ev.ModelChange: AgentLoop._on_model_change,
    ev.Compaction: AgentLoop._on_compaction,
    ev.Truncation: AgentLoop._on_truncation,
    ev.UsageRecord: AgentLoop._on_usage_record,
    ev.SkillInvoked: AgentLoop._on_skill,
    ev.Abort: AgentLoop._on_abort,
    ev.UserMessage: AgentLoop._on_user_message,
    ev.SystemMessage: AgentLoop._on_system_message,
    ev.Reasoning: AgentLoop._on_reasoning,
    ev.TurnStart: AgentLoop._on_turn_start,
    ev.TurnEnd: AgentLoop._on_turn_end,
    ev.AssistantMessage: AgentLoop._on_assistant_message,
    ev.ToolStart: AgentLoop._on_tool_start,
    ev.ToolComplete: AgentLoop._on_tool_complete,
    ev.ExternalToolRequested: AgentLoop._on_external_tool,
    ev.SystemNotification: AgentLoop._on_notification,
    ev.TaskComplete: AgentLoop._on_task_complete,
    ev.ModeChanged: AgentLoop._on_mode_changed,
    ev.PermissionRequested: AgentLoop._on_permission_requested,
    ev.PermissionCompleted: AgentLoop._on_permission_completed,
    ev.SubagentStarted: AgentLoop._on_subagent_started,
    ev.SubagentEnded: AgentLoop._on_subagent_end,
    ev.HookStart: AgentLoop._on_hook_start,
    ev.HookEnd: AgentLoop._on_hook_end,
    ev.SessionWarning: AgentLoop._on_warning,
    ev.AgentSelected: AgentLoop._on_agent_selected,
}
# Handlers of the events that may follow a turn that ended unanswered without settling it: the error or abort
# that says why, and hooks, warnings or a failed compaction written in between.
_KEEPS_UNANSWERED = frozenset(
    {
        AgentLoop._on_session_error,
        AgentLoop._on_abort,
        AgentLoop._on_compaction,
        AgentLoop._on_hook_start,
        AgentLoop._on_hook_end,
        AgentLoop._on_warning,
    }
)
# Events after which an imported transcript is over: a new CLI process, the end, a real turn.
_ENDS_IMPORT = frozenset({ev.SessionResume, ev.Shutdown, ev.TurnStart, ev.UserMessage, ev.UsageRecord})
