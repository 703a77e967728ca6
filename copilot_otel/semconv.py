"""Names we emit: metrics and the attribute keys shared by more than one module.

Spans carry several vocabularies at once so that every backend renders them (see docs/design.md): OTel GenAI
semconv (``gen_ai.*``), the Copilot CLI's own names (``github.copilot.*``), OpenInference for Phoenix
(``openinference.span.kind``, ``llm.*``, ``tool.*``), Langfuse (``langfuse.*``, ``session.id``), and our own
``copilot_otel.*`` namespace for facts nobody else names.
"""

from __future__ import annotations

from dataclasses import dataclass

from .records import Instrument

# --- attribute keys used across modules -------------------------------------------------------------------
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
CONVERSATION = "gen_ai.conversation.id"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
AGENT_NAME = "gen_ai.agent.name"
TOOL_NAME = "gen_ai.tool.name"
TOOL_TYPE = "gen_ai.tool.type"
TOKEN_TYPE = "gen_ai.token.type"
TOKEN_MODALITY = "gen_ai.token.modality"
ERROR_TYPE = "error.type"
OI_KIND = "openinference.span.kind"
SESSION_ID = "session.id"
RUNAWAY_REASON = "copilot_otel.runaway.reason"
WARNING_TYPE = "copilot_otel.warning.type"
PROMPT_OUTCOME = "copilot_otel.prompt.outcome"
SESSION_EVENT = "copilot_otel.session.event"
DROP_REASON = "copilot_otel.drop.reason"
EXPORT_OUTCOME = "copilot_otel.export.outcome"

# --- metrics ----------------------------------------------------------------------------------------------
DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)
AGENT_DURATION_BUCKETS = (0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 51.2, 102.4, 204.8, 409.6)
TURN_BUCKETS = (0, 5, 10, 25, 50, 75, 100, 250, 500, 750, 1000, 2500, 5000, 7500, 10000)
TOOL_CALL_BUCKETS = (0, 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000)


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One instrument: its name, unit, kind, help text, bucket advice and the attribute keys it may carry."""

    name: str
    unit: str
    instrument: Instrument
    description: str
    attributes: tuple[str, ...] = ()
    buckets: tuple[float, ...] | None = None


_C, _H = Instrument.COUNTER, Instrument.HISTOGRAM
_INFER = (PROVIDER, REQUEST_MODEL)

METRICS: tuple[MetricSpec, ...] = (
    MetricSpec(
        "gen_ai.client.operation.duration",
        "s",
        _H,
        "Duration of model calls (chat).",
        (OPERATION, PROVIDER, REQUEST_MODEL, ERROR_TYPE),
        DURATION_BUCKETS,
    ),
    MetricSpec(
        "gen_ai.client.token.usage",
        "{token}",
        _H,
        "Tokens per model call, by token type.",
        (TOKEN_TYPE, OPERATION, PROVIDER, REQUEST_MODEL),
        TOKEN_BUCKETS,
    ),
    MetricSpec(
        "gen_ai.invoke_agent.duration",
        "s",
        _H,
        "Duration of agent invocations (prompts and sub-agents).",
        (AGENT_NAME, ERROR_TYPE),
        AGENT_DURATION_BUCKETS,
    ),
    MetricSpec(
        "gen_ai.execute_tool.duration",
        "s",
        _H,
        "Duration of tool executions.",
        (TOOL_NAME, TOOL_TYPE, ERROR_TYPE),
        DURATION_BUCKETS,
    ),
    MetricSpec(
        "gen_ai.client.inference.duration",
        "s",
        _H,
        "Duration of model calls (CLI 1.0.102 name).",
        (OPERATION, *_INFER, ERROR_TYPE),
        DURATION_BUCKETS,
    ),
    MetricSpec(
        "gen_ai.client.inference.time_to_first_chunk",
        "s",
        _H,
        "Time to the first streamed chunk.",
        _INFER,
        DURATION_BUCKETS,
    ),
    MetricSpec(
        "gen_ai.client.inference.operation.input_tokens",
        "{token}",
        _H,
        "Input tokens per model call.",
        _INFER,
        TOKEN_BUCKETS,
    ),
    MetricSpec(
        "gen_ai.client.inference.operation.output_tokens",
        "{token}",
        _H,
        "Output tokens per model call.",
        _INFER,
        TOKEN_BUCKETS,
    ),
    MetricSpec(
        "gen_ai.client.inference.usage.input_tokens",
        "{token}",
        _C,
        "Input tokens (incl. cached).",
        (*_INFER, TOKEN_MODALITY),
    ),
    MetricSpec(
        "gen_ai.client.inference.usage.output_tokens",
        "{token}",
        _C,
        "Output tokens.",
        (*_INFER, TOKEN_MODALITY),
    ),
    MetricSpec(
        "gen_ai.client.inference.usage.cache_read.input_tokens",
        "{token}",
        _C,
        "Cache-read input tokens.",
        (*_INFER, TOKEN_MODALITY),
    ),
    MetricSpec(
        "gen_ai.client.inference.usage.cache_write.input_tokens",
        "{token}",
        _C,
        "Cache-write input tokens.",
        (*_INFER, TOKEN_MODALITY),
    ),
    MetricSpec(
        "github.copilot.tool.call.count",
        "{call}",
        _C,
        "Tool calls by tool and outcome.",
        (TOOL_NAME, "success"),
    ),
    MetricSpec(
        "github.copilot.tool.call.duration", "s", _H, "Tool call duration.", (TOOL_NAME,), DURATION_BUCKETS
    ),
    MetricSpec(
        "github.copilot.agent.turn.count",
        "{turn}",
        _H,
        "Turns (model calls) of the main agent per prompt.",
        (OPERATION,),
        TURN_BUCKETS,
    ),
    MetricSpec(
        "github.copilot.code.lines_added", "{line}", _C, "Lines added by the agent (session.shutdown)."
    ),
    MetricSpec(
        "copilot_otel.code.lines_removed", "{line}", _C, "Lines removed by the agent (session.shutdown)."
    ),
    MetricSpec(
        "copilot_otel.prompt.count", "{prompt}", _C, "Prompts finished, by outcome.", (PROMPT_OUTCOME,)
    ),
    MetricSpec(
        "copilot_otel.prompt.tool_calls",
        "{tool_call}",
        _H,
        "Tool calls per prompt (all agents).",
        (),
        TOOL_CALL_BUCKETS,
    ),
    MetricSpec(
        "copilot_otel.session.count",
        "{session}",
        _C,
        "Session starts, resumes and shutdowns.",
        (SESSION_EVENT,),
    ),
    MetricSpec(
        "copilot_otel.premium_requests",
        "{request}",
        _C,
        "Premium requests (model call cost multiplier).",
        (REQUEST_MODEL,),
    ),
    MetricSpec("copilot_otel.nano_aiu", "{nano_aiu}", _C, "AI units used, in nano-AIU.", (REQUEST_MODEL,)),
    MetricSpec("copilot_otel.errors", "{error}", _C, "Session errors and aborts, by type.", (ERROR_TYPE,)),
    MetricSpec(
        "copilot_otel.session.warnings",
        "{warning}",
        _C,
        "Session warnings (a hook that crashed, tools a killed CLI left unfinished), by type.",
        (WARNING_TYPE,),
    ),
    MetricSpec(
        "copilot_otel.runaway.detections",
        "{detection}",
        _C,
        "Runaway agent detections, by reason.",
        (RUNAWAY_REASON,),
    ),
)

METRICS_BY_NAME = {m.name: m for m in METRICS}

# Gauges observed from the daemon (not produced by the fold), and the self-health metrics: the one place that names
# them (the daemon, replay and the status read these constants).
LIVE_PROMPTS = "copilot_otel.live.prompts"
LIVE_MAX_TURNS = "copilot_otel.live.max_turns"
LIVE_MAX_TOOL_CALLS = "copilot_otel.live.max_tool_calls"
LIVE_MAX_DURATION = "copilot_otel.live.max_duration"
LIVE_MAX_IDENTICAL_TOOL_CALLS = "copilot_otel.live.max_identical_tool_calls"
LIVE_MAX_TOOL_ERROR_STREAK = "copilot_otel.live.max_tool_error_streak"
LINES_READ = "copilot_otel.lines.read"
LINES_DROPPED = "copilot_otel.lines.dropped"
VALUES_DROPPED = "copilot_otel.values.dropped"
EXPORT_BACKLOG = "copilot_otel.export.backlog"
EXPORT_LAST_SUCCESS = "copilot_otel.export.last_success"
FILES_TRACKED = "copilot_otel.files.tracked"

# Gauges observed from the daemon: name, unit, description.
LIVE_GAUGES: tuple[tuple[str, str, str], ...] = (
    (LIVE_PROMPTS, "{prompt}", "Prompts in progress now."),
    (LIVE_MAX_TURNS, "{turn}", "Most turns of any prompt in progress."),
    (LIVE_MAX_TOOL_CALLS, "{tool_call}", "Most tool calls of any prompt in progress."),
    (LIVE_MAX_DURATION, "s", "Longest running prompt in progress, in seconds."),
    (LIVE_MAX_IDENTICAL_TOOL_CALLS, "{call}", "Longest streak of identical tool calls in progress."),
    (LIVE_MAX_TOOL_ERROR_STREAK, "{error}", "Longest streak of failed tool calls in progress."),
)
HEALTH_METRICS: tuple[tuple[str, str, str, Instrument | None], ...] = (
    (LINES_READ, "{line}", "Log lines read.", _C),
    (LINES_DROPPED, "{line}", "Log lines skipped, by reason.", _C),
    (
        VALUES_DROPPED,
        "{value}",
        "Values out of range dropped from events kept, by reason.",
        _C,
    ),
    ("copilot_otel.export.spans", "{span}", "Spans exported or dead-lettered.", _C),
    ("copilot_otel.export.retries", "{retry}", "Export attempts retried.", _C),
    (EXPORT_BACKLOG, "{span}", "Spans waiting for the collector.", None),
    (EXPORT_LAST_SUCCESS, "s", "Unix time of the last accepted export.", None),
    (FILES_TRACKED, "{file}", "Session log files tracked.", None),
    ("copilot_otel.runaway.interrupted", "{interrupt}", "Runaway CLIs interrupted (or, dry run, not).", _C),
    ("copilot_otel.notifications", "{notification}", "Runaway notifications, by channel and outcome.", _C),
)
