"""Dashboards, alert rules and traces proven against real backends fed by the real ``copilot-otel``.

Metrics (one module-scoped run, :func:`metrics_run`):

* VictoriaMetrics 1.112 takes OTLP/HTTP metric pushes (``-opentelemetry.usePrometheusNaming``), fed by
  ``copilot-otel replay`` of every fixture plus a 40-turn runaway and an 8-failure tool-error session, and by
  a live ``copilot-otel run`` daemon (``OTEL_METRIC_EXPORT_INTERVAL=1000``) that backfills the same fixtures
  and then follows the runaway and tool-error sessions while the test appends them line by line, so two
  prompts are *in progress* (live gauges) before they finish; two torn lines are dropped on the way. Traces
  go to a real OTLP receiver (:mod:`tests.otlp_receiver`), which is down while the prompts run, so spans
  pile up (backlog) and the daemon retries, then comes back and gets everything.
* vmalert evaluates the shipped rule file against VictoriaMetrics (writing the recording rules back), and a
  real Prometheus 2.42 scrapes the same daemon's ``--prometheus-port`` every second and evaluates the same
  rules. Both get a copy of the rule file whose group ``interval`` is 1 s (nothing else changed), so alerts
  move within the test; ``for: 1m`` alerts are therefore seen *pending*, ``for: 0`` ones *firing*.
* Then every PromQL query we ship (each dashboard panel target, each recording/alerting rule, each
  Grafana-managed alert query, each datasource traces-to-metrics query) runs against VictoriaMetrics and
  must return data; the few that cannot are listed in :data:`NO_DATA` with the reason, and must still be
  valid and (so the list cannot rot) still return nothing. The same queries run against Prometheus (the
  scrape path) with the same expectation, plus :data:`PROMETHEUS_NO_DATA`. The runaway alert expressions
  are checked per feed (``test.feed`` resource attribute = ``test_feed`` label): live, and after the end.

Traces: Arize Phoenix 20.26.1 (in-memory SQLite) receives replays over OTLP/HTTP and OTLP/gRPC; the span
tree is read back over its REST API, and headless Chromium (playwright-core) screenshots one trace.

Binaries: ``VICTORIA_METRICS_BIN``, ``VMALERT_BIN``, ``PROMETHEUS_BIN``, ``PHOENIX_BIN``, ``NODE_BIN``,
``CHROMIUM_BIN``, ``PLAYWRIGHT_CORE_DIR`` or where ``.ci/install-stack.sh --all`` puts them. A missing one
skips its tests, except under ``CI=true``, where it fails. Artifacts (query report, screenshot) go to
``artifacts/`` (git-ignored); ``UPDATE_DOCS_SCREENSHOT=1`` also copies the screenshot to ``docs/``.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import CLI_GENERATED, all_fixture_logs
from tests.otlp_receiver import OtlpReceiver
from tests.runaway import build_runaway_log, build_tool_error_log, iter_runaway_lines, iter_tool_error_lines
from tests.stack_data import (
    CACHE,
    DEB13_BIN,
    ROOT,
    PromAPI,
    Query,
    QueryError,
    Server,
    append_lines,
    copilot_otel,
    copy_as_session_state,
    fast_rules,
    find_binary,
    free_port,
    http,
    missing,
    ok,
    phoenix_project_id,
    phoenix_spans,
    session_id_of,
    shipped_queries,
    split_before_final_turn,
    stored_since,
    wait_for,
    with_matcher,
)
from tests.test_stack_static import shipped_promql

pytestmark = pytest.mark.stack

ARTIFACTS = ROOT / "artifacts"
RUNAWAY_TURNS = 40
TOOL_ERRORS = 8
DAEMON_RUNAWAY_SID = "0a0000f1-0000-4000-8000-00000000d001"
DAEMON_ERRORS_SID = "0a0000f2-0000-4000-8000-00000000d002"
REPLAY_RUNAWAY_SID = "0a0000f1-0000-4000-8000-00000000e001"
REPLAY_ERRORS_SID = "0a0000f2-0000-4000-8000-00000000e002"
DAEMON = 'test_feed="daemon"'  # resource attribute test.feed, a label on every OTLP-pushed series
REPLAY = 'test_feed="replay"'
LIVE_ALERTS = {"CopilotRunawayLivePrompt", "CopilotIdenticalToolCallStreak", "CopilotToolErrorStreak"}

# Queries that return nothing on these fixtures, and why. Each must still be accepted by the backend and
# must still be empty: when one gains data (a fixture or a fix), the test says to remove it from here.
_NO_CACHE_TOKENS = (
    "no fixture has per-call cache tokens: the CLI fixtures' fake model server reports none, and the public "
    "logs without usage records carry cacheReadTokens only in session.shutdown totals, which the fold does "
    "not turn into token metrics"
)
_NO_LINES_REMOVED = (
    "copilot_otel_code_lines_removed_total: no fixture removes lines (every codeChanges.linesRemoved is 0)"
)
_HEALTHY = "healthy run: exports never stall for 10 minutes"
NO_DATA: dict[str, str] = {
    "copilot-overview.json: Inference token usage [C]": _NO_CACHE_TOKENS,
    "copilot-overview.json: Inference token usage [D]": _NO_CACHE_TOKENS,
    "copilot-overview.json: Lines changed [B]": _NO_LINES_REMOVED,
    "copilot-overview.json: Lines removed [A]": _NO_LINES_REMOVED,
    "rules: CopilotOtelNotExporting": _HEALTHY,
    "grafana alert: CopilotOtelNotExporting": _HEALTHY,
}
# Left-hand sides of `X or vector(0)` queries that cannot have data (same rules as NO_DATA).
NO_DATA_LHS: dict[str, str] = {}
# For NO_DATA alerts: the expression without its threshold must have data (the inputs are there).
WITNESSES: dict[str, str] = {
    "rules: CopilotOtelNotExporting": "time() - copilot_otel_export_last_success_seconds",
    "grafana alert: CopilotOtelNotExporting": "copilot_otel_export_backlog",
}
# Prometheus scraping the daemon (the pull path) must return data for every query VictoriaMetrics
# does, except these.
_SERVICE_NAME = (
    "filters on service_name, a series label only with OTLP push (promote_resource_attributes); a scrape "
    "puts resource attributes on target_info"
)
PROMETHEUS_NO_DATA: dict[str, str] = {
    "rules: CopilotTokenBurnRate": (
        "Prometheus' rate() spreads a series younger than the 15m window over the whole window "
        "(VictoriaMetrics divides by the time actually covered): the test's burst stays under 3e6 tokens/h"
    ),
    "datasource tempo: Tool calls by outcome": _SERVICE_NAME,
    "datasource tempo: Tool latency p95": _SERVICE_NAME,
    "datasource tempo: Turns per prompt p95": _SERVICE_NAME,
}


def _env(home: Path, feed: str, **extra: str) -> dict[str, str]:
    """The environment of a copilot-otel child: scrubbed of OTEL_*/COPILOT_OTEL_*, its own HOME."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "COPILOT_OTEL_", "XDG_"))}
    env.pop("COPILOT_HOME", None)
    home.mkdir(parents=True, exist_ok=True)
    env.update(HOME=str(home), OTEL_RESOURCE_ATTRIBUTES=f"test.feed={feed}", **extra)
    return env


def _alert_states(url: str) -> dict[str, str]:
    """alertname -> "firing" or "pending" from ``/api/v1/alerts`` (Prometheus, vmalert)."""
    status, body = http(f"{url}/api/v1/alerts")
    assert status == 200, body
    states: dict[str, str] = {}
    for alert in body["data"]["alerts"]:
        name = alert["labels"]["alertname"] if "labels" in alert else alert["name"]
        if states.get(name) != "firing":
            states[name] = alert["state"]
    return states


def _firing(url: str, name: str) -> dict[str, str] | None:
    states = _alert_states(url)
    return states if states.get(name) == "firing" else None


@dataclass
class MetricsRun:
    vm: PromAPI
    prom: PromAPI
    vmalert_url: str
    prometheus_url: str
    t_begin: float = 0.0
    t_live: float = 0.0
    t_end: float = 0.0
    replay: subprocess.CompletedProcess[str] | None = None
    replay_spans: int = 0
    backfill_lines: int = 0
    torn_lines: int = 0
    live: dict[str, dict[str, float | None]] = field(default_factory=dict)
    live_alerts: dict[str, dict[str, str]] = field(default_factory=dict)
    end_alerts: dict[str, dict[str, str]] = field(default_factory=dict)
    daemon_log: Path | None = None
    retries_logged: bool = False
    backlog_live: float | None = None


LIVE_GAUGES = (
    "copilot_otel_live_prompts",
    "copilot_otel_live_max_turns",
    "copilot_otel_live_max_tool_calls",
    "copilot_otel_live_max_duration_seconds",
    "copilot_otel_live_max_identical_tool_calls",
    "copilot_otel_live_max_tool_error_streak",
)


@pytest.fixture(scope="module")
def metrics_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MetricsRun]:
    vm_bin = find_binary("victoria-metrics", "VICTORIA_METRICS_BIN", DEB13_BIN / "victoria-metrics")
    vmalert_bin = find_binary("vmalert", "VMALERT_BIN", DEB13_BIN / "vmalert")
    prom_bin = find_binary("prometheus", "PROMETHEUS_BIN")
    tmp = tmp_path_factory.mktemp("metrics")
    servers: list[Server] = []
    receiver = OtlpReceiver().start()
    try:
        # --- backends -------------------------------------------------------------------------------------
        vm_url = f"http://127.0.0.1:{free_port()}"
        vm = Server(
            "victoria-metrics",
            [
                vm_bin,
                f"-httpListenAddr={vm_url[7:]}",
                f"-storageDataPath={tmp / 'vm-data'}",
                "-retentionPeriod=1d",
                "-opentelemetry.usePrometheusNaming",
                "-search.latencyOffset=1s",
            ],
            tmp / "victoria-metrics.log",
        )
        servers.append(vm)
        vm.wait_ready(lambda: ok(f"{vm_url}/-/healthy"), 30)

        rules = fast_rules(tmp / "copilot.rules.fast.yml")
        vmalert_url = f"http://127.0.0.1:{free_port()}"
        vmalert = Server(
            "vmalert",
            [
                vmalert_bin,
                f"-rule={rules}",
                f"-datasource.url={vm_url}",
                f"-remoteWrite.url={vm_url}",
                "-remoteWrite.flushInterval=1s",
                "-notifier.blackhole",
                "-rule.evalDelay=1s",
                f"-httpListenAddr={vmalert_url[7:]}",
            ],
            tmp / "vmalert.log",
        )
        servers.append(vmalert)
        vmalert.wait_ready(lambda: ok(f"{vmalert_url}/api/v1/rules"), 30)

        daemon_prom_port = free_port()
        prometheus_url = f"http://127.0.0.1:{free_port()}"
        prom_config = tmp / "prometheus.yml"
        prom_config.write_text(
            yaml.safe_dump(
                {
                    "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
                    "rule_files": [str(rules)],
                    "scrape_configs": [
                        {
                            "job_name": "copilot-otel",
                            "static_configs": [{"targets": [f"127.0.0.1:{daemon_prom_port}"]}],
                        }
                    ],
                }
            )
        )
        prometheus = Server(
            "prometheus",
            [
                prom_bin,
                f"--config.file={prom_config}",
                f"--storage.tsdb.path={tmp / 'prom-data'}",
                f"--web.listen-address={prometheus_url[7:]}",
            ],
            tmp / "prometheus.log",
        )
        servers.append(prometheus)
        prometheus.wait_ready(lambda: ok(f"{prometheus_url}/-/ready"), 30)

        run = MetricsRun(
            PromAPI(vm_url, "VictoriaMetrics"),
            PromAPI(prometheus_url, "Prometheus"),
            vmalert_url,
            prometheus_url,
            t_begin=time.time() - 2,
        )
        metrics_endpoint = f"{vm_url}/opentelemetry/v1/metrics"

        # --- (a) replay: every fixture + runaway + tool errors -> VictoriaMetrics and the receiver --------
        # The traces endpoint comes from OTEL_EXPORTER_OTLP_ENDPOINT, not --endpoint: with the flag,
        # copilot-otel hides OTEL_EXPORTER_OTLP_METRICS_ENDPOINT (telemetry._base_endpoint) and metrics
        # would follow the traces to the receiver.
        logs = [
            *all_fixture_logs(),
            build_runaway_log(tmp / "replay-logs", RUNAWAY_TURNS, REPLAY_RUNAWAY_SID),
            build_tool_error_log(tmp / "replay-logs", TOOL_ERRORS, REPLAY_ERRORS_SID),
        ]
        run.replay = subprocess.run(
            copilot_otel(
                "replay", *map(str, logs), "--state-dir", str(tmp / "replay-state"), "--no-progress"
            ),
            env=_env(
                tmp / "home-replay",
                "replay",
                OTEL_EXPORTER_OTLP_ENDPOINT=receiver.http_endpoint,
                OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
                OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=metrics_endpoint,
            ),
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        run.replay_spans = len(receiver.spans())
        wait_for(
            "replayed metrics in VictoriaMetrics",
            lambda: run.vm.instant(f"copilot_otel_prompt_count_total{{{REPLAY}}}"),
            30,
        )

        # --- (b) the daemon: backfill the CLI fixtures, then two prompts written live -----------------------
        session_state = tmp / "session-state"
        run.backfill_lines = copy_as_session_state(all_fixture_logs(), session_state)
        run.daemon_log = tmp / "daemon.log"
        daemon = Server(
            "copilot-otel run",
            copilot_otel(
                "run",
                "--session-state",
                str(session_state),
                "--state-dir",
                str(tmp / "daemon-state"),
                "--rescan-interval",
                "0.5",
                "--export-delay",
                "0.2",
                "--prometheus-port",
                str(daemon_prom_port),
            ),
            run.daemon_log,
            _env(
                tmp / "home-daemon",
                "daemon",
                OTEL_EXPORTER_OTLP_ENDPOINT=receiver.http_endpoint,
                OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
                OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=metrics_endpoint,
                OTEL_METRIC_EXPORT_INTERVAL="1000",
            ),
        )
        servers.append(daemon)
        backfilled = f"sum(copilot_otel_lines_read_total{{{DAEMON}}}) >= {run.backfill_lines}"
        wait_for("the daemon's backfill in VictoriaMetrics", lambda: run.vm.instant(backfilled), 60)
        wait_for(
            "Prometheus scraping the backfill",
            lambda: run.prom.instant(f"sum(copilot_otel_lines_read_total) >= {run.backfill_lines}"),
            30,
        )
        prompts_before = run.vm.value(f"sum(github_copilot_agent_turn_count_count{{{DAEMON}}})")
        assert prompts_before, "the backfill produced no turns-per-prompt histogram"
        # Samples of the backfilled values in both backends, so the live increase is a rate > 0.
        backfilled_at = time.time()
        wait_for(
            "samples of the backfilled values in VictoriaMetrics",
            partial(stored_since, run.vm, f"copilot_otel_lines_read_total{{{DAEMON}}}", backfilled_at),
            30,
        )
        wait_for(
            "samples of the backfilled values in Prometheus",
            partial(stored_since, run.prom, "copilot_otel_lines_read_total", backfilled_at),
            30,
        )

        runaway_log = session_state / DAEMON_RUNAWAY_SID / "events.jsonl"
        errors_log = session_state / DAEMON_ERRORS_SID / "events.jsonl"
        runaway_head, runaway_tail = split_before_final_turn(
            list(iter_runaway_lines(RUNAWAY_TURNS, DAEMON_RUNAWAY_SID))
        )
        errors_head, errors_tail = split_before_final_turn(
            list(iter_tool_error_lines(TOOL_ERRORS, DAEMON_ERRORS_SID))
        )
        # The collector goes down while the agent works: spans pile up (CopilotOtelExportBacklogGrowing's
        # input), the daemon retries; the metrics keep flowing to VictoriaMetrics.
        receiver.stop()
        run.torn_lines = append_lines(runaway_log, runaway_head, pause_s=0.005, torn_every=100)
        run.torn_lines += append_lines(errors_log, errors_head, pause_s=0.005, torn_every=40)

        def live_now() -> dict[str, float | None] | None:
            values = {g: run.vm.value(f"max({g}{{{DAEMON}}})") for g in LIVE_GAUGES}
            done = (
                values["copilot_otel_live_prompts"] == 2
                and (values["copilot_otel_live_max_turns"] or 0) >= RUNAWAY_TURNS
                and (values["copilot_otel_live_max_tool_error_streak"] or 0) >= TOOL_ERRORS
            )
            return values if done else None

        run.live["vm"] = wait_for("two live prompts in VictoriaMetrics", live_now, 60)
        run.live_alerts["vmalert"] = wait_for(
            "vmalert: the live alerts pending",
            lambda: s if set(s := _alert_states(vmalert_url)) >= LIVE_ALERTS else None,
            30,
        )
        run.live_alerts["prometheus"] = wait_for(
            "Prometheus: the live alerts pending",
            lambda: s if set(s := _alert_states(prometheus_url)) >= LIVE_ALERTS else None,
            30,
        )
        run.live["prometheus"] = {g: run.prom.value(f"max({g})") for g in LIVE_GAUGES}
        run.t_live = time.time()
        run.backlog_live = run.vm.value(f"sum(copilot_otel_export_backlog{{{DAEMON}}})")
        receiver.start()  # same ports: the collector is back

        append_lines(runaway_log, runaway_tail)
        append_lines(errors_log, errors_tail)
        finished = (
            f"sum(copilot_otel_live_prompts{{{DAEMON}}}) == 0 and "
            f"sum(github_copilot_agent_turn_count_count{{{DAEMON}}}) >= {prompts_before + 2}"
        )
        wait_for("both live prompts finished in VictoriaMetrics", lambda: run.vm.instant(finished), 60)
        for recorded in (
            f"copilot:prompts_over_25_turns:increase10m{{{DAEMON}}} >= 1",
            f"count(copilot:runaway_detections:increase10m{{{DAEMON}}} > 0) >= 3",
        ):
            wait_for(
                f"vmalert's recording rule written back: {recorded}", partial(run.vm.instant, recorded), 30
            )
        for engine, url in (("vmalert", vmalert_url), ("prometheus", prometheus_url)):
            run.end_alerts[engine] = wait_for(
                f"{engine}: CopilotPromptTooManyTurns firing",
                partial(_firing, url, "CopilotPromptTooManyTurns"),
                30,
            )
        wait_for(
            "the backlog delivered after the outage",
            lambda: run.vm.instant(f"sum(copilot_otel_export_backlog{{{DAEMON}}}) == 0"),
            60,
        )
        # One more export and scrape after the end.
        delivered_at = time.time()
        wait_for(
            "an export after the end",
            partial(stored_since, run.vm, f"copilot_otel_lines_read_total{{{DAEMON}}}", delivered_at, 1),
            30,
        )
        wait_for(
            "a scrape after the end",
            partial(stored_since, run.prom, "copilot_otel_lines_read_total", delivered_at, 1),
            30,
        )
        run.t_end = time.time()
        run.retries_logged = "retrying in" in daemon.output()
        yield run
    finally:
        for server in reversed(servers):  # the daemon first, while the receiver still answers
            server.stop()
        receiver.stop()
        ARTIFACTS.mkdir(exist_ok=True)
        for server in servers:
            if server.log.exists():
                shutil.copy(server.log, ARTIFACTS / f"stack-{server.name.replace(' ', '-')}.log")


# --- helpers for the query checks ------------------------------------------------------------------------


def _has_data(api: PromAPI, query: Query, run: MetricsRun, expr: str | None = None) -> str | None:
    """How ``expr`` (default: the query's) returned data, or None. Time-series panels run as Grafana runs
    them, a range query over the whole run (1 s step); everything else as an instant query now, and, when
    empty, as a range over the run (alert expressions that were true while the prompts were live)."""
    expr = expr or query.expr
    if query.kind == "range":
        return "range" if api.range(expr, run.t_begin, time.time(), "1s") else None
    if api.instant(expr):
        return "instant"
    if api.range(expr, run.t_begin, time.time(), "1s"):
        return "earlier"
    return None


def _lhs_of_or_vector(expr: str) -> str | None:
    m = re.fullmatch(r"(?s)(.*\S)\s+or\s+vector\(0\)\s*", expr)
    return m.group(1) if m else None


# --- metrics: the feeds -------------------------------------------------------------------------------------


def test_replay_feeds_victoriametrics_and_the_receiver(metrics_run: MetricsRun) -> None:
    replay = metrics_run.replay
    assert replay is not None
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert "Traceback" not in replay.stderr
    exported = int(re.search(r"(\d+) spans", replay.stdout).group(1))  # type: ignore[union-attr]
    assert metrics_run.replay_spans == exported > 0
    vm = metrics_run.vm
    outcomes = {
        s["metric"]["copilot_otel_prompt_outcome"]
        for s in vm.instant(f"copilot_otel_prompt_count_total{{{REPLAY}}}")
    }
    assert {"completed", "error", "aborted"} <= outcomes
    failed = {
        s["metric"]["gen_ai_tool_name"]
        for s in vm.instant(f'github_copilot_tool_call_count_total{{{REPLAY},success="false"}}')
    }
    assert {"view", "edit"} <= failed
    assert vm.instant(f"copilot_otel_errors_total{{{REPLAY}}}")
    reasons = {
        s["metric"]["copilot_otel_runaway_reason"]
        for s in vm.instant(f"copilot_otel_runaway_detections_total{{{REPLAY}}}")
    }
    assert {"turns", "identical_tool_calls", "tool_errors"} <= reasons
    # OTLP bucket bounds arrive as le="25" (and le="2500" exists: the regex must not match it).
    les = {s["metric"]["le"] for s in vm.instant(f"github_copilot_agent_turn_count_bucket{{{REPLAY}}}")}
    assert {"25", "2500", "+Inf"} <= les


def test_daemon_live_gauges_while_prompts_are_in_progress(metrics_run: MetricsRun) -> None:
    for backend in ("vm", "prometheus"):
        live = metrics_run.live[backend]
        assert live["copilot_otel_live_prompts"] == 2, (backend, live)
        assert (live["copilot_otel_live_max_turns"] or 0) >= RUNAWAY_TURNS, (backend, live)
        assert (live["copilot_otel_live_max_identical_tool_calls"] or 0) >= RUNAWAY_TURNS - 1, (backend, live)
        assert (live["copilot_otel_live_max_tool_error_streak"] or 0) >= TOOL_ERRORS, (backend, live)
        assert (live["copilot_otel_live_max_tool_calls"] or 0) >= RUNAWAY_TURNS, (backend, live)
        assert (live["copilot_otel_live_max_duration_seconds"] or 0) > 0, (backend, live)
    # After both prompts finished, nothing is live any more.
    assert metrics_run.vm.value(f"sum(copilot_otel_live_prompts{{{DAEMON}}})") == 0
    assert metrics_run.vm.value(f"max(copilot_otel_live_max_turns{{{DAEMON}}})") == 0


def test_daemon_health_metrics(metrics_run: MetricsRun) -> None:
    vm = metrics_run.vm
    assert vm.value(f"sum(copilot_otel_files_tracked{{{DAEMON}}})") == len(all_fixture_logs()) + 2
    assert vm.value(f"sum(copilot_otel_export_backlog{{{DAEMON}}})") == 0
    since = vm.value(f"time() - max(copilot_otel_export_last_success_seconds{{{DAEMON}}})")
    assert since is not None and since < 30
    dropped = vm.values(
        f'copilot_otel_lines_dropped_total{{{DAEMON},copilot_otel_drop_reason="invalid_json"}}'
    )
    assert dropped == [metrics_run.torn_lines]
    assert (metrics_run.backlog_live or 0) > 0, "spans should pile up while the collector is down"
    assert metrics_run.retries_logged, "the collector was down for a while: the daemon should have retried"
    assert "Traceback" not in (metrics_run.daemon_log.read_text() if metrics_run.daemon_log else "")


# --- metrics: every shipped query -----------------------------------------------------------------------


def test_query_inventory_matches_the_static_tests() -> None:
    mine = sorted(q.where for q in shipped_queries())
    assert mine == sorted(where for where, _ in shipped_promql())
    assert set(NO_DATA) | set(NO_DATA_LHS) <= set(mine)
    assert set(WITNESSES) <= set(NO_DATA)
    assert set(PROMETHEUS_NO_DATA) <= set(mine)


def test_every_shipped_query_returns_data_from_victoriametrics(metrics_run: MetricsRun) -> None:
    vm = metrics_run.vm
    report: list[str] = []
    problems: list[str] = []
    for query in shipped_queries():
        try:
            how = _has_data(vm, query, metrics_run)
        except QueryError as exc:
            problems.append(f"{query.where}: refused: {exc}")
            continue
        if query.where in NO_DATA:
            report.append(f"NO DATA (expected) {query.where}: {NO_DATA[query.where]}")
            if how:
                problems.append(f"{query.where}: now returns data ({how}): remove it from NO_DATA")
            witness = WITNESSES.get(query.where)
            if witness and not _has_data(vm, query, metrics_run, witness):
                problems.append(f"{query.where}: witness {witness!r} has no data")
            continue
        report.append(f"{how or 'NO DATA':8} {query.where}")
        if not how:
            problems.append(f"{query.where}: no data for {query.expr!r}")
        if lhs := _lhs_of_or_vector(query.expr):
            lhs_how = _has_data(vm, query, metrics_run, lhs)
            if query.where in NO_DATA_LHS:
                report.append(
                    f"NO DATA (expected) {query.where} without 'or vector(0)': {NO_DATA_LHS[query.where]}"
                )
                if lhs_how:
                    problems.append(
                        f"{query.where}: the left side of 'or vector(0)' now has data: remove it "
                        "from NO_DATA_LHS"
                    )
            else:
                report.append(f"{lhs_how or 'NO DATA':8} {query.where} without 'or vector(0)'")
                if not lhs_how:
                    problems.append(f"{query.where}: only vector(0), the real query has no data: {lhs!r}")
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "stack-queries-victoriametrics.txt").write_text("\n".join(report) + "\n")
    assert not problems, "\n".join(problems)


def test_key_values_on_victoriametrics(metrics_run: MetricsRun) -> None:
    """Values, not just presence, for the panels the brief is about (fixtures: failing tools, model errors,
    aborts; a runaway replayed and one live)."""
    q = {query.where: query.expr for query in shipped_queries()}
    vm = metrics_run.vm
    assert vm.value(q["copilot-overview.json: Prompts over 25 turns [A]"]) >= 1  # type: ignore[operator]
    assert vm.value(q["copilot-prompts.json: Prompts over 25 turns [A]"]) >= 1  # type: ignore[operator]
    assert vm.value(q["copilot-overview.json: Runaways detected [A]"]) >= 3  # type: ignore[operator]
    assert 0 < vm.value(q["copilot-overview.json: Tool error rate [A]"]) < 1  # type: ignore[operator]
    assert vm.instant("sum by (error_type) (copilot_otel_errors_total)"), (
        "model-error fixture: errors by type"
    )
    outcomes = {
        s["metric"]["copilot_otel_prompt_outcome"]
        for s in vm.instant("sum by (copilot_otel_prompt_outcome) (copilot_otel_prompt_count_total)")
    }
    assert {"completed", "error", "aborted"} <= outcomes


# --- metrics: the runaway alerts ------------------------------------------------------------------------


def _rule_expr(name: str) -> str:
    return next(q.expr for q in shipped_queries() if q.kind == "alert" and q.name == name)


def _grafana_expr(name: str) -> str:
    return next(q.expr for q in shipped_queries() if q.kind == "grafana-alert" and q.name == name)


def _feed_values(api: PromAPI, expr: str, feed: str, at: float | None = None) -> list[float]:
    """Values of a shipped expression restricted to one feed's series (``test_feed`` matcher on every
    selector; the expression is otherwise unchanged)."""
    return api.values(with_matcher(expr, f'test_feed="{feed}"'), at)


def test_runaway_alert_expressions_are_true(metrics_run: MetricsRun) -> None:
    vm, prom, run = metrics_run.vm, metrics_run.prom, metrics_run
    # While the prompts were live (instant queries at that moment): only the daemon has live prompts.
    for expr in (_rule_expr("CopilotRunawayLivePrompt"), _grafana_expr("CopilotRunawayLivePrompt")):
        assert expr.strip() == "copilot_otel_live_max_turns >= 25"
        assert [v for v in _feed_values(vm, expr, "daemon", run.t_live) if v >= 25], expr
        assert [v for v in prom.values(expr, run.t_live) if v >= 25], f"Prometheus: {expr}"
    for name in ("CopilotIdenticalToolCallStreak", "CopilotToolErrorStreak"):
        for expr in (_rule_expr(name), _grafana_expr(name)):
            assert [v for v in _feed_values(vm, expr, "daemon", run.t_live) if v >= 5], expr
            assert [v for v in prom.values(expr, run.t_live) if v >= 5], f"Prometheus: {expr}"
    # After the prompts finished: the finished-prompt and detection alerts, for the replayed runaway and for
    # the one the daemon followed live.
    for feed in ("daemon", "replay"):
        for expr in (
            _rule_expr("CopilotPromptTooManyTurns"),
            _grafana_expr("CopilotPromptTooManyTurns"),
            "copilot:prompts_over_25_turns:increase10m",
        ):
            assert [v for v in _feed_values(vm, expr, feed) if v >= 1], (feed, expr)
        for expr in (_rule_expr("CopilotRunawayDetected"), _grafana_expr("CopilotRunawayDetected")):
            detected = vm.instant(with_matcher(expr, f'test_feed="{feed}"'))
            reasons = {
                s["metric"]["copilot_otel_runaway_reason"] for s in detected if float(s["value"][1]) > 0
            }
            assert {"turns", "identical_tool_calls", "tool_errors"} <= reasons, (feed, expr, reasons)
    # The same on Prometheus (scrape path: le="25.0" bucket bounds, recording rules evaluated by Prometheus).
    for expr in (
        _rule_expr("CopilotPromptTooManyTurns"),
        _grafana_expr("CopilotPromptTooManyTurns"),
        _rule_expr("CopilotRunawayDetected"),
        _grafana_expr("CopilotRunawayDetected"),
    ):
        assert [v for v in prom.values(expr) if v > 0], f"Prometheus: {expr}"
    reasons = {
        s["metric"]["copilot_otel_runaway_reason"] for s in prom.instant(_rule_expr("CopilotRunawayDetected"))
    }
    assert {"turns", "identical_tool_calls", "tool_errors"} <= reasons


def test_rule_engines_fire_the_runaway_alerts(metrics_run: MetricsRun) -> None:
    """vmalert (on VictoriaMetrics) and Prometheus evaluate the shipped rules: while the prompts were live the
    ``for: 1m`` live alerts were pending (or firing); at the end the ``for: 0`` ones fire."""
    for engine in ("vmalert", "prometheus"):
        live = metrics_run.live_alerts[engine]
        for name in LIVE_ALERTS:
            assert live.get(name) in {"pending", "firing"}, (engine, live)
        end = metrics_run.end_alerts[engine]
        assert end.get("CopilotPromptTooManyTurns") == "firing", (engine, end)
        assert end.get("CopilotRunawayDetected") == "firing", (engine, end)
        assert "CopilotOtelNoTelemetry" not in end and "CopilotOtelNotExporting" not in end, (engine, end)


def test_no_telemetry_alert_is_true_before_the_daemon_ran(metrics_run: MetricsRun) -> None:
    """``absent(copilot_otel_files_tracked)``: true at the start of the run (only replay had pushed, and it
    reports no daemon health), false once the daemon exports."""
    expr = _rule_expr("CopilotOtelNoTelemetry")
    assert metrics_run.vm.values(expr, metrics_run.t_begin + 1) == [1.0]
    assert metrics_run.vm.values(expr) == []


# --- metrics: the Prometheus scrape path ----------------------------------------------------------------


def test_every_shipped_query_returns_data_from_prometheus_scrape(metrics_run: MetricsRun) -> None:
    """The same queries over the pull path: Prometheus 2.42 scraping the daemon's --prometheus-port (names
    from the OTel Prometheus exporter, le="25.0" bucket bounds, recording rules evaluated by Prometheus)."""
    prom = metrics_run.prom
    assert prom.values('up{job="copilot-otel"}') == [1.0]
    report: list[str] = []
    problems: list[str] = []
    expected_empty = {**NO_DATA, **PROMETHEUS_NO_DATA}
    for query in shipped_queries():
        try:
            how = _has_data(prom, query, metrics_run)
        except QueryError as exc:
            problems.append(f"{query.where}: refused: {exc}")
            continue
        if query.where in expected_empty:
            report.append(f"NO DATA (expected) {query.where}: {expected_empty[query.where]}")
            if how:
                problems.append(
                    f"{query.where}: now returns data on Prometheus ({how}): update the exceptions"
                )
            continue
        report.append(f"{how or 'NO DATA':8} {query.where}")
        if not how:
            problems.append(f"{query.where}: no data on Prometheus for {query.expr!r}")
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "stack-queries-prometheus.txt").write_text("\n".join(report) + "\n")
    assert not problems, "\n".join(problems)
    queries = {q.where: q.expr for q in shipped_queries()}
    assert prom.value(queries["copilot-overview.json: Prompts over 25 turns [A]"]) >= 1  # type: ignore[operator]
    assert prom.value(queries["copilot-overview.json: Runaways detected [A]"]) >= 3  # type: ignore[operator]


# --- traces: Arize Phoenix ------------------------------------------------------------------------------

PHOENIX_FIXTURES = ("subagent", "failing-tool", "multi-tool")


@dataclass
class Phoenix:
    url: str
    grpc_port: int
    tmp: Path


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phoenix]:
    binary = find_binary("phoenix", "PHOENIX_BIN", CACHE / "phoenix-venv" / "bin" / "phoenix")
    tmp = tmp_path_factory.mktemp("phoenix")
    http_port, grpc_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "COPILOT_OTEL_", "PHOENIX_"))}
    (tmp / "home").mkdir()
    env.update(
        HOME=str(tmp / "home"),
        PHOENIX_HOST="127.0.0.1",
        PHOENIX_PORT=str(http_port),
        PHOENIX_GRPC_PORT=str(grpc_port),
        PHOENIX_WORKING_DIR=str(tmp / "work"),
        PHOENIX_TELEMETRY_ENABLED="false",
        PHOENIX_ALLOW_EXTERNAL_RESOURCES="false",
        PHOENIX_SQL_DATABASE_URL="sqlite:///:memory:",
    )
    server = Server("phoenix", [binary, "serve"], tmp / "phoenix.log", env)
    url = f"http://127.0.0.1:{http_port}"
    try:
        server.wait_ready(lambda: http(f"{url}/healthz", timeout_s=2)[1] == "OK", 120)
        yield Phoenix(url, grpc_port, tmp)
    finally:
        server.stop()
        ARTIFACTS.mkdir(exist_ok=True)
        shutil.copy(server.log, ARTIFACTS / "stack-phoenix.log")


def _replay_to_phoenix(
    phoenix: Phoenix, project: str, names: tuple[str, ...], protocol: str
) -> list[dict[str, Any]]:
    """Replay fixtures into a Phoenix project (traces only: Phoenix has no metrics/logs endpoint) and return
    its spans once all of them are readable."""
    endpoint = phoenix.url if protocol == "http/protobuf" else f"http://127.0.0.1:{phoenix.grpc_port}"
    env = _env(
        phoenix.tmp / f"home-{project}", "phoenix", COPILOT_OTEL_METRICS="false", COPILOT_OTEL_LOGS="false"
    )
    env["OTEL_RESOURCE_ATTRIBUTES"] = f"openinference.project.name={project}"
    result = subprocess.run(
        copilot_otel(
            "replay",
            *(str(CLI_GENERATED / n / "events.jsonl") for n in names),
            "--endpoint",
            endpoint,
            "--protocol",
            protocol,
            "--state-dir",
            str(phoenix.tmp / f"state-{project}"),
            "--no-progress",
        ),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    exported = int(re.search(r"(\d+) spans", result.stdout).group(1))  # type: ignore[union-attr]
    assert exported > 0
    return wait_for(
        f"{exported} spans in Phoenix project {project}",
        lambda: spans if len(spans := phoenix_spans(phoenix.url, project)) >= exported else None,
        60,
    )


def _check_tree(spans: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Structure shared by every copilot-otel trace; returns spans by trace id."""
    by_id = {s["context"]["span_id"]: s for s in spans}
    traces: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        traces.setdefault(span["context"]["trace_id"], []).append(span)
    kinds = {"invoke_agent": "AGENT", "turn": "CHAIN", "chat": "LLM", "execute_tool": "TOOL"}
    for trace_id, members in traces.items():
        roots = [s for s in members if not s["parent_id"]]
        assert [r["name"] for r in roots] == ["invoke_agent"], trace_id
        assert roots[0]["span_kind"] == "AGENT"
        for span in members:
            assert span["span_kind"] == kinds[span["name"].split(" ")[0]], span["name"]
            if span["parent_id"]:
                parent = by_id[span["parent_id"]]  # every parent arrived, in the same trace
                assert parent["context"]["trace_id"] == trace_id
            if span["span_kind"] == "LLM":
                a = span["attributes"]
                if span["status_code"] == "ERROR":  # a model call that never answered used no tokens
                    assert a["llm.token_count.prompt"] == a["llm.token_count.completion"] == 0, a
                else:  # the fixtures' fake model server: 1200 in / 40 out per call
                    assert a["llm.token_count.prompt"] == 1200 and a["llm.token_count.completion"] == 40, a
                    assert a["llm.token_count.total"] == 1240, a
            if span["name"].startswith("turn "):
                assert by_id[span["parent_id"]]["name"].startswith("invoke_agent")
            if span["name"].startswith(("chat ", "execute_tool ")):
                assert by_id[span["parent_id"]]["name"].startswith("turn ")
    return traces


def _trace_of(traces: dict[str, list[dict[str, Any]]], fixture: str) -> list[dict[str, Any]]:
    sid = session_id_of(CLI_GENERATED / fixture / "events.jsonl")
    return next(
        m
        for m in traces.values()
        if any(s["attributes"].get("gen_ai.conversation.id") == sid and not s["parent_id"] for s in m)
    )


@pytest.fixture(scope="module")
def phoenix_http(phoenix: Phoenix) -> tuple[str, list[dict[str, Any]]]:
    project = "test-stack-backends-http"
    return project, _replay_to_phoenix(phoenix, project, PHOENIX_FIXTURES, "http/protobuf")


def test_phoenix_trace_tree_over_http(phoenix_http: tuple[str, list[dict[str, Any]]]) -> None:
    _project, spans = phoenix_http
    traces = _check_tree(spans)
    assert len(traces) == len(PHOENIX_FIXTURES)
    by_id = {s["context"]["span_id"]: s for s in spans}
    # The sub-agent runs inside the task tool call that started it.
    sub = [s for s in _trace_of(traces, "subagent") if s["name"] == "invoke_agent explore"]
    assert len(sub) == 1 and sub[0]["span_kind"] == "AGENT"
    assert by_id[sub[0]["parent_id"]]["name"] == "execute_tool task"
    assert any(
        by_id[s["parent_id"]]["parent_id"] == sub[0]["context"]["span_id"]
        for s in spans
        if s["name"] == "execute_tool glob"
    )
    # Failing tools are errors; the bash call that exited 3 is not (the CLI reported success).
    failing = {
        s["name"]: s["status_code"] for s in _trace_of(traces, "failing-tool") if s["span_kind"] == "TOOL"
    }
    assert failing == {
        "execute_tool view": "ERROR",
        "execute_tool bash": "UNSET",
        "execute_tool run_tests": "ERROR",
        "execute_tool edit": "ERROR",
    }
    multi = _trace_of(traces, "multi-tool")
    assert all(s["status_code"] != "ERROR" for s in multi)
    assert {s["name"] for s in multi if s["span_kind"] == "TOOL"} >= {
        "execute_tool bash",
        "execute_tool view",
    }
    # Root totals add up the prompt's model calls.
    for members in traces.values():
        root = next(s for s in members if not s["parent_id"])
        top_llm = [s for s in members if s["span_kind"] == "LLM"]
        assert root["attributes"]["llm.token_count.total"] <= sum(
            s["attributes"]["llm.token_count.total"] for s in top_llm
        )


def test_phoenix_over_grpc(phoenix: Phoenix) -> None:
    """OTLP/gRPC into Phoenix's gRPC port. Other fixtures than the HTTP test's: copilot-otel's ids are
    deterministic and Phoenix keeps span ids unique across projects, so re-sending the same sessions into a
    second project would store nothing new."""
    spans = _replay_to_phoenix(
        phoenix, "test-stack-backends-grpc", ("capi-failing-tool", "model-error", "aborted-tool"), "grpc"
    )
    traces = _check_tree(spans)
    assert len(traces) == 3
    tools = {
        s["name"]: s["status_code"]
        for s in _trace_of(traces, "capi-failing-tool")
        if s["span_kind"] == "TOOL"
    }
    assert tools == {
        "execute_tool view": "ERROR",
        "execute_tool bash": "UNSET",
        "execute_tool run_tests": "ERROR",
        "execute_tool edit": "ERROR",
    }
    model_error = _trace_of(traces, "model-error")
    assert [s["status_code"] for s in model_error if s["span_kind"] == "LLM"] == ["ERROR"]
    assert next(s for s in model_error if not s["parent_id"])["status_code"] == "ERROR"
    aborted = _trace_of(traces, "aborted-tool")
    assert next(s for s in aborted if not s["parent_id"])["status_code"] == "ERROR"
    assert [s["status_code"] for s in aborted if s["span_kind"] == "TOOL"] == ["ERROR"]


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", head[16:24])
    return int(width), int(height)


def test_phoenix_trace_screenshot(phoenix: Phoenix, phoenix_http: tuple[str, list[dict[str, Any]]]) -> None:
    node = find_binary("node", "NODE_BIN")
    chromium = find_binary("chromium", "CHROMIUM_BIN")
    core = Path(
        os.environ.get("PLAYWRIGHT_CORE_DIR") or CACHE / "playwright" / "node_modules" / "playwright-core"
    )
    if not (core / "package.json").is_file():
        missing(
            f"playwright-core not found in {core} (set PLAYWRIGHT_CORE_DIR or run .ci/install-stack.sh --all)"
        )
    project, spans = phoenix_http
    project_id = phoenix_project_id(phoenix.url, project)
    assert project_id
    trace_id = _trace_of(_check_tree(spans), "subagent")[0]["context"]["trace_id"]
    ARTIFACTS.mkdir(exist_ok=True)
    out = ARTIFACTS / "phoenix-trace.png"
    out.unlink(missing_ok=True)
    env = {
        **os.environ,
        "PLAYWRIGHT_CORE_DIR": str(core),
        "CHROMIUM_BIN": chromium,
        "HOME": str(phoenix.tmp / "home"),
    }
    result = subprocess.run(
        [
            node,
            str(ROOT / "tests" / "phoenix_screenshot.mjs"),
            f"{phoenix.url}/projects/{project_id}/traces/{trace_id}",
            str(out),
            "execute_tool task",
            "invoke_agent explore",
            "execute_tool glob",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=150,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert _png_size(out) == (1600, 1000)
    assert out.stat().st_size > 40_000, "suspiciously small screenshot (blank page?)"
    if os.environ.get("UPDATE_DOCS_SCREENSHOT") == "1":
        shutil.copy(out, ROOT / "docs" / "phoenix-trace.png")
