"""Gemini CLI's session logs, typed: the one module that knows their JSON names (observed in 0.61.0).

Where (``tests/fixtures/other-agents/gemini/README.md`` has what each recording shows)::

    $GEMINI_CLI_HOME/.gemini/tmp/<project>/chats/session-<YYYY-MM-DDTHH-MM>-<session id, 8 chars>.jsonl
                                          chats/<parent session id>/<agent id>.jsonl      (a sub-agent)

``GEMINI_CLI_HOME`` stands for the user's home (default ``~``); ``<project>`` is the project folder's slug. The CLI
appends to the file while it runs; ``--resume`` appends to the session's file (a second header line). Each line is
one of:

* the header ``{sessionId, projectHash, startTime, lastUpdated, kind}`` (``kind`` ``main`` or ``subagent``): read
  as :class:`Header` (type ``session``);
* a message ``{id, timestamp, type, content, …}`` (``type`` ``user`` or ``gemini``; ``info``, ``error`` and
  ``warning`` are the CLI's notes, kept as plain events). **A later line with the same ``id`` replaces the
  earlier one**: a gemini reply is written at the end of its stream, then again, whole, when its tool calls end
  (``toolCalls``) or its tokens come late. :class:`GeminiMessage`, :class:`UserMessage`;
* ``{"$set": {…}}``: metadata (``lastUpdated``, ``summary``, ``sessionId``; ``messages`` the whole list, which
  the CLI restates at the start, on resume, after compression or rollback). :class:`MetadataSet`;
* ``{"$rewindTo": id}``: the messages from ``id`` on were taken back (unrecorded yet). :class:`Rewind`.

:func:`read_line` turns a line into its view (the whole record is its ``data``; the envelope's ``id`` the message
``id``, else ``offset-<n>``), and a line that is no JSON object, or an object none of the above, into a
:class:`~copilot_otel.model.records.BadLine`. It never raises; a field of the wrong type reads as absent.

Tokens are the Gemini API's ``usageMetadata``: ``input`` (``promptTokenCount``) **includes** ``cached``;
``output`` (``candidatesTokenCount``) **excludes** ``thoughts``; ``tool`` is the tool-use prompt's, apart from
``input``.
"""

from __future__ import annotations

import contextlib
import enum
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson

from ...model.inputs import Dropped, Event
from ...model.records import BadLine, DropReason, RecordBase, record
from .. import LogKind, Source, SourceLog, ToolOutcome, source_root, time_of, undecodable, walk_logs
from ..fields import _dict, _int, _str, note_not_read, raw, text
from ..sessions import stays_inside
from ..sidefiles import read_lines, read_text
from ..tail import DEFAULT_MAX_LINE_BYTES

__all__ = [
    "CLASSES",
    "SOURCE",
    "FunctionResponse",
    "GeminiMessage",
    "Header",
    "MetadataSet",
    "Rewind",
    "Spawn",
    "Thought",
    "Tokens",
    "ToolCallRecord",
    "UserKind",
    "UserMessage",
    "default_root",
    "read_line",
    "scan",
    "spawn_of",
]

ENV_VAR = "GEMINI_CLI_HOME"
DEFAULT_DIR = ".gemini"
TMP = "tmp"
CHATS = "chats"
HEADER = "session"  # the envelope type of a header line (it has no type of its own)
SET = "$set"
REWIND = "$rewindTo"
SUBAGENT_KIND = "subagent"
SHELL_TOOL = "run_shell_command"
SUBAGENT_TOOL = "invoke_agent"
COMPLETE_TASK_TOOL = "complete_task"  # a sub-agent's last call: its result is the agent's
_SESSION_FILE = re.compile(r"^session-.*-(?P<short>[0-9a-f]{8})\.jsonl$")
# A shell command's exit, in its output (the call's ``status`` is ``success`` whatever the exit).
_EXIT_CODE = re.compile(r"^Exit Code: (?P<code>-?\d+)\s*$", re.MULTILINE)
# User records the CLI writes itself: the loop detection's note (then the prompt ends).
_HARNESS_PREFIXES = ("System: Potential loop detected",)
_DONE = {"success": ToolOutcome.OK, "error": ToolOutcome.FAILED, "cancelled": ToolOutcome.INTERRUPTED}


# The source value of Gemini's logs.
SOURCE = Source.GEMINI


# ---------------------------------------------------------------------------------------------- discovery
def default_root(env: Mapping[str, str]) -> Path:
    """Gemini CLI's folder: ``$GEMINI_CLI_HOME/.gemini`` (the variable stands for the home), else ``~/.gemini``."""
    return source_root(env, ENV_VAR, "") / DEFAULT_DIR


def scan(root: Path) -> list[SourceLog]:
    """Every session log and sub-agent log under ``root/tmp/*/chats``, sorted by path (names only, no content).

    A sub-agent's log is paired with its parent's when the parent's name (which holds the session id's first 8
    characters) is in the same ``chats`` folder.

    Raises:
        SourceError: ``root/tmp`` exists but cannot be listed.
    """
    logs = walk_logs(root / TMP, _log_of)
    sessions = {(log.path.parent, log.session_id): log.path for log in logs if log.kind is LogKind.SESSION}
    out = []
    for log in logs:
        if log.kind is LogKind.SUBAGENT:
            parent = sessions.get((log.path.parent.parent, log.session_id[:8]))
            log = SourceLog(log.source, log.kind, log.session_id, log.path, log.agent_id, parent)
        out.append(log)
    return out


def _log_of(folder: Path, name: str) -> SourceLog | None:
    if not name.endswith(".jsonl"):
        return None
    path = folder / name
    if folder.name == CHATS and folder.parent.parent.name == TMP:
        found = _SESSION_FILE.match(name)
        if found is None:
            return None
        return SourceLog(SOURCE, LogKind.SESSION, found.group("short"), path)
    if folder.parent.name == CHATS and folder.parent.parent.parent.name == TMP:
        return SourceLog(SOURCE, LogKind.SUBAGENT, folder.name, path, name[: -len(".jsonl")])
    return None


def is_session_log(path: Path) -> bool:
    """Whether ``path`` is named as a session's own log (``tmp/<project>/chats/session-…-<id>.jsonl``)."""
    return path.parent.name == CHATS and _SESSION_FILE.match(path.name) is not None


def subagent_logs(path: Path) -> list[Path]:
    """A session log's sub-agent logs (``chats/<session id>/*.jsonl`` beside it: the folder whose name starts
    with the 8 characters the log's name holds), sorted; links followed only while they stay in ``chats``. None
    when ``path`` is no session log, or its sub-agent folder cannot be listed (the session is read all the same).
    """
    found = _SESSION_FILE.match(path.name)
    if found is None or path.parent.name != CHATS:
        return []
    chats = path.parent
    try:
        real = os.path.realpath(chats)
        folders = [
            Path(e.path) for e in os.scandir(chats) if e.name.startswith(found.group("short")) and e.is_dir()
        ]
        logs = [
            Path(e.path) for f in folders for e in os.scandir(f) if e.name.endswith(".jsonl") and e.is_file()
        ]
    except OSError:
        return []
    return sorted(log for log in logs if stays_inside(log, real))


def subagent_log(parent: Path, agent_id: str) -> Path | None:
    """The log of the sub-agent ``agent_id`` the session log ``parent`` ran (``chats/<session id>/<agent id>.jsonl``,
    one of :func:`subagent_logs`); ``None`` when there is none."""
    name = agent_id + ".jsonl"
    return next((log for log in subagent_logs(parent) if log.name == name), None)


def parent_session_of(path: Path) -> str | None:
    """A sub-agent log's parent session id (its folder's name, ``chats/<id>/<agent>.jsonl``); ``None`` for a
    session's own log."""
    return path.parent.name if path.parent.parent.name == CHATS else None


# The marker Gemini CLI writes in each project's folder under tmp/ (its ProjectRegistry's ownership marker): the
# project's root, as the CLI normalises it (lower case on macOS and Windows, forward slashes).
PROJECT_ROOT_FILE = ".project_root"
PROJECT_ROOT_MAX_BYTES = 4096
_ABSOLUTE = re.compile(r"^(?:/|[A-Za-z]:[/\\])[^\x00\n\r]*$")


def project_root(path: Path) -> str | None:
    """The project folder a session's log (``tmp/<project>/chats/session-….jsonl``) ran in: its project folder's
    ``.project_root``, which the log itself never names (its header's ``projectHash`` is a hash of it). ``None``
    for a sub-agent's log, or when the marker is missing, refused (not a regular file, too large: said once) or
    holds no absolute path."""
    if path.parent.name != CHATS:
        return None
    text = read_text(
        path.parent.parent / PROJECT_ROOT_FILE, "Gemini CLI's .project_root", PROJECT_ROOT_MAX_BYTES
    )
    if text is None:
        return None
    root = text.strip()
    return root if _ABSOLUTE.match(root) else None


# ---------------------------------------------------------------------------------------------- nested values
@record
class Tokens(RecordBase):
    """A gemini message's ``tokens``: the Gemini API's usage (``input`` includes ``cached``; ``output`` excludes
    ``thoughts``; ``tool`` apart from ``input``)."""

    input: int
    output: int
    cached: int
    thoughts: int
    tool: int
    total: int | None


@record
class Thought(RecordBase):
    """One of a gemini message's ``thoughts`` (content)."""

    subject: str | None
    description: str | None


@record
class FunctionResponse(RecordBase):
    """A ``functionResponse`` part: a tool call's result as the model is sent it (``response`` is content)."""

    id: str | None
    name: str | None
    response: Mapping[str, Any]

    @property
    def output(self) -> str | None:
        return _str(self.response.get("output"))

    @property
    def error(self) -> str | None:
        return _str(self.response.get("error"))


@record
class ToolCallRecord(RecordBase):
    """One of a gemini message's ``toolCalls``: the call as it ran (``args``, ``results`` are content)."""

    id: str | None
    name: str | None
    args: Any
    status: str | None
    time_ns: int
    agent_id: str | None  # an invoke_agent call's sub-agent (its log's name)
    results: tuple[FunctionResponse, ...]
    result_display: str | None

    @property
    def outcome(self) -> ToolOutcome | None:
        """How it ended; ``None`` while it has not (``scheduled``, ``executing``, ``awaiting_approval``…). A shell
        command that exits non-zero failed (the CLI says ``success``)."""
        outcome = _DONE.get(self.status or "")
        if outcome is ToolOutcome.OK and self.exit_code not in (None, 0):
            return ToolOutcome.FAILED
        return outcome

    @property
    def exit_code(self) -> int | None:
        """A shell command's exit code, from its output's ``Exit Code: N``."""
        if self.name != SHELL_TOOL:
            return None
        for result in self.results:
            found = _EXIT_CODE.search(result.output or "")
            if found is not None:
                return int(found.group("code"))
        return None

    @property
    def error_message(self) -> str | None:
        """What the CLI says of a failure: the result's ``error``, else what it displayed."""
        for result in self.results:
            if result.error:
                return result.error
        return self.result_display

    @property
    def result_text(self) -> str | None:
        """The tool's output (or error) as the model got it (content)."""
        texts = [r.output or r.error or "" for r in self.results]
        return "".join(texts) or None


def _function_responses(content: Any) -> tuple[FunctionResponse, ...]:
    if not isinstance(content, list):
        return ()
    out = []
    for part in content:
        response = _dict(part).get("functionResponse")
        if isinstance(response, dict):
            out.append(
                FunctionResponse(
                    _str(response.get("id")), _str(response.get("name")), _dict(response.get("response"))
                )
            )
    return tuple(out)


def _text_of(content: Any) -> str:
    """A message's text: a string, or the ``text`` of its parts (thought parts left out)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p["text"]
            for p in content
            if isinstance(p, dict) and isinstance(p.get("text"), str) and not p.get("thought")
        )
    return ""


# ---------------------------------------------------------------------------------------------- records
class Header(Event):
    """The header line: the session (or sub-agent) the file is, and when it started; a resume writes another."""

    __slots__ = ()
    session_id = text("sessionId")
    project_hash = text("projectHash")
    start_time = text("startTime")
    kind = text("kind")
    directories = raw("directories")

    @property
    def subagent(self) -> bool:
        return self.kind == SUBAGENT_KIND


class MetadataSet(Event):
    """``$set``: metadata updated; ``messages`` (when present) restates the whole conversation."""

    __slots__ = ()
    values = raw(SET)

    @property
    def restates(self) -> bool:
        """Whether it restates the message list (start, resume, compression, rollback)."""
        return "messages" in _dict(self.values)

    @property
    def message_ids(self) -> tuple[str, ...]:
        """The ids of the messages it restates."""
        messages = _dict(self.values).get("messages")
        if not isinstance(messages, list):
            return ()
        return tuple([m["id"] for m in messages if isinstance(m, dict) and _str(m.get("id"))])


class Rewind(Event):
    """``$rewindTo``: the messages from this id on were taken back."""

    __slots__ = ()
    target = text(REWIND)


class Message(Event):
    """What ``user`` and ``gemini`` messages share."""

    __slots__ = ()
    content = raw("content")

    @property
    def plain_text(self) -> str:
        """The message's text (content: pass it through the content gate before keeping it)."""
        return _text_of(self.content)


class UserKind(enum.Enum):
    """What a ``user`` message is in the loop's terms."""

    PROMPT = "prompt"  # what a human typed (or, in a sub-agent's log, its task)
    TOOL_RESULTS = "tool_results"  # functionResponse parts: the results sent back to the model
    HARNESS = "harness"  # the CLI's own note (loop detection)


class UserMessage(Message):
    """``user``: a prompt, the tool results sent back, or the CLI's note (see :attr:`kind`)."""

    __slots__ = ()

    @property
    def function_responses(self) -> tuple[FunctionResponse, ...]:
        return _function_responses(self.content)

    @property
    def kind(self) -> UserKind:
        if self.function_responses:
            return UserKind.TOOL_RESULTS
        if self.plain_text.lstrip().startswith(_HARNESS_PREFIXES):
            return UserKind.HARNESS
        return UserKind.PROMPT


class GeminiMessage(Message):
    """``gemini``: one model reply (one model call), rewritten whole when its tool calls end."""

    __slots__ = ()
    model = text("model")

    @property
    def tokens(self) -> Tokens | None:
        t = self.data.get("tokens")
        if not isinstance(t, dict):
            return None
        d = self.dropped
        return Tokens(
            _int(t.get("input"), d) or 0,
            _int(t.get("output"), d) or 0,
            _int(t.get("cached"), d) or 0,
            _int(t.get("thoughts"), d) or 0,
            _int(t.get("tool"), d) or 0,
            _int(t.get("total"), d),
        )

    @property
    def thoughts(self) -> tuple[Thought, ...]:
        items = self.data.get("thoughts")
        if not isinstance(items, list):
            return ()
        return tuple(
            [Thought(_str(_dict(t).get("subject")), _str(_dict(t).get("description"))) for t in items]
        )

    @property
    def reasoning_text(self) -> str | None:
        """The thoughts as one text (content)."""
        parts = [" ".join(p for p in (t.subject, t.description) if p) for t in self.thoughts]
        return "\n".join(p for p in parts if p) or None

    @property
    def tool_calls(self) -> tuple[ToolCallRecord, ...]:
        items = self.data.get("toolCalls")
        if not isinstance(items, list):
            return ()
        out = []
        for item in items:
            c = _dict(item)
            display = c.get("resultDisplay")
            out.append(
                ToolCallRecord(
                    _str(c.get("id")),
                    _str(c.get("name")),
                    c.get("args"),
                    _str(c.get("status")),
                    time_of(c.get("timestamp"), self.dropped),
                    _str(c.get("agentId")),
                    _function_responses(c.get("result")),
                    display if isinstance(display, str) and display else None,
                )
            )
        return tuple(out)


# The class of each message type this module reads; any other type is a plain Event.
CLASSES: dict[str, type[Event]] = {
    "user": UserMessage,
    "gemini": GeminiMessage,
}
# Message types known and passed over on purpose (the CLI's notes to the user, as observed in 0.61.0); any other
# type is noted as not read (issue 31: drift is said).
PASSED_OVER = frozenset({"info", "warning", "error"})


def read_line(line: bytes, offset: int, end_offset: int, line_number: int) -> Event | BadLine:
    """One line (without its newline) → its record's view, or a :class:`BadLine`. Never raises."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        return undecodable(line, exc, offset, end_offset, line_number)
    if not isinstance(obj, dict):
        return BadLine(DropReason.NOT_AN_OBJECT, offset, end_offset, line_number, type(obj).__name__)
    dropped: Dropped = []
    cls: type[Event]
    if SET in obj:
        kind, cls, when = SET, MetadataSet, _dict(obj[SET]).get("lastUpdated")
    elif REWIND in obj:
        kind, cls, when = REWIND, Rewind, None
    elif isinstance(obj.get("type"), str) and obj["type"]:
        kind = obj["type"]
        cls, when = CLASSES.get(kind, Event), obj.get("timestamp")
        if cls is Event and kind not in PASSED_OVER:
            note_not_read(dropped, kind)  # Gemini's log names no CLI version: counted without one
    elif "sessionId" in obj:
        kind, cls, when = HEADER, Header, obj.get("startTime")
    else:
        return BadLine(DropReason.MISSING_FIELD, offset, end_offset, line_number, "no 'type'")
    uid = obj.get("id")
    return cls(
        kind,
        uid if isinstance(uid, str) and uid else f"offset-{offset}",
        time_of(when, dropped),
        obj,
        None,
        offset,
        end_offset,
        dropped,
    )


# ---------------------------------------------------------------------------------------------- a sub-agent's spawn
@record
class Spawn(RecordBase):
    """What a sub-agent's log needs from its parent's: the ``invoke_agent`` call that started it and the human
    prompt it ran in (``None`` each when the parent's log does not say, or not yet: the CLI writes the call's
    ``agentId`` when the sub-agent has finished)."""

    parent_session_id: str
    agent_id: str
    call_id: str | None
    prompt_id: str | None
    agent_name: str | None


# The most of a parent's log read to find a sub-agent's spawn, a line at a time (memory: a chunk and the longest
# line). Gemini CLI holds a whole session in memory; one of 256 MiB is far past any recorded.
PARENT_LOG_MAX_BYTES = 256 * 1024 * 1024


def spawn_of(path: Path) -> Spawn | None:
    """The spawn of the sub-agent whose log is ``path`` (``chats/<parent session id>/<agent id>.jsonl``), read from
    the parent's log beside it; ``None`` for a session's own log. A parent's log that is no regular file (a FIFO,
    a link to ``/dev/zero``) or is larger than :data:`PARENT_LOG_MAX_BYTES` is not read (said once, see
    :mod:`copilot_otel.sources.sidefiles`): the sub-agent is folded without its spawn, as while its call is unwritten."""
    parent = parent_session_of(path)
    if parent is None or not path.name.endswith(".jsonl"):
        return None
    agent = path.name[: -len(".jsonl")]
    for log in sorted(path.parent.parent.glob(f"session-*-{parent[:8]}.jsonl")):
        lines = read_lines(log, "a sub-agent's parent log", PARENT_LOG_MAX_BYTES, DEFAULT_MAX_LINE_BYTES)
        with contextlib.closing(lines):
            found = _spawn_in(lines, parent, agent)
        if found is not None:
            return found
    return Spawn(parent, agent, None, None, None)


def _spawn_in(lines: Iterator[tuple[bytes, int, int]], parent: str, agent: str) -> Spawn | None:
    """The spawn in the parent's log's ``lines``; when its call is not written yet (the sub-agent still runs), the
    prompt the parent runs now, which is the sub-agent's; ``None``: another session's log."""
    prompt_id: str | None = None
    for number, (line, start, end) in enumerate(lines, 1):
        view = read_line(line, start, end, number)
        cls = view.__class__
        if cls is Header:
            if view.session_id != parent:  # type: ignore[union-attr]  # checked by class
                return None  # another session whose id starts alike
        elif cls is UserMessage:
            if view.kind is UserKind.PROMPT:  # type: ignore[union-attr]
                prompt_id = view.id  # type: ignore[union-attr]
        elif cls is GeminiMessage:
            for call in view.tool_calls:  # type: ignore[union-attr]
                if call.agent_id == agent:
                    name = _str(_dict(call.args).get("agent_name"))
                    return Spawn(parent, agent, call.id, prompt_id, name)
    return Spawn(parent, agent, None, prompt_id, None)
