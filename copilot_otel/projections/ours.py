"""Our own names (``copilot_otel.*``): facts about the agent loop that no other vocabulary names.

Declared once here; README's attribute table documents them.
"""

from __future__ import annotations

from typing import Any, Final

from ..model.activity import (
    AgentRun,
    Detection,
    HookRun,
    ModeChange,
    ModelCall,
    Outcome,
    PermissionWait,
    PromptRun,
    SessionImported,
    SessionWarning,
    TaskComplete,
    ToolCall,
    Turn,
    UserMessage,
)

INCOMPLETE: Final = "copilot_otel.incomplete"
INCOMPLETE_REASON: Final = "copilot_otel.incomplete.reason"
ARGUMENTS_HASH: Final = "copilot_otel.tool.arguments_hash"
RUNAWAY_REASON: Final = "copilot_otel.runaway.reason"
RUNAWAY_THRESHOLD: Final = "copilot_otel.runaway.threshold"
TURNS_TOTAL: Final = "copilot_otel.prompt.turns_total"
PROMPT_TOOL_CALLS: Final = "copilot_otel.prompt.tool_calls"
PROMPT_OUTCOME: Final = "copilot_otel.prompt.outcome"
# A prompt's cost in USD on its root span: every call of its trace priced per token (projections.prices), and how
# many of them could not be priced (left out of the cost, never priced at 0). A Copilot CLI sub-agent's calls are in
# its parent's log; Claude Code, Codex and Gemini CLI write a sub-agent's calls to a log of its own, which the
# parent's fold reads when the sub-agent ends (their spans stay that log's fold's): the part of the cost they make
# is said apart, and so are ended sub-agents whose logs could not be read (the cost leaves them out).
PROMPT_COST: Final = "copilot_otel.prompt.cost_usd"
PROMPT_SUBAGENT_COST: Final = "copilot_otel.prompt.subagent_cost_usd"
PROMPT_SUBAGENTS_UNREAD: Final = "copilot_otel.prompt.subagents_unread"
# Its sub-agents that still ran when it ended (a Claude Code background sub-agent the user did not wait for): their
# calls until then are in the cost, what they did after is not.
PROMPT_SUBAGENTS_RUNNING: Final = "copilot_otel.prompt.subagents_running"
PROMPT_UNPRICED_CALLS: Final = "copilot_otel.prompt.unpriced_calls"
CLI_VERSION: Final = "copilot_otel.cli.version"
RUNAWAY_EVENT: Final = "copilot_otel.runaway.detected"
TASK_COMPLETE_EVENT: Final = "copilot_otel.session.task_complete"
MODE_CHANGED_EVENT: Final = "copilot_otel.session.mode_changed"
WARNING_EVENT: Final = "copilot_otel.session.warning"
WARNING_TYPE: Final = "copilot_otel.warning.type"
HOOK_TYPE: Final = "copilot_otel.hook.type"
AGENT_TASK_CALL_ID: Final = "copilot_otel.agent.task_call_id"
SESSION_EVENT: Final = "copilot_otel.session.event"
# Which coding agent (CLI) wrote the session: on every span, log record and metric point, so that one dashboard
# filters or splits by it (the values are the fold's: ``copilot``, ``claude-code``, ``codex``).
AGENT: Final = "copilot_otel.agent"
# Where the Copilot CLI's own vocabulary names a fact and no other vocabulary does, the other agents' spans carry
# it under these (``github.copilot.*`` is written on Copilot CLI's spans only).
TURN_ID: Final = "copilot_otel.turn.id"
AGENT_TURN_COUNT: Final = "copilot_otel.agent.turn_count"
ABORT_REASON: Final = "copilot_otel.abort.reason"
USER_MESSAGE_EVENT: Final = "copilot_otel.user.message"
USER_MESSAGE_SOURCE: Final = "copilot_otel.user.message.source"
COMPACTION_START_EVENT: Final = "copilot_otel.compaction.start"
COMPACTION_COMPLETE_EVENT: Final = "copilot_otel.compaction.complete"
ABORT_EVENT: Final = "copilot_otel.session.abort"


def _put(attrs: dict[str, Any], key: str, value: Any) -> None:
    if value is not None:
        attrs[key] = value


def incomplete(attrs: dict[str, Any], reason: str | None) -> None:
    """Work the log never saw finish, and why (file ended, aborted, agent ended, ...)."""
    if reason:
        attrs[INCOMPLETE] = True
        attrs[INCOMPLETE_REASON] = reason


def model_call(attrs: dict[str, Any], rec: ModelCall) -> None:
    if rec.calls == 0 and rec.attempt is None:  # a failed attempt used nothing to estimate
        attrs["copilot_otel.usage.estimated"] = True
    _put(attrs, "copilot_otel.chat.attempt", rec.attempt)
    if rec.calls > 1:
        attrs["copilot_otel.chat.calls"] = rec.calls
    _put(attrs, "copilot_otel.chat.origin", rec.origin)
    if rec.outcome is Outcome.CANCELLED:
        incomplete(attrs, "aborted")


def tool_call(attrs: dict[str, Any], rec: ToolCall) -> None:
    _put(attrs, "copilot_otel.tool.mcp_server", rec.mcp_server)
    attrs[ARGUMENTS_HASH] = rec.arguments_hash
    if rec.name == "report_intent":
        attrs["copilot_otel.tool.report_intent"] = True
    if rec.user_requested:
        attrs["copilot_otel.tool.user_requested"] = True
    _put(attrs, "copilot_otel.tool.file_edits", rec.file_edits)
    if rec.cli_initiated:
        attrs["copilot_otel.tool.cli_initiated"] = True
    _put(attrs, "copilot_otel.tool.denied_by", rec.denied_by)
    _put(attrs, "copilot_otel.tool.hooks_s", rec.hooks_s)
    _put(attrs, "copilot_otel.tool.sandboxed", rec.sandboxed)
    if rec.external:
        attrs["copilot_otel.tool.external"] = True
    incomplete(attrs, rec.incomplete_reason)


def hook_run(attrs: dict[str, Any], rec: HookRun) -> None:
    attrs[HOOK_TYPE] = rec.hook_type
    attrs["copilot_otel.hook.invocation_id"] = rec.invocation_id
    attrs["copilot_otel.hook.success"] = rec.success
    _put(attrs, "copilot_otel.hook.source", rec.error_source)
    if rec.denied_calls:
        attrs["copilot_otel.hook.denied_calls"] = rec.denied_calls
    incomplete(attrs, rec.incomplete_reason)


def warning(rec: SessionWarning) -> dict[str, Any]:
    """A ``session.warning``'s type and message (span event and log event)."""
    attrs: dict[str, Any] = {WARNING_TYPE: rec.warning_type}
    _put(attrs, "copilot_otel.warning.message", rec.message)
    return attrs


def imported(rec: SessionImported) -> dict[str, Any]:
    return {
        "copilot_otel.import.user_messages": rec.user_messages,
        "copilot_otel.import.assistant_messages": rec.assistant_messages,
        "copilot_otel.import.tool_calls": rec.tool_calls,
        "copilot_otel.import.imported_at_ns": rec.imported_ns,
    }


def turn(attrs: dict[str, Any], rec: Turn) -> None:
    attrs["copilot_otel.turn.index"] = rec.index
    attrs["copilot_otel.turn.tool_calls"] = rec.tool_calls
    if rec.synthetic:
        attrs["copilot_otel.turn.synthetic"] = True
    incomplete(attrs, rec.incomplete_reason)


def agent_run(attrs: dict[str, Any], rec: AgentRun) -> None:
    _put(attrs, "copilot_otel.agent.display_name", rec.display_name)
    _put(attrs, AGENT_TASK_CALL_ID, rec.task_call_id)
    attrs["copilot_otel.agent.tool_calls"] = rec.tool_calls
    if rec.background:
        attrs["copilot_otel.agent.background"] = True
    _put(attrs, "copilot_otel.agent.total_tokens", rec.total_tokens)
    _put(attrs, "copilot_otel.agent.total_tool_calls", rec.total_tool_calls)
    incomplete(attrs, rec.incomplete_reason)


def prompt_run(attrs: dict[str, Any], rec: PromptRun) -> None:
    attrs[TURNS_TOTAL] = rec.turns_total
    attrs[PROMPT_TOOL_CALLS] = rec.tool_calls
    attrs[PROMPT_OUTCOME] = rec.outcome
    facts = rec.facts
    _put(attrs, CLI_VERSION, facts.cli_version)
    _put(attrs, "copilot_otel.session.cwd", facts.cwd)
    _put(attrs, "copilot_otel.session.git_root", facts.git_root)
    _put(attrs, "copilot_otel.session.title", facts.title)
    _put(attrs, "copilot_otel.prompt.agent_mode", rec.agent_mode)
    if not rec.human:
        attrs["copilot_otel.prompt.synthetic"] = True
    incomplete(attrs, rec.incomplete_reason)
    if rec.dropped_notes:
        attrs["copilot_otel.span_events.dropped"] = rec.dropped_notes
    if rec.copied_records:  # a fork's copy of its parent's history, skipped (the span links to the parent's)
        attrs["copilot_otel.prompt.copied_records"] = rec.copied_records


def user_message(attrs: dict[str, Any], rec: UserMessage) -> None:
    if rec.autopilot_continuation:
        attrs["copilot_otel.autopilot_continuation"] = True
    _put(attrs, "copilot_otel.user.message.content", rec.content)


def detection(rec: Detection, tool_name_key: str) -> dict[str, Any]:
    """A runaway detection's reason and what explains it (span event and log event)."""
    attrs: dict[str, Any] = {RUNAWAY_REASON: rec.reason, RUNAWAY_THRESHOLD: rec.threshold}
    if rec.tool_name is not None:
        attrs[tool_name_key] = rec.tool_name
    _put(attrs, ARGUMENTS_HASH, rec.arguments_hash)
    _put(attrs, "copilot_otel.runaway.tokens_last_minute", rec.tokens_last_minute)
    return attrs


def task_complete(rec: TaskComplete) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    _put(attrs, "copilot_otel.task_complete.success", rec.success)
    _put(attrs, "copilot_otel.task_complete.outcome", rec.outcome)
    _put(attrs, "copilot_otel.task_complete.summary", rec.summary)
    return attrs


def mode_change(rec: ModeChange) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    _put(attrs, "copilot_otel.mode.previous", rec.previous)
    _put(attrs, "copilot_otel.mode.new", rec.new)
    return attrs


def permission(attrs: dict[str, Any], rec: PermissionWait) -> None:
    attrs["copilot_otel.permission.request_id"] = rec.request_id
    attrs["copilot_otel.permission.wait_s"] = (rec.end_ns - rec.start_ns) / 1e9
    incomplete(attrs, rec.incomplete_reason)
