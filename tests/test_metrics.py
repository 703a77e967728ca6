"""Metrics and log events: every cli-generated fixture plus a runaway session through ``copilot-otel replay``
into a real OTLP receiver, and the Prometheus endpoint scraped over HTTP.

Expected values are computed from the raw logs with plain ``json`` (not our parser or fold). Metrics are
cumulative (the SDK default) and exported only when the replay ends (``OTEL_METRIC_EXPORT_INTERVAL`` is an
hour), so the last metrics request holds the totals; earlier requests repeat a running total and must never be
summed with it.
"""

from __future__ import annotations

import json
import re
import socket
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from copilot_otel.cli import main
from copilot_otel.deliver.metrics import Metrics
from copilot_otel.model.records import Instrument, Measurement
from copilot_otel.projections import catalog as sc
from tests.conftest import CLI_GENERATED
from tests.doc_pages import documented_metrics, page
from tests.otlp_receiver import OtlpReceiver
from tests.runaway import build_runaway_log

FIXTURE_DIRS = sorted(p.parent for p in CLI_GENERATED.glob("*/events.jsonl"))
RUNAWAY_TURNS = 40
RUNAWAY_SESSION = "0a0000f1-0000-4000-8000-0000000000f1"
CUMULATIVE = 2  # AggregationTemporality.CUMULATIVE
WARN, ERROR = 13, 17


# --------------------------------------------------------------------------------------------- the catalog
def _semconv_table() -> dict[str, tuple[str, str]]:
    table = {m.name: (m.unit, m.instrument.value) for m in sc.METRICS}
    table.update({name: (unit, "gauge") for name, unit, _ in sc.LIVE_GAUGES})
    table.update({name: (unit, kind.value if kind else "gauge") for name, unit, _, kind in sc.HEALTH_METRICS})
    return table


def _prometheus_base(name: str, unit: str) -> str:
    """OTel → Prometheus name translation: dots to underscores, ``s`` → ``_seconds``, brace units dropped."""
    return name.replace(".", "_") + ("_seconds" if unit == "s" else "")


def _prometheus_series(name: str, unit: str, kind: str) -> set[str]:
    base = _prometheus_base(name, unit)
    if kind == "counter":
        return {base + "_total"}
    if kind == "histogram":
        return {base + "_bucket", base + "_sum", base + "_count"}
    return {base}


def test_the_metric_catalog_matches_semconv() -> None:
    """docs/signals.md's catalog names every instrument with its unit and kind, and states the bucket bounds the
    dashboards' turn and tool-call panels rely on as the catalog has them."""
    catalog = documented_metrics()
    assert {n: (r.unit, r.kind) for n, r in catalog.items()} == _semconv_table()
    text = " ".join(page("docs/signals.md").split())
    for buckets in (sc.TURN_BUCKETS, sc.TOOL_CALL_BUCKETS):
        assert " " + ", ".join(str(b) for b in buckets) in text, buckets


def test_the_metric_catalog_prometheus_column_follows_the_translation() -> None:
    for row in documented_metrics().values():
        assert set(row.prometheus) == _prometheus_series(row.name, row.unit, row.kind), (
            row.name,
            row.prometheus,
        )


# --------------------------------------------------------------------------------------------- raw-log oracle
def _raw(folder: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for line in (folder / "events.jsonl").read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]


def _is_human_prompt(e: dict[str, Any]) -> bool:
    d = e.get("data", {})
    return (
        e["type"] == "user.message"
        and not e.get("agentId")
        and not d.get("source")
        and not d.get("isAutopilotContinuation")
        and d.get("delivery") != "steering"
    )


def _prompts(events: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The events of each human prompt: from its user.message to the next one, a resume or a shutdown."""
    prompts: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] | None = None
    for e in events:
        if _is_human_prompt(e):
            current = [e]
            prompts.append(current)
        elif e["type"] in ("session.shutdown", "session.resume"):
            current = None
        elif current is not None:
            current.append(e)
        else:
            assert not e["type"].startswith(("assistant.", "tool.")), "agent work outside a prompt"
    return prompts


def _is_main(e: dict[str, Any]) -> bool:
    return not e.get("agentId") and not e.get("data", {}).get("parentToolCallId")


def _outcome(prompt: list[dict[str, Any]]) -> str:
    if any(e["type"] == "abort" for e in prompt):
        return "aborted"
    if any(e["type"] == "session.error" and _is_main(e) for e in prompt):
        return "error"
    return "completed"


def _args_key(data: dict[str, Any]) -> tuple[str, str]:
    return data["toolName"], json.dumps(data.get("arguments"), sort_keys=True)


def _expected_detections(prompt: list[dict[str, Any]]) -> Counter[str]:
    """Default thresholds (25 turns, 5 identical calls, 5 failed calls in a row, 2M tokens/min) on raw events.

    The burn rate is only checked not to be reachable (every fixture is far below 2M tokens).
    """
    found: Counter[str] = Counter()
    turns = sum(e["type"] == "assistant.turn_start" for e in prompt)
    if turns >= 25:
        found["turns"] += 1
    streak, last = 0, None
    for e in prompt:
        if e["type"] == "tool.execution_start":
            key = _args_key(e["data"])
            streak = streak + 1 if key == last else 1
            last = key
            if streak == 5:
                found["identical_tool_calls"] += 1
    errors = 0
    for e in prompt:
        if e["type"] == "tool.execution_complete":
            errors = errors + 1 if e["data"].get("success") is False else 0
            if errors == 5:
                found["tool_errors"] += 1
    usage = [e["data"]["usage"] for e in prompt if e["type"] == "session.usage_record"]
    assert sum(u["inputTokens"] + u["outputTokens"] for u in usage) < 2_000_000  # burn rate cannot fire
    return found


@dataclass
class Expected:
    sessions: dict[str, list[dict[str, Any]]]  # session id -> raw events

    @property
    def events(self) -> list[dict[str, Any]]:
        return [e for events in self.sessions.values() for e in events]

    @property
    def prompts(self) -> list[list[dict[str, Any]]]:
        return [p for events in self.sessions.values() for p in _prompts(events)]


# --------------------------------------------------------------------------------------------- the replay
@dataclass
class Replayed:
    spans: list[dict[str, Any]]
    logs: list[dict[str, Any]]
    all_points: list[dict[str, Any]]
    points: list[dict[str, Any]]  # the final metrics export
    expected: Expected

    def metric(self, name: str) -> list[dict[str, Any]]:
        return [p for p in self.points if p["name"] == name]

    def by_attr(self, name: str, key: str) -> dict[Any, float]:
        out: dict[Any, float] = defaultdict(float)
        for p in self.metric(name):
            out[p["attributes"].get(key)] += p["value"] if p["type"] == "sum" else p["sum"]
        return dict(out)

    def roots(self) -> dict[str, list[dict[str, Any]]]:
        """Session id → its root (prompt) spans, in start order."""
        out: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for span in sorted(self.spans, key=lambda s: s["start_ns"]):
            if span["parent_span_id"] is None:
                out[span["attributes"]["gen_ai.conversation.id"]].append(span)
        return out


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replayed]:
    tmp = tmp_path_factory.mktemp("metrics")
    runaway = build_runaway_log(tmp / "session-state", RUNAWAY_TURNS, RUNAWAY_SESSION).parent
    folders = [*FIXTURE_DIRS, runaway]
    with pytest.MonkeyPatch.context() as mp, OtlpReceiver() as receiver:
        (tmp / "home").mkdir()
        mp.setenv("HOME", str(tmp / "home"))
        mp.setenv("OTEL_METRIC_EXPORT_INTERVAL", "3600000")  # one hour: only the final flush exports
        code = main(
            [
                "replay",
                *map(str, folders),
                "--endpoint",
                receiver.http_endpoint,
                "--no-progress",
                "--state-dir",
                str(tmp / "state"),
                "--max-retry-time",
                "20",
            ]
        )
        assert code == 0
        requests = receiver.request_log("metrics")
        assert requests and all(r.outcome == "accepted" for r in requests), requests
        all_points = receiver.metrics()
        final = all_points[len(all_points) - requests[-1].item_count :]
        sessions = {_raw(f)[0]["data"]["sessionId"]: _raw(f) for f in folders}
        yield Replayed(receiver.spans(), receiver.logs(), all_points, final, Expected(sessions))


# --------------------------------------------------------------------------------------------- shape
def test_every_metric_has_the_catalog_name_unit_and_instrument(replayed: Replayed) -> None:
    table = _semconv_table()
    specs = sc.METRICS_BY_NAME
    seen = {p["name"] for p in replayed.points}
    assert seen <= set(table)
    # everything the fixtures exercise is there
    assert seen >= {
        "gen_ai.client.operation.duration",
        "gen_ai.client.token.usage",
        "gen_ai.invoke_agent.duration",
        "gen_ai.execute_tool.duration",
        "github.copilot.tool.call.count",
        "github.copilot.agent.turn.count",
        "github.copilot.code.lines_added",
        "copilot_otel.prompt.count",
        "copilot_otel.prompt.tool_calls",
        "copilot_otel.session.count",
        "copilot_otel.errors",
        "copilot_otel.runaway.detections",
        "copilot_otel.premium_requests",
        "copilot_otel.lines.read",
    }
    for p in replayed.all_points:
        unit, kind = table[p["name"]]
        assert p["unit"] == unit, p["name"]
        assert p["type"] == {"counter": "sum", "histogram": "histogram", "gauge": "gauge"}[kind], p["name"]
        if kind == "counter":
            assert p["is_monotonic"] is True
        if kind != "gauge":
            assert p["temporality"] == CUMULATIVE
        if kind == "histogram" and specs[p["name"]].buckets:
            assert p["explicit_bounds"] == [float(b) for b in specs[p["name"]].buckets or ()], p["name"]
        if p["name"] in specs:
            assert set(p["attributes"]) <= set(specs[p["name"]].attributes), (p["name"], p["attributes"])
        assert p["resource"]["service.name"] == replayed.spans[0]["resource"]["service.name"]


def test_metric_points_have_low_cardinality_attributes(replayed: Replayed) -> None:
    session_ids = set(replayed.expected.sessions)
    prompt_texts = {p[0]["data"]["content"] for p in replayed.expected.prompts}
    assert len(session_ids) == len(FIXTURE_DIRS) + 1
    for p in replayed.all_points:
        assert not {sc.SESSION_ID, sc.CONVERSATION, "gen_ai.conversation.id"} & set(p["attributes"]), p
        for value in p["attributes"].values():
            assert value not in session_ids
            assert not any(
                text in str(value) or str(value) in text for text in prompt_texts if len(str(value)) > 12
            )
    # a bounded number of series: one per attribute combination, far fewer than prompts x tools
    assert len(replayed.points) < 200


# --------------------------------------------------------------------------------------------- values
def test_turn_count_histogram_counts_main_agent_turns_per_prompt(replayed: Replayed) -> None:
    prompts = replayed.expected.prompts
    turns = [sum(e["type"] == "assistant.turn_start" and _is_main(e) for e in p) for p in prompts]
    assert RUNAWAY_TURNS + 1 in turns
    (point,) = replayed.metric("github.copilot.agent.turn.count")
    assert point["attributes"] == {sc.OPERATION: "invoke_agent", "copilot_otel.agent": "copilot"}
    assert point["count"] == len(prompts) == len(FIXTURE_DIRS) + 2  # 'resumed' has two prompts
    assert point["sum"] == sum(turns)
    bounds = point["explicit_bounds"]
    assert bounds == [float(b) for b in sc.TURN_BUCKETS]
    expected_buckets = [0] * (len(bounds) + 1)
    for n in turns:
        expected_buckets[next((i for i, b in enumerate(bounds) if n <= b), len(bounds))] += 1
    assert point["bucket_counts"] == expected_buckets
    # the 41-turn runaway prompt lands in (25, 50]
    assert point["bucket_counts"][bounds.index(50.0)] == 1
    assert (point["min"], point["max"]) == (min(turns), max(turns))


def test_token_usage_sums_equal_the_usage_records(replayed: Replayed) -> None:
    usage = [e["data"]["usage"] for e in replayed.expected.events if e["type"] == "session.usage_record"]
    sums = replayed.by_attr("gen_ai.client.token.usage", sc.TOKEN_TYPE)
    assert sums == {
        "input": sum(u["inputTokens"] for u in usage),
        "output": sum(u["outputTokens"] for u in usage),
    }
    counts: Counter[str] = Counter()
    for p in replayed.metric("gen_ai.client.token.usage"):
        counts[p["attributes"][sc.TOKEN_TYPE]] += p["count"]
    assert counts == {"input": len(usage), "output": len(usage)}
    by_model: dict[str, float] = defaultdict(float)
    for p in replayed.metric("gen_ai.client.inference.usage.input_tokens"):
        by_model[p["attributes"][sc.REQUEST_MODEL]] += p["value"]
    expected_by_model: dict[str, float] = defaultdict(float)
    for u in usage:
        expected_by_model[u["model"]] += u["inputTokens"]
    assert by_model == expected_by_model


def test_tool_call_count_by_tool_and_success_equals_the_log(replayed: Replayed) -> None:
    expected: Counter[tuple[str, str]] = Counter()
    for events in replayed.expected.sessions.values():
        completions = {
            e["data"]["toolCallId"]: e["data"] for e in events if e["type"] == "tool.execution_complete"
        }
        for e in events:
            if e["type"] == "tool.execution_start":
                done = completions.get(e["data"]["toolCallId"])
                # a call that never completed (aborted) counts as failed, as the CLI's own export counts it
                ok = done is not None and done.get("success") is not False
                expected[(e["data"]["toolName"], "true" if ok else "false")] += 1
    got = Counter(
        {
            (p["attributes"][sc.TOOL_NAME], p["attributes"]["success"]): int(p["value"])
            for p in replayed.metric("github.copilot.tool.call.count")
        }
    )
    assert got == expected
    assert expected[("bash", "true")] >= RUNAWAY_TURNS
    (per_prompt,) = replayed.metric("copilot_otel.prompt.tool_calls")
    assert per_prompt["sum"] == sum(expected.values())


def test_prompt_count_by_outcome(replayed: Replayed) -> None:
    expected = Counter(_outcome(p) for p in replayed.expected.prompts)
    assert expected == {"completed": len(FIXTURE_DIRS) - 1, "aborted": 2, "error": 1}
    assert replayed.by_attr("copilot_otel.prompt.count", sc.PROMPT_OUTCOME) == expected


def test_session_count_and_errors(replayed: Replayed) -> None:
    kinds = Counter(e["type"] for e in replayed.expected.events)
    assert replayed.by_attr("copilot_otel.session.count", sc.SESSION_EVENT) == {
        "started": kinds["session.start"],
        "resumed": kinds["session.resume"],
        "shutdown": kinds["session.shutdown"],
    }
    errors = Counter(e["data"]["errorType"] for e in replayed.expected.events if e["type"] == "session.error")
    errors["aborted"] = kinds["abort"]
    assert replayed.by_attr("copilot_otel.errors", sc.ERROR_TYPE) == errors


def test_runaway_detections_by_reason(replayed: Replayed) -> None:
    expected: Counter[str] = Counter()
    for prompt in replayed.expected.prompts:
        expected.update(_expected_detections(prompt))
    assert expected == {"turns": 1, "identical_tool_calls": 1}
    assert replayed.by_attr("copilot_otel.runaway.detections", sc.RUNAWAY_REASON) == expected


def test_lines_read_counts_each_line_once(replayed: Replayed) -> None:
    """Replay adds each session's lines once (not the running total of all sessions so far)."""
    lines = len(replayed.expected.events)
    (point,) = replayed.metric("copilot_otel.lines.read")
    assert point["value"] == lines


def test_lines_added_counts_a_resumed_session_once(replayed: Replayed) -> None:
    """``session.shutdown.codeChanges`` is a running total of the whole session.

    The ``resumed`` fixture's second shutdown repeats the first run's line (its second run only used
    bash; the CLI's own export in ``resumed/_capture/otel.jsonl`` reports
    ``github.copilot.code.lines_added`` = 1, once).
    """
    expected = 0
    for events in replayed.expected.sessions.values():
        shutdowns = [e["data"] for e in events if e["type"] == "session.shutdown"]
        expected += shutdowns[-1].get("codeChanges", {}).get("linesAdded", 0) if shutdowns else 0
    (point,) = replayed.metric("github.copilot.code.lines_added")
    assert point["value"] == expected


def test_premium_requests_equal_the_sessions_own_accounting(replayed: Replayed) -> None:
    """Only user-initiated calls are premium requests.

    GitHub's billing docs: "for agentic features, only the prompts you send count as premium requests". Each
    capi-* session makes 4-5 calls of ``cost`` 1.0 and the CLI's own ``session.shutdown.totalPremiumRequests``
    (``accountingSnapshot.totalPremiumRequestCost``) is 1.
    """
    expected: dict[str, float] = defaultdict(float)
    for events in replayed.expected.sessions.values():
        for e in events:
            u = e["data"].get("usage", {}) if e["type"] == "session.usage_record" else {}
            if u.get("cost") and u.get("initiator") == "user":
                expected[u["model"]] += u["cost"]
    session_totals = sum(
        next(e["data"]["totalPremiumRequests"] for e in reversed(events) if e["type"] == "session.shutdown")
        for events in replayed.expected.sessions.values()
    )
    assert sum(expected.values()) == session_totals == 3
    assert replayed.by_attr("copilot_otel.premium_requests", sc.REQUEST_MODEL) == expected


# --------------------------------------------------------------------------------------------- log events
def test_session_and_prompt_log_events(replayed: Replayed) -> None:
    by_name = Counter(log["event_name"] for log in replayed.logs)
    kinds = Counter(e["type"] for e in replayed.expected.events)
    prompts = replayed.expected.prompts
    assert by_name["copilot_otel.session.started"] == kinds["session.start"]
    assert by_name["copilot_otel.session.resumed"] == kinds["session.resume"]
    assert by_name["copilot_otel.session.shutdown"] == kinds["session.shutdown"]
    assert by_name["copilot_otel.prompt.started"] == by_name["copilot_otel.prompt.ended"] == len(prompts)
    roots = replayed.roots()
    root_ids = {(s["trace_id"], s["span_id"]) for spans in roots.values() for s in spans}
    assert len(root_ids) == len(prompts)
    for name in ("copilot_otel.prompt.started", "copilot_otel.prompt.ended"):
        logs = [log for log in replayed.logs if log["event_name"] == name]
        assert {(log["trace_id"], log["span_id"]) for log in logs} == root_ids
    ended = [log for log in replayed.logs if log["event_name"] == "copilot_otel.prompt.ended"]
    assert Counter(log["attributes"][sc.PROMPT_OUTCOME] for log in ended) == Counter(
        _outcome(p) for p in prompts
    )
    for log in ended:
        outcome = log["attributes"][sc.PROMPT_OUTCOME]
        assert log["severity_number"] == (WARN if outcome in ("error", "aborted") else 9)
    for log in replayed.logs:
        if log["event_name"].startswith("copilot_otel.session."):
            assert log["attributes"][sc.SESSION_ID] in replayed.expected.sessions


def test_model_error_is_an_error_log_on_its_prompt(replayed: Replayed) -> None:
    errors = [log for log in replayed.logs if log["event_name"] == "copilot_otel.session.error"]
    session_id = _raw(CLI_GENERATED / "model-error")[0]["data"]["sessionId"]
    (event,) = [e for e in replayed.expected.sessions[session_id] if e["type"] == "session.error"]
    assert sum(e["type"] == "session.error" for e in replayed.expected.events) == 1
    (log,) = errors
    assert log["attributes"][sc.SESSION_ID] == session_id
    assert log["severity_number"] == ERROR
    assert log["attributes"][sc.ERROR_TYPE] == event["data"]["errorType"]
    assert event["data"]["message"].startswith(log["attributes"]["exception.message"][:80])
    (root,) = replayed.roots()[session_id]
    assert (log["trace_id"], log["span_id"]) == (root["trace_id"], root["span_id"])
    assert root["status_code"] == 2


def test_aborts_are_warn_logs_on_their_prompt(replayed: Replayed) -> None:
    aborts = [log for log in replayed.logs if log["event_name"] == "copilot_otel.abort"]
    raw = {
        sid: e for sid, events in replayed.expected.sessions.items() for e in events if e["type"] == "abort"
    }
    aborted_id = _raw(CLI_GENERATED / "aborted")[0]["data"]["sessionId"]
    assert aborted_id in raw
    assert len(aborts) == len(raw) == 2
    roots = replayed.roots()
    for log in aborts:
        assert log["severity_number"] == WARN
        session_id = log["attributes"][sc.SESSION_ID]
        (root,) = roots[session_id]
        assert (log["trace_id"], log["span_id"]) == (root["trace_id"], root["span_id"])
        assert log["attributes"]["github.copilot.abort_reason"] == raw[session_id]["data"]["reason"]


def test_runaway_detections_are_warn_logs_on_the_root_span(replayed: Replayed) -> None:
    detections = [log for log in replayed.logs if log["event_name"] == "copilot_otel.runaway.detected"]
    assert sorted(log["attributes"][sc.RUNAWAY_REASON] for log in detections) == [
        "identical_tool_calls",
        "turns",
    ]
    (root,) = replayed.roots()[RUNAWAY_SESSION]
    events = [e for e in root["events"] if e["name"] == "copilot_otel.runaway.detected"]
    assert sorted(e["attributes"][sc.RUNAWAY_REASON] for e in events) == ["identical_tool_calls", "turns"]
    for log in detections:
        assert log["severity_number"] == WARN
        assert (log["trace_id"], log["span_id"]) == (root["trace_id"], root["span_id"])
        assert log["attributes"][sc.SESSION_ID] == RUNAWAY_SESSION
        # emitted while the prompt ran: before the root span (prompt) ended
        assert root["start_ns"] < log["time_ns"] < root["end_ns"]
    turns = next(log for log in detections if log["attributes"][sc.RUNAWAY_REASON] == "turns")
    assert turns["attributes"]["copilot_otel.prompt.turns_total"] == 25


# --------------------------------------------------------------------------------------------- Prometheus
def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text: str = response.read().decode()
        return text


def _series(body: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    for line in body.splitlines():
        if line and not line.startswith("#"):
            out[re.split(r"[{ ]", line, maxsplit=1)[0]].append(line)
    return out


@pytest.fixture
def prometheus_metrics() -> Iterator[Metrics]:
    metrics = Metrics(
        {"service.name": "copilot-otel-test"}, exporter=None, interval_s=60, prometheus=("127.0.0.1", 0)
    )
    try:
        yield metrics
    finally:
        metrics.shutdown()


def test_prometheus_endpoint_serves_the_catalog_names(prometheus_metrics: Metrics) -> None:
    m = prometheus_metrics
    assert m.prometheus_port
    for spec in sc.METRICS:
        m.record(Measurement(spec.name, 3, {key: "x" for key in spec.attributes}, spec.instrument))
    for name, _, _ in sc.LIVE_GAUGES:
        m.set_gauge(name, lambda: [(2.0, {})])
    for name, _, _, kind in sc.HEALTH_METRICS:
        if kind is None:
            m.set_gauge(name, lambda: [(2.0, {})])
        else:
            m.count(name, 2)
    assert m.prometheus_port is not None
    m.drain()  # counter increments are summed locally until drained (the daemon drains every loop pass)
    series = _series(_scrape(m.prometheus_port))
    expected: set[str] = set()
    for metric, (unit, instrument) in _semconv_table().items():
        expected |= _prometheus_series(metric, unit, instrument)
    assert expected <= set(series), sorted(expected - set(series))
    for row in documented_metrics().values():
        assert {s for s in row.prometheus if s.endswith("_total")} <= set(series), row.name
    assert "github_copilot_agent_turn_count_bucket" in series
    assert "copilot_otel_prompt_count_total" in series
    assert "gen_ai_client_operation_duration_seconds_bucket" in series


def test_prometheus_turn_histogram_buckets_and_counters(prometheus_metrics: Metrics) -> None:
    m = prometheus_metrics
    for turns in (3, 41, 41, 7):
        m.record(
            Measurement(
                "github.copilot.agent.turn.count", turns, {sc.OPERATION: "invoke_agent"}, Instrument.HISTOGRAM
            )
        )
    for outcome in ("completed", "completed", "aborted"):
        m.record(Measurement("copilot_otel.prompt.count", 1, {sc.PROMPT_OUTCOME: outcome}))
    m.record(Measurement("copilot_otel.runaway.detections", 1, {sc.RUNAWAY_REASON: "turns"}))
    assert m.prometheus_port is not None
    m.drain()  # counter increments are summed locally until drained (the daemon drains every loop pass)
    series = _series(_scrape(m.prometheus_port))

    def value(name: str, **labels: str) -> float:
        for line in series[name]:
            found = dict(re.findall(r'(\w+)="([^"]*)"', line))
            if all(
                k in found and (found[k] == v or (k == "le" and float(found[k]) == float(v)))
                for k, v in labels.items()
            ):
                return float(line.rsplit(" ", 1)[1])
        raise AssertionError(f"no {name} {labels}")

    assert value("github_copilot_agent_turn_count_bucket", le="0") == 0
    assert value("github_copilot_agent_turn_count_bucket", le="5") == 1
    assert value("github_copilot_agent_turn_count_bucket", le="25") == 2
    assert value("github_copilot_agent_turn_count_bucket", le="50") == 4
    assert value("github_copilot_agent_turn_count_bucket", le="+Inf") == 4
    assert value("github_copilot_agent_turn_count_count") == 4
    assert value("github_copilot_agent_turn_count_sum") == 92
    assert value("copilot_otel_prompt_count_total", copilot_otel_prompt_outcome="completed") == 2
    assert value("copilot_otel_prompt_count_total", copilot_otel_prompt_outcome="aborted") == 1
    assert value("copilot_otel_runaway_detections_total", copilot_otel_runaway_reason="turns") == 1


def test_prometheus_port_is_released_on_shutdown() -> None:
    metrics = Metrics(
        {"service.name": "copilot-otel-test"}, exporter=None, interval_s=60, prometheus=("127.0.0.1", 0)
    )
    port = metrics.prometheus_port
    assert port
    _scrape(port)
    metrics.shutdown()
    with socket.socket() as probe:
        probe.settimeout(1.0)
        with pytest.raises(ConnectionRefusedError):
            probe.connect(("127.0.0.1", port))


@pytest.mark.parametrize(
    ("preference", "expected"), [("", 2), ("delta", 1), ("lowmemory", 1), ("cumulative", 2)]
)
def test_replay_honours_the_temporality_preference(
    receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch, preference: str, expected: int
) -> None:
    if preference:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", preference)
    assert (
        main(
            [
                "replay",
                str(CLI_GENERATED / "multi-tool"),
                "--endpoint",
                receiver.http_endpoint,
                "--no-progress",
            ]
        )
        == 0
    )
    points = [p for p in receiver.metrics() if p["type"] in ("sum", "histogram")]
    assert points and {p["temporality"] for p in points} == {expected}  # 1 = DELTA, 2 = CUMULATIVE
