"""What the daemon's runaway actions write: the span, log event and counter attributes of an interrupt.

The action (:mod:`copilot_otel.daemon.act`) decides and acts; here is only how an attempt is recorded, under the names
of :mod:`.genai` and :mod:`.ours`, so that a backend finds it beside the detection it answers.
"""

from __future__ import annotations

from typing import Final

from opentelemetry.semconv._incubating.attributes.process_attributes import PROCESS_PID

from ..model import ids
from ..model.activity import Detection
from ..model.records import AttrValue, LogRecord, Severity, SpanEventRecord, SpanKind, SpanRecord
from . import genai, ours

INTERRUPTED_EVENT: Final = "copilot_otel.runaway.interrupted"
INTERRUPT_SPAN: Final = "copilot_otel.runaway.interrupt"
INTERRUPT_RESULT: Final = "copilot_otel.interrupt.result"
INTERRUPT_DRY_RUN: Final = "copilot_otel.interrupt.dry_run"
INTERRUPT_METHOD: Final = "copilot_otel.interrupt.method"
# The counter's attributes leave these out: one series per session or process would not stay few.
_PER_SESSION = frozenset({genai.SESSION_ID, genai.CONVERSATION, PROCESS_PID})


def interrupt(
    detection: Detection,
    session_id: str,
    *,
    result: str,
    detail: str,
    method: str | None,
    pid: int | None,
    dry_run: bool,
    now_ns: int,
) -> tuple[SpanRecord, LogRecord, dict[str, AttrValue]]:
    """An interrupt attempt: a span under the detection's (with the same facts as a span event), its log event,
    and the attributes of the ``copilot_otel.runaway.interrupted`` counter (low-cardinality ones only)."""
    attrs: dict[str, AttrValue] = {
        genai.SESSION_ID: session_id,
        genai.CONVERSATION: session_id,
        ours.RUNAWAY_REASON: detection.reason,
        INTERRUPT_RESULT: result,
        INTERRUPT_DRY_RUN: dry_run,
    }
    if pid:
        attrs[PROCESS_PID] = pid
    if method is not None:
        attrs[INTERRUPT_METHOD] = method
    span = SpanRecord(
        detection.trace_id,
        ids.span_id(session_id, INTERRUPT_SPAN, detection.reason, str(detection.source_offset)),
        detection.span_id,
        INTERRUPT_SPAN,
        SpanKind.INTERNAL,
        now_ns,
        now_ns,
        attrs,
        events=(SpanEventRecord(INTERRUPTED_EVENT, now_ns, attrs),),
        source_offset=detection.source_offset,
    )
    log = LogRecord(
        INTERRUPTED_EVENT,
        now_ns,
        Severity.WARN,
        f"runaway {detection.reason}: {result}: {detail}",
        attrs,
        detection.trace_id,
        detection.span_id,
        detection.source_offset,
    )
    return span, log, {k: v for k, v in attrs.items() if k not in _PER_SESSION}
