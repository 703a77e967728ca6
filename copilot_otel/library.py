"""The library entry point: what a session did, as neutral records, for scripts, notebooks and reports.

    >>> import copilot_otel
    >>> session = copilot_otel.read_session("~/.copilot/session-state/<id>")
    >>> [p.outcome for p in session.prompts]
    >>> sum(c.usage.input or 0 for c in session.model_calls)  # None: a count the log did not give

The records are the agent loop's own (:mod:`copilot_otel.model.activity`): the same stages ``replay``, ``run`` and
``show`` run (:class:`copilot_otel.pipeline.Pipeline`), stopping before any vocabulary. Nothing is sent anywhere;
content is kept only as far as ``settings.content`` allows (by default none).

Discovery lives here too, for ``replay``, ``show`` and ``report``: every enabled agent's log folder
(:func:`discover`, the ``agents`` setting), another agent's home given as a path (``~/.claude``, ``~/.codex``,
``~/.gemini``) expanded into its logs, and a session id looked up in every agent's folder (:func:`resolve_targets`).
A Claude Code or Gemini CLI session's sub-agent files are read with it (:func:`read_session`), or, for ``replay``,
listed beside it: each is folded alone, rooted under the parent's tool call (loop rule A).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .common.errors import SourceError, UnreadableError
from .loop.agentloop import FoldSettings
from .model.activity import (
    AgentRun,
    ModelCall,
    PromptRun,
    Record,
    SelfReport,
    SessionShutdown,
    ToolCall,
    Turn,
)
from .model.records import BadLine
from .pipeline import COPILOT_ROOT, KeptLines, Pipeline, Step, fold_events
from .settings.config import SETTINGS, Config
from .settings.roots import AGENT_TITLES
from .sources import AgentRoot, LogKind, Source, SourceLog, agent_roots, loop_source, sniff
from .sources.claude_code import reader as claude_code
from .sources.codex import reader as codex
from .sources.gemini import reader as gemini
from .sources.sessions import (
    SessionFile,
    require_session_folder,
    resolve,
    scan_root,
    stays_inside,
    unreadable_error,
    unreadable_sessions,
)

__all__ = [
    "AGENT_TITLES",
    "COPILOT",
    "Discovery",
    "SessionRecords",
    "agent_of",
    "discover",
    "grouped_ids",
    "home_relative",
    "iter_sessions",
    "not_read_in",
    "other_agent_logs",
    "read_log",
    "read_session",
    "resolve_targets",
    "setting_flag",
    "source_logs",
    "sub_logs",
    "subagent_logs",
]

logger = logging.getLogger(__name__)

#: The ``agents`` setting's name for GitHub Copilot CLI (the others are :class:`~copilot_otel.sources.Source`'s).
COPILOT = "copilot"


@dataclass
class SessionRecords:
    """Everything one session log says, as records in the order their work completed.

    Attributes:
        session: Which log (id, file, folder).
        records: Every activity record.
        drops: The lines that could not be read (each with its reason, offset and line number).
        lines: Lines with data read from the log and its sub-agents' logs, the dropped ones excepted (as replay
            and the daemon count them).
    """

    session: SessionFile
    records: list[Record] = field(default_factory=list)
    drops: list[BadLine] = field(default_factory=list)
    lines: int = 0
    subagent_files: list[Path] = field(default_factory=list)
    """A Claude Code session's sub-agent files read with it (their records are in ``records``)."""

    @property
    def session_id(self) -> str:
        return self.session.session_id

    @property
    def agent(self) -> str:
        """Which coding agent wrote the log (:func:`agent_of`)."""
        return agent_of(self.session)

    @property
    def prompts(self) -> list[PromptRun]:
        return [r for r in self.records if isinstance(r, PromptRun)]

    @property
    def own_title(self) -> str | None:
        """The title the log itself gives its session (the last said: Claude Code's ``-n``), if any."""
        return next((r.title for r in reversed(self.records) if isinstance(r, SelfReport) and r.title), None)

    @property
    def own_accounting(self) -> SelfReport | None:
        """The CLI's own accounting of the session (the last, cumulative), if its log keeps one."""
        return next(
            (r for r in reversed(self.records) if isinstance(r, SelfReport) and r.cost_usd is not None), None
        )

    @property
    def model_calls(self) -> list[ModelCall]:
        return [r for r in self.records if isinstance(r, ModelCall)]

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [r for r in self.records if isinstance(r, ToolCall)]

    @property
    def turns(self) -> list[Turn]:
        return [r for r in self.records if isinstance(r, Turn)]

    @property
    def agents(self) -> list[AgentRun]:
        return [r for r in self.records if isinstance(r, AgentRun)]

    @property
    def shutdowns(self) -> list[SessionShutdown]:
        return [r for r in self.records if isinstance(r, SessionShutdown)]


def read_session(
    target: str | Path, settings: FoldSettings | None = None, *, root: str | Path | None = None
) -> SessionRecords:
    """Read one session log (a folder, its ``events.jsonl``, a legacy flat file, or an id under ``root``); a
    Claude Code session's ``.jsonl`` (or a sub-agent's file) is read through its own framer, into the same records,
    and a session's sub-agent files with it (each folded alone: its records hang under the parent's tool call).

    Raises:
        SourceError: the target is not a session log, or cannot be read.
    """
    sessions = resolve([os.path.expanduser(str(target))], Path(root).expanduser() if root else None)
    if len(sessions) != 1:
        raise SourceError(f"{target}: expected one session log, found {len(sessions)}")
    return _read(sessions[0], settings or FoldSettings())


def iter_sessions(
    targets: list[str | Path], settings: FoldSettings | None = None, *, root: str | Path | None = None
) -> Iterator[SessionRecords]:
    """Read every session log under ``targets`` (folders, files, session-state roots, Claude Code's or Codex's
    folder), one at a time; a Claude Code session with its sub-agents' files."""
    settings = settings or FoldSettings()
    for session in resolve_targets(
        [os.path.expanduser(str(t)) for t in targets], Path(root).expanduser() if root else None
    ):
        yield _read(session, settings)


def read_log(session: SessionFile, settings: FoldSettings | None = None) -> SessionRecords:
    """Read a session log already found (:func:`discover`, :func:`resolve_targets`): named as it was found (a
    Codex thread by its id, each log with its agent), with a Claude Code session's sub-agent files.

    Raises:
        SourceError: The log cannot be read.
    """
    return _read(session, settings or FoldSettings())


def _read(session: SessionFile, settings: FoldSettings) -> SessionRecords:
    out = SessionRecords(session)
    out.subagent_files = sub_logs(session)
    kept = KeptLines()

    def keep(step: Step) -> int:
        out.records.extend(step.records)
        return 0

    for one in [session, *(SessionFile.from_path(path) for path in out.subagent_files)]:
        pipeline = Pipeline.for_session(one, settings, project=False)
        # read in chunks, only the records kept; what becomes of each line is decided where replay and the daemon
        # decide it (Pipeline.take), so the library counts a log's lines as they do
        pipeline.take(fold_events(one, pipeline), str(one.path), kept, keep)
    out.drops, out.lines = kept.bad_lines, kept.lines_read
    return out


# How many of each agent's newest logs :func:`not_read_in` reads: the newest were written by the newest CLI.
NOT_READ_LOGS = 20


def not_read_in(
    sessions: Iterable[SessionFile], newest: int = NOT_READ_LOGS
) -> dict[tuple[str, str | None], dict[str, int]]:
    """Drift on disk (``doctor``): the records of kinds their reader does not read in each agent's ``newest`` logs
    (by modification time), per (agent, CLI version): records by kind. A log that cannot be read is passed over
    (``doctor`` says so in its own line)."""
    by_agent: dict[str, list[tuple[float, SessionFile]]] = {}
    for session in sessions:
        try:
            mtime = session.path.stat().st_mtime
        except OSError:
            continue
        by_agent.setdefault(agent_of(session), []).append((mtime, session))
    found: dict[tuple[str, str | None], dict[str, int]] = {}
    settings = FoldSettings()
    for logs in by_agent.values():
        logs.sort(key=lambda item: (item[0], str(item[1].path)), reverse=True)
        for _mtime, session in logs[:newest]:
            pipeline = Pipeline.for_session(session, settings, project=False)
            try:
                for _step in pipeline.feed_file(session.path):
                    pass
            except SourceError:
                continue
            pipeline.close("file_ended")
            for note in pipeline.take_not_read(final=True):
                kinds = found.setdefault((note.agent, note.cli_version), {})
                kinds[note.kind] = kinds.get(note.kind, 0) + note.records
    return found


# ---------------------------------------------------------------------------------------------- discovery
def agent_of(session: SessionFile) -> str:
    """Which coding agent wrote a log: what discovery knew from its folder; else Copilot's for a session folder
    or a flat file in ``session-state`` (no look, as the pipeline decides); else what its first record says."""
    if session.agent:
        return session.agent
    if session.folder is not None or session.path.parent.name == COPILOT_ROOT:
        return COPILOT
    source = sniff(session.path)
    return COPILOT if source is None else source.value


def sub_logs(session: SessionFile) -> list[Path]:
    """The sub-agents' logs read with ``session``: those discovery grouped with it (Codex's child threads), else
    those beside it (:func:`subagent_logs`)."""
    if session.subagents is not None:
        return list(session.subagents)
    return subagent_logs(session.path) if session.folder is None else []


def grouped_ids(session: SessionFile) -> list[str]:
    """The ids of the sub-agents' threads discovery grouped with ``session`` (Codex's): ids ``show`` also resolves,
    which a listing's short ids must not be prefixes of."""
    return [tid for path in session.subagents or () if (tid := codex.thread_id(path)) is not None]


def subagent_logs(path: Path) -> list[Path]:
    """A Claude Code session log's sub-agent files (``<session id>/subagents/agent-<id>.jsonl`` beside it), or
    a Gemini CLI session log's (``chats/<session id>/<agent id>.jsonl``), sorted; links are followed only while
    they stay in the session's folder. None for any other log."""
    if gemini.is_session_log(path):
        return gemini.subagent_logs(path)
    # as text, not pathlib: a cached report asks this of every log (5,000 Claude Code logs: 0.26 s with Path)
    name = os.fspath(path)
    folder = os.path.join(name[: -len(".jsonl")], "subagents")
    if not name.endswith(".jsonl") or not os.path.isdir(folder):
        return []
    real = os.path.realpath(path.parent)
    try:
        found = [
            Path(entry.path)
            for entry in os.scandir(folder)
            if entry.name.startswith("agent-") and entry.name.endswith(".jsonl") and entry.is_file()
        ]
    except OSError:
        return []  # the session is read; a sub-agent folder that cannot be listed adds nothing
    return sorted(sub for sub in found if stays_inside(sub, real))


def _as_session(log: SourceLog) -> SessionFile:
    """A discovered log as a session: a Claude Code session's id is its file name, a Codex thread's the
    rollout's trailing UUID; a sub-agent's file is named as a path names it (``agent-<id>``)."""
    if log.kind is LogKind.SUBAGENT:
        named = SessionFile.from_path(log.path)
        return SessionFile(named.session_id, log.path, None, log.source.value)
    return SessionFile(log.session_id, log.path, None, log.source.value)


# Each other agent's discovery (its home → its logs, by name) and the folder under its home that holds them.
_SCANNERS = {Source.CLAUDE_CODE: claude_code.scan, Source.CODEX: codex.scan, Source.GEMINI: gemini.scan}
_LOG_FOLDERS = (
    (Source.CLAUDE_CODE, claude_code.PROJECTS),
    (Source.CODEX, codex.SESSIONS),
    (Source.GEMINI, gemini.TMP),
)


def source_logs(source: Source, home: Path, subagents: bool = True) -> list[SourceLog]:
    """The logs under another agent's home (Claude Code's and Gemini's sub-agent files only when ``subagents``), by
    name.

    Raises:
        SourceError: Its log folder is there but cannot be listed.
    """
    logs = _SCANNERS[source](home)
    return [log for log in logs if subagents or log.kind is LogKind.SESSION]


def _scan(source: Source, home: Path, subagents: bool) -> list[SessionFile]:
    sessions = [_as_session(log) for log in source_logs(source, home, subagents)]
    return sessions if subagents or source is not Source.CODEX else _codex_sessions(sessions)


def _codex_sessions(threads: list[SessionFile]) -> list[SessionFile]:
    """Codex's threads as sessions: a sub-agent's thread (its rollout names another root session) is read with
    that session, as Claude Code's sub-agent files are, so it is no session, prompt or row of its own; one whose
    root is not there (deleted, or moved) stays a session of its own."""
    roots = {thread.session_id: thread for thread in threads}
    children: dict[str, list[Path]] = {}
    alone: list[SessionFile] = []
    for thread in threads:
        root = codex.root_session(thread.path)
        if root is not None and root != thread.session_id and root in roots:
            children.setdefault(root, []).append(thread.path)
        else:
            alone.append(thread)
    return [dataclasses.replace(s, subagents=tuple(children.get(s.session_id, ()))) for s in alone]


def subagent_parts(logs: Sequence[SessionFile]) -> set[Path]:
    """The sub-agents' logs among ``logs`` listed one by one (as ``replay`` folds them, and ``doctor`` counts them):
    Claude Code's and Gemini's sub-agent files beside a session log that is there, and Codex's child threads
    whose root session is there. Each is part of that session, as ``show`` and ``report`` read it, never a
    session of its own; one whose session is not among ``logs`` stays a session, as it does there."""
    listed = {log.path for log in logs}
    parts: set[Path] = set()
    threads: list[SessionFile] = []
    for log in logs:
        if agent_of(log) == Source.CODEX.value:
            threads.append(log)
        else:
            parts.update(sub for sub in sub_logs(log) if sub in listed)
    for session in _codex_sessions(threads):
        parts.update(session.subagents or ())
    return parts


def other_agent_logs(target: str | Path, *, subagents: bool) -> list[SessionFile] | None:
    """Another agent's home or log folder given as a path, as the logs under it; ``None``: it is neither (or
    holds none: then the target resolves as a Copilot path and says what is wrong with it).

    Claude Code's home (``~/.claude``, holding ``projects/``) or its ``projects`` folder; Codex's home
    (``~/.codex``, holding ``sessions/``) or its ``sessions`` folder; Gemini CLI's home (``~/.gemini``, holding
    ``tmp/``) or its ``tmp`` folder. ``subagents``: Claude Code's and Gemini's sub-agent files too (``replay``
    folds each alone; ``show`` and ``report`` read them with their session).

    Raises:
        SourceError: The folder is there but cannot be listed.
    """
    path = Path(os.path.expanduser(str(target)))
    for source, folder in _LOG_FOLDERS:
        home = path.parent if path.name == folder else path
        if (home / folder).is_dir() and (logs := _scan(source, home, subagents)):
            return logs
    return None


@dataclass
class Discovery:
    """What the default folders hold: every agent's folder (``roots``, in the ``agents`` setting's order, those
    switched off included), the logs found in the enabled ones (only ``agent``'s when given), and the sessions
    there that cannot be read."""

    roots: list[AgentRoot]
    agent: str | None = None
    sessions: list[SessionFile] = field(default_factory=list)
    unreadable: list[UnreadableError] = field(default_factory=list)
    bad: list[SessionFile] = field(default_factory=list)
    """Copilot sessions whose log is there but cannot be read (a listing shows them with the reason)."""
    unfolded: list[AgentRoot] = field(default_factory=list)
    """Folders whose logs this version cannot fold yet (a source with no framer): left out, and said."""

    def warn_unfolded(self) -> None:
        """One warning line per folder left out because its agent's logs cannot be folded yet."""
        for root in self.unfolded:
            logger.warning(
                "left out %s: this version cannot fold %s logs yet", root.logs, AGENT_TITLES[root.agent]
            )

    @property
    def looked_in(self) -> list[AgentRoot]:
        """The folders read (the enabled agents', only ``agent``'s when given)."""
        return [root for root in self.roots if root.enabled and self.agent in (None, root.agent)]

    @property
    def found(self) -> list[AgentRoot]:
        """The enabled agents' folders that are there."""
        return [root for root in self.looked_in if root.found]

    @property
    def read(self) -> list[AgentRoot]:
        """The folders whose logs were listed: there, and of an agent this version can fold."""
        return [root for root in self.found if root not in self.unfolded]

    def nothing_found(self) -> str:
        """One line: no session log in any folder looked in, which they were, and how to move them."""
        off = [root.agent for root in self.roots if not root.enabled and self.agent in (None, root.agent)]
        if not self.looked_in and self.agent is not None:
            return (
                f"no session logs to read: {self.agent} is switched off by the agents setting (--agents, "
                "COPILOT_OTEL_AGENTS)"
            )
        if not self.looked_in:
            return (
                "no session logs to read: the agents setting is none (--agents, COPILOT_OTEL_AGENTS); give "
                "session paths or ids, or set it to " + ", ".join(root.agent for root in self.roots)
            )
        where = ", ".join(
            f"{home_relative(root.logs)} {_state(root, self.unfolded)} ({AGENT_TITLES[root.agent]})"
            for root in self.looked_in
        )
        flags = [setting_flag(root.setting) for root in self.looked_in]
        moved = ", ".join(flags[:-1]) + (" or " if len(flags) > 1 else "") + flags[-1]
        return (
            f"no session logs found: {where}; has the CLI run as this user? set {moved} to where its "
            "logs are"
            + (f" (switched off by --agents / COPILOT_OTEL_AGENTS: {', '.join(off)})" if off else "")
        )


def _state(root: AgentRoot, unfolded: Sequence[AgentRoot]) -> str:
    if not root.found:
        return "does not exist"
    return "cannot be folded by this version yet" if root in unfolded else "holds none"


def setting_flag(setting: str) -> str:
    """A setting's command-line flag (its name when it has none)."""
    return next((s.flags[0] for s in SETTINGS if s.name == setting and s.flags), setting)


def home_relative(path: str | Path) -> str:
    """A path under the user's home as ``~/…`` (shorter, and the same on every machine); any other as it is."""
    home = os.path.expanduser("~")
    text = str(path)
    if home not in ("", "/") and (text == home or text.startswith(home + os.sep)):
        return "~" + text[len(home) :]
    return text


def discover(config: Config, *, subagents: bool = False, agent: str | None = None) -> Discovery:
    """Every session log in the enabled agents' folders (:func:`~copilot_otel.sources.agent_roots`): Copilot
    CLI's ``session-state`` (those there but unreadable apart), Claude Code's ``projects``, Codex's
    ``sessions`` and Gemini CLI's ``tmp``. A missing folder is an agent not installed; one that cannot be listed is an unreadable entry.

    Args:
        subagents: Claude Code's and Gemini's sub-agent files as logs of their own (``replay``).
        agent: Only this agent's folder (``--agent``); ``None``: every enabled one.

    Raises:
        SourceError: Copilot's ``session-state`` is a file, not a folder.
    """
    found = Discovery(agent_roots(config), agent)
    for root in found.looked_in:
        if root.source is None:
            require_session_folder(root.logs)  # a file where the folder should be: an error, not "not there"
    for root in found.found:
        if root.source is None:
            bad = unreadable_sessions(root.logs)
            known = {session.path for session, _ in bad}
            found.sessions += [
                SessionFile(s.session_id, s.path, s.folder, COPILOT)
                for s in scan_root(root.logs)
                if s.path not in known
            ]
            found.unreadable += [unreadable_error(session, reason) for session, reason in bad]
            found.bad += [SessionFile(s.session_id, s.path, s.folder, COPILOT) for s, _ in bad]
            continue
        if loop_source(root.source) is None:
            found.unfolded.append(root)
            continue
        try:
            found.sessions += _scan(root.source, root.logs.parent, subagents)
        except SourceError as exc:
            found.unreadable.append(UnreadableError(str(exc)))
    return found


def resolve_targets(
    targets: Iterable[str | Path],
    root: Path | None,
    skipped: list[UnreadableError] | None = None,
    *,
    subagents: bool = False,
    others: Sequence[AgentRoot] = (),
) -> list[SessionFile]:
    """What the user typed, as session logs: :func:`~copilot_otel.sources.sessions.resolve`, and another agent's home
    or log folder (:func:`other_agent_logs`), and a session id (or unique prefix) of another agent's session in
    the folders ``others`` (a Claude Code session id, a Codex thread id) besides Copilot's ``root``.

    Raises:
        SourceError: As :func:`~copilot_otel.sources.sessions.resolve`; an id prefix that more than one agent's
            sessions share is ambiguous.
    """
    out: dict[Path, SessionFile] = {}  # each log once, in the order first named
    for target in targets:
        expanded = other_agent_logs(target, subagents=subagents)
        if expanded is None:
            expanded = _by_id(str(target), root, others, subagents)
        for session in resolve([target], root, skipped) if expanded is None else expanded:
            out.setdefault(session.path, session)
    return list(out.values())


def _named_by(log: SourceLog, text: str) -> bool:
    """Whether an id or prefix names a log: its id starts with it; a Gemini session's log, whose name holds only its
    id's first 8 characters, also when the id typed is longer and starts with those."""
    if log.session_id.startswith(text):
        return True
    return log.source is Source.GEMINI and log.kind is LogKind.SESSION and text.startswith(log.session_id)


def _by_id(
    text: str, root: Path | None, others: Sequence[AgentRoot], subagents: bool
) -> list[SessionFile] | None:
    """Another agent's session named by id or prefix (with its sub-agents' files when ``subagents``); ``None``:
    none is (Copilot's root then says what it knows)."""
    if not text or "/" in text or os.sep in text or os.path.lexists(os.path.expanduser(text)):
        return None
    theirs: list[SourceLog] = []
    found: list[SessionFile] = []
    for other in others:
        if other.source is None or not other.found:
            continue
        try:
            logs = source_logs(other.source, other.logs.parent, subagents)
        except SourceError as exc:  # that folder cannot be listed: the id may well be another agent's
            logger.debug("session ids not looked up in %s: %s", other.logs, exc)
            continue
        named = [log for log in logs if _named_by(log, text)]  # a sub-agent's file: its session's id
        if named and other.source is Source.CODEX and not subagents:
            # a Codex session is read with its sub-agents' threads, as discovery groups them (show, report)
            grouped = {s.session_id: s for s in _codex_sessions([_as_session(log) for log in logs])}
            found += [grouped.get(log.session_id) or _as_session(log) for log in named]
        else:
            found += [_as_session(log) for log in named]
        theirs += named
    if not theirs:
        return None
    mine = [s for s in scan_root(root) if s.session_id.startswith(text)] if root is not None else []
    sessions = [*mine, *(_as_session(log) for log in theirs if log.kind is LogKind.SESSION)]
    if len(sessions) > 1:
        names = ", ".join(f"{s.session_id} ({agent_of(s)})" for s in sessions[:5])
        raise SourceError(
            f"session id prefix {text!r} is ambiguous: {names}{'…' if len(sessions) > 5 else ''}"
        )
    return found
