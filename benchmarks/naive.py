# ruff: noqa: RUF002 - typographic symbols (times, minus, micro) on purpose
"""The naive baseline: stdlib ``json`` + the OTel SDK tracer, the way one would first write copilot-otel.

Same input (a session-state root), same kind of receiver, roughly the same trace tree as ours::

    invoke_agent              one root per user.message (ends at the next user.message / shutdown / EOF)
    ├── turn N                assistant.turn_start … assistant.turn_end
    │   ├── chat <model>      turn start … assistant.message, with the turn's usage records
    │   └── execute_tool X    tool.execution_start … tool.execution_complete

Spans are made with ``tracer.start_span(..., start_time=...)`` / ``span.end(end_time=...)`` from the event
timestamps and go through a ``BatchSpanProcessor`` (queue raised so it does not drop) into the stock
``OTLPSpanExporter`` (HTTP/protobuf). Each span carries a similar number of attributes as ours (≈ 10–25).
It emits no log events and no metrics (ours does both by default), so the comparison favours the baseline.

Usage::

    python benchmarks/naive.py SESSION_STATE_ROOT --endpoint http://127.0.0.1:4318

prints one JSON line: events, spans created, spans exported (accepted by the exporter), dropped, seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

# Large enough for a whole 400k-event history queued at once: the baseline must never drop.
MAX_QUEUE_SIZE = 4_000_000


class CountingExporter(SpanExporter):
    """Wraps the stock exporter and counts what it accepted, so drops are visible (created − exported)."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.exported = 0
        self.failed = 0
        self._lock = threading.Lock()

    def export(self, spans: Any) -> SpanExportResult:
        result = self.inner.export(spans)
        with self._lock:
            if result is SpanExportResult.SUCCESS:
                self.exported += len(spans)
            else:
                self.failed += len(spans)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def _ns(ts: str) -> int:
    dt = datetime.fromisoformat(ts)  # Python 3.11 accepts the trailing "Z"
    return int(dt.timestamp() * 1e9)


class NaiveSession:
    """Per-session state: the open root, turns, chats and tools."""

    def __init__(self, tracer: trace.Tracer, session_id: str) -> None:
        self.tracer = tracer
        self.session_id = session_id
        self.model = "unknown"
        self.cwd = ""
        self.version = ""
        self.root: Any = None
        self.root_ctx: Any = None
        self.root_attrs: dict[str, Any] = {}
        self.turns: dict[str, tuple[Any, Any, int, dict[str, Any]]] = {}  # key → (span, ctx, start, usage)
        self.tools: dict[str, Any] = {}
        self.last_ns = 0
        self.spans = 0

    def _base(self, op: str) -> dict[str, Any]:
        return {
            "gen_ai.operation.name": op,
            "gen_ai.provider.name": "github",
            "gen_ai.conversation.id": self.session_id,
            "session.id": self.session_id,
        }

    def _start(self, name: str, ctx: Any, start: int, attrs: dict[str, Any]) -> Any:
        self.spans += 1
        return self.tracer.start_span(name, context=ctx, start_time=start, attributes=attrs)

    def _end_all(self, end: int) -> None:
        for span in self.tools.values():
            span.set_attribute("copilot_otel.incomplete", True)
            span.end(end_time=end)
        self.tools.clear()
        for span, _ctx, _start, _usage in self.turns.values():
            span.end(end_time=end)
        self.turns.clear()
        if self.root is not None:
            self.root.end(end_time=end)
            self.root = None

    def _turn_key(self, ev: dict[str, Any]) -> str:
        return f"{ev.get('agentId') or ''}/{ev['data'].get('turnId')}"

    def feed(self, ev: dict[str, Any]) -> None:
        kind = ev.get("type")
        data = ev.get("data") or {}
        now = _ns(ev["timestamp"]) if ev.get("timestamp") else self.last_ns
        self.last_ns = max(self.last_ns, now)
        if kind == "session.start":
            self.session_id = data.get("sessionId") or self.session_id
            self.model = data.get("selectedModel") or self.model
            self.cwd = (data.get("context") or {}).get("cwd") or ""
            self.version = data.get("copilotVersion") or ""
        elif kind == "session.model_change":
            self.model = data.get("newModel") or self.model
        elif kind == "user.message" and not ev.get("agentId"):
            self._end_all(now)
            attrs = self._base("invoke_agent")
            attrs.update(
                {
                    "gen_ai.request.model": self.model,
                    "copilot_otel.session.cwd": self.cwd,
                    "copilot_otel.cli.version": self.version,
                    "openinference.span.kind": "AGENT",
                    "github.copilot.interaction_id": data.get("interactionId") or "",
                    "copilot_otel.prompt.length": len(data.get("content") or ""),
                    "langfuse.trace.name": "copilot prompt",
                    "github.copilot.agent.type": "builtin",
                }
            )
            self.root = self._start("invoke_agent", None, now, attrs)
            self.root_ctx = trace.set_span_in_context(self.root)
        elif kind == "assistant.turn_start":
            if self.root is None:  # activity before any prompt: a synthetic root, as ours does
                self.root = self._start("invoke_agent", None, now, self._base("invoke_agent"))
                self.root_ctx = trace.set_span_in_context(self.root)
            attrs = self._base("turn")
            attrs.update(
                {
                    "github.copilot.turn_id": str(data.get("turnId")),
                    "openinference.span.kind": "CHAIN",
                    "github.copilot.interaction_id": data.get("interactionId") or "",
                }
            )
            span = self._start(f"turn {data.get('turnId')}", self.root_ctx, now, attrs)
            self.turns[self._turn_key(ev)] = (span, trace.set_span_in_context(span), now, {})
        elif kind == "session.usage_record":
            turn = next(reversed(self.turns.values()), None)
            if turn is not None:
                usage = data.get("usage") or data
                for key in ("inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens", "cost"):
                    value = usage.get(key)
                    if isinstance(value, (int, float)):
                        turn[3][key] = turn[3].get(key, 0) + value
                turn[3]["model"] = data.get("model") or usage.get("model") or self.model
        elif kind == "assistant.message":
            turn = self.turns.get(self._turn_key(ev)) or next(reversed(self.turns.values()), None)
            if turn is not None:
                usage = turn[3]
                model = usage.get("model") or self.model
                attrs = self._base("chat")
                attrs.update(
                    {
                        "gen_ai.request.model": model,
                        "gen_ai.response.model": model,
                        "gen_ai.response.id": data.get("apiCallId") or "",
                        "gen_ai.usage.input_tokens": int(usage.get("inputTokens", 0)),
                        "gen_ai.usage.output_tokens": int(usage.get("outputTokens", 0)),
                        "gen_ai.usage.cache_read.input_tokens": int(usage.get("cacheReadTokens", 0)),
                        "gen_ai.usage.cache_write.input_tokens": int(usage.get("cacheWriteTokens", 0)),
                        "github.copilot.cost": float(usage.get("cost", 0)),
                        "gen_ai.response.finish_reasons": (
                            "tool_calls" if data.get("toolRequests") else "stop",
                        ),
                        "openinference.span.kind": "LLM",
                        "llm.model_name": model,
                        "llm.provider": "github",
                        "llm.token_count.prompt": int(usage.get("inputTokens", 0)),
                        "llm.token_count.completion": int(usage.get("outputTokens", 0)),
                        "github.copilot.interaction_id": data.get("interactionId") or "",
                    }
                )
                self._start(f"chat {model}", turn[1], turn[2], attrs).end(end_time=max(now, turn[2]))
        elif kind == "tool.execution_start":
            turn = next(reversed(self.turns.values()), None)
            parent = turn[1] if turn is not None else self.root_ctx
            name = data.get("toolName") or "unknown"
            args = data.get("arguments")
            attrs = self._base("execute_tool")
            attrs.update(
                {
                    "gen_ai.tool.name": name,
                    "gen_ai.tool.call.id": data.get("toolCallId") or "",
                    "gen_ai.tool.type": "function",
                    "openinference.span.kind": "TOOL",
                    "tool.name": name,
                    "copilot_otel.tool.arguments_length": len(json.dumps(args)) if args else 0,
                }
            )
            self.tools[data.get("toolCallId") or ev["id"]] = self._start(
                f"execute_tool {name}", parent, now, attrs
            )
        elif kind == "tool.execution_complete":
            span = self.tools.pop(data.get("toolCallId") or "", None)
            if span is not None:
                if data.get("success") is False:
                    span.set_attribute("error.type", "tool_error")
                    span.set_status(trace.StatusCode.ERROR)
                span.end(end_time=now)
        elif kind == "assistant.turn_end":
            turn = self.turns.pop(self._turn_key(ev), None)
            if turn is not None:
                turn[0].end(end_time=now)
        elif kind in ("session.shutdown", "abort"):
            self._end_all(now)

    def close(self) -> None:
        self._end_all(self.last_ns)


def run(root: Path, endpoint: str) -> dict[str, Any]:
    """Replay every ``<root>/*/events.jsonl`` the naive way; returns the counters."""
    started = time.monotonic()
    exporter = CountingExporter(OTLPSpanExporter(endpoint=endpoint.rstrip("/") + "/v1/traces"))
    provider = TracerProvider(resource=Resource.create({"service.name": "copilot-otel-naive"}))
    processor = BatchSpanProcessor(exporter, max_queue_size=MAX_QUEUE_SIZE)
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("naive")
    events = spans = 0
    for path in sorted(root.glob("*/events.jsonl")):
        session = NaiveSession(tracer, path.parent.name)
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if not line.strip():
                    continue
                try:
                    ev = json.loads(line)
                except ValueError:
                    continue
                events += 1
                session.feed(ev)
        session.close()
        spans += session.spans
    processor.force_flush()
    provider.shutdown()
    seconds = time.monotonic() - started
    return {
        "events": events,
        "spans": spans,
        "exported": exporter.exported,
        "failed": exporter.failed,
        "dropped": spans - exporter.exported,
        "seconds": seconds,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="naive.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=Path, help="session-state root")
    parser.add_argument("--endpoint", required=True, help="OTLP/HTTP base URL, e.g. http://127.0.0.1:4318")
    args = parser.parse_args(argv)
    print(json.dumps(run(args.root, args.endpoint)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
