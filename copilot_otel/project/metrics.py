"""Metric points: what each record adds to the instruments declared in :mod:`copilot_otel.semconv`.

Attributes are kept to low-cardinality keys (model, tool, outcome, reason): no session id, prompt or path, so
the series stay few however many sessions run.
"""

from __future__ import annotations

from typing import Any

from .. import semconv as sc
from ..activity import (
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
from ..records import Emission, Measurement
from . import genai

# Each instrument's kind, looked up once per name rather than per point (a backfill makes ~2 points an event).
_KIND = {spec.name: spec.instrument for spec in sc.METRICS}


def _m(out: list[Emission], name: str, value: float, attrs: dict[str, Any], offset: int) -> None:
    out.append(Measurement(name, value, attrs, _KIND[name], offset))


def session_event(out: list[Emission], event: str, offset: int) -> None:
    """A session started, resumed or shut down."""
    _m(out, "copilot_otel.session.count", 1, {sc.SESSION_EVENT: event}, offset)


def session_shutdown(out: list[Emission], rec: SessionShutdown) -> None:
    off = rec.source_offset
    for model, delta in rec.premium_delta:
        _m(out, "copilot_otel.premium_requests", delta, {genai.REQUEST_MODEL: model}, off)
    for model, delta in rec.nano_aiu_delta:
        _m(out, "copilot_otel.nano_aiu", delta, {genai.REQUEST_MODEL: model}, off)
    if rec.lines_added_delta > 0:
        _m(out, "github.copilot.code.lines_added", rec.lines_added_delta, {}, off)
    if rec.lines_removed_delta > 0:
        _m(out, "copilot_otel.code.lines_removed", rec.lines_removed_delta, {}, off)
    session_event(out, "shutdown", off)


def session_error(out: list[Emission], rec: SessionError) -> None:
    _m(out, "copilot_otel.errors", 1, {genai.ERROR_TYPE: rec.error_type}, rec.source_offset)


def session_warning(out: list[Emission], rec: SessionWarning) -> None:
    _m(out, "copilot_otel.session.warnings", 1, {sc.WARNING_TYPE: rec.warning_type}, rec.source_offset)


def abort(out: list[Emission], rec: Abort) -> None:
    _m(out, "copilot_otel.errors", 1, {genai.ERROR_TYPE: "aborted"}, rec.source_offset)


def detection(out: list[Emission], rec: Detection) -> None:
    _m(out, "copilot_otel.runaway.detections", 1, {sc.RUNAWAY_REASON: rec.reason}, rec.source_offset)


def model_call(out: list[Emission], rec: ModelCall, error_type: str | None) -> None:
    """``error_type``: the call's (:func:`.genai.model_call_error`), as its span has it."""
    off = rec.source_offset
    u = rec.usage
    seconds = (rec.server_ms / 1000.0) if rec.server_ms is not None else (rec.end_ns - rec.start_ns) / 1e9
    infer = {genai.PROVIDER: rec.provider, genai.REQUEST_MODEL: rec.model}
    op = {genai.OPERATION: genai.CHAT, **infer}
    if error_type is not None:
        op[genai.ERROR_TYPE] = error_type
    _m(out, "gen_ai.client.operation.duration", seconds, op, off)
    _m(out, "gen_ai.client.inference.duration", seconds, op, off)
    if rec.ttft_ms is not None:
        _m(out, "gen_ai.client.inference.time_to_first_chunk", rec.ttft_ms / 1000.0, infer, off)
    if u.calls or u.output:
        # A count the log did not give (None) adds no point: unknown is not zero.
        base = {genai.OPERATION: genai.CHAT, **infer}
        for token_type, count in (("input", u.input), ("output", u.output), ("reasoning", u.reasoning)):
            # Reasoning tokens are part of the output, counted again by their own type (as the CLI's metric).
            if count is not None:
                _m(out, "gen_ai.client.token.usage", count, {genai.TOKEN_TYPE: token_type, **base}, off)
        if u.input is not None:
            _m(out, "gen_ai.client.inference.operation.input_tokens", u.input, infer, off)
        if u.output is not None:
            _m(out, "gen_ai.client.inference.operation.output_tokens", u.output, infer, off)
        mod = {**infer, genai.TOKEN_MODALITY: "text"}
        for metric, value in (
            ("gen_ai.client.inference.usage.input_tokens", u.input),
            ("gen_ai.client.inference.usage.output_tokens", u.output),
            ("gen_ai.client.inference.usage.cache_read.input_tokens", u.cache_read),
            ("gen_ai.client.inference.usage.cache_write.input_tokens", u.cache_write),
        ):
            if value:
                _m(out, metric, value, mod, off)
    if u.cost is not None and u.cost and rec.initiator in (None, "user"):
        # Premium requests are billed per prompt the user sends (times the model's multiplier), not per
        # follow-up call of the agent loop; the span keeps every call's cost as the CLI's own export does.
        _m(out, "copilot_otel.premium_requests", u.cost, {genai.REQUEST_MODEL: rec.model}, off)
    if u.nano_aiu:
        _m(out, "copilot_otel.nano_aiu", u.nano_aiu, {genai.REQUEST_MODEL: rec.model}, off)


def tool_call(out: list[Emission], rec: ToolCall) -> None:
    off = rec.source_offset
    duration = (rec.end_ns - rec.start_ns) / 1e9
    attrs: dict[str, Any] = {genai.TOOL_NAME: rec.name, genai.TOOL_TYPE: genai.tool_type(rec)}
    if not rec.success:
        attrs[genai.ERROR_TYPE] = rec.error_type or "ToolError"
    _m(out, "gen_ai.execute_tool.duration", duration, attrs, off)
    _m(
        out,
        "github.copilot.tool.call.count",
        1,
        {genai.TOOL_NAME: rec.name, "success": str(rec.success).lower()},
        off,
    )
    _m(out, "github.copilot.tool.call.duration", duration, {genai.TOOL_NAME: rec.name}, off)


def agent_run(out: list[Emission], rec: AgentRun) -> None:
    attrs: dict[str, Any] = {genai.AGENT_NAME: rec.name or "agent"}
    if rec.error_type is not None:
        attrs[genai.ERROR_TYPE] = rec.error_type
    _m(out, "gen_ai.invoke_agent.duration", (rec.end_ns - rec.start_ns) / 1e9, attrs, rec.source_offset)


def prompt_run(out: list[Emission], rec: PromptRun) -> None:
    off = rec.source_offset
    attrs: dict[str, Any] = {genai.AGENT_NAME: rec.agent_name or "copilot"}
    if rec.error_type is not None:
        attrs[genai.ERROR_TYPE] = rec.error_type
    _m(out, "gen_ai.invoke_agent.duration", (rec.end_ns - rec.start_ns) / 1e9, attrs, off)
    _m(out, "github.copilot.agent.turn.count", rec.turn_count, {genai.OPERATION: genai.INVOKE_AGENT}, off)
    _m(out, "copilot_otel.prompt.count", 1, {sc.PROMPT_OUTCOME: rec.outcome}, off)
    _m(out, "copilot_otel.prompt.tool_calls", rec.tool_calls, {}, off)
