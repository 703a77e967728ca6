"""Turns and model calls: an agent's turn (``turn_start`` … ``turn_end``) and the call to the model it makes.

A turn's model call is built from what the log says of it (usage records, the assistant message, reasoning) and
handed on once it is complete: at the message in old logs without turn events (a synthetic turn), else when a
tool starts or the turn ends. A turn that ended with no answer and no usage waits in ``loop.unanswered``: the
event after it says whether the call failed (``session.error``), was cut (abort) or got no response. A model
call outside any turn (compaction's, a usage record after its turn) is a standalone one, under the agent.
"""

from __future__ import annotations

from ..model.activity import IncompleteReason, ModelCall, Outcome, ToolRequest, Turn, Usage
from ..model.inputs import AnswerInput, AttemptInput, ContentInput, Envelope, TurnInput, UsageInput
from ..model.inputs import Usage as UsageInfo
from ..settings.content import ContentKind
from .core import OWN_API, LoopState
from .foldstate import Agent, Prompt
from .foldstate import Turn as OpenTurn
from .runaway import check_burn, check_turns

__all__ = [
    "emit_chat",
    "end_turn",
    "flush_unanswered",
    "on_assistant_message",
    "on_attempt_failed",
    "on_reasoning",
    "on_turn_end",
    "on_turn_start",
    "on_usage_record",
    "standalone_chat",
]


def on_turn_start(loop: LoopState, event: TurnInput) -> None:
    prompt, agent = loop.route(event)
    agent.uses_turn_events = True
    if agent.turn is not None:
        # A turn_start without the previous turn_end: close the old one where its activity stopped.
        end_turn(loop, prompt, agent, agent.turn.last_ns, incomplete="no_turn_end")
    begin_turn(loop, prompt, agent, event, event.time_ns, synthetic=False)
    loop.touch(prompt, agent, event.time_ns)


def begin_turn(
    loop: LoopState,
    prompt: Prompt,
    agent: Agent,
    event: TurnInput,
    start_ns: int,
    synthetic: bool,
) -> OpenTurn:
    """Open the agent's next turn (``synthetic``: in a log without turn events, made up around a message)."""
    index = agent.turn_count
    agent.turn_count += 1
    prompt.turns_total += 1
    turn = OpenTurn(
        span_id=loop.sid("turn", prompt.key, str(agent.span_id), str(index)),
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
    loop.detect(prompt, check_turns(prompt, loop.settings.runaway, event.time_ns))
    return turn


def on_turn_end(loop: LoopState, event: TurnInput) -> None:
    prompt, agent = loop.route(event)
    loop.touch(prompt, agent, event.time_ns)
    if agent.turn is None:
        return
    end_turn(loop, prompt, agent, event.time_ns)


def end_turn(
    loop: LoopState, prompt: Prompt, agent: Agent, end_ns: int, incomplete: IncompleteReason | None = None
) -> None:
    """End the agent's open turn at ``end_ns`` (``incomplete``: cut short, why) and hand on its model call."""
    turn = agent.turn
    if turn is None:
        return
    agent.turn = None
    if not turn.chat.emitted:
        chat = turn.chat
        if incomplete is not None and chat.end_ns is None:
            emit_chat(loop, prompt, agent, turn, end_ns, Outcome.CANCELLED, None, None)
        elif chat.end_ns is None and chat.records == 0 and not turn.synthetic:
            # The turn ended without any model response or usage: the model call failed, or the user cut it.
            # The CLI says which right after turn_end (session.error with the provider's status, or abort).
            loop.unanswered.append((prompt, agent, turn, end_ns))
        else:
            emit_chat(loop, prompt, agent, turn, chat.end_ns or end_ns, Outcome.OK, None, None)
    end = max(end_ns, turn.last_ns)
    loop.ended(prompt, end)
    # Positional, in the record's field order: a backfill builds one per span, and matching keywords costs more
    # than building the record.
    loop.out.append(
        Turn(
            loop.ctx.session_id,  # session_id
            loop.ctx.provider or OWN_API,  # provider
            prompt.trace_id,  # trace_id
            turn.span_id,  # span_id
            agent.span_id,  # parent_span_id
            turn.index,  # index
            turn.turn_id,  # turn_id
            turn.interaction_id,  # interaction_id
            turn.start_ns,  # start_ns
            loop.not_before(end, turn.start_ns),  # end_ns
            turn.tool_calls,  # tool_calls
            agent.name,  # agent_name
            turn.synthetic,  # synthetic
            incomplete,  # incomplete_reason
            loop.offset,  # source_offset
        )
    )


def on_usage_record(loop: LoopState, event: UsageInput) -> None:
    """A usage record: the tokens, cost and timings of one model call, added to the open turn's call."""
    report = event.usage
    if report is None:
        return
    loop.ctx.saw_usage_records = True
    prompt, agent = loop.route(event)
    loop.touch(prompt, agent, event.time_ns)
    if report.provider:
        loop.ctx.provider = report.provider
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
    loop.detect(
        prompt, check_burn(prompt, loop.settings.runaway, event.time_ns, (u.input or 0) + (u.output or 0))
    )
    turn = agent.turn
    if turn is None or turn.chat.emitted:
        # Under the agent the envelope names; one found by its parentToolCallId alone has it under the root.
        owner = agent if event.agent_id is not None else prompt.root
        standalone_chat(
            loop, prompt, owner, event, u, report.model, report.duration_ms, "usage_record", report
        )
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


def standalone_chat(
    loop: LoopState,
    prompt: Prompt,
    agent: Agent,
    event: Envelope,
    usage: Usage,
    model: str | None,
    duration_ms: float | None,
    origin: str,
    record: UsageInfo | None = None,
) -> None:
    """A model call outside any turn (e.g. compaction): under the agent, not a turn."""
    start = event.time_ns - int((duration_ms or 0) * 1_000_000)
    turn = OpenTurn(
        span_id=loop.unique_sid(prompt, "chat-standalone", event.id),
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
    emit_chat(
        loop,
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


def on_attempt_failed(loop: LoopState, event: AttemptInput) -> None:
    """A failed attempt of a model call (the source retries it, or gives up and says so after): an ERROR model call
    of its own, from its request to its failure, under the span of the call it is an attempt of (the open turn's,
    which spans its attempts, as an HTTP client's request spans its resends), else under the agent. It neither ends
    the turn nor fails the agent: the retry may still answer."""
    prompt, agent = loop.route(event)
    loop.touch(prompt, agent, event.time_ns)
    turn = agent.turn
    attempt = OpenTurn(
        span_id=loop.unique_sid(prompt, "chat-attempt", event.id),
        index=-1,
        turn_id=turn.turn_id if turn is not None else None,
        interaction_id=prompt.interaction_id,
        start_ns=max(min(event.start_ns or event.time_ns, event.time_ns), prompt.start_ns),
        synthetic=True,
    )
    attempt.chat.model = event.model
    finish = agent.last_finish_reason
    emit_chat(
        loop,
        prompt,
        agent,
        attempt,
        event.time_ns,
        Outcome.ERROR,
        event.error_type,
        event.message,
        parent=loop.sid("chat", str(turn.span_id)) if turn is not None else agent.span_id,
        span_id=attempt.span_id,
        attempt=event.attempt,
    )
    agent.last_finish_reason = finish  # the call's answer says how it finished, not its failed attempt


def on_assistant_message(loop: LoopState, event: AnswerInput) -> None:
    """The model's answer: the end of the turn's model call (and, in old logs, of a synthetic turn)."""
    prompt, agent = loop.route(event)
    if agent.agent_id in loop.notified and not event.has_model_call_ids:
        # The CLI's own message after a notification (it reads the finished agent or shell): no model call, no
        # turn. Its tool calls are the CLI's too.
        loop.notified.discard(agent.agent_id)
        loop.touch(prompt, agent, event.time_ns)
        for request in event.tool_requests:
            if request.call_id is not None:
                loop.cli_calls.add(request.call_id)
        return
    turn = agent.turn
    if turn is None or (turn.synthetic and turn.chat.emitted):
        if turn is not None:
            end_turn(loop, prompt, agent, turn.last_ns)
        start = agent.last_ns if agent.last_ns else event.time_ns
        turn = begin_turn(loop, prompt, agent, event, min(start, event.time_ns), synthetic=True)
    loop.touch(prompt, agent, event.time_ns)
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
        reasoning = loop.gate.text(event.reasoning_text, ContentKind.REASONING, events=True)
        if reasoning is not None:
            chat.reasoning_text.append(reasoning)
    if event.has_tool_requests:
        chat.asked_for_tools = True
        if loop.settings.content.allows(ContentKind.TOOL_ARGUMENTS):
            chat.tool_requests.extend(event.tool_requests)
    if turn.synthetic:
        # Old logs: no turn events; the message is the end of the model call.
        emit_chat(loop, prompt, agent, turn, event.time_ns, Outcome.OK, None, None)


def on_reasoning(loop: LoopState, event: ContentInput) -> None:
    """A reasoning block of the current model call, decoded only when its capture switch is on."""
    text = loop.gate.text(event.content, ContentKind.REASONING, events=True)
    if text is None or (event.agent_id is None and not loop.prompts):
        return
    _, agent = loop.route(event)
    if agent.turn is not None:
        agent.turn.chat.reasoning_text.append(text)


def emit_chat(
    loop: LoopState,
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
    attempt: int | None = None,
) -> None:
    """Hand on the turn's model call, once: ended at ``end_ns`` with ``outcome`` (and why, when not OK;
    ``attempt``: a failed attempt's number, see :func:`on_attempt_failed`)."""
    chat = turn.chat
    if chat.emitted:
        return
    chat.emitted = True
    ctx = loop.ctx
    model = chat.model or chat.response_model or agent.model or ctx.model or "unknown"
    finish = chat.finish_reason
    if outcome is not Outcome.OK:
        finish = "error"
    elif finish is None and chat.end_ns is not None:
        finish = "tool_calls" if chat.asked_for_tools else "stop"
    gate = loop.gate
    text = (
        gate.text("\n".join(chat.message_text), ContentKind.RESPONSES, events=True)
        if chat.message_text
        else None
    )
    # Kept only when tool arguments may be captured (see on_assistant_message).
    requests = [
        ToolRequest(r.call_id, r.name, gate.json(r.arguments, ContentKind.TOOL_ARGUMENTS, events=True))
        for r in chat.tool_requests
    ]
    start = turn.start_ns
    end = loop.not_before(end_ns, start)
    loop.ended(prompt, end)
    # Positional, in the record's field order: a backfill builds one per span, and matching keywords costs more
    # than building the record.
    loop.out.append(
        ModelCall(
            ctx.session_id,  # session_id
            ctx.provider or OWN_API,  # provider
            prompt.trace_id,  # trace_id
            span_id or loop.sid("chat", str(turn.span_id)),  # span_id
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
            loop.offset,  # source_offset
            # The call's own (its usage record), else the session's for the main agent's calls.
            chat.reasoning_effort or (ctx.reasoning_effort if agent is prompt.root else None),
            attempt,  # attempt
        )
    )
    agent.usage.add(chat.usage)
    if finish:
        agent.last_finish_reason = finish
    if agent is prompt.root and chat.records:
        agent.model = model  # a prompt's model is the one its calls used


def flush_unanswered(
    loop: LoopState,
    prompt: Prompt | None = None,
    outcome: Outcome = Outcome.ERROR,
    error_type: str | None = None,
    message: str | None = None,
) -> None:
    """Emit the model calls of turns that ended unanswered (of ``prompt`` only, when given): failed with
    ``error_type`` and ``message``, cancelled, or, when nothing said why, without a response."""
    keep: list[tuple[Prompt, Agent, OpenTurn, int]] = []
    for entry in loop.unanswered:
        owner, agent, turn, end_ns = entry
        if prompt is not None and owner is not prompt:
            keep.append(entry)
        elif outcome is Outcome.ERROR and error_type is None:
            emit_chat(
                loop,
                owner,
                agent,
                turn,
                end_ns,
                Outcome.ERROR,
                "ModelCallError",
                "the model call returned no response",
            )
        else:
            emit_chat(loop, owner, agent, turn, end_ns, outcome, error_type, message)
    loop.unanswered = keep
