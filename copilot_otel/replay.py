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
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._platform import current
from .config import Config
from .content import ContentKind
from .errors import ExportError, SourceError
from .export import Signal
from .fold import FoldSettings, SessionFold
from .metrics import Aggregator
from .parse import iter_lines, parse_line
from .records import BadLine, Emission, LogRecord, Measurement, SpanRecord
from .sessions import SessionFile, read_workspace, resolve
from .telemetry import Telemetry, fold_settings, resource_attributes

logger = logging.getLogger(__name__)

# Spans are sent in batches of this many (records accumulate across small sessions).
BATCH_RECORDS = 2048
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


@dataclass
class FoldedSession:
    """Everything one session log folds into (used by ``show`` and tests)."""

    session: SessionFile
    emissions: list[Emission]
    bad_lines: list[BadLine]
    events: int
    fold: SessionFold


def new_fold(session: SessionFile, settings: FoldSettings) -> SessionFold:
    """A fold for one session, with the title from its ``workspace.yaml`` when it may be exported.

    The title summarises the conversation, so it is content: without prompt capture it is never exported and
    the file is not even read (a backfill of thousands of small sessions saves an open per session).
    """
    fold = SessionFold(session.session_id, settings)
    if settings.content.allows(ContentKind.PROMPTS):
        title = read_workspace(session.folder).get("summary")
        if title:
            fold.ctx.title = title
    return fold


def fold_events(
    session: SessionFile, fold: SessionFold, close_reason: str = "file_ended"
) -> Iterator[tuple[list[Emission], BadLine | None]]:
    """Read one session log and fold it; yields ``(emissions, bad_line)`` per line, then the closing emissions.

    Raises:
        SourceError: the file cannot be read.
    """
    try:
        blob = session.path.read_bytes()
    except OSError as exc:
        raise SourceError(f"cannot read {session.path}: {exc.strerror}") from exc
    skip = fold.settings.undecoded_types
    for line, offset, end, number in iter_lines(blob):
        event = parse_line(line, offset, end, number, skip)
        if event is None:  # read only for content that is not captured (the system prompt): not decoded
            yield [], None
            continue
        if isinstance(event, BadLine):
            yield [], event
            continue
        yield fold.feed(event), None
    # The file ends here: whatever is still open is closed as incomplete (a live daemon would wait instead).
    yield fold.close(close_reason), None


def fold_session(session: SessionFile, settings: FoldSettings) -> FoldedSession:
    """Fold a whole session log in memory."""
    emissions: list[Emission] = []
    bad: list[BadLine] = []
    events = 0
    fold = new_fold(session, settings)
    for out, bad_line in fold_events(session, fold):
        if bad_line is not None:
            bad.append(bad_line)
        else:
            events += 1
        emissions.extend(out)
    events -= 1  # the closing step is not an event
    return FoldedSession(session, emissions, bad, max(events, 0), fold)


@dataclass
class ReplayReport:
    """What a replay did; printed by the CLI and asserted by tests."""

    sessions: int = 0
    events: int = 0
    spans: int = 0
    logs: int = 0
    measurements: int = 0
    bad_lines: int = 0
    dead_lettered: int = 0
    seconds: float = 0.0
    destination: str = ""
    bad_line_examples: list[str] = field(default_factory=list)

    def merge(self, part: ReplayReport) -> None:
        """Add a worker's report (counts add up; examples are kept up to the usual limit)."""
        for name in ("sessions", "events", "spans", "logs", "measurements", "bad_lines", "dead_lettered"):
            setattr(self, name, getattr(self, name) + getattr(part, name))
        room = max(0, _BAD_LINES_LOGGED - len(self.bad_line_examples))
        self.bad_line_examples.extend(part.bad_line_examples[:room])


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
) -> ReplayReport:
    """Export every prompt of every session under ``targets``.

    Args:
        targets: Session folders, ``events.jsonl`` files, legacy flat files, session-state roots or ids.
        config: Export destination, privacy and runaway settings.
        on_progress: Called after each session.
        telemetry: Pre-built exporters (tests, ``doctor``); built from ``config`` when ``None``.

    Raises:
        SourceError: a target cannot be found or read.
        ExportError: the collector did not accept everything within ``config.max_retry_time``.
    """
    started = time.monotonic()
    sessions = resolve(targets, config.session_state)
    if not sessions:
        raise SourceError("nothing to replay: no session logs found")
    start_ns = time.time_ns()
    own_telemetry = telemetry is None
    tel = telemetry or Telemetry.from_config(config, with_metrics=False)
    report = ReplayReport(destination=tel.description)
    metrics = Aggregator()
    workers = _worker_count(config, sessions)
    try:
        if workers > 1:
            _replay_in_workers(sessions, config, workers, report, metrics, on_progress, started)
        else:
            _replay_here(sessions, config, tel, report, metrics, on_progress, started)
        if config.metrics_enabled and metrics:
            preference = (
                os.environ.get("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "").strip().lower()
            )
            delta = preference in ("delta", "lowmemory")
            body = metrics.encode(resource_attributes(config), start_ns, time.time_ns(), delta=delta)
            outcome = tel.sender.deliver_body(Signal.METRICS, body, config.max_retry_time)
            if not outcome.delivered:
                raise ExportError(
                    f"the collector did not accept the metrics ({outcome.error}); spans and log events were "
                    f"delivered (a traces-only backend such as Phoenix: set COPILOT_OTEL_METRICS=false)"
                )
    finally:
        if own_telemetry:
            tel.close()
    report.seconds = time.monotonic() - started
    return report


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
) -> None:
    """Replay sessions in this process: fold, batch, deliver on a sending thread, aggregate metrics."""
    settings = fold_settings(config)
    spans: list[SpanRecord] = []
    logs: list[LogRecord] = []
    delivery = _Delivery(tel, config.max_retry_time)

    def flush() -> None:
        nonlocal spans, logs
        if spans or logs:
            delivery.put(spans, logs)
            spans, logs = [], []

    try:
        for index, session in enumerate(sessions):
            report.sessions += 1
            events_before = report.events
            for out, bad in fold_events(session, new_fold(session, settings)):
                if bad is not None:
                    report.bad_lines += 1
                    _log_bad_line(report, session.path, bad)
                    metrics.count(
                        "copilot_otel.lines.dropped", 1, {"copilot_otel.drop.reason": bad.reason.value}
                    )
                    continue
                report.events += 1
                for record in out:
                    if isinstance(record, SpanRecord):
                        spans.append(record)
                        report.spans += 1
                    elif isinstance(record, LogRecord):
                        if config.logs_enabled:
                            logs.append(record)
                            report.logs += 1
                    elif isinstance(record, Measurement):
                        report.measurements += 1
                        metrics.record(record)
                if len(spans) + len(logs) >= BATCH_RECORDS:
                    flush()
            report.events -= 1  # the closing step of each file is not an event
            metrics.count("copilot_otel.lines.read", report.events - events_before)
            if on_progress is not None:
                on_progress(
                    Progress(
                        index + 1,
                        total or len(sessions),
                        report.events,
                        report.spans,
                        time.monotonic() - started,
                    )
                )
        flush()
        report.dead_lettered += delivery.finish()
    finally:
        delivery.stop()
    tel.record_delivery_stats(metrics)


# A history smaller than this is replayed in-process: starting worker processes costs more than it saves.
PARALLEL_MIN_BYTES = 32 * 1024 * 1024
# Sessions are handed to workers in chunks of about this many bytes (balance vs. per-chunk overhead).
CHUNK_BYTES = 8 * 1024 * 1024
_MAX_AUTO_WORKERS = 4


def _worker_count(config: Config, sessions: list[SessionFile]) -> int:
    if config.workers == 1:
        return 1
    if config.workers > 1:
        return config.workers
    total = 0
    for session in sessions:
        with contextlib.suppress(OSError):
            total += session.path.stat().st_size
        if total >= PARALLEL_MIN_BYTES:
            return min(os.cpu_count() or 1, _MAX_AUTO_WORKERS)
    return 1


def _chunks(sessions: list[SessionFile]) -> list[list[SessionFile]]:
    chunks: list[list[SessionFile]] = [[]]
    size = 0
    for session in sessions:
        with contextlib.suppress(OSError):
            size += session.path.stat().st_size
        chunks[-1].append(session)
        if size >= CHUNK_BYTES:
            chunks.append([])
            size = 0
    return [c for c in chunks if c]


_worker_state: dict[str, Any] = {}


def _init_worker(config: Config, log_level: str) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("copilot-otel: %(levelname)s: %(message)s"))
    package_logger = logging.getLogger("copilot_otel")
    package_logger.handlers[:] = [handler]
    package_logger.setLevel(log_level.upper())
    package_logger.propagate = False
    _worker_state["config"] = config
    _worker_state["telemetry"] = Telemetry.from_config(config, with_metrics=False)


def _replay_chunk(sessions: list[SessionFile]) -> tuple[ReplayReport, Aggregator]:
    """Worker side: fold, encode and send a chunk of sessions; metrics come back aggregated."""
    report, metrics = ReplayReport(), Aggregator()
    _replay_here(sessions, _worker_state["config"], _worker_state["telemetry"], report, metrics, None, 0.0)
    return report, metrics


def _replay_in_workers(
    sessions: list[SessionFile],
    config: Config,
    workers: int,
    report: ReplayReport,
    metrics: Aggregator,
    on_progress: Callable[[Progress], None] | None,
    started: float,
) -> None:
    """Sessions are independent and the fold is pure: worker processes each read, fold, encode and send their
    share (their own connection, retries and dead-letter file), and hand back counts and aggregated metrics."""
    import multiprocessing
    from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait

    # Config holds a read-only mapping proxy, which does not pickle.
    portable = dataclasses.replace(config, sources=dict(config.sources))
    # fork only on Linux and never for gRPC (the platform seam says why); spawn everywhere else.
    context = multiprocessing.get_context(current.worker_start_method(config.protocol))
    done = 0
    with ProcessPoolExecutor(
        workers, mp_context=context, initializer=_init_worker, initargs=(portable, config.log_level)
    ) as pool:
        futures = {pool.submit(_replay_chunk, chunk): len(chunk) for chunk in _chunks(sessions)}
        pending = set(futures)
        try:
            while pending:
                finished, pending = wait(pending, return_when=FIRST_EXCEPTION)
                for future in finished:
                    part, part_metrics = future.result()  # re-raises the worker's ExportError
                    report.merge(part)
                    metrics.merge(part_metrics)
                    done += futures[future]
                    if on_progress is not None:
                        on_progress(
                            Progress(
                                done, len(sessions), report.events, report.spans, time.monotonic() - started
                            )
                        )
        except BaseException:
            for future in pending:
                future.cancel()
            raise


class _Delivery:
    """Sends batches on a worker thread while the next ones are folded (one batch in flight, one waiting).

    The first batch the collector does not accept stops everything: :meth:`put` and :meth:`finish` raise
    :class:`ExportError` saying what was and was not delivered.
    """

    def __init__(self, telemetry: Telemetry, max_retry_s: float) -> None:
        self._telemetry = telemetry
        self._max_retry_s = max_retry_s
        self._queue: queue.Queue[tuple[list[SpanRecord], list[LogRecord]] | None] = queue.Queue(maxsize=1)
        self._error: str | None = None
        self._delivered_spans = 0
        self._dead = 0
        self._thread = threading.Thread(target=self._run, name="copilot-otel-replay-send", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            if self._error is not None:
                continue  # drain: nothing after a failed batch is sent
            spans, logs = item
            outcome = self._telemetry.sender.deliver(spans, logs, max_retry_s=self._max_retry_s)
            if outcome.delivered:
                self._delivered_spans += len(spans)
                self._dead += outcome.dead_lettered
            else:
                self._error = (
                    f"the collector did not accept the data ({outcome.error}); {self._delivered_spans} spans were "
                    f"delivered, the rest were not — run replay again when it is up"
                )

    def _check(self) -> None:
        if self._error is not None:
            raise ExportError(self._error)

    def put(self, spans: list[SpanRecord], logs: list[LogRecord]) -> None:
        self._check()
        self._queue.put((spans, logs))

    def finish(self) -> int:
        """Wait for everything queued; returns the number of dead-lettered records."""
        self._queue.put(None)
        self._thread.join()
        self._check()
        return self._dead

    def stop(self) -> None:
        if self._thread.is_alive():
            self._error = self._error or "replay stopped"
            self._telemetry.sender.stop.set()  # type: ignore[attr-defined]
            with contextlib.suppress(queue.Full):
                self._queue.put_nowait(None)
            self._thread.join(5.0)


def _log_bad_line(report: ReplayReport, path: Path, bad: BadLine) -> None:
    text = f"{path}:{bad.line_number}: skipped a bad line ({bad.reason.value}: {bad.detail})"
    if len(report.bad_line_examples) < _BAD_LINES_LOGGED:
        report.bad_line_examples.append(text)
        logger.warning("%s", text)
