"""The one path from a session log's bytes to what it did: lines → events → activity records → emissions.

``replay``, ``show`` and the library read a log from start to end in chunks (:meth:`Pipeline.feed_file`), the
daemon reads the tailer's batches, but all of them frame lines alike and fold each through the same
:class:`Pipeline`, so a line means the same everywhere: a blank line is framing and skipped, a line longer
than :data:`MAX_LINE_BYTES` is dropped as ``too_long`` without being decoded (nor held), a bad line is dropped with its
reason and costs only itself, a value no encoder could carry (a timestamp past 2262, a count beyond 2**53) is
dropped with its reason and costs only itself (the event is kept without it), and the same events give the same
records and emissions.

Stages (each owns one thing)::

    TailItem ──parse──▶ Event ──AgentLoop──▶ activity records ──(PromptWindow)──▶ Projector ──▶ spans, log events,
                                                                                                 metric points

Another agent's log (:class:`~copilot_otel.sources.LoopSource`, chosen by :func:`source_for`) has its own first
stage, the same loop and everything after it::

    TailItem ──read_line──▶ view ──framer──▶ neutral events ──AgentLoop (its translator)──▶ … as above
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import orjson

from .._platform import current
from ..common.errors import SourceError
from ..loop.agentloop import AgentLoop, FoldSettings, LiveStats, RunawayThresholds, SessionContext
from ..loop.core import COPILOT_AGENT
from ..loop.neutral import Rooted, SubagentDone
from ..model.activity import CloseReason, Record
from ..model.inputs import Event
from ..model.records import BadLine, DropReason, Emission, NotRead
from ..projections import Projector
from ..settings.config import Config
from ..settings.content import ContentKind
from ..sources import Framer, LoopSource, Source, loop_source, sniff
from ..sources.copilot.parse import parse_line
from ..sources.copilot.translator import COPILOT
from ..sources.fields import not_read_of
from ..sources.sessions import SessionFile, read_workspace, session_title
from ..sources.tail import (
    DEFAULT_MAX_LINE_BYTES,
    DEFAULT_READ_CHUNK_BYTES,
    EndReason,
    Line,
    ResetReason,
    TailItem,
    TooLong,
)
from .subagents import SeenCalls, SubagentLogs, complete
from .window import PromptWindow

__all__ = [
    "MAX_LINE_BYTES",
    "READ_CHUNK_BYTES",
    "FoldSettings",
    "FoldedSession",
    "KeptLines",
    "LineCounts",
    "Pipeline",
    "RunawayThresholds",
    "Step",
    "Window",
    "closed_for",
    "fold_events",
    "fold_session",
    "fold_settings",
    "new_fold",
    "read_chunks",
    "split_lines",
]

# ``tuple.__new__(Line, (...))`` is ``Line(...)`` without the Python-level ``__new__`` that NamedTuple generates:
# one call less per line of every backfill, and the same value.
_new = tuple.__new__

# Lines longer than this are dropped as too_long, by replay and the daemon alike (the tailer never holds more).
MAX_LINE_BYTES = DEFAULT_MAX_LINE_BYTES
# A log read from start to end (replay, show, the library) is read in reads of this size, as the tailer reads:
# whatever the log's size, a reader holds one chunk and at most one line (up to MAX_LINE_BYTES) besides.
READ_CHUNK_BYTES = DEFAULT_READ_CHUNK_BYTES


def read_chunks(path: str | os.PathLike[str], chunk_bytes: int = READ_CHUNK_BYTES) -> Iterator[bytes]:
    """A file's bytes from start to end, ``chunk_bytes`` at a time (opened as the tailer opens a log: the CLI
    may go on appending to, rename or delete it meanwhile). Opened at the first ``next``.

    Raises:
        OSError: the file cannot be opened or read.
    """
    fd = current.open_shared(path)
    try:
        while chunk := os.read(fd, chunk_bytes):
            yield chunk
    finally:
        os.close(fd)


def split_lines(
    blob: bytes, base_offset: int = 0, max_line_bytes: int = MAX_LINE_BYTES
) -> Iterator[TailItem]:
    """A whole buffer as the tailer's items: complete lines, :class:`TooLong` for oversized ones.

    A final fragment without ``\\n`` is yielded too (``end`` = end of buffer): replay and ``show`` read whole
    files, whose last line may lack a newline (two real 0.0.354 captures do); the daemon folds such a line only
    once the file has gone quiet (``FileTailer.read_unterminated``).
    """
    pos = 0
    n = len(blob)
    find = blob.find
    while pos < n:
        nl = find(b"\n", pos)
        end = n if nl < 0 else nl + 1
        stop = end - 1 if nl >= 0 else end
        if stop - pos > max_line_bytes:
            yield TooLong(base_offset + pos, base_offset + end)
        else:
            yield _new(Line, (base_offset + pos, base_offset + end, blob[pos:stop]))
        pos = end


# Why a fold is closed when the tailer says its file's content is over (new content under the path, or the end).
_CLOSED_FOR: dict[ResetReason | EndReason, CloseReason] = {
    ResetReason.TRUNCATED: "file_truncated",
    ResetReason.CONTENT_CHANGED: "file_content_changed",
    ResetReason.REPLACED: "file_replaced",
    EndReason.REPLACED: "file_replaced",
    EndReason.DELETED: "file_deleted",
}


def closed_for(reason: ResetReason | EndReason) -> CloseReason:
    """The reason to close a log's fold for (:meth:`Pipeline.close`) when the tailer ends its content for ``reason``."""
    return _CLOSED_FOR[reason]


class Step(NamedTuple):
    """What one line (or the closing of a log) gave: the records it completed, their emissions, or a drop.

    ``values_dropped``: values the line's event lost while it was kept (``bad_timestamp``, ``out_of_range``, an
    ``end_before_start`` the fold clamped), each counted once per line and value. Read-only: most lines complete
    nothing and share one empty step.
    """

    records: Sequence[Record] = ()
    emissions: Sequence[Emission] = ()
    drop: BadLine | None = None
    values_dropped: Sequence[BadLine] = ()


_NOTHING = Step()


class LineCounts(Protocol):
    """Where the lines of a log are counted as they are taken (:meth:`Pipeline.take`): the daemon's and replay's
    router (:class:`~copilot_otel.deliver.route.Router`), ``show``'s list of the lines it could not read."""

    def dropped_line(self, source: str, bad: BadLine) -> None:
        """A line dropped whole, with its reason."""
        ...

    def read(self, lines: int) -> None:
        """Lines with data taken since the last call, the dropped ones excepted."""
        ...


# The folder Copilot CLI keeps its sessions in (``~/.copilot/session-state``).
COPILOT_ROOT = "session-state"
# The key of a framer's state in the checkpointed context (:meth:`Pipeline.context_snapshot`).
FRAME_KEY = "frame"


def source_for(session: SessionFile) -> LoopSource | None:
    """The source whose framer reads ``session``'s log; ``None`` for Copilot CLI's (the default path).

    A Copilot session folder (``<id>/events.jsonl``) or a flat file directly in Copilot's ``session-state`` (its
    legacy layout) is Copilot's without a look (a backfill of thousands of sessions opens nothing more); any other
    ``.jsonl`` (another agent's log, or a Copilot log copied elsewhere) is told by its first record
    (:func:`~copilot_otel.sources.sniff`), and read with that source's framer (:func:`~copilot_otel.sources.
    loop_source`); a source whose framer is not written yet is read as Copilot's, and gives nothing. A log
    discovery found in an agent's folder (``session.agent``) is that agent's without a look, as
    :func:`~copilot_otel.library.agent_of` says (a backfill of thousands of small logs opens each once).
    """
    if session.folder is not None or session.path.parent.name == COPILOT_ROOT:
        return None
    if session.agent is not None:
        return None if session.agent == COPILOT_AGENT else loop_source(Source(session.agent))
    source = sniff(session.path)
    return None if source is None else loop_source(source)


def _frame_at_open(loop: AgentLoop, before: bytes | None, after: Framer) -> bool:
    """Give each prompt opened by the line just folded (and what waits for the next one) the framer's state at
    that line's start, in its ``context_at_open`` under :data:`FRAME_KEY`: what :meth:`AgentLoop.resume_point`
    hands a restart, whose new framer then reads that line again as this one did.

    ``before`` is that state, kept when the line might open one (:meth:`Pipeline._framed_line`); ``None`` when
    the framer foresaw no opening and one happened all the same: the state after the line is given instead (a
    restart then reads the prompt from a framer one line on), and ``False`` says so.
    """
    pending = loop.pending_at
    contexts = [p.context_at_open for p in loop.prompts.values()]
    if pending is not None:
        contexts.append(pending[1])
    state: Any = None
    for context in contexts:
        if FRAME_KEY not in context:
            if state is None:
                state = orjson.loads(before if before is not None else orjson.dumps(after.snapshot()))
            context[FRAME_KEY] = state
    return before is not None or state is None


def _with_dropped(step: Step, loop: AgentLoop, offset: int, end_offset: int, line_number: int) -> Step:
    """``step`` with the values its line lost (rare: only a value out of range, of the wrong type, or a clamped end
    gets here), as the loop holds them (:meth:`AgentLoop.take_dropped`)."""
    dropped = tuple(
        BadLine(reason, offset, end_offset, line_number, detail) for reason, detail in loop.take_dropped()
    )
    return step._replace(values_dropped=dropped) if dropped else step


class Pipeline:
    """One session log's stages, fed one line at a time.

    Args:
        session_id: The session id from the folder or file name (replaced by ``session.start.sessionId``).
        settings: Content policy and runaway thresholds.
        context: A checkpointed session context to resume from (the daemon after a restart).
        title: The session's title (``workspace.yaml``), when it may be exported.
        project: Build emissions too (``False`` for readers of the records alone, such as ``show``).
        window: Keep only the prompts that started in this time window (``replay --since``, ``--backfill``);
            the loop still sees every event, so the prompts kept are the same as in a full read.
        source: Another agent's reader, framer and translator (:func:`source_for`); ``None``: Copilot CLI's.
        first_frame: That framer's state at the log's start (what its ``seed`` read beside the log).
        subagents: Where its sub-agents' own logs are read from (:class:`~.subagents.SubagentLogs`: beside its
            file); ``None``: a log given as bytes, whose sub-agents are counted unread.
    """

    def __init__(
        self,
        session_id: str,
        settings: FoldSettings | None = None,
        *,
        context: Mapping[str, Any] | None = None,
        title: str | None = None,
        project: bool = True,
        window: PromptWindow | None = None,
        source: LoopSource | None = None,
        first_frame: Mapping[str, Any] | None = None,
        subagents: SubagentLogs | None = None,
    ) -> None:
        self.source = source
        self.subagents = subagents if subagents is not None else SubagentLogs(None, 0, None)
        self._framer: Framer | None = None
        if source is None:
            self.loop = AgentLoop(session_id, COPILOT, settings, context)
        else:
            # Another agent's log: its reader and framer before the same loop, its translator in the loop. The
            # framer's state rides in the context (FRAME_KEY), which the loop's own reading ignores.
            frame = context.get(FRAME_KEY) if context is not None else first_frame
            self.loop = AgentLoop(session_id, source.translator, settings, context)
            self._read = source.read_line
            self._framer = source.framer(frame if isinstance(frame, Mapping) else None)
            self._may_open = getattr(self._framer, "may_open", None)
            self._line = self._framed_line  # type: ignore[method-assign]  # Copilot's path stays as it is
        self._window = window
        self.settings = self.loop.settings
        if title:
            self.loop.ctx.title = title
        self._skip = self.settings.undecoded_types
        # Which agent wrote the log is which reader reads it (a sub-agent's own file has no session start to say it).
        agent = source.source.value if source is not None else COPILOT_AGENT
        self._project = Projector(self.settings.content, agent).project if project else None
        self.agent = agent
        # Records of kinds the reader does not read, by (the version their record named, kind), not yet taken
        # (:meth:`take_not_read`); and the last CLI version this log named.
        self._not_read: dict[tuple[str | None, str], int] = {}
        self._cli_version: str | None = None
        self.line_number = 0
        # Prompts another agent's framer opened on a line it did not foresee (:meth:`Framer.may_open`): none, as
        # the tests hold every fixture to.
        self.unforeseen_opens = 0
        # Lines that carried data (not blank), events among them, and drops by reason: the same counts whoever
        # reads the log.
        self.lines = 0
        self.events = 0
        self.bad_lines = 0
        self._lines_taken = 0  # lines read already handed out by take_lines_read

    @classmethod
    def for_session(
        cls,
        session: SessionFile,
        settings: FoldSettings,
        *,
        context: Mapping[str, Any] | None = None,
        project: bool = True,
        window: PromptWindow | None = None,
        depth: int = 0,
        seen: SeenCalls | None = None,
    ) -> Pipeline:
        """The pipeline of one session log: the one way replay, the daemon, ``show`` and the library build it.

        The title from its ``workspace.yaml`` summarises the conversation, so it is content: read only when
        prompts may be exported and emissions are built (a backfill of thousands of small sessions saves an open
        per session). ``depth`` and ``seen``: its :class:`~.subagents.SubagentLogs`' (a sub-agent's log read under
        its parent's, the daemon's :class:`~.subagents.SeenCalls`).
        """
        title = None
        if project and settings.content.allows(ContentKind.PROMPTS):
            title = session_title(read_workspace(session.folder))
        source = source_for(session)
        seed = source.seed(session.path) if source is not None and source.seed is not None else None
        return cls(
            session.session_id,
            settings,
            context=context,
            title=title,
            project=project,
            window=window,
            source=source,
            first_frame={"seed": seed} if seed is not None else None,
            subagents=SubagentLogs(session.path, depth, seen),
        )

    def feed(self, item: TailItem, line_number: int | None = None) -> Step:
        """Fold one line; ``line_number`` (1-based, for messages) defaults to the count of lines fed."""
        self.line_number = number = line_number if line_number is not None else self.line_number + 1
        if item.__class__ is TooLong:
            return self._too_long(item.start, item.end, number)
        return self._line(item.data, item.start, item.end, number)  # type: ignore[union-attr]  # a Line

    def feed_file(self, path: str | os.PathLike[str], chunk_bytes: int = READ_CHUNK_BYTES) -> Iterator[Step]:
        """Fold a log read from disk in chunks (replay, ``show``, the library): :meth:`feed_chunks` over
        :func:`read_chunks`, in memory bounded by the chunk and the longest line, whatever the log's size.

        Raises:
            SourceError: the file cannot be read (the steps of the lines before the failure were yielded).
        """
        try:
            yield from self.feed_chunks(read_chunks(path, chunk_bytes))
        except OSError as exc:  # only the reads raise it: the fold does no I/O
            raise SourceError(f"cannot read {path}: {exc.strerror}") from exc

    def feed_blob(self, blob: bytes) -> Iterator[Step]:
        """Fold a whole log already in memory: :meth:`feed_chunks` over one chunk."""
        return self.feed_chunks((blob,))

    def feed_chunks(self, chunks: Iterable[bytes]) -> Iterator[Step]:
        """Fold a log given as consecutive pieces of its bytes, cut anywhere: the steps that completed
        something or dropped a line; the lines that did neither are folded and counted, not yielded.

        The lines are :func:`split_lines`'s (and the tailer's), each folded as :meth:`feed` folds it (both call
        :meth:`_line`); the framing is inlined here because a backfill runs it for every line of every log. A
        line cut by a chunk's end is held as its pieces until its newline (or the end of the log: a last line
        without one is folded too); one that grows past :data:`MAX_LINE_BYTES` stops being held and is dropped
        as ``too_long`` when it ends, so no line costs more memory than the limit.
        """
        line, too_long, limit = self._line, self._too_long, MAX_LINE_BYTES
        number = self.line_number
        base = 0  # offset in the log of the chunk's first byte
        held: list[bytes] = []  # the pieces of a line begun in an earlier chunk
        held_start = held_bytes = 0  # where that line starts, its length so far (held or not)
        for chunk in chunks:
            pos, n, find = 0, len(chunk), chunk.find
            if held_bytes:
                stop = find(b"\n")
                if stop < 0:  # the held line goes on past this chunk too
                    held_bytes += n
                    if held_bytes > limit:
                        held.clear()  # too long: only its length is kept from now on
                    else:
                        held.append(chunk)
                    base += n
                    continue
                number += 1
                if held_bytes + stop > limit:
                    step = too_long(held_start, base + stop + 1, number)
                else:
                    held.append(chunk[:stop])
                    step = line(b"".join(held), held_start, base + stop + 1, number)
                held.clear()
                held_bytes = 0
                pos = stop + 1
                if step is not _NOTHING:
                    self.line_number = number
                    yield step
            while True:
                stop = find(b"\n", pos)
                if stop < 0:
                    break
                end = stop + 1
                number += 1
                if stop - pos > limit:
                    step = too_long(base + pos, base + end, number)
                else:
                    step = line(chunk[pos:stop], base + pos, base + end, number)
                pos = end
                if step is not _NOTHING:
                    self.line_number = number
                    yield step
            if pos < n:  # a line cut by the chunk's end
                held_start, held_bytes = base + pos, n - pos
                if held_bytes <= limit:
                    held.append(chunk[pos:] if pos else chunk)
            base += n
        if held_bytes:  # a last line without its newline
            number += 1
            step = (
                too_long(held_start, base, number)
                if held_bytes > limit
                else line(b"".join(held), held_start, base, number)
            )
            if step is not _NOTHING:
                self.line_number = number
                yield step
        self.line_number = number

    def _too_long(self, start: int, end: int, number: int) -> Step:
        self.lines += 1
        return self._drop(BadLine(DropReason.TOO_LONG, start, end, number, f"{end - start} bytes"))

    def _drop(self, bad: BadLine) -> Step:
        """The step of a line dropped whole, counted here so that :meth:`take_lines_read` leaves it out."""
        self.bad_lines += 1
        return Step(drop=bad)

    def take(
        self, steps: Iterable[Step], source: str, counts: LineCounts, route: Callable[[Step], int]
    ) -> int:
        """Take the steps of this log's lines (and of its closing): the one place that decides what becomes of a
        line, whoever read it (replay, the daemon, ``show``), so that no reader drops, routes or counts a line its
        own way.

        A dropped line goes to ``counts`` with its reason and nowhere else; a step that completed something or
        lost a value goes to ``route`` (the reader's: replay's batch, the daemon's outbox); the lines read
        (:meth:`take_lines_read`) go to ``counts`` once the steps are taken. Returns what ``route`` returned,
        summed (the spans routed).
        """
        routed = 0
        for step in steps:
            if step.drop is not None:
                counts.dropped_line(source, step.drop)
            elif step is not _NOTHING:  # most lines complete nothing: no call for them
                routed += route(step)
        counts.read(self.take_lines_read())
        return routed

    def take_lines_read(self) -> int:
        """The lines with data folded since the last call, bad ones excepted: the one count of lines read, which
        replay and the daemon hand their router for the same log (the daemon per read of a followed file, replay
        per log), so the two cannot count a log differently."""
        read = self.lines - self.bad_lines
        taken, self._lines_taken = self._lines_taken, read
        return read - taken

    def _line(self, data: bytes, start: int, end: int, number: int) -> Step:
        """One line's bytes (without its ``\\n``) through parse, the loop and the projections."""
        if data[-1:] == b"\r":
            data = data[:-1]
        if not data or data.isspace():
            return _NOTHING  # framing, not data (isspace: no copy of a long line, unlike strip)
        self.lines += 1
        loop = self.loop
        # Parsed into the loop's list of dropped values: what the event loses, now or when the loop reads it.
        event = parse_line(data, start, end, number, self._skip, loop.dropped)
        if event is None:  # read only for content that is not captured (the system prompt): not decoded
            return _NOTHING
        if event.__class__ is BadLine:
            return self._drop(event)
        # feed_event, inlined: this runs once per line of every backfill.
        self.events += 1
        records = loop.feed(event)  # type: ignore[arg-type]
        if not records and not loop.dropped:
            return _NOTHING  # most lines: no call more
        return self._finish(records, start, end, number)

    def _framed_line(self, data: bytes, start: int, end: int, number: int) -> Step:
        """:meth:`_line` for another agent's log: its reader, then its framer, whose events the loop folds."""
        if data[-1:] == b"\r":
            data = data[:-1]
        if not data or data.isspace():
            return _NOTHING
        self.lines += 1
        view = self._read(data, start, end, number)
        if view.__class__ is BadLine:
            return self._drop(view)  # checked by class: a BadLine
        self.events += 1
        loop = self.loop
        records: list[Record] = []
        framer: Framer = self._framer  # type: ignore[assignment]  # this path is another agent's: it has one
        # The framer's state before this line, kept (as bytes: the framer goes on changing its values) when the line
        # may open a prompt: a restart re-folds an open prompt from its first line, so it needs the framer as it was
        # there, not as it is at the checkpoint (a Claude Code prompt's text is read a line before it opens). Any
        # line may while no prompt is open (or work waits for one); while one is, only those its framer names.
        current = loop.current
        may_open = self._may_open
        before = (
            orjson.dumps(framer.snapshot())
            if current is None or loop.pending_at is not None or may_open is None or may_open(view)
            else None
        )
        for event in framer.frame(view):  # type: ignore[arg-type]  # an Event
            cls = event.__class__
            if cls is SubagentDone:  # the pipeline's, not the loop's (pipeline/subagents.py)
                self.subagents.ended(loop.current, event)  # type: ignore[arg-type]  # checked by class
                continue
            if cls is Rooted:
                self.subagents.rooted = True
            records.extend(loop.feed(event, end))
        if (loop.current is not current or loop.pending_at is not None) and not _frame_at_open(
            loop, before, framer
        ):
            self.unforeseen_opens += 1
        if view.dropped:  # type: ignore[union-attr]
            loop.dropped.extend(view.dropped)  # type: ignore[union-attr]
            view.dropped.clear()  # type: ignore[union-attr]
        if not records and not loop.dropped:
            return _NOTHING
        return self._finish(records, start, end, number)

    def feed_event(self, event: Event) -> Step:
        """Fold one event already decoded (the stages after parse; tests feed events they built)."""
        self.events += 1
        records = self.loop.feed(event)
        if event.dropped is not self.loop.dropped:  # built with a list of its own: its drops are this line's
            self.loop.dropped.extend(event.dropped)
            event.dropped.clear()
        return self._finish(records, event.offset, event.end_offset, self.line_number)

    def close(self, reason: CloseReason, time_ns: int | None = None) -> Step:
        """Close whatever is still open (end of file, owner gone, idle); it is marked incomplete. Another agent's
        framer first gives up what it held for a line that will not come (:meth:`~copilot_otel.sources.Framer.
        close`)."""
        records: list[Record] = []
        if self._framer is not None:
            for event in self._framer.close():
                records.extend(self.loop.feed(event, event.end_offset))
        records.extend(self.loop.close(reason, time_ns))
        return self._finish(records, 0, 0, self.line_number)

    def _finish(self, records: list[Record], offset: int, end_offset: int, line_number: int) -> Step:
        """The step of what the loop completed: the window's prompts only, projected, with the values the event
        lost (rare: a value out of range, a clamped end)."""
        ran = self.subagents.take(records) if records else None
        if records and self._window is not None:
            records = self._window.keep(records)
        if ran and self._project is not None:
            complete(self, records, ran)  # the root's cost, before it is projected
        step = (
            _new(Step, (records, self._project(records) if self._project is not None else (), None, ()))
            if records
            else _NOTHING
        )
        loop = self.loop
        if loop.dropped:
            self._count_not_read(loop.dropped)
        return _with_dropped(step, loop, offset, end_offset, line_number) if loop.dropped else step

    def _count_not_read(self, dropped: list[tuple[DropReason, str]]) -> None:
        """Take the readers' not-read notes out of the line's dropped values into this log's counts: a record of a
        kind its reader does not read is drift, said once per CLI version (:meth:`take_not_read`), not a value
        dropped from this line."""
        if not any(reason is DropReason.NOT_READ for reason, _ in dropped):
            return
        counts = self._not_read
        for reason, detail in dropped:
            if reason is DropReason.NOT_READ:
                kind, version = not_read_of(detail)
                if not kind:  # the version the log names (events.note_version), no record
                    self._cli_version = version
                else:
                    counts[version, kind] = counts.get((version, kind), 0) + 1
        dropped[:] = [d for d in dropped if d[0] is not DropReason.NOT_READ]

    def take_not_read(self, final: bool = False) -> list[NotRead]:
        """The records of kinds the reader does not read since the last call, per CLI version and kind.

        A record that names no version of its own is dated by the version the log names (Copilot's
        ``session.start``, Codex's ``session_meta``, Claude Code's records), else by the last version a record of
        this log named; while the log has named none (a Claude Code log opens with records that name none), it
        is held, until ``final`` (the log's fold is over, or put away): then it is counted with no version (Gemini
        CLI's logs name none)."""
        if not self._not_read:
            return []
        logged = self.loop.ctx.copilot_version
        out: dict[tuple[str | None, str], int] = {}
        held: dict[tuple[str | None, str], int] = {}
        for version, _kind in self._not_read:
            if version is not None:
                self._cli_version = version
        for (version, kind), n in self._not_read.items():
            named = version or logged or self._cli_version
            target = held if named is None and not final else out
            target[named, kind] = target.get((named, kind), 0) + n
        self._not_read = held
        return [NotRead(self.agent, version, kind, n) for (version, kind), n in out.items()]

    # What the daemon checkpoints and shows about the session (see the resume model in docs/design.md).
    @property
    def has_open_prompt(self) -> bool:
        return self.loop.has_open_prompt

    def context_snapshot(self) -> dict[str, Any]:
        context = self.loop.context_snapshot()
        if self._framer is not None:
            context[FRAME_KEY] = self._framer.snapshot()
        return context

    def resume_point(self) -> tuple[int, dict[str, Any]] | None:
        return self.loop.resume_point()

    def live_stats(self) -> list[LiveStats]:
        """Progress of each prompt still open, for the live gauges."""
        return self.loop.live_stats()

    @property
    def ctx(self) -> SessionContext:
        """The session's context (ids, versions, cwd and git facts) as the loop knows it now."""
        return self.loop.ctx


# --- one session's log, whole -------------------------------------------------------------------------------
# A time window (since, until) in Unix nanoseconds, either bound open (None); None: everything.
Window = tuple[int | None, int | None] | None


def fold_settings(config: Config) -> FoldSettings:
    """The fold's settings, all from the resolved config: its content policy and runaway thresholds."""
    return FoldSettings(
        content=config.content,
        runaway=RunawayThresholds(
            turns=config.runaway_turns,
            identical_tool_calls=config.runaway_identical_calls,
            tool_errors=config.runaway_tool_errors,
            tokens_per_minute=config.runaway_tokens_per_minute,
        ),
    )


@dataclass
class FoldedSession:
    """Everything one session log folds into (used by ``show`` and tests)."""

    session: SessionFile
    emissions: list[Emission]
    bad_lines: list[BadLine]
    events: int
    fold: Pipeline


def new_fold(session: SessionFile, settings: FoldSettings, window: Window = None) -> Pipeline:
    """The pipeline for one session (:meth:`Pipeline.for_session`), kept to the prompts of ``window``."""
    prompts = PromptWindow(*window) if window is not None else None
    return Pipeline.for_session(session, settings, window=prompts)


def fold_events(
    session: SessionFile, fold: Pipeline, close_reason: CloseReason = "file_ended"
) -> Iterator[Step]:
    """Read one session log and fold it; yields the :class:`Step` of each line that completed something or was
    dropped (:meth:`Pipeline.feed_file`: read in chunks, a log of any size in bounded memory), then the closing
    step.

    Raises:
        SourceError: the file cannot be read.
    """
    yield from fold.feed_file(session.path)
    # The file ends here: whatever is still open is closed as incomplete (a live daemon would wait instead).
    yield fold.close(close_reason)


def fold_session(session: SessionFile, settings: FoldSettings) -> FoldedSession:
    """Fold a whole session log in memory."""
    emissions: list[Emission] = []
    counts = KeptLines()
    fold = new_fold(session, settings)

    def keep(step: Step) -> int:
        emissions.extend(step.emissions)
        return len(step.emissions)

    fold.take(fold_events(session, fold), str(session.path), counts, keep)
    return FoldedSession(session, emissions, counts.bad_lines, counts.lines_read, fold)


class KeptLines:
    """:class:`LineCounts` kept for the caller (``show``, the library): the lines dropped, and the count of lines
    read."""

    def __init__(self) -> None:
        self.bad_lines: list[BadLine] = []
        self.lines_read = 0

    def dropped_line(self, source: str, bad: BadLine) -> None:
        self.bad_lines.append(bad)

    def read(self, lines: int) -> None:
        self.lines_read += lines
