"""The calls a prompt's sub-agents made in logs of their own, for its root's cost (loop rule A's other half).

Claude Code, Codex and Gemini CLI write a sub-agent's work to a log of its own, folded apart, its spans in its
parent's trace. The parent's prompt costs its whole trace all the same: its framer says where each sub-agent ended
(:class:`~copilot_otel.loop.neutral.SubagentDone`, naming its log), the pipeline notes the name for the prompt
running then (:class:`SubagentLogs`), and when that prompt's :class:`~copilot_otel.model.activity.PromptRun` comes out of
the fold, :func:`complete` reads each named log and fills in the run's ``subagent_calls`` and
``subagents_unread`` before it is projected. The fold itself reads no file and knows nothing of this.

Why at the prompt's end, not at the sub-agent's: by then the CLI has written the sub-agent's log to its end (Codex
writes a thread's rollout on its own schedule), and a sub-agent continued later in the same prompt is read whole.

A log is read through a pipeline of its own that builds records only (the same reader, framer and fold as the
log's own reading, so the same calls, with the same ids, as its chat spans), sub-agents of it too: each log once
per prompt (a log that names itself, or two that name each other, end there), at most :data:`SUBAGENT_DEPTH_MAX`
deep. A call counts once by its span, and only for the prompt of its trace.

Interactive Claude Code deletes a sub-agent's log seconds after it ended. The daemon has read it meanwhile, as it
was written: its own fold of that log left the calls in :class:`SeenCalls`, which the parent's pipeline asks
first; the file, if still there, adds what the daemon may not have read yet. A log neither there nor seen is
``subagents_unread`` (a daemon restarted after the deletion has not seen it either: said, not guessed).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from ..model.activity import ModelCall, PromptRun, Record, SubagentCall
from ..sources.sessions import SessionFile
from ..sources.sidefiles import read_chunks

if TYPE_CHECKING:
    from pathlib import Path

    from ..loop.foldstate import Prompt
    from ..loop.neutral import SubagentDone
    from . import Pipeline

__all__ = [
    "SUBAGENT_DEPTH_MAX",
    "SUBAGENT_LOG_MAX_BYTES",
    "SeenCalls",
    "SubagentLogs",
    "complete",
    "seen_call",
]

# The most of a sub-agent's log read for its calls (a larger one is said once, and counted unread).
SUBAGENT_LOG_MAX_BYTES = 1 << 30
# How deep sub-agents of sub-agents are read (Codex's go 2 deep); a deeper one is counted unread.
SUBAGENT_DEPTH_MAX = 4
# The open prompts whose sub-agents a pipeline remembers (a prompt left out of a time window never ends in a
# PromptRun that takes its names: the oldest are forgotten).
_PROMPTS_MAX = 256


def seen_call(rec: ModelCall) -> SubagentCall:
    """What a prompt counts of a sub-agent's model call."""
    return SubagentCall(
        rec.trace_id, rec.span_id, rec.provider, rec.model, rec.start_ns, rec.usage, rec.calls
    )


def _calls_of(records: Iterable[Record]) -> Iterator[SubagentCall]:
    """What a prompt counts of the model calls among a sub-agent log's ``records``."""
    return (seen_call(r) for r in records if r.__class__ is ModelCall)


class SeenCalls:
    """The daemon's sub-agents' calls, by their log's real path, as its own folds of those logs read them: what a
    parent's prompt counts when the CLI has deleted the log since; and, while the daemon holds a log's descriptor,
    a reader of the whole file through it. At most :data:`CALLS_MAX` calls in all (the oldest logs' go first: a
    log still there is read from its file) and :data:`LOGS_MAX` descriptors' readers. Used from the daemon's loop
    (the lock keeps it whole for any other reader)."""

    CALLS_MAX = 200_000
    LOGS_MAX = 1024

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._logs: OrderedDict[str, list[SubagentCall]] = OrderedDict()
        self._count = 0
        self._held: OrderedDict[str, Callable[[int], Iterator[bytes] | None]] = OrderedDict()

    def hold(self, path: Path, read: Callable[[int], Iterator[bytes] | None]) -> None:
        """``read(limit)`` reads the sub-agent's log at ``path`` whole, in chunks, through the descriptor the
        daemon holds (:meth:`~copilot_otel.sources.tail.FileTailer.read_held`): a parent's prompt that ends before
        the daemon has read the log's last lines, which the CLI has just deleted, still reads them."""
        with self._lock:
            self._held[os.path.realpath(path)] = read
            while len(self._held) > self.LOGS_MAX:
                self._held.popitem(last=False)

    def held(self, path: Path, limit: int) -> Iterator[bytes] | None:
        """The log at ``path`` read whole through the daemon's descriptor; ``None`` when none is held (any more)."""
        with self._lock:
            read = self._held.get(os.path.realpath(path))
        return read(limit) if read is not None else None

    def add(self, path: Path, records: Iterable[Record]) -> None:
        """The model calls among a sub-agent log's ``records``, as its fold completed them."""
        calls = list(_calls_of(records))
        if not calls:
            return
        key = os.path.realpath(path)
        with self._lock:
            kept = self._logs.pop(key, None) or []
            kept.extend(calls)
            self._logs[key] = kept
            self._count += len(calls)
            while self._count > self.CALLS_MAX and len(self._logs) > 1:
                self._count -= len(self._logs.popitem(last=False)[1])

    def forget(self, path: Path) -> None:
        """The log at ``path`` is new content (replaced, truncated): what was seen of the old one is not its."""
        with self._lock:
            dropped = self._logs.pop(os.path.realpath(path), None)
            self._count -= len(dropped or ())

    def get(self, path: Path) -> Sequence[SubagentCall] | None:
        """The calls seen of the log at ``path``; ``None`` when its fold gave none here."""
        with self._lock:
            kept = self._logs.get(os.path.realpath(path))
            return tuple(kept) if kept is not None else None


class SubagentLogs:
    """A pipeline's part in this: which sub-agent logs each open prompt of its log ran (by the prompt's trace id,
    from the framer's :class:`~copilot_otel.loop.neutral.SubagentDone` events), and, when its log is itself a
    sub-agent's (its fold rooted in another's trace), its calls for :class:`SeenCalls`.

    Args:
        path: The log's file (``None``: given as bytes; its sub-agents are counted unread).
        depth: How many sub-agents' logs it is read under (0: read for itself).
        seen: The daemon's :class:`SeenCalls`.
    """

    __slots__ = ("_by_trace", "depth", "path", "rooted", "seen")

    def __init__(self, path: Path | None, depth: int, seen: SeenCalls | None) -> None:
        self.path, self.depth, self.seen = path, depth, seen
        self.rooted = False
        self._by_trace: OrderedDict[int, dict[str, bool]] = OrderedDict()

    def ended(self, prompt: Prompt | None, event: SubagentDone) -> None:
        """A sub-agent ended: noted for the prompt running now, whose end reads it. A sub-agent's log read for
        itself notes nothing: its prompt is its parent's, whose pipeline reads it, sub-agents and all; read under
        its parent, everything it names is that prompt's, whatever its own fold has open."""
        if self.depth:
            trace = prompt.trace_id if prompt is not None else 0
        elif prompt is None or self.rooted:
            return
        else:
            trace = prompt.trace_id
        names = self._by_trace.get(trace)
        if names is None:
            names = self._by_trace[trace] = {}
            if len(self._by_trace) > _PROMPTS_MAX:
                self._by_trace.popitem(last=False)
        names[event.log] = event.running  # in the order the ends were read; whether it still ran then

    def take(self, records: Sequence[Record]) -> dict[int, dict[str, bool]] | None:
        """What the fold just completed means here: a sub-agent's own calls go to :class:`SeenCalls`; the runs of
        prompts that ran sub-agents are returned with their names (forgotten here), for :func:`complete`."""
        if self.depth:
            return None  # read under a parent, whose reading takes everything at the end (take_all)
        if self.rooted and self.seen is not None and self.path is not None:
            self.seen.add(self.path, records)
        if not self._by_trace:
            return None
        taken: dict[int, dict[str, bool]] = {}
        for rec in records:
            if rec.__class__ is PromptRun:
                names = self._by_trace.pop(rec.trace_id, None)
                if names:
                    taken[rec.trace_id] = names
        return taken

    def take_all(self) -> list[str]:
        """Every name noted (a sub-agent's log read under its parent: all of it is the parent's prompt's)."""
        names = list(dict.fromkeys(n for names in self._by_trace.values() for n in names))
        self._by_trace.clear()
        return names


def complete(parent: Pipeline, records: Iterable[Record], ran: dict[int, dict[str, bool]]) -> None:
    """Fill in each of ``records``' prompt runs that ran sub-agents (``ran``: their names by trace id) with the calls
    of its trace those sub-agents' logs hold, and how many of the logs could not be read. The runs are the fold's,
    just made: nothing else holds them yet."""
    for rec in records:
        if rec.__class__ is not PromptRun:
            continue
        run: PromptRun = rec
        names = ran.get(run.trace_id)
        if not names:
            continue
        calls: dict[int, SubagentCall] = {}
        own = parent.subagents.path
        unread = _read_all(parent, names, {os.path.realpath(own)} if own is not None else set(), calls)
        # in the calls' order, whichever way they were found (the daemon's, the file's): the same sum as replay's
        mine = sorted(
            (c for c in calls.values() if c.trace_id == run.trace_id), key=lambda c: (c.start_ns, c.span_id)
        )
        run.subagent_calls = tuple(mine)
        run.subagents_unread = unread
        run.subagents_running = sum(names.values())


def _read_all(
    parent: Pipeline, names: Iterable[str], visited: set[str], calls: dict[int, SubagentCall]
) -> int:
    """The calls of the logs ``names`` (found beside ``parent``'s log) into ``calls`` by span; returns how many of
    them could not be read. ``visited``: the logs read for this prompt already (each is read once)."""
    source, logs = parent.source, parent.subagents
    find = source.subagent_log if source is not None else None
    unread = 0
    for name in names:
        log = find(logs.path, name) if find is not None and logs.path is not None else None
        if log is None:
            unread += 1
            continue
        real = os.path.realpath(log)
        if real in visited:
            continue
        visited.add(real)
        seen = logs.seen.get(log) if logs.seen is not None else None
        for call in seen or ():
            calls[call.span_id] = call
        read = _read_one(parent, log, visited, calls)
        if read is None:
            unread += seen is None
        else:
            unread += read
    return unread


def _read_one(parent: Pipeline, log: Path, visited: set[str], calls: dict[int, SubagentCall]) -> int | None:
    """One sub-agent's log, folded alone, its calls into ``calls``, its own sub-agents' after them; returns how many
    of those could not be read, or ``None`` when this log could not be (missing, empty, refused, too deep)."""
    depth, seen = parent.subagents.depth, parent.subagents.seen
    if depth >= SUBAGENT_DEPTH_MAX:
        return None
    child = type(parent).for_session(
        SessionFile(log.stem, log, None, parent.agent),
        parent.settings,
        project=False,
        depth=depth + 1,
        seen=seen,
    )
    # Framed as replay frames the log's own reading (a last line without its newline too). Gone (deleted by its
    # CLI): as the daemon's descriptor still reads it, if it holds one.
    _feed(child, read_chunks(log, "a sub-agent's log", SUBAGENT_LOG_MAX_BYTES), calls)
    if not child.lines and seen is not None:
        _feed(child, seen.held(log, SUBAGENT_LOG_MAX_BYTES), calls)
    if not child.lines:
        return None
    _add(child.close("file_ended").records, calls)
    return _read_all(child, child.subagents.take_all(), visited, calls)


def _feed(child: Pipeline, chunks: Iterable[bytes] | None, calls: dict[int, SubagentCall]) -> None:
    """``chunks`` of a sub-agent's log (``None``: none to read) through its pipeline, its calls into ``calls``."""
    for step in child.feed_chunks(chunks or ()):
        _add(step.records, calls)


def _add(records: Iterable[Record], calls: dict[int, SubagentCall]) -> None:
    for call in _calls_of(records):
        calls[call.span_id] = call
