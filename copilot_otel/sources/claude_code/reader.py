"""Claude Code's session logs, typed: the one module that knows their JSON names (observed in 2.1.197, 2.1.332).

Where (``docs/other-agents.md`` has the whole mapping)::

    $CLAUDE_CONFIG_DIR/projects/<cwd, every non-alphanumeric character as '-'>/<session id>.jsonl
                                                  <session id>/subagents/agent-<agent id>.jsonl
                                                  <session id>/subagents/agent-<agent id>.meta.json

``CLAUDE_CONFIG_DIR`` defaults to ``~/.claude``; ``--resume`` appends to the session's file. Each line is one
record with a ``type``; the conversation's records (``user``, ``assistant``, ``attachment``, ``system``) carry
``uuid``, ``parentUuid``, ``timestamp``, ``sessionId``, ``isSidechain`` and, in a sub-agent's file, ``agentId``.

:func:`read_line` turns a line into the view of its type (the whole record is the view's ``data``; the envelope's
``id`` is the record's ``uuid``, else ``offset-<n>``; ``agent_id`` its ``agentId``), any other type into a plain
:class:`~copilot_otel.model.inputs.Event`, and a line that is no JSON object into a :class:`~copilot_otel.model.records.BadLine`.
It never raises; a field of the wrong type reads as absent (noted as a ``wrong_shape`` dropped value).

What the records say, as observed:

* a model call is written as one ``assistant`` record *per content block* (text, tool_use), each with the same
  ``message.id`` and the same ``message.usage``: one call per distinct ``message.id``; ``message.model``
  ``<synthetic>`` marks a record the CLI wrote itself (no model call);
* a tool call is a ``tool_use`` block (``id``, ``name``, ``input``); its end a ``tool_result`` block
  (``tool_use_id``, ``is_error``, ``content``) of a later ``user`` record, whose ``toolUseResult`` is the
  structured result; a permission rule's refusal is an error result that says ``Permission to use … has been
  denied.``;
* a human prompt is a ``queue-operation`` ``enqueue`` (``content``), then a ``user`` record with a new
  ``promptId`` (every ``user`` record of that prompt carries it);
* compaction: a ``system`` record of subtype ``compact_boundary`` (``compactMetadata.trigger`` manual/auto), then
  a ``user`` record with ``isCompactSummary``.

2.1.332 adds (``tests/fixtures/other-agents/claude-code-2.1.332/README.md``): ``requestRef`` in place of
``requestId``; ``permissionDecision`` on a refused call's result (:attr:`UserRecord.refused_by`); ``system``
``api_error`` per failed request attempt (:class:`ApiError`) after its ``api-request`` (:class:`ApiRequest`);
``attachment`` ``queued_command`` (:attr:`Attachment.queued_prompt`); a fork's copied history (``requestSessionId``,
:func:`read_fork`); ``custom-title`` and ``cost-state`` (:class:`CustomTitle`, :class:`CostState`); a background
sub-agent's ``<task-notification>`` under a new ``promptId`` (:attr:`UserRecord.task_notification`).
"""

from __future__ import annotations

import enum
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from ..._platform import current
from ...model.inputs import Dropped, Event, ToolRequest
from ...model.records import BadLine, RecordBase, record
from ...model.timestamps import timestamp_ns
from .. import LogKind, Source, SourceLog, ToolOutcome, decode, source_root, walk_logs
from ..fields import (
    _dict,
    _float,
    _int,
    _str,
    amount,
    count,
    flag,
    note_not_read,
    raw,
    text,
)
from ..sidefiles import read_whole

__all__ = [
    "CLASSES",
    "KNOWN_SUB_KINDS",
    "ApiError",
    "ApiRequest",
    "AssistantRecord",
    "CompactBoundary",
    "CostState",
    "CustomTitle",
    "ForkOrigin",
    "QueueOperation",
    "SubagentMeta",
    "ToolResult",
    "ToolUse",
    "Usage",
    "UserKind",
    "UserRecord",
    "default_root",
    "read_fork",
    "read_line",
    "read_meta",
    "scan",
    "tool_requests_of",
    "tool_uses_of",
]

ENV_VAR = "CLAUDE_CONFIG_DIR"
DEFAULT_DIR = ".claude"
PROJECTS = "projects"
SYNTHETIC_MODEL = "<synthetic>"  # message.model of a record the CLI wrote itself
_SUBAGENT_FILE = re.compile(r"^agent-(?P<id>[^/\\]+)\.jsonl$")
# A permission rule's refusal (``--disallowedTools``), the tool_result's text; the tool never ran.
_DENIED = re.compile(r"^(?:Error: )?Permission to use .* has been denied\.", re.DOTALL)
# The result of a tool the user stopped (Ctrl-C while it ran: recorded by tests/otheragents/record.py); then a user
# record "[Request interrupted by user for tool use]" follows. (An interactive refusal at the permission prompt may be
# worded the same way: not recorded yet.)
_INTERRUPTED = "The user doesn't want to proceed with this tool use."
_INTERRUPT_NOTE = "[Request interrupted by user"
# A background task's report (2.1.332): ``<task-notification><task-id>…<tool-use-id>toolu_…</tool-use-id>…``.
_TASK_NOTIFICATION = "task-notification"
_NOTIFIED_CALL = re.compile(r"<tool-use-id>([^<]{1,200})</tool-use-id>")
_NOTIFIED_TASK = re.compile(r"<task-id>([^<]{1,200})</task-id>")
# ``toolUseResult.status`` of an ``Agent`` call that started its sub-agent in the background.
_ASYNC_LAUNCHED = "async_launched"
# Wrappers of a local command's records (``/compact``): not what the human typed.
_COMMAND_PREFIXES = ("<command-name>", "<local-command-stdout>", "<local-command-caveat>")


# ---------------------------------------------------------------------------------------------- discovery
def default_root(env: Mapping[str, str]) -> Path:
    """Claude Code's config folder: ``$CLAUDE_CONFIG_DIR``, else ``~/.claude``."""
    return source_root(env, ENV_VAR, DEFAULT_DIR)


def scan(root: Path) -> list[SourceLog]:
    """Every session log and sub-agent file under ``root/projects``, sorted by path (names only, no content).

    Raises:
        SourceError: ``root/projects`` exists but cannot be listed.
    """
    return walk_logs(root / PROJECTS, _log_of)


def _log_of(folder: Path, name: str) -> SourceLog | None:
    if not name.endswith(".jsonl"):
        return None
    path = folder / name
    sub = _SUBAGENT_FILE.match(name)
    if sub is not None and folder.name == "subagents":
        session_folder = folder.parent
        return SourceLog(
            Source.CLAUDE_CODE,
            LogKind.SUBAGENT,
            session_folder.name,
            path,
            sub.group("id"),
            session_folder.with_name(session_folder.name + ".jsonl"),
        )
    if folder.parent.name != PROJECTS:
        return None  # deeper files that are no sub-agent's (tool results the CLI spills, …)
    return SourceLog(Source.CLAUDE_CODE, LogKind.SESSION, name[: -len(".jsonl")], path)


@record
class SubagentMeta(RecordBase):
    """A sub-agent's ``agent-<id>.meta.json``: what started it (the parent's ``Agent`` tool_use id)."""

    agent_type: str | None
    description: str | None
    tool_use_id: str | None
    spawn_depth: int | None


# A sub-agent's .meta.json is ~120 bytes (its type, description and the tool call that started it).
META_MAX_BYTES = 64 * 1024


def read_meta(path: Path) -> SubagentMeta | None:
    """The ``.meta.json`` beside a sub-agent file (``agent-<id>.jsonl``); ``None`` when missing or unreadable, or
    when it is no regular file of at most :data:`META_MAX_BYTES` (a FIFO or a link to ``/dev/zero`` in its place:
    said once, see :mod:`copilot_otel.sources.sidefiles`)."""
    meta = path.with_name(path.name[: -len(".jsonl")] + ".meta.json") if path.suffix == ".jsonl" else path
    blob = read_whole(meta, "a sub-agent's .meta.json", META_MAX_BYTES)
    if blob is None:
        return None
    try:
        obj = orjson.loads(blob)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(obj, dict):
        return None
    return SubagentMeta(
        _str(obj.get("agentType")),
        _str(obj.get("description")),
        _str(obj.get("toolUseId")),
        _int(obj.get("spawnDepth"), None),  # a file beside the log, no line of it: nothing to count against
    )


# A fork's copy of its parent's history starts with the copied first prompt's records (its system prompt snapshot
# among them, tens of kB): its first copied reply, which names the parent, is looked for this far into the file.
FORK_HEAD_BYTES = 256 * 1024
# The parent's log is read this far for its prompts' ids (a larger one links nothing).
PARENT_MAX_BYTES = 64 * 1024 * 1024
_REQUEST_SESSION = re.compile(rb'"requestSessionId":"([^"\\]{1,200})"')
_REQUEST_SESSION_KEY = b'"requestSessionId":"'


@record
class ForkOrigin(RecordBase):
    """Where a forked session's copied history comes from (``--fork-session``, 2.1.332): the parent session's id
    and the ``promptId`` of each of the parent's prompt records by ``uuid`` (the copy keeps the uuids and gives the
    copied records the fork's own ``promptId``)."""

    parent_session_id: str
    prompts: dict[str, str]


def read_fork(path: Path) -> ForkOrigin | None:
    """The origin of a forked session's log: its first copied ``assistant`` record's ``requestSessionId`` (within
    :data:`FORK_HEAD_BYTES`), and the prompts of the parent's log beside it; ``None`` for a log that is no fork,
    or whose parent's log is missing, unreadable or no regular file. Reads, never raises."""
    head = _read_capped(path, FORK_HEAD_BYTES)
    # Every session log's head is looked at: a byte search first (a few µs), the pattern only where it may match.
    at = head.find(_REQUEST_SESSION_KEY) if head else -1
    match = (
        (_REQUEST_SESSION.match(head, at) or _REQUEST_SESSION.search(head, at + 1))
        if head and at >= 0
        else None
    )
    if match is None:
        return None
    parent = match.group(1).decode("utf-8", "replace")
    if parent == path.stem:
        return None
    prompts: dict[str, str] = {}
    for line in (_read_capped(path.with_name(parent + ".jsonl"), PARENT_MAX_BYTES) or b"").splitlines():
        if b'"promptId"' not in line or b'"type":"user"' not in line:
            continue
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(obj, dict):
            continue
        uuid, prompt_id = obj.get("uuid"), obj.get("promptId")
        if isinstance(uuid, str) and isinstance(prompt_id, str):
            prompts[uuid] = prompt_id
    return ForkOrigin(parent, prompts)


def _read_capped(path: Path, limit: int) -> bytes | None:
    """Up to ``limit`` bytes of a regular file (never a FIFO or device in a log's place); ``None`` if none.

    Every session log's head is read so (:func:`read_fork`): a descriptor, not a file object (which costs a
    ``stat`` before, and a buffer and a terminal check in its open), and the file's size, not ``limit``, asked
    for (a read of a large limit allocates it first: a 14 kB log's head read with 256 kB asked for cost 3x the
    read of its size).
    """
    try:
        fd = current.open_regular(path)  # NotARegularFile (an OSError) for a FIFO or device: nothing read
    except OSError:
        return None
    try:
        left = min(limit, os.fstat(fd).st_size)
        parts: list[bytes] = []
        while left > 0 and (chunk := os.read(fd, left)):
            parts.append(chunk)
            left -= len(chunk)
        return parts[0] if len(parts) == 1 else b"".join(parts)
    except OSError:
        return None
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------------------------- nested values
@record
class Usage(RecordBase):
    """``message.usage`` of an assistant record: one model call's tokens (the Anthropic API's meaning:
    ``input_tokens`` excludes the cache's, which are counted apart)."""

    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    service_tier: str | None


@record
class ToolUse(RecordBase):
    """A ``tool_use`` block: the model asks for a tool (``input`` is content)."""

    id: str | None
    name: str | None
    input: Any


@record
class ToolResult(RecordBase):
    """A ``tool_result`` block: a tool call's end (``content`` is content)."""

    tool_use_id: str | None
    is_error: bool
    content: Any

    @property
    def outcome(self) -> ToolOutcome:
        if not self.is_error:
            return ToolOutcome.OK
        text = _text_of(self.content)
        if _DENIED.match(text):
            return ToolOutcome.DENIED
        return ToolOutcome.INTERRUPTED if text.startswith(_INTERRUPTED) else ToolOutcome.FAILED


def _text_of(content: Any) -> str:
    """The text of a message or block ``content``: a string, or the ``text`` of its text blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))
    return ""


def tool_requests_of(content: Any) -> tuple[ToolRequest, ...]:
    """The ``tool_use`` blocks of an assistant record's ``content`` as the loop's tool requests (what
    :func:`tool_uses_of` reads, without a view of each block between)."""
    return tuple(
        [
            ToolRequest(_str(b.get("id")), _str(b.get("name")), b.get("input"))
            for b in _blocks(content, "tool_use")
        ]
    )


def tool_uses_of(content: Any) -> tuple[ToolUse, ...]:
    """The ``tool_use`` blocks of an assistant record's ``content`` (for a reader that holds the content already)."""
    return tuple(
        [
            ToolUse(_str(b.get("id")), _str(b.get("name")), b.get("input"))
            for b in _blocks(content, "tool_use")
        ]
    )


def _blocks(content: Any, kind: str) -> list[Mapping[str, Any]]:
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == kind]


def _tool_results(blocks: list[Mapping[str, Any]]) -> tuple[ToolResult, ...]:
    return tuple(
        [ToolResult(_str(b.get("tool_use_id")), b.get("is_error") is True, b.get("content")) for b in blocks]
    )


# ---------------------------------------------------------------------------------------------- records
class Record(Event):
    """What the conversation's records share (``user``, ``assistant``, ``attachment``, ``system``)."""

    __slots__ = ()
    parent_uuid = text("parentUuid")
    session_id = text("sessionId")
    cwd = text("cwd")
    version = text("version")
    git_branch = text("gitBranch")
    sidechain = flag("isSidechain")
    meta = flag("isMeta")


class QueueOperation(Event):
    """``queue-operation``: ``enqueue`` (``content``: the prompt as typed, ``/compact`` too) then ``dequeue``; or
    ``remove`` (2.1.332, ``reason`` ``absorbed_mid_turn``): a prompt delivered into the running one instead."""

    __slots__ = ()
    operation = text("operation")
    content = raw("content")

    @property
    def prompt(self) -> str | None:
        """The prompt a human queued (``None`` for a dequeue)."""
        return _str(self.content) if self.operation == "enqueue" else None

    @property
    def removed(self) -> str | None:
        """The prompt taken off the queue unprompted (``remove``): it will name no prompt of its own."""
        return _str(self.content) if self.operation == "remove" else None


class UserKind(enum.Enum):
    """What a ``user`` record is in the loop's terms."""

    PROMPT = "prompt"  # what a human typed (or a sub-agent's first message, in its sidechain file)
    TOOL_RESULTS = "tool_results"
    COMMAND = "command"  # a local command's records (``<command-name>``, ``<local-command-stdout>``…)
    INTERRUPT = "interrupt"  # ``[Request interrupted by user…]``: the CLI notes an abort
    COMPACT_SUMMARY = "compact_summary"
    META = "meta"  # the CLI's own messages (``Continue from where you left off.``, caveats)


class UserRecord(Record):
    """``user``: a prompt, tool results, a compaction summary or the CLI's own messages (see :attr:`kind`)."""

    __slots__ = ()
    prompt_id = text("promptId")  # the human prompt every user record of it belongs to
    prompt_source = text("promptSource")  # set on the record of what was typed
    compact_summary = flag("isCompactSummary")
    # 2.1.332: the CLI's record that goes with the next one, under its promptId (the meta record before a
    # ``<task-notification>``)
    turn_companion = flag("turnCompanion")
    origin_kind = text("origin", "kind")  # 2.1.332: ``human``, ``task-notification``
    turn_origin = text("turnOrigin")  # 2.1.332: ``sdk``, ``human``, ``task_notification``
    source_tool_assistant_uuid = text("sourceToolAssistantUUID")
    content = raw("message", "content")
    tool_use_result = raw("toolUseResult")  # the structured result (a string ``Error: …`` on errors)

    @property
    def tool_results(self) -> tuple[ToolResult, ...]:
        return _tool_results(_blocks(self.content, "tool_result"))

    @property
    def kind(self) -> UserKind:
        return self.kind_and_results()[0]

    def kind_and_results(self) -> tuple[UserKind, tuple[ToolResult, ...]]:
        """:attr:`kind` and, for tool results, :attr:`tool_results` (else none), from one read of the content:
        the framer asks both of every ``user`` record."""
        if self.compact_summary:
            return UserKind.COMPACT_SUMMARY, ()
        if self.meta:
            return UserKind.META, ()
        content = self.content
        results = _blocks(content, "tool_result")
        if results:
            return UserKind.TOOL_RESULTS, _tool_results(results)
        text = _text_of(content).lstrip()
        if text.startswith(_COMMAND_PREFIXES):
            return UserKind.COMMAND, ()
        if text.startswith(_INTERRUPT_NOTE):
            return UserKind.INTERRUPT, ()
        return UserKind.PROMPT, ()

    @property
    def plain_text(self) -> str:
        """The record's text (content: pass it through the content gate before keeping it)."""
        return _text_of(self.content)

    @property
    def task_notification(self) -> bool:
        """A background task's report to the main agent (2.1.332: a background sub-agent that finished): a
        ``user`` record under a new ``promptId`` that no human wrote (``origin.kind`` ``task-notification``,
        ``turnOrigin`` ``task_notification``, content ``<task-notification>…``)."""
        return (
            self.origin_kind == _TASK_NOTIFICATION
            or self.turn_origin == "task_notification"
            or (not self.meta and _text_of(self.content).lstrip().startswith("<" + _TASK_NOTIFICATION + ">"))
        )

    @property
    def notified_task_id(self) -> str | None:
        """The task a task notification reports on (``<task-id>``): a background sub-agent's agent id."""
        match = _NOTIFIED_TASK.search(_text_of(self.content))
        return match.group(1) if match is not None else None

    @property
    def notified_call_id(self) -> str | None:
        """The ``Agent`` call whose background sub-agent a task notification reports on (``<tool-use-id>``)."""
        match = _NOTIFIED_CALL.search(_text_of(self.content))
        return match.group(1) if match is not None else None

    @property
    def refused_by(self) -> str | None:
        """Who refused the tool call this record answers (2.1.332: ``permissionDecision.decision`` ``reject``),
        in words: ``plan mode`` (``reasonCode`` ``mode:<mode>``), ``PreToolUse hook`` (``hook:<event>``), ``auto-mode
        classifier``, ``permission rule``, ``user``; ``None`` when nothing was refused or the record does not say.

        ``toolDenialKind`` is not read: it names the plan mode's refusal ``user-rejected`` and the hook's
        ``permission-rule`` (recorded), while ``permissionDecision`` says what decided.
        """
        decision = _dict(self.data.get("permissionDecision"))
        if decision.get("decision") != "reject":
            return None
        source = _str(decision.get("source")) or ""
        kind = _str(decision.get("reasonType")) or ""
        code = _str(decision.get("reasonCode")) or ""
        what, _, detail = code.partition(":")
        if source == "hook" or kind == "hook" or what == "hook":
            return f"{detail} hook" if what == "hook" and detail else "hook"
        if what == "mode" and detail:
            return f"{detail} mode"
        if kind == "classifier" or what == "classifier":
            return "auto-mode classifier" if "auto-mode" in code else "classifier"
        if source.startswith("user") or kind.startswith("user"):
            return "user"
        if kind == "rule" or source in ("config", "policy"):
            return "permission rule"
        return source or kind or "permission rule"

    @property
    def interrupted(self) -> bool:
        """A Bash result that says it was interrupted (``toolUseResult.interrupted``)."""
        result = self.tool_use_result
        return isinstance(result, dict) and result.get("interrupted") is True

    @property
    def subagent_id(self) -> str | None:
        """The sub-agent an ``Agent`` call's result names (``toolUseResult.agentId``)."""
        return _str(_dict(self.tool_use_result).get("agentId"))

    @property
    def subagent_launched(self) -> bool:
        """An ``Agent`` call's result that says its sub-agent runs on in the background (2.1.332: ``isAsync`` /
        ``status`` ``async_launched``): it reports back later, with a task notification."""
        result = self.tool_use_result
        return (
            result.__class__ is dict
            and (  # decoded JSON: a dict or no object (not the costlier Mapping check)
                result.get("isAsync") is True or result.get("status") == _ASYNC_LAUNCHED
            )
        )

    @property
    def subagent_tokens(self) -> int | None:
        """The sub-agent's total tokens, as the ``Agent`` call's result sums them."""
        return _int(_dict(self.tool_use_result).get("totalTokens"), self.dropped)

    @property
    def subagent_tool_calls(self) -> int | None:
        return _int(_dict(self.tool_use_result).get("totalToolUseCount"), self.dropped)


class AssistantRecord(Record):
    """``assistant``: one content block of a model's reply (group by :attr:`message_id`), or a record the CLI
    wrote itself (:attr:`synthetic`)."""

    __slots__ = ()
    message_id = text("message", "id")  # the API message id: one model call
    # The request that produced the reply: ``requestId`` (the API's, up to 2.1.197 at least), else ``requestRef``
    # (2.1.332, which writes no ``requestId``: the ``id`` of the ``api-request`` record the CLI wrote for it).
    request_id = text("requestId")
    request_ref = text("requestRef")
    model = text("message", "model")
    stop_reason = text("message", "stop_reason")
    content = raw("message", "content")
    request_session_id = text("requestSessionId")  # on a reply copied into a fork: the session it was made in
    # A model call that failed for good (retries exhausted): a synthetic record saying so, e.g. ``rate_limit`` / 429
    # (recorded by tests/otheragents/record.py: 1 + 10 attempts over 175 s, then this record and exit 1).
    api_error = flag("isApiErrorMessage")
    api_error_status = count("apiErrorStatus")
    error = text("error")

    @property
    def request(self) -> str | None:
        """The request's id: ``requestId``, else ``requestRef``."""
        return self.request_id or self.request_ref

    def reply(self) -> tuple[str | None, Any]:
        """:attr:`model` and :attr:`content` from one look at ``message`` (the framer reads both of every assistant
        record): the same values, a model of the wrong type read through its field, which notes it."""
        message = self.data.get("message")
        if message.__class__ is not dict:
            return self.model, self.content
        model = message.get("model")
        if model.__class__ is str:
            model = model or None
        elif model is not None:
            model = self.model
        return model, message.get("content")

    def call_ids(self) -> tuple[str | None, str | None]:
        """:attr:`message_id` and :attr:`stop_reason` from one look at ``message``, as :meth:`reply` reads."""
        message = self.data.get("message")
        if message.__class__ is not dict:
            return self.message_id, self.stop_reason
        message_id, stop = message.get("id"), message.get("stop_reason")
        if message_id.__class__ is str:
            message_id = message_id or None
        elif message_id is not None:
            message_id = self.message_id
        if stop.__class__ is str:
            stop = stop or None
        elif stop is not None:
            stop = self.stop_reason
        return message_id, stop

    @property
    def synthetic(self) -> bool:
        """Written by the CLI, not returned by a model (``message.model`` ``<synthetic>``)."""
        return self.model == SYNTHETIC_MODEL

    @property
    def usage(self) -> Usage | None:
        u = _dict(self.data.get("message")).get("usage")
        if not isinstance(u, dict):
            return None
        return Usage(
            _int(u.get("input_tokens"), self.dropped) or 0,
            _int(u.get("output_tokens"), self.dropped) or 0,
            _int(u.get("cache_creation_input_tokens"), self.dropped) or 0,
            _int(u.get("cache_read_input_tokens"), self.dropped) or 0,
            _str(u.get("service_tier")),
        )

    @property
    def tool_uses(self) -> tuple[ToolUse, ...]:
        return tool_uses_of(self.content)


class SystemRecord(Record):
    """``system``: the CLI's own notes (``subtype``); ``compact_boundary`` is read by :class:`CompactBoundary`."""

    __slots__ = ()
    subtype = text("subtype")
    level = text("level")
    logical_parent_uuid = text("logicalParentUuid")
    # ``turn_duration`` (interactive, 2.1.332): background sub-agents of the loop still running when it ended
    pending_background = count("pendingBackgroundAgentCount")


class CompactBoundary(SystemRecord):
    """``system`` ``compact_boundary``: the context was compacted (``trigger`` ``manual`` for ``/compact``,
    ``auto`` when the CLI did it itself, e.g. after a prompt-too-long error)."""

    __slots__ = ()
    trigger = text("compactMetadata", "trigger")
    pre_tokens = count("compactMetadata", "preTokens")
    duration_ms = count("compactMetadata", "durationMs")


class ApiError(SystemRecord):
    """``system`` ``api_error`` (2.1.332): one failed attempt of a model request, retried after ``retryInMs``
    (``source`` ``request_retry``); the attempt's ``api-request`` record comes just before it, the retry's after.
    ``error.status`` is the HTTP status (absent for a connection refused: ``error.connection.code`` then)."""

    __slots__ = ()
    status = count("error", "status")
    connection_code = text("error", "connection", "code")
    formatted = text("error", "formatted")
    retry_attempt = count("retryAttempt")
    max_retries = count("maxRetries")
    retry_in_ms = count("retryInMs")


class ApiRequest(Event):
    """``api-request`` (2.1.332): one model request as sent, an attempt of it included (``id``: the
    ``requestRef`` of the replies it produced; ``params.model``); dated when it was sent."""

    __slots__ = ()
    request_id = text("id")
    model = text("params", "model")


class Attachment(Record):
    """``attachment``: context the CLI adds (``attachment.type``: ``file``, ``skill_listing``, …).

    2.1.332's ``queued_command``: a prompt sent while a turn ran (``queue-operation`` ``enqueue``), delivered into
    the running prompt after a tool result (no new ``promptId``); dated when it was **enqueued**, earlier than the
    records around it, and followed by a ``queue-operation`` ``remove`` (``reason`` ``absorbed_mid_turn``).
    """

    __slots__ = ()
    attachment_type = text("attachment", "type")
    queued_text = raw("attachment", "prompt")

    @property
    def queued_prompt(self) -> str | None:
        """The text of a ``queued_command`` delivered into the running prompt (content); ``None`` for others."""
        return _str(self.queued_text) if self.attachment_type == "queued_command" else None


class CustomTitle(Event):
    """``custom-title`` (``-n``, ``/rename``): the name the user gave the session (no timestamp; 2.1.332 writes it
    at the start and again after each loop)."""

    __slots__ = ()
    title = text("customTitle")


class CostState(Event):
    """``cost-state`` (2.1.332): the CLI's own running accounting of the session, written after each run (no
    timestamp): its cost in USD, the time spent in API requests (with and without the retries') and in tools, in
    ms, and ``modelUsage`` per model (tokens, ``costUSD``)."""

    __slots__ = ()
    cost_usd = amount("totalCostUSD")
    api_duration_ms = amount("totalAPIDuration")
    api_duration_without_retries_ms = amount("totalAPIDurationWithoutRetries")
    tool_duration_ms = amount("totalToolDuration")
    duration_ms = amount("totalDuration")

    @property
    def model_costs(self) -> tuple[tuple[str, float], ...]:
        """Each model's ``costUSD`` (a model whose cost is not a number is left out)."""
        models = _dict(self.data.get("modelUsage"))
        costs = ((name, _float(_dict(usage).get("costUSD"), self.dropped)) for name, usage in models.items())
        return tuple([(name, cost) for name, cost in costs if cost is not None])


class LastPrompt(Event):
    """``last-prompt``: the prompt to offer on ``--resume`` (no timestamp)."""

    __slots__ = ()
    last_prompt = raw("lastPrompt")
    leaf_uuid = text("leafUuid")


# The class of each record type this module reads; any other type is a plain Event.
CLASSES: dict[str, type[Event]] = {
    "queue-operation": QueueOperation,
    "user": UserRecord,
    "assistant": AssistantRecord,
    "system": SystemRecord,
    "attachment": Attachment,
    "last-prompt": LastPrompt,
    "api-request": ApiRequest,
    "custom-title": CustomTitle,
    "cost-state": CostState,
}


# The view of a ``system`` record by its ``subtype`` (any other: :class:`SystemRecord`).
_SYSTEM: dict[str, type[SystemRecord]] = {"compact_boundary": CompactBoundary, "api_error": ApiError}


# Kinds of the records whose ``type`` says too little (``type.<subtype>``, ``attachment.<attachment.type>``,
# ``queue-operation.<operation>``) that this module knows: read, or passed over on purpose. A sub-kind the framer
# comes to read must be named here too (a view class of its own, as CompactBoundary, makes it known by itself).
KNOWN_SUB_KINDS = frozenset(
    {
        "system.compact_boundary",
        "queue-operation.enqueue",
        "queue-operation.dequeue",  # the enqueue says what was queued
        "queue-operation.remove",  # 2.1.332: a queued prompt absorbed into the running one
        "system.turn_duration",  # 2.1.332, interactive: the loop is over
        "system.api_error",  # 2.1.332: a failed attempt of a model call (its view: ApiError)
        "attachment.queued_command",  # 2.1.332: a queued prompt delivered into the running one
        # Context the CLI adds for the model (2.1.197): no step of the loop, and content.
        "attachment.file",
        "attachment.skill_listing",
        "attachment.agent_listing_delta",
        "attachment.task_reminder",
    }
)
# The field that names each such record's sub-kind (an attachment's is ``attachment.type``).
_SUB_KIND = {"system": "subtype", "queue-operation": "operation", "attachment": "type"}


def _note_sub_kind(obj: Mapping[str, Any], kind: str, dropped: Dropped) -> None:
    """Note a ``system``, ``attachment`` or ``queue-operation`` record of a sub-kind not in
    :data:`KNOWN_SUB_KINDS` as not read (issue 31: drift is said)."""
    holder = _dict(obj.get("attachment")) if kind == "attachment" else obj
    sub = holder.get(_SUB_KIND[kind])
    if isinstance(sub, str) and sub and f"{kind}.{sub}" not in KNOWN_SUB_KINDS:
        note_not_read(dropped, f"{kind}.{sub}", obj.get("version"))


def read_line(line: bytes, offset: int, end_offset: int, line_number: int) -> Event | BadLine:
    """One line (without its newline) → its record's view, or a :class:`BadLine`. Never raises.

    A record of a kind this module does not know (no view, not in :data:`KNOWN_SUB_KINDS`) is noted as not read
    (:func:`~copilot_otel.sources.fields.note_not_read`, with the ``version`` it names), which costs a known record
    nothing but three class checks.
    """
    obj = decode(line, offset, end_offset, line_number)
    if isinstance(obj, BadLine):
        return obj
    kind: str = obj["type"]
    cls = CLASSES.get(kind, Event)
    if cls is SystemRecord:
        subtype = obj.get("subtype")
        cls = _SYSTEM.get(subtype, SystemRecord) if isinstance(subtype, str) else SystemRecord
    uuid = obj.get("uuid")
    agent = obj.get("agentId")
    dropped: Dropped = []
    if cls is Event:
        note_not_read(dropped, kind, obj.get("version"))
    elif cls is SystemRecord or cls is Attachment or cls is QueueOperation:
        _note_sub_kind(obj, kind, dropped)
    ts = obj.get("timestamp")  # time_of, inlined: one call less per line
    return cls(
        kind,
        uuid if isinstance(uuid, str) and uuid else f"offset-{offset}",
        0 if ts is None else (timestamp_ns(ts, dropped) or 0),
        obj,
        agent if isinstance(agent, str) and agent else None,
        offset,
        end_offset,
        dropped,
    )
