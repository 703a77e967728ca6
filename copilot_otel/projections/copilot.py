"""The Copilot CLI's own names (``github.copilot.*``), as its OpenTelemetry export writes them.

Kept so that dashboards and queries built on the CLI's native export read our data too; spec:
``native-otel.md`` (the CLI 1.0.102 export) and the CLI's event fields they mirror.
"""

from __future__ import annotations

from typing import Any, Final

from ..model.activity import (
    Abort,
    AgentRun,
    Compaction,
    ModelCall,
    Notification,
    PermissionWait,
    PromptRun,
    SessionError,
    SessionShutdown,
    SkillInvoked,
    ToolCall,
    Truncation,
    Turn,
    Usage,
    UserMessage,
)

TURN_ID: Final = "github.copilot.turn_id"
INTERACTION_ID: Final = "github.copilot.interaction_id"
TURN_COUNT: Final = "github.copilot.turn_count"
ERROR_STATUS_CODE: Final = "github.copilot.error_status_code"
ABORT_REASON: Final = "github.copilot.abort_reason"
USER_MESSAGE_INTERACTION_ID: Final = "github.copilot.user.message.interaction_id"
# The tool-call counter's outcome key, unprefixed as the CLI's own metric has it.
TOOL_SUCCESS: Final = "success"

# Span event names.
USER_MESSAGE_EVENT: Final = "github.copilot.user.message"
SHUTDOWN_EVENT: Final = "github.copilot.session.shutdown"
ABORT_EVENT: Final = "github.copilot.session.abort"
COMPACTION_START_EVENT: Final = "github.copilot.session.compaction_start"
COMPACTION_COMPLETE_EVENT: Final = "github.copilot.session.compaction_complete"
TRUNCATION_EVENT: Final = "github.copilot.session.truncation"
SKILL_EVENT: Final = "github.copilot.skill.invoked"
NOTIFICATION_EVENT: Final = "github.copilot.system.notification"


def _put(attrs: dict[str, Any], key: str, value: Any) -> None:
    if value is not None:
        attrs[key] = value


def cost(attrs: dict[str, Any], u: Usage) -> None:
    if u.cost is not None:
        attrs["github.copilot.cost"] = u.cost
    if u.nano_aiu:
        attrs["github.copilot.nano_aiu"] = u.nano_aiu


def model_call(attrs: dict[str, Any], rec: ModelCall) -> None:
    cost(attrs, rec.usage)
    if rec.server_ms is not None:
        attrs["github.copilot.server_duration"] = rec.server_ms
    if rec.initiator is not None:
        attrs["github.copilot.initiator"] = rec.initiator
    if rec.turn_id is not None:
        attrs[TURN_ID] = rec.turn_id
    if rec.interaction_id is not None:
        attrs[INTERACTION_ID] = rec.interaction_id


def tool_call(attrs: dict[str, Any], rec: ToolCall) -> None:
    if rec.error_code is not None:
        attrs["github.copilot.error_code"] = rec.error_code


def turn(attrs: dict[str, Any], rec: Turn) -> None:
    if rec.turn_id is not None:
        attrs[TURN_ID] = rec.turn_id
    if rec.interaction_id is not None:
        attrs[INTERACTION_ID] = rec.interaction_id


def agent_run(attrs: dict[str, Any], rec: AgentRun) -> None:
    attrs[TURN_COUNT] = rec.turn_count
    cost(attrs, rec.usage)


def prompt_run(attrs: dict[str, Any], rec: PromptRun) -> None:
    attrs[TURN_COUNT] = rec.turn_count
    cost(attrs, rec.usage)
    _put(attrs, INTERACTION_ID, rec.interaction_id)
    facts = rec.facts
    _put(attrs, "github.copilot.git.repo", facts.repository)
    _put(attrs, "github.copilot.git.branch", facts.branch)
    _put(attrs, "github.copilot.git.sha", facts.head_commit)
    attrs["github.copilot.agent.type"] = "custom" if rec.agent_name is not None else "builtin"


def shutdown_totals(rec: SessionShutdown) -> dict[str, Any]:
    """``session.shutdown``'s totals (the span event's and the log event's attributes)."""
    attrs: dict[str, Any] = {}
    _put(attrs, "copilot_otel.shutdown.type", rec.shutdown_type)
    _put(attrs, "github.copilot.total_premium_requests", rec.premium_requests)
    _put(attrs, "github.copilot.total_nano_aiu", rec.nano_aiu)
    _put(attrs, "github.copilot.total_api_duration_ms", rec.api_duration_ms)
    attrs["github.copilot.lines_added"] = rec.lines_added
    attrs["github.copilot.lines_removed"] = rec.lines_removed
    attrs["github.copilot.files_modified_count"] = rec.files_modified
    for m in rec.models:
        prefix = f"copilot_otel.session.models.{m.model}."
        _put(attrs, prefix + "input_tokens", m.input_tokens)
        _put(attrs, prefix + "output_tokens", m.output_tokens)
        _put(attrs, prefix + "cache_read_tokens", m.cache_read_tokens)
        _put(attrs, prefix + "cache_write_tokens", m.cache_write_tokens)
        _put(attrs, prefix + "requests", m.requests)
    return attrs


def compaction(rec: Compaction) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    _put(attrs, "github.copilot.pre_tokens", rec.pre_tokens)
    _put(attrs, "github.copilot.post_tokens", rec.post_tokens)
    _put(attrs, "github.copilot.tokens_removed", rec.tokens_removed)
    _put(attrs, "github.copilot.messages_removed", rec.messages_removed)
    _put(attrs, "github.copilot.current_tokens", rec.current_tokens)
    _put(attrs, "github.copilot.token_limit", rec.token_limit)
    _put(attrs, "github.copilot.compaction.trigger", rec.trigger)
    _put(attrs, "github.copilot.compaction.success", rec.success)
    return attrs


def truncation(rec: Truncation) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    _put(attrs, "github.copilot.token_limit", rec.token_limit)
    _put(attrs, "github.copilot.pre_tokens", rec.pre_tokens)
    _put(attrs, "github.copilot.post_tokens", rec.post_tokens)
    _put(attrs, "github.copilot.tokens_removed", rec.tokens_removed)
    _put(attrs, "github.copilot.messages_removed", rec.messages_removed)
    return attrs


def skill(rec: SkillInvoked) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    _put(attrs, "github.copilot.skill.name", rec.name)
    _put(attrs, "github.copilot.skill.plugin_name", rec.plugin_name)
    _put(attrs, "github.copilot.skill.trigger", rec.trigger)
    _put(attrs, "github.copilot.skill.source", rec.source)
    return attrs


def user_message(rec: UserMessage) -> dict[str, Any]:
    attrs: dict[str, Any] = {"github.copilot.user.message.source": rec.source}
    _put(attrs, USER_MESSAGE_INTERACTION_ID, rec.interaction_id)
    _put(attrs, "github.copilot.user.message.turn_id", rec.turn_id)
    return attrs


def abort(rec: Abort) -> dict[str, Any]:
    return {ABORT_REASON: rec.reason}


def error(attrs: dict[str, Any], rec: SessionError) -> None:
    attrs["github.copilot.error_type"] = rec.error_type
    _put(attrs, ERROR_STATUS_CODE, rec.status_code)


def notification(rec: Notification) -> dict[str, Any]:
    """As the CLI's own export names a notification's facts (its text is content and left out)."""
    attrs: dict[str, Any] = {"github.copilot.system.notification.type": rec.kind}
    _put(attrs, "github.copilot.system.notification.agent_id", rec.agent_id)
    _put(attrs, "github.copilot.system.notification.agent_type", rec.agent_type)
    _put(attrs, "github.copilot.system.notification.shell_id", rec.shell_id)
    _put(attrs, "github.copilot.system.notification.exit_code", rec.exit_code)
    return attrs


def permission(attrs: dict[str, Any], rec: PermissionWait) -> None:
    _put(attrs, "github.copilot.permission.kind", rec.kind)
    _put(attrs, "github.copilot.permission.result", rec.result)
