"""``copilot-otel show``: a session in the terminal, without any backend.

Every session log is read through the same pipeline as ``replay`` (:func:`copilot_otel.read_session`) and its
activity records are drawn as one :class:`rich.tree.Tree` per prompt (turns → model calls and tool calls →
sub-agents, permission waits), with durations, token counts, statuses (failures in red) and what happened during
the prompt (runaway detections, aborts, errors, compactions, mode changes, task completion). A run of identical
tool calls (a runaway) is one row with a count; its arguments are shown only when tool arguments are captured.
``--json`` prints one JSON document: for a session, ``{"session_id", "agent", "path", "spans": [...]}`` with what
would be exported; for a listing, ``{"session_state", "folders", "total", "more", "sessions": [...]}`` with a row
per session (``agent`` says whose it is, ``problem`` why one could not be read). Without a session argument, the
most recently active sessions of every enabled agent's folder are listed (the ``agents`` setting:
:func:`copilot_otel.library.discover`), each with its agent and the shortest id prefix that names it alone; a
Claude Code session's sub-agents are read with it.

A session's "last active" is its last event's own timestamp, read from the end of its log (:func:`last_event_ns`:
the last few KiB, not the whole log, so listing 100,000 sessions stays cheap), not the file's modification time,
which a copied or restored history sets to the copy's. A session a Copilot CLI runs now is marked ``running``
(:func:`~copilot_otel.sources.sessions.running_pid`). ``--limit N`` says how many more there are; ``--limit 0`` lists them
all. Piped, the listing is as wide as its longest row (no padding to 80 columns, no trailing spaces).

The tree view shows the prompt text (scrubbed of secrets, cut to :data:`PROMPT_PREVIEW_CHARS`), and the listing
names a session its log gives no title by its first prompt (so cut and scrubbed, ``first_prompt`` in its JSON): it
never leaves the machine. A session's ``--json`` applies the configured capture policy, so it prints what would be
exported.
"""

from __future__ import annotations

import dataclasses
import os
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from .._platform import current, utf8_stdout
from ..common import display
from ..common.errors import SourceError
from ..common.jsonobject import NotAJsonObject, json_object
from ..library import (
    AGENT_TITLES,
    COPILOT,
    SessionRecords,
    agent_of,
    discover,
    grouped_ids,
    home_relative,
    read_log,
    resolve_targets,
    sub_logs,
)
from ..loop.agentloop import FoldSettings
from ..model.activity import (
    Abort,
    AgentRun,
    Compaction,
    Detection,
    HookRun,
    ModeChange,
    ModelCall,
    Note,
    Notification,
    Outcome,
    PermissionWait,
    PromptRun,
    Record,
    SessionError,
    SessionStarted,
    SessionWarning,
    SkillInvoked,
    TaskComplete,
    ToolCall,
    Truncation,
    Turn,
    Usage,
)
from ..model.records import SpanRecord
from ..model.timestamps import timestamp_ns
from ..pipeline import fold_session, fold_settings
from ..settings.config import Config
from ..settings.content import ContentKind, ContentPolicy
from ..settings.repos import RepoFilter
from ..sources import Source, agent_roots, loop_source
from ..sources.sessions import SessionFile, read_workspace, running_pid, session_title, unreadable_reason

__all__ = ["PROMPT_PREVIEW_CHARS", "SessionSummary", "last_event_ns", "show", "span_json", "summarize"]

# The prompt text shown under each prompt's heading; longer prompts are cut (the fold marks the cut).
PROMPT_PREVIEW_CHARS = 160
_OUTCOME_STYLE = {"completed": "green", "error": "bold red", "aborted": "yellow", "incomplete": "yellow"}
# The end of a log is read backwards in steps of this many bytes to find its last timestamped event (a last event
# is a few hundred bytes: one step nearly always), and no further back than TAIL_LIMIT_BYTES (a log that ends in
# one huge line of a type read without decoding falls back to the file's modification time).
TAIL_STEP_BYTES = 16 * 1024
TAIL_LIMIT_BYTES = 1024 * 1024


def show(
    config: Config,
    session: str | None,
    as_json: bool = False,
    limit: int = 20,
    agent: str | None = None,
    repo: str | None = None,
) -> int:
    """Show one session's prompts as trees, or list recent sessions when ``session`` is ``None``.

    Args:
        config: Supplies the agents' folders (for ids and the listing) and the runaway thresholds.
        session: A session id or unique id prefix (a Claude Code session id, a Codex thread id too), a session
            folder, an ``events.jsonl``, a legacy flat file or another agent's log; a session-state root or
            another agent's folder lists its sessions. ``None`` lists the most recent sessions of every enabled
            agent's folder (the ``agents`` setting).
        as_json: Print the span records as JSON lines instead of drawing trees.
        limit: How many sessions the listing shows (0 or less: all of them).
        agent: List only this agent's sessions.
        repo: List only this repository's sessions (a name or a path,
            :class:`~copilot_otel.settings.repos.RepoFilter`): each candidate is read to learn where it ran.

    Returns:
        The exit code (0).

    Raises:
        SourceError: The session is unknown, ambiguous or unreadable, no enabled agent's folder is there, or the
            session-state root is unreadable.
    """
    console = display.neutralise(Console(highlight=False, markup=False, emoji=False, soft_wrap=False))
    keep = _of_repo(RepoFilter.parse(repo), fold_settings(config)) if repo else None
    if session is None:
        listing, folders = _recent(config, limit, agent, keep)
    else:
        roots = [root for root in agent_roots(config) if root.enabled]
        sessions = resolve_targets([session], config.session_state, others=roots)
        if len(sessions) == 1:
            return _show_one(console, sessions[0], config, as_json)
        # a whole session-state root or another agent's folder: list it rather than drawing hundreds of trees
        listing, folders = _newest(_of_agent(sessions, agent), limit, keep=keep), [Path(session)]
    if as_json:
        # "session_state": the folder listed as before the other agents (the Copilot root, or the path given)
        state = config.session_state if session is None else Path(session)
        _print_listing_json(listing, _tree_settings(fold_settings(config)), folders, state)
    else:
        _print_listing(console, listing, _tree_settings(fold_settings(config)), folders)
    return 0


def _of_agent(sessions: Sequence[SessionFile], agent: str | None) -> list[SessionFile]:
    """The sessions, each named with its agent, only ``agent``'s when given."""
    named = [dataclasses.replace(s, agent=agent_of(s)) for s in sessions]
    return [s for s in named if agent is None or s.agent == agent]


def _show_one(console: Console, session: SessionFile, config: Config, as_json: bool) -> int:
    if as_json:
        _print_json(session, fold_settings(config))
        return 0
    console.print(render_session(read_records(session, _tree_settings(fold_settings(config)))))
    return 0


# ------------------------------------------------------------------------------------------------ JSON lines
def span_json(span: SpanRecord) -> dict[str, Any]:
    """One span record as a JSON-ready dict (hex ids, enum names, events; links when it has any)."""
    doc: dict[str, Any] = {
        "trace_id": f"{span.trace_id:032x}",
        "span_id": f"{span.span_id:016x}",
        "parent_span_id": None if span.parent_span_id is None else f"{span.parent_span_id:016x}",
        "name": span.name,
        "kind": span.kind.name,
        "start_ns": span.start_ns,
        "end_ns": span.end_ns,
        "attributes": dict(span.attributes),
        "status": span.status.name,
        "status_message": span.status_message,
        "events": [
            {"name": ev.name, "time_ns": ev.time_ns, "attributes": dict(ev.attributes)} for ev in span.events
        ],
    }
    if span.links:  # a forked session's first prompt: the parent's prompt it continues
        doc["links"] = [{"trace_id": f"{t:032x}", "span_id": f"{sid:016x}"} for t, sid in span.links]
    return doc


def _write_json(document: Mapping[str, Any]) -> None:
    out = utf8_stdout()  # JSON is UTF-8 bytes, whatever the console's code page
    out.write(orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n")
    out.flush()


def _print_json(session: SessionFile, settings: FoldSettings) -> None:
    """One session as one JSON document: the span records it would export (a Claude Code session's sub-agents'
    too, each file folded alone as replay folds it)."""
    folded = fold_session(session, settings)
    spans = [span_json(r) for r in folded.emissions if isinstance(r, SpanRecord)]
    for path in sub_logs(session):
        sub = fold_session(SessionFile.from_path(path), settings)
        spans += [span_json(r) for r in sub.emissions if isinstance(r, SpanRecord)]
    session_id = folded.fold.ctx.session_id or session.session_id
    _write_json(
        {"session_id": session_id, "agent": agent_of(session), "path": str(session.path), "spans": spans}
    )


def _print_listing_json(
    listing: _Listing, settings: FoldSettings, folders: Sequence[Path], session_state: Path
) -> None:
    rows = []
    for session, last_ns in listing.shown:
        row = summarize(session, settings, last_ns)
        rows.append(
            {
                "session_id": session.session_id,
                "agent": agent_of(session),
                "path": str(session.path),
                "last_active": row.last_active_s or None,
                "running": row.running_pid is not None,
                "running_pid": row.running_pid,
                "title": row.title,
                "first_prompt": row.first_prompt or None,
                "cwd": row.cwd,
                "prompts": row.prompts,
                "turns": row.turns,
                "tool_calls": row.tool_calls,
                "errors": row.errors,
                "problem": row.problem or None,
            }
        )
    document = {
        "session_state": str(session_state),
        "folders": [str(folder) for folder in folders],
        "total": listing.total,
        "more": listing.more,
        "sessions": rows,
    }
    _write_json(document)


# ------------------------------------------------------------------------------------------------ listing
@dataclasses.dataclass(frozen=True, slots=True)
class SessionSummary:
    """One row of the session listing; ``last_active_s`` is the last event's own time (Unix seconds), or the log's
    modification time when no event of it has one (0.0 when neither is known)."""

    session: SessionFile
    last_active_s: float
    title: str
    cwd: str
    prompts: int
    turns: int
    tool_calls: int
    errors: int
    problem: str = ""
    running_pid: int | None = None
    first_prompt: str = ""
    """The first human prompt's text, on one line: what the listing names a session by when its log gives it no
    title (Codex, Gemini and most Claude Code sessions), as each CLI's own resume picker does."""


@dataclasses.dataclass(frozen=True, slots=True)
class _Listing:
    """The sessions a listing shows (newest first, each with its last activity in Unix ns) and how many it has."""

    shown: Sequence[tuple[SessionFile, int]]
    total: int
    # Every session ``show <prefix>`` could resolve to, listed or not (``--limit`` and ``--agent`` leave some out):
    # a short id printed must be no prefix of theirs either, or the prefix the listing offers would be ambiguous.
    known: Sequence[SessionFile] = ()

    @property
    def more(self) -> int:
        return self.total - len(self.shown)


def _mtime_ns(session: SessionFile) -> int:
    for path in (session.path, session.folder):
        try:
            return path.stat().st_mtime_ns if path is not None else 0
        except OSError:
            continue
    return 0


def last_event_ns(path: Path) -> int | None:
    """The time of the log's last event that has one, by its own timestamp (Unix ns); ``None`` when none of its
    last :data:`TAIL_LIMIT_BYTES` has one or it cannot be read.

    The log is read backwards from its end, a step at a time; a line's time is read by the pipeline's rules
    (:func:`~copilot_otel.model.timestamps.timestamp_ns`: ISO-8601, 1970 to 2262), and a line that is no JSON object (a last
    line still being written) is passed over. Only the line is decoded, not made an event (half the cost, for a
    listing that reads 100,000 of them).
    """
    try:
        fd = current.open_shared(path)
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
        end, carry = size, b""  # carry: the start of a line whose beginning lies before this step
        while end > 0 and size - end < TAIL_LIMIT_BYTES:
            start = max(0, end - TAIL_STEP_BYTES)
            lines = (current.pread(fd, end - start, start) + carry).split(b"\n")
            carry = lines.pop(0) if start > 0 else b""
            for line in reversed(lines):
                if (ns := _line_time_ns(line)) is not None:
                    return ns
            end = start
        return None
    except OSError:
        return None
    finally:
        os.close(fd)


def _line_time_ns(line: bytes) -> int | None:
    try:
        stamp = json_object(line).get("timestamp")
    except NotAJsonObject:
        return None
    # a listing's date, not an export: a bad timestamp is no drop to count here (the caller falls back to mtime)
    return timestamp_ns(stamp, []) if stamp is not None else None


def _newest(
    sessions: Sequence[SessionFile],
    limit: int,
    known: Sequence[SessionFile] | None = None,
    keep: Callable[[SessionFile], bool] | None = None,
) -> _Listing:
    """The ``limit`` most recently active of ``sessions`` (all of them when ``limit`` is 0 or less) that ``keep``
    keeps; ``known``: every session an id prefix could name (``sessions`` when not given)."""
    kept = sessions if keep is None else [session for session in sessions if keep(session)]
    dated = [(session, last_event_ns(session.path) or _mtime_ns(session)) for session in kept]
    dated.sort(key=lambda item: (item[1], item[0].session_id), reverse=True)
    return _Listing(dated[:limit] if limit > 0 else dated, len(dated), sessions if known is None else known)


def _of_repo(repo: RepoFilter, settings: FoldSettings) -> Callable[[SessionFile], bool]:
    """Whether a session ran in ``repo``, by the facts its log records (one that cannot be read is left out: where it
    ran is unknown)."""

    def keep(session: SessionFile) -> bool:
        if unreadable_reason(session.path) or (
            agent_of(session) != COPILOT and loop_source(Source(agent_of(session))) is None
        ):
            return False
        try:
            read = read_records(session, settings)
        except SourceError:
            return False
        facts = read.prompts[-1].facts if read.prompts else None
        cwd = (facts.cwd if facts else None) or read_workspace(session.folder).get("cwd")
        return repo.matches(facts.repository if facts else None, facts.git_root if facts else None, cwd)

    return keep


def _recent(
    config: Config, limit: int, agent: str | None, keep: Callable[[SessionFile], bool] | None = None
) -> tuple[_Listing, list[Path]]:
    """The most recent sessions of every enabled agent's folder (only ``agent``'s when given), and the folders
    read. Sessions whose log cannot be read are listed too, with the reason (not left out).

    Raises:
        SourceError: None of the folders is there (the line names each, and the settings that move them).
    """
    root = config.session_state
    if "copilot" in config.agents and agent in (None, "copilot") and root.exists() and not root.is_dir():
        raise SourceError(f"cannot read session folder {root}: not a directory")
    found = discover(config, agent=agent)
    folders = [root.logs for root in found.read]
    if not folders:
        raise SourceError(found.nothing_found())
    found.warn_unfolded()
    known = None
    if agent is not None:  # the other agents' sessions resolve too: the printed prefixes must not name them
        every = discover(config)
        known = [*every.sessions, *every.bad]
    return _newest([*found.sessions, *found.bad], limit, known, keep), folders


def summarize(session: SessionFile, settings: FoldSettings, last_ns: int | None = None) -> SessionSummary:
    """Read one session and count what the listing shows (a session that cannot be read says why).

    ``last_ns`` is its last activity when already known (the listing sorted by it), else read from the log's end.
    """
    workspace = read_workspace(session.folder)
    title = session_title(workspace) or ""
    if last_ns is None:
        last_ns = last_event_ns(session.path) or _mtime_ns(session)
    last_active = last_ns / 1e9
    running = running_pid(session.folder)
    if reason := unreadable_reason(session.path):
        return SessionSummary(session, last_active, title, "", 0, 0, 0, 0, f"unreadable: {reason}", running)
    if (agent := agent_of(session)) != COPILOT and loop_source(Source(agent)) is None:
        problem = f"this version cannot fold {AGENT_TITLES[agent]} logs yet"
        return SessionSummary(session, last_active, title, "", 0, 0, 0, 0, problem, running)
    try:
        read = read_records(session, settings)
    except SourceError as exc:
        return SessionSummary(
            session, last_active, title, workspace.get("cwd", ""), 0, 0, 0, 0, str(exc), running
        )
    facts = read.prompts[-1].facts if read.prompts else None
    first = next((p.input_text for p in read.prompts if p.input_text and p.input_text.strip()), "")
    return SessionSummary(
        session=session,
        last_active_s=last_active,
        running_pid=running,
        title=title or read.own_title or "",
        cwd=(facts.cwd if facts else None) or workspace.get("cwd", ""),
        prompts=len(read.prompts),
        turns=len(read.turns),
        tool_calls=len(read.tool_calls),
        errors=sum(1 for r in read.records if _failed(r)),
        first_prompt=_one_line(first, PROMPT_PREVIEW_CHARS),
    )


def _print_listing(
    console: Console, listing: _Listing, settings: FoldSettings, folders: Sequence[Path]
) -> None:
    where = ", ".join(home_relative(str(folder)) for folder in folders)
    if not listing.shown:
        console.print(f"No sessions in {where}.")
        return
    table = Table(
        title=f"Recent sessions in {where}",
        title_justify="left",
        box=None,
        header_style="bold",
        pad_edge=False,
    )
    # On a terminal (or with COLUMNS set) the table fits the width, cutting titles and folders; piped, every row
    # is whole and as wide as it is (a script or `less -S` reads it), never padded to an assumed 80 columns.
    natural = not console.is_terminal and not os.environ.get("COLUMNS", "").strip()
    short = _short_ids([session for session, _ in listing.shown], listing.known)
    # The agent column only where another agent's sessions are listed: a Copilot-only listing keeps its width.
    agents = {agent_of(session) for session, _ in listing.shown}
    with_agent = agents != {COPILOT}
    now_year = datetime.now().year
    stamps = {
        session.path: datetime.fromtimestamp(last_ns / 1e9) for session, last_ns in listing.shown if last_ns
    }
    # the year only where a row is of another year: "11-29 17:12" is ambiguous across a new year, not within one
    stamp_format = "%m-%d %H:%M" if all(t.year == now_year for t in stamps.values()) else "%Y-%m-%d %H:%M"
    fixed = {
        "last active": len(datetime(2000, 1, 1).strftime(stamp_format)),
        "session": max(map(len, short.values())),
        **({"agent": max(map(len, agents))} if with_agent else {}),
        "prompts": 7,
        "turns": 5,
        "tools": 5,
        "errors": 6,
    }
    # Rich squeezes no-wrap columns unpredictably (an id cut to "01a233e7-…" no longer resolves), so share out the
    # width ourselves, 2 spaces between columns: the fixed columns whole, the rest to the title and the folder; on
    # a narrow terminal the folder goes first, so the title keeps a readable width.
    free = console.width - sum(fixed.values()) - 2 * (len(fixed) + 1)
    with_cwd = natural or free >= _NARROW_FREE
    title_width, cwd_width = (
        (None, None)
        if natural
        else (free * 3 // 5, free - free * 3 // 5)
        if with_cwd
        else (max(free + 2, _TITLE_MIN), None)
    )
    table.add_column("last active", no_wrap=True, width=fixed["last active"])
    table.add_column("session", no_wrap=True, width=fixed["session"])
    if with_agent:
        table.add_column("agent", no_wrap=True, width=None if natural else fixed["agent"])
    table.add_column("title", overflow="ellipsis", no_wrap=True, width=title_width)
    if with_cwd:
        table.add_column("cwd", overflow="ellipsis", no_wrap=True, width=cwd_width)
    for name in ("prompts", "turns", "tools", "errors"):
        table.add_column(name, justify="right", no_wrap=True, width=fixed[name])
    running = 0
    for session, last_ns in listing.shown:
        row = summarize(session, settings, last_ns)
        if row.running_pid is not None:
            running += 1
            when = Text("running", style="bold green")
        else:
            when = Text(
                datetime.fromtimestamp(row.last_active_s).strftime(stamp_format) if row.last_active_s else "?"
            )
        if row.problem:
            table.add_row(
                when,
                short[row.session.path],
                *([agent_of(row.session)] if with_agent else []),
                Text(row.problem, style="red"),
                *[""] * (5 if with_cwd else 4),
            )
            continue
        table.add_row(
            when,
            short[row.session.path],
            *([agent_of(row.session)] if with_agent else []),
            row.title
            or (
                Text(f"“{row.first_prompt}”", style="italic")
                if row.first_prompt
                else Text("(untitled)", style="dim")
            ),
            *(
                [home_relative(row.cwd) if cwd_width is None else _tail(home_relative(row.cwd), cwd_width)]
                if with_cwd
                else []
            ),
            str(row.prompts),
            str(row.turns),
            str(row.tool_calls),
            Text(str(row.errors), style="red" if row.errors else "dim"),
        )
    notes = []
    if running:
        notes.append("running: a Copilot CLI has the session open now")
    if listing.more:
        notes.append(f"… and {listing.more:,} more (of {listing.total:,}); --limit 0 lists them all")
    notes.append("copilot-otel show <session> draws a session's prompts; an id prefix is enough.")
    if natural:
        width = console.width
        try:
            with (
                console.capture() as captured
            ):  # piped: no styles to keep, and no padding to an assumed width
                console.width = 1_000_000
                console.print(table)
        finally:
            console.width = width
        console.file.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))
    else:
        console.print(table)
    for note in notes:
        console.print(Text(note, style="dim"))


# Below this many columns left for the title and the folder together, the listing drops the folder (80 columns
# with the agent column leave 16); the title then keeps at least _TITLE_MIN.
_NARROW_FREE = 24
_TITLE_MIN = 10

# A listing names a session by this many characters of its id at least (more when two shown ids share them: Codex's
# thread ids are UUIDv7s, whose first characters are the time they started).
SHORT_ID_CHARS = 8


def _short_ids(sessions: Sequence[SessionFile], known: Sequence[SessionFile] = ()) -> dict[Path, str]:
    """Each session's id cut to the shortest prefix of at least :data:`SHORT_ID_CHARS` characters that no other
    known id starts with (what ``show <prefix>`` takes: the listed sessions' and ``known``'s, which ``--limit`` or
    ``--agent`` left out); sorted, each id only needs to differ from its neighbours."""
    pool = [*sessions, *known]
    # a sub-agent's thread read with its session is still an id show resolves: a short id must not name it too
    ids = sorted({s.session_id for s in pool} | {tid for s in pool for tid in grouped_ids(s)})

    def shared(a: str, b: str) -> int:
        return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))

    length = {
        sid: max(SHORT_ID_CHARS, 1 + max(
            shared(sid, ids[i - 1]) if i else 0, shared(sid, ids[i + 1]) if i + 1 < len(ids) else 0
        ))
        for i, sid in enumerate(ids)
    }  # fmt: skip
    return {s.path: s.session_id[: length[s.session_id]] for s in sessions}


# ------------------------------------------------------------------------------------------------ trees
def _tree_settings(settings: FoldSettings) -> FoldSettings:
    """Settings for drawing: prompts captured (short, scrubbed) so each tree says what was asked."""
    content = settings.content
    enabled = frozenset(content.enabled | {ContentKind.PROMPTS})
    policy = ContentPolicy(enabled=enabled, max_length=PROMPT_PREVIEW_CHARS, on_spans=True, on_events=False)
    return dataclasses.replace(settings, content=policy)


Work = PromptRun | Turn | ModelCall | ToolCall | AgentRun | PermissionWait | HookRun


def _failed(record: Record) -> bool:
    """A piece of work that failed: a tool that did not succeed (denied, cut short), a model call or agent in
    error, a prompt that ended in error (a model call cancelled by an abort is not a failure of its own)."""
    if isinstance(record, (ToolCall, HookRun)):
        return not record.success
    if isinstance(record, (ModelCall, AgentRun)):
        return record.outcome is Outcome.ERROR
    if isinstance(record, PromptRun):
        return record.error and record.outcome == "error"
    return False


def render_session(read: SessionRecords) -> Group:
    """A session as renderables: a heading, then one tree per prompt in the order they were asked.

    Drawn from the agent loop's records themselves (not from spans): each piece of work hangs under the one
    that started it, by the ids the loop gave them.
    """
    work: list[Work] = [
        r
        for r in read.records
        if isinstance(r, (PromptRun, Turn, ModelCall, ToolCall, AgentRun, PermissionWait, HookRun))
    ]
    by_id = {r.span_id: r for r in work}
    children: dict[int, list[Work]] = defaultdict(list)
    prompts = sorted((r for r in work if isinstance(r, PromptRun)), key=lambda r: (r.start_ns, r.end_ns))
    prompt_of_trace = {p.trace_id: p for p in prompts}
    for r in work:
        if isinstance(r, PromptRun):
            continue
        parent = r.parent_span_id
        if parent is not None and parent in by_id:
            children[parent].append(r)
        elif r.trace_id in prompt_of_trace:  # parent not in the log (cut off): hang it under its prompt
            children[prompt_of_trace[r.trace_id].span_id].append(r)
    for kids in children.values():
        kids.sort(key=lambda r: (r.start_ns, r.end_ns))

    parts: list[Any] = [_session_heading(read, prompts)]
    human = [p for p in prompts if p.human]
    number = 0
    for prompt in prompts:
        in_trace = [r for r in work if r.trace_id == prompt.trace_id]
        if prompt.human:
            number += 1
        label = _prompt_label(prompt, number, len(human), in_trace)
        tree = Tree(label, guide_style="dim")
        for note in prompt.notes:
            line = _note_label(note, note.time_ns - prompt.start_ns)
            if line is not None:
                tree.add(line)
        _add_children(tree, prompt, children, prompt.start_ns)
        parts.append(Text())
        parts.append(tree)
    if not prompts:
        parts.append(Text("(no prompts in this log)", style="dim"))
    if read.drops:
        parts.append(Text(f"{len(read.drops)} unreadable line(s) skipped", style="yellow"))
    return Group(*parts)


# A run of at least this many identical siblings (tool calls, or turns that each make the same calls) is drawn as
# one row with a count: a runaway is then one line saying what looped, not thirty identical rows.
MIN_REPEAT = 3
# The arguments shown on a collapsed tool row (only when tool arguments are captured: never content otherwise).
ARGUMENTS_PREVIEW_CHARS = 60
_TIMES, _DASH = "\u00d7", "\u2013"  # multiplication sign and en dash (both in cp1252 too)


def _descendants(parent: Work, children: Mapping[int, list[Work]]) -> list[Work]:
    """Everything drawn under ``parent`` (a sub-agent's turns and tools, those its own log gave included)."""
    out: list[Work] = []
    pending = list(children.get(parent.span_id, ()))
    while pending:
        r = pending.pop()
        out.append(r)
        pending.extend(children.get(r.span_id, ()))
    return out


def _add_children(node: Tree, parent: Work, children: Mapping[int, list[Work]], origin_ns: int) -> None:
    kids = children.get(parent.span_id, [])
    index = 0
    while index < len(kids):
        child = kids[index]
        shape = _shape(child, children)
        end = index + 1
        while shape is not None and end < len(kids) and _shape(kids[end], children) == shape:
            end += 1
        if end - index >= MIN_REPEAT:
            _add_repeats(node, kids[index:end], children, origin_ns)
            index = end
            continue
        below = _descendants(child, children) if isinstance(child, AgentRun) else None
        branch = node.add(_work_label(child, origin_ns, below))
        _add_children(branch, child, children, origin_ns)
        index += 1


def _shape(r: Work, children: Mapping[int, list[Work]]) -> tuple[Any, ...] | None:
    """What makes two siblings the same for collapsing (``None``: never collapsed)."""
    if isinstance(r, ToolCall):
        if children.get(r.span_id):
            return None
        return ("tool", r.name, r.arguments_hash, r.success, r.exit_code, r.error_type, r.cli_initiated)
    if isinstance(r, ModelCall):
        return (
            ("chat", r.model, r.outcome, r.finish_reason, r.origin) if not children.get(r.span_id) else None
        )
    if isinstance(r, Turn) and not r.incomplete_reason:
        inner = tuple(_shape(k, children) for k in children.get(r.span_id, ()))
        # A turn repeats only if it ran tools, all of them the same as the other turn's.
        if any(part is None for part in inner) or not any(part[0] == "tool" for part in inner):  # type: ignore[index]
            return None
        return ("turn", inner)
    return None


def _add_repeats(node: Tree, run: Sequence[Work], children: Mapping[int, list[Work]], origin_ns: int) -> None:
    """One row for a run of identical siblings; a run of turns gets one row per call they each made."""
    first, last = run[0], run[-1]
    offset = f"+{_duration(first.start_ns - origin_ns, fine=True)}"
    took = _duration(last.end_ns - first.start_ns)
    if isinstance(first, Turn):
        label = Text(f"turns {first.index}{_DASH}{last.index}", style="blue")  # type: ignore[union-attr]
        label.append(f" {_TIMES}{len(run)}", style="bold blue")
        label.append(f"  {offset}  {took}  each the same calls", style="dim")
        branch = node.add(label)
        columns = zip(*(children.get(turn.span_id, []) for turn in run), strict=True)
        for column in columns:
            _add_repeat_row(branch, list(column), origin_ns)
        return
    _add_repeat_row(node, list(run), origin_ns)


def _add_repeat_row(node: Tree, run: Sequence[Work], origin_ns: int) -> None:
    first = run[0]
    took = _duration(sum(r.end_ns - r.start_ns for r in run))
    text = Text()
    if isinstance(first, ModelCall):
        calls = [r for r in run if isinstance(r, ModelCall)]
        text.append(f"chat {first.model}", style="cyan")
        text.append(f" {_TIMES}{len(run)}", style="bold cyan")
        text.append(f"  {took}", style="dim")
        tokens = _tokens([c.usage for c in calls])
        if tokens:
            text.append(f"  {tokens}", style="dim")
        if first.finish_reason:
            text.append(f"  → {first.finish_reason}", style="dim")
        node.add(text)
        return
    assert isinstance(first, ToolCall)
    failed = _failed(first)
    text.append(f"✗ {first.name}" if failed else f"✓ {first.name}", style="bold red" if failed else "bold")
    text.append(f" {_TIMES}{len(run)}", style="bold red" if failed else "bold yellow")
    text.append(f"  +{_duration(first.start_ns - origin_ns, fine=True)}  {took}", style="dim")
    text.append("  identical arguments", style="dim")
    if first.arguments_json:  # set only when tool arguments are captured (and then scrubbed and cut)
        text.append(f"  {_one_line(first.arguments_json, ARGUMENTS_PREVIEW_CHARS)}", style="italic")
    if first.exit_code is not None:
        text.append(f"  exit {first.exit_code}", style="yellow" if first.exit_code else "dim")
    if failed:
        text.append(f"  failed: {_one_line(first.message or first.error_type or 'error', 100)}", style="red")
    node.add(text)


def _session_heading(read: SessionRecords, prompts: Sequence[PromptRun]) -> Text:
    workspace = read_workspace(read.session.folder)
    facts = prompts[-1].facts if prompts else None
    started = next((r for r in read.records if isinstance(r, SessionStarted)), None)
    title = (facts.title if facts else None) or session_title(workspace) or read.own_title
    text = Text()
    text.append("Session ", style="bold")
    text.append(prompts[0].session_id if prompts else read.session_id, style="bold cyan")
    if title:
        text.append(f"  {_one_line(title, 80)}", style="bold")
    version = (facts.cli_version if facts else None) or (started.cli_version if started else None)
    model = (prompts[-1].model if prompts else None) or (started.model if started else None)
    line = [
        home_relative(facts.cwd) if facts and facts.cwd else None,
        f"{read.agent} {version}" if version else None,
        model,
        _clock(prompts[0].start_ns, with_date=True) if prompts else None,
        _plural(sum(1 for p in prompts if p.human), "prompt"),
    ]
    text.append("\n" + " · ".join(f for f in line if f), style="dim")
    own = read.own_accounting
    if own is not None:
        # The CLI's own figures beside ours (no pricing of ours: its cost is its claim).
        said = [f"${own.cost_usd:,.4f}"]
        if own.api_duration_ms is not None:
            api = f"API {_duration(int(own.api_duration_ms * 1e6))}"
            if own.api_duration_without_retries_ms is not None:
                api += f" ({_duration(int(own.api_duration_without_retries_ms * 1e6))} without retries)"
            said.append(api)
        if own.tool_duration_ms is not None:
            said.append(f"tools {_duration(int(own.tool_duration_ms * 1e6))}")
        ours = _tokens([r.usage for r in read.records if isinstance(r, ModelCall)])
        text.append(
            f"\n{read.agent}'s own accounting: " + ", ".join(said) + (f" · ours: {ours}" if ours else ""),
            style="dim",
        )
    return text


def _prompt_label(prompt: PromptRun, number: int, total: int, work: Sequence[Work]) -> Text:
    text = Text()
    text.append(f"Prompt {number}/{total}" if prompt.human else "Background work", style="bold")
    text.append(f"  {_clock(prompt.start_ns)}  ", style="dim")
    text.append(_duration(prompt.end_ns - prompt.start_ns), style="bold")
    text.append("  ")
    text.append(prompt.outcome, style=_OUTCOME_STYLE.get(prompt.outcome, "yellow"))
    if prompt.incomplete_reason and prompt.incomplete_reason != prompt.outcome:
        text.append(f" ({prompt.incomplete_reason})", style="yellow")
    # Turns, tool calls, failures and tokens of the work drawn under the prompt, its sub-agents' included (a
    # sub-agent's own file too): one count for all four, the one report gives.
    facts = _work_facts(work)
    calls = [r for r in work if isinstance(r, ModelCall)]
    tokens = _tokens([c.usage for c in calls])
    if tokens:
        facts.append(tokens)
    if prompt.model:
        facts.append(prompt.model)
    text.append("\n" + " · ".join(facts), style="dim")
    explained = any(isinstance(n, (Abort, SessionError)) for n in prompt.notes)
    if prompt.error and prompt.status_message and not explained:
        text.append(f"\n{_one_line(prompt.status_message, 120)}", style="red")
    if prompt.input_text and prompt.input_text.strip():
        text.append(f"\n“{_one_line(prompt.input_text, PROMPT_PREVIEW_CHARS)}”", style="italic")
    return text


def _work_facts(work: Sequence[Work]) -> list[str]:
    """``3 turns``, ``2 tool calls (1 failed)``: counted from the records drawn, so a count never disagrees with
    the rows under it (nor failures exceed calls)."""
    turns = sum(1 for r in work if isinstance(r, Turn))
    tools = [r for r in work if isinstance(r, ToolCall)]
    failed = sum(1 for r in tools if _failed(r))
    calls = _plural(len(tools), "tool call")
    return [_plural(turns, "turn"), f"{calls} ({failed} failed)" if failed else calls]


def _work_label(r: Work, origin_ns: int, below: Sequence[Work] | None = None) -> Text:
    failed = _failed(r)
    offset = f"+{_duration(r.start_ns - origin_ns, fine=True)}"
    took = _duration(r.end_ns - r.start_ns)
    text = Text()
    if isinstance(r, Turn):
        text.append(f"turn {r.index}", style="blue")
        text.append(f"  {offset}  {took}", style="dim")
        if r.incomplete_reason:
            text.append(f"  incomplete ({r.incomplete_reason})", style="yellow")
        return text
    if isinstance(r, ModelCall):
        text.append(f"chat {r.model}", style="red" if failed else "cyan")
        text.append(f"  {took}", style="dim")
        if r.origin == "compaction":
            text.append("  (compaction)", style="yellow")
        if r.attempt is not None:  # a failed attempt of the call above it, which the CLI retried
            text.append(f"  (attempt {r.attempt})", style="yellow")
        tokens = _tokens([r.usage])
        if tokens:
            text.append(f"  {tokens}", style="dim")
        if r.finish_reason:
            text.append(f"  → {r.finish_reason}", style="dim")
        if failed:
            text.append(f"  failed: {_one_line(r.message or r.error_type or 'error', 100)}", style="red")
        return text
    if isinstance(r, ToolCall):
        if failed:
            text.append(f"✗ {r.name}", style="bold red")
        else:
            text.append("✓ ", style="green")
            text.append(r.name, style="bold")
        text.append(f"  {offset}  {took}", style="dim")
        if r.cli_initiated:
            text.append("  (by the CLI)", style="dim")
        if r.exit_code is not None:
            text.append(f"  exit {r.exit_code}", style="yellow" if r.exit_code else "dim")
        if r.error_type == "denied":
            text.append(f"  denied: {_one_line(r.message or 'not allowed', 100)}", style="red")
        elif failed:
            text.append(f"  failed: {_one_line(r.message or r.error_type or 'error', 100)}", style="red")
        return text
    if isinstance(r, HookRun):
        text.append(f"hook {r.hook_type}", style="red" if failed else "dim")
        text.append(f"  {offset}  {took}", style="dim")
        if r.denied_calls:
            text.append(f"  denied {_plural(r.denied_calls, 'call')}", style="yellow")
        if failed:
            text.append(f"  failed: {_one_line(r.error_message or 'error', 100)}", style="red")
        elif r.incomplete_reason:
            text.append(f"  incomplete ({r.incomplete_reason})", style="yellow")
        return text
    if isinstance(r, PermissionWait):
        text.append("waited for permission", style="yellow")
        if r.kind:
            text.append(f" ({r.kind})", style="yellow")
        text.append(f"  {offset}  {took}", style="dim")
        text.append(f"  {r.result or r.incomplete_reason or 'no answer'}", style="dim")
        return text
    assert isinstance(r, AgentRun)
    name = r.name or "agent"
    text.append("sub-agent ", style="magenta")
    text.append(name, style="bold magenta")
    if r.display_name and r.display_name != name:
        text.append(f" ({r.display_name})", style="magenta")
    if r.background:
        text.append(" in the background", style="magenta")
    text.append(f"  {offset}  {took}", style="dim")
    facts = (
        _work_facts(below)
        if below is not None
        else [_plural(r.turn_count, "turn"), _plural(r.tool_calls, "tool call")]
    )
    tokens = _tokens([r.usage])
    if tokens:
        facts.append(tokens)
    text.append("  " + " · ".join(facts), style="dim")
    if r.description:
        text.append(f"  {_one_line(r.description, 60)}", style="italic dim")
    if failed:
        text.append(f"  failed: {_one_line(r.status_message or 'error', 100)}", style="red")
    return text


def _note_label(note: Note, offset_ns: int) -> Text | None:
    """What happened during a prompt that deserves a line of its own (user messages and totals do not)."""
    at = f"  at +{_duration(offset_ns, fine=True)}"
    if isinstance(note, Detection):
        text = Text("⚠ runaway detected: ", style="bold red")
        text.append(note.reason, style="bold red")
        text.append(f" (threshold {note.threshold})", style="red")
        if note.tool_name:
            text.append(f" tool {note.tool_name}", style="red")
    elif isinstance(note, Abort):
        text = Text(f"■ aborted: {note.reason}", style="yellow")
    elif isinstance(note, SessionError):
        text = Text(f"✗ {note.error_type}: {_one_line(note.message, 100)}", style="red")
    elif isinstance(note, Compaction) and note.complete:
        text = Text("context compacted", style="yellow")
    elif isinstance(note, Truncation):
        text = Text("context truncated", style="yellow")
    elif isinstance(note, TaskComplete):
        text = Text(
            "task complete" if note.success is not False else "task ended unsuccessfully", style="green"
        )
    elif isinstance(note, ModeChange):
        text = Text(f"mode {note.previous or '?'} → {note.new or '?'}", style="cyan")
    elif isinstance(note, Notification):
        text = Text(f"background {note.kind.replace('_', ' ')}", style="dim")
    elif isinstance(note, SessionWarning):
        text = Text(f"⚠ warning ({note.warning_type}): {_one_line(note.message or '', 100)}", style="yellow")
    elif isinstance(note, SkillInvoked):
        text = Text(f"skill {note.name or '?'} ({note.trigger or 'invoked'})", style="cyan")
    else:
        return None
    text.append(at, style="dim")
    return text


def read_records(session: SessionFile, settings: FoldSettings) -> SessionRecords:
    """The session's records, as the library reads them (the same pipeline as replay and the daemon)."""
    return read_log(session, settings)


# ------------------------------------------------------------------------------------------------ formatting
def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _tokens(usages: Sequence[Usage]) -> str:
    """``1,200 in / 60 out tokens``, with the reasoning part of the output when a call reported it."""
    tokens_in = _total([u.input for u in usages])
    tokens_out = _total([u.output for u in usages])
    if not tokens_in and not tokens_out:
        return ""
    reasoning = [u.reasoning for u in usages if u.reasoning is not None]
    told = f" ({sum(reasoning):,} reasoning)" if reasoning else ""
    return f"{_count_or_unknown(tokens_in)} in / {_count_or_unknown(tokens_out)} out tokens{told}"


def _total(counts: Sequence[int | None]) -> int | None:
    """The sum, or ``None`` when a part is unknown (the log did not give it)."""
    return None if any(c is None for c in counts) else sum(c or 0 for c in counts)


def _count_or_unknown(count: int | None) -> str:
    return "?" if count is None else f"{count:,}"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _duration(ns: int, fine: bool = False) -> str:
    seconds = max(ns, 0) / 1e9
    if seconds < 1 and not fine:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.3f}s" if fine else f"{seconds:.2f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def _clock(ns: int, with_date: bool = False) -> str:
    moment = datetime.fromtimestamp(ns / 1e9).astimezone()
    return moment.strftime("%Y-%m-%d %H:%M:%S %Z" if with_date else "%H:%M:%S")


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _tail(path: str, limit: int) -> str:
    """The end of a long path, which is the part that tells folders apart."""
    return path if len(path) <= limit else "…" + path[-(limit - 1) :]
