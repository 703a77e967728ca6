"""``copilot-otel run``: follow every session log as it is written; deliver everything, exactly once in effect.

Composition (the one place where the stages meet)::

    Discovery ──wake──▶ loop ──▶ Tracker ──read──▶ FollowedFile ─▶ Pipeline ─▶ Router ─▶ Outbox ─▶ Sender
      (inotify + scan)   │        (known and          (tailer, fold,                            │
                         │         followed logs,      markers)                                 │
                         │         descriptors)                                                 │
                         │           ▲                                                          │
                         │           └──────── delivered markers → checkpoints ◀────────────────┘
                         └──▶ Housekeeping (owner and idle closing, status) · StateStore (SQLite)

Threads: the loop (owns the tracker, its files and folds), the outbox worker (exports), discovery's supervisor and
watchdog's observer, the SDK's metric reader. They share only the outbox queue, the acknowledgement deque, the
set of changed paths and immutable snapshots.

The loop's pass, in order: take acknowledgements (checkpoints move); take the paths discovery reported; read the
live files with pending lines, then a time slice of history; report backfill progress; update the live gauges;
then, on their timers, a scan (the truth under notifications), the stat poll of files with an open prompt, the
owner and idle checks, descriptor and settling care, the state flush and the status file. The resume model is
:mod:`copilot_otel.daemon.followed`'s, and so is the state a followed file starts in (its factory,
:class:`~copilot_otel.daemon.followed.FollowedFiles`, applies the backfill policy); what is known and followed is
:mod:`copilot_otel.daemon.tracker`'s.
"""

from __future__ import annotations

import faulthandler
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from .. import __version__
from .._platform import current
from ..common import display
from ..common.errors import SourceError
from ..common.ratelimit import RateLimitedLog
from ..deliver.deadletter import DeadLetters
from ..deliver.outbox import Marker, Outbox
from ..deliver.route import RateLimitedDrops, Router
from ..deliver.telemetry import Telemetry
from ..model.activity import Detection, PromptRun, Record
from ..model.records import LogRecord, SpanRecord
from ..pipeline import fold_settings
from ..projections.catalog import EXPORT_BACKLOG, EXPORT_LAST_SUCCESS, FILES_TRACKED, LIVE_GAUGES
from ..settings.config import Backfill, Config, capture_state
from ..sources import AgentRoot, agent_roots, sidefiles
from ..sources.sessions import require_session_folder
from .act import RunawayActions, SessionView
from .discover import Discoveries
from .followed import FollowedFile, FollowedFiles, Shared
from .housekeeping import (
    OWNER_CHECK_S,
    BackfillProgress,
    Housekeeping,
    LivePrompt,
    Outcomes,
    live_gauges,
    open_prompt_rows,
)
from .state import LoadOutcome, StateStore
from .statusfile import DaemonStatus, not_read_rows
from .tracker import MAX_OPEN_TAILERS, Tracker, open_tailer_cap

__all__ = ["FD_CHECK_S", "MAX_OPEN_TAILERS", "Daemon", "open_tailer_cap", "run"]

logger = logging.getLogger(__name__)

# Bytes read from one file per pass: small enough that one busy file cannot starve the others.
LIVE_READ_BYTES = 256 * 1024
BACKFILL_READ_BYTES = 1024 * 1024
# Backfill work per loop pass before live files get another look (fairness).
BACKFILL_SLICE_S = 0.05
# Files with an open prompt are stat()ed this often, on every OS: change notifications are a hint that Windows delays
# or drops for appended files (and FSEvents coalesces), so a late or missing one costs at most this much latency,
# never data. A few hundred stats a second at most: files with an open prompt are the live ones.
LIVE_POLL_S = 0.25
# How often idle descriptors are closed (and the cap on open ones enforced), and settled files forgotten.
FD_CHECK_S = 10.0
CHECKPOINT_FLUSH_S = 1.0
STATUS_WRITE_S = 5.0
SHUTDOWN_FLUSH_S = 10.0
# Of the shutdown deadline, kept for saving the state and the last metric export after the outbox gave up.
SHUTDOWN_RESERVE_S = 1.5
# The full scan is the truth under notifications, but with a history of 100,000 sessions it costs a second of CPU:
# it runs at most this share of the time (its period grows with its cost), whatever the configured interval says.
SCAN_SHARE = 0.005


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
            self.settings = fold_settings(config)
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
        self.started_at = time.time()
        self._log = RateLimitedLog(logger)
        self.router = Router(
            self.telemetry.metrics, logs_enabled=config.logs_enabled, say=RateLimitedDrops(self._log)
        )
        self.outcomes = Outcomes()
        self._backfill = BackfillProgress()
        shared = Shared(self.settings, config.backfill, self.router, self.outbox, self, self._log)
        # What was on disk at the start and read as history is in the progress and "backfill done" lines.
        self.files = FollowedFiles(shared, config.idle_timeout, on_history=self._backfill.add)
        self.tracker = Tracker(
            self.state,
            self.files.follow,
            max_open_files=current.max_open_files(),
            log=self._log,
            waits=self.files.waits_its_turn,
        )
        self.housekeeping = Housekeeping(self.tracker, config.idle_timeout)
        self._acks: deque[list[Marker]] = deque()
        self._wake = threading.Event()
        self._changed: set[str] = set()
        self._changed_lock = threading.Lock()
        self._resync = threading.Event()
        # Every agent whose logs the settings read (``agents``), each folder with its own layout and watch; one that
        # does not exist is that agent not installed, waited for.
        self.roots = [root for root in agent_roots(config) if root.enabled]
        self._discovery = Discoveries(
            [(root.logs, root.agent) for root in self.roots], self._on_change, on_resync=self._on_resync
        )
        self._scanned: tuple[dict[str, int], float] | None = None
        self._scan_cost_s = 0.0
        self._first_scan_applied = False
        # The folders that did not exist at the start (each said once when it appears).
        self._waiting_for: list[AgentRoot] = []
        self._scans = 0
        self._live: list[LivePrompt] = []
        self.actions = RunawayActions.from_config(config)  # None unless runaway_action asks for more
        dead_letter = self.telemetry.sender.dead_letter
        self._dead_letters = DeadLetters(dead_letter) if dead_letter is not None else None
        self._install_metrics()

    # ------------------------------------------------------------------ wiring
    def _on_change(self, path: Any) -> None:
        with self._changed_lock:
            self._changed.add(str(path))
        self._wake.set()

    def _on_resync(self) -> None:
        """Discovery (re-)established its watch or lost events: compare a full scan with what we track."""
        self._resync.set()
        self._wake.set()

    def _on_delivered(self, markers: list[Marker]) -> None:
        self._acks.append(markers)
        self._wake.set()

    def _install_metrics(self) -> None:
        metrics = self.telemetry.metrics
        if metrics is None:
            return
        for name, _unit, _description in LIVE_GAUGES:

            def read(name: str = name) -> list[tuple[float, dict[str, Any]]]:
                return [(live_gauges(self._live)[name], {})]

            metrics.set_gauge(name, read)
        metrics.set_gauge(EXPORT_BACKLOG, lambda: [(float(self.outbox.backlog), {})])
        metrics.set_gauge(FILES_TRACKED, lambda: [(float(len(self.tracker)), {})])
        sender = self.telemetry.sender.stats
        metrics.set_gauge(
            EXPORT_LAST_SUCCESS,
            lambda: [(sender.last_success_ns / 1e9, {})] if sender.last_success_ns else [],
        )

    def on_record(self, f: FollowedFile, record: Record) -> Sequence[SpanRecord | LogRecord]:
        """A detection or a finished prompt of a followed file: count it, say it, act on it (:class:`Listener`)."""
        assert isinstance(record, (Detection, PromptRun))
        self.outcomes.count(record)
        if isinstance(record, PromptRun):
            if self.actions is not None:
                self.actions.on_prompt_end(record, _session_view(f, self._agent_of(f)))
            return ()
        if not f.live:  # found in the history: summed up in the "backfill done" line, not a warning each
            self._backfill.detected(record.reason)
            logger.debug("runaway agent in %s (history): %s", f.session.session_id, record.reason)
        notified = self.actions.stats.notified if self.actions is not None else 0
        acted = (
            self.actions.on_detection(record, _session_view(f, self._agent_of(f)))
            if self.actions is not None
            else []
        )
        # A notice (daemon/act.py) is the detection's warning line, with more in it: one line, not two.
        if f.live and (self.actions is None or self.actions.stats.notified == notified):
            self._log.warning("runaway", "runaway agent in %s: %s", f.session.session_id, record.reason)
        return [r for r in acted if self.config.logs_enabled or not isinstance(r, LogRecord)]

    # ------------------------------------------------------------------ main loop
    def run(self) -> None:
        """Resume, follow, and on stop flush within a deadline and save state."""
        found = [root for root in self.roots if root.found]
        self._waiting_for = [root for root in self.roots if not root.found]
        logger.info(
            "copilot-otel %s following %s → %s (state in %s)",
            __version__,
            _following(found or self.roots, self._waiting_for if found else []),
            destinations(self.config, self.telemetry.description),
            self.config.state_dir,
        )
        if (capture := capture_state(self.config)).on:
            logger.warning("%s", capture.line)  # the most privacy-critical switch: said at every start
        fresh = self.state.load_outcome is not LoadOutcome.LOADED and bool(found)
        if said := _backfill_line(self.config.backfill, fresh=fresh):
            logger.info("%s", said)
        if not found:
            logger.info("%s", _waiting_line(self.roots))
        self.outbox.start()
        self.tracker.restore()
        # The watch is built on discovery's thread (100,000 session folders take seconds to watch); when it is up,
        # on_resync asks for one more scan, which covers what changed while it was being built.
        self._said_resumed()
        self._discovery.start(background=True)
        self._discovery.request_scan(self._on_scanned)
        timers = _Timers(time.monotonic())
        try:
            while not self.stop.is_set():
                busy = self._pass()
                now = time.monotonic()
                if self._resync.is_set() or timers.due("scan", now, self._scan_period()):
                    self._resync.clear()
                    self._discovery.request_scan(self._on_scanned)
                if timers.due("live_poll", now, LIVE_POLL_S):
                    self.tracker.poll_attention()
                if timers.due("owner", now, OWNER_CHECK_S):
                    self.housekeeping.close_abandoned()
                if timers.due("fd", now, FD_CHECK_S):
                    self.tracker.settle(now)
                if timers.due("flush", now, CHECKPOINT_FLUSH_S):
                    self._apply_acks()
                    # A deleted state directory is re-created (and re-locked) within a second; if another daemon
                    # locked it first, StateError ends this one, which writes nothing more there.
                    if self.state.check_dir():
                        self._write_status()
                    self.state.flush()
                if timers.due("status", now, STATUS_WRITE_S):
                    self._write_status()
                if not busy:
                    # Files announce themselves (notifications wake us); the timeout only paces the periodic
                    # checks, and the stat poll of files with an open prompt.
                    pace = min(OWNER_CHECK_S, self.config.rescan_interval)
                    self._wake.wait(timeout=min(pace, LIVE_POLL_S) if self.tracker.attention else pace)
                    self._wake.clear()
        finally:
            self._shutdown()

    def _pass(self) -> bool:
        """One pass over files with work: live ones first, then a time slice of backfill. True if more is left."""
        self._apply_acks()
        self._apply_scan()
        with self._changed_lock:
            changed, self._changed = self._changed, set()
        tracker = self.tracker
        if changed:
            tracker.changed(changed)
        live, history = tracker.work()
        read = False
        for f in live:
            if self.stop.is_set():
                return False
            if self.outbox.has_room(True):
                read = self._read(f, LIVE_READ_BYTES) or read
        deadline = time.monotonic() + BACKFILL_SLICE_S
        for f in history:
            if self.stop.is_set() or time.monotonic() > deadline or not self.outbox.has_room(False):
                break
            read = self._read(f, BACKFILL_READ_BYTES) or read
        self._backfill.report(waiting=tracker.waiting)
        self._live = self.housekeeping.live_prompts(time.time_ns())
        if self.actions is not None:
            self.actions.drain(self.telemetry.metrics)
        if self.telemetry.metrics is not None:
            self.telemetry.record_delivery_stats()
            self.telemetry.metrics.drain()
        # Busy only while something could be read: a lane at its cap (the collector is down) waits for the next
        # pace tick like an idle loop instead of spinning on files it may not read.
        return read and bool(tracker.pending)

    def _agent_of(self, f: FollowedFile) -> str | None:
        """Which other agent's folder a followed log is in (``None``: Copilot CLI's)."""
        key = f.key
        for root in self.roots:
            if root.source is not None and key.startswith(str(root.logs) + os.sep):
                return root.agent
        return None

    def _read(self, f: FollowedFile, max_bytes: int) -> bool:
        read, spans = self.tracker.read(f, max_bytes)
        if f.key in self._backfill.pending:
            self._backfill.spans += spans
        if read and not f.pending:
            self._backfill.finished(f.key)
        return read

    def _on_scanned(self, stats: dict[str, int], cost_s: float) -> None:
        """A full scan, made on discovery's thread: compared with what is tracked on the loop's next pass."""
        self._scanned = (stats, cost_s)
        self._wake.set()

    def _apply_scan(self) -> None:
        scanned, self._scanned = self._scanned, None
        if scanned is None:
            return
        stats, self._scan_cost_s = scanned
        self._scans += 1
        first = not self._first_scan_applied
        self._first_scan_applied = True
        for root in [root for root in self._waiting_for if root.found]:
            self._waiting_for.remove(root)
            logger.info("%s appeared: following its sessions", root.logs)
        forgot = self.tracker.forgot
        self.files.in_first_scan = first
        try:
            self.tracker.scan(stats)
        finally:
            self.files.in_first_scan = False
        if first and self.tracker.forgot > forgot:
            gone = self.tracker.forgot - forgot
            logger.info(
                "forgot %d checkpointed session log%s deleted while stopped", gone, "" if gone == 1 else "s"
            )

    def _scan_period(self) -> float:
        """How often to scan: the configured interval (six times it while notifications work), and never more
        often than :data:`SCAN_SHARE` of the time allows for what the last scan cost (a fifth of it while they work:
        the watcher reports what it loses, so the scan only guards against what it cannot see)."""
        watching = self._discovery.mode == "inotify"
        base = self.config.rescan_interval * (6 if watching else 1)
        return max(base, self._scan_cost_s / (SCAN_SHARE / 5 if watching else SCAN_SHARE))

    def _said_resumed(self) -> None:
        """Said once the checkpoints are restored, before the first scan (which at 100,000 sessions takes a second
        or more, on discovery's thread): from here on every log is followed from its checkpoint."""
        resumed, forgot = self.tracker.resumed, self.tracker.forgot
        if resumed or forgot:
            logger.info(
                "resumed %s%s",
                display.count(resumed, "checkpointed session log"),
                f"; forgot {forgot:,} deleted while stopped" if forgot else "",
            )

    def _apply_acks(self) -> None:
        while self._acks:
            self.tracker.apply_acks(self._acks.popleft())

    # ------------------------------------------------------------------ status, shutdown
    def status(self) -> dict[str, Any]:
        """The document ``status.json`` holds."""
        sender = self.telemetry.sender.stats
        health = self.router.health
        actions = self.actions
        return DaemonStatus(
            pid=os.getpid(),
            version=__version__,
            started_at=self.started_at,
            updated_at=time.time(),
            session_state=str(self.config.session_state),
            files_tracked=len(self.tracker),
            files_followed=len(self.tracker.files),
            sessions_open_prompts=len(self._live),
            open_prompts=open_prompt_rows(self._live),
            backlog_spans=self.outbox.backlog,
            spans_exported=sender.spans_sent,
            logs_exported=sender.logs_sent,
            dead_lettered=sender.dead_lettered,
            # What the dead-letter file holds now (this run's and earlier ones'), for `copilot-otel dead-letters`.
            dead_letters=self._dead_letters.count() if self._dead_letters is not None else 0,
            dead_letter_file=str(self._dead_letters.path) if self._dead_letters is not None else "",
            unencodable=sender.unencodable + health.measurements_dropped,
            endpoint_error=sender.endpoint_error,
            retries=sender.retries,
            last_export_ok_at=sender.last_success_ns / 1e9 if sender.last_success_ns else None,
            last_error=sender.last_error if sender.consecutive_failures else "",
            lines_read=health.lines_read,
            lines_dropped=dict(health.lines_dropped),
            values_dropped=dict(health.values_dropped),
            detections=dict(self.outcomes.detections),
            prompts_closed=dict(self.outcomes.prompts_closed),
            destination=self.telemetry.description,
            discovery=self._discovery.description,
            scans=self._scans,
            last_scan_s=round(self._scan_cost_s, 3),
            open_files_cap=self.tracker.descriptors.cap,
            reads_deferred_no_descriptor=self.tracker.descriptors.exhausted,
            state_flush_failures=self.state.flush_failures,
            state_write_error=self.state.last_failure or "",
            state_write_failed_at=self.state.last_failure_ns / 1e9 if self.state.last_failure_ns else None,
            state_writes_failing=self.state.consecutive_flush_failures,
            side_files_refused=sidefiles.refusals(),
            runaway_interrupts=dict(actions.stats.interrupts) if actions is not None else None,
            notifications=dict(actions.stats.notifications) if actions is not None else None,
            records_not_read=not_read_rows(health.not_read),
        ).to_dict()

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
        saved = self.state.usable and self.state.last_flush_error is None
        if self.state.usable:
            self._write_status()
        self.tracker.close_all()
        if self.telemetry.metrics is not None:
            # What the outbox delivered since the last pass is counted before the last export, not lost with it.
            self.telemetry.record_delivery_stats()
            # The SDK's last metric export gets what is left of the deadline, not its own 10 s on top.
            self.telemetry.metrics.shutdown(max(0.1, deadline - time.monotonic()))
            self.telemetry.metrics = None
        self.telemetry.close()
        self.state.close()
        left = 0 if delivered else self.outbox.backlog
        stats = self.telemetry.sender.stats
        (logger.warning if left else logger.info)(
            "%s", _stopped_line(stats.spans_sent, stats.logs_sent, left, saved)
        )


class _Timers:
    """The loop's periodic jobs: each is due once its period has passed since it last ran."""

    def __init__(self, now: float) -> None:
        self._start = now
        self._last: dict[str, float] = {}

    def due(self, name: str, now: float, period_s: float) -> bool:
        if now - self._last.get(name, self._start) < period_s:
            return False
        self._last[name] = now
        return True


def _session_view(f: FollowedFile, agent: str | None) -> SessionView:
    ctx = f.fold.ctx if f.fold is not None else None
    return SessionView(
        ctx.session_id if ctx and agent else f.session.session_id,
        f.session.folder,
        ctx.repository if ctx else None,
        ctx.branch if ctx else None,
        ctx.cwd if ctx else None,
        ctx.title if ctx else None,
        agent=agent,
    )


def _following(roots: list[AgentRoot], missing: list[AgentRoot]) -> str:
    """The folders the start line names: those followed, then the agents not installed (their folder missing)."""
    said = ", ".join(str(root.logs) for root in roots)
    if missing:
        agents = ", ".join(root.agent for root in missing)
        folders = " or ".join(str(root.logs) for root in missing)
        said += f" ({agents} not installed: no {folders})"
    return said


def _waiting_line(roots: list[AgentRoot]) -> str:
    """Said once when no agent's folder exists yet: every folder looked in, and how to move each."""
    if len(roots) == 1:
        return (
            f"waiting for {roots[0].logs} to appear: it does not exist yet (the CLI creates it at its first "
            f"session; if yours is elsewhere, set {_flag(roots[0].setting)})"
        )
    names = ", ".join(str(root.logs) for root in roots[:-1]) + f" or {roots[-1].logs}"
    flags = ", ".join(_flag(root.setting) for root in roots)
    return (
        f"waiting for {names} to appear: none exists yet (each CLI creates its folder at its first session; if "
        f"yours are elsewhere, set {flags})"
    )


def _flag(setting: str) -> str:
    return "--" + setting.replace("_", "-")


def destinations(config: Config, description: str) -> str:
    """Where each signal goes, for the start line: the base URL and the paths when every signal that is on shares
    it, else each signal's URL (``description``, the transport's own, names only the traces URL)."""
    urls = config.signal_endpoints()
    if urls is None or config.protocol == "grpc":
        on = description
    else:
        shown = {signal: display.url(url) for signal, url in urls.items() if _signal_on(config, signal)}
        bases = {
            url.rsplit(f"/v1/{signal}", 1)[0]
            for signal, url in shown.items()
            if url.endswith(f"/v1/{signal}")
        }
        if len(bases) == 1 and all(url.endswith(f"/v1/{signal}") for signal, url in shown.items()):
            on = f"OTLP/HTTP {bases.pop()} ({', '.join(f'/v1/{signal}' for signal in shown)})"
        else:
            on = "OTLP/HTTP " + ", ".join(f"{signal} to {url}" for signal, url in shown.items())
    off = [signal for signal in ("logs", "metrics") if not _signal_on(config, signal)]
    return on + (f"; {' and '.join(off)} off" if off else "")


def _signal_on(config: Config, signal: str) -> bool:
    return {"logs": config.logs_enabled, "metrics": config.metrics_enabled}.get(signal, True)


def _stopped_line(spans: int, logs: int, left: int, saved: bool) -> str:
    """The daemon's last line: what this run delivered, what is left for the next start, whether the state was
    saved (so a stop is never followed by silence after "stopping: delivering ...")."""
    said = f"stopped: delivered {display.count(spans, 'span')} and {display.count(logs, 'log event')} in this run"
    if left:
        said += (
            f"; {display.count(left, 'record')} {'was' if left == 1 else 'were'} not delivered "
            "(read again at the next start)"
        )
    else:
        said += ", nothing left waiting"
    return said + ("" if saved else "; the state could not be saved (said above)")


def _backfill_line(backfill: Backfill, fresh: bool) -> str:
    """What happens to the session logs already on disk that have no checkpoint, said once at the start ("" when
    it goes without saying: every log resumes from its checkpoint and new ones are read whole)."""
    if backfill.mode == "none":
        return (
            "--backfill none: of the sessions already on disk, only what is written from now on is exported"
        )
    if backfill.mode == "since":
        since = datetime.fromtimestamp((backfill.since_ns or 0) / 1e9).astimezone()
        return (
            f"--backfill {since:%Y-%m-%d %H:%M %Z}: of the sessions already on disk, the prompts that started since then are "
            "exported (by the events' own times), and what is written from now on"
        )
    return "no checkpoints yet: every session log on disk is exported from its start" if fresh else ""


def run(config: Config) -> int:
    """The ``run`` command: start the daemon, stop cleanly on SIGTERM/SIGINT (and their Windows kin), exit 0.

    Raises:
        SourceError: ``session-state`` is a file, or the ``agents`` setting reads no agent's logs.
    """
    if "copilot" in config.agents:
        require_session_folder(config.session_state)
    if not config.agents:
        raise SourceError(
            "agents is none: run has no agent's logs to follow (set --agents or COPILOT_OTEL_AGENTS to copilot, "
            "claude-code, codex or gemini)"
        )
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
