"""Sub-agents, and where any event belongs: which prompt and which agent (the main one or a sub-agent).

An event names its agent by the envelope's ``agentId`` (newer CLIs) or by the ``task`` tool call that spawned it
(``parentToolCallId``, older ones); :func:`route` finds the pair, or creates the sub-agent under that tool call
the first time it is seen. A sub-agent ends at its ``subagent.completed`` / ``failed`` (or with its prompt); a
background one keeps its prompt open after the next prompt begins. The custom main agent (``copilot --agent``)
names the roots.

Loop rule A, when the parent's log names the sub-agent and the sub-agent's log cannot name the spawning call
(Codex): :func:`on_spawned` opens the agent span under the spawning tool call with an id both logs compute, and
:func:`on_spawn_ended` hands its run on; the sub-agent's own fold hangs its work under that span and hands on no
run (see :func:`close_agent`).
"""

from __future__ import annotations

from typing import Any, Protocol

from ..model import ids
from ..model.activity import AgentRun, IncompleteReason, Outcome
from ..model.inputs import AgentSelectedInput, Envelope, SubagentEndInput, SubagentStartInput
from ..settings.content import ContentKind
from .core import OWN_API, LoopState
from .foldstate import Agent, Prompt

__all__ = [
    "SpawnEndInput",
    "SpawnInput",
    "close_agent",
    "on_agent_selected",
    "on_spawn_ended",
    "on_spawned",
    "on_subagent_end",
    "on_subagent_started",
    "route",
]


class SpawnInput(Envelope, Protocol):
    """A sub-agent started by the tool call ``task_call_id``, its work in a log of its own (rule A)."""

    @property
    def agent_key(self) -> str: ...
    @property
    def task_call_id(self) -> str | None: ...
    @property
    def name(self) -> str | None: ...
    @property
    def model(self) -> str | None: ...
    @property
    def content(self) -> Any: ...


class SpawnEndInput(Envelope, Protocol):
    """That sub-agent is done (``error_type``: how it ended, when not completed)."""

    @property
    def agent_key(self) -> str: ...
    @property
    def error_type(self) -> str | None: ...


def route(loop: LoopState, event: Envelope) -> tuple[Prompt, Agent]:
    """Which prompt and agent an activity event belongs to (envelope agentId, else parentToolCallId)."""
    if event.agent_id is not None:
        hit = loop.by_agent_id.get(event.agent_id) or loop.by_task_call.get(event.agent_id)
        if hit is not None:
            return hit
    parent_call = event.parent_tool_call_id
    if parent_call is not None:
        hit = loop.by_task_call.get(parent_call)
        if hit is not None:
            if event.agent_id is not None:
                loop.by_agent_id[event.agent_id] = hit
            return hit
        return _start_subagent(loop, event, parent_call)
    if event.agent_id is not None:
        return _start_subagent(loop, event, None)
    prompt = loop.ensure_prompt(event)
    return prompt, prompt.root


def _start_subagent(
    loop: LoopState, event: Envelope, task_call_id: str | None, parent_agent_id: str | None = None
) -> tuple[Prompt, Agent]:
    """Create a sub-agent under the ``task`` tool call that spawned it."""
    prompt: Prompt | None = None
    parent_span: int | None = None
    if task_call_id is not None:
        owner = loop.tool_owner.get(task_call_id)
        if owner is not None:
            prompt = owner
            parent_span = owner.tools[task_call_id].span_id
    if prompt is None:
        hit = loop.by_agent_id.get(parent_agent_id) if parent_agent_id else None
        prompt = hit[0] if hit else loop.ensure_prompt(event)
    key = event.agent_id or task_call_id or event.id
    if parent_span is None:
        # The spawning task call is unknown (log starts mid-way): hang the agent under the root.
        parent_span = prompt.root.span_id
    agent = Agent(
        span_id=loop.unique_sid(prompt, "agent", key),
        parent_span_id=parent_span,
        name=None,
        start_ns=event.time_ns,
        agent_id=event.agent_id,
        task_call_id=task_call_id,
        model=loop.ctx.model,
        last_ns=event.time_ns,
    )
    prompt.agents[key] = agent
    if event.agent_id:
        loop.by_agent_id[event.agent_id] = (prompt, agent)
    if task_call_id:
        loop.by_task_call[task_call_id] = (prompt, agent)
    return prompt, agent


def on_subagent_started(loop: LoopState, event: SubagentStartInput) -> None:
    """``subagent.started`` names the agent (and says whether it runs in the background)."""
    call_id = event.tool_call_id
    hit = None
    if event.agent_id:
        hit = loop.by_agent_id.get(event.agent_id)
    if hit is None and call_id:
        hit = loop.by_task_call.get(call_id)
    if hit is None:
        prompt, agent = _start_subagent(loop, event, call_id, event.parent_agent_id)
    else:
        prompt, agent = hit
        if event.agent_id and event.agent_id not in loop.by_agent_id:
            loop.by_agent_id[event.agent_id] = hit
    agent.name = event.name or agent.name
    agent.display_name = event.display_name
    agent.description = event.description
    agent.model = event.model or agent.model
    agent.background = event.background
    agent.start_ns = min(agent.start_ns, event.time_ns)
    loop.touch(prompt, agent, event.time_ns)


def on_subagent_end(loop: LoopState, event: SubagentEndInput) -> None:
    call_id = event.tool_call_id
    hit = (loop.by_agent_id.get(event.agent_id) if event.agent_id else None) or (
        loop.by_task_call.get(call_id) if call_id else None
    )
    if hit is None:
        return
    prompt, agent = hit
    loop.touch(prompt, agent, event.time_ns)
    if event.failed:
        agent.status = Outcome.ERROR
        agent.error_type = agent.error_type or "SubagentError"
        agent.status_message = event.error or "sub-agent failed"
    elif event.cancelled:
        agent.status = Outcome.ERROR
        agent.error_type = "cancelled"
    close_agent(loop, prompt, agent, event.time_ns, None, incomplete=False, ended=event)
    loop.maybe_close_lingering(prompt)


def close_agent(
    loop: LoopState,
    prompt: Prompt,
    agent: Agent,
    time_ns: int,
    reason: IncompleteReason | None,
    incomplete: bool,
    ended: SubagentEndInput | None = None,
) -> None:
    """End ``agent`` with its open tools and turn; a sub-agent's run is handed on (the root's is the prompt's)."""
    if agent.closed:
        return
    agent.closed = True
    # Tools of this agent still open: cancelled (as the CLI's own export marks them).
    for call_id, tool in list(prompt.tools.items()):
        if tool.agent is agent:
            loop.end_tool(
                prompt,
                tool,
                max(time_ns, tool.start_ns),
                success=False,
                error_type="cancelled",
                message="never completed",
                incomplete=reason or "agent_ended",
            )
            del prompt.tools[call_id]
            loop.tool_owner.pop(call_id, None)
    turn = agent.turn
    if turn is not None:
        # A synthetic turn (old logs) simply ends with its last activity; a real one left open is unfinished.
        if turn.synthetic:
            loop.end_turn(prompt, agent, turn.last_ns)
        else:
            loop.end_turn(
                prompt, agent, time_ns, incomplete=(reason or "no_turn_end") if incomplete else None
            )
    if agent is prompt.root and (not prompt.rooted or agent.span_id == agent.parent_span_id):
        # The prompt's root is the PromptRun's; a rooted fold's root whose span is its own parent is the agent span
        # another fold hands on (rule A, parent-emitted: Codex), so this fold hands on none.
        return
    end = max(time_ns, agent.last_ns)
    loop.ended(prompt, end)
    loop.out.append(
        AgentRun(
            session_id=loop.ctx.session_id,
            provider=loop.ctx.provider or OWN_API,
            trace_id=prompt.trace_id,
            span_id=agent.span_id,
            parent_span_id=agent.parent_span_id,
            start_ns=agent.start_ns,
            end_ns=loop.not_before(end, agent.start_ns),
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
            output_text=loop.gate.text(agent.output_text, ContentKind.RESPONSES),
            system_text=agent.system_text,
            outcome=agent.status,
            error_type=agent.error_type,
            status_message=agent.status_message,
            incomplete_reason=(reason or "incomplete") if incomplete else None,
            source_offset=loop.offset,
        )
    )


def on_agent_selected(loop: LoopState, event: AgentSelectedInput) -> None:
    """The main agent is a custom one (``copilot --agent``): it names the roots from now on. A sub-agent's
    selection (it has an ``agentId``) is read from its ``subagent.started``."""
    if event.agent_id is not None or event.parent_tool_call_id is not None or event.name is None:
        return
    loop.ctx.agent_name = event.name
    if loop.current is not None:
        loop.current.root.name = event.name


# ---------------------------------------------------------------------------------------------- rule A, parent-emitted
def on_spawned(loop: LoopState, event: SpawnInput) -> None:
    """The parent's side of rule A: open the sub-agent's span under the tool call that started it. Its id,
    ``ids.span_id(session, "agent", agent_key)``, is the one the sub-agent's own log computes for its root (the
    session is the root thread's in both), so that fold's turns hang under this span."""
    call_id = event.task_call_id
    owner = loop.tool_owner.get(call_id) if call_id is not None else None
    prompt = owner if owner is not None else loop.ensure_prompt(event)
    key = event.agent_key
    if not key or key in prompt.agents:
        return
    tool = prompt.tools.get(call_id) if call_id is not None else None
    agent = Agent(
        span_id=ids.span_id(loop.ctx.session_id, "agent", key),
        parent_span_id=tool.span_id if tool is not None else prompt.root.span_id,
        name=event.name,
        start_ns=event.time_ns,
        agent_id=key,
        task_call_id=call_id,
        model=event.model or loop.ctx.model,
        last_ns=event.time_ns,
    )
    agent.input_text = loop.gate.text(event.content, ContentKind.PROMPTS)
    # Not routed to: no event of this log is the sub-agent's (its work is in its own log).
    prompt.agents[key] = agent
    loop.touch(prompt, prompt.root, event.time_ns)


def on_spawn_ended(loop: LoopState, event: SpawnEndInput) -> None:
    """The sub-agent of :func:`on_spawned` is done: its run is handed on (failed when it did not complete)."""
    for prompt in list(loop.prompts.values()):
        agent = prompt.agents.get(event.agent_key)
        if agent is None or agent.closed:
            continue
        if event.error_type is not None:
            agent.status = Outcome.ERROR
            agent.error_type = event.error_type
            agent.status_message = f"sub-agent ended: {event.error_type}"
        agent.last_ns = max(agent.last_ns, event.time_ns)
        close_agent(loop, prompt, agent, event.time_ns, None, incomplete=False)
        return
