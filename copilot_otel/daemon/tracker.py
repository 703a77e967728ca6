"""The registry of session logs: which are followed, which only known, and which need a look.

The Collector's file consumer keeps a *tracker* of the files it knows across poll cycles, apart from the reader of
each file; Filebeat keeps a registry apart from its harvesters. This is ours. Its rule is that work grows with what
is being written, not with what is stored:

* A log whose last checkpoint says "read to its end, nothing open" is only *known*: one small tuple
  ``(inode, size, mtime_ns)``, no tailer, no fold, no descriptor. At start the tracker takes these from the
  checkpoints without a ``stat``, an ``open`` or a fingerprint; a scan (one ``stat`` per session, from discovery) or a
  change notification that shows another size or mtime makes it *followed* again, from its checkpoint.
* A followed file (:class:`~copilot_otel.daemon.followed.FollowedFile`) that has settled (read to its end, quiet,
  its descriptor closed, every marker acknowledged) goes back to known: 100,000 sessions of history hold 100,000
  tuples, not 100,000 tailers and folds.
* Only files with work are looked at: ``pending`` (may have unread lines) and ``attention`` (an open prompt or an
  unterminated last line: the owner and idle checks, and a stat poll that does not trust notifications).
* History found without a checkpoint (a first start over 100,000 sessions) is *waiting*: a path in a queue,
  followed :data:`ADMIT_BATCH` logs at a time as the ones before are read, so the first start holds a batch of
  tailers and folds, not the whole history (a log written meanwhile is followed at once). The history being read
  is a queue ordered by the last read (a heap), not sorted again at every pass: the cost of a first start grows
  with the history, not with its square.
* Descriptors are a bounded cache (least recently used closed beyond the cap, which EMFILE lowers and time raises
  again), so any number of sessions can be followed under any ``ulimit -n``: a concern with its own state, kept
  in :mod:`copilot_otel.daemon.descriptors` (the tracker asks it before a read and tells it of an EMFILE).
* A log gone while the daemon was stopped waits for the first scan: a new log that starts with the same first KiB
  was moved (or restored) and takes its checkpoint over; what is still missing after that scan was deleted.
"""

from __future__ import annotations

import dataclasses
import heapq
import logging
import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

from ..common.ratelimit import RateLimitedLog
from ..deliver.outbox import Marker
from ..sources.sessions import SessionFile
from ..sources.tail import FINGERPRINT_BYTES, fingerprint_of
from .descriptors import MAX_OPEN_TAILERS, Descriptors, open_tailer_cap
from .followed import IDLE_CLOSE_S, FollowedFile, Read
from .state import Checkpoint, StateStore

__all__ = ["ADMIT_BATCH", "MAX_OPEN_TAILERS", "StatKey", "Tracker", "open_tailer_cap"]

logger = logging.getLogger("copilot_otel.daemon")

# What a scan reports of a log, and what a known log is remembered by: the hash of its (inode, size, mtime_ns).
StatKey = int
# Makes the followed file for a path: from its checkpoint, or new (the backfill policy decides where it starts).
Follow = Callable[[SessionFile, "Checkpoint | None"], FollowedFile]
# Whether a new log (no checkpoint) is history that may wait for its turn to be followed (the daemon's backfill
# policy: an old log it will read whole); a log that may not wait is followed at once.
Waits = Callable[[str], bool]
# History logs being read (pending, not live) at most, while more wait: a batch is a few MB of tailers and folds,
# and enough files for every backfill slice (a small log reads in about a millisecond, a slice is 50 ms).
ADMIT_BATCH = 256


def _never_waits(key: str) -> bool:
    return False


def is_session_log(path: str) -> bool:
    """``<id>/events.jsonl`` or a legacy ``<id>.jsonl``."""
    return path.endswith(".jsonl")


class Tracker:
    """Known and followed session logs, and the sets of those with work.

    Args:
        state: The checkpoints (read at :meth:`restore`, written by :meth:`apply_acks`).
        follow: Builds the followed file for a path and its checkpoint (or ``None``: a new log).
        max_open_files: The process's descriptor limit.
        log: The daemon's rate-limited log.
        clock: Monotonic seconds (injected by tests).
        waits: Whether a new log is history that may wait its turn (by default none waits).
    """

    def __init__(
        self,
        state: StateStore,
        follow: Follow,
        *,
        max_open_files: int,
        log: RateLimitedLog,
        clock: Callable[[], float] = time.monotonic,
        waits: Waits = _never_waits,
    ) -> None:
        self.state = state
        self._waits = waits
        self._follow = follow
        self._log = log
        self.files: dict[str, FollowedFile] = {}
        # Known logs by their stat's hash: one int a log (100,000 logs: ~18 MB with the paths, 33 MB as tuples); a
        # false "unchanged" would need a 64-bit collision between a log's stat before and after a change.
        self._known: dict[str, int] = {}
        self.pending: set[str] = set()
        self.attention: set[str] = set()
        # History waiting to be followed, in the order it was found: paths only (a queue, and a set for membership;
        # a path taken out of the set is skipped when the queue reaches it).
        self._waiting: deque[str] = deque()
        self._waiting_keys: set[str] = set()
        # The pending history files, least recently read first: a heap of (last read, sequence, key) with lazy
        # deletion (an entry counts only while it is the one ``_queued`` holds for its key). ``_held`` are the
        # entries the last :meth:`work` handed out, put back at the next unless the file was read meanwhile.
        self._history: list[tuple[float, int, str]] = []
        self._queued: dict[str, tuple[float, int]] = {}
        self._held: list[tuple[float, int, str]] = []
        self._seq = 0
        self.admitted = 0  # waiting logs followed so far (the tests count batches with it)
        # Checkpoints of logs gone while we were stopped, until the first scan: a log found there that starts
        # with the same content was moved (or restored) and takes its checkpoint over (checklist #39).
        self._missing: dict[str, str] = {}  # fingerprint (of the first KiB) -> the path it had
        self._first_scan_done = False
        self.resumed = 0
        self.forgot = 0
        self.descriptors = Descriptors(self.files, max_open_files=max_open_files, log=log, clock=clock)

    def __len__(self) -> int:
        """Session logs tracked: followed, waiting and known."""
        return len(self.files) + len(self._waiting_keys) + len(self._known)

    @property
    def waiting(self) -> int:
        """History logs found without a checkpoint that are not followed yet (the backfill's progress counts them)."""
        return len(self._waiting_keys)

    # ------------------------------------------------------------------ start-up
    def restore(self) -> None:
        """Take every checkpoint: a settled log is only known (no I/O); the others are followed again now.

        Settled means its checkpoint was taken at its end (``safe == acked == size``) with a stat to compare: the
        first scan tells from that stat alone whether it changed while the daemon was stopped. A checkpoint
        without a stat (written by an older copilot-otel), with an open prompt or with unread bytes is followed
        at once (its file is opened and checked against its identity, as before).
        """
        self._known, others = self.state.settled()
        self.resumed += len(self._known)
        for key in others:
            cp = self.state.get(key)
            if cp is None:
                continue
            if os.path.exists(key):
                self.resumed += self._track(key, cp) is not None
            elif cp.identity.complete:  # deleted or moved while we were stopped: seen after the first scan
                self._missing[cp.identity.fingerprint] = key
            else:  # too short a fingerprint to recognise it under another name
                self.forgot += self.state.forget(key)

    def scan(self, stats: Mapping[str, StatKey]) -> None:
        """Compare a full scan (path → the hash of its ``(inode, size, mtime_ns)``) with what is tracked; mark what
        changed.

        No I/O for a log whose stat is unchanged; known logs missing from the scan were deleted (on the first scan
        after a restart, they may have moved: a new log with their first KiB takes their checkpoint over).
        """
        first = not self._first_scan_done
        self._first_scan_done = True
        if first:
            for key in self._known.keys() - stats.keys():
                cp = self.state.get(key)
                if cp is not None and cp.identity.complete:
                    self._missing[cp.identity.fingerprint] = key
                else:
                    self.forgot += self.state.forget(key)
                del self._known[key]
        else:
            for key in self._known.keys() - stats.keys():
                del self._known[key]
                self.state.forget(key)  # deleted while idle: nothing left to deliver
        if self._waiting_keys:
            self._waiting_keys.intersection_update(stats.keys())  # gone before its turn: nothing to read
        for key, st in stats.items():
            f = self.files.get(key)
            if f is not None:
                seen = f.tailer.last_seen
                if not f.pending and (seen is None or hash(seen) != st):
                    self._set_pending(f, True)
                continue
            known = self._known.get(key)
            if known is None:
                self._new(key)
            elif known != st:
                del self._known[key]
                self._track(key, self.state.get(key))
        for key, f in self.files.items():
            if key not in stats and not f.pending:
                self._set_pending(f, True)  # gone: reading it finishes it (its last lines, then deleted)
        if first:
            self._forget_missing()

    def _forget_missing(self) -> None:
        """After the first scan: the logs still missing were deleted while we were stopped (not an error)."""
        for key in self._missing.values():
            self.state.forget(key)
        forgot, self._missing = self.forgot + len(self._missing), {}
        self.forgot = forgot

    # ------------------------------------------------------------------ changes
    def changed(self, keys: Iterable[str]) -> None:
        """Discovery's notifications: these logs appeared, changed or vanished (one ``stat`` for a known one)."""
        for key in keys:
            f = self.files.get(key)
            if f is not None:
                self._set_pending(f, True)
                continue
            known = self._known.get(key)
            if known is None:
                if key in self._waiting_keys:  # written to while waiting its turn: followed now
                    self._waiting_keys.discard(key)
                    if os.path.exists(key):
                        self._admit(key, None)
                else:
                    self._new(key)
                continue
            try:
                st = os.stat(key)
            except OSError:
                continue  # gone: the next scan forgets it
            if hash((st.st_ino, st.st_size, st.st_mtime_ns)) != known:
                del self._known[key]
                self._track(key, self.state.get(key))

    def poll_attention(self) -> None:
        """Files with an open prompt are stat()ed: notifications are a hint that Windows delays or drops for
        appended files (and FSEvents coalesces), so a late or missing one costs latency, never data."""
        for key in self.attention:
            f = self.files.get(key)
            if f is not None and not f.pending and f.tailer.stat_changed():
                self._set_pending(f, True)

    def _track(self, key: str, checkpoint: Checkpoint | None = None) -> FollowedFile | None:
        if checkpoint is None:
            return self._new(key)
        if not is_session_log(key):
            return None
        return self._admit(key, _restored_copy(key, checkpoint))

    def _new(self, key: str) -> FollowedFile | None:
        """A log without a checkpoint: moved here while we were stopped (it takes its old checkpoint), history that
        waits its turn, or followed now."""
        if not is_session_log(key) or key in self._waiting_keys or not os.path.exists(key):
            return None
        checkpoint = self._moved_here(key) if self._missing else None
        if checkpoint is None and self._waits(key):
            self._waiting.append(key)
            self._waiting_keys.add(key)
            return None
        return self._admit(key, checkpoint)

    def _admit(self, key: str, checkpoint: Checkpoint | None) -> FollowedFile:
        f = self._follow(SessionFile.from_path(Path(key)), checkpoint)
        self.files[key] = f
        self._set_pending(f, True)
        return f

    def _admit_waiting(self) -> None:
        """Follow waiting history while fewer than :data:`ADMIT_BATCH` history files are being read."""
        waiting, keys = self._waiting, self._waiting_keys
        while keys and len(self._queued) < ADMIT_BATCH:
            key = waiting.popleft()
            if key not in keys:
                continue  # followed already (it was written to), or gone
            keys.discard(key)
            self.admitted += 1
            if os.path.exists(key):
                self._admit(key, None)
        if not keys:
            waiting.clear()

    def _moved_here(self, key: str) -> Checkpoint | None:
        """The checkpoint of a log gone while we were stopped that the log at ``key`` starts like, moved over."""
        old = self._missing.pop(fingerprint_of(key, FINGERPRINT_BYTES) or "", None)
        checkpoint = self.state.get(old) if old is not None else None
        if old is None or checkpoint is None:
            return None
        self.state.forget(old)
        self.state.put(key, checkpoint)
        logger.info(
            "%s was moved to %s while stopped: it resumes at byte %d", old, key, checkpoint.acked_offset
        )
        self.resumed += 1
        return checkpoint

    # ------------------------------------------------------------------ flags
    def update(self, f: FollowedFile) -> None:
        """Mirror a file's flags in the sets the loop iterates (after any call that may have changed them)."""
        self._set_pending(f, f.pending)
        if f.needs_attention or f.tailer.offset < f.suppress_until:
            self.attention.add(f.key)
        else:
            self.attention.discard(f.key)

    def _set_pending(self, f: FollowedFile, pending: bool) -> None:
        f.pending = pending
        key = f.key
        if pending:
            self.pending.add(key)
            if not f.live:
                entry = self._queued.get(key)
                if entry is None or entry[0] != f.last_used:
                    self._queue(f)
                return
        else:
            self.pending.discard(key)
        self._queued.pop(key, None)

    def _queue(self, f: FollowedFile) -> None:
        self._seq += 1
        self._queued[f.key] = (f.last_used, self._seq)
        heapq.heappush(self._history, (f.last_used, self._seq, f.key))

    def work(self) -> tuple[list[FollowedFile], Iterator[FollowedFile]]:
        """The files that may have unread lines: (live, history), history least recently read first.

        Waiting history is followed first, as far as the batch has room. The history comes as an iterator that
        takes from the ordered queue as it goes: a pass that stops after a slice costs what it read, not a sort
        of every pending log; what it handed out and was not read keeps its place.
        """
        self._admit_waiting()
        files = self.files
        live = [f for key in list(self.pending) if (f := files.get(key)) is not None and f.live]
        for entry in self._held:
            if self._queued.get(entry[2]) == entry[:2]:
                heapq.heappush(self._history, entry)
        self._held = []
        return live, self._in_order(self._seq)

    def _in_order(self, mark: int) -> Iterator[FollowedFile]:
        """The pending history files queued before ``mark``, least recently read first (a file read in this pass
        is queued again behind ``mark``: each is read once a pass, as with a list made at its start)."""
        heap, queued, files = self._history, self._queued, self.files
        while heap and heap[0][1] <= mark:
            last_used, seq, key = heapq.heappop(heap)
            if queued.get(key) != (last_used, seq):
                continue  # read (and queued again) or no longer pending since this entry was made
            f = files.get(key)
            if f is None or not f.pending or f.live:
                queued.pop(key, None)
                continue
            if f.last_used != last_used:
                self._queue(f)  # read without its flags updated (no descriptor): in the order of that read
                continue
            self._held.append((last_used, seq, key))
            yield f

    def attending(self) -> Iterator[FollowedFile]:
        """The followed files with an open prompt or an unterminated last line."""
        for key in list(self.attention):
            f = self.files.get(key)
            if f is None:
                self.attention.discard(key)
            else:
                yield f

    # ------------------------------------------------------------------ reading, with descriptors as a cache
    def read(self, f: FollowedFile, max_bytes: int) -> tuple[bool, int]:
        """Read ``f`` if a descriptor can be had; (whether it was read, spans it produced)."""
        if not self.descriptors.opening(f):
            return False, 0
        history = not f.live
        outcome = f.read(max_bytes)
        if outcome.how is Read.NO_DESCRIPTOR:
            assert outcome.error is not None
            self.descriptors.out_of_descriptors(outcome.error)
            return False, 0
        self.update(f)
        # A log read to its end with its last line whole is released (descriptor closed, fold reduced to its context
        # when no prompt is open) once quiet for a minute; history at once: reading its old lines was no sign of
        # life, and a backfill then holds each log until its checkpoint is acknowledged, not for a minute after.
        # Only the reading state goes: an open prompt stays open until its CLI exits or it idles out, as before.
        if not f.pending and not f.tail_bytes and (history or f.idle_s() >= IDLE_CLOSE_S):
            f.release()
        return True, outcome.spans

    def settle(self, now: float) -> None:
        """Close descriptors unused for a minute, let a cap lowered by EMFILE grow back, and forget settled files.

        Only files read since their last close are looked at for descriptors; every followed file is looked at
        for settling (followed files are the active ones: a few, not the history).
        """
        self.descriptors.close_idle(now)
        for f in list(self.files.values()):
            self._forget_if_settled(f)

    def _forget_if_settled(self, f: FollowedFile) -> None:
        """A followed file with nothing in flight or open goes back to being known by its stat alone."""
        seen = f.tailer.last_seen
        if seen is not None and f.settled and f.key not in self.attention:
            del self.files[f.key]
            self._known[f.key] = hash(seen)

    def close_all(self) -> None:
        """Release every descriptor (shutdown)."""
        for f in self.files.values():
            f.tailer.close()

    # ------------------------------------------------------------------ acknowledgements → checkpoints
    def apply_acks(self, markers: Iterable[Marker]) -> None:
        """Delivered markers move their files' checkpoints, in each file's order."""
        for marker in markers:
            f = self.files.get(marker.key)
            if f is None:
                continue
            for m in f.acked(marker):
                if m.forget:
                    self.state.forget(m.key)
                    if f.deleted and f.all_acked:
                        self.files.pop(m.key, None)
                        self.pending.discard(m.key)
                        self._queued.pop(m.key, None)
                        self.attention.discard(m.key)
                elif m.identity is not None:
                    self._checkpoint(m)
            if f.key in self.files:
                # A backfill of 100,000 sessions then holds each one only until its checkpoint is acknowledged.
                self._forget_if_settled(f)

    def _checkpoint(self, m: Marker) -> None:
        try:
            self.state.put(
                m.key,
                Checkpoint(
                    m.identity, m.safe_offset, m.offset, m.context, time.time_ns(), m.size, m.mtime_ns
                ),
            )
        except TypeError as exc:
            # A poison value in the session context (an integer beyond 64 bits) cannot be stored: keep the
            # acknowledged offset, and let a restart re-read the file from its start (suppressed up to that offset).
            self._log.warning(
                f"context:{m.key}",
                "cannot store the session context of %s (%s); after a restart it is re-read from its start",
                m.key,
                exc,
            )
            self.state.put(m.key, Checkpoint(m.identity, 0, m.offset, None, time.time_ns()))


def _restored_copy(key: str, checkpoint: Checkpoint) -> Checkpoint:
    """A log copied back under its own name (a restore: another inode) that still starts with the content its
    checkpoint belongs to is the same log: the checkpoint is kept (the tailer would read it from 0)."""
    ident = checkpoint.identity
    try:
        st = os.stat(key)
    except OSError:
        return checkpoint
    if st.st_ino == ident.inode or fingerprint_of(key, ident.fingerprint_len) != ident.fingerprint:
        return checkpoint
    logger.info(
        "%s was restored (another inode, the same content): it resumes at byte %d",
        key,
        checkpoint.acked_offset,
    )
    return dataclasses.replace(
        checkpoint, identity=dataclasses.replace(ident, dev=st.st_dev, inode=st.st_ino)
    )
