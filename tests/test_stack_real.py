"""The stack for real: copilot-otel → the OpenTelemetry Collector → Jaeger v2 and Prometheus 3.

All three are built from their official Go modules by ``.ci/install-go-backends.sh`` (the Collector from the
builder manifest and generated sources of ``.ci/otelcol/``, Jaeger from ``github.com/jaegertracing/jaeger``
v1.75.0 = Jaeger v2.12.0, Prometheus from ``github.com/prometheus/prometheus`` v0.316.0 = Prometheus 3.16.0) and
run here as processes on 127.0.0.1 (one module-scoped run, :func:`stack`):

* The Collector runs **the repository's own** ``grafana/stack/otel-collector.yaml``, the file the compose stack
  mounts, with only its endpoints rewritten to this test's ports (checked: nothing else differs), and the two
  variables the compose file documents set to send traces to Jaeger (``otlp_grpc/jaeger``) and metrics both
  ways: pushed to Prometheus's OTLP receiver (``otlp_http/prometheus``) and served by the Prometheus exporter
  (``prometheus``) that a second Prometheus scrapes. Its span_metrics connector turns the traces into
  ``traces_span_metrics_*`` series on both paths.
* Jaeger v2 (memory storage) takes the traces over OTLP/gRPC; its query API (``/api/v3/traces``) must give back
  exactly the golden span trees (``tests/golden/``): one trace per human prompt, with its turn, chat and tool
  spans, parents and statuses, for every Copilot CLI fixture (a live ``copilot-otel run`` daemon's backfill)
  and for one session of Claude Code, Codex and Gemini CLI (``copilot-otel replay``).
* Prometheus 3 twice, each with the repository's ``grafana/stack/prometheus.yml`` (targets and rule files
  pointed at this run, intervals 1 s) and its rules: ``push`` with ``--web.enable-otlp-receiver`` fed by the
  Collector, ``pull`` scraping the Collector's Prometheus exporter. Every PromQL expression of the dashboards,
  rules, Grafana-managed alerts and datasource links must return series on both (the same exceptions as
  ``tests/test_stack_backends.py``, each with its reason), and the runaway alerts fire for the runaway the
  daemon followed live (``tests/runaway.py``).

The Jaeger UI is not in the module build (its assets are built with npm and the Go module embeds a placeholder
page), so the traces are read through the query API, not a screenshot.

Binaries: ``OTELCOL_BIN``, ``JAEGER_BIN``, ``PROMETHEUS3_BIN`` or where ``.ci/install-go-backends.sh`` puts them
(``.cache/go-backends/``). Missing ones skip the tests, except under ``CI=true``, where they fail.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import FIXTURES, all_fixture_logs
from tests.runaway import iter_runaway_lines, iter_tool_error_lines
from tests.stack_data import (
    CACHE,
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
    ok,
    shipped_queries,
    split_before_final_turn,
    stored_since,
    wait_for,
)
from tests.test_golden import FIXTURE_LOGS, _fixture_name
from tests.test_stack_backends import LIVE_ALERTS, NO_DATA, WITNESSES, _alert_states, _env
from tests.waiting import until

pytestmark = [pytest.mark.stack, pytest.mark.xdist_group("stack-real")]

ARTIFACTS = ROOT / "artifacts"
GO_BACKENDS = CACHE / "go-backends"
COLLECTOR_CONFIG = ROOT / "grafana" / "stack" / "otel-collector.yaml"
PROMETHEUS_CONFIG = ROOT / "grafana" / "stack" / "prometheus.yml"
OTELCOL_MANIFEST = ROOT / ".ci" / "otelcol" / "builder-config.yaml"
OTELCOL_SOURCES = ROOT / ".ci" / "otelcol" / "src"
GOLDEN = ROOT / "tests" / "golden"
OTHER = FIXTURES / "other-agents"

RUNAWAY_TURNS = 40
TOOL_ERRORS = 8
RUNAWAY_SID = "0a0000f1-0000-4000-8000-00000000c001"
ERRORS_SID = "0a0000f2-0000-4000-8000-00000000c002"
# The compose file's variables (docker-compose.yml, grafana/stack/otel-collector.yaml): the Jaeger profile's
# trace exporter, and both metric paths at once (two Prometheus here, so nothing is counted twice).
TRACE_EXPORTERS = "[otlp_grpc/jaeger]"
METRIC_EXPORTERS = "[otlp_http/prometheus, prometheus]"

# One session of each other agent, with a failing tool call: (golden folder, scenario, its log files).
OTHER_SESSIONS: dict[str, list[Path]] = {
    "claude-code": [OTHER / "claude-code" / "failing-tool"],
    "codex": sorted((OTHER / "codex" / "failing-tool" / "sessions").rglob("rollout-*.jsonl")),
    "gemini": sorted((OTHER / "gemini" / "failing-tool").rglob("session-*.jsonl")),
}
OTHER_SCENARIO = "failing-tool"

# Queries with no data on either path, beyond test_stack_backends' NO_DATA (same fixtures, same reasons).
_YOUNG_RATE = (
    "Prometheus' rate() spreads a series younger than the 15m window over the whole window: the test's "
    "burst stays under 3e6 tokens/h (VictoriaMetrics, in test_stack_backends, divides by the time covered)"
)
EXPECTED_EMPTY: dict[str, str] = {**NO_DATA, "rules: CopilotTokenBurnRate": _YOUNG_RATE}
# Queries whose data depends on a race this topology cannot order: reported, not required; their witness (the
# input series) must have data. The backlog grows while the Collector is down, and the daemon's metrics go
# through that same Collector: whether a push shows the backlog still growing depends on whether the first
# accepted metric export comes before the first retried span batch. (test_stack_backends sends the metrics
# around the outage and requires it.)
RACY: dict[str, tuple[str, str]] = {
    "rules: CopilotOtelExportBacklogGrowing": (
        "the backlog grows while the Collector, which carries the metrics too, is down",
        "copilot_otel_export_backlog",
    ),
}
FIRING = ("CopilotPromptTooManyTurns", "CopilotRunawayDetected")


# --- binaries ----------------------------------------------------------------------------------------------


def _await_ci_build() -> None:
    """Under ``.ci/run`` the suite starts while ``.ci/install-go-backends.sh`` may still build, in the background
    (``GO_BACKENDS_JOB``: that job's files, ``.rc`` and then ``.seconds`` written when it ends): wait for its end,
    and fail with the end of its log if it failed. Elsewhere, nothing to wait for."""
    job = os.environ.get("GO_BACKENDS_JOB")
    if not job:
        return
    done = Path(f"{job}.seconds")
    # A cold build of the three takes about 10 minutes on 2 busy cores; CI's own limit is 90.
    until(done.exists, 45 * 60, "the Go backends' build in .ci/run's background", poll_s=2.0)
    rc = Path(f"{job}.rc").read_text().strip()
    if rc != "0":
        log = Path(f"{job}.log").read_text(errors="replace")
        pytest.fail(f".ci/install-go-backends.sh failed (exit {rc}):\n{log[-4000:]}")


def _go_backend(name: str, env_var: str) -> str:
    """A program built by .ci/install-go-backends.sh (``.cache/go-backends/<name>-<version>/<name>``)."""
    built = sorted(GO_BACKENDS.glob(f"{name}-*/{name}"))
    # Never a same-named program on PATH (Debian's prometheus is 2.42): only the variable or the build.
    return find_binary(f"{name}-built-by-install-go-backends", env_var, *built)


def _version(argv: list[str]) -> str:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout + result.stderr


# --- configs -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ports:
    otlp_grpc: int = field(default_factory=free_port)
    otlp_http: int = field(default_factory=free_port)
    health: int = field(default_factory=free_port)
    telemetry: int = field(default_factory=free_port)
    exporter: int = field(default_factory=free_port)
    jaeger_otlp: int = field(default_factory=free_port)
    jaeger_http: int = field(default_factory=free_port)
    jaeger_grpc: int = field(default_factory=free_port)
    prom_push: int = field(default_factory=free_port)
    prom_pull: int = field(default_factory=free_port)


def collector_config(ports: Ports) -> dict[str, Any]:
    """``grafana/stack/otel-collector.yaml`` with its listening and exporting endpoints moved to ``ports``."""
    config: dict[str, Any] = yaml.safe_load(COLLECTOR_CONFIG.read_text())
    config["extensions"]["health_check"]["endpoint"] = f"127.0.0.1:{ports.health}"
    protocols = config["receivers"]["otlp"]["protocols"]
    protocols["grpc"]["endpoint"] = f"127.0.0.1:{ports.otlp_grpc}"
    protocols["http"]["endpoint"] = f"127.0.0.1:{ports.otlp_http}"
    exporters = config["exporters"]
    exporters["otlp_grpc/jaeger"]["endpoint"] = f"127.0.0.1:{ports.jaeger_otlp}"
    exporters["otlp_http/prometheus"]["endpoint"] = f"http://127.0.0.1:{ports.prom_push}/api/v1/otlp"
    exporters["prometheus"]["endpoint"] = f"127.0.0.1:{ports.exporter}"
    pull = config["service"]["telemetry"]["metrics"]["readers"][0]["pull"]["exporter"]["prometheus"]
    pull.update(host="127.0.0.1", port=ports.telemetry)
    return config


def _leaves(value: Any, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in _leaves(item, (*path, str(key))).items()}
    if isinstance(value, list):
        return {k: v for i, item in enumerate(value) for k, v in _leaves(item, (*path, str(i))).items()}
    return {path: value}


def jaeger_config(ports: Ports) -> dict[str, Any]:
    """Jaeger v2 as its all-in-one configuration (cmd/jaeger/internal/all-in-one.yaml), reduced to OTLP/gRPC in,
    memory storage, the query API, on this run's ports, without self-tracing or a fixed metrics port."""
    return {
        "service": {
            "extensions": ["jaeger_storage", "jaeger_query"],
            "pipelines": {
                "traces": {
                    "receivers": ["otlp"],
                    "processors": ["batch"],
                    "exporters": ["jaeger_storage_exporter"],
                }
            },
            "telemetry": {"metrics": {"level": "none"}, "logs": {"level": "info"}},
        },
        "extensions": {
            "jaeger_storage": {"backends": {"memstore": {"memory": {"max_traces": 100000}}}},
            "jaeger_query": {
                "storage": {"traces": "memstore"},
                "enable_tracing": False,
                "http": {"endpoint": f"127.0.0.1:{ports.jaeger_http}"},
                "grpc": {"endpoint": f"127.0.0.1:{ports.jaeger_grpc}"},
            },
        },
        "receivers": {"otlp": {"protocols": {"grpc": {"endpoint": f"127.0.0.1:{ports.jaeger_otlp}"}}}},
        "processors": {"batch": {}},
        "exporters": {"jaeger_storage_exporter": {"trace_storage": "memstore"}},
    }


def prometheus_config(ports: Ports, rules: Path, scrape_exporter: bool) -> dict[str, Any]:
    """``grafana/stack/prometheus.yml`` for this run: 1 s intervals, the fast copy of the rules, no
    Alertmanager; its jobs for services running here pointed at them (the others dropped), and for the pull
    path a job scraping the Collector's Prometheus exporter."""
    config: dict[str, Any] = yaml.safe_load(PROMETHEUS_CONFIG.read_text())
    config["global"] = {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"}
    config["rule_files"] = [str(rules)]
    config.pop("alerting")
    own = ports.prom_pull if scrape_exporter else ports.prom_push
    here = {"prometheus": own, "otel-collector": ports.telemetry}
    jobs = [job for job in config["scrape_configs"] if job["job_name"] in here]
    for job in jobs:
        job["static_configs"] = [{"targets": [f"127.0.0.1:{here[job['job_name']]}"]}]
    if scrape_exporter:
        jobs.append(
            {
                "job_name": "otel-collector-exporter",
                "static_configs": [{"targets": [f"127.0.0.1:{ports.exporter}"]}],
            }
        )
    config["scrape_configs"] = jobs
    return config


# --- Jaeger's query API ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SpanRow:
    """What a golden dump and Jaeger both say of a span: identity, place in the tree, name, kind, status."""

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    kind: int
    status_code: int


_STATUS = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
_KINDS = {
    "SPAN_KIND_UNSPECIFIED": 0,
    "SPAN_KIND_INTERNAL": 1,
    "SPAN_KIND_SERVER": 2,
    "SPAN_KIND_CLIENT": 3,
    "SPAN_KIND_PRODUCER": 4,
    "SPAN_KIND_CONSUMER": 5,
}


def _enum(value: Any, names: dict[str, int]) -> int:
    return names[value] if isinstance(value, str) else int(value or 0)


def jaeger_spans(base: str, service: str) -> list[SpanRow]:
    """Every span of ``service`` in Jaeger (API v3, OTLP JSON), over all time."""
    params = (
        f"query.service_name={service}&query.start_time_min=2000-01-01T00:00:00Z"
        f"&query.start_time_max={time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(time.time() + 86400))}"
        "&query.num_traces=10000"
    )
    status, body = http(f"{base}/api/v3/traces?{params}", timeout_s=30)
    if status == 404:  # no trace of that service yet
        return []
    assert status == 200, f"Jaeger /api/v3/traces: HTTP {status}: {str(body)[:2000]}"
    rows = []
    for resource in body["result"]["resourceSpans"]:
        for scope in resource.get("scopeSpans", []):
            for span in scope.get("spans", []):
                rows.append(
                    SpanRow(
                        span["traceId"],
                        span["spanId"],
                        span.get("parentSpanId", ""),
                        span["name"],
                        _enum(span.get("kind"), _KINDS),
                        _enum(span.get("status", {}).get("code"), _STATUS),
                    )
                )
    return rows


def golden_spans(path: Path) -> list[SpanRow]:
    """The spans of a golden dump (tests/golden/**/default/*.json)."""
    return [
        SpanRow(
            s["trace_id"], s["span_id"], s["parent_span_id"] or "", s["name"], s["kind"], s["status_code"]
        )
        for s in json.loads(path.read_text())["spans"]
    ]


def _golden_of_copilot_log(log: Path) -> Path:
    name = _fixture_name(log)
    assert FIXTURE_LOGS[name] == log
    return GOLDEN / "default" / f"{name}.json"


# --- the run -----------------------------------------------------------------------------------------------


@dataclass
class StackRun:
    jaeger_url: str
    push: PromAPI
    pull: PromAPI
    push_url: str
    pull_url: str
    t_begin: float
    torn_lines: int = 0
    replay: subprocess.CompletedProcess[str] | None = None
    before_alerts: dict[str, dict[str, str]] = field(default_factory=dict)
    live_alerts: dict[str, dict[str, str]] = field(default_factory=dict)
    end_alerts: dict[str, dict[str, str]] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)


def _alerts_when(url: str, live: bool) -> dict[str, str] | None:
    """The alert states once the live alerts are all pending or firing (``live``), or once the alerts of
    finished runaways all fire."""
    states = _alert_states(url)
    if live:
        return states if set(states) >= LIVE_ALERTS else None
    return states if all(states.get(name) == "firing" for name in FIRING) else None


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackRun]:
    _await_ci_build()
    otelcol = _go_backend("otelcol", "OTELCOL_BIN")
    jaeger = _go_backend("jaeger", "JAEGER_BIN")
    prometheus = _go_backend("prometheus", "PROMETHEUS3_BIN")
    tmp = tmp_path_factory.mktemp("stack-real")
    ports = Ports()
    servers: list[Server] = []
    try:
        # --- Jaeger v2 -------------------------------------------------------------------------------------
        (tmp / "jaeger.yaml").write_text(yaml.safe_dump(jaeger_config(ports)))
        jaeger_url = f"http://127.0.0.1:{ports.jaeger_http}"
        server = Server("jaeger", [jaeger, "--config", str(tmp / "jaeger.yaml")], tmp / "jaeger.log")
        servers.append(server)
        server.wait_ready(lambda: ok(f"{jaeger_url}/api/v3/services"), 60)

        # --- Prometheus 3, push (OTLP receiver) and pull (scraping the Collector's exporter) ---------------
        rules = fast_rules(tmp / "copilot.rules.fast.yml")
        for name, port, scrape in (("push", ports.prom_push, False), ("pull", ports.prom_pull, True)):
            config = tmp / f"prometheus-{name}.yml"
            config.write_text(yaml.safe_dump(prometheus_config(ports, rules, scrape), sort_keys=False))
            server = Server(
                f"prometheus-{name}",
                [
                    prometheus,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={tmp / f'prom-{name}'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                    "--web.enable-otlp-receiver",
                    "--enable-feature=exemplar-storage",
                ],
                tmp / f"prometheus-{name}.log",
            )
            servers.append(server)
            server.wait_ready(partial(ok, f"http://127.0.0.1:{port}/-/ready"), 60)

        run = StackRun(
            jaeger_url,
            PromAPI(f"http://127.0.0.1:{ports.prom_push}", "Prometheus 3 (push)"),
            PromAPI(f"http://127.0.0.1:{ports.prom_pull}", "Prometheus 3 (pull)"),
            f"http://127.0.0.1:{ports.prom_push}",
            f"http://127.0.0.1:{ports.prom_pull}",
            time.time() - 2,
        )
        run.versions = {
            "otelcol": _version([otelcol, "--version"]),
            "jaeger": _version([jaeger, "version"]),
            "prometheus": _version([prometheus, "--version"]),
        }
        collector = f"http://127.0.0.1:{ports.otlp_http}"

        # --- Copilot CLI: the daemon backfills every fixture, before the Collector is up ----------------------
        # Its exports are refused and retried (the dashboards' retry panels need that), then delivered.
        session_state = tmp / "session-state"
        backfill_lines = copy_as_session_state(all_fixture_logs(), session_state)
        daemon = Server(
            "copilot-otel-run",
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
            ),
            tmp / "daemon.log",
            _env(
                tmp / "home-daemon",
                "daemon",
                OTEL_EXPORTER_OTLP_ENDPOINT=collector,
                OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
                OTEL_METRIC_EXPORT_INTERVAL="1000",
            ),
        )
        servers.append(daemon)
        wait_for("the daemon retrying its first export", lambda: "retrying in" in daemon.output(), 60)

        # --- the Collector, on the shipped config ------------------------------------------------------------
        collector_yaml = tmp / "otel-collector.yaml"
        collector_yaml.write_text(yaml.safe_dump(collector_config(ports), sort_keys=False))
        server = Server(
            "otelcol",
            [otelcol, f"--config={collector_yaml}"],
            tmp / "otelcol.log",
            {
                **os.environ,
                "COPILOT_OTEL_TRACE_EXPORTERS": TRACE_EXPORTERS,
                "COPILOT_OTEL_METRIC_EXPORTERS": METRIC_EXPORTERS,
            },
        )
        servers.insert(len(servers) - 1, server)  # stopped after the daemon, before the backends
        server.wait_ready(partial(ok, f"http://127.0.0.1:{ports.health}/"), 60)

        # --- the other agents: one session each, replayed into the Collector ----------------------------------
        run.replay = subprocess.run(
            copilot_otel(
                "replay",
                *(str(p) for paths in OTHER_SESSIONS.values() for p in paths),
                "--endpoint",
                collector,
                "--protocol",
                "http/protobuf",
                "--state-dir",
                str(tmp / "replay-state"),
                "--no-progress",
            ),
            env=_env(tmp / "home-replay", "replay"),
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )

        # --- the backfill delivered; then a runaway and a tool-error streak written live (torn lines too) -----
        backfilled = f"sum(copilot_otel_lines_read_total) >= {backfill_lines}"
        for api in (run.push, run.pull):
            wait_for(f"the daemon's backfill in {api.name}", partial(api.instant, backfilled), 90)
        backfilled_at = time.time()  # samples of the backfilled values before the live prompts start
        for api in (run.push, run.pull):
            wait_for(
                f"samples of the backfilled values in {api.name}",
                partial(stored_since, api, "copilot_otel_lines_read_total", backfilled_at),
                30,
            )
        run.before_alerts = {"push": _alert_states(run.push_url), "pull": _alert_states(run.pull_url)}

        runaway_head, runaway_tail = split_before_final_turn(
            list(iter_runaway_lines(RUNAWAY_TURNS, RUNAWAY_SID))
        )
        errors_head, errors_tail = split_before_final_turn(
            list(iter_tool_error_lines(TOOL_ERRORS, ERRORS_SID))
        )
        runaway_log = session_state / RUNAWAY_SID / "events.jsonl"
        errors_log = session_state / ERRORS_SID / "events.jsonl"
        run.torn_lines = append_lines(runaway_log, runaway_head, pause_s=0.005, torn_every=100)
        run.torn_lines += append_lines(errors_log, errors_head, pause_s=0.005, torn_every=40)
        for name, url in (("push", run.push_url), ("pull", run.pull_url)):
            run.live_alerts[name] = wait_for(
                f"Prometheus {name}: the live runaway alerts pending",
                partial(_alerts_when, url, live=True),
                90,
            )
        append_lines(runaway_log, runaway_tail)
        append_lines(errors_log, errors_tail)
        for name, url in (("push", run.push_url), ("pull", run.pull_url)):
            run.end_alerts[name] = wait_for(
                f"Prometheus {name}: {', '.join(FIRING)} firing",
                partial(_alerts_when, url, live=False),
                90,
            )
        yield run
    finally:
        for server in reversed(servers):  # the daemon first, while the Collector still answers
            server.stop()
        ARTIFACTS.mkdir(exist_ok=True)
        for server in servers:
            if server.log.exists():
                (ARTIFACTS / f"stack-real-{server.name}.log").write_bytes(server.log.read_bytes())


# --- the builds and the configs ----------------------------------------------------------------------------


def test_otelcol_sources_are_the_manifests() -> None:
    """The committed sources of .ci/otelcol/src are what the builder writes for the manifest: every module it
    names is required at its version and its factory is registered (a manifest edited without regenerating
    the sources fails here)."""
    manifest = yaml.safe_load(OTELCOL_MANIFEST.read_text())
    go_mod = (OTELCOL_SOURCES / "go.mod").read_text()
    components = (OTELCOL_SOURCES / "components.go").read_text() + (OTELCOL_SOURCES / "main.go").read_text()
    assert f"module {manifest['dist']['module']}\n" in go_mod
    assert f'Version:     "{manifest["dist"]["version"]}"' in components
    kinds = ("extensions", "receivers", "processors", "exporters", "connectors", "providers")
    named = [entry["gomod"].split() for kind in kinds for entry in manifest.get(kind, [])]
    assert named
    for module, version in named:
        assert re.search(rf"^\s*{re.escape(module)} {re.escape(version)}$", go_mod, re.M), (module, version)
        assert f'"{module}"' in components, module
    # The versions the README and the compose pin name: core 0.165.0 (confmap 1.71.0), contrib 0.165.1.
    assert {v for m, v in named if "contrib" in m} == {"v0.165.1"}
    assert {v for m, v in named if "contrib" not in m} == {"v0.165.0", "v1.71.0"}


def test_collector_config_is_the_shipped_file_with_only_endpoints_moved() -> None:
    shipped = _leaves(yaml.safe_load(COLLECTOR_CONFIG.read_text()))
    moved = _leaves(collector_config(Ports()))
    assert set(moved) == set(shipped)
    changed = {path for path in shipped if shipped[path] != moved[path]}
    assert {path[-1] for path in changed} == {"endpoint", "host", "port"}
    assert all(str(moved[path]).startswith(("127.0.0.1:", "http://127.0.0.1:", "127.0.0.1")) or
               path[-1] == "port" for path in changed)  # fmt: skip
    # The exporters the run selects are those the compose file documents (the Jaeger profile).
    compose = (ROOT / "docker-compose.yml").read_text()
    assert "otlp_grpc/jaeger" in compose and "otlp_grpc/jaeger" in TRACE_EXPORTERS


def test_the_backends_are_the_built_versions(stack: StackRun) -> None:
    assert "0.165.0" in stack.versions["otelcol"]
    assert "v2.12.0" in stack.versions["jaeger"]
    assert re.search(r"prometheus, version 3\.16\.0", stack.versions["prometheus"]), stack.versions
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    assert compose["otel-collector"]["image"].endswith(":0.165.0")
    assert compose["jaeger"]["image"] == "jaegertracing/jaeger:2.12.0"


def test_the_jaeger_build_has_no_ui(stack: StackRun) -> None:
    """The module build serves Jaeger's placeholder page, not the UI (its assets are built with npm outside the
    Go module): the traces are read through the query API. When a build embeds the UI, this fails, and a
    screenshot test in headless Chromium (as tests/phoenix_screenshot.mjs does for Phoenix) should replace it."""
    status, page = http(f"{stack.jaeger_url}/")
    assert status == 200
    assert "This is a placeholder for the Jaeger UI home page" in str(page), str(page)[:500]


# --- traces in Jaeger --------------------------------------------------------------------------------------


def _jaeger_all(url: str) -> list[SpanRow]:
    status, body = http(f"{url}/api/v3/services")
    assert status == 200, body
    return [row for service in body["services"] for row in jaeger_spans(url, service)]


def _check_against_goldens(stack: StackRun, goldens: dict[str, Path]) -> dict[str, list[SpanRow]]:
    """Jaeger holds exactly the golden span tree of each source (by trace id: nothing missing, nothing more),
    one trace per human prompt with a single invoke_agent root; returns Jaeger's spans by source."""
    expected = {name: golden_spans(path) for name, path in goldens.items()}
    wanted = {row.trace_id for rows in expected.values() for row in rows}
    count = sum(len(rows) for rows in expected.values())

    def arrived() -> list[SpanRow] | None:
        rows = [row for row in _jaeger_all(stack.jaeger_url) if row.trace_id in wanted]
        return rows if len(rows) >= count else None

    stored = wait_for(f"{count} spans of {len(goldens)} sources in Jaeger", arrived, 90)
    by_source = {}
    for name, rows in expected.items():
        traces = {row.trace_id for row in rows}
        got = [row for row in stored if row.trace_id in traces]
        assert sorted(got, key=repr) == sorted(rows, key=repr), name
        for trace in traces:
            roots = [row.name for row in got if row.trace_id == trace and not row.parent_span_id]
            assert len(roots) == 1 and roots[0].startswith("invoke_agent"), (name, trace, roots)
        by_source[name] = got
    return by_source


def test_jaeger_has_one_trace_per_prompt_of_every_copilot_fixture(stack: StackRun) -> None:
    goldens = {_fixture_name(log): _golden_of_copilot_log(log) for log in all_fixture_logs()}
    spans = _check_against_goldens(stack, goldens)
    failing = {(r.name, r.status_code) for r in spans["failing-tool"] if r.name.startswith("execute_tool")}
    assert failing == {
        ("execute_tool view", 2),
        ("execute_tool bash", 0),
        ("execute_tool run_tests", 2),
        ("execute_tool edit", 2),
    }
    kinds = {row.name.split(" ")[0] for rows in spans.values() for row in rows}
    assert {"invoke_agent", "turn", "chat", "execute_tool"} <= kinds


def test_jaeger_has_the_other_agents_sessions(stack: StackRun) -> None:
    replay = stack.replay
    assert replay is not None and replay.returncode == 0, replay and replay.stdout + replay.stderr
    goldens = {agent: GOLDEN / agent / "default" / f"{OTHER_SCENARIO}.json" for agent in OTHER_SESSIONS}
    spans = _check_against_goldens(stack, goldens)
    for agent, rows in spans.items():
        kinds = {row.name.split(" ")[0] for row in rows}
        assert {"invoke_agent", "turn", "chat", "execute_tool"} <= kinds, agent
        assert any(r.name.startswith("execute_tool") and r.status_code == 2 for r in rows), agent


# --- metrics in Prometheus 3 -------------------------------------------------------------------------------

PATHS = ("push", "pull")


def _api(stack: StackRun, path: str) -> PromAPI:
    return stack.push if path == "push" else stack.pull


@pytest.mark.parametrize("path", PATHS)
def test_span_metrics_count_every_span_jaeger_stored(stack: StackRun, path: str) -> None:
    """The span_metrics connector's calls per span name and status equal the spans Jaeger stored (the same
    traces, through the other pipeline)."""
    api = _api(stack, path)
    expr = "sum by (span_name, status_code) (traces_span_metrics_calls_total)"

    def counted() -> dict[tuple[str, int], int] | None:
        stored: dict[tuple[str, int], int] = {}
        for row in _jaeger_all(stack.jaeger_url):
            stored[row.name, row.status_code] = stored.get((row.name, row.status_code), 0) + 1
        metrics = {
            (s["metric"]["span_name"], _STATUS[s["metric"]["status_code"]]): int(float(s["value"][1]))
            for s in api.instant(expr)
        }
        return stored if stored and metrics == stored else None

    stored = wait_for(f"{api.name}: span metrics matching Jaeger", counted, 90)
    assert stored[("execute_tool view", 2)] >= 1
    # The duration histogram of the same spans.
    assert api.instant('traces_span_metrics_duration_milliseconds_bucket{span_name="execute_tool view"}')


@pytest.mark.parametrize("path", PATHS)
def test_the_daemons_health_through_the_collector(stack: StackRun, path: str) -> None:
    """The daemon's own health series arrive through the Collector: the exports refused while it was not up
    yet were retried, nothing is left behind, and each torn line is one drop."""
    api = _api(stack, path)
    assert (api.value("sum(copilot_otel_export_retries_total)") or 0) > 0
    assert api.value("sum(copilot_otel_export_backlog)") == 0
    dropped = 'sum(copilot_otel_lines_dropped_total{copilot_otel_drop_reason="invalid_json"})'
    assert api.value(dropped) == stack.torn_lines > 0


def _has_data(api: PromAPI, query: Query, since: float, expr: str | None = None) -> str | None:
    """How ``expr`` (default: the query's) returned data: time-series panels as a range over the run, the rest
    as an instant query now, and, when empty, over the run (alerts that were true while the prompts ran)."""
    expr = expr or query.expr
    if query.kind != "range" and api.instant(expr):
        return "instant"
    if api.range(expr, since, time.time(), "1s"):
        return "range" if query.kind == "range" else "earlier"
    return None


@pytest.mark.parametrize("path", PATHS)
def test_every_shipped_query_returns_series(stack: StackRun, path: str) -> None:
    """Every PromQL expression of the dashboards, rules, Grafana-managed alerts and datasource links, on
    Prometheus 3 fed by the Collector (OTLP push, or the exporter scraped)."""
    api = _api(stack, path)
    report: list[str] = []
    problems: list[str] = []
    for query in shipped_queries():
        try:
            how = _has_data(api, query, stack.t_begin)
        except QueryError as exc:
            problems.append(f"{query.where}: refused: {exc}")
            continue
        if query.where in EXPECTED_EMPTY:
            report.append(f"NO DATA (expected) {query.where}: {EXPECTED_EMPTY[query.where]}")
            if how:
                problems.append(f"{query.where}: now returns data ({how}): remove it from the exceptions")
            witness = WITNESSES.get(query.where)
            if witness and not _has_data(api, query, stack.t_begin, witness):
                problems.append(f"{query.where}: witness {witness!r} has no data")
            continue
        if query.where in RACY and not how:
            reason, witness = RACY[query.where]
            report.append(f"NO DATA (racy) {query.where}: {reason}")
            if not _has_data(api, query, stack.t_begin, witness):
                problems.append(f"{query.where}: witness {witness!r} has no data")
            continue
        report.append(f"{how or 'NO DATA':8} {query.where}")
        if not how:
            problems.append(f"{query.where}: no data for {query.expr!r}")
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / f"stack-real-queries-{path}.txt").write_text("\n".join(report) + "\n")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", PATHS)
def test_the_runaway_alerts_fire(stack: StackRun, path: str) -> None:
    """The shipped rules on Prometheus 3: nothing runaway after the backfill; while the runaway and the
    tool-error prompts ran, the live alerts (``for: 1m``) were pending or firing; once they finished, the
    too-many-turns and runaway-detected alerts fire, for the three reasons the daemon saw."""
    before = stack.before_alerts[path]
    assert not set(before) & (LIVE_ALERTS | set(FIRING)), before
    live = stack.live_alerts[path]
    assert all(live.get(name) in {"pending", "firing"} for name in LIVE_ALERTS), live
    end = stack.end_alerts[path]
    assert all(end.get(name) == "firing" for name in FIRING), end
    status, body = http(f"{stack.push_url if path == 'push' else stack.pull_url}/api/v1/alerts")
    assert status == 200
    reasons = {
        a["labels"].get("copilot_otel_runaway_reason")
        for a in body["data"]["alerts"]
        if a["labels"]["alertname"] == "CopilotRunawayDetected" and a["state"] == "firing"
    }
    assert {"turns", "identical_tool_calls", "tool_errors"} <= reasons, reasons
