"""Per-stage cost of the replay pipeline, measured in-process without a profiler (no profiler overhead).

    python benchmarks/stages.py [--events N | --history DIR]

Times each stage of ``replay`` separately over the same history — read + split, parse, fold, metrics
recording (the SDK instruments, no export), span encoding, log encoding — and prints µs per item and the
share of the total. Network time is not included (see ``run.py`` for end-to-end figures).
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, MetricsData

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import history  # noqa: E402


class NullMetricExporter(MetricExporter):
    """Accepts everything: the SDK aggregates exactly as in replay, nothing is sent."""

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        return None


def measure(root: Path) -> list[tuple[str, float, int, str]]:
    from copilot_otel.deliver.batcher import BATCH_RECORDS
    from copilot_otel.deliver.export import encode_logs, encode_spans, make_resource
    from copilot_otel.deliver.metrics import Aggregator
    from copilot_otel.deliver.telemetry import resource_attributes
    from copilot_otel.model.records import BadLine, Emission, LogRecord, Measurement, SpanRecord
    from copilot_otel.pipeline import FoldSettings, new_fold, split_lines
    from copilot_otel.settings.config import load_config
    from copilot_otel.sources.copilot.parse import parse_line
    from copilot_otel.sources.sessions import scan_root
    from copilot_otel.sources.tail import Line

    sessions = scan_root(root)
    config = load_config({"command": "replay"}, env={"HOME": os.environ["HOME"]})
    resource_attrs = resource_attributes(config)
    metrics = Aggregator()  # what replay records into
    resource = make_resource(resource_attrs)
    settings = FoldSettings()
    clock = time.perf_counter
    t = dict.fromkeys(("read", "split", "parse", "new_fold", "fold", "metrics", "spans", "logs"), 0.0)
    n = dict.fromkeys(("lines", "measurements", "spans", "logs", "span_bytes"), 0)
    spans: list[SpanRecord] = []
    logs: list[LogRecord] = []

    def flush() -> None:
        # As replay does: a batch of records is encoded once it holds BATCH_RECORDS, at most that many a request.
        t0 = clock()
        for start in range(0, len(spans), BATCH_RECORDS):
            n["span_bytes"] += len(encode_spans(spans[start : start + BATCH_RECORDS], resource))
        t1 = clock()
        for start in range(0, len(logs), BATCH_RECORDS):
            encode_logs(logs[start : start + BATCH_RECORDS], resource)
        t2 = clock()
        t["spans"] += t1 - t0
        t["logs"] += t2 - t1
        n["spans"] += len(spans)
        n["logs"] += len(logs)
        spans.clear()
        logs.clear()

    # Streamed per session like replay (keeping the whole history alive would make the GC dominate).
    for session in sessions:
        t0 = clock()
        blob = session.path.read_bytes()
        t1 = clock()
        items = [
            (item.data, item.start, item.end, i)
            for i, item in enumerate(split_lines(blob), 1)
            if isinstance(item, Line)
        ]
        t2 = clock()
        events = [parse_line(*item) for item in items]
        t3 = clock()
        fold = new_fold(session, settings)  # the pipeline; its events are fed already parsed
        t4 = clock()
        emissions: list[Emission] = []
        for event in events:
            if event is not None and not isinstance(event, BadLine):
                emissions.extend(fold.feed_event(event).emissions)
        emissions.extend(fold.close("file_ended").emissions)
        t5 = clock()
        for e in emissions:
            if isinstance(e, Measurement):
                metrics.record(e)
                n["measurements"] += 1
        t6 = clock()
        spans.extend(e for e in emissions if isinstance(e, SpanRecord))
        logs.extend(e for e in emissions if isinstance(e, LogRecord))
        if len(spans) + len(logs) >= BATCH_RECORDS:
            flush()
        for key, dt in zip(
            ("read", "split", "parse", "new_fold", "fold", "metrics"),
            (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5),
            strict=True,
        ):
            t[key] += dt
        n["lines"] += len(items)
    flush()
    out = [
        ("read files", t["read"], len(sessions), "session"),
        ("split lines (split_lines)", t["split"], n["lines"], "line"),
        ("parse_line (orjson + Event)", t["parse"], n["lines"], "line"),
        ("new_fold (incl. workspace.yaml)", t["new_fold"], len(sessions), "session"),
        ("fold.feed + close", t["fold"], n["lines"], "line"),
        ("Aggregator.record (replay metrics)", t["metrics"], n["measurements"], "measurement"),
        (
            f"encode_spans ({BATCH_RECORDS}/batch, {n['span_bytes'] / max(n['spans'], 1):.0f} B/span)",
            t["spans"],
            n["spans"],
            "span",
        ),
        (f"encode_logs ({BATCH_RECORDS}/batch)", t["logs"], n["logs"], "log"),
    ]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="stages.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--history", type=Path, default=None)
    parser.add_argument(
        "--gc",
        choices=["on", "off", "freeze"],
        default="on",
        help="garbage collector during the run: on (default), off, or gc.freeze() first",
    )
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="copilot-otel-stages-"))
    os.environ["HOME"] = str(work / "home")
    for name in list(os.environ):
        if name.startswith(("OTEL_", "COPILOT_")):
            del os.environ[name]
    try:
        root = args.history
        if root is None:
            root = work / "history"
            history.generate(root, args.events)
        if args.gc == "off":
            gc.disable()
        elif args.gc == "freeze":
            gc.collect()
            gc.freeze()
        rows = measure(root)
        gc.enable()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    total = sum(r[1] for r in rows)
    events = next(r[2] for r in rows if r[3] == "line")
    print("| stage | seconds | items | µs/item | share |\n|---|---|---|---|---|")
    for name, seconds, count, unit in rows:
        print(
            f"| {name} | {seconds:.2f} | {count:,} {unit}s | {seconds / max(count, 1) * 1e6:.1f} | "
            f"{seconds / total:.0%} |"
        )
    print(
        f"| **total (no network)** | {total:.2f} | {events:,} events | {total / events * 1e6:.1f} | "
        f"→ {events / total:,.0f} events/s |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
