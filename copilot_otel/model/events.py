"""The CLI's session events, typed: the one module that knows their camelCase names and version quirks.

parse frames a line, decodes its JSON and reads the envelope; :data:`CLASSES` says which class of this module the
event is. Each class is a typed view of one event type's ``data``, declared field by field::

    class ToolStart(Event):
        call_id = text("toolCallId")        # str | None
        arguments = raw("arguments")         # content, as decoded

and no other module looks inside ``data``: the agent loop reads an event only through these names.

A field decodes when it is read, not up front: most fields of most lines are never read (a backfill builds one
event per line), and an event is read once, so nothing is cached. Decoding never raises. The log is written by
many CLI versions, so a field of the wrong type counts as absent, the way a missing one does, and the event is
kept:

* :func:`text`: a non-empty ``str``, else ``None`` (an empty string in a log means as little as a missing one);
* :func:`count`: an ``int`` (also from a whole float; JSON writers differ), never a ``bool``, else ``None``;
* :func:`amount`: a number as ``float``, never a ``bool``, else ``None``;
* a count or amount beyond ±2**53 (no real value is; not every encoder carries it) is absent too, and noted as a
  dropped value in the event's :attr:`Event.dropped`, which the pipeline returns with the line's step and counts
  with its reason;
* :func:`flag`: ``True`` only for a JSON ``true``;
* a value present but of the wrong type (a number where text belongs, a list where a number does) is noted as
  a ``wrong_shape`` dropped value, as is an event whose ``data`` is not an object or only nulls (:mod:`~copilot_otel.model.parse`);
* :func:`raw`: content (prompts, responses, tool arguments and results) passed on as decoded: only the content
  gate (:mod:`copilot_otel.settings.content`) decides what of it may be kept.

Version quirks live here too, next to the field they affect: tool requests named by ``id`` before
``toolCallId``, the premium-request total under ``accountingSnapshot`` in older shutdowns, ``filesModified`` as a
list or only as a count, nano-AIU under ``copilotUsage`` in some usage records, the BYOK flag.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Any, Generic, TypeVar, overload

from .records import NUMBER_MAX, DropReason, RecordBase, record

T = TypeVar("T")

__all__ = [
    "CLASSES",
    "Dropped",
    "Event",
    "Field",
    "json_type",
    "not_read_of",
    "note_not_read",
    "note_version",
]


# ---------------------------------------------------------------------------------------------- coercion
def _str(value: Any) -> str | None:
    return value if value.__class__ is str and value else None


# The values an event lost as it was read, as (reason, detail): where a reader's drops go. An event holds its
# reader's list (parse's caller gives one per log, the loop's), so a field read later, while the loop keeps the
# event, is still that log's drop; the pipeline returns them with the step of the line being folded.
Dropped = list[tuple[DropReason, str]]


# Between a not-read note's kind and the version its record names (a character no kind or version holds).
_VERSION_MARK = "\x1f"


def note_not_read(dropped: Dropped, kind: str, version: object = None) -> None:
    """Note in ``dropped`` that a record of ``kind`` is not read by its reader (``DropReason.NOT_READ``), with the
    CLI version the record itself names, when it names one (Claude Code's do); the pipeline takes the note out of
    the line's dropped values into its counts (:class:`~copilot_otel.model.records.NotRead`). Called only for such a
    record: a record the reader knows costs nothing."""
    detail = f"{kind}{_VERSION_MARK}{version}" if version.__class__ is str and version else kind
    dropped.append((DropReason.NOT_READ, detail))


def note_version(dropped: Dropped, version: object) -> None:
    """Note the CLI version a log names where no session start tells the loop (a Codex sub-agent's rollout): a
    not-read note with no kind, which dates the log's not-read records and is not counted itself."""
    if version.__class__ is str and version:
        dropped.append((DropReason.NOT_READ, f"{_VERSION_MARK}{version}"))


def not_read_of(detail: str) -> tuple[str, str | None]:
    """A not-read note's detail (:func:`note_not_read`) → its kind and the version its record named."""
    kind, _, version = detail.partition(_VERSION_MARK)
    return kind, version or None


def json_type(value: object) -> str:
    """The JSON name of a decoded value's type, with its article, for a message: ``an array``, ``a string``."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "a boolean"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    return "a string" if isinstance(value, str) else "a number"


def _beyond(value: object) -> bool:
    """A number past ±2**53: already noted as ``out_of_range`` by :func:`_int` / :func:`_float`."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and not -NUMBER_MAX < value < NUMBER_MAX
    )


def _out_of_range(value: float, dropped: Dropped | None) -> None:
    if dropped is not None:
        dropped.append((DropReason.OUT_OF_RANGE, f"{value!r} is beyond ±2**53"))


def _int(value: Any, dropped: Dropped | None) -> int | None:
    """``value`` as a count (``dropped``: where one out of range is noted; ``None`` when what is read is no
    log line, so there is none to count it against)."""
    # Exact classes, not isinstance: JSON decodes to exactly these, and a bool (an int subclass) is no count.
    cls = value.__class__
    if cls is int:
        if -NUMBER_MAX < value < NUMBER_MAX:
            return value  # type: ignore[no-any-return]
        _out_of_range(value, dropped)
    elif cls is float and value.is_integer():
        if -NUMBER_MAX < value < NUMBER_MAX:
            return int(value)
        _out_of_range(value, dropped)
    return None


def _float(value: Any, dropped: Dropped | None) -> float | None:
    cls = value.__class__
    if cls is not float and cls is not int:  # a bool is neither
        return None
    if -NUMBER_MAX < value < NUMBER_MAX:
        return float(value)
    _out_of_range(value, dropped)
    return None


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


# ---------------------------------------------------------------------------------------------- fields
class Field(Generic[T]):
    """One field of an event's ``data``, read as ``kind`` says (``path``: its keys, the outer object's first).

    A descriptor rather than a property per field: the declaration is one line, and reading it costs the same.
    """

    __slots__ = ("inner", "key", "kind")

    def __init__(self, kind: str, path: tuple[str, ...]) -> None:
        self.kind = kind
        self.key = path[0]
        self.inner = path[1] if len(path) > 1 else None

    @overload
    def __get__(self, event: None, owner: type) -> Field[T]: ...
    @overload
    def __get__(self, event: Event, owner: type) -> T: ...
    def __get__(self, event: Event | None, owner: type) -> Any:
        if event is None:
            return self
        value = event.data.get(self.key)
        if self.inner is not None:
            value = value.get(self.inner) if isinstance(value, dict) else None
        kind = self.kind  # interned: each comparison is a pointer check
        if kind is _TEXT:
            if value.__class__ is str:
                return value or None
            if value is not None:
                self._wrong(event, value, "a string")
            return None
        if kind is _RAW:
            return value
        if kind is _FLAG:
            if value is not True and value is not False and value is not None:
                self._wrong(event, value, "a boolean")
            return value is True
        if value.__class__ is int and -NUMBER_MAX < value < NUMBER_MAX:
            # the common number, without a call (not isinstance: a bool is an int); the rest is _int's or _float's
            return value if kind is _COUNT else float(value)
        number = _int(value, event.dropped) if kind is _COUNT else _float(value, event.dropped)
        if number is None and value is not None and not _beyond(value):
            self._wrong(event, value, "a whole number" if kind is _COUNT else "a number")
        return number

    def _wrong(self, event: Event, value: object, wanted: str) -> None:
        """A value of the wrong type: read as absent (the event is kept), noted as a ``wrong_shape`` drop."""
        path = self.key if self.inner is None else f"{self.key}.{self.inner}"
        event.dropped.append(
            (DropReason.WRONG_SHAPE, f"{event.type} {path} is {json_type(value)}, not {wanted}")
        )


_TEXT, _COUNT, _AMOUNT, _FLAG, _RAW = "text", "count", "amount", "flag", "raw"


def text(*path: str) -> Field[str | None]:
    return Field(_TEXT, path)


def count(*path: str) -> Field[int | None]:
    return Field(_COUNT, path)


def amount(*path: str) -> Field[float | None]:
    return Field(_AMOUNT, path)


def flag(*path: str) -> Field[bool]:
    return Field(_FLAG, path)


def raw(*path: str) -> Field[Any]:
    return Field(_RAW, path)


# ---------------------------------------------------------------------------------------------- envelope
@record
class Event(RecordBase):
    """One event of a session log: the envelope every line has, and the routing keys any event may carry.

    An event type the agent loop does not read is an :class:`Event` itself; the types it reads are subclasses
    that declare their fields.

    Attributes:
        type: The event discriminator, e.g. ``assistant.turn_start``.
        id: The event's own id (UUID); synthesised from the byte offset when missing.
        time_ns: The event timestamp in Unix nanoseconds, 0 when the line has none usable (never the clock).
        data: The decoded ``data`` object (``{}`` when absent); read it through the fields, never mutate it.
        agent_id: The envelope ``agentId`` (sub-agent instance), ``None`` for the main agent.
        offset: Byte offset of the line's first byte in its file.
        end_offset: Byte offset just past the line's ``\\n``: the checkpoint after this event.
        dropped: Where the values its fields lose as they are read are noted (see :data:`Dropped`): its
            reader's list, or one of its own.
    """

    type: str
    id: str
    time_ns: int
    data: Mapping[str, Any]
    agent_id: str | None = None
    offset: int = 0
    end_offset: int = 0
    dropped: Dropped = field(default_factory=list)

    # The CLI's id of the human interaction the event belongs to.
    interaction_id = text("interactionId")
    # The ``task`` call a sub-agent's event belongs to (CLI versions before the envelope's ``agentId``).
    parent_tool_call_id = text("parentToolCallId")


# ---------------------------------------------------------------------------------------------- nested values
@record
class Context(RecordBase):
    """Where the session runs (``session.start.context``, ``session.context_changed``)."""

    cwd: str | None
    git_root: str | None
    repository: str | None
    branch: str | None
    head_commit: str | None


def _context(value: Any) -> Context | None:
    if not isinstance(value, dict):
        return None
    g = value.get
    return Context(
        _str(g("cwd")), _str(g("gitRoot")), _str(g("repository")), _str(g("branch")), _str(g("headCommit"))
    )


@record
class ModelMetrics(RecordBase):
    """One model's cumulative totals in a ``session.shutdown`` (``modelMetrics.<model>``)."""

    model: str
    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None
    cache_write_tokens: int | None
    requests: int | None
    cost: float | None
    nano_aiu: float | None


@record
class CompactionCall(RecordBase):
    """The compaction's own model call (``compactionTokensUsed``): the CLI writes no usage record for it. A count
    it lacks or holds out of range is ``None`` (unknown is not zero)."""

    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None
    cache_write_tokens: int | None
    model: str | None
    duration_ms: float | None


@record
class Usage(RecordBase):
    """What a ``session.usage_record`` says of one model call.

    ``provider`` is ``github`` for the CLI's own API, the BYOK provider type (or ``byok``), ``None`` when the
    record does not say. A count or the cost the record lacks, or holds out of range (dropped, counted), is
    ``None``: unknown is not zero.
    """

    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None
    cache_write_tokens: int | None
    cost: float | None
    nano_aiu: float
    model: str | None
    api_call_id: str | None
    finish_reason: str | None
    ttft_ms: float | None
    duration_ms: float | None
    initiator: str | None
    provider: str | None
    # Reasoning output tokens (reasoning models); None when the record does not say.
    reasoning_tokens: int | None = None
    # The reasoning effort the call was made with (sub-agents' included), when the record says.
    reasoning_effort: str | None = None


@record
class ToolRequest(RecordBase):
    """A tool call the model asked for (``assistant.message.toolRequests[]``); ``arguments`` is content."""

    call_id: str | None
    name: str | None
    arguments: Any


# ---------------------------------------------------------------------------------------------- session
class SessionStart(Event):
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


class SessionResume(Event):
    """``session.resume``: a new CLI process continues the session (``--resume``, ``--continue``)."""

    __slots__ = ()
    selected_model = text("selectedModel")
    reasoning_effort = text("reasoningEffort")

    @property
    def context(self) -> Context | None:
        return _context(self.data.get("context"))


class ContextChanged(Event):
    """``session.context_changed``: the working directory or git state changed (``data`` is the context)."""

    __slots__ = ()

    @property
    def context(self) -> Context | None:
        return _context(self.data)


class ModelChange(Event):
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


class ModeChanged(Event):
    """``session.mode_changed``: interactive, plan or autopilot."""

    __slots__ = ()
    previous = text("previousMode")
    new = text("newMode")


class SessionWarning(Event):
    """``session.warning``: something went wrong without stopping the session (a hook that crashed, tools left
    interrupted by a killed CLI)."""

    __slots__ = ()
    warning_type = text("warningType")
    message = text("message")


class HookStart(Event):
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


class HookEnd(Event):
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


class SessionError(Event):
    """``session.error``: a failure the CLI reports (a model call's retries exhausted, rate limits)."""

    __slots__ = ()
    error_type = text("errorType")
    message = text("message")
    status_code = count("statusCode")


class Abort(Event):
    """``abort``: the user (or a signal) cancelled the running work."""

    __slots__ = ()
    reason = text("reason")


class Shutdown(Event):
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


class Compaction(Event):
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


class Truncation(Event):
    """``session.truncation``: messages dropped to fit the context window."""

    __slots__ = ()
    token_limit = count("tokenLimit")
    pre_tokens = count("preTruncationTokensInMessages")
    post_tokens = count("postTruncationTokensInMessages")
    tokens_removed = count("tokensRemovedDuringTruncation")
    messages_removed = count("messagesRemovedDuringTruncation")


class SkillInvoked(Event):
    """``skill.invoked``: a skill ran (``trigger`` ``user-invoked``: typed as ``/<skill>``, written before the
    ``user.message`` it belongs to)."""

    __slots__ = ()
    name = text("name")
    plugin = text("pluginName")
    trigger = text("trigger")
    source = text("source")


class SystemNotification(Event):
    """``system.notification``: background work (an agent, a shell) finished; the CLI reads it next."""

    __slots__ = ()
    kind = text("kind", "type")
    notified_agent_id = text("kind", "agentId")  # the background agent that finished
    agent_type = text("kind", "agentType")
    shell_id = text("kind", "shellId")
    exit_code = count("kind", "exitCode")


class TaskComplete(Event):
    """``session.task_complete``: how autopilot and plan mode end."""

    __slots__ = ()
    outcome = text("outcome")
    summary = raw("summary")

    @property
    def success(self) -> bool | None:
        value = self.data.get("success")
        return value if isinstance(value, bool) else None


class PermissionRequested(Event):
    """``permission.requested``: the agent waits for the user to allow a tool."""

    __slots__ = ()
    request_id = text("requestId")
    tool_call_id = text("permissionRequest", "toolCallId")
    kind = text("permissionRequest", "kind")


class PermissionCompleted(Event):
    """``permission.completed``: the user's answer (``result``: its kind, e.g. ``approved``)."""

    __slots__ = ()
    request_id = text("requestId")
    result = text("result", "kind")


# ---------------------------------------------------------------------------------------------- messages
class UserMessage(Event):
    """``user.message``: a human prompt, or a message the CLI injects (steering, autopilot, a task prompt)."""

    __slots__ = ()
    content = raw("content")
    message_id = text("messageId")  # absent on the messages ``copilot sessions import`` writes
    source = text("source")
    delivery = text("delivery")
    turn_id = text("turnId")
    agent_mode = text("agentMode")
    autopilot_continuation = flag("isAutopilotContinuation")


class SystemMessage(Event):
    """``system.message``: a system prompt (parse decodes it only when its capture switch is on)."""

    __slots__ = ()
    content = raw("content")


class Reasoning(Event):
    """``assistant.reasoning``: a reasoning block (parse decodes it only when its capture switch is on)."""

    __slots__ = ()
    content = raw("content")


class TurnStart(Event):
    """``assistant.turn_start``: a turn of an agent begins."""

    __slots__ = ()
    turn_id = text("turnId")


class TurnEnd(Event):
    """``assistant.turn_end``: the turn ends."""

    __slots__ = ()
    turn_id = text("turnId")


class UsageRecord(Event):
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


class AssistantMessage(Event):
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
class ToolStart(Event):
    """``tool.execution_start``: a tool begins."""

    __slots__ = ()
    call_id = text("toolCallId")
    name = text("toolName")
    arguments = raw("arguments")
    mcp_server = text("mcpServerName")
    description = text("toolDescription", "description")


class ToolComplete(Event):
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


class ExternalToolRequested(Event):
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


class AgentSelected(Event):
    """``subagent.selected``: an agent was chosen; without ``agentId``, the main agent (``copilot --agent``)."""

    __slots__ = ()
    name = text("agentName")
    display_name = text("agentDisplayName")


class SubagentStarted(Event):
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


class SubagentEnded(Event):
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


# The class of each event type the loop reads; any other type is a plain Event.
CLASSES: dict[str, type[Event]] = {
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
