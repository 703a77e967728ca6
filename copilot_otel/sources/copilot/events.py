"""Copilot CLI's session events, typed: the one module that knows their camelCase names and version quirks.

:mod:`.parse` frames a line, decodes its JSON and reads the envelope; :data:`CLASSES` says which class of this
module the event is. Each class is a typed view of one event type's ``data``, declared field by field with the
descriptors every source's reader shares (:mod:`copilot_otel.sources.fields`, which says how a field of the
wrong type reads), and no other module looks inside ``data``: the agent loop reads an event only through these
names, as the protocols of :mod:`copilot_otel.model.inputs` say them (an event whose ``data`` is not an object,
or only nulls, is noted as a ``wrong_shape`` dropped value by :mod:`.parse`).

Version quirks live here too, next to the field they affect: tool requests named by ``id`` before
``toolCallId``, the premium-request total under ``accountingSnapshot`` in older shutdowns, ``filesModified`` as a
list or only as a count, nano-AIU under ``copilotUsage`` in some usage records, the BYOK flag.
"""

from __future__ import annotations

from typing import Any

from ...model.inputs import CompactionCall, Context, Event, ModelMetrics, ToolRequest, Usage
from ..fields import _dict, _float, _int, _str, amount, count, flag, raw, text

__all__ = ["CLASSES", "CopilotEvent"]


class CopilotEvent(Event):
    """One event of Copilot CLI's log: the envelope, with the routing keys any of its events may carry.

    An event type the agent loop does not read is a :class:`CopilotEvent` itself; the types it reads are
    subclasses that declare their fields.
    """

    __slots__ = ()
    # The CLI's id of the human interaction the event belongs to.
    interaction_id = text("interactionId")
    # The ``task`` call a sub-agent's event belongs to (CLI versions before the envelope's ``agentId``).
    parent_tool_call_id = text("parentToolCallId")


def _context(value: Any) -> Context | None:
    if not isinstance(value, dict):
        return None
    g = value.get
    return Context(
        _str(g("cwd")), _str(g("gitRoot")), _str(g("repository")), _str(g("branch")), _str(g("headCommit"))
    )


# ---------------------------------------------------------------------------------------------- session
class SessionStart(CopilotEvent):
    """``session.start``: the session's id, the CLI that writes it, its first model and where it runs."""

    __slots__ = ()
    session_id = text("sessionId")
    copilot_version = text("copilotVersion")
    producer = text("producer")
    selected_model = text("selectedModel")
    reasoning_effort = text("reasoningEffort")
    # When the session began: the transcript's date for an imported session (the event's own time is the import's).
    start_time = text("startTime")

    @property
    def context(self) -> Context | None:
        return _context(self.data.get("context"))


class SessionResume(CopilotEvent):
    """``session.resume``: a new CLI process continues the session (``--resume``, ``--continue``)."""

    __slots__ = ()
    selected_model = text("selectedModel")
    reasoning_effort = text("reasoningEffort")

    @property
    def context(self) -> Context | None:
        return _context(self.data.get("context"))


class ContextChanged(CopilotEvent):
    """``session.context_changed``: the working directory or git state changed (``data`` is the context)."""

    __slots__ = ()

    @property
    def context(self) -> Context | None:
        return _context(self.data)


class ModelChange(CopilotEvent):
    """``session.model_change``: the session's model from now on (or, ``from_agent``, one agent's)."""

    __slots__ = ()
    new_model = text("newModel")
    reasoning_effort = text("reasoningEffort")

    @property
    def says_reasoning_effort(self) -> bool:
        """Whether the change names the effort (``null``: the model's default from now on)."""
        return "reasoningEffort" in self.data

    @property
    def from_agent(self) -> bool:
        return self.data.get("source") == "agent"


class ModeChanged(CopilotEvent):
    """``session.mode_changed``: interactive, plan or autopilot."""

    __slots__ = ()
    previous = text("previousMode")
    new = text("newMode")


class SessionWarning(CopilotEvent):
    """``session.warning``: something went wrong without stopping the session (a hook that crashed, tools left
    interrupted by a killed CLI)."""

    __slots__ = ()
    warning_type = text("warningType")
    message = text("message")


class HookStart(CopilotEvent):
    """``hook.start``: a repository or user hook (``.github/hooks/*.json``) begins.

    ``tool_call_ids`` are the calls a ``preToolUse`` hook decides on (its input's ``toolCalls``); ``tool_name``
    is the tool a ``postToolUse`` hook follows (its input names no call id).
    """

    __slots__ = ()
    invocation_id = text("hookInvocationId")
    hook_type = text("hookType")
    tool_name = text("input", "toolName")

    @property
    def tool_call_ids(self) -> tuple[str, ...]:
        calls = _dict(self.data.get("input")).get("toolCalls")
        if not isinstance(calls, list):
            return ()
        return tuple(i for c in calls if isinstance(c, dict) and (i := _str(c.get("id"))) is not None)


class HookEnd(CopilotEvent):
    """``hook.end``: the hook finished (``success`` false: it timed out or failed; ``error`` says why)."""

    __slots__ = ()
    invocation_id = text("hookInvocationId")
    hook_type = text("hookType")
    error_message = text("error", "message")
    error_source = text("error", "source")

    @property
    def success(self) -> bool:
        """False only for a JSON ``false``."""
        return self.data.get("success") is not False

    @property
    def denied_calls(self) -> tuple[str, ...]:
        """The tool calls a ``preToolUse`` hook denied (its ``output`` maps each call id to the reason)."""
        output = self.data.get("output")
        if self.data.get("hookType") != "preToolUse" or not isinstance(output, dict):
            return ()
        return tuple(k for k, v in output.items() if isinstance(v, str) and v.startswith("Denied"))


class SessionError(CopilotEvent):
    """``session.error``: a failure the CLI reports (a model call's retries exhausted, rate limits)."""

    __slots__ = ()
    error_type = text("errorType")
    message = text("message")
    status_code = count("statusCode")


class Abort(CopilotEvent):
    """``abort``: the user (or a signal) cancelled the running work."""

    __slots__ = ()
    reason = text("reason")


class Shutdown(CopilotEvent):
    """``session.shutdown``: the CLI process ends; its totals are cumulative over the session's runs."""

    __slots__ = ()
    shutdown_type = text("shutdownType")
    nano_aiu = amount("totalNanoAiu")
    api_duration_ms = amount("totalApiDurationMs")
    lines_added = count("codeChanges", "linesAdded")
    lines_removed = count("codeChanges", "linesRemoved")

    @property
    def premium_requests(self) -> float | None:
        premium = _float(self.data.get("totalPremiumRequests"), self.dropped)
        if premium is None:  # older CLIs: only in the accounting snapshot
            premium = _float(
                _dict(self.data.get("accountingSnapshot")).get("totalPremiumRequestCost"), self.dropped
            )
        return premium

    @property
    def files_modified(self) -> int:
        changes = _dict(self.data.get("codeChanges"))
        files = changes.get("filesModified")  # a list of paths, or (older CLIs) only a count
        return (
            len(files)
            if isinstance(files, list)
            else _int(changes.get("filesModifiedCount"), self.dropped) or 0
        )

    @property
    def models(self) -> tuple[ModelMetrics, ...]:
        """Each model's totals, in the log's order."""
        models = []
        for model, m in _dict(self.data.get("modelMetrics")).items():
            if not isinstance(m, dict):
                continue
            usage = _dict(m.get("usage"))
            requests = _dict(m.get("requests"))
            models.append(
                ModelMetrics(
                    model,
                    _int(usage.get("inputTokens"), self.dropped),
                    _int(usage.get("outputTokens"), self.dropped),
                    _int(usage.get("cacheReadTokens"), self.dropped),
                    _int(usage.get("cacheWriteTokens"), self.dropped),
                    _int(requests.get("count"), self.dropped),
                    _float(requests.get("cost"), self.dropped),
                    _float(m.get("totalNanoAiu"), self.dropped),
                )
            )
        return tuple(models)


class Compaction(CopilotEvent):
    """``session.compaction_start`` (``complete`` false) / ``session.compaction_complete``."""

    __slots__ = ()
    trigger = text("trigger")
    pre_tokens = count("preCompactionTokens")
    post_tokens = count("postCompactionTokens")
    tokens_removed = count("tokensRemoved")
    messages_removed = count("messagesRemoved")
    current_tokens = count("currentTokens")
    token_limit = count("tokenLimit")

    @property
    def complete(self) -> bool:
        return not self.type.endswith("start")

    @property
    def success(self) -> bool | None:
        value = self.data.get("success")
        return value if isinstance(value, bool) else None

    @property
    def call(self) -> CompactionCall | None:
        """The compaction's own model call, when the CLI reports its tokens."""
        used = self.data.get("compactionTokensUsed")
        if not isinstance(used, dict):
            return None
        return CompactionCall(
            _int(used.get("inputTokens"), self.dropped),
            _int(used.get("outputTokens"), self.dropped),
            _int(used.get("cacheReadTokens"), self.dropped),
            _int(used.get("cacheWriteTokens"), self.dropped),
            _str(used.get("model")),
            _float(used.get("duration"), self.dropped),
        )


class Truncation(CopilotEvent):
    """``session.truncation``: messages dropped to fit the context window."""

    __slots__ = ()
    token_limit = count("tokenLimit")
    pre_tokens = count("preTruncationTokensInMessages")
    post_tokens = count("postTruncationTokensInMessages")
    tokens_removed = count("tokensRemovedDuringTruncation")
    messages_removed = count("messagesRemovedDuringTruncation")


class SkillInvoked(CopilotEvent):
    """``skill.invoked``: a skill ran (``trigger`` ``user-invoked``: typed as ``/<skill>``, written before the
    ``user.message`` it belongs to)."""

    __slots__ = ()
    name = text("name")
    plugin = text("pluginName")
    trigger = text("trigger")
    source = text("source")


class SystemNotification(CopilotEvent):
    """``system.notification``: background work (an agent, a shell) finished; the CLI reads it next."""

    __slots__ = ()
    kind = text("kind", "type")
    notified_agent_id = text("kind", "agentId")  # the background agent that finished
    agent_type = text("kind", "agentType")
    shell_id = text("kind", "shellId")
    exit_code = count("kind", "exitCode")


class TaskComplete(CopilotEvent):
    """``session.task_complete``: how autopilot and plan mode end."""

    __slots__ = ()
    outcome = text("outcome")
    summary = raw("summary")

    @property
    def success(self) -> bool | None:
        value = self.data.get("success")
        return value if isinstance(value, bool) else None


class PermissionRequested(CopilotEvent):
    """``permission.requested``: the agent waits for the user to allow a tool."""

    __slots__ = ()
    request_id = text("requestId")
    tool_call_id = text("permissionRequest", "toolCallId")
    kind = text("permissionRequest", "kind")


class PermissionCompleted(CopilotEvent):
    """``permission.completed``: the user's answer (``result``: its kind, e.g. ``approved``)."""

    __slots__ = ()
    request_id = text("requestId")
    result = text("result", "kind")


# ---------------------------------------------------------------------------------------------- messages
class UserMessage(CopilotEvent):
    """``user.message``: a human prompt, or a message the CLI injects (steering, autopilot, a task prompt)."""

    __slots__ = ()
    content = raw("content")
    message_id = text("messageId")  # absent on the messages ``copilot sessions import`` writes
    source = text("source")
    delivery = text("delivery")
    turn_id = text("turnId")
    agent_mode = text("agentMode")
    autopilot_continuation = flag("isAutopilotContinuation")


class SystemMessage(CopilotEvent):
    """``system.message``: a system prompt (parse decodes it only when its capture switch is on)."""

    __slots__ = ()
    content = raw("content")


class Reasoning(CopilotEvent):
    """``assistant.reasoning``: a reasoning block (parse decodes it only when its capture switch is on)."""

    __slots__ = ()
    content = raw("content")


class TurnStart(CopilotEvent):
    """``assistant.turn_start``: a turn of an agent begins."""

    __slots__ = ()
    turn_id = text("turnId")


class TurnEnd(CopilotEvent):
    """``assistant.turn_end``: the turn ends."""

    __slots__ = ()
    turn_id = text("turnId")


class UsageRecord(CopilotEvent):
    """``session.usage_record``: one model call's usage, as the CLI's model API billed it."""

    __slots__ = ()

    @property
    def usage(self) -> Usage | None:
        """The record's usage; ``None`` when it has no ``usage`` object. Decoded at once: the loop reads all."""
        u = self.data.get("usage")
        if not isinstance(u, dict):
            return None
        g = u.get
        byok = g("isByok")
        copilot = g("copilotUsage")  # some versions report nano-AIU only there
        return Usage(
            _int(g("inputTokens"), self.dropped),
            _int(g("outputTokens"), self.dropped),
            _int(g("cacheReadTokens"), self.dropped),
            _int(g("cacheWriteTokens"), self.dropped),
            _float(g("cost"), self.dropped),
            _float(g("totalNanoAiu"), self.dropped)
            or _float(copilot.get("totalNanoAiu") if isinstance(copilot, dict) else None, self.dropped)
            or 0.0,
            _str(g("model")),
            _str(g("apiCallId")),
            _str(g("finishReason")),
            _float(g("timeToFirstTokenMs"), self.dropped),
            _float(g("duration"), self.dropped),
            _str(g("initiator")),
            (_str(g("providerType")) or "byok") if byok is True else "github" if byok is False else None,
            _int(g("reasoningTokens"), self.dropped),
            _str(g("reasoningEffort")),
        )


class AssistantMessage(CopilotEvent):
    """``assistant.message``: the model's answer, or (no model, no ids) a message the CLI wrote itself."""

    __slots__ = ()
    model = text("model")
    api_call_id = text("apiCallId")
    turn_id = text("turnId")
    output_tokens = count("outputTokens")
    content = raw("content")
    reasoning_text = raw("reasoningText")  # where the CLI writes the reasoning into the message

    @property
    def has_tool_requests(self) -> bool:
        """Whether the model asked for tools (decoding them is left to those who keep them)."""
        requests = self.data.get("toolRequests")
        return isinstance(requests, list) and bool(requests)

    @property
    def tool_requests(self) -> tuple[ToolRequest, ...]:
        requests = self.data.get("toolRequests")
        if not isinstance(requests, list):
            return ()
        # Older CLIs name the call by "id".
        return tuple(
            [
                ToolRequest(
                    _str(r.get("toolCallId")) or _str(r.get("id")), _str(r.get("name")), r.get("arguments")
                )
                for r in requests
                if isinstance(r, dict)
            ]
        )

    @property
    def has_model_call_ids(self) -> bool:
        """Whether any of the ids of a model call is set (the CLI's own messages have none)."""
        g = self.data.get
        return bool(g("model") or g("apiCallId") or g("interactionId") or g("turnId"))


# ---------------------------------------------------------------------------------------------- tools and agents
class ToolStart(CopilotEvent):
    """``tool.execution_start``: a tool begins."""

    __slots__ = ()
    call_id = text("toolCallId")
    name = text("toolName")
    arguments = raw("arguments")
    mcp_server = text("mcpServerName")
    description = text("toolDescription", "description")


class ToolComplete(CopilotEvent):
    """``tool.execution_complete``: a tool ended (``error_code`` ``denied``: the user or a rule refused it)."""

    __slots__ = ()
    call_id = text("toolCallId")
    error_message = text("error", "message")
    error_code = text("error", "code")
    exit_code = count("shellExecution", "exitCode")
    user_requested = flag("isUserRequested")
    result = raw("result", "content")
    # Who refused a denied call: the completion never says (a denying hook's own event does, loop/tools.py).
    denied_by: None = None

    @property
    def success(self) -> bool:
        """False only for a JSON ``false``."""
        return self.data.get("success") is not False

    @property
    def sandboxed(self) -> bool | None:
        """Whether the command ran under ``--sandbox`` (None: the record does not say)."""
        value = self.data.get("sandboxed")
        return value if isinstance(value, bool) else None

    @property
    def file_edits(self) -> int | None:
        edits = self.data.get("fileEdits")
        return len(edits) if isinstance(edits, list) else None


class ExternalToolRequested(CopilotEvent):
    """``external_tool.requested``: the CLI hands a started tool call (``call_id``, its ``tool.execution_start``
    before) to the process that registered the tool: a project or user extension
    (``.github/extensions/<name>/extension.mjs``) or an SDK client. The call's span is the tool's own; this only
    says where it ran. Its ``external_tool.completed`` (only the ``requestId``) comes just before the call's
    ``tool.execution_complete``. In CLI 1.0.102 neither names the extension (``session.extensions_loaded``, which
    does, is stdout-only), and its schema's optional ``providerId`` ("stable provider identity captured with an
    extension-owned tool definition") was absent in the real capture, so it is not read.
    """

    __slots__ = ()
    call_id = text("toolCallId")


class AgentSelected(CopilotEvent):
    """``subagent.selected``: an agent was chosen; without ``agentId``, the main agent (``copilot --agent``)."""

    __slots__ = ()
    name = text("agentName")
    display_name = text("agentDisplayName")


class SubagentStarted(CopilotEvent):
    """``subagent.started`` / ``custom_agent.started``: a sub-agent begins under its ``task`` call."""

    __slots__ = ()
    tool_call_id = text("toolCallId")
    name = text("agentName")
    display_name = text("agentDisplayName")
    description = text("agentDescription")
    model = text("model")
    parent_agent_id = text("parentId")

    @property
    def background(self) -> bool:
        return self.data.get("executionMode") == "background"


class SubagentEnded(CopilotEvent):
    """``subagent.completed`` / ``subagent.failed`` / the ``custom_agent`` ones: a sub-agent ended."""

    __slots__ = ()
    tool_call_id = text("toolCallId")
    error = text("error")
    cancelled = flag("cancelled")
    total_tokens = count("totalTokens")
    total_tool_calls = count("totalToolCalls")

    @property
    def failed(self) -> bool:
        return self.type.endswith(".failed")  # custom_agent.failed too (CLI 0.0.382-0)


# The class of each event type the loop reads; any other type is a plain CopilotEvent.
CLASSES: dict[str, type[CopilotEvent]] = {
    "session.start": SessionStart,
    "session.resume": SessionResume,
    "session.context_changed": ContextChanged,
    "session.model_change": ModelChange,
    "session.mode_changed": ModeChanged,
    "session.error": SessionError,
    "session.warning": SessionWarning,
    "hook.start": HookStart,
    "hook.end": HookEnd,
    "subagent.selected": AgentSelected,
    "abort": Abort,
    "session.shutdown": Shutdown,
    "session.compaction_start": Compaction,
    "session.compaction_complete": Compaction,
    "session.truncation": Truncation,
    "skill.invoked": SkillInvoked,
    "system.notification": SystemNotification,
    "session.task_complete": TaskComplete,
    "permission.requested": PermissionRequested,
    "permission.completed": PermissionCompleted,
    "user.message": UserMessage,
    "system.message": SystemMessage,
    "assistant.reasoning": Reasoning,
    "assistant.turn_start": TurnStart,
    "assistant.turn_end": TurnEnd,
    "session.usage_record": UsageRecord,
    "assistant.message": AssistantMessage,
    "tool.execution_start": ToolStart,
    "tool.execution_complete": ToolComplete,
    "external_tool.requested": ExternalToolRequested,
    "subagent.started": SubagentStarted,
    "custom_agent.started": SubagentStarted,
    "subagent.completed": SubagentEnded,
    "subagent.failed": SubagentEnded,
    "custom_agent.completed": SubagentEnded,
    "custom_agent.failed": SubagentEnded,
}
