"""Codex CLI's rollout files, typed: the one module that knows their JSON names (observed in 0.171.0).

Where (``docs/other-agents.md`` has the whole mapping)::

    $CODEX_HOME/sessions/YYYY/MM/DD/rollout-<local time>-<thread id>.jsonl

``CODEX_HOME`` defaults to ``~/.codex``; ``codex exec resume`` appends to the thread's file; a sub-agent is a thread
of its own, with its own rollout, whose ``session_meta`` names the parent thread. Each line is
``{timestamp, ordinal, type, payload}``; ``response_item`` and ``event_msg`` records say what they are in
``payload.type``.

:func:`read_line` turns a line into the view of its kind, with the payload as the view's ``data``. The envelope's
``type`` is the record's ``type``, joined with ``payload.type`` for the two kinds that have one
(``event_msg.task_started``, ``response_item.function_call``); ``id`` is the item's own id where it has one (a
``call_id``, a ``turn_id``, a ``response_id``), else ``offset-<n>``. Any other kind is kept as a plain
:class:`~copilot_otel.model.inputs.Event`; a line that is no JSON object is a :class:`~copilot_otel.model.records.BadLine`.
It never raises; a field of the wrong type reads as absent (noted as a ``wrong_shape`` dropped value).

What the records say, as observed:

* a turn (one per human prompt; ``turn_id``) is ``event_msg.task_started`` … ``event_msg.task_complete`` (with
  ``error`` when it failed) or ``event_msg.turn_aborted``; its prompt the first ``item_completed`` ``UserMessage``;
* a model call is one ``token_usage_record`` (``response_id``, ``usage``), the compaction's summarization call too;
* a tool call is a ``response_item.function_call`` / ``custom_tool_call`` (``call_id``) and its ``…_output``; an
  ``item_completed`` with the same id (``CommandExecution``: ``exit_code``; ``FileChange``; ``CollabAgentToolCall``:
  ``receiver_thread_ids``) is its structured end; an execpolicy refusal is an output ``exec_command failed: …
  Rejected(…)`` with no ``CommandExecution``;
* compaction: a ``compacted`` record, then an ``item_completed`` ``ContextCompaction``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import orjson

from ...model.inputs import Dropped, Event
from ...model.records import BadLine, RecordBase, record
from .. import LogKind, Source, SourceLog, ToolOutcome, decode, source_root, time_of, walk_logs
from ..fields import _dict, _int, _str, count, note_not_read, note_version, raw, text
from ..sessions import stays_inside
from ..sidefiles import read_head

__all__ = [
    "CLASSES",
    "Compacted",
    "FunctionCall",
    "FunctionCallOutput",
    "ItemCompleted",
    "Message",
    "SessionMeta",
    "TaskComplete",
    "TaskStarted",
    "TokenCount",
    "TokenUsage",
    "TurnAborted",
    "TurnContext",
    "Usage",
    "default_root",
    "read_line",
    "scan",
]

ENV_VAR = "CODEX_HOME"
DEFAULT_DIR = ".codex"
SESSIONS = "sessions"
_ROLLOUT = re.compile(
    r"^rollout-.*-(?P<id>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.jsonl$", re.IGNORECASE
)
_EXIT = re.compile(r"^Process exited with code (-?\d+)$", re.MULTILINE)
# An execpolicy rule's refusal: the command never ran (``exec_command failed: CreateProcess { message:
# "Rejected(...)" }``).
_REJECTED = re.compile(r"^exec_command failed: .*\bRejected\(", re.DOTALL)
_PATCH_FAILED = "apply_patch verification failed"
# A command the user stopped (Ctrl-C; the turn then ends with ``turn_aborted``): recorded by
# tests/otheragents/record.py.
_ABORTED = re.compile(r"^aborted by user$", re.MULTILINE)
# ``response_item`` user messages the CLI writes itself (not prompts): these open with a tag.
_NOTIFICATION = re.compile(r"^\s*<subagent_notification>\s*(\{.*\})\s*</subagent_notification>", re.DOTALL)
_HARNESS_TAGS = ("<environment_context>", "<subagent_notification>", "<turn_aborted>", "<user_instructions>")


# ---------------------------------------------------------------------------------------------- discovery
def default_root(env: Mapping[str, str]) -> Path:
    """Codex CLI's home: ``$CODEX_HOME``, else ``~/.codex``."""
    return source_root(env, ENV_VAR, DEFAULT_DIR)


def scan(root: Path) -> list[SourceLog]:
    """Every rollout file under ``root/sessions`` (any depth: ``YYYY/MM/DD``), sorted by path; the thread id is
    the file name's trailing UUID. Names only: which thread spawned which is in the files (:class:`SessionMeta`).

    Raises:
        SourceError: ``root/sessions`` exists but cannot be listed.
    """
    return walk_logs(root / SESSIONS, _log_of)


def thread_id(path: Path) -> str | None:
    """A rollout's thread id, from its file name (``rollout-<time>-<thread id>.jsonl``); ``None``: not a rollout."""
    log = _log_of(path.parent, path.name)
    return None if log is None else log.session_id


_THREAD = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)


def thread_log(parent: Path, thread: str) -> Path | None:
    """The rollout of the thread ``thread`` (a sub-agent the rollout ``parent`` spawned): in the parent's date
    folder, else in one of the next two days' (a thread spawned before midnight and begun after), looked up by
    name, never by listing every day. ``None`` when there is none, or ``thread`` is no thread id (it is the log's
    data: never a pattern or a way into another folder); a link out of ``sessions`` is not followed."""
    if _THREAD.fullmatch(thread) is None:
        return None
    name = f"rollout-*-{thread}.jsonl"
    folders = [parent.parent]
    bound = parent.parent
    if len(parent.parents) > 3 and parent.parents[3].name == SESSIONS:
        bound = parent.parents[3]
        try:
            day = date(int(parent.parents[2].name), int(parent.parents[1].name), int(parent.parent.name))
            folders += [
                bound / f"{d.year:04d}" / f"{d.month:02d}" / f"{d.day:02d}"
                for d in (day + timedelta(days=1), day + timedelta(days=2))
            ]
        except (ValueError, OverflowError):  # not a YYYY/MM/DD folder, or its last days (9999-12-31)
            pass
    real = os.path.realpath(bound)
    for folder in folders:
        try:
            found = sorted(p for p in folder.glob(name) if stays_inside(p, real))
        except OSError:  # a day's folder that cannot be listed: not there, as far as this can tell
            continue
        if found:
            return found[0]
    return None


def _log_of(folder: Path, name: str) -> SourceLog | None:
    match = _ROLLOUT.match(name)
    if match is None:
        return None
    return SourceLog(Source.CODEX, LogKind.SESSION, match.group("id").lower(), folder / name)


# How much of a rollout's start :func:`root_session` reads: ``session_meta``'s ids come first, its ~40 KB of base
# instructions last.
HEAD_BYTES = 4096
_SESSION_ID = re.compile(rb'"session_id"\s*:\s*"([^"]+)"')


def root_session(path: Path) -> str | None:
    """The session a rollout's thread belongs to: its ``session_meta``'s ``session_id``, which a sub-agent's thread
    shares with the thread that spawned it (at any depth, the root's), read from the file's first 4 KB; ``None``:
    unreadable, not a regular file (said once) or not said (then the thread is a session of its own)."""
    head = read_head(path, "a rollout's session_meta", HEAD_BYTES)
    if head is None:
        return None
    found = _SESSION_ID.search(head.split(b"\n", 1)[0])
    return found.group(1).decode("utf-8", "replace").lower() if found else None


# ---------------------------------------------------------------------------------------------- nested values
@record
class Usage(RecordBase):
    """One model response's tokens (the OpenAI Responses API's meaning: ``input_tokens`` includes the cached
    ones, ``output_tokens`` the reasoning ones)."""

    input_tokens: int
    cached_input_tokens: int
    cache_write_input_tokens: int
    output_tokens: int
    reasoning_output_tokens: int
    total_tokens: int


def _usage(value: Any, dropped: Dropped) -> Usage | None:
    if not isinstance(value, dict):
        return None
    g = value.get
    return Usage(
        _int(g("input_tokens"), dropped) or 0,
        _int(g("cached_input_tokens"), dropped) or 0,
        _int(g("cache_write_input_tokens"), dropped) or 0,
        _int(g("output_tokens"), dropped) or 0,
        _int(g("reasoning_output_tokens"), dropped) or 0,
        _int(g("total_tokens"), dropped) or 0,
    )


def _text_of(content: Any) -> str:
    """The text of a message's ``content`` parts (``input_text`` / ``output_text`` / ``text`` / ``Text``)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))


# ---------------------------------------------------------------------------------------------- records
class SessionMeta(Event):
    """``session_meta``: the thread (``id``), where and by what it runs, and for a sub-agent its parent."""

    __slots__ = ()
    thread_id = text("id")
    # The session a thread belongs to: its own id for a thread a human started, the root thread's for a
    # sub-agent's (every ``token_usage_record`` of the child repeats it).
    session_id = text("session_id")
    cwd = text("cwd")
    branch = text("git", "branch")
    commit = text("git", "commit_hash")
    cli_version = text("cli_version")
    originator = text("originator")
    model_provider = text("model_provider")
    thread_source = text("thread_source")  # ``user`` or ``subagent``
    nickname = text("agent_nickname")

    @property
    def spawn(self) -> Mapping[str, Any]:
        """``source.subagent.thread_spawn`` (``{}`` for a thread a human started: ``source`` is ``exec``…)."""
        return _dict(_dict(_dict(self.data.get("source")).get("subagent")).get("thread_spawn"))

    @property
    def parent_thread_id(self) -> str | None:
        return _str(self.data.get("parent_thread_id")) or _str(self.spawn.get("parent_thread_id"))

    @property
    def depth(self) -> int | None:
        return _int(self.spawn.get("depth"), self.dropped)


class TurnContext(Event):
    """``turn_context``: the turn's settings (model, approval policy, sandbox)."""

    __slots__ = ()
    turn_id = text("turn_id")
    model = text("model")
    cwd = text("cwd")
    approval_policy = text("approval_policy")


class TaskStarted(Event):
    """``event_msg.task_started``: a turn begins (a sub-agent's names the spawning turn as ``parent_turn_id``)."""

    __slots__ = ()
    turn_id = text("turn_id")
    parent_turn_id = text("turn_attribution", "parent_turn_id")
    root_turn_id = text("root_turn_id")
    model_context_window = count("model_context_window")


class TaskComplete(Event):
    """``event_msg.task_complete``: the turn ended; ``error`` set when it failed (e.g. the context window)."""

    __slots__ = ()
    turn_id = text("turn_id")
    error_message = text("error", "message")
    duration_ms = count("duration_ms")
    time_to_first_token_ms = count("time_to_first_token_ms")
    last_agent_message = raw("last_agent_message")

    @property
    def _error_info(self) -> Any:
        return _dict(self.data.get("error")).get("codex_error_info")

    @property
    def error_kind(self) -> str | None:
        """What failed: ``codex_error_info``, a name (``context_window_exceeded``) or an object named by its one key
        (``response_too_many_failed_attempts``, when the retries of a 429 ran out)."""
        info = self._error_info
        if isinstance(info, dict):
            return next((k for k in info if isinstance(k, str) and k), None)
        return _str(info)

    @property
    def error_status(self) -> int | None:
        """The HTTP status of the last failed attempt, where the error names one (``http_status_code``)."""
        info = self._error_info
        if not isinstance(info, dict):
            return None
        return next(
            (
                s
                for v in info.values()
                if (s := _int(_dict(v).get("http_status_code"), self.dropped)) is not None
            ),
            None,
        )


class TurnAborted(Event):
    """``event_msg.turn_aborted``: the turn was cancelled (the user interrupted it)."""

    __slots__ = ()
    turn_id = text("turn_id")
    reason = text("reason")


class ItemCompleted(Event):
    """``event_msg.item_completed``: an item of the turn is done (``item.type``: ``UserMessage``,
    ``AgentMessage``, ``CommandExecution``, ``FileChange``, ``CollabAgentToolCall``, ``ContextCompaction``…);
    a tool's item has the tool call's ``call_id`` as its ``id``."""

    __slots__ = ()
    turn_id = text("turn_id")
    thread_id = text("thread_id")
    item_type = text("item", "type")
    item_id = text("item", "id")
    status = text("item", "status")
    exit_code = count("item", "exit_code")
    tool = text("item", "tool")  # CollabAgentToolCall: spawn_agent, wait, close_agent
    content = raw("item", "content")
    prompt = raw("item", "prompt")  # CollabAgentToolCall spawn_agent: the sub-agent's task (content)
    model = text("item", "model")  # CollabAgentToolCall spawn_agent: the sub-agent's model
    started_at_ms = count("started_at_ms")
    completed_at_ms = count("completed_at_ms")

    @property
    def plain_text(self) -> str:
        """A message item's text (content: pass it through the content gate before keeping it)."""
        return _text_of(self.content)

    @property
    def receiver_thread_ids(self) -> tuple[str, ...]:
        """The threads a ``CollabAgentToolCall`` addressed (for ``spawn_agent``: the sub-agent it started)."""
        ids = _dict(self.data.get("item")).get("receiver_thread_ids")
        return tuple([i for i in ids if isinstance(i, str) and i]) if isinstance(ids, list) else ()

    @property
    def nicknames(self) -> dict[str, str]:
        """A ``CollabAgentToolCall``'s ``receiver_agents``: each addressed thread's nickname."""
        agents = _dict(self.data.get("item")).get("receiver_agents")
        if not isinstance(agents, list):
            return {}
        return {
            a["thread_id"]: a["agent_nickname"]
            for a in agents
            if isinstance(a, dict)
            and isinstance(a.get("thread_id"), str)
            and isinstance(a.get("agent_nickname"), str)
        }

    @property
    def final_states(self) -> dict[str, str]:
        """A ``CollabAgentToolCall``'s ``agents_states`` that are final: thread → how it ended (``completed``, or
        the name of another end), from a state written as ``{"<end>": <final message>}``; a state still under
        way is a plain string (``pending_init``, ``running``) and is left out."""
        states = _dict(self.data.get("item")).get("agents_states")
        if not isinstance(states, dict):
            return {}
        return {
            thread: next(iter(state))
            for thread, state in states.items()
            if isinstance(thread, str)
            and isinstance(state, dict)
            and len(state) == 1
            and isinstance(next(iter(state)), str)
        }


class TokenUsage(Event):
    """``token_usage_record``: one model response, with its usage (and the turn's and thread's sums)."""

    __slots__ = ()
    turn_id = text("turn_id")
    thread_id = text("thread_id")
    response_id = text("response_id")

    @property
    def usage(self) -> Usage | None:
        return _usage(self.data.get("usage"), self.dropped)


class TokenCount(Event):
    """``event_msg.token_count``: the running totals after a model response, and the context window."""

    __slots__ = ()
    model_context_window = count("info", "model_context_window")

    @property
    def last(self) -> Usage | None:
        return _usage(_dict(self.data.get("info")).get("last_token_usage"), self.dropped)


class Message(Event):
    """``response_item.message``: model-visible history (``role`` developer, user or assistant)."""

    __slots__ = ()
    role = text("role")
    content = raw("content")

    @property
    def plain_text(self) -> str:
        return _text_of(self.content)

    @property
    def harness(self) -> bool:
        """A message the CLI wrote itself (environment context, a sub-agent's notification, an abort note)."""
        return self.role == "developer" or self.plain_text.lstrip().startswith(_HARNESS_TAGS)

    @property
    def notified_thread(self) -> tuple[str, str] | None:
        """A ``<subagent_notification>`` (a sub-agent ended): its thread (``agent_path``) and how it ended (the key
        of its ``status``, e.g. ``completed``); ``None`` for any other message."""
        if self.role != "user":
            return None
        match = _NOTIFICATION.match(self.plain_text)
        if match is None:
            return None
        try:
            body = orjson.loads(match.group(1))
        except orjson.JSONDecodeError:
            return None
        thread = body.get("agent_path") if isinstance(body, dict) else None
        status = _dict(body.get("status")) if isinstance(body, dict) else {}
        if not isinstance(thread, str) or not thread:
            return None
        end = next((k for k in status if isinstance(k, str)), "completed")
        return thread, end


class FunctionCall(Event):
    """``response_item.function_call`` / ``custom_tool_call``: the model asks for a tool (``arguments`` or, for a
    freeform tool like ``apply_patch``, ``input``: content)."""

    __slots__ = ()
    call_id = text("call_id")
    name = text("name")
    namespace = text("namespace")  # e.g. ``multi_agent_v1`` for spawn_agent / wait_agent / close_agent

    @property
    def arguments(self) -> Any:
        return self.data.get("arguments" if self.type.endswith(".function_call") else "input")


class FunctionCallOutput(Event):
    """``response_item.function_call_output`` / ``custom_tool_call_output``: a tool's result as the model sees it."""

    __slots__ = ()
    call_id = text("call_id")
    output = raw("output")

    @property
    def plain_text(self) -> str:
        output = self.output
        if isinstance(output, dict):  # a structured output: its content
            output = output.get("content")
        return _text_of(output)

    @property
    def exit_code(self) -> int | None:
        """A shell's exit code as the output states it (``Process exited with code N``)."""
        match = _EXIT.search(self.plain_text)
        return int(match.group(1)) if match else None

    @property
    def outcome(self) -> ToolOutcome:
        """From the output alone (a ``CommandExecution``'s ``exit_code``, when there is one, says the same)."""
        text = self.plain_text
        if _REJECTED.match(text):
            return ToolOutcome.DENIED
        if _ABORTED.search(text):
            return ToolOutcome.INTERRUPTED
        exit_code = self.exit_code
        if (exit_code is not None and exit_code != 0) or text.startswith(
            (_PATCH_FAILED, "exec_command failed")
        ):
            return ToolOutcome.FAILED
        return ToolOutcome.OK


class Compacted(Event):
    """``compacted``: the history was replaced by a summary (``replacement_history``), mid-turn or by command."""

    __slots__ = ()
    message = raw("message")

    @property
    def replaced_items(self) -> int | None:
        history = self.data.get("replacement_history")
        return len(history) if isinstance(history, list) else None


# The class of each record kind this module reads; any other kind is a plain Event.
CLASSES: dict[str, type[Event]] = {
    "session_meta": SessionMeta,
    "turn_context": TurnContext,
    "event_msg.task_started": TaskStarted,
    "event_msg.task_complete": TaskComplete,
    "event_msg.turn_aborted": TurnAborted,
    "event_msg.item_completed": ItemCompleted,
    "event_msg.token_count": TokenCount,
    "token_usage_record": TokenUsage,
    "response_item.message": Message,
    "response_item.function_call": FunctionCall,
    "response_item.custom_tool_call": FunctionCall,
    "response_item.function_call_output": FunctionCallOutput,
    "response_item.custom_tool_call_output": FunctionCallOutput,
    "compacted": Compacted,
}
_TWO_LEVEL = frozenset({"event_msg", "response_item"})
# The payload key that names a record, per kind, for the envelope's id (else its offset).
_ID_KEYS = ("call_id", "response_id", "id")


def read_line(line: bytes, offset: int, end_offset: int, line_number: int) -> Event | BadLine:
    """One line (without its newline) → its record's view, or a :class:`BadLine`. Never raises."""
    obj = decode(line, offset, end_offset, line_number)
    if isinstance(obj, BadLine):
        return obj
    kind: str = obj["type"]
    payload = obj.get("payload")
    data: dict[str, Any] = payload if isinstance(payload, dict) else {}
    if kind in _TWO_LEVEL:
        inner = data.get("type")
        if isinstance(inner, str) and inner:
            kind = f"{kind}.{inner}"
    record_id = next((v for v in map(data.get, _ID_KEYS) if isinstance(v, str) and v), f"offset-{offset}")
    dropped: Dropped = []
    cls = CLASSES.get(kind, Event)
    if cls is Event:  # a kind not read (the log's cli_version dates it: the pipeline counts it per version)
        note_not_read(dropped, kind)
    elif cls is SessionMeta:  # the version a sub-agent's rollout names (it starts no session of its own)
        note_version(dropped, data.get("cli_version"))
    return cls(
        kind, record_id, time_of(obj.get("timestamp"), dropped), data, None, offset, end_offset, dropped
    )
