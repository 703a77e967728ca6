"""The coding agents' session logs: where each CLI writes them, and a package per CLI that reads them.

One package per agent, each the only place that knows its log's JSON names, none importing another:

* :mod:`.copilot` - GitHub Copilot CLI: ``~/.copilot/session-state/<session id>/events.jsonl``. Its typed events
  (:mod:`.copilot.events`) are the loop's inputs as they are: :mod:`.copilot.parse` reads a line into one, and
  :mod:`.copilot.translator` pairs each class with its loop handler.
* :mod:`.claude_code` - Claude Code: ``$CLAUDE_CONFIG_DIR/projects/<escaped cwd>/<session id>.jsonl`` (default
  ``~/.claude``), a sub-agent in ``<session id>/subagents/agent-<id>.jsonl`` beside its ``.meta.json``.
* :mod:`.codex` - Codex CLI: ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl`` (default
  ``~/.codex``), a sub-agent a thread with a rollout of its own.
* :mod:`.gemini` - Gemini CLI: ``$GEMINI_CLI_HOME/.gemini/tmp/<project>/chats/session-<time>-<id>.jsonl``
  (default ``~/.gemini``), a sub-agent in ``chats/<session id>/<agent id>.jsonl``.

Each reader turns one line into a view of :class:`copilot_otel.model.inputs.Event` (the loop's envelope, with
fields declared by the descriptors every reader shares, :mod:`.fields`: a wrong-typed field reads as absent and is
noted as a dropped value, an unknown record type is kept as a plain event) or a
:class:`~copilot_otel.model.records.BadLine`, and never raises. The other agents' views reach the loop through
their source's framer (:class:`LoopSource`: ``claude_code/framer.py``, ``codex/framer.py``, ``gemini/framer.py``),
which turns them into the neutral events of :mod:`copilot_otel.loop.neutral`; what the records mean for the agent
loop is in ``docs/other-agents.md``.

Discovery is cheap, as :func:`copilot_otel.sources.sessions.scan_root` is: names and ``stat`` only, no file content; a link
that leads out of the source's root is not followed (a session log is read only if it really is under the root).

:class:`Source`, :class:`AgentRoot` and :func:`agent_roots` are defined in the light :mod:`copilot_otel.settings.roots` (so
``status`` lists the log folders without loading the readers) and imported from here.
"""

from __future__ import annotations

import enum
import importlib
import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from .._platform import current
from ..common.errors import SourceError
from ..model.inputs import Dropped, Event
from ..model.records import BadLine, DropReason
from ..model.timestamps import timestamp_ns
from ..settings.roots import AgentRoot, Source, agent_roots
from .sessions import stays_inside
from .sidefiles import read_head

if TYPE_CHECKING:
    from ..loop.core import Translator

__all__ = [
    "AgentRoot",
    "Framer",
    "LogKind",
    "LoopSource",
    "Source",
    "SourceLog",
    "ToolOutcome",
    "agent_roots",
    "loop_source",
    "read_blob",
    "sniff",
    "source_root",
    "undecodable",
]


class LogKind(enum.Enum):
    """What one log file of a source holds."""

    SESSION = "session"
    """A session's main log (Claude Code) or a thread's rollout (Codex: a sub-agent's too, linked inside it)."""
    SUBAGENT = "subagent"
    """A Claude Code sub-agent's sidechain file, beside its ``.meta.json``."""


class ToolOutcome(enum.Enum):
    """How a tool call ended, as the source's log says it: ran and succeeded, ran and failed, or never ran."""

    OK = "ok"
    FAILED = "failed"
    DENIED = "denied"
    """A permission rule refused it: it never ran (Copilot's ``error.code`` ``denied``)."""
    INTERRUPTED = "interrupted"
    """The user stopped it (Ctrl-C while it ran; the turn was aborted)."""


@dataclass(frozen=True, slots=True)
class SourceLog:
    """One log file of a source, as discovery found it (from its path alone).

    Attributes:
        source: The agent that writes it.
        kind: A session's (or thread's) log, or a Claude Code sub-agent's file.
        session_id: The session (Claude Code) or thread (Codex) id, from the file's name.
        path: The JSONL file.
        agent_id: A sub-agent file's agent id (``agent-<id>.jsonl``); ``None`` otherwise.
        parent: The main log a sub-agent file belongs to (it may not exist yet); ``None`` otherwise.
    """

    source: Source
    kind: LogKind
    session_id: str
    path: Path
    agent_id: str | None = None
    parent: Path | None = None


def source_root(env: Mapping[str, str], variable: str, default: str) -> Path:
    """A source's home folder: ``env[variable]`` when set (``~`` expanded against ``env``), else ``~/default``."""
    value = env.get(variable, "").strip()
    home = current.home(env)
    if not value:
        return home / default
    if value == "~" or value.startswith("~/"):
        return home / value[2:]
    return Path(value).expanduser()


def walk_logs(root: Path, keep: Callable[[Path, str], SourceLog | None]) -> list[SourceLog]:
    """Every file under ``root`` that ``keep(folder, name)`` names a log, sorted by path.

    Links are followed only while they stay inside ``root`` (checked by real path, as
    :func:`copilot_otel.sources.sessions.scan_root` does), and each real folder is visited once, so a link loop ends.
    A missing ``root`` has no logs (the CLI may never have run); one that cannot be read is an error.

    Raises:
        SourceError: ``root`` exists but cannot be listed.
    """
    try:
        real_root = os.path.realpath(root)
        top = list(os.scandir(root))
    except FileNotFoundError:
        return []
    except NotADirectoryError as exc:
        raise SourceError(f"{root} is a file, not a folder") from exc
    except OSError as exc:
        raise SourceError(f"cannot read {root}: {exc.strerror}") from exc
    found: list[SourceLog] = []
    seen = {real_root}
    pending: list[tuple[Path, list[os.DirEntry[str]]]] = [(root, top)]
    while pending:
        folder, entries = pending.pop()
        for entry in entries:
            try:
                linked = entry.is_symlink()
                if linked and not stays_inside(entry.path, real_root):
                    continue  # a link out of the root: never read
                if entry.is_dir():
                    if linked:
                        real = os.path.realpath(entry.path)
                        if real in seen:
                            continue
                        seen.add(real)
                    pending.append((Path(entry.path), list(os.scandir(entry.path))))
                elif entry.is_file():
                    log = keep(folder, entry.name)
                    if log is not None:
                        found.append(log)
            except OSError:
                continue  # vanished or unreadable meanwhile: the next scan sees what is there
    return sorted(found, key=lambda log: str(log.path))


def undecodable(
    line: bytes, exc: orjson.JSONDecodeError, offset: int, end_offset: int, line_number: int
) -> BadLine:
    """The :class:`BadLine` of a line that is no JSON: not UTF-8, or not JSON (every source's reader says it this
    way)."""
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return BadLine(DropReason.INVALID_UTF8, offset, end_offset, line_number, "line is not valid UTF-8")
    return BadLine(DropReason.INVALID_JSON, offset, end_offset, line_number, str(exc)[:200])


def decode(line: bytes, offset: int, end_offset: int, line_number: int) -> dict[str, Any] | BadLine:
    """One line's JSON object with a non-empty string ``type`` (Claude Code's and Codex's lines have one), or why
    it is not one (the reasons :func:`undecodable` gives). Copilot's :func:`.copilot.parse.parse_line` makes the
    same check written out, for speed (its comment says what the call cost): a change here is made there too."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        return undecodable(line, exc, offset, end_offset, line_number)
    if not isinstance(obj, dict):
        return BadLine(DropReason.NOT_AN_OBJECT, offset, end_offset, line_number, type(obj).__name__)
    kind = obj.get("type")
    if not isinstance(kind, str) or not kind:
        return BadLine(DropReason.MISSING_FIELD, offset, end_offset, line_number, "no 'type'")
    return obj


def time_of(value: object, dropped: Dropped) -> int:
    """A record's ISO-8601 timestamp in Unix nanoseconds; 0 (noted in ``dropped`` as ``bad_timestamp``) when
    unusable, 0 when absent (some records have none: Claude Code's ``last-prompt``)."""
    return 0 if value is None else (timestamp_ns(value, dropped) or 0)


LineReader = Callable[[bytes, int, int, int], "Event | BadLine"]


def read_blob(blob: bytes, read_line: LineReader) -> Iterator[Event | BadLine]:
    """Each complete line of a whole file read by ``read_line`` (blank lines skipped, a ``\\r`` dropped); the
    last line only if it ends with a newline, as the tailer reads a file that is still being written."""
    start = 0
    number = 0
    while (end := blob.find(b"\n", start)) >= 0:
        number += 1
        line = blob[start:end].rstrip(b"\r")
        if line:
            yield read_line(line, start, end + 1, number)
        start = end + 1


# ---------------------------------------------------------------------------------------------- into the loop
class Framer(Protocol):
    """A source's records → the loop's events: a small pure state machine, one per log (see
    :mod:`copilot_otel.loop.neutral`). Its state goes into the checkpoint's context (:meth:`snapshot`)."""

    def frame(self, view: Event) -> list[Event]: ...

    def close(self) -> list[Event]:
        """What it still holds when the log's fold closes (a log cut while the CLI wrote a reply), so the loop
        closes it as unfinished instead of never hearing of it."""
        ...

    def snapshot(self) -> dict[str, Any]: ...

    # Optional (the pipeline looks for it): ``may_open(view) -> bool``, whether ``view`` may open a prompt while
    # one is open. The pipeline keeps the framer's state before a line only when no prompt is open or this says
    # yes (a restart re-reads a prompt from the state at its first line); without it, before every line.


@dataclass(frozen=True, slots=True)
class LoopSource:
    """What :class:`~copilot_otel.pipeline.Pipeline` needs to fold a source's log with the one agent loop.

    Attributes:
        source: The agent that writes the log.
        read_line: One line → the source's view of its record, or a :class:`~copilot_otel.model.records.BadLine`.
        framer: A new framer, from a :meth:`Framer.snapshot` when resuming (``None``: the log's start).
        translator: Which loop handler folds each event the framer gives.
        seed: What a log needs from beside it, read once when its fold starts (a Claude Code sub-agent's
            ``.meta.json``, a Gemini CLI project's ``.project_root``): the framer's first state under ``seed``;
            ``None``: nothing. A log resumed from a checkpoint takes its framer's snapshot instead.
        subagent_log: Where a sub-agent's own log is, from its parent's log and the name the framer gives it in
            :class:`~copilot_otel.loop.neutral.SubagentDone` (``None``: no such file could be its); the pipeline
            reads it for the sub-agent's calls. ``None``: the source's sub-agents write into their parent's log.
    """

    source: Source
    read_line: LineReader
    framer: Callable[[Mapping[str, Any] | None], Framer]
    translator: Translator
    seed: Callable[[Path], Mapping[str, Any] | None] | None = None
    subagent_log: Callable[[Path, str], Path | None] | None = None


# Each source's framer module and the name of its LoopSource there; imported when a log of that source is read
# (a Copilot-only run loads neither).
_FRAMERS: dict[Source, tuple[str, str]] = {
    Source.CLAUDE_CODE: (".claude_code.framer", "CLAUDE_CODE"),
    Source.CODEX: (".codex.framer", "CODEX"),
    Source.GEMINI: (".gemini.framer", "GEMINI"),
}


# Each source's LoopSource once looked up (``None``: its framer is not written): a backfill asks for every log.
_LOADED: dict[Source, LoopSource | None] = {}


def loop_source(source: Source) -> LoopSource | None:
    """What folds ``source``'s logs with the agent loop; ``None`` while its framer is not written (a module of
    its own, named in :data:`_FRAMERS`). Looked up once per source: the import machinery costs ≈ 20 µs a call,
    which a backfill of many small logs paid for each."""
    if source in _LOADED:
        return _LOADED[source]
    module_name, name = _FRAMERS[source]
    try:
        module = importlib.import_module(module_name, __name__)
    except ModuleNotFoundError as exc:
        if exc.name != __name__ + module_name:
            raise
        found = None
    else:
        found = getattr(module, name)
    _LOADED[source] = found
    return found


# How much of a log's start :func:`sniff` reads (a Copilot ``session.start`` line is ~1 KB).
SNIFF_BYTES = 8 * 1024
_TYPE = re.compile(rb'"type"\s*:\s*"([^"]*)"')
# Gemini CLI's header as it writes it (its keys in this order), for a first line longer than SNIFF_BYTES.
_GEMINI_HEADER = re.compile(rb'^\{"sessionId"\s*:\s*"[^"]*"\s*,\s*"projectHash"\s*:')


def sniff(path: Path) -> Source | None:
    """Which other agent wrote a log, from its first record; ``None`` for Copilot CLI's, or when the start says
    nothing (empty, unreadable, not JSON): the caller reads it as Copilot's.

    Copilot CLI's events are ``{type: "session.start", data: …}`` (dotted types, a ``data`` object); Codex's
    ``{timestamp, type, payload}``; Claude Code's neither (``type`` ``queue-operation``, ``user``, … with the
    record's fields beside it); Gemini CLI's log opens with a header that has no ``type`` at all
    (``{sessionId, projectHash, startTime, …}``). A first line longer than :data:`SNIFF_BYTES` (a long prompt,
    Codex's ``session_meta``) is told by its first ``"type"``, or by Gemini's header's first two keys. Read only
    for a flat ``.jsonl`` file: a Copilot session folder needs no look. A FIFO or device in a log's place is not
    read (:func:`copilot_otel.sources.sidefiles.read_head`).
    """
    head = read_head(path, "a log's first line", SNIFF_BYTES)
    if head is None:
        return None
    head = head.lstrip()
    end = head.find(b"\n")
    if end >= 0:
        try:
            obj = orjson.loads(head[:end])
        except orjson.JSONDecodeError:
            return None
        if not isinstance(obj, dict):
            return None
        if _is_gemini_header(obj):
            return Source.GEMINI
        if not isinstance(obj.get("type"), str):
            return None
        kind, payload, data = obj["type"].encode(), "payload" in obj, "data" in obj
    else:
        if _GEMINI_HEADER.match(head):
            return Source.GEMINI
        found = _TYPE.search(head)
        if found is None:
            return None
        # Codex's rollouts open with a ``session_meta`` line of ~40 KB (its base instructions).
        kind, payload, data = found.group(1), found.group(1) == b"session_meta", False
    if payload:
        return Source.CODEX
    if data or b"." in kind:
        return None  # Copilot CLI's
    return Source.CLAUDE_CODE


def _is_gemini_header(obj: Mapping[str, Any]) -> bool:
    """Gemini CLI's header line: a session id and a project hash, and no ``type`` (every other agent's first
    record has one)."""
    return (
        "type" not in obj
        and isinstance(obj.get("sessionId"), str)
        and isinstance(obj.get("projectHash"), str)
    )
