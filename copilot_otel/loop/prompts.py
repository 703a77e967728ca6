"""Prompts: a human prompt (one trace) from its message to where its work ends, and what waits for the next one.

A prompt opens at a human ``user.message`` (or, synthetic, at agent activity with none open), takes the hooks and
user-invoked skills written before its message, and closes when the next prompt begins (unless background
sub-agents still run: it lingers until they end), when the session shuts down or resumes, or when the reader
closes the log. Closing a prompt closes what it still holds (hooks, permission waits, agents, their tools and
turns) and hands on its :class:`~copilot_otel.model.activity.PromptRun`.
"""

from __future__ import annotations

from typing import Any

from ..model import ids
from ..model.activity import (
    IncompleteReason,
    InputMessage,
    Outcome,
    PromptRun,
    PromptStarted,
    SessionFacts,
    UserMessage,
)
from ..model.inputs import ContentInput, ContinuedInput, Envelope, Event, PromptInput, RootedInput
from ..model.records import RecordBase, replace
from ..settings.content import ContentKind
from .core import OWN_API, LoopState
from .foldstate import Agent, Prompt

__all__ = [
    "adopt_pending",
    "close_prompt",
    "ensure_prompt",
    "hold",
    "maybe_close_lingering",
    "on_continued",
    "on_rooted",
    "on_rooted_end",
    "on_system_message",
    "on_user_message",
]


def open_prompt(
    loop: LoopState, event: Envelope, message: PromptInput | None = None, human: bool = False
) -> Prompt:
    """Open a prompt (a trace) at ``event``: a human ``message``, or other activity (then synthetic)."""
    ctx = loop.ctx
    pending_at = loop.pending_at
    # Re-folded from where its hooks or skill were read, when it has any (see AgentLoop.resume_point).
    context_at_open = pending_at[1] if pending_at is not None else ctx.to_dict()
    # The prompt's trace id comes from its first event's id alone, so it is the same whether the log is read from
    # its start or from the middle (--backfill none, a restart). Logs that reuse event ids (trimmed third-party
    # fixtures) get a repeat counter, kept in the checkpointed context.
    if event.id == ctx.last_prompt_event_id:
        ctx.prompt_id_repeats += 1
        key = f"{event.id}#{ctx.prompt_id_repeats}"
    else:
        ctx.last_prompt_event_id = event.id
        ctx.prompt_id_repeats = 0
        key = event.id
    trace = ids.trace_id(ctx.session_id, key)
    # Hooks and a user-invoked skill written before the prompt's message are part of handling it.
    start_ns = min(
        [
            event.time_ns,
            *(h.start_ns for h in loop.pending_hooks.values()),
            *(n.time_ns for _, n in loop.pending_notes),
        ]
    )
    root = Agent(
        span_id=loop.sid("root", key),
        parent_span_id=None,
        name=ctx.agent_name,
        start_ns=start_ns,
        model=ctx.model,
        last_ns=event.time_ns,
    )
    prompt = Prompt(
        key=key,
        trace_id=trace,
        root=root,
        start_ns=start_ns,
        # A restart re-folds the prompt from its first line, the hooks and skills before its message included.
        start_offset=pending_at[0] if pending_at is not None else event.offset,
        interaction_id=event.interaction_id,
        human=human,
        agent_mode=(message.agent_mode if message is not None else None) or ctx.mode,
        last_ns=event.time_ns,
        context_at_open=context_at_open,
    )
    loop.prompts[key] = prompt
    loop.current = prompt
    ctx.prompts_started += 1
    _take_pending(loop, prompt)
    if human and message is not None:
        root.input_text = loop.gate.text(message.content, ContentKind.PROMPTS)
        loop.out.append(
            PromptStarted(
                session_id=ctx.session_id,
                time_ns=event.time_ns,
                trace_id=trace,
                span_id=root.span_id,
                index=ctx.prompts_started - 1,
                interaction_id=prompt.interaction_id,
                delivery=message.delivery,
                source_offset=loop.offset,
            )
        )
    return prompt


def ensure_prompt(loop: LoopState, event: Envelope) -> Prompt:
    """The prompt that agent activity belongs to; activity with none open starts a synthetic one."""
    if loop.current is not None:
        return loop.current
    return open_prompt(loop, event)


def close_prompt(
    loop: LoopState, prompt: Prompt, time_ns: int, reason: IncompleteReason | None, incomplete: bool
) -> None:
    """Close ``prompt`` at ``time_ns`` with all it still holds, and hand on its run (``incomplete``: for
    ``reason``, its work cut short)."""
    loop.flush_unanswered(prompt)
    for hook in list(prompt.hooks.values()):
        loop.emit_hook(prompt, hook, time_ns, reason or "prompt_closed")
    for request_id in list(prompt.permissions):
        loop.end_permission(prompt, request_id, time_ns, None, reason or "prompt_closed")
    for agent in list(prompt.agents.values()):
        if not agent.closed:
            loop.close_agent(prompt, agent, time_ns, reason or "prompt_closed", incomplete=True)
    loop.close_agent(prompt, prompt.root, time_ns, reason, incomplete=incomplete)
    if incomplete and prompt.outcome == "completed":
        prompt.outcome = "incomplete"
    if incomplete and prompt.incomplete_reason is None:
        prompt.incomplete_reason = reason
    if not prompt.rooted:  # a rooted fold's root is a sub-agent: its AgentRun was handed on
        _emit_prompt(loop, prompt, time_ns)
    loop.prompts.pop(prompt.key, None)
    if loop.current is prompt:
        loop.current = None
    for agent_id, (p, _) in list(loop.by_agent_id.items()):
        if p is prompt:
            del loop.by_agent_id[agent_id]
    for call_id, (p, _) in list(loop.by_task_call.items()):
        if p is prompt:
            del loop.by_task_call[call_id]
    for call_id in list(prompt.tools):
        loop.tool_owner.pop(call_id, None)


def finish_current(loop: LoopState) -> None:
    """End the current prompt (a new one begins) where its activity stopped, unless background sub-agents
    still run: it then lingers until they end."""
    prompt = loop.current
    if prompt is None:
        return
    loop.current = None
    if any(a.background and not a.closed for a in prompt.agents.values()):
        return
    close_prompt(loop, prompt, prompt.last_ns, None, incomplete=False)


def maybe_close_lingering(loop: LoopState, prompt: Prompt) -> None:
    """A prompt that lingered for its background sub-agents ends with the last of them."""
    if prompt is not loop.current and all(a.closed for a in prompt.agents.values()):
        close_prompt(loop, prompt, prompt.last_ns, None, incomplete=False)


def _emit_prompt(loop: LoopState, prompt: Prompt, time_ns: int) -> None:
    root = prompt.root
    ctx = loop.ctx
    end = max(prompt.end_ns, prompt.last_ns, time_ns if prompt.incomplete_reason else 0, prompt.start_ns)
    loop.out.append(
        PromptRun(
            session_id=ctx.session_id,
            provider=ctx.provider or OWN_API,
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
                title=loop.gate.text(ctx.title, ContentKind.PROMPTS),
                system_prompt=ctx.system_prompt,
            ),
            agent_mode=prompt.agent_mode,
            human=prompt.human,
            input_text=root.input_text,
            output_text=loop.gate.text(root.output_text, ContentKind.RESPONSES),
            # An abort is the user's choice: an error (cancelled), as the CLI's own export marks aborted tools.
            error=prompt.outcome in ("error", "aborted") or root.status is Outcome.ERROR,
            error_type=root.error_type,
            status_message=root.status_message,
            incomplete_reason=prompt.incomplete_reason,
            notes=prompt.notes,
            dropped_notes=prompt.dropped_notes,
            source_offset=loop.offset,
            agent_name=root.name,
            reasoning_effort=ctx.reasoning_effort,
            continues=prompt.continues,
            copied_records=prompt.copied_records,
        )
    )


# ---------------------------------------------------------------------------------------------- what waits
def _take_pending(loop: LoopState, prompt: Prompt) -> None:
    """A new prompt takes the hooks and user-invoked skills written before its message."""
    for _, note in loop.pending_notes:
        prompt.add_note(note)
    loop.pending_notes = []
    loop.pending_at = None
    pending, loop.pending_hooks = loop.pending_hooks, {}
    for hook in pending.values():
        hook.parent_span_id = prompt.root.span_id
        if hook.end_ns is None:
            prompt.hooks[hook.invocation_id] = hook
        else:
            loop.emit_hook(prompt, hook, hook.end_ns, None)


def adopt_pending(loop: LoopState, event: Envelope | None) -> None:
    """Hooks or a skill still waiting when the session ends without a prompt: a synthetic prompt of their own
    takes them (dated and named by the first of them), rather than losing them."""
    if loop.pending_at is None or loop.current is not None:
        return
    offset = loop.pending_at[0]
    first_ns = min(
        [
            *(h.start_ns for h in loop.pending_hooks.values()),
            *(n.time_ns for _, n in loop.pending_notes),
        ]
    )
    if event is None:
        open_prompt(loop, Event("pending", f"pending@{offset}", first_ns, {}, None, offset, offset))
        return
    assert isinstance(event, RecordBase)  # every event is a record (model.inputs.Event): its class is kept
    open_prompt(loop, replace(event, time_ns=first_ns))


def hold(loop: LoopState, event: Envelope) -> None:
    """Something for the next prompt was read at ``event``: a restart must re-fold from its line."""
    if loop.pending_at is None:
        loop.pending_at = (event.offset, loop.ctx.to_dict())


# ---------------------------------------------------------------------------------------------- messages
def on_user_message(loop: LoopState, event: PromptInput) -> None:
    """A human prompt opens a trace; a sub-agent's task prompt, steering or an autopilot continuation is part of
    the work under way."""
    source = event.source
    if event.agent_id is not None or (source or "").startswith("agent-"):
        # A sub-agent's task prompt: the start of that agent's work, not a human prompt.
        prompt, agent = loop.route(event)
        loop.touch(prompt, agent, event.time_ns)
        if agent.input_text is None:
            agent.input_text = loop.gate.text(event.content, ContentKind.PROMPTS)
        _queue_user_message(loop, agent, event.content)
        return
    delivery = event.delivery
    injected = source is not None or event.autopilot_continuation or delivery == "steering"
    if injected and loop.current is not None:
        prompt = loop.current
        prompt.add_note(
            UserMessage(
                time_ns=event.time_ns,
                source=source or delivery or "autopilot",
                interaction_id=event.interaction_id,
                turn_id=event.turn_id,
                autopilot_continuation=event.autopilot_continuation,
                content=loop.gate.text(event.content, ContentKind.PROMPTS),
            )
        )
        loop.touch(prompt, prompt.root, event.time_ns)
        _queue_user_message(loop, prompt.root, event.content)
        return
    # A new human prompt (idle or queued delivery), or an injected message with no prompt open.
    finish_current(loop)
    prompt = open_prompt(loop, event, event, human=not injected)
    prompt.add_note(
        UserMessage(
            time_ns=event.time_ns,
            source=source or "user",
            interaction_id=prompt.interaction_id,
            opening=True,
        )
    )
    _queue_user_message(loop, prompt.root, event.content)


def _queue_user_message(loop: LoopState, agent: Agent, content: Any) -> None:
    """Keep a user message (or a sub-agent's task prompt) for the input messages of the agent's next call."""
    text = loop.gate.text(content, ContentKind.PROMPTS, events=True)
    if text is not None:
        agent.pending_input.append(InputMessage(text))


def on_system_message(loop: LoopState, event: ContentInput) -> None:
    """The system prompt, decoded only when its own capture switch is on (parse skips it otherwise).

    The root agent's goes into the session context (old logs write it once, before the first prompt; newer ones
    with each prompt); a sub-agent's to that agent. Never opens a prompt.
    """
    text = loop.gate.text(event.content, ContentKind.SYSTEM_PROMPT)
    if text is None:
        return
    if event.agent_id is None:
        loop.ctx.system_prompt = text
        return
    hit = loop.by_agent_id.get(event.agent_id)
    if hit is not None:
        hit[1].system_text = text


def on_continued(loop: LoopState, event: ContinuedInput) -> None:
    """The current prompt continues another trace's work (a forked session's first prompt: the parent's prompt the
    fork was taken from); the history its log copied from there was skipped (``copied_records``), not folded."""
    prompt = loop.current
    if prompt is None:
        return
    if event.trace_id and event.span_id:
        prompt.continues = (event.trace_id, event.span_id)
    prompt.copied_records += event.copied_records


# ---------------------------------------------------------------------------------------------- rule A
def on_rooted(loop: LoopState, event: RootedInput) -> None:
    """Loop rule A: this fold is a sub-agent's own file, rooted in another fold's span. Instead of a human prompt,
    its work opens under ``parent_span_id`` in the trace of ``prompt_key`` (both computed from the log's own ids,
    so the parent's fold need not be read): the root agent is the sub-agent, handed on as an
    :class:`~copilot_otel.model.activity.AgentRun` when it ends."""
    finish_current(loop)
    ctx = loop.ctx
    ctx.session_id = event.session_id or ctx.session_id  # not the file's name: the parent's session
    key = f"{event.prompt_key}/{event.agent_key}"
    root = Agent(
        span_id=ids.span_id(ctx.session_id, "agent", event.agent_key),
        parent_span_id=event.parent_span_id
        or None,  # 0: the parent is unknown (never an all-zero id on the wire)
        name=event.name,
        start_ns=event.time_ns,
        agent_id=event.agent_key,
        task_call_id=event.task_call_id,
        model=ctx.model,
        last_ns=event.time_ns,
    )
    root.description = event.description
    root.input_text = loop.gate.text(event.content, ContentKind.PROMPTS)
    prompt = Prompt(
        key=key,
        trace_id=ids.trace_id(ctx.session_id, event.prompt_key),
        root=root,
        start_ns=event.time_ns,
        start_offset=event.offset,
        interaction_id=None,
        human=False,
        last_ns=event.time_ns,
        context_at_open=ctx.to_dict(),
        rooted=True,
    )
    loop.prompts[key] = prompt
    loop.current = prompt
    _queue_user_message(loop, root, event.content)


def on_rooted_end(loop: LoopState, event: Envelope) -> None:
    """The rooted sub-agent gave its final answer: its work is complete."""
    prompt = loop.current
    if prompt is not None and prompt.rooted:
        loop.touch(prompt, prompt.root, event.time_ns)
        close_prompt(loop, prompt, event.time_ns, None, incomplete=False)
