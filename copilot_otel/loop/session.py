"""Session facts: what every prompt of the session carries (ids, versions, where it runs, its model) and its end.

These handlers keep the :class:`~copilot_otel.loop.foldstate.SessionContext` (the one piece of state a checkpoint
keeps) up to date: ``session.start`` and ``session.resume`` (a new CLI process, which also closes a prompt the
previous one left open), context and model changes, and ``session.shutdown``, whose cumulative totals are
handed on as the growth since the last shutdown said them. An imported transcript (``copilot sessions import``)
is counted here, not folded as work: its messages and tools ran elsewhere.
"""

from __future__ import annotations

from ..model.activity import (
    ModelTotals,
    SelfReport,
    SessionImported,
    SessionResumed,
    SessionShutdown,
    SessionStarted,
)
from ..model.inputs import (
    Context,
    ContextInput,
    ModelChangeInput,
    ResumeInput,
    SelfReportInput,
    SessionStartInput,
    ShutdownInput,
)
from ..model.timestamps import timestamp_ns
from .core import LoopState
from .foldstate import Prompt

__all__ = [
    "count_imported",
    "end_imported",
    "on_context_changed",
    "on_model_change",
    "on_self_report",
    "on_session_resume",
    "on_session_start",
    "on_shutdown",
]

# A session.start whose startTime is this much older than the event itself opens an imported transcript
# (``copilot sessions import`` dates the session by the transcript and stamps its events with the import's time;
# in every other log the two are milliseconds apart).
IMPORT_GAP_NS = 60 * 1_000_000_000


def on_session_start(loop: LoopState, event: SessionStartInput) -> None:
    ctx = loop.ctx
    ctx.session_id = event.session_id or ctx.session_id
    ctx.copilot_version = event.copilot_version or ctx.copilot_version
    ctx.producer = event.producer or ctx.producer
    ctx.model = event.selected_model or ctx.model
    ctx.reasoning_effort = event.reasoning_effort or ctx.reasoning_effort
    _apply_context(loop, event.context)
    started = timestamp_ns(event.start_time, event.dropped) if event.start_time is not None else None
    if started is not None and event.time_ns - started > IMPORT_GAP_NS > 0:
        # An imported transcript follows (until the next CLI process): dated by the transcript.
        ctx.imported = {"time_ns": started, "imported_ns": event.time_ns}
    loop.out.append(
        SessionStarted(ctx.session_id, event.time_ns, ctx.copilot_version, ctx.model, loop.offset)
    )


def on_session_resume(loop: LoopState, event: ResumeInput) -> None:
    if loop.prompts:
        # The previous process ended without closing its prompt (killed): close it where it stopped.
        for prompt in list(loop.prompts.values()):
            loop.close_prompt(prompt, prompt.last_ns, "session_resumed", incomplete=True)
    loop.notified.clear()  # a new CLI process: what the previous one was told does not carry over
    loop.ctx.model = event.selected_model or loop.ctx.model
    loop.ctx.reasoning_effort = event.reasoning_effort or loop.ctx.reasoning_effort
    _apply_context(loop, event.context)
    loop.out.append(SessionResumed(loop.ctx.session_id, event.time_ns, loop.offset))


def on_self_report(loop: LoopState, event: SelfReportInput) -> None:
    """The CLI's own word on its session: a title names it from then on (the session's title of every prompt's
    facts, as Copilot CLI's workspace summary does); its own accounting is handed on for show and report."""
    ctx = loop.ctx
    if event.title:
        ctx.title = event.title
    loop.out.append(
        SelfReport(
            session_id=ctx.session_id,
            time_ns=event.time_ns,
            title=event.title,
            cost_usd=event.cost_usd,
            api_duration_ms=event.api_duration_ms,
            api_duration_without_retries_ms=event.api_duration_without_retries_ms,
            tool_duration_ms=event.tool_duration_ms,
            duration_ms=event.duration_ms,
            model_costs=event.model_costs,
            source_offset=loop.offset,
        )
    )


def _apply_context(loop: LoopState, context: Context | None) -> None:
    if context is None:
        return
    ctx = loop.ctx
    ctx.cwd = context.cwd or ctx.cwd
    ctx.git_root = context.git_root or ctx.git_root
    ctx.repository = context.repository or ctx.repository
    ctx.branch = context.branch or ctx.branch
    ctx.head_commit = context.head_commit or ctx.head_commit


def on_context_changed(loop: LoopState, event: ContextInput) -> None:
    _apply_context(loop, event.context)


def on_model_change(loop: LoopState, event: ModelChangeInput) -> None:
    model = event.new_model
    if event.agent_id is None and not event.from_agent and event.says_reasoning_effort:
        loop.ctx.reasoning_effort = event.reasoning_effort  # None: the model's default from now on
    if model is None:
        return
    if event.agent_id is not None or event.from_agent:
        hit = loop.by_agent_id.get(event.agent_id or "")
        if hit is not None:
            hit[1].model = model
        return
    # The session's model from now on. A prompt that already ran keeps the model its calls used (a change between
    # prompts, from the SDK or a resume, belongs to the next one; see turns.emit_chat).
    loop.ctx.model = model


def on_shutdown(loop: LoopState, event: ShutdownInput) -> None:
    """The CLI process ends: its totals are handed on, and every prompt still open is closed."""
    loop.adopt_pending(event)
    ctx = loop.ctx
    prompt = loop.current
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
        if not ctx.saw_usage_records:
            # Logs without per-call usage records (CLI < 1.0.102): account cost from the session totals.
            _grown(loop, premium_delta, m.model, f"premium:{m.model}", m.cost)
            _grown(loop, nano_delta, m.model, f"nano_aiu:{m.model}", m.nano_aiu)
    added, removed = event.lines_added or 0, event.lines_removed or 0
    added_delta: list[tuple[str, float]] = []
    removed_delta: list[tuple[str, float]] = []
    _grown(loop, added_delta, "", "lines_added", added)
    _grown(loop, removed_delta, "", "lines_removed", removed)
    record = SessionShutdown(
        session_id=ctx.session_id,
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
        source_offset=loop.offset,
    )
    if prompt is not None:
        prompt.add_note(record)
        if not ctx.saw_usage_records:
            prompt.root.model = prompt.root.model or ctx.model
    loop.out.append(record)
    for open_prompt in list(loop.prompts.values()):
        incomplete = any(not a.closed for a in open_prompt.agents.values()) or _has_open_work(open_prompt)
        loop.close_prompt(
            open_prompt,
            max(open_prompt.last_ns, open_prompt.start_ns),
            "session_shutdown" if incomplete else None,
            incomplete=incomplete,
        )


def _grown(loop: LoopState, out: list[tuple[str, float]], label: str, key: str, total: float | None) -> None:
    """The growth of a cumulative session total since the last ``session.shutdown`` reported it."""
    if total is None:
        return
    delta = total - loop.ctx.reported_totals.get(key, 0.0)
    if delta > 0:
        out.append((label, delta))
        loop.ctx.reported_totals[key] = total


def _has_open_work(prompt: Prompt) -> bool:
    return bool(prompt.tools) or (prompt.root.turn is not None and not prompt.root.turn.synthetic)


# ---------------------------------------------------------------------------------------------- imported
def count_imported(loop: LoopState, what: str) -> None:
    """One more of ``what`` (``user_messages``, ``assistant_messages``, ``tool_calls``) of an imported transcript:
    it ran elsewhere, not as model calls or turns here. Which events those are is the translator's to say
    (Copilot's: :func:`copilot_otel.sources.copilot.translator.read_imported`)."""
    imported = loop.ctx.imported
    imported[what] = imported.get(what, 0) + 1


def end_imported(loop: LoopState) -> None:
    """The first event of real work ends the imported part: its counts are handed on."""
    imported, loop.ctx.imported = loop.ctx.imported, {}
    loop.out.append(
        SessionImported(
            session_id=loop.ctx.session_id,
            time_ns=imported.get("time_ns", 0),
            imported_ns=imported.get("imported_ns", 0),
            user_messages=imported.get("user_messages", 0),
            assistant_messages=imported.get("assistant_messages", 0),
            tool_calls=imported.get("tool_calls", 0),
            source_offset=loop.offset,
        )
    )
