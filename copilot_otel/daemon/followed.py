"""One followed session log: the resume model in one class.

A :class:`FollowedFile` owns what the daemon knows of one log while it follows it: the tailer (offset, identity),
the session's :class:`~copilot_otel.pipeline.Pipeline` (or, between prompts, only its small checkpointed context),
the offset up to which a restart must stay silent, an unterminated last line, and the per-file sequence of
markers whose acknowledgements move its checkpoint. It reads, folds, routes and enqueues; it never decides *when*
(the loop and the tracker do), and it touches no other file, so it can be driven in-process with a fake outbox.

The resume model (``docs/design.md``): every batch of a file's records is queued with a :class:`Marker` carrying
``(offset, safe_offset, context, identity, stat)``; a checkpoint moves to a marker only once it and every earlier
marker of the file were delivered (:meth:`FollowedFile.acked`). After a restart the fold is rebuilt from
``safe_offset`` (the start of the oldest open prompt) with the context saved there, and everything caused by lines
ending at or before the acknowledged offset is suppressed: ids and times come from the events, so what is
re-emitted is byte-identical to what a crash may have cut off.

A last line that never gets its newline (Copilot CLI 0.0.354 wrote the newline *before* each event, so its logs
always end so) is folded once its CLI is gone, but a checkpoint never splits a line: the checkpoint stays before
it and says in its context (:data:`UNTERMINATED_KEY`) that the line was folded, and whether the context already
holds it. A restart then neither folds it again over a context that holds it (its prompt would open a second
time, under a new id) nor closes its prompt again.

Time: every idle decision here uses the monotonic clock (a wall-clock step of an hour must not close a live
prompt); the only wall-clock reading is the age of a file found on disk, converted once when it is first seen.
"""

from __future__ import annotations

import enum
import errno
import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from .._platform import current
from ..common.errors import SourceError
from ..common.ratelimit import RateLimitedLog
from ..deliver.outbox import Marker
from ..deliver.route import Router
from ..loop.agentloop import FoldSettings
from ..model.activity import CloseReason, Detection, PromptRun, Record
from ..model.records import BadLine, DropReason, LogRecord, SpanRecord
from ..pipeline import Pipeline, Step, closed_for
from ..pipeline.subagents import SeenCalls
from ..pipeline.window import PromptWindow
from ..settings.config import Backfill
from ..sources import sidefiles
from ..sources.sessions import SessionFile
from ..sources.tail import (
    EndReason,
    FileIdentity,
    FileTailer,
    Line,
    ResetReason,
    TailBatch,
    TailItem,
    TooLong,
)
from .state import Checkpoint

__all__ = [
    "IDLE_CLOSE_S",
    "UNTERMINATED_KEY",
    "FollowedFile",
    "FollowedFiles",
    "Listener",
    "Outbox",
    "Read",
    "ReadOutcome",
    "Shared",
]

logger = logging.getLogger("copilot_otel.daemon")

# A file with no new line for this long has its descriptor closed (it is reopened on the next change).
IDLE_CLOSE_S = 60.0
# In a checkpoint's context: the unterminated last line folded already, as [start, end, the context holds it].
# (The session context ignores keys it does not know; the followed file takes this one out before folding.)
UNTERMINATED_KEY = "unterminated"

Outgoing = list[SpanRecord | LogRecord]


class Outbox(Protocol):
    """Where a file's records go, each batch followed by the marker that checkpoints it (:class:`~copilot_otel.
    outbox.Outbox`, or a list in tests)."""

    def put(self, records: Outgoing, marker: Marker, live: bool) -> None: ...


class Listener(Protocol):
    """What the daemon does with a record beyond sending it (count it, act on a runaway, sum up the backfill)."""

    def on_record(self, f: FollowedFile, record: Record) -> Sequence[SpanRecord | LogRecord]:
        """Called for every detection and finished prompt not suppressed; returns records to send with it."""
        ...


@dataclass(frozen=True, slots=True)
class Shared:
    """What every followed file of one daemon shares: settings, and where its records and drops go; and the calls
    of the sub-agents' logs it followed, which a parent's prompt costs when the CLI has deleted a log since."""

    settings: FoldSettings
    backfill: Backfill
    router: Router
    outbox: Outbox
    listener: Listener
    log: RateLimitedLog
    seen_calls: SeenCalls = field(default_factory=SeenCalls)


class Read(enum.Enum):
    """How one :meth:`FollowedFile.read` went."""

    READ = "read"
    """Lines were read (or there were none): the file's flags are current."""
    NO_DESCRIPTOR = "no_descriptor"
    """The process or the system ran out of descriptors (EMFILE/ENFILE): back-pressure, try again soon."""
    FAILED = "failed"
    """The file cannot be read (EACCES, not a regular file): said once, left until it changes."""


class ReadOutcome(NamedTuple):
    """What a read did, for the tracker (descriptor back-pressure) and the backfill progress line."""

    how: Read
    spans: int = 0
    error: OSError | None = None


class FollowedFile:
    """One followed session log and everything the daemon knows about it.

    Args:
        session: The log and its session folder.
        tailer: Reads the log from its resume offset.
        shared: Settings, the router (one set of health counts for the daemon), the outbox, the listener.
        context: A checkpointed session context to rebuild the fold from.
        suppress_until: Lines ending at or before this offset were delivered before a restart.
        live: Caught up with its end at least once (new lines go to the live lane).
        idle_for_s: How long the file had been quiet when it was first seen (its age on disk, converted once).
        clock: Monotonic seconds (injected by tests).
    """

    def __init__(
        self,
        session: SessionFile,
        tailer: FileTailer,
        shared: Shared,
        *,
        context: dict[str, Any] | None = None,
        suppress_until: int = 0,
        live: bool = False,
        idle_for_s: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.session = session
        self.key = str(session.path)
        self.tailer = tailer
        self.shared = shared
        self.router = shared.router
        self.fold: Pipeline | None = None
        self.suppress_until = suppress_until
        self.fed_unterminated: int | None = None  # start offset of an unterminated last line already folded
        self._unterminated_end = 0  # and its end (the end of the file when it was folded)
        # Where a last line delivered before a restart starts, when a prompt open before it makes the restart fold
        # it again: its newline may come first (its CLI resumed), and the line it completes was delivered.
        self._delivered_unterminated: int | None = None
        if context is not None and UNTERMINATED_KEY in context:
            context = self._restore_unterminated(context)
        self.context = context  # the checkpointed context, until the fold is built
        self.live = live
        self.pending = True  # there may be unread data
        self.seq = 0
        self.next_ack_seq = 1
        self._delivered: dict[int, Marker] = {}
        self._clock = clock
        now = clock()
        self.last_activity = now - max(
            0.0, idle_for_s
        )  # monotonic: the last new line or change of size/mtime
        self.last_used = now  # monotonic: the last read (the descriptor cache's order)
        self.line_number = 0
        self.deleted = False
        self.tail_bytes = False  # bytes after the last newline at the last read (a line not yet terminated)
        self._log = shared.log
        self._held = False  # a sub-agent's log whose descriptor its parent's prompt may read (SeenCalls.hold)

    def _restore_unterminated(self, context: dict[str, Any]) -> dict[str, Any]:
        """Take the folded unterminated line out of a checkpointed context: when the context holds it, it is not
        folded again; else (a prompt open before it is re-folded) its emissions were delivered: suppressed."""
        context = dict(context)
        found = context.pop(UNTERMINATED_KEY)
        match found:
            case [int(start), int(end), bool(held)] if 0 <= start <= end:
                if held:
                    self.fed_unterminated, self._unterminated_end = start, end
                else:
                    self.suppress_until = max(self.suppress_until, end)
                    self._delivered_unterminated = start
            case _:  # not ours: the line is folded again, as before this key existed
                pass
        return context

    # ------------------------------------------------------------------ state the tracker reads
    @property
    def has_open_prompt(self) -> bool:
        """A prompt is open: in the fold, or (fold not rebuilt yet) in the checkpoint being resumed."""
        if self.fold is not None:
            return self.fold.has_open_prompt
        return self.tailer.offset < self.suppress_until

    @property
    def needs_attention(self) -> bool:
        """The owner/idle checks apply: an open prompt, or a last line without its newline not folded yet."""
        return self.unterminated_waiting or self.has_open_prompt

    @property
    def unterminated_waiting(self) -> bool:
        """The last line has no newline (yet) and was not folded: it is, once the file is quiet and its CLI gone."""
        return self.tail_bytes and self.fed_unterminated is None

    @property
    def settled(self) -> bool:
        """Nothing of this file is in flight or open: it may be forgotten by the tracker and found again by its
        stat (its last checkpoint is its whole state)."""
        return (
            not self.pending
            and not self.deleted
            and not self.tailer.is_open
            and self.fold is None
            and not self.needs_attention
            and self.next_ack_seq == self.seq + 1
            and not self._delivered
        )

    def idle_s(self, now: float | None = None) -> float:
        """Seconds since the last new line or change (monotonic)."""
        return (self._clock() if now is None else now) - self.last_activity

    # ------------------------------------------------------------------ reading
    def read(self, max_bytes: int) -> ReadOutcome:
        """Read and fold up to ``max_bytes`` of the log; enqueue what it completed with its marker.

        The steps, each a method: read a batch (or say why not), note activity, restart the fold if the content
        under the path is new, fold the lines, end the fold if the file's content ended, checkpoint, then update
        the flags the tracker reads.
        """
        seen_before = self.tailer.last_seen
        self.last_used = self._clock()
        try:
            batch = self.tailer.read_lines(max_bytes)
        except (OSError, SourceError) as exc:
            return self._read_failed(exc)
        if (batch.lines and self.live) or (seen_before is not None and self.tailer.last_seen != seen_before):
            # (the first look at a file is no sign of activity, nor is reading its history: its age is, so a
            # prompt left open by a log quiet for longer than the idle timeout closes once it is read)
            self.last_activity = self.last_used
        out: Outgoing = []
        spans = self._restart(batch.reset, out) if batch.reset is not None else 0
        fold = self._fold() if batch.lines or batch.end else None
        if fold is not None:
            spans += self._feed(fold, batch.lines, out)
            if fold.subagents.rooted and not self._held:  # a sub-agent's log: its parent's prompt may read it
                self.shared.seen_calls.hold(self.session.path, self.tailer.read_held)
                self._held = True
            if batch.end is not None:
                spans += self._end(fold, batch, out)
        self._checkpoint(batch, out)
        if fold is not None:  # records of kinds its reader does not read: said once per CLI version
            self.router.not_read(self.key, fold.take_not_read(final=self.fold is None))
        self._update_flags(batch)
        return ReadOutcome(Read.READ, spans)

    def _read_failed(self, exc: OSError | SourceError) -> ReadOutcome:
        """No batch: out of descriptors (it stays pending, read once they free up), or unreadable (said, left)."""
        if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE):
            return ReadOutcome(Read.NO_DESCRIPTOR, error=exc)
        self._log.warning(f"read:{self.key}", "cannot read %s: %s", self.key, exc)
        self.pending = False
        return ReadOutcome(Read.FAILED)

    def _restart(self, reset: ResetReason, out: Outgoing) -> int:
        """New content under this path: whatever the old content left open is closed, the fold restarts."""
        spans = 0
        if self.fold is not None:
            spans += self._collect(self.fold.close(closed_for(reset)), out, force=True)
        logger.info("%s was %s; reading it from the start", self.key, reset.value)
        # a sub-agent's log: its old content's calls are not the new one's
        self.shared.seen_calls.forget(self.session.path)
        self.fold = None
        self.context = None
        self.suppress_until = 0
        self.line_number = 0
        self.fed_unterminated = self._delivered_unterminated = None
        return spans

    def _feed(self, fold: Pipeline, lines: Sequence[TailItem], out: Outgoing) -> int:
        """Fold a batch's lines and take their steps as replay takes them (:meth:`Pipeline.take`: drops counted,
        what they complete routed, the lines read handed to the router); returns the spans routed."""
        return fold.take(
            self._steps(fold, lines), self.key, self.router, lambda step: self._collect(step, out)
        )

    def _steps(self, fold: Pipeline, lines: Sequence[TailItem]) -> Iterator[Step]:
        """The steps of a batch's lines, numbered across batches; a last line folded already is not folded again."""
        for item in lines:
            self.line_number += 1
            if self.fed_unterminated is not None and item.start == self.fed_unterminated:
                self.fed_unterminated = None  # its newline arrived: it was folded already, as the last line
                continue
            if item.start == self._delivered_unterminated:
                self.suppress_until = max(self.suppress_until, item.end)  # folded again, but delivered before
                self._delivered_unterminated = None
            yield fold.feed(item, self.line_number)

    def _end(self, fold: Pipeline, batch: TailBatch, out: Outgoing) -> int:
        """The file's content ended (deleted, replaced): a last line without its newline is dropped, the fold
        closed."""
        assert batch.end is not None
        if batch.final_partial is not None:
            self.router.dropped_line(self.key, _unterminated(batch.final_partial, self.line_number + 1))
        spans = self._collect(fold.close(closed_for(batch.end)), out, force=True)
        self.fold = None
        return spans

    def _checkpoint(self, batch: TailBatch, out: Outgoing) -> None:
        """Enqueue the batch's records with their marker; at the end of the file between prompts, keep only the
        small context (shared with the checkpoint), not a fold."""
        # The first read of a file always leaves a marker, lines or not: a log skipped to its end (backfill none, or
        # an empty one) is then checkpointed too, and a restart knows it by its stat instead of reading it again.
        if not (batch.lines or out or batch.reset is not None or batch.end is not None or self.seq == 0):
            return
        context = self._enqueue(out, batch.offset, batch.identity, forget=batch.end is EndReason.DELETED)
        if batch.at_eof and self.fold is not None and not self.fold.has_open_prompt and context is not None:
            self.context, self.fold = context, None

    def _update_flags(self, batch: TailBatch) -> None:
        """What the tracker reads after a read: more to read, live, a line without its newline, deleted."""
        # A log replaced under its name (written to a temporary and renamed over it): the old file was read to its
        # end, the new one is read now. Left to a notification, it would wait until it grows: the stat the daemon
        # compares is already the new file's.
        replaced = batch.end is EndReason.REPLACED
        self.pending = not batch.at_eof or replaced
        if batch.at_eof and not replaced:
            self.live = True
            seen = self.tailer.last_seen
            self.tail_bytes = seen is not None and seen[1] > batch.offset
        elif replaced:
            self.tail_bytes = False
        if batch.end is EndReason.DELETED and not self.deleted:
            self.deleted = True
            # Interactive Claude Code deletes a sub-agent's file seconds after the sub-agent ends: said, once.
            if batch.offset:
                logger.info("%s was deleted; the %s bytes read of it are kept", self.key, f"{batch.offset:,}")
            else:
                logger.info("%s was deleted before a line of it was read", self.key)

    def fold_unterminated(self) -> ReadOutcome:
        """Fold a last line that never got its newline (the CLI was killed, or an old log), as ``replay`` does.

        The caller has checked that the file has been quiet and its CLI is gone. The offset stays before the line
        (a checkpoint never splits a line) and the checkpoint says the line was folded (:data:`UNTERMINATED_KEY`),
        so a restart does not fold it twice; nor is it folded twice if its newline arrives later.
        """
        try:
            item = self.tailer.read_unterminated()
        except OSError as exc:
            if exc.errno in (errno.EMFILE, errno.ENFILE):
                return ReadOutcome(Read.NO_DESCRIPTOR, error=exc)
            self._log.warning(f"read:{self.key}", "cannot read %s: %s", self.key, exc)
            return ReadOutcome(Read.FAILED)
        self.tail_bytes = False
        if item is None:
            return ReadOutcome(Read.READ)
        fold = self._fold()
        out: Outgoing = []
        # Taken as every line is (Pipeline.take): a bad or oversized last line is dropped and counted, as replay
        # drops and counts it at the end of the file, and marked folded, so neither its newline nor a restart
        # counts it again.
        fold.take(
            (fold.feed(item, self.line_number + 1),),
            self.key,
            self.router,
            lambda step: self._collect(step, out),
        )
        self.fed_unterminated, self._unterminated_end = item.start, item.end
        self._enqueue(out, self.tailer.offset, self.tailer.identity)
        return ReadOutcome(Read.READ)

    def close_prompt(self, reason: CloseReason) -> None:
        """End the open prompt for ``reason`` (its CLI exited, or it idled out) and enqueue what that completes."""
        if self.fold is None:
            return
        out: Outgoing = []
        self._collect(self.fold.close(reason), out, force=True)
        logger.info("closed an unfinished prompt in %s (%s)", self.session.session_id, reason)
        self._enqueue(out, self.tailer.offset, self.tailer.identity)

    def release(self) -> None:
        """Read to its end and quiet: close the descriptor and keep only the small context, not the fold.

        A backfill of thousands of sessions then holds neither thousands of descriptors nor thousands of folds; the
        fold is rebuilt from the context when the file grows again.
        """
        if self.tail_bytes or self.pending:
            return
        self.tailer.close()
        if self.fold is not None and not self.fold.has_open_prompt:
            self.context = self.fold.context_snapshot()
            self.fold = None

    # ------------------------------------------------------------------ acknowledgements
    def acked(self, marker: Marker) -> Iterator[Marker]:
        """Take a delivered marker; yield the markers that are now delivered in order (each moves the checkpoint)."""
        self._delivered[marker.seq] = marker
        while self.next_ack_seq in self._delivered:
            yield self._delivered.pop(self.next_ack_seq)
            self.next_ack_seq += 1

    @property
    def all_acked(self) -> bool:
        """Every marker queued for this file was delivered."""
        return self.next_ack_seq == self.seq + 1 and not self._delivered

    # ------------------------------------------------------------------ internals
    def _fold(self) -> Pipeline:
        if self.fold is None:
            backfill = self.shared.backfill
            # --backfill DATE: the prompts that started since then, by the events' time (not the file's).
            window = PromptWindow(backfill.since_ns) if backfill.mode == "since" else None
            self.fold = Pipeline.for_session(
                self.session,
                self.shared.settings,
                context=self.context,
                window=window,
                seen=self.shared.seen_calls,
            )
            self.context = None
        return self.fold

    def _collect(self, step: Step, out: Outgoing, force: bool = False) -> int:
        """Route what one line (or a closing) gave; act on its detections and finished prompts. Returns spans."""
        after = -1 if force else self.suppress_until
        for record in step.records:
            if record.source_offset > after and isinstance(record, (Detection, PromptRun)):
                out.extend(self.shared.listener.on_record(self, record))
        return self.router.route(step.emissions, step.values_dropped, self.key, out, out, after)

    def _enqueue(
        self, records: Outgoing, offset: int, identity: FileIdentity | None, forget: bool = False
    ) -> dict[str, Any] | None:
        """Queue records and the marker that checkpoints them; returns the context the marker carries."""
        fold = self.fold
        resume = fold.resume_point() if fold is not None else None
        if resume is None:
            safe, context = offset, (fold.context_snapshot() if fold is not None else self.context)
        else:
            safe, context = resume
        self.seq += 1
        stored = context
        if self.fed_unterminated is not None and context is not None:
            # The checkpoint stays before the folded unterminated line: it says the line was folded, and whether
            # its context holds it (nothing open) or a restart re-folds it (its emissions then suppressed).
            held = resume is None
            stored = {**context, UNTERMINATED_KEY: [self.fed_unterminated, self._unterminated_end, held]}
        seen = self.tailer.last_seen
        size, mtime_ns = (seen[1], seen[2]) if seen is not None else (0, 0)
        # Lines re-read after a restart were delivered before: the acknowledged offset never goes back.
        marker = Marker(
            self.key,
            self.seq,
            max(offset, self.suppress_until),
            min(safe, offset),
            stored,
            identity,
            forget,
            size,
            mtime_ns,
        )
        self.shared.outbox.put(records, marker, live=self.live)
        return context

    def __repr__(self) -> str:
        return f"FollowedFile({self.key!r}, offset={self.tailer.offset}, live={self.live})"


def _unterminated(item: Line | TooLong, line_number: int) -> BadLine:
    """The drop of a finished (deleted or replaced) file's last line that never got its newline."""
    return BadLine(DropReason.UNTERMINATED, item.start, item.end, line_number, "the file ended inside a line")


class FollowedFiles:
    """The factory of followed files: which log is resumed from its checkpoint, which is new, and what the backfill
    policy makes of a new one (read whole, only folded up to its end, or skipped to it).

    It sits beside :class:`FollowedFile` because it decides the state a followed file starts in (its offset, what
    stays silent, its lane); the daemon only composes it with the tracker, which calls :meth:`follow` and
    :meth:`waits_its_turn`.

    Args:
        shared: What every followed file of the daemon shares (settings, backfill policy, router, outbox).
        idle_timeout_s: A new log last written longer ago than this, not read whole, is skipped without reading.
        on_history: Told the key of each log read as history (the backfill progress and "backfill done" lines).
    """

    def __init__(self, shared: Shared, idle_timeout_s: float, on_history: Callable[[str], None]) -> None:
        self.shared = shared
        self.idle_timeout_s = idle_timeout_s
        self._on_history = on_history
        # The daemon's first scan is being applied: what it finds existed at the start.
        self.in_first_scan = False

    def follow(self, session: SessionFile, checkpoint: Checkpoint | None) -> FollowedFile:
        """The followed file for a log: resumed from its checkpoint, or new (the backfill policy)."""
        path = session.path
        if checkpoint is not None:
            tailer = FileTailer(path, offset=checkpoint.safe_offset, identity=checkpoint.identity)
            return FollowedFile(
                session,
                tailer,
                self.shared,
                context=checkpoint.context,
                suppress_until=checkpoint.acked_offset,
                live=True,
                idle_for_s=_age_s(path),
            )
        age = _age_s(path)
        # A session written to right now is live from its first line: it must not queue behind history.
        f = FollowedFile(session, FileTailer(path), self.shared, live=age < IDLE_CLOSE_S, idle_for_s=age)
        exports_history = self._apply_backfill_policy(f, age)
        # What was on disk at the start is history, also a log written in the last minute (a copied history, a
        # session still going): its reading is in the progress and "backfill done" lines, though read live.
        if not f.live or (exports_history and self.in_first_scan and _size(path) > 0):
            self._on_history(f.key)
        return f

    def waits_its_turn(self, key: str) -> bool:
        """A new log last written a minute ago or more that the backfill policy reads whole is history: it may wait
        to be followed until the history before it is read (the tracker admits it in batches), and its reading is
        in the progress line (as :meth:`follow` will count it)."""
        backfill = self.shared.backfill
        if backfill.mode == "none":
            return False
        try:
            st = os.stat(key)
        except OSError:
            return False
        if time.time() - st.st_mtime < IDLE_CLOSE_S:
            return False
        return backfill.mode == "all" or (
            backfill.since_ns is not None and st.st_mtime_ns >= backfill.since_ns
        )

    def _apply_backfill_policy(self, f: FollowedFile, age_s: float) -> bool:
        """New file: export its history (``all``), or only what is written from now on (``none`` / last written
        before ``since``) — still folding the existing lines silently so an open prompt keeps its context. A file
        written since ``since`` is read whole; its fold keeps only the prompts that started since then.

        The file's age (wall clock minus its mtime) is read here, once, to classify it: history or live. Returns
        whether the lines already in the file are exported (else they are skipped or only folded).
        """
        backfill = self.shared.backfill
        if backfill.mode == "all":
            return True
        path = f.session.path
        try:
            st = path.stat()
        except OSError:
            return True
        if backfill.mode == "since" and backfill.since_ns is not None and st.st_mtime_ns >= backfill.since_ns:
            return True
        if age_s > self.idle_timeout_s:
            # Idle history: skip it without reading it, but keep the session's identity from its first line
            # (session.start) so later prompts get the same ids replay would give them.
            f.tailer = FileTailer(path, offset=_last_line_boundary(path, st.st_size))
            f.live = True
            first = _first_line(path)
            if first and first.startswith(b'{"type":"session.start"'):
                seed = Pipeline.for_session(f.session, self.shared.settings, project=False)
                seed.feed(Line(0, len(first) + 1, first))
                f.context = seed.context_snapshot()
        else:
            f.suppress_until = st.st_size
        return False


def _size(path: os.PathLike[str]) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _age_s(path: os.PathLike[str]) -> float:
    """How long ago the file was last written, by the wall clock and its mtime (0 if it cannot be read)."""
    try:
        return max(0.0, time.time() - os.stat(path).st_mtime)
    except OSError:
        return 0.0


def _first_line(path: os.PathLike[str], limit: int = 1 << 20) -> bytes:
    """The file's first complete line (without its newline), or b"" if there is none within ``limit`` (or it is no
    longer a regular file: a FIFO put there since the scan must not block the main thread)."""
    head = sidefiles.read_head(path, "a log's first line", limit) or b""
    end = head.find(b"\n")
    return head[:end] if end >= 0 else b""


def _last_line_boundary(path: os.PathLike[str], size: int) -> int:
    """The offset just after the last ``\\n`` at or before ``size`` (0 if none): where "from now on" starts."""
    if size == 0:
        return 0
    try:
        fh = os.fdopen(current.open_regular(path), "rb")
    except OSError:
        return size  # gone, or no longer a regular file, since its stat: the tailer finds out; nothing is exported
    with fh:
        pos = size
        while pos > 0:
            step = min(65536, pos)
            fh.seek(pos - step)
            chunk = fh.read(step)
            nl = chunk.rfind(b"\n")
            if nl >= 0:
                return pos - step + nl + 1
            pos -= step
    return 0
