"""The pages a user reads (README.md and docs/*.md), as the tests that hold their promises read them.

One reader of the pages and one maker of the metric catalog, so that the README's tests, the metric tests and the
stack's PromQL checks read the same table: ``docs/signals.md`` holds it between its markers, made by
:func:`metrics_markdown` from the instrument table (``copilot_otel.projections.catalog``), and a test keeps the
page equal to it. ``python -m tests.doc_pages`` writes it there after the catalog changes.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from copilot_otel.projections import actions
from copilot_otel.projections import catalog as sc

ROOT = Path(__file__).resolve().parent.parent
SIGNALS = ROOT / "docs" / "signals.md"
METRICS_START = (
    "<!-- metrics-table:start (made by tests/doc_pages.py from the catalog; a test keeps them equal) -->"
)
METRICS_END = "<!-- metrics-table:end -->"


def page(name: str) -> str:
    """A page's text, by its path from the top of the repository (``README.md``, ``docs/operations.md``)."""
    return (ROOT / name).read_text(encoding="utf-8")


def says(name: str, sentence: str) -> bool:
    """Whether the page says the sentence word for word (line breaks aside)."""
    return sentence in " ".join(page(name).split())


def section(name: str, heading: str) -> str:
    """The text under ``heading`` (a whole heading line, ``## Teams``) up to the next heading of its level or above."""
    level = heading.split(" ", 1)[0]
    body = page(name).split(f"\n{heading}\n", 1)[1]
    stop = re.search(rf"^#{{1,{len(level)}}} ", body, flags=re.MULTILINE)
    return body[: stop.start()] if stop else body


# The health metrics' attributes, as the daemon and replay record them (deliver/metrics.py, daemon/act.py).
_HEALTH_ATTRIBUTES: dict[str, tuple[str, ...]] = {
    sc.LINES_DROPPED: (sc.DROP_REASON,),
    sc.VALUES_DROPPED: (sc.DROP_REASON,),
    sc.EXPORT_SPANS: (sc.EXPORT_OUTCOME,),
    sc.RUNAWAY_INTERRUPTED: (
        sc.RUNAWAY_REASON,
        actions.INTERRUPT_RESULT,
        actions.INTERRUPT_METHOD,
        actions.INTERRUPT_DRY_RUN,
    ),
    sc.NOTIFICATIONS: (sc.NOTIFY_CHANNEL, sc.NOTIFY_OUTCOME),
}


@dataclass(frozen=True, slots=True)
class MetricRow:
    """One metric of the catalog: its OTel name, unit, kind (counter, histogram, gauge), attribute keys and the
    Prometheus series it becomes."""

    name: str
    unit: str
    kind: str
    attributes: tuple[str, ...]
    prometheus: tuple[str, ...]
    description: str


def prometheus_series(name: str, unit: str, kind: str) -> tuple[str, ...]:
    """OTel -> Prometheus naming (the Prometheus exporter, VictoriaMetrics' ``-opentelemetry.usePrometheusNaming``):
    dots to underscores, unit ``s`` -> ``_seconds``, brace units dropped, counters ``_total``, histograms
    ``_bucket``/``_sum``/``_count``."""
    base = name.replace(".", "_") + ("_seconds" if unit == "s" else "")
    if kind == "counter":
        return (base + "_total",)
    if kind == "histogram":
        return (base + "_bucket", base + "_sum", base + "_count")
    return (base,)


def catalog_rows() -> list[MetricRow]:
    """Every metric copilot-otel exports, from the code: the instruments, the live gauges, the health metrics."""
    rows = [
        MetricRow(m.name, m.unit, m.instrument.value, m.attributes, (), m.description) for m in sc.METRICS
    ]
    rows += [MetricRow(name, unit, "gauge", (), (), desc) for name, unit, desc in sc.LIVE_GAUGES]
    rows += [
        MetricRow(name, unit, kind.value if kind else "gauge", _HEALTH_ATTRIBUTES.get(name, ()), (), desc)
        for name, unit, desc, kind in sc.HEALTH_METRICS
    ]
    return [
        MetricRow(
            r.name, r.unit, r.kind, r.attributes, prometheus_series(r.name, r.unit, r.kind), r.description
        )
        for r in rows
    ]


def _prometheus_cell(series: tuple[str, ...]) -> str:
    if len(series) == 3:
        return f"`{series[0].removesuffix('_bucket')}_{{bucket,sum,count}}`"
    return f"`{series[0]}`"


def metrics_markdown() -> str:
    """The metric catalog of docs/signals.md, made from the code."""
    lines = [
        "| metric | unit | type | attributes | Prometheus series | what it is |",
        "|---|---|---|---|---|---|",
    ]
    for row in catalog_rows():
        attributes = ", ".join(f"`{a}`" for a in row.attributes) or "—"
        description = row.description.replace("|", "\\|").replace("\n", " ")
        lines.append(
            f"| `{row.name}` | {row.unit} | {row.kind} | {attributes} | {_prometheus_cell(row.prometheus)} "
            f"| {description} |"
        )
    return "\n".join(lines) + "\n"


def documented_metrics() -> dict[str, MetricRow]:
    """The metric catalog as docs/signals.md shows it, by OTel name (the Prometheus series derived from its cell)."""
    block = page("docs/signals.md").split(METRICS_START, 1)[1].split(METRICS_END, 1)[0]
    rows: dict[str, MetricRow] = {}
    for line in block.splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        name, unit, kind, attributes, prometheus, description = cells
        stated = prometheus.strip("`")
        series = (
            tuple(stated.replace("_{bucket,sum,count}", s) for s in ("_bucket", "_sum", "_count"))
            if stated.endswith("_{bucket,sum,count}")
            else (stated,)
        )
        rows[name.strip("`")] = MetricRow(
            name.strip("`"), unit, kind, tuple(re.findall(r"`([^`]+)`", attributes)), series, description
        )
    return rows


def write_signals_page() -> None:
    """Put the catalog made from the code between the markers of docs/signals.md."""
    text = SIGNALS.read_text(encoding="utf-8")
    head, rest = text.split(METRICS_START, 1)
    tail = rest.split(METRICS_END, 1)[1]
    SIGNALS.write_text(f"{head}{METRICS_START}\n{metrics_markdown()}{METRICS_END}{tail}", encoding="utf-8")


if __name__ == "__main__":
    write_signals_page()
    sys.exit(0)
