"""What the rest of the package names: the instrument table, our own health metrics and gauges, the names of the
records the daemon's actions and notices write, and the attribute keys whose values are unique per record.

The names themselves are declared once, in the vocabulary they belong to (:mod:`.genai`, :mod:`.copilot`,
:mod:`.ours`), or here for the daemon's own health; :mod:`copilot_otel.semconv` re-exports this module for the
modules that read it by that name.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

from opentelemetry.semconv._incubating.attributes import host_attributes, service_attributes, user_attributes
from opentelemetry.semconv._incubating.attributes.event_attributes import EVENT_NAME as _EVENT_NAME
from opentelemetry.semconv._incubating.metrics import gen_ai_metrics as gm

from ..model.records import Instrument
from . import actions, copilot, genai, ours
from . import openinference as oi
from .genai import (
    AGENT_NAME,
    ERROR_TYPE,
    OPERATION,
    PROVIDER,
    REQUEST_MODEL,
    TOKEN_MODALITY,
    TOKEN_TYPE,
    TOOL_NAME,
    TOOL_TYPE,
)
from .ours import PROMPT_OUTCOME, RUNAWAY_REASON, SESSION_EVENT, WARNING_TYPE

__all__ = [
    "AGENT_NAME",
    "ERROR_TYPE",
    "OPERATION",
    "PROMPT_OUTCOME",
    "PROVIDER",
    "REQUEST_MODEL",
    "RUNAWAY_REASON",
    "SESSION_EVENT",
    "TOKEN_MODALITY",
    "TOKEN_TYPE",
    "TOOL_NAME",
    "TOOL_TYPE",
    "WARNING_TYPE",
]

# The attributes every record of a session carries (its conversation and session ids): the dead-letter file and
# the exporter's log lines name a record's session by them.
CONVERSATION: Final = genai.CONVERSATION
SESSION_ID: Final = genai.SESSION_ID
# A log record's event name as an attribute too, for backends that predate the LogRecord's event_name field
# (the semantic conventions deprecate the attribute for that field; we write both).
EVENT_NAME: Final = _EVENT_NAME

# The resource every signal shares (telemetry.resource_attributes): who sends, from where.
SERVICE_NAME: Final = service_attributes.SERVICE_NAME
SERVICE_VERSION: Final = service_attributes.SERVICE_VERSION
SERVICE_INSTANCE_ID: Final = service_attributes.SERVICE_INSTANCE_ID
HOST_NAME: Final = host_attributes.HOST_NAME
USER_NAME: Final = user_attributes.USER_NAME

# Values that are unique per span or call: the wire encoder does not cache their encodings (it would only grow).
UNIQUE_PER_RECORD: Final = frozenset(
    {
        genai.RESPONSE_ID,
        genai.TOOL_CALL_ID,
        oi.TOOL_CALL_ID,
        copilot.INTERACTION_ID,
        genai.AGENT_ID,
        ours.AGENT_TASK_CALL_ID,
        ours.ARGUMENTS_HASH,
        copilot.USER_MESSAGE_INTERACTION_ID,
    }
)

# --- the instruments the records feed (project.metrics) ----------------------------------------------------
# Every metric name is here (the semconv package's metrics module imports the metrics API: the vocabulary modules,
# which light modules import for an attribute key, stay without it). GenAI: the client's operation duration and
# token usage are the package's; the agent and tool durations are the GenAI agent-span drafts' names, not in it.
OPERATION_DURATION: Final = gm.GEN_AI_CLIENT_OPERATION_DURATION
TOKEN_USAGE: Final = gm.GEN_AI_CLIENT_TOKEN_USAGE
INVOKE_AGENT_DURATION: Final = "gen_ai.invoke_agent.duration"
EXECUTE_TOOL_DURATION: Final = "gen_ai.execute_tool.duration"
# The Copilot CLI 1.0.102 export's names: its own, and its gen_ai.client.inference.* family (not in the semantic
# conventions).
TOOL_CALL_COUNT: Final = "github.copilot.tool.call.count"
TOOL_CALL_DURATION: Final = "github.copilot.tool.call.duration"
AGENT_TURN_COUNT: Final = "github.copilot.agent.turn.count"
LINES_ADDED: Final = "github.copilot.code.lines_added"
INFERENCE_DURATION: Final = "gen_ai.client.inference.duration"
INFERENCE_TIME_TO_FIRST_CHUNK: Final = "gen_ai.client.inference.time_to_first_chunk"
INFERENCE_INPUT_TOKENS: Final = "gen_ai.client.inference.operation.input_tokens"
INFERENCE_OUTPUT_TOKENS: Final = "gen_ai.client.inference.operation.output_tokens"
USAGE_INPUT_TOKENS: Final = "gen_ai.client.inference.usage.input_tokens"
USAGE_OUTPUT_TOKENS: Final = "gen_ai.client.inference.usage.output_tokens"
USAGE_CACHE_READ_TOKENS: Final = "gen_ai.client.inference.usage.cache_read.input_tokens"
USAGE_CACHE_WRITE_TOKENS: Final = "gen_ai.client.inference.usage.cache_write.input_tokens"
# Ours: the agent's work that no other vocabulary counts.
LINES_REMOVED: Final = "copilot_otel.code.lines_removed"
PROMPT_COUNT: Final = "copilot_otel.prompt.count"
PROMPT_TOOL_CALLS: Final = ours.PROMPT_TOOL_CALLS  # the histogram has the attribute's name
SESSION_COUNT: Final = "copilot_otel.session.count"
PREMIUM_REQUESTS: Final = "copilot_otel.premium_requests"
NANO_AIU: Final = "copilot_otel.nano_aiu"
COST: Final = "copilot_otel.cost"
ERRORS: Final = "copilot_otel.errors"
MODEL_CALL_RETRIES: Final = "copilot_otel.model_call.retries"
SESSION_WARNINGS: Final = "copilot_otel.session.warnings"
RUNAWAY_DETECTIONS: Final = "copilot_otel.runaway.detections"

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
        OPERATION_DURATION,
        "s",
        _H,
        "Duration of model calls (chat).",
        (OPERATION, PROVIDER, REQUEST_MODEL, ERROR_TYPE),
        DURATION_BUCKETS,
    ),
    MetricSpec(
        TOKEN_USAGE,
        "{token}",
        _H,
        "Tokens per model call, by token type.",
        (TOKEN_TYPE, OPERATION, PROVIDER, REQUEST_MODEL),
        TOKEN_BUCKETS,
    ),
    MetricSpec(
        INVOKE_AGENT_DURATION,
        "s",
        _H,
        "Duration of agent invocations (prompts and sub-agents).",
        (AGENT_NAME, ERROR_TYPE),
        AGENT_DURATION_BUCKETS,
    ),
    MetricSpec(
        EXECUTE_TOOL_DURATION,
        "s",
        _H,
        "Duration of tool executions.",
        (TOOL_NAME, TOOL_TYPE, ERROR_TYPE),
        DURATION_BUCKETS,
    ),
    MetricSpec(
        INFERENCE_DURATION,
        "s",
        _H,
        "Duration of model calls (CLI 1.0.102 name).",
        (OPERATION, *_INFER, ERROR_TYPE),
        DURATION_BUCKETS,
    ),
    MetricSpec(
        INFERENCE_TIME_TO_FIRST_CHUNK,
        "s",
        _H,
        "Time to the first streamed chunk.",
        _INFER,
        DURATION_BUCKETS,
    ),
    MetricSpec(
        INFERENCE_INPUT_TOKENS,
        "{token}",
        _H,
        "Input tokens per model call.",
        _INFER,
        TOKEN_BUCKETS,
    ),
    MetricSpec(
        INFERENCE_OUTPUT_TOKENS,
        "{token}",
        _H,
        "Output tokens per model call.",
        _INFER,
        TOKEN_BUCKETS,
    ),
    MetricSpec(
        USAGE_INPUT_TOKENS,
        "{token}",
        _C,
        "Input tokens (incl. cached).",
        (*_INFER, TOKEN_MODALITY),
    ),
    MetricSpec(
        USAGE_OUTPUT_TOKENS,
        "{token}",
        _C,
        "Output tokens.",
        (*_INFER, TOKEN_MODALITY),
    ),
    MetricSpec(
        USAGE_CACHE_READ_TOKENS,
        "{token}",
        _C,
        "Cache-read input tokens.",
        (*_INFER, TOKEN_MODALITY),
    ),
    MetricSpec(
        USAGE_CACHE_WRITE_TOKENS,
        "{token}",
        _C,
        "Cache-write input tokens.",
        (*_INFER, TOKEN_MODALITY),
    ),
    MetricSpec(
        TOOL_CALL_COUNT,
        "{call}",
        _C,
        "Tool calls by tool and outcome.",
        (TOOL_NAME, copilot.TOOL_SUCCESS),
    ),
    MetricSpec(TOOL_CALL_DURATION, "s", _H, "Tool call duration.", (TOOL_NAME,), DURATION_BUCKETS),
    MetricSpec(
        AGENT_TURN_COUNT,
        "{turn}",
        _H,
        "Turns (model calls) of the main agent per prompt.",
        (OPERATION,),
        TURN_BUCKETS,
    ),
    MetricSpec(LINES_ADDED, "{line}", _C, "Lines added by the agent (session.shutdown)."),
    MetricSpec(LINES_REMOVED, "{line}", _C, "Lines removed by the agent (session.shutdown)."),
    MetricSpec(PROMPT_COUNT, "{prompt}", _C, "Prompts finished, by outcome.", (PROMPT_OUTCOME,)),
    MetricSpec(
        PROMPT_TOOL_CALLS,
        "{tool_call}",
        _H,
        "Tool calls per prompt (all agents).",
        (),
        TOOL_CALL_BUCKETS,
    ),
    MetricSpec(
        SESSION_COUNT,
        "{session}",
        _C,
        "Session starts, resumes and shutdowns.",
        (SESSION_EVENT,),
    ),
    MetricSpec(
        PREMIUM_REQUESTS,
        "{request}",
        _C,
        "Premium requests (model call cost multiplier).",
        (REQUEST_MODEL,),
    ),
    MetricSpec(NANO_AIU, "{nano_aiu}", _C, "AI units used, in nano-AIU.", (REQUEST_MODEL,)),
    MetricSpec(
        COST,
        "{USD}",  # a curly unit: Prometheus names the series copilot_otel_cost_total, with no unit suffix
        _C,
        "Cost of model calls paid per token, from each call's tokens at the price table's prices, by provider "
        "and model (Copilot CLI's own calls are premium requests instead; a model not priced adds nothing).",
        (PROVIDER, REQUEST_MODEL),
    ),
    MetricSpec(ERRORS, "{error}", _C, "Session errors and aborts, by type.", (ERROR_TYPE,)),
    MetricSpec(
        MODEL_CALL_RETRIES,
        "{attempt}",
        _C,
        "Failed model-call attempts the CLI retried or gave up on, by model and status (error.type).",
        (REQUEST_MODEL, ERROR_TYPE),
    ),
    MetricSpec(
        SESSION_WARNINGS,
        "{warning}",
        _C,
        "Session warnings (a hook that crashed, tools a killed CLI left unfinished), by type.",
        (WARNING_TYPE,),
    ),
    MetricSpec(
        RUNAWAY_DETECTIONS,
        "{detection}",
        _C,
        "Runaway agent detections, by reason.",
        (RUNAWAY_REASON,),
    ),
)

# Every point of these also says which agent wrote its session (the projector adds ``copilot_otel.agent``), so one
# dashboard splits or filters any of them by agent.
METRICS = tuple(replace(spec, attributes=(*spec.attributes, ours.AGENT)) for spec in METRICS)
METRICS_BY_NAME = {m.name: m for m in METRICS}

# --- the daemon's own: gauges of the prompts in progress, and its health ------------------------------------
# Observed from the daemon (not produced by the fold): the daemon, replay and the status read these constants.
LIVE_PROMPTS: Final = "copilot_otel.live.prompts"
LIVE_MAX_TURNS: Final = "copilot_otel.live.max_turns"
LIVE_MAX_TOOL_CALLS: Final = "copilot_otel.live.max_tool_calls"
LIVE_MAX_DURATION: Final = "copilot_otel.live.max_duration"
LIVE_MAX_IDENTICAL_TOOL_CALLS: Final = "copilot_otel.live.max_identical_tool_calls"
LIVE_MAX_TOOL_ERROR_STREAK: Final = "copilot_otel.live.max_tool_error_streak"
LINES_READ: Final = "copilot_otel.lines.read"
LINES_DROPPED: Final = "copilot_otel.lines.dropped"
VALUES_DROPPED: Final = "copilot_otel.values.dropped"
EXPORT_SPANS: Final = "copilot_otel.export.spans"
EXPORT_RETRIES: Final = "copilot_otel.export.retries"
EXPORT_SHRUNK: Final = "copilot_otel.export.shrunk"
EXPORT_BACKLOG: Final = "copilot_otel.export.backlog"
EXPORT_LAST_SUCCESS: Final = "copilot_otel.export.last_success"
FILES_TRACKED: Final = "copilot_otel.files.tracked"
RUNAWAY_INTERRUPTED: Final = actions.INTERRUPTED_EVENT  # the counter has the event's name
NOTIFICATIONS: Final = "copilot_otel.notifications"
# Their attribute keys.
DROP_REASON: Final = "copilot_otel.drop.reason"
EXPORT_OUTCOME: Final = "copilot_otel.export.outcome"
NOTIFY_CHANNEL: Final = "copilot_otel.notify.channel"
NOTIFY_OUTCOME: Final = "copilot_otel.notify.outcome"

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
        "Values dropped from events kept (out of range, wrong shape; not_read: records of a kind not read), by reason.",
        _C,
    ),
    (EXPORT_SPANS, "{span}", "Spans exported, dead-lettered or rejected in a partial success.", _C),
    (EXPORT_RETRIES, "{retry}", "Export attempts retried.", _C),
    (EXPORT_SHRUNK, "{record}", "Records whose captured content was cut to fit in one export request.", _C),
    (EXPORT_BACKLOG, "{span}", "Spans waiting for the collector.", None),
    (EXPORT_LAST_SUCCESS, "s", "Unix time of the last accepted export.", None),
    (FILES_TRACKED, "{file}", "Session log files tracked.", None),
    (RUNAWAY_INTERRUPTED, "{interrupt}", "Runaway CLIs interrupted (or, dry run, not).", _C),
    (NOTIFICATIONS, "{notification}", "Runaway notifications, by channel and outcome.", _C),
)

# --- what the daemon's actions and notices are called (act, notify) ------------------------------------------
RUNAWAY_EVENT: Final = ours.RUNAWAY_EVENT
PROMPT_ERROR_EVENT: Final = "copilot_otel.prompt.error"

# --- doctor's probe: its test log event and test metric -----------------------------------------------------
DOCTOR_EVENT: Final = "copilot_otel.doctor"
DOCTOR_METRIC: Final = "copilot_otel.doctor.probes"
