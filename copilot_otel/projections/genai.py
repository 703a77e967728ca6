"""OpenTelemetry GenAI semantic conventions (``gen_ai.*``, ``error.type``, ``session.id``) for each record.

Names come from ``opentelemetry-semantic-conventions`` wherever it defines them, so a semconv upgrade is a
dependency bump; the few it does not define yet are declared here, once. Spec: the GenAI agent and model spans
(``invoke_agent``, ``chat``, ``execute_tool``) and their usage attributes (docs/design.md lists the version).
"""

from __future__ import annotations

from typing import Any, Final

from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as g
from opentelemetry.semconv._incubating.attributes.process_attributes import PROCESS_EXIT_CODE
from opentelemetry.semconv._incubating.attributes.session_attributes import SESSION_ID
from opentelemetry.semconv.attributes.error_attributes import ERROR_TYPE
from opentelemetry.semconv.attributes.exception_attributes import EXCEPTION_MESSAGE, EXCEPTION_TYPE

from ..model.activity import (
    AgentRun,
    HookRun,
    ModelCall,
    Outcome,
    PermissionWait,
    PromptRun,
    ToolCall,
    Turn,
    Usage,
)

OPERATION: Final = g.GEN_AI_OPERATION_NAME
PROVIDER: Final = g.GEN_AI_PROVIDER_NAME
CONVERSATION: Final = g.GEN_AI_CONVERSATION_ID
REQUEST_MODEL: Final = g.GEN_AI_REQUEST_MODEL
RESPONSE_MODEL: Final = g.GEN_AI_RESPONSE_MODEL
AGENT_NAME: Final = g.GEN_AI_AGENT_NAME
TOOL_NAME: Final = g.GEN_AI_TOOL_NAME
TOOL_TYPE: Final = g.GEN_AI_TOOL_TYPE
TOKEN_TYPE: Final = g.GEN_AI_TOKEN_TYPE
TOOL_CALL_ARGUMENTS: Final = g.GEN_AI_TOOL_CALL_ARGUMENTS
TOOL_CALL_RESULT: Final = g.GEN_AI_TOOL_CALL_RESULT
INPUT_MESSAGES: Final = g.GEN_AI_INPUT_MESSAGES
OUTPUT_MESSAGES: Final = g.GEN_AI_OUTPUT_MESSAGES
SYSTEM_INSTRUCTIONS: Final = g.GEN_AI_SYSTEM_INSTRUCTIONS
AGENT_ID: Final = g.GEN_AI_AGENT_ID
RESPONSE_ID: Final = g.GEN_AI_RESPONSE_ID
FINISH_REASONS: Final = g.GEN_AI_RESPONSE_FINISH_REASONS
__all__ = [
    "CONVERSATION",
    "ERROR_TYPE",
    "EXCEPTION_MESSAGE",
    "EXCEPTION_TYPE",
    "PROCESS_EXIT_CODE",
    "SESSION_ID",
]

# Not (yet) in the package: the token modality of the CLI's usage metrics, and the reasoning effort a call was
# made with (the name the CLI's own export writes).
TOKEN_MODALITY: Final = "gen_ai.token.modality"
REASONING_LEVEL: Final = "gen_ai.request.reasoning.level"

# Event names (not in the package): a failed operation's exception event on its span, and a chat's details log
# event carrying its captured messages.
EXCEPTION_EVENT: Final = "gen_ai.client.operation.exception"
DETAILS_EVENT: Final = "gen_ai.client.inference.operation.details"

# Operation names (gen_ai.operation.name values).
CHAT: Final = "chat"
EXECUTE_TOOL: Final = "execute_tool"
INVOKE_AGENT: Final = "invoke_agent"


# The names the hot paths use, looked up once (a module attribute costs a lookup per span otherwise).
USAGE_INPUT: Final = g.GEN_AI_USAGE_INPUT_TOKENS
USAGE_OUTPUT: Final = g.GEN_AI_USAGE_OUTPUT_TOKENS
USAGE_CACHE_READ: Final = g.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS
USAGE_CACHE_CREATION: Final = g.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS
USAGE_REASONING: Final = g.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS
TIME_TO_FIRST_CHUNK: Final = g.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK
TOOL_CALL_ID: Final = g.GEN_AI_TOOL_CALL_ID
TOOL_DESCRIPTION: Final = g.GEN_AI_TOOL_DESCRIPTION

# Each function below starts a span's attributes (GenAI first); the other vocabularies add theirs.


def common(operation: str | None, provider: str, session_id: str) -> dict[str, Any]:
    """What every span of a session carries: the operation, the provider and the conversation (= session)."""
    attrs: dict[str, Any] = {PROVIDER: provider, CONVERSATION: session_id, SESSION_ID: session_id}
    if operation:
        attrs[OPERATION] = operation
    return attrs


def usage(attrs: dict[str, Any], u: Usage) -> None:
    """Token counts under the package's names (cache writes: ``cache_creation``, the only name it defines;
    reasoning output tokens only when a call reported them)."""
    for key, value in (
        (USAGE_INPUT, u.input),
        (USAGE_OUTPUT, u.output),
        (USAGE_CACHE_READ, u.cache_read),
        (USAGE_CACHE_CREATION, u.cache_write),
    ):
        if value is not None:  # unknown: absent, never 0
            attrs[key] = value
    if u.reasoning is not None:
        attrs[USAGE_REASONING] = u.reasoning


def usage_counts(attrs: dict[str, Any], u: Usage) -> None:
    """Input and output tokens only, where known (a prompt's log event)."""
    if u.input is not None:
        attrs[USAGE_INPUT] = u.input
    if u.output is not None:
        attrs[USAGE_OUTPUT] = u.output


def model_call(rec: ModelCall, error_type: str | None) -> dict[str, Any]:
    """A chat span's GenAI attributes; ``error_type`` is :func:`model_call_error` of ``rec`` (the caller has it,
    the metrics need it too)."""
    u = rec.usage
    attrs: dict[str, Any] = {
        OPERATION: CHAT,
        PROVIDER: rec.provider,
        CONVERSATION: rec.session_id,
        SESSION_ID: rec.session_id,
        REQUEST_MODEL: rec.model,
        RESPONSE_MODEL: rec.response_model,
    }
    usage(attrs, u)
    if rec.reasoning_effort is not None:
        attrs[REASONING_LEVEL] = rec.reasoning_effort
    if rec.response_id is not None:
        attrs[RESPONSE_ID] = rec.response_id
    if rec.finish_reason:
        attrs[FINISH_REASONS] = (rec.finish_reason,)
    if rec.ttft_ms is not None:
        attrs[TIME_TO_FIRST_CHUNK] = rec.ttft_ms / 1000.0
    if rec.agent_name:
        attrs[AGENT_NAME] = rec.agent_name
    if error_type is not None:
        attrs[ERROR_TYPE] = error_type
    return attrs


def model_call_error(rec: ModelCall) -> str | None:
    """The call's ``error.type``: ``cancelled`` when the user aborted it, else why it failed (None: it did not)."""
    if rec.outcome is Outcome.CANCELLED:
        return "cancelled"
    if rec.outcome is Outcome.ERROR:
        return rec.error_type or "ModelCallError"
    return None


def tool_type(rec: ToolCall) -> str:
    """``extension`` for an MCP server's or a CLI extension's tool, ``function`` for the CLI's own."""
    return "extension" if rec.mcp_server or rec.external else "function"


def tool_call(rec: ToolCall) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        OPERATION: EXECUTE_TOOL,
        PROVIDER: rec.provider,
        CONVERSATION: rec.session_id,
        SESSION_ID: rec.session_id,
        TOOL_NAME: rec.name,
        TOOL_CALL_ID: rec.call_id,
        TOOL_TYPE: tool_type(rec),
    }
    if rec.description is not None:
        attrs[TOOL_DESCRIPTION] = rec.description
    if rec.agent_name:
        attrs[AGENT_NAME] = rec.agent_name
    if not rec.success:
        attrs[ERROR_TYPE] = rec.error_type or "ToolError"
    if rec.exit_code is not None:
        attrs[PROCESS_EXIT_CODE] = rec.exit_code
    if rec.arguments_json is not None:
        attrs[TOOL_CALL_ARGUMENTS] = rec.arguments_json
    return attrs


def turn(rec: Turn) -> dict[str, Any]:
    attrs: dict[str, Any] = {PROVIDER: rec.provider, CONVERSATION: rec.session_id, SESSION_ID: rec.session_id}
    if rec.agent_name:
        attrs[AGENT_NAME] = rec.agent_name
    return attrs


def agent_run(rec: AgentRun) -> dict[str, Any]:
    attrs = common(INVOKE_AGENT, rec.provider, rec.session_id)
    if rec.name is not None:
        attrs[AGENT_NAME] = rec.name
    if rec.agent_id is not None:
        attrs[AGENT_ID] = rec.agent_id
    if rec.description is not None:
        attrs[g.GEN_AI_AGENT_DESCRIPTION] = rec.description
    if rec.model is not None:
        attrs[REQUEST_MODEL] = rec.model
    usage(attrs, rec.usage)
    if rec.error_type:
        attrs[ERROR_TYPE] = rec.error_type
    return attrs


def prompt_run(rec: PromptRun) -> dict[str, Any]:
    attrs = common(INVOKE_AGENT, rec.provider, rec.session_id)
    if rec.agent_name is not None:
        attrs[AGENT_NAME] = rec.agent_name
    if rec.model is not None:
        attrs[REQUEST_MODEL] = rec.model
    if rec.reasoning_effort is not None:
        attrs[REASONING_LEVEL] = rec.reasoning_effort
    usage(attrs, rec.usage)
    if rec.last_finish_reason:
        attrs[FINISH_REASONS] = (rec.last_finish_reason,)
    if rec.error_type:
        attrs[ERROR_TYPE] = rec.error_type
    return attrs


def hook_run(rec: HookRun) -> dict[str, Any]:
    """A hook run: no GenAI operation; the tool call it belongs to, and why it failed (the error's class, e.g.
    ``HookTimeoutError``, else ``HookError``)."""
    attrs = common(None, rec.provider, rec.session_id)
    if rec.tool_call_id is not None:
        attrs[TOOL_CALL_ID] = rec.tool_call_id
    if rec.tool_name is not None:
        attrs[TOOL_NAME] = rec.tool_name
    if not rec.success:
        attrs[ERROR_TYPE] = hook_error_type(rec)
    return attrs


def hook_error_type(rec: HookRun) -> str:
    """``HookTimeoutError`` from ``HookTimeoutError: Hook command timed out …``; ``HookError`` otherwise."""
    head = (rec.error_message or "").split(":", 1)[0]
    return head if head.isidentifier() else "HookError"


def permission(rec: PermissionWait) -> dict[str, Any]:
    attrs = common(None, rec.provider, rec.session_id)
    if rec.tool_call_id is not None:
        attrs[TOOL_CALL_ID] = rec.tool_call_id
    if rec.tool_name is not None:
        attrs[TOOL_NAME] = rec.tool_name
    return attrs
