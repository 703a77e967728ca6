"""``copilot-otel run``: follow every session log as it is written; deliver everything, exactly once in effect.

Composition (one place where the stages meet)::

    Discovery ──wake──▶ main loop ──read──▶ FileTailer ─▶ Pipeline ─▶ Outbox ─▶ Sender
      (inotify + rescan)   │                                                        │
                           ◀──────────── delivered markers ◀────────────────────────┘
                           └──▶ StateStore (checkpoint only what the collector accepted)

Threads: the main loop (owns files, tailers and folds), the outbox worker (exports), watchdog's observer, the
SDK's metric reader. They share only the outbox queue, the acknowledgement deque and immutable snapshots.

Resume model: a file's checkpoint holds the acknowledged offset and the offset where its oldest open prompt
began, plus the fold's session context there. After a restart the fold re-reads from that prompt start and
suppresses everything caused by lines at or before the acknowledged offset; ids and times come from the
events, so what is re-emitted is byte-identical to what a crash may have cut off.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import faulthandler
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import __version__
from ._platform import current
from .act import RunawayActions, SessionView
from .activity import Detection, PromptRun
from .agentloop import FoldSettings, LiveStats
from .config import Config, capture_state
from .content import ContentKind
from .deadletter import DeadLetters
from .discover import Discovery
from .errors import SourceError
from .export import measurement_encodable
from .outbox import Marker, Outbox
from .pipeline import Pipeline, Step
from .records import BadLine, LogRecord, Measurement, SpanRecord
from .sessions import (
    SessionFile,
    owner_pids,
    pid_alive,
    read_workspace,
    require_session_folder,
    session_title,
)
from .state import Checkpoint, StateStore
from .tail import FINGERPRINT_BYTES, FileTailer, Line, TooLong, fingerprint_of
from .telemetry import Telemetry, fold_settings
from .window import PromptWindow

logger = logging.getLogger(__name__)

# Bytes read from one file per pass: small enough that one busy file cannot starve the others.
LIVE_READ_BYTES = 256 * 1024
BACKFILL_READ_BYTES = 1024 * 1024
# Backfill work per loop pass before live files get another look (fairness).
BACKFILL_SLICE_S = 0.05
# Open file descriptors kept for session logs at most; the least recently used are closed beyond this. Below it,
# half of what the process's descriptor limit (RLIMIT_NOFILE) leaves beside a reserve for the interpreter, sockets,
# the state and the libraries (the daemon itself holds about ten).
MAX_OPEN_TAILERS = 256
MIN_OPEN_TAILERS = 4
FD_RESERVE = 24
# After "too many open files" (EMFILE/ENFILE), files not open yet wait this long before the next attempt.
FD_RETRY_S = 0.5
# A file with no new line for this long has its descriptor closed (it is reopened on the next change).
IDLE_CLOSE_S = 60.0
# How often prompts still open are checked for a vanished owner process.
OWNER_CHECK_S = 2.0
# Files with an open prompt are stat()ed this often, on every OS: change notifications are a hint that Windows
# delays or drops for appended files (and FSEvents coalesces), so a late or missing one costs at most this much
# latency, never data. A few hundred stats a second at most: files with an open prompt are the live ones.
LIVE_POLL_S = 0.25
# How often idle descriptors are closed (and the cap on open ones enforced).
FD_CHECK_S = 10.0
# A CLI that just started may not have written its inuse lock yet: wait this long after the last line.
OWNER_GRACE_S = 5.0
CHECKPOINT_FLUSH_S = 1.0
STATUS_WRITE_S = 5.0
SHUTDOWN_FLUSH_S = 10.0
# Of the shutdown deadline, kept for saving the state and the last metric export after the outbox gave up.
SHUTDOWN_RESERVE_S = 1.5
_LOG_EVERY_S = 30.0
# While history is being read, a progress line this often.
BACKFILL_PROGRESS_S = 5.0


class _RateLimitedLog:
    """At most one log line per key per interval; the rest are counted and summarised in the next line."""

    def __init__(self, interval_s: float = _LOG_EVERY_S) -> None:
        self.interval_s = interval_s
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}

    def warning(self, key: str, msg: str, *args: Any) -> None:
        now = time.monotonic()
        if now - self._last.get(key, -1e9) >= self.interval_s:
            suppressed = self._suppressed.pop(key, 0)
            self._last[key] = now
            suffix = f" (+{suppressed} similar since)" if suppressed else ""
            logger.warning("%s%s", msg % args, suffix)
        else:
            self._suppressed[key] = self._suppressed.get(key, 0) + 1


@dataclass
class _File:
    """One followed session log and everything the daemon knows about it."""

    session: SessionFile
    tailer: FileTailer
    fold: Pipeline | None = None
    context: dict[str, Any] | None = None  # checkpointed context, until the fold is built
    suppress_until: int = 0  # lines ending at or before this were delivered before a restart
    live: bool = False  # caught up with the end at least once: new lines go to the live lane
    pending: bool = True  # there may be unread data (mirrored in Daemon._pending, which the loop iterates)
    seq: int = 0
    next_ack_seq: int = 1
    delivered: dict[int, Marker] = field(default_factory=dict)
    last_data: float = 0.0  # monotonic time of the last line read
    last_used: float = 0.0
    line_number: int = 0
    closed_reason: str | None = None
    tail_bytes: bool = False  # bytes after the last newline at the last read (a line not yet terminated)
    fed_unterminated: int | None = None  # start offset of an unterminated last line already folded

    @property
    def key(self) -> str:
        return str(self.session.path)


@dataclass
class DaemonStats:
    """Counters reported in status.json and as self-metrics."""

    started_at: float = field(default_factory=time.time)
    lines_read: int = 0
    lines_dropped: dict[str, int] = field(default_factory=dict)
    # Values dropped from events that were kept (a timestamp past 2262, a count beyond 2**53), by reason.
    values_dropped: dict[str, int] = field(default_factory=dict)
    detections: dict[str, int] = field(default_factory=dict)
    prompts_closed: dict[str, int] = field(default_factory=dict)


class Daemon:
    """The live daemon. ``run()`` blocks until ``stop`` is set (SIGTERM/SIGINT in the CLI).

    Args:
        config: Settings (session-state root, state dir, export, thresholds, delays).
        telemetry: Exporters; built from ``config`` when ``None``.
        stop: Set it to stop the daemon.
    """

    def __init__(
        self, config: Config, telemetry: Telemetry | None = None, stop: threading.Event | None = None
    ) -> None:
        self.config = config
        self.stop = stop or threading.Event()
        self.stopped = threading.Event()  # run() returned: delivered what it could, state saved
        self.state = StateStore(config.state_dir)
        try:
            self.settings: FoldSettings = fold_settings(config)
            self._sender_stop = threading.Event()
            self.telemetry = telemetry or Telemetry.from_config(config, stop=self._sender_stop)
        except BaseException:
            self.state.close()
            raise
        self.telemetry.sender.drop_unsupported = True
        self.outbox = Outbox(
            self.telemetry.sender,
            self._on_delivered,
            delay_s=config.export_delay,
            live_cap=config.backlog_cap,
            backfill_cap=config.backlog_cap,
        )
        self.stats = DaemonStats()
        self._files: dict[str, _File] = {}
        # Checkpoints of logs gone while we were stopped, until the first scan: a log found there that starts
        # with the same content was moved (or restored) and takes its checkpoint over (checklist #39).
        self._missing: dict[str, str] = {}  # fingerprint (of the first KiB) -> the path it had
        self._resumed = self._forgot = 0
        self._pending: set[str] = set()  # keys of files that may have unread lines
        self._attention: set[str] = set()  # keys of files with an open prompt or an unterminated last line
        # Keys of files read since their descriptor was last closed, least recently used first (an ordered dict).
        self._maybe_open: dict[str, None] = {}
        self._fd_limit_cap = open_tailer_cap(current.max_open_files())
        self._fd_cap = self._fd_limit_cap  # lowered after EMFILE, raised again while none comes
        self._fd_retry_at = 0.0
        self._fd_exhausted = 0  # reads deferred because the process or the system ran out of descriptors
        self._fd_exhausted_at_check = 0
        self._acks: deque[list[Marker]] = deque()
        self._wake = threading.Event()
        self._dirty: set[str] = set()
        self._dirty_lock = threading.Lock()
        self._discovery = Discovery(config.session_state, self._on_change)
        self._log = _RateLimitedLog()
        self._live_snapshot: list[tuple[int, int, int, int, int, int]] = []
        self._started_mono = time.monotonic()
        self.actions = RunawayActions.from_config(config)  # None unless runaway_action asks for more
        dead_letter = self.telemetry.sender.dead_letter
        self._dead_letters = DeadLetters(dead_letter) if dead_letter is not None else None
        self._backfill = _BackfillProgress()
        self._install_metrics()

    # ------------------------------------------------------------------ wiring
    def _on_change(self, path: Path) -> None:
        with self._dirty_lock:
            self._dirty.add(str(path))
        self._wake.set()

    def _on_delivered(self, markers: list[Marker]) -> None:
        self._acks.append(markers)
        self._wake.set()

    def _install_metrics(self) -> None:
        metrics = self.telemetry.metrics
        if metrics is None:
            return

        def live(index: int, scale: float = 1.0) -> Any:
            def read() -> list[tuple[float, dict[str, Any]]]:
                snapshot = self._live_snapshot
                if index < 0:
                    return [(float(len(snapshot)), {})]
                return [(max((row[index] for row in snapshot), default=0) * scale, {})]

            return read

        metrics.set_gauge("copilot_otel.live.prompts", live(-1))
        metrics.set_gauge("copilot_otel.live.max_turns", live(0))
        metrics.set_gauge("copilot_otel.live.max_tool_calls", live(1))
        metrics.set_gauge("copilot_otel.live.max_duration", live(2, 1e-9))
        metrics.set_gauge("copilot_otel.live.max_identical_tool_calls", live(3))
        metrics.set_gauge("copilot_otel.live.max_tool_error_streak", live(4))
        metrics.set_gauge("copilot_otel.export.backlog", lambda: [(float(self.outbox.backlog), {})])
        metrics.set_gauge("copilot_otel.files.tracked", lambda: [(float(len(self._files)), {})])
        metrics.set_gauge(
            "copilot_otel.export.last_success",
            lambda: (
                [(self.telemetry.sender.stats.last_success_ns / 1e9, {})]
                if self.telemetry.sender.stats.last_success_ns
                else []
            ),
        )

    # ------------------------------------------------------------------ main loop
    def run(self) -> None:
        """Backfill, follow, and on stop flush within a deadline and save state."""
        logger.info(
            "copilot-otel %s following %s → %s (state in %s)",
            __version__,
            self.config.session_state,
            self.telemetry.description,
            self.config.state_dir,
        )
        if (capture := capture_state(self.config)).on:
            logger.warning("%s", capture.line)  # the most privacy-critical switch: said at every start
        self.outbox.start()
        self._restore()
        self._discovery.start()
        self._rescan()
        self._forget_missing()
        last_rescan = last_flush = last_status = last_owner_check = last_fd_check = time.monotonic()
        last_live_poll = last_rescan
        try:
            while not self.stop.is_set():
                busy = self._pass()
                now = time.monotonic()
                # With inotify working the full rescan is only a safety net; when polling it is the mechanism.
                rescan_every = self.config.rescan_interval * (6 if self._discovery.mode == "inotify" else 1)
                if now - last_rescan >= rescan_every:
                    last_rescan = now
                    self._rescan()
                    self._sweep()
                if now - last_live_poll >= LIVE_POLL_S:
                    last_live_poll = now
                    self._poll_live()
                if now - last_owner_check >= OWNER_CHECK_S:
                    last_owner_check = now
                    self._close_abandoned()
                if now - last_fd_check >= FD_CHECK_S:
                    last_fd_check = now
                    self._close_idle_fds(now)
                if now - last_flush >= CHECKPOINT_FLUSH_S:
                    last_flush = now
                    self._apply_acks()
                    # A deleted state directory is re-created (and re-locked) within a second; if another daemon
                    # locked it first, StateError ends this one, which writes nothing more there.
                    if self.state.check_dir():
                        self._write_status()
                    self.state.flush()
                if now - last_status >= STATUS_WRITE_S:
                    last_status = now
                    self._write_status()
                if not busy:
                    # Files announce themselves (inotify wakes us); the timeout only paces the periodic checks,
                    # and the stat poll of files with an open prompt.
                    pace = min(OWNER_CHECK_S, self.config.rescan_interval)
                    self._wake.wait(timeout=min(pace, LIVE_POLL_S) if self._attention else pace)
                    self._wake.clear()
        finally:
            self._shutdown()

    def _pass(self) -> bool:
        """One pass over files with work: live ones first, then a time slice of backfill. True if more is left."""
        self._apply_acks()
        with self._dirty_lock:
            dirty, self._dirty = self._dirty, set()
        for key in dirty:
            tracked = self._files.get(key)
            if tracked is None:
                self._track(Path(key))
            else:
                self._set_pending(tracked, True)
        work = [self._files[key] for key in list(self._pending) if key in self._files]
        live = [f for f in work if f.live]
        backfill = [f for f in work if not f.live]
        read = False
        for f in live:
            if self.stop.is_set():
                return False
            if self.outbox.has_room(True):
                read = self._read(f, LIVE_READ_BYTES) or read
        deadline = time.monotonic() + BACKFILL_SLICE_S
        for f in sorted(backfill, key=lambda f: f.last_used):
            if self.stop.is_set() or time.monotonic() > deadline or not self.outbox.has_room(False):
                break
            read = self._read(f, BACKFILL_READ_BYTES) or read
        self._backfill.report()
        self._update_live_snapshot()
        if self.actions is not None:
            self.actions.drain(self.telemetry.metrics)
        if self.telemetry.metrics is not None:
            self.telemetry.record_delivery_stats()
            self.telemetry.metrics.drain()
        # Busy only while something could be read: a lane at its cap (the collector is down) waits for the next
        # pace tick like an idle loop instead of spinning on files it may not read.
        return read and bool(self._pending)

    # ------------------------------------------------------------------ files
    def _set_pending(self, f: _File, pending: bool) -> None:
        """Mark whether a file may have unread lines; the loop only ever looks at the pending ones, so an idle
        file costs nothing but the periodic stat sweep."""
        f.pending = pending
        if pending:
            self._pending.add(f.key)
        else:
            self._pending.discard(f.key)

    def _set_attention(self, f: _File) -> None:
        """Files that need the owner/idle checks: an open prompt, or a last line without its newline."""
        if (
            f.tail_bytes
            or (f.fold is not None and f.fold.has_open_prompt)
            or f.tailer.offset < f.suppress_until
        ):
            self._attention.add(f.key)
        else:
            self._attention.discard(f.key)

    def _rescan(self) -> None:
        try:
            keys = self._discovery.scan()
        except SourceError as exc:
            self._log.warning("scan", "%s", exc)
            return
        for key in keys:
            if key not in self._files:
                self._track(Path(key))

    def _sweep(self) -> None:
        """Periodic truth check: any idle file whose stat changed has work (inotify can miss events)."""
        for f in self._files.values():
            if not f.pending and f.tailer.stat_changed():
                self._set_pending(f, True)

    def _poll_live(self) -> None:
        """The live path without notifications: a file with an open prompt whose stat changed has work."""
        for key in self._attention:
            f = self._files.get(key)
            if f is not None and not f.pending and f.tailer.stat_changed():
                self._set_pending(f, True)

    def _track(self, path: Path) -> _File | None:
        if not (path.name == "events.jsonl" or path.suffix == ".jsonl") or not path.exists():
            return None
        session = SessionFile.from_path(path)
        key = str(path)
        checkpoint = self.state.get(key)
        if checkpoint is None and self._missing:
            checkpoint = self._moved_here(key)
        elif checkpoint is not None:
            checkpoint = self._restored_copy(key, checkpoint)
        if checkpoint is not None:
            tailer = FileTailer(path, offset=checkpoint.safe_offset, identity=checkpoint.identity)
            tracked = _File(
                session, tailer, context=checkpoint.context, suppress_until=checkpoint.acked_offset
            )
            tracked.live = True
        else:
            tailer = FileTailer(path)
            tracked = _File(session, tailer)
            # A session written to right now is live from its first line: it must not queue behind history.
            with contextlib.suppress(OSError):
                tracked.live = time.time() - path.stat().st_mtime < IDLE_CLOSE_S
            self._apply_backfill_policy(tracked)
            if not tracked.live:
                self._backfill.add(key)
        tracked.last_used = time.monotonic()
        self._files[key] = tracked
        self._set_pending(tracked, True)
        return tracked

    def _apply_backfill_policy(self, f: _File) -> None:
        """New file: export its history (``all``), or only what is written from now on (``none`` / last written
        before ``since``) — still folding the existing lines silently so an open prompt keeps its context. A file
        written since ``since`` is read whole; its fold keeps only the prompts that started since then."""
        backfill = self.config.backfill
        if backfill.mode == "all":
            return
        try:
            st = f.session.path.stat()
        except OSError:
            return
        if backfill.mode == "since" and backfill.since_ns is not None and st.st_mtime_ns >= backfill.since_ns:
            return
        if time.time() - st.st_mtime > self.config.idle_timeout:
            # Idle history: skip it without reading it, but keep the session's identity from its first line
            # (session.start) so later prompts get the same ids replay would give them.
            f.tailer = FileTailer(f.session.path, offset=_last_line_boundary(f.session.path, st.st_size))
            f.live = True
            first = _first_line(f.session.path)
            if first and first.startswith(b'{"type":"session.start"'):
                seed = Pipeline(f.session.session_id, self.settings, project=False)
                seed.feed(Line(0, len(first) + 1, first))
                f.context = seed.context_snapshot()
        else:
            f.suppress_until = st.st_size

    def _ensure_fold(self, f: _File) -> Pipeline:
        if f.fold is None:
            title = None
            if self.settings.content.allows(
                ContentKind.PROMPTS
            ):  # the title is content (see replay.new_fold)
                title = session_title(read_workspace(f.session.folder))
            backfill = self.config.backfill
            # --backfill DATE: the prompts that started since then, by the events' time (not the file's).
            window = PromptWindow(backfill.since_ns) if backfill.mode == "since" else None
            f.fold = Pipeline(
                f.session.session_id, self.settings, context=f.context, title=title, window=window
            )
            f.context = None
        return f.fold

    def _read(self, f: _File, max_bytes: int) -> bool:
        """Read and fold what the file has; False when it was left for later (no descriptor free)."""
        if not self._opening(f):
            return False
        f.last_used = time.monotonic()
        try:
            batch = f.tailer.read_lines(max_bytes)
        except (OSError, SourceError) as exc:
            if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE):
                # back-pressure: it stays pending, read once descriptors free up
                self._out_of_descriptors(exc)
                return False
            self._log.warning(f"read:{f.key}", "cannot read %s: %s", f.key, exc)
            self._set_pending(f, False)
            self._backfill.finished(f.key)
            return True
        out: list[SpanRecord | LogRecord] = []
        if batch.reset is not None:
            # New content under this path: whatever the old content left open is closed, the fold restarts.
            if f.fold is not None:
                self._collect(f, f.fold.close(f"file_{batch.reset.value}"), out, force=True)
            logger.info("%s was %s; reading it from the start", f.key, batch.reset.value)
            f.fold = None
            f.context = None
            f.suppress_until = 0
            f.line_number = 0
            f.fed_unterminated = None
        fold = self._ensure_fold(f) if batch.lines or batch.end else None
        good = 0
        for item in batch.lines:
            f.line_number += 1
            if f.fed_unterminated is not None and item.start == f.fed_unterminated:
                f.fed_unterminated = (
                    None  # its newline arrived: it was folded already, when it was the last line
                )
                continue
            assert fold is not None
            lines_before = fold.lines
            step = fold.feed(item, f.line_number)
            if step.drop is not None:
                self._drop(f, step.drop.reason.value, item.start, step.drop.detail)
                continue
            good += fold.lines - lines_before
            self._collect(f, step, out)
        if batch.lines:
            f.last_data = time.monotonic()
        self._count_read(good)
        if batch.end is not None:
            if batch.final_partial is not None:
                self._drop(f, "unterminated", batch.final_partial.start, "the file ended inside a line")
            if fold is not None:
                self._collect(f, fold.close(f"file_{batch.end.value}"), out, force=True)
                f.fold = None
        context = None
        if batch.lines or out or batch.reset is not None or batch.end is not None:
            context = self._enqueue(
                f,
                out,
                batch.offset,
                batch.identity,
                forget=batch.end is not None and batch.end.value == "deleted",
            )
        if batch.at_eof and f.fold is not None and not f.fold.has_open_prompt and context is not None:
            # Between prompts a session needs only its small context (shared with the checkpoint), not a fold.
            f.context, f.fold = context, None
        self._set_pending(f, not batch.at_eof)
        self._set_attention(f)
        if batch.at_eof:
            f.live = True
            self._backfill.finished(f.key)
            self._release_if_idle(f, batch.offset)
        if batch.end is not None and batch.end.value == "deleted":
            f.closed_reason = "deleted"
        return True

    def _collect(self, f: _File, step: Step, out: list[SpanRecord | LogRecord], force: bool = False) -> None:
        """Take what one line (or a closing) gave: spans and log events to send, metric points to record, and
        the daemon's own statistics, read from the activity records themselves."""
        for value in step.values_dropped:
            if force or value.offset > f.suppress_until:  # not a line re-read to rebuild the fold
                self._drop_value(f, value)
        for rec in step.records:
            if not force and rec.source_offset <= f.suppress_until:
                continue
            if isinstance(rec, Detection):
                self.stats.detections[rec.reason] = self.stats.detections.get(rec.reason, 0) + 1
                if f.live:
                    logger.warning("runaway agent in %s: %s", f.session.session_id, rec.reason)
                else:  # found in the history: summed up in the "backfill done" line, not a warning each
                    self._backfill.detected(rec.reason)
                    logger.debug("runaway agent in %s (history): %s", f.session.session_id, rec.reason)
                if self.actions is not None:  # notify / interrupt (copilot_otel.act; live detections only)
                    acted = self.actions.on_detection(rec, self._session_view(f))
                    out.extend(r for r in acted if self.config.logs_enabled or not isinstance(r, LogRecord))
            elif isinstance(rec, PromptRun):
                self.stats.prompts_closed[rec.outcome] = self.stats.prompts_closed.get(rec.outcome, 0) + 1
                if self.actions is not None:
                    self.actions.on_prompt_end(rec, self._session_view(f))
        metrics = self.telemetry.metrics
        for record in step.emissions:
            if not force and record.source_offset <= f.suppress_until:
                continue  # delivered before a restart; the fold only needed the line to rebuild its state
            if isinstance(record, Measurement):
                if metrics is not None and measurement_encodable(record.value):
                    metrics.record(record)
                elif metrics is not None:
                    self._drop_measurement(f, record)
            elif isinstance(record, LogRecord):
                if self.config.logs_enabled:
                    out.append(record)
            else:
                out.append(record)
                if not f.live:
                    self._backfill.spans += 1

    def _session_view(self, f: _File) -> SessionView:
        ctx = f.fold.ctx if f.fold is not None else None
        return SessionView(
            f.session.session_id,
            f.session.folder,
            ctx.repository if ctx else None,
            ctx.branch if ctx else None,
            ctx.cwd if ctx else None,
            ctx.title if ctx else None,
        )

    def _enqueue(
        self,
        f: _File,
        records: list[SpanRecord | LogRecord],
        offset: int,
        identity: Any,
        forget: bool = False,
    ) -> dict[str, Any] | None:
        """Queue records and the marker that checkpoints them; returns the context the marker carries."""
        fold = f.fold
        resume = fold.resume_point() if fold is not None else None
        if resume is None:
            safe, context = offset, (fold.context_snapshot() if fold is not None else f.context)
        else:
            safe, context = resume
        f.seq += 1
        # Lines re-read after a restart were delivered before: the acknowledged offset never goes back.
        marker = Marker(
            f.key, f.seq, max(offset, f.suppress_until), min(safe, offset), context, identity, forget
        )
        self.outbox.put(records, marker, live=f.live)
        return context

    def _count_read(self, lines: int) -> None:
        """Lines with data, bad ones excepted: the count replay reports for the same log."""
        self.stats.lines_read += lines
        if self.telemetry.metrics is not None and lines:
            self.telemetry.metrics.count("copilot_otel.lines.read", lines)

    def _drop_measurement(self, f: _File, record: Measurement) -> None:
        """A poison value (2**70 tokens) would stay in a cumulative counter forever: count it, say it, skip it."""
        stats = self.telemetry.sender.stats
        with stats.lock:
            stats.unencodable += 1
        self._log.warning(
            "drop:measurement",
            "dropped a %s measurement of %s whose value cannot be encoded (%s)",
            record.name,
            f.key,
            record.value,
        )

    def _drop_value(self, f: _File, value: BadLine) -> None:
        """A value of a kept event was dropped (a timestamp past 2262, a count beyond 2**53)."""
        reason = value.reason.value
        self._count_drop(self.stats.values_dropped, "copilot_otel.values.dropped", reason)
        self._log.warning(
            f"value:{reason}",
            "dropped a value in %s at byte %d (%s: %s); the rest of the event is kept",
            f.key,
            value.offset,
            reason,
            value.detail,
        )

    def _drop(self, f: _File, reason: str, offset: int, detail: str) -> None:
        self._count_drop(self.stats.lines_dropped, "copilot_otel.lines.dropped", reason)
        self._log.warning(
            f"drop:{reason}",
            "skipped a bad line in %s at byte %d (%s: %s)",
            f.key,
            offset,
            reason,
            detail[:200],
        )

    def _count_drop(self, counts: dict[str, int], metric: str, reason: str) -> None:
        counts[reason] = counts.get(reason, 0) + 1
        if self.telemetry.metrics is not None:
            self.telemetry.metrics.count(metric, 1, {"copilot_otel.drop.reason": reason})

    # ------------------------------------------------------------------ acknowledgements → checkpoints
    def _apply_acks(self) -> None:
        while self._acks:
            for marker in self._acks.popleft():
                f = self._files.get(marker.key)
                if f is None:
                    continue
                f.delivered[marker.seq] = marker
                while f.next_ack_seq in f.delivered:
                    m = f.delivered.pop(f.next_ack_seq)
                    f.next_ack_seq += 1
                    if m.forget:
                        self.state.forget(m.key)
                        if f.closed_reason == "deleted" and not f.delivered:
                            self._files.pop(m.key, None)
                            self._pending.discard(m.key)
                            self._attention.discard(m.key)
                    elif m.identity is not None:
                        self._checkpoint(m)

    def _checkpoint(self, m: Marker) -> None:
        try:
            self.state.put(m.key, Checkpoint(m.identity, m.safe_offset, m.offset, m.context, time.time_ns()))
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

    # ------------------------------------------------------------------ prompts that never end
    def _fold_unterminated(self, f: _File) -> None:
        """A last line that never got its newline (the CLI was killed, or an old log): once the file has been
        quiet for a while, fold it if it is complete JSON — as ``replay`` does. The offset stays before it (a
        checkpoint never splits a line), so after a restart it is folded again, identically; if its newline
        arrives later it is not folded twice."""
        if f.session.folder is not None and any(pid_alive(pid) for pid in owner_pids(f.session.folder)):
            return  # its CLI still runs: the newline may yet come
        if not self._opening(f):
            return
        try:
            item = f.tailer.read_unterminated()
        except OSError as exc:
            if exc.errno in (errno.EMFILE, errno.ENFILE):
                self._out_of_descriptors(exc)
            else:
                self._log.warning(f"read:{f.key}", "cannot read %s: %s", f.key, exc)
            return
        f.tail_bytes = False
        if item is None or isinstance(item, TooLong):
            return
        fold = self._ensure_fold(f)
        lines_before = fold.lines
        step = fold.feed(item, f.line_number + 1)
        if step.drop is not None:
            return
        self._count_read(fold.lines - lines_before)
        out: list[SpanRecord | LogRecord] = []
        self._collect(f, step, out)
        f.fed_unterminated = item.start
        self._enqueue(f, out, f.tailer.offset, f.tailer.identity)
        self._set_attention(f)

    def _close_abandoned(self) -> None:
        """Close prompts whose CLI is gone (``inuse.<pid>.lock`` names a dead process) or that idled too long."""
        now = time.monotonic()
        wall = time.time()
        for key in list(self._attention):
            f = self._files.get(key)
            if f is None:
                self._attention.discard(key)
                continue
            if f.pending:
                continue
            if f.tail_bytes and f.fed_unterminated is None and now - f.last_data >= OWNER_GRACE_S:
                self._fold_unterminated(f)
            open_prompt = f.fold.has_open_prompt if f.fold is not None else f.tailer.offset < f.suppress_until
            if not open_prompt:
                self._set_attention(f)
                continue
            if f.fold is None:
                # A checkpointed open prompt not re-read yet: read it first, decide on the next check.
                self._set_pending(f, True)
                continue
            try:
                mtime = f.session.path.stat().st_mtime
            except OSError:
                continue
            idle_s = wall - mtime
            reason = None
            if idle_s >= self.config.idle_timeout:
                reason = "idle_timeout"
            elif (
                f.session.folder is not None
                and idle_s >= OWNER_GRACE_S
                and now - f.last_data >= OWNER_GRACE_S
            ):
                pids = owner_pids(f.session.folder)
                if not any(pid_alive(pid) for pid in pids):
                    reason = "owner_exited"
            if reason is None:
                continue
            out: list[SpanRecord | LogRecord] = []
            self._collect(f, f.fold.close(reason), out, force=True)
            logger.info("closed an unfinished prompt in %s (%s)", f.session.session_id, reason)
            self._enqueue(f, out, f.tailer.offset, f.tailer.identity)
            self._set_attention(f)

    def _release_if_idle(self, f: _File, offset: int | None = None) -> None:
        """A history file read to its end: close its descriptor and keep only its small context, not the fold.

        A backfill of thousands of sessions then holds neither thousands of fds nor thousands of folds; the fold
        is rebuilt from the context when the file grows again.
        """
        try:
            st = f.session.path.stat()
        except OSError:
            return
        if offset is not None:
            f.tail_bytes = st.st_size > offset
        idle_s = time.time() - st.st_mtime
        if idle_s < IDLE_CLOSE_S or f.tail_bytes:
            return
        f.tailer.close()
        if f.fold is not None and not f.fold.has_open_prompt:
            f.context = f.fold.context_snapshot()
            f.fold = None

    def _close_idle_fds(self, now: float) -> None:
        """Close descriptors unused for IDLE_CLOSE_S; let a cap lowered by EMFILE grow back while none came.

        Only files read since their last close are looked at, so thousands of idle sessions cost nothing here.
        """
        self._prune_open()
        for key in list(self._maybe_open):
            f = self._files[key]
            if not f.pending and now - f.last_used >= IDLE_CLOSE_S:
                self._release_if_idle(f)
                f.tailer.close()
                del self._maybe_open[key]
        if self._fd_exhausted == self._fd_exhausted_at_check and self._fd_cap < self._fd_limit_cap:
            self._fd_cap = min(self._fd_limit_cap, self._fd_cap + max(1, self._fd_cap // 4))
        self._fd_exhausted_at_check = self._fd_exhausted

    # ------------------------------------------------------------------ descriptors: a bounded cache
    def _prune_open(self) -> None:
        """Forget files in the open-descriptor cache whose tailer closed by itself (a file finished, or idle)."""
        self._maybe_open = {
            key: None for key in self._maybe_open if (f := self._files.get(key)) and f.tailer.is_open
        }

    def _opening(self, f: _File) -> bool:
        """About to use ``f``'s descriptor: make room for it (closing the least recently used beyond the cap) and
        mark it most recently used. False while descriptors ran out a moment ago and ``f`` holds none."""
        if not f.tailer.is_open:
            if time.monotonic() < self._fd_retry_at:
                return False
            self._make_room(self._fd_cap - 1)
        self._maybe_open.pop(f.key, None)
        self._maybe_open[f.key] = None
        return True

    def _make_room(self, keep: int) -> None:
        if len(self._maybe_open) <= keep:
            return
        self._prune_open()
        excess = len(self._maybe_open) - keep
        for key in list(self._maybe_open)[: max(0, excess)]:  # least recently used first
            self._files[
                key
            ].tailer.close()  # (a pending file's offset is kept: it is reopened and re-validated)
            del self._maybe_open[key]

    def _out_of_descriptors(self, exc: OSError) -> None:
        """EMFILE/ENFILE: back-pressure, not a per-file error. Hold fewer descriptors and try again shortly."""
        self._fd_exhausted += 1
        self._prune_open()
        held = len(self._maybe_open)
        self._fd_cap = max(MIN_OPEN_TAILERS, min(self._fd_cap, held * 3 // 4))
        self._make_room(self._fd_cap)
        self._fd_retry_at = time.monotonic() + FD_RETRY_S
        self._log.warning(
            "fd:exhausted",
            "out of file descriptors (%s) with %d session logs open: holding at most %d from now on and reading "
            "the others as descriptors free up (%d reads deferred so far; raise 'ulimit -n' to follow more at once)",
            exc.strerror or exc,
            held,
            self._fd_cap,
            self._fd_exhausted,
        )

    # ------------------------------------------------------------------ restore, status, shutdown
    def _restore(self) -> None:
        for key, checkpoint in self.state.all().items():
            path = Path(key)
            if path.exists():
                self._resumed += self._track(path) is not None
            elif (
                checkpoint.identity.complete
            ):  # deleted or moved while we were stopped: seen after the first scan
                self._missing[checkpoint.identity.fingerprint] = key
            else:  # too short a fingerprint to recognise it under another name
                self._forgot += self.state.forget(key)

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
        self._resumed += 1
        return checkpoint

    def _restored_copy(self, key: str, checkpoint: Checkpoint) -> Checkpoint:
        """A log copied back under its own name (a restore: another inode) that still starts with the content
        its checkpoint belongs to is the same log: the checkpoint is kept (the tailer would read it from 0)."""
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

    def _forget_missing(self) -> None:
        """After the first scan: the logs still missing were deleted while we were stopped (not an error)."""
        for key in self._missing.values():
            self.state.forget(key)
        forgot, self._missing = self._forgot + len(self._missing), {}
        if self._resumed or forgot:
            logger.info(
                "resumed %d checkpointed session log%s%s",
                self._resumed,
                "" if self._resumed == 1 else "s",
                f"; forgot {forgot} deleted while stopped" if forgot else "",
            )

    def _update_live_snapshot(self) -> None:
        now = time.time_ns()
        self._live_snapshot = [
            (
                s.turns,
                s.tool_calls,
                max(0, now - s.started_ns),
                s.identical_streak,
                s.error_streak,
                s.trace_id,
            )
            for _, s in self._live_prompts()
        ]

    def _live_prompts(self) -> Iterator[tuple[Pipeline, LiveStats]]:
        """Each prompt still open, with the fold of its session."""
        for key in self._attention:
            f = self._files.get(key)
            if f is not None and f.fold is not None:
                for stats in f.fold.live_stats():
                    yield f.fold, stats

    def status(self) -> dict[str, Any]:
        sender = self.telemetry.sender.stats
        return {
            "pid": os.getpid(),
            "version": __version__,
            "started_at": self.stats.started_at,
            "updated_at": time.time(),
            "session_state": str(self.config.session_state),
            "files_tracked": len(self._files),
            "sessions_open_prompts": len(self._live_snapshot),
            "open_prompts": self._open_prompts(),
            "backlog_spans": self.outbox.backlog,
            "spans_exported": sender.spans_sent,
            "logs_exported": sender.logs_sent,
            "dead_lettered": sender.dead_lettered,
            # What the dead-letter file holds now (this run's and earlier ones'), for `copilot-otel dead-letters`.
            "dead_letters": self._dead_letters.count() if self._dead_letters is not None else 0,
            "dead_letter_file": str(self._dead_letters.path) if self._dead_letters is not None else "",
            "unencodable": sender.unencodable,
            "endpoint_error": sender.endpoint_error,
            "retries": sender.retries,
            "last_export_ok_at": sender.last_success_ns / 1e9 if sender.last_success_ns else None,
            "last_error": sender.last_error if sender.consecutive_failures else "",
            "lines_read": self.stats.lines_read,
            "lines_dropped": dict(self.stats.lines_dropped),
            "values_dropped": dict(self.stats.values_dropped),
            "detections": dict(self.stats.detections),
            "prompts_closed": dict(self.stats.prompts_closed),
            "destination": self.telemetry.description,
            "discovery": self._discovery.description,
            "open_files_cap": self._fd_cap,
            "reads_deferred_no_descriptor": self._fd_exhausted,
            "state_flush_failures": self.state.flush_failures,
            **(
                {
                    "runaway_interrupts": dict(self.actions.stats.interrupts),
                    "notifications": dict(self.actions.stats.notifications),
                }
                if self.actions is not None
                else {}
            ),
        }

    def _open_prompts(self) -> list[dict[str, Any]]:
        """The prompts still open, for ``status`` (at most 50, the oldest first)."""
        rows: list[dict[str, Any]] = [
            {
                "session_id": fold.ctx.session_id,
                "started_at": s.started_ns / 1e9,
                "last_event_at": s.last_event_ns / 1e9,
                "turns": s.turns,
                "tool_calls": s.tool_calls,
            }
            for fold, s in self._live_prompts()
        ]
        return sorted(rows, key=lambda row: row["started_at"])[:50]

    def _write_status(self) -> None:
        self.state.write_status(self.status())

    def _shutdown(self) -> None:
        deadline = time.monotonic() + SHUTDOWN_FLUSH_S
        logger.info("stopping: delivering what is queued (up to %.0fs)", SHUTDOWN_FLUSH_S)
        self._discovery.stop()
        if self.actions is not None:
            self.actions.close()
        delivered = self.outbox.close(max(0.0, deadline - SHUTDOWN_RESERVE_S - time.monotonic()))
        self._apply_acks()
        if not self.state.usable:
            pass  # another daemon owns the state directory now: nothing of ours is written there
        elif not self.state.flush():
            logger.error(
                "could not save the state in %s: %s", self.config.state_dir, self.state.last_flush_error
            )
        if self.state.usable:
            self._write_status()
        if not delivered:
            logger.warning(
                "%d records were not delivered; they will be read again at the next start",
                self.outbox.backlog,
            )
        for f in self._files.values():
            f.tailer.close()
        if self.telemetry.metrics is not None:
            # The SDK's last metric export gets what is left of the deadline, not its own 10 s on top.
            self.telemetry.metrics.shutdown(max(0.1, deadline - time.monotonic()))
            self.telemetry.metrics = None
        self.telemetry.close()
        self.state.close()


def open_tailer_cap(max_open_files: int) -> int:
    """How many session logs may be open at once under a descriptor limit (64 → 20, 1024 → 256)."""
    return max(MIN_OPEN_TAILERS, min(MAX_OPEN_TAILERS, (max_open_files - FD_RESERVE) // 2))


class _BackfillProgress:
    """History being read: a progress line every few seconds, one line when it is done, and the runaway
    detections found in it summed up there (live ones are warnings of their own)."""

    def __init__(self) -> None:
        self.pending: set[str] = set()
        self.sessions = 0
        self.spans = 0
        self.detections: dict[str, int] = {}
        self.started = 0.0
        self._last_line = 0.0

    def add(self, key: str) -> None:
        if not self.pending and not self.sessions:
            self.started = self._last_line = time.monotonic()
        self.pending.add(key)
        self.sessions += 1

    def finished(self, key: str) -> None:
        self.pending.discard(key)

    def detected(self, reason: str) -> None:
        self.detections[reason] = self.detections.get(reason, 0) + 1

    def report(self) -> None:
        if not self.sessions:
            return
        now = time.monotonic()
        if self.pending:
            if now - self._last_line >= BACKFILL_PROGRESS_S:
                self._last_line = now
                logger.info(
                    "backfill: %d of %d sessions read, %d spans",
                    self.sessions - len(self.pending),
                    self.sessions,
                    self.spans,
                )
            return
        found = ""
        if self.detections:
            found = "; runaway detections in the history: " + ", ".join(
                f"{reason} {count}" for reason, count in sorted(self.detections.items())
            )
        logger.info(
            "backfill done: %d sessions, %d spans in %.1f s%s",
            self.sessions,
            self.spans,
            now - self.started,
            found,
        )
        self.sessions = self.spans = 0
        self.detections = {}


def _first_line(path: Path, limit: int = 1 << 20) -> bytes:
    """The file's first complete line (without its newline), or b"" if there is none within ``limit``."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(limit)
    except OSError:
        return b""
    end = head.find(b"\n")
    return head[:end] if end >= 0 else b""


def _last_line_boundary(path: Path, size: int) -> int:
    """The offset just after the last ``\\n`` at or before ``size`` (0 if none): where "from now on" starts."""
    if size == 0:
        return 0
    with open(path, "rb") as fh:
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


def run(config: Config) -> int:
    """The ``run`` command: start the daemon, stop cleanly on SIGTERM/SIGINT (and their Windows kin), exit 0."""
    require_session_folder(config.session_state)
    stop = threading.Event()
    daemon = Daemon(config, stop=stop)

    def on_stop(name: str) -> None:
        if stop.is_set():
            raise KeyboardInterrupt  # a second signal: stop waiting for the flush
        logger.info("received %s", name)
        stop.set()
        daemon._wake.set()
        _enforce_deadline(daemon)

    # SIGTERM/SIGINT; on Windows also Ctrl+Break and the console closing (the platform seam knows which).
    with current.watch_stop(on_stop):
        daemon.run()
    daemon.stopped.set()
    return 0


# How long past its own deadline a stopping daemon may take before it is ended (a thread of a library stuck
# in an unbounded join once made a stop hang for good).
_STOP_GRACE_S = 10.0


def _enforce_deadline(daemon: Daemon) -> None:
    """Make the shutdown deadline a promise: a stop that has not finished well past it ends the process.

    If the daemon's own shutdown (deliver, save state) is still running past its deadline, every thread's stack
    goes to stderr (so the hang can be found) and the process exits 1. If it finished but the process is still
    there (a library's thread stuck in the interpreter's teardown), it exits 0: the state is saved, nothing lost.
    """

    def watch() -> None:
        if not daemon.stopped.wait(SHUTDOWN_FLUSH_S + _STOP_GRACE_S):
            logger.error("the daemon did not stop within %.0fs; ending it (threads below)", SHUTDOWN_FLUSH_S)
            faulthandler.dump_traceback(all_threads=True)
            os._exit(1)
        time.sleep(_STOP_GRACE_S)  # only reached when the interpreter has not exited by now
        logger.warning("stopped and saved, but the process did not exit; ending it")
        os._exit(0)

    threading.Thread(target=watch, name="copilot-otel-stop-deadline", daemon=True).start()
