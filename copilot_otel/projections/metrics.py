"""Metric points: what each record adds to the instruments declared in :mod:`.catalog`.

Attributes are kept to low-cardinality keys (model, tool, outcome, reason): no session id, prompt or path, so
the series stay few however many sessions run.
"""

from __future__ import annotations

from typing import Any

from ..model.activity import (
    Abort,
    AgentRun,
    Detection,
    ModelCall,
    PromptRun,
    SessionError,
    SessionShutdown,
    SessionWarning,
    ToolCall,
)
from ..model.records import Emission, Measurement
from . import catalog, copilot, genai, ours

# Each instrument's kind, looked up once per name rather than per point (a backfill makes ~2 points an event).
_KIND = {spec.name: spec.instrument for spec in catalog.METRICS}


def _m(out: list[Emission], name: str, value: float, attrs: dict[str, Any], offset: int) -> None:
    out.append(Measurement(name, value, attrs, _KIND[name], offset))


def measure(out: list[Emission], name: str, value: float, attrs: dict[str, Any], offset: int) -> None:
    """One point of the instrument ``name`` (a figure worked out beside the records: a call's cost)."""
    _m(out, name, value, attrs, offset)


def session_event(out: list[Emission], event: str, offset: int) -> None:
    """A session started, resumed or shut down."""
    _m(out, catalog.SESSION_COUNT, 1, {ours.SESSION_EVENT: event}, offset)


def session_shutdown(out: list[Emission], rec: SessionShutdown) -> None:
    off = rec.source_offset
    for model, delta in rec.premium_delta:
        _m(out, catalog.PREMIUM_REQUESTS, delta, {genai.REQUEST_MODEL: model}, off)
    for model, delta in rec.nano_aiu_delta:
        _m(out, catalog.NANO_AIU, delta, {genai.REQUEST_MODEL: model}, off)
    if rec.lines_added_delta > 0:
        _m(out, catalog.LINES_ADDED, rec.lines_added_delta, {}, off)
    if rec.lines_removed_delta > 0:
        _m(out, catalog.LINES_REMOVED, rec.lines_removed_delta, {}, off)
    session_event(out, "shutdown", off)


def session_error(out: list[Emission], rec: SessionError) -> None:
    _m(out, catalog.ERRORS, 1, {genai.ERROR_TYPE: rec.error_type}, rec.source_offset)


def session_warning(out: list[Emission], rec: SessionWarning) -> None:
    _m(out, catalog.SESSION_WARNINGS, 1, {ours.WARNING_TYPE: rec.warning_type}, rec.source_offset)


def abort(out: list[Emission], rec: Abort) -> None:
    _m(out, catalog.ERRORS, 1, {genai.ERROR_TYPE: "aborted"}, rec.source_offset)


def detection(out: list[Emission], rec: Detection) -> None:
    _m(out, catalog.RUNAWAY_DETECTIONS, 1, {ours.RUNAWAY_REASON: rec.reason}, rec.source_offset)


def model_call(out: list[Emission], rec: ModelCall, error_type: str | None) -> None:
    """``error_type``: the call's (:func:`.genai.model_call_error`), as its span has it. A failed attempt (its
    CLI retried it) is counted apart too, by model and status."""
    off = rec.source_offset
    if rec.attempt is not None:
        _m(
            out,
            catalog.MODEL_CALL_RETRIES,
            1,
            {genai.REQUEST_MODEL: rec.model, genai.ERROR_TYPE: error_type},
            off,
        )
    u = rec.usage
    seconds = (rec.server_ms / 1000.0) if rec.server_ms is not None else (rec.end_ns - rec.start_ns) / 1e9
    infer = {genai.PROVIDER: rec.provider, genai.REQUEST_MODEL: rec.model}
    op = {genai.OPERATION: genai.CHAT, **infer}
    if error_type is not None:
        op[genai.ERROR_TYPE] = error_type
    _m(out, catalog.OPERATION_DURATION, seconds, op, off)
    _m(out, catalog.INFERENCE_DURATION, seconds, op, off)
    if rec.ttft_ms is not None:
        _m(out, catalog.INFERENCE_TIME_TO_FIRST_CHUNK, rec.ttft_ms / 1000.0, infer, off)
    if u.calls or u.output:
        # A count the log did not give (None) adds no point: unknown is not zero.
        base = {genai.OPERATION: genai.CHAT, **infer}
        for token_type, count in (("input", u.input), ("output", u.output), ("reasoning", u.reasoning)):
            # Reasoning tokens are part of the output, counted again by their own type (as the CLI's metric).
            if count is not None:
                _m(out, catalog.TOKEN_USAGE, count, {genai.TOKEN_TYPE: token_type, **base}, off)
        if u.input is not None:
            _m(out, catalog.INFERENCE_INPUT_TOKENS, u.input, infer, off)
        if u.output is not None:
            _m(out, catalog.INFERENCE_OUTPUT_TOKENS, u.output, infer, off)
        mod = {**infer, genai.TOKEN_MODALITY: "text"}
        for metric, value in (
            (catalog.USAGE_INPUT_TOKENS, u.input),
            (catalog.USAGE_OUTPUT_TOKENS, u.output),
            (catalog.USAGE_CACHE_READ_TOKENS, u.cache_read),
            (catalog.USAGE_CACHE_WRITE_TOKENS, u.cache_write),
        ):
            if value:
                _m(out, metric, value, mod, off)
    if u.cost is not None and u.cost and rec.initiator in (None, "user"):
        # Premium requests are billed per prompt the user sends (times the model's multiplier), not per
        # follow-up call of the agent loop; the span keeps every call's cost as the CLI's own export does.
        _m(out, catalog.PREMIUM_REQUESTS, u.cost, {genai.REQUEST_MODEL: rec.model}, off)
    if u.nano_aiu:
        _m(out, catalog.NANO_AIU, u.nano_aiu, {genai.REQUEST_MODEL: rec.model}, off)


def tool_call(out: list[Emission], rec: ToolCall) -> None:
    off = rec.source_offset
    duration = (rec.end_ns - rec.start_ns) / 1e9
    attrs: dict[str, Any] = {genai.TOOL_NAME: rec.name, genai.TOOL_TYPE: genai.tool_type(rec)}
    if not rec.success:
        attrs[genai.ERROR_TYPE] = rec.error_type or "ToolError"
    _m(out, catalog.EXECUTE_TOOL_DURATION, duration, attrs, off)
    _m(
        out,
        catalog.TOOL_CALL_COUNT,
        1,
        {genai.TOOL_NAME: rec.name, copilot.TOOL_SUCCESS: str(rec.success).lower()},
        off,
    )
    _m(out, catalog.TOOL_CALL_DURATION, duration, {genai.TOOL_NAME: rec.name}, off)


def agent_run(out: list[Emission], rec: AgentRun) -> None:
    attrs: dict[str, Any] = {genai.AGENT_NAME: rec.name or "agent"}
    if rec.error_type is not None:
        attrs[genai.ERROR_TYPE] = rec.error_type
    _m(out, catalog.INVOKE_AGENT_DURATION, (rec.end_ns - rec.start_ns) / 1e9, attrs, rec.source_offset)


def prompt_run(out: list[Emission], rec: PromptRun, agent: str | None = None) -> None:
    """``agent``: the CLI that wrote the session, which names the main agent unless it is a custom one."""
    off = rec.source_offset
    attrs: dict[str, Any] = {genai.AGENT_NAME: rec.agent_name or agent or "copilot"}
    if rec.error_type is not None:
        attrs[genai.ERROR_TYPE] = rec.error_type
    _m(out, catalog.INVOKE_AGENT_DURATION, (rec.end_ns - rec.start_ns) / 1e9, attrs, off)
    _m(out, catalog.AGENT_TURN_COUNT, rec.turn_count, {genai.OPERATION: genai.INVOKE_AGENT}, off)
    _m(out, catalog.PROMPT_COUNT, 1, {ours.PROMPT_OUTCOME: rec.outcome}, off)
    _m(out, catalog.PROMPT_TOOL_CALLS, rec.tool_calls, {}, off)
