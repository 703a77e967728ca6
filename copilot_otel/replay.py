"""``replay``: export existing session logs (backfill), the batch path through parse → fold → export.

Each file is read once, folded in order and closed at its end; spans and log events are delivered in
batches and each batch is confirmed by the collector before the next one is sent. The function returns a
:class:`ReplayReport`; it raises :class:`ExportError` naming what was not delivered, never reports success
for data the collector did not accept.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Set
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from .common import display
from .common.display import count
from .common.errors import (
    EndpointError,
    ExportError,
    PartialError,
    RejectedError,
    SourceError,
    UnreadableError,
)
from .deliver.batcher import Batch
from .deliver.deadletter import DeadLetters
from .deliver.export import ENCODE_ERRORS, Signal
from .deliver.metrics import Aggregator
from .deliver.route import Health, Router
from .deliver.telemetry import Telemetry, resource_attributes
from .library import discover, resolve_targets, subagent_parts
from .model.records import BadLine, Measurement
from .pipeline import Step, Window, fold_events, fold_settings, new_fold
from .pipeline.workers import by_size, log_bytes, process_pool
from .settings.config import Config
from .sources import agent_roots
from .sources.sessions import SessionFile, require_session_folder

logger = logging.getLogger(__name__)

# Bad lines are logged one by one up to this many per run, then only counted.
_BAD_LINES_LOGGED = 20
# Allocations between two young-generation collections while replaying (CPython's default is 700).
_GC_YOUNG_THRESHOLD = 50_000


@contextlib.contextmanager
def _fewer_gc_passes() -> Iterator[None]:
    """Collect cycles less often during a replay (≈ 8 % of its CPU with the default thresholds).

    Folding allocates many short-lived dicts and records but makes almost no reference cycles (refcounting
    frees them), so the young-generation passes CPython runs every 700 allocations find next to nothing.
    """
    before = gc.get_threshold()
    gc.set_threshold(_GC_YOUNG_THRESHOLD, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


_COUNTS = (
    "sessions",
    "events",
    "spans",
    "logs",
    "measurements",
    "bad_lines",
    "spans_delivered",
    "logs_delivered",
    "dead_lettered",
    "unencodable",
    "rejected",
    "shrunk",
)


@dataclass
class ReplayReport:
    """What a replay did; printed by the CLI and asserted by tests.

    ``spans``/``logs`` were read from the logs, ``spans_delivered``/``logs_delivered`` accepted by the collector;
    ``dead_lettered`` records it permanently rejected, ``unencodable`` records (and measurements) whose values
    could not be encoded, ``rejected`` records a partial success said it rejected (``rejected_message``: what it
    said), ``shrunk`` records whose captured content was cut to fit in one request. ``error`` is why delivery
    stopped, if it did.
    """

    sessions: int = 0
    sessions_total: int = 0
    events: int = 0
    spans: int = 0
    logs: int = 0
    measurements: int = 0
    bad_lines: int = 0
    spans_delivered: int = 0
    logs_delivered: int = 0
    dead_lettered: int = 0
    unencodable: int = 0
    rejected: int = 0
    rejected_message: str = ""
    shrunk: int = 0
    metrics_delivered: bool = False
    error: str = ""
    endpoint_error: bool = False
    seconds: float = 0.0
    destination: str = ""
    dead_letter_file: str = ""
    bad_line_examples: list[str] = field(default_factory=list)
    # Sessions that could not be read (why, one line each): skipped, the rest exported; exit 8 (partial).
    skipped: list[str] = field(default_factory=list)
    # Signals the endpoint does not take at all (a traces-only backend): each tried, all named at the end.
    refused_signals: set[str] = field(default_factory=set)
    # Values dropped from events that were kept (a timestamp past 2262, a count beyond 2**53), by reason.
    values_dropped: dict[str, int] = field(default_factory=dict)
    # Dropped values and measurements said so far (the first few are logged; the rest only counted).
    values_said: int = 0
    measurements_said: int = 0

    def add_health(self, health: Health) -> None:
        """Take what this process's router counted (lines read and dropped, values, points, log events)."""
        self.events += health.lines_read
        self.bad_lines += sum(health.lines_dropped.values())
        self.logs += health.logs
        self.measurements += health.measurements
        self.unencodable += health.measurements_dropped
        for reason, n in health.values_dropped.items():
            self.values_dropped[reason] = self.values_dropped.get(reason, 0) + n

    def merge(self, part: ReplayReport) -> None:
        """Add a worker's report (counts add up; the first error and examples up to the usual limit are kept)."""
        for name in _COUNTS:
            setattr(self, name, getattr(self, name) + getattr(part, name))
        for reason, n in part.values_dropped.items():
            self.values_dropped[reason] = self.values_dropped.get(reason, 0) + n
        if part.error and not self.error:
            self.error, self.endpoint_error = part.error, part.endpoint_error
        self.rejected_message = self.rejected_message or part.rejected_message
        self.dead_letter_file = self.dead_letter_file or part.dead_letter_file
        room = max(0, _BAD_LINES_LOGGED - len(self.bad_line_examples))
        self.bad_line_examples.extend(part.bad_line_examples[:room])
        self.skipped.extend(part.skipped)
        self.refused_signals |= part.refused_signals

    @property
    def exit_code(self) -> int:
        """0 only when the collector accepted everything that was read."""
        if self.error:
            return (EndpointError if self.endpoint_error else ExportError).exit_code
        if self.dead_lettered or self.unencodable or self.rejected:
            return RejectedError.exit_code
        if self.skipped:
            return PartialError.exit_code
        return 0

    def summary(self) -> str:
        """One line saying exactly what was and was not delivered."""
        delivered = (
            f"delivered {self.spans_delivered:,} of {count(self.spans, 'span')} and {self.logs_delivered:,} of "
            f"{count(self.logs, 'log event')} from {self.sessions:,} of {count(self.sessions_total, 'session')} "
            f"({count(self.events, 'event')})"
        )
        if not (self.error or self.dead_lettered or self.unencodable or self.rejected or self.skipped):
            delivered = (
                f"exported {count(self.sessions, 'session')}: {count(self.spans, 'span')}, "
                f"{count(self.logs, 'log event')} from {count(self.events, 'event')}"
            )
        parts = [delivered]
        if self.dead_lettered:
            parts.append(
                f"{self.dead_lettered} records rejected by the collector were dead-lettered in {self.dead_letter_file}"
            )
        if self.dead_letter_file and (waiting := DeadLetters(self.dead_letter_file).count()):
            parts.append(
                f"{waiting} dead letters wait in {self.dead_letter_file} ('copilot-otel dead-letters resend' "
                "sends them again)"
            )
        if self.rejected:
            parts.append(
                f"{count(self.rejected, 'record')} rejected by the collector in a partial success "
                f"({self.rejected_message or 'no reason given'}; not re-sent: it does not say which)"
            )
        if self.unencodable:
            parts.append(
                f"{self.unencodable} records could not be encoded (values out of range) and were dropped"
            )
        if self.shrunk:
            parts.append(
                f"{count(self.shrunk, 'record')} sent with captured content cut to fit in one request "
                "(COPILOT_OTEL_MAX_REQUEST_BYTES)"
            )
        if self.skipped:
            parts.append(
                f"{count(len(self.skipped), 'session')} could not be read and {'was' if len(self.skipped) == 1 else 'were'} "
                f"skipped ({self.skipped[0]})"
            )
        if self.bad_lines:
            parts.append(f"{self.bad_lines} bad lines skipped")
        if self.values_dropped:
            reasons = ", ".join(f"{reason}: {n}" for reason, n in sorted(self.values_dropped.items()))
            parts.append(f"{sum(self.values_dropped.values())} values dropped ({reasons}), their events kept")
        if self.error:
            missing = self.spans - self.spans_delivered - self.dead_lettered - self.rejected
            rest = self.sessions_total - self.sessions
            parts.append(
                "not delivered: "
                + (f"{missing} spans, " if missing > 0 else "")
                + (
                    f"{self.logs - self.logs_delivered} log events, "
                    if self.logs > self.logs_delivered
                    else ""
                )
                + (f"the {rest} sessions not read yet, " if rest else "")
                + "the metrics"
            )
        elif not self.metrics_delivered and self.measurements:
            parts.append("metrics not delivered")
        return f"{', '.join(parts)} in {self.seconds:.1f}s → {self.destination}"


@dataclass(frozen=True, slots=True)
class Progress:
    """Reported after each session: for progress bars and plain progress lines."""

    sessions_done: int
    sessions_total: int
    events: int
    spans: int
    elapsed_s: float


def replay(
    targets: Iterable[str | Path],
    config: Config,
    on_progress: Callable[[Progress], None] | None = None,
    telemetry: Telemetry | None = None,
    since_ns: int | None = None,
    until_ns: int | None = None,
) -> ReplayReport:
    """Export every prompt of every session under ``targets``.

    Args:
        targets: Session folders, ``events.jsonl`` files, legacy flat files, session-state roots, another
            agent's home or log folder (``~/.claude``, ``~/.codex/sessions``) or session ids; none: every log in
            the enabled agents' folders (the ``agents`` setting), Claude Code's sub-agent files each folded alone.
        config: Export destination, privacy and runaway settings.
        on_progress: Called after each session.
        telemetry: Pre-built exporters (tests, ``doctor``); built from ``config`` when ``None``.
        since_ns, until_ns: Only the prompts that started at or after ``since_ns`` and before ``until_ns`` (by
            the events' own times, :mod:`copilot_otel.pipeline.window`); a log last written before ``since_ns`` holds
            none and is not read.

    Raises:
        SourceError: a target cannot be found or read; with no target, no agent's folder holds a log.
        ExportError: the collector did not accept everything within ``config.max_retry_time``.
    """
    started = time.monotonic()
    targets = list(targets)
    unreadable: list[UnreadableError] = []
    nothing = "nothing to replay: no session logs found"
    if targets:
        if any(Path(target) == config.session_state for target in targets):
            require_session_folder(config.session_state)
        roots = [root for root in agent_roots(config) if root.enabled]
        sessions = resolve_targets(targets, config.session_state, unreadable, subagents=True, others=roots)
    else:
        found = discover(config, subagents=True)
        sessions, unreadable, nothing = found.sessions, found.unreadable, found.nothing_found()
    for exc in unreadable[:_BAD_LINES_LOGGED]:
        logger.warning("skipped: %s", exc)
    if not sessions:
        if unreadable:
            raise SourceError(
                f"nothing to replay: {count(len(unreadable), 'session')} could not be read ({unreadable[0]})"
            )
        raise SourceError(nothing)
    if not targets:
        found.warn_unfolded()
    window: Window = None
    if since_ns is not None or until_ns is not None:
        window = (since_ns, until_ns)
        if since_ns is not None:
            sessions = [s for s in sessions if _written_since(s, since_ns)]
    start_ns = time.time_ns()
    own_telemetry = telemetry is None
    tel = telemetry or Telemetry.from_config(config, with_metrics=False)
    tel.sender.drop_unsupported = (
        True  # a signal the endpoint refuses: try the others, name them all at the end
    )
    # A sub-agent's log is folded alone but is part of the session that started it (as show and report count it).
    parts = subagent_parts(sessions)
    report = ReplayReport(
        destination=tel.description,
        sessions_total=len(sessions) - len(parts),
        dead_letter_file=str(tel.sender.dead_letter or ""),
        skipped=[str(exc) for exc in unreadable],
    )
    metrics = Aggregator()
    if on_progress is not None:  # the total is known before any work: a bar shows 0/N, not 0/?
        on_progress(Progress(0, report.sessions_total, 0, 0, time.monotonic() - started))
    workers = _worker_count(config, sessions)
    try:
        if workers > 1:
            _replay_in_workers(
                sessions, config, workers, report, metrics, on_progress, started, window, parts
            )
        else:
            _replay_here(
                sessions, config, tel, report, metrics, on_progress, started, window=window, parts=parts
            )
        report.metrics_delivered = not (config.metrics_enabled and metrics)
        if not report.error and not report.metrics_delivered:
            _send_metrics(config, tel, report, metrics, start_ns)
        report.refused_signals |= {signal.value for signal in tel.sender.unsupported}
        if report.refused_signals and not report.error:
            _refused(report)
    finally:
        if own_telemetry:
            tel.close()
    report.seconds = time.monotonic() - started
    if report.error:
        raise (EndpointError if report.endpoint_error else ExportError)(f"{report.error}; {report.summary()}")
    return report


def _send_metrics(
    config: Config, tel: Telemetry, report: ReplayReport, metrics: Aggregator, start_ns: int
) -> None:
    """Replay's metrics as one request, after the spans and log events; a failure is recorded in ``report``."""
    delta = config.metrics_temporality != "cumulative"
    try:
        body = metrics.encode(resource_attributes(config), start_ns, time.time_ns(), delta=delta)
    except ENCODE_ERRORS as exc:  # values are range-checked when recorded; this is the last line of defence
        report.error = f"the metrics could not be encoded ({type(exc).__name__}: {exc})"
        return
    outcome = tel.sender.deliver_body(Signal.METRICS, body, config.max_retry_time)
    if outcome.delivered:
        report.metrics_delivered = Signal.METRICS not in tel.sender.unsupported
        return
    report.endpoint_error = outcome.endpoint
    report.error = (
        f"the collector did not accept the metrics ({outcome.error}); a traces-only backend such as Phoenix: "
        "set COPILOT_OTEL_METRICS=false"
    )


def _refused(report: ReplayReport) -> None:
    """One line for every signal the endpoint refused (it was asked for each): exit 6, the endpoint's doing."""
    refused = [signal for signal in ("logs", "metrics", "traces") if signal in report.refused_signals]
    switches = " ".join(f"COPILOT_OTEL_{signal.upper()}=false" for signal in refused if signal != "traces")
    report.endpoint_error = True
    report.error = (
        f"the endpoint refuses {' and '.join(refused)} (a traces-only backend such as Phoenix?)"
        + (f": set {switches}" if switches else "")
    )


@_fewer_gc_passes()
def _replay_here(
    sessions: list[SessionFile],
    config: Config,
    tel: Telemetry,
    report: ReplayReport,
    metrics: Aggregator,
    on_progress: Callable[[Progress], None] | None,
    started: float,
    total: int | None = None,
    window: Window = None,
    parts: Set[Path] = frozenset(),
) -> None:
    """Replay sessions in this process: fold, batch, deliver on a sending thread, aggregate metrics (``parts``:
    sub-agents' logs, folded but not counted as sessions)."""
    settings = fold_settings(config)
    batch = Batch()  # records accumulate across small sessions
    stats = tel.sender.stats
    before = (
        stats.spans_sent,
        stats.logs_sent,
        stats.dead_lettered,
        stats.unencodable,
        stats.rejected,
        stats.shrunk,
    )
    delivery = _Delivery(tel, config.max_retry_time)
    health = Health()
    router = Router(metrics, logs_enabled=config.logs_enabled, say=_ReplayDrops(report), health=health)
    route = router.route

    def flush() -> None:
        nonlocal batch
        if batch:
            delivery.put(batch)
            batch = Batch()

    def send(step: Step, source: str) -> int:
        """Put a step's records in the batch (sent when full); returns its spans."""
        spans = route(step.emissions, step.values_dropped, source, batch.spans, batch.logs)
        if batch.full:
            flush()
        return spans

    try:
        done = 0  # sessions read: a sub-agent's log is part of one
        for session in sessions:
            counted = session.path not in parts
            done += counted
            report.sessions += counted
            source = str(session.path)
            fold = new_fold(session, settings, window)
            # Each line dropped, routed and counted as the daemon takes the same log's lines (Pipeline.take).
            steps = _skipping_unreadable(fold_events(session, fold), report, counted)
            report.spans += fold.take(steps, source, router, partial(send, source=source))
            router.not_read(source, fold.take_not_read(final=True))
            if on_progress is not None:
                on_progress(
                    Progress(
                        done,
                        total or len(sessions) - len(parts),
                        report.events + health.lines_read,
                        report.spans,
                        time.monotonic() - started,
                    )
                )
        flush()
        delivery.finish()
    except _Undelivered as failed:
        report.error, report.endpoint_error = failed.args[0], failed.endpoint
    finally:
        delivery.stop()
        report.add_health(health)
        report.spans_delivered += stats.spans_sent - before[0]
        report.logs_delivered += stats.logs_sent - before[1]
        report.dead_lettered += stats.dead_lettered - before[2]
        report.unencodable += stats.unencodable - before[3]
        report.rejected += stats.rejected - before[4]
        report.shrunk += stats.shrunk - before[5]
        report.rejected_message = report.rejected_message or stats.rejected_message
        report.refused_signals |= {signal.value for signal in tel.sender.unsupported}
    tel.record_delivery_stats(metrics)


# A history smaller than this is replayed in-process: starting worker processes costs more than it saves.
PARALLEL_MIN_BYTES = 32 * 1024 * 1024
# Sessions are handed to workers in chunks of about this many bytes (balance vs. per-chunk overhead).
CHUNK_BYTES = 8 * 1024 * 1024
_MAX_AUTO_WORKERS = 4


def _skipping_unreadable(steps: Iterator[Step], report: ReplayReport, counted: bool = True) -> Iterator[Step]:
    """A session's steps; one that cannot be read ends here, is counted as skipped and the replay goes on."""
    try:
        yield from steps
    except SourceError as exc:
        report.sessions -= counted
        report.skipped.append(str(exc))
        logger.warning("skipped: %s", exc)


def _written_since(session: SessionFile, since_ns: int) -> bool:
    """Whether a log was written at or after ``since_ns`` (one that was not cannot hold a later event)."""
    try:
        return session.path.stat().st_mtime_ns >= since_ns
    except OSError:
        return True  # let the read say what is wrong with it


def _worker_count(config: Config, sessions: list[SessionFile]) -> int:
    if config.workers == 1:
        return 1
    if config.workers > 1:
        return config.workers
    total = 0
    for session in sessions:
        total += log_bytes(session)
        if total >= PARALLEL_MIN_BYTES:
            return min(os.cpu_count() or 1, _MAX_AUTO_WORKERS)
    return 1


_worker_state: dict[str, Any] = {}


def _init_worker(config: Config, log_level: str) -> None:
    handler = logging.StreamHandler()
    handler.addFilter(display.SafeLogFilter())
    handler.setFormatter(logging.Formatter("copilot-otel: %(levelname)s: %(message)s"))
    package_logger = logging.getLogger("copilot_otel")
    package_logger.handlers[:] = [handler]
    package_logger.setLevel(log_level.upper())
    package_logger.propagate = False
    _worker_state["config"] = config
    _worker_state["telemetry"] = telemetry = Telemetry.from_config(config, with_metrics=False)
    telemetry.sender.drop_unsupported = True


def _replay_chunk(
    sessions: list[SessionFile], window: Window = None, parts: Set[Path] = frozenset()
) -> tuple[ReplayReport, Aggregator]:
    """Worker side: fold, encode and send a chunk of sessions; metrics come back aggregated."""
    report, metrics = ReplayReport(), Aggregator()
    _replay_here(
        sessions,
        _worker_state["config"],
        _worker_state["telemetry"],
        report,
        metrics,
        None,
        0.0,
        window=window,
        parts=parts,
    )
    return report, metrics


def _replay_in_workers(
    sessions: list[SessionFile],
    config: Config,
    workers: int,
    report: ReplayReport,
    metrics: Aggregator,
    on_progress: Callable[[Progress], None] | None,
    started: float,
    window: Window = None,
    parts: Set[Path] = frozenset(),
) -> None:
    """Sessions are independent and the fold is pure: worker processes each read, fold, encode and send their
    share (their own connection, retries and dead-letter file), and hand back counts and aggregated metrics."""
    from concurrent.futures import FIRST_COMPLETED, wait

    # Config holds a read-only mapping proxy, which does not pickle.
    portable = dataclasses.replace(config, sources=dict(config.sources))
    done = 0
    # fork only on Linux and never for gRPC (the platform seam says why); spawn everywhere else.
    with process_pool(
        workers, protocol=config.protocol, initializer=_init_worker, initargs=(portable, config.log_level)
    ) as pool:
        chunks = by_size(sessions, CHUNK_BYTES)
        futures = {
            pool.submit(
                _replay_chunk, chunk, window, frozenset(s.path for s in chunk if s.path in parts)
            ): sum(1 for s in chunk if s.path not in parts)
            for chunk in chunks
        }
        pending = set(futures)
        try:
            while pending:
                # Each chunk as it finishes: the progress moves, and a failed one stops the rest at once.
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in finished:
                    part, part_metrics = future.result()
                    report.merge(part)
                    metrics.merge(part_metrics)
                    if report.error:  # a worker could not deliver: start no more chunks
                        pending = {other for other in pending if not other.cancel()}
                    done += futures[future]
                    if on_progress is not None:
                        on_progress(
                            Progress(
                                done,
                                report.sessions_total,
                                report.events,
                                report.spans,
                                time.monotonic() - started,
                            )
                        )
        except BaseException:
            for future in pending:
                future.cancel()
            raise


class _Undelivered(Exception):
    """Delivery stopped: ``args[0]`` says why; ``endpoint`` when the endpoint refused us (credentials, path)."""

    def __init__(self, message: str, endpoint: bool = False) -> None:
        super().__init__(message)
        self.endpoint = endpoint


# How often a producer blocked on the one-slot queue checks that the sending thread is still alive.
_PUT_POLL_S = 0.5


class _Delivery:
    """Sends the batcher's batches on a worker thread while the next ones are folded (one batch in flight, one
    waiting).

    The first batch the collector does not accept stops everything: :meth:`put` and :meth:`finish` raise
    :class:`_Undelivered`. Neither blocks on a sending thread that is gone.
    """

    def __init__(self, telemetry: Telemetry, max_retry_s: float) -> None:
        self._telemetry = telemetry
        self._max_retry_s = max_retry_s
        self._queue: queue.Queue[Batch | None] = queue.Queue(maxsize=1)
        self._error: _Undelivered | None = None
        self._thread = threading.Thread(target=self._run, name="copilot-otel-replay-send", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (batch := self._queue.get()) is not None:
            if self._error is not None:
                continue  # drain: nothing after a failed batch is sent
            try:
                outcome = self._telemetry.sender.deliver(
                    batch.spans, batch.logs, max_retry_s=self._max_retry_s
                )
            except (
                Exception
            ) as exc:  # the sender never raises; if it does, the replay fails, it does not hang
                logger.debug("sending failed", exc_info=True)
                self._error = _Undelivered(f"internal error while sending: {type(exc).__name__}: {exc}")
                continue
            if not outcome.delivered:
                self._error = (
                    _Undelivered(outcome.error, endpoint=True)
                    if outcome.endpoint
                    else _Undelivered(f"the collector did not accept the data ({outcome.error})")
                )

    def _check(self) -> None:
        if self._error is not None:
            raise self._error

    def _put(self, item: Batch | None) -> None:
        while True:
            self._check()
            if not self._thread.is_alive():
                raise _Undelivered("the sending thread stopped")
            try:
                self._queue.put(item, timeout=_PUT_POLL_S)
                return
            except queue.Full:
                continue

    def put(self, batch: Batch) -> None:
        self._put(batch)

    def finish(self) -> None:
        """Wait for everything queued (each batch is bounded by the retry deadline)."""
        self._put(None)
        while self._thread.is_alive():
            self._thread.join(_PUT_POLL_S)
        self._check()

    def stop(self) -> None:
        if self._thread.is_alive():
            self._error = self._error or _Undelivered("replay stopped")
            self._telemetry.sender.stop.set()  # type: ignore[attr-defined]
            with contextlib.suppress(queue.Full):
                self._queue.put_nowait(None)
            self._thread.join(5.0)


class _ReplayDrops:
    """Replay's way of saying drops: the first few, each with its file and line number, kept for the summary (a
    replay ends, so no rate over time: a history with a bad line in every session says 20 of them, then counts)."""

    def __init__(self, report: ReplayReport) -> None:
        self.report = report

    def line(self, source: str, bad: BadLine) -> None:
        text = f"{source}:{bad.line_number}: skipped a bad line ({bad.reason.value}: {bad.detail})"
        if len(self.report.bad_line_examples) < _BAD_LINES_LOGGED:
            self.report.bad_line_examples.append(text)
            logger.warning("%s", text)

    def value(self, source: str, value: BadLine) -> None:
        self.report.values_said += 1
        if self.report.values_said <= _BAD_LINES_LOGGED:
            logger.warning(
                "%s:%d: dropped a value (%s: %s); the rest of the event is kept",
                source,
                value.line_number,
                value.reason.value,
                value.detail,
            )

    def measurement(self, source: str, record: Measurement) -> None:
        self.report.measurements_said += 1
        if self.report.measurements_said <= _BAD_LINES_LOGGED:
            logger.warning(
                "%s: dropped a %s measurement whose value cannot be encoded (%s); the rest is exported",
                source,
                record.name,
                record.value,
            )
