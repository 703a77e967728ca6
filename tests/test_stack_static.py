"""Static checks of the shipped observability stack (no Docker engine, no network).

What runs for real: ``promtool check rules`` / ``test rules`` / ``check config``, ``amtool check-config``,
``vmalert-tool unittest`` (the same rule tests on VictoriaMetrics), ``docker-compose config`` (2.26.1 unpacked
by ``.ci/install-stack.sh``), and a throwaway Prometheus on 127.0.0.1 that parses and evaluates every PromQL
expression we ship (``GET /api/v1/format_query``, ``/api/v1/query``) and loads the rules. The Grafana-managed
alert rules are run through the promtool cases of the Prometheus alerts they mirror.
The OpenTelemetry Collector, Jaeger v2 and Prometheus 3 run for real in ``tests/test_stack_real.py`` (built from
their Go modules by ``.ci/install-go-backends.sh``); Tempo and Grafana (AGPL modules, not built here) keep the
structural checks, as does the collector config here (every pipeline component defined, cross-file names and uids
agree).

Binaries come from ``PROMTOOL_BIN``, ``PROMETHEUS_BIN``, ``AMTOOL_BIN``, ``VMALERT_TOOL_BIN``,
``DOCKER_COMPOSE_BIN`` or the places ``.ci/install-stack.sh`` puts them. A missing binary skips its test,
except under ``CI=true``, where it fails.
"""

from __future__ import annotations

import json
import re
import subprocess
import urllib.parse
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.doc_pages import documented_metrics
from tests.stack_data import Server, find_binary, free_port, http, ok, shipped_queries, target_uid
from tests.stack_data import panels as all_panels

ROOT = Path(__file__).resolve().parent.parent
GRAFANA = ROOT / "grafana"
STACK = GRAFANA / "stack"
RULES = STACK / "rules" / "copilot.rules.yml"
RULES_TEST = STACK / "rules" / "copilot.rules.test.yml"
COMPOSE = ROOT / "docker-compose.yml"
DASHBOARDS = sorted((GRAFANA / "dashboards").glob("*.json"))
PROVISIONING = sorted((GRAFANA / "provisioning").rglob("*.yaml"))
DEB13_BIN = ROOT / ".cache" / "deb13" / "root" / "usr" / "bin"

# Grafana macros -> values a plain Prometheus accepts.
# Collector component types this config may use (contrib 0.165: new and deprecated spellings).
COLLECTOR_TYPES = {
    "receivers": {"otlp", "prometheus"},
    "processors": {"batch", "memory_limiter", "resource", "attributes", "transform"},
    "exporters": {
        "otlp",
        "otlp_grpc",
        "otlphttp",
        "otlp_http",
        "debug",
        "prometheus",
        "prometheusremotewrite",
    },
    "connectors": {"span_metrics", "spanmetrics", "servicegraph", "forward"},
    "extensions": {"health_check", "pprof", "zpages"},
}
PROMQL_WORDS = {
    "and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right",
    "offset", "bool", "inf", "nan",
}  # fmt: skip


def _load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def _binary(name: str, env_var: str, *candidates: Path) -> str:
    """Path of a tool binary, or skip (fail under CI=true) when it is not installed."""
    return find_binary(name, env_var, *candidates)


def _run(argv: list[str], cwd: Path = ROOT, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)


# --- the metric catalog (docs/signals.md) -------------------------------------------------------


@cache
def catalog() -> frozenset[str]:
    """Prometheus series names of the metric catalog in docs/signals.md (the table made from the code, each row's
    series as its Prometheus column names them: ``a_{bucket,sum,count}`` is the three of a histogram)."""
    names = frozenset(series for row in documented_metrics().values() for series in row.prometheus)
    assert len(names) >= 30, "the metric catalog table was not found in docs/signals.md"
    return names


def recording_rules() -> set[str]:
    return {r["record"] for g in _load_yaml(RULES)["groups"] for r in g["rules"] if "record" in r}


def metric_names(expr: str) -> set[str]:
    """Metric names referenced by a PromQL expression (not functions, labels or keywords)."""
    s = re.sub(r'"(?:[^"\\]|\\.)*"' + r"|'(?:[^'\\]|\\.)*'", '""', expr)
    s = re.sub(r"\{[^}]*\}", " ", s)
    s = re.sub(r"\[[^\]]*\]", " ", s)
    s = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", s)
    s = re.sub(r"\boffset\s+-?[0-9smhdwy]+", " ", s)
    s = re.sub(r"(?<![\w:])\d+(?:\.\d+)?(?:[eE][+-]?\d+)?", " ", s)
    names = set()
    for match in re.finditer(r"[A-Za-z_:][\w:]*", s):
        if s[match.end() :].lstrip().startswith("("):
            continue  # a function or aggregation
        if match.group(0).lower() not in PROMQL_WORDS:
            names.add(match.group(0))
    return names


def test_metric_names_extraction() -> None:
    expr = (
        'sum by (le) (rate(a_bucket{le=~"25|25.0"}[5m])) / on (job) group_left () b_total offset 10m'
        " or vector(0) * 1e9 + absent(c) > bool 0.5"
    )
    assert metric_names(expr) == {"a_bucket", "b_total", "c"}


def test_catalog_parses() -> None:
    names = catalog()
    for expected in (
        "github_copilot_agent_turn_count_bucket",
        "copilot_otel_live_max_turns",
        "copilot_otel_runaway_detections_total",
        "copilot_otel_export_last_success_seconds",
        "gen_ai_client_inference_usage_cache_read_input_tokens_total",
        "gen_ai_client_inference_operation_output_tokens_sum",
    ):
        assert expected in names


# --- every PromQL expression we ship ------------------------------------------------------------


def dashboard_queries() -> list[tuple[str, str]]:
    """(where, PromQL) of every Prometheus target of every dashboard panel."""
    return [(q.where, q.expr) for q in shipped_queries() if q.kind in ("instant", "range")]


def shipped_promql() -> list[tuple[str, str]]:
    """(where, PromQL with Grafana macros substituted) for dashboards, alert and recording rules,
    Grafana-managed alert rules and the Tempo datasource's traces-to-metrics queries."""
    return [(q.where, q.expr) for q in shipped_queries()]


def test_every_query_is_found() -> None:
    queries = shipped_promql()
    assert len(dashboard_queries()) >= 50
    assert len(queries) >= 70
    for where, expr in queries:
        assert "$" not in expr, f"{where}: unsubstituted variable in {expr!r}"


def test_queries_use_only_catalog_metrics() -> None:
    known = catalog() | recording_rules()
    unknown = {}
    for where, expr in shipped_promql():
        if missing := metric_names(expr) - known:
            unknown[where] = sorted(missing)
    assert not unknown, f"metric names not in docs/signals.md's catalog: {unknown}"


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Prometheus on 127.0.0.1 with our rules loaded and no scrape targets; yields its URL."""
    binary = _binary("prometheus", "PROMETHEUS_BIN")
    workdir = tmp_path_factory.mktemp("prometheus")
    config = workdir / "prometheus.yml"
    config.write_text(yaml.safe_dump({"global": {"evaluation_interval": "1m"}, "rule_files": [str(RULES)]}))
    url = f"http://127.0.0.1:{free_port()}"
    server = Server(
        "prometheus",
        [binary, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'data'}",
         f"--web.listen-address={url[7:]}"],
        workdir / "prometheus.log",
    )  # fmt: skip
    try:
        server.wait_ready(lambda: ok(f"{url}/-/ready"), 30)
        yield url
    finally:
        server.stop(10)


@pytest.mark.stack
def test_promql_accepted_by_prometheus(prometheus: str) -> None:
    errors = {}
    for where, expr in shipped_promql():
        status, body = http(f"{prometheus}/api/v1/format_query?" + urllib.parse.urlencode({"query": expr}))
        if status != 200:
            errors[where] = f"format_query {status}: {body}"
            continue
        status, body = http(f"{prometheus}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
        if status != 200 or body.get("status") != "success":
            errors[where] = f"query {status}: {body}"
    assert not errors, json.dumps(errors, indent=2)


@pytest.mark.stack
def test_prometheus_loads_the_rules(prometheus: str) -> None:
    status, body = http(f"{prometheus}/api/v1/rules")
    assert status == 200
    loaded = {rule["name"] for group in body["data"]["groups"] for rule in group["rules"]}
    shipped = {r.get("alert") or r["record"] for g in _load_yaml(RULES)["groups"] for r in g["rules"]}
    assert loaded == shipped


@pytest.mark.stack
def test_format_query_rejects_garbage(prometheus: str) -> None:
    """The syntax check is real: a broken expression is refused."""
    query = urllib.parse.urlencode({"query": "sum(rate(copilot_otel_lines_read_total[5m])"})
    status, body = http(f"{prometheus}/api/v1/format_query?{query}")
    assert status == 400, body


# --- Prometheus rules: promtool ------------------------------------------------------------------

EXPECTED_ALERTS = {
    "CopilotPromptTooManyTurns",
    "CopilotRunawayLivePrompt",
    "CopilotIdenticalToolCallStreak",
    "CopilotToolErrorStreak",
    "CopilotRunawayDetected",
    "CopilotTokenBurnRate",
    "CopilotOtelExportBacklogGrowing",
    "CopilotOtelNotExporting",
    "CopilotOtelNoTelemetry",
}


def test_rules_define_the_expected_alerts() -> None:
    rules = [r for g in _load_yaml(RULES)["groups"] for r in g["rules"]]
    alerts = {r["alert"]: r for r in rules if "alert" in r}
    assert set(alerts) == EXPECTED_ALERTS
    for name, rule in alerts.items():
        assert rule["labels"]["severity"] in {"info", "warning", "critical"}, name
        assert rule["annotations"]["summary"], name


def test_rule_tests_cover_firing_and_silent_cases() -> None:
    firing: set[str] = set()
    silent: set[str] = set()
    for test in _load_yaml(RULES_TEST)["tests"]:
        for case in test.get("alert_rule_test", []):
            (firing if case.get("exp_alerts") else silent).add(case["alertname"])
    assert firing == EXPECTED_ALERTS, f"alerts without a firing case: {EXPECTED_ALERTS - firing}"
    assert silent == EXPECTED_ALERTS, f"alerts without a silent case: {EXPECTED_ALERTS - silent}"


@pytest.mark.stack
def test_promtool_check_rules() -> None:
    promtool = _binary("promtool", "PROMTOOL_BIN")
    result = _run([promtool, "check", "rules", str(RULES)])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


@pytest.mark.stack
def test_promtool_test_rules() -> None:
    promtool = _binary("promtool", "PROMTOOL_BIN")
    result = _run([promtool, "test", "rules", RULES_TEST.name], cwd=RULES_TEST.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


@pytest.mark.stack
def test_vmalert_tool_unittest(tmp_path: Path) -> None:
    """The same rule tests pass on VictoriaMetrics (the OTLP-push backend of the data tests): promtool's
    format with `metricsql_expr_test` and a `groupname` per alert case."""
    vmalert_tool = _binary("vmalert-tool", "VMALERT_TOOL_BIN", DEB13_BIN / "vmalert-tool")
    group_of = {
        r["alert"]: g["name"] for g in _load_yaml(RULES)["groups"] for r in g["rules"] if "alert" in r
    }
    tests = _load_yaml(RULES_TEST)
    tests["rule_files"] = [str(RULES)]
    for test in tests["tests"]:
        if "promql_expr_test" in test:
            test["metricsql_expr_test"] = test.pop("promql_expr_test")
        for case in test.get("alert_rule_test", []):
            case["groupname"] = group_of[case["alertname"]]
    (tmp_path / "vm.test.yml").write_text(yaml.safe_dump(tests))
    result = _run([vmalert_tool, "unittest", "--files=vm.test.yml"], cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.stack
def test_promtool_check_config(tmp_path: Path) -> None:
    """prometheus.yml targets Prometheus 3. Promtool 2.x does not know the `otlp:` block; then the file
    is checked without it (and the block structurally), with the rule files pointed at the repo."""
    promtool = _binary("promtool", "PROMTOOL_BIN")
    config = _load_yaml(STACK / "prometheus.yml")
    assert config["otlp"]["promote_resource_attributes"] == [
        "service.name",
        "service.instance.id",
        "host.name",
        "user.name",
    ]
    assert config["storage"]["tsdb"]["out_of_order_time_window"]
    assert config["rule_files"] == ["/etc/prometheus/rules/*.rules.yml"]
    result = _run([promtool, "check", "config", str(STACK / "prometheus.yml")])
    if result.returncode != 0:
        assert "field otlp not found" in result.stdout + result.stderr, result.stdout + result.stderr
        del config["otlp"]
    config["rule_files"] = [str(RULES.parent / "*.rules.yml")]
    local = tmp_path / "prometheus.yml"
    local.write_text(yaml.safe_dump(config))
    result = _run([promtool, "check", "config", str(local)])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 12 rules found" in result.stdout, result.stdout


@pytest.mark.stack
def test_amtool_check_config() -> None:
    amtool = _binary("amtool", "AMTOOL_BIN")
    result = _run([amtool, "check-config", str(STACK / "alertmanager.yml")])
    assert result.returncode == 0, result.stdout + result.stderr


# --- docker-compose.yml --------------------------------------------------------------------------


def _compose() -> dict[str, Any]:
    compose = _load_yaml(COMPOSE)
    assert isinstance(compose, dict)
    return compose


@pytest.mark.stack
@pytest.mark.parametrize("profiles", [[], ["jaeger", "phoenix"]], ids=["default", "all-profiles"])
def test_docker_compose_config(profiles: list[str]) -> None:
    compose = _binary("docker-compose", "DOCKER_COMPOSE_BIN", DEB13_BIN / "docker-compose")
    argv = [compose, "-f", str(COMPOSE)]
    for profile in profiles:
        argv += ["--profile", profile]
    result = _run([*argv, "config", "--quiet"])
    assert result.returncode == 0, result.stdout + result.stderr


def test_compose_services_ports_images_and_mounts() -> None:
    services = _compose()["services"]
    assert {"copilot-otel", "otel-collector", "tempo", "prometheus", "alertmanager", "grafana", "jaeger",
            "phoenix"} <= set(services)  # fmt: skip
    assert services["jaeger"]["profiles"] == ["jaeger"]
    assert services["phoenix"]["profiles"] == ["phoenix"]
    for name, service in services.items():
        image = service.get("image", "")
        tag = image.rsplit(":", 1)[1] if ":" in image else ""
        assert tag and tag != "latest", f"{name}: image {image!r} is not pinned"
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name}: port {port} not bound to 127.0.0.1"
        for volume in service.get("volumes", []):
            source = volume.split(":", 1)[0]
            if source.startswith("./"):
                assert (ROOT / source).exists(), f"{name}: mounted {source} does not exist"
    prometheus_cmd = services["prometheus"]["command"]
    for flag in ("--web.enable-otlp-receiver", "--web.enable-remote-write-receiver",
                 "--enable-feature=exemplar-storage"):  # fmt: skip
        assert flag in prometheus_cmd
    sidecar = services["copilot-otel"]
    assert sidecar["build"]["context"] == "."
    assert (ROOT / sidecar["build"]["dockerfile"]).is_file()
    assert sidecar["environment"]["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://otel-collector:4318"
    assert sidecar["environment"]["COPILOT_OTEL_STATE_DIR"] == "/var/lib/copilot-otel"
    assert "${HOME}/.copilot/session-state:/home/copilot/.copilot/session-state:ro" in sidecar["volumes"]
    assert "copilot-otel-state:/var/lib/copilot-otel" in sidecar["volumes"]
    assert "copilot-otel-state" in _compose()["volumes"]


def _host(endpoint: str) -> str:
    parsed = urllib.parse.urlsplit(endpoint if "://" in endpoint else f"//{endpoint}")
    return parsed.hostname or ""


# --- OTel Collector, Tempo (structure; the Collector runs in test_stack_real.py) ------------------------


def _resolve_env_default(value: Any) -> Any:
    """`${env:NAME:-default}` as the collector resolves it when NAME is unset (default parsed as YAML)."""
    if isinstance(value, str) and (m := re.fullmatch(r"\$\{env:\w+:-(.*)\}", value)):
        return yaml.safe_load(m.group(1))
    return value


def test_collector_pipelines_reference_defined_components() -> None:
    config = _load_yaml(STACK / "otel-collector.yaml")
    services = set(_compose()["services"])
    service = config["service"]
    for ext in service.get("extensions", []):
        assert ext in config["extensions"], f"extension {ext} not defined"
    used: dict[str, set[str]] = {"receivers": set(), "processors": set(), "exporters": set()}
    connector_roles: dict[str, set[str]] = {}
    for name, pipeline in service["pipelines"].items():
        assert name.split("/")[0] in {"traces", "metrics", "logs"}, name
        for kind in ("receivers", "processors", "exporters"):
            for component in _resolve_env_default(pipeline.get(kind, [])):
                if component in config.get("connectors", {}) and kind != "processors":
                    connector_roles.setdefault(component, set()).add(kind)
                    continue
                assert component in config.get(kind, {}), (
                    f"pipeline {name}: {kind[:-1]} {component} not defined"
                )
                used[kind].add(component)
    for connector, roles in connector_roles.items():
        assert roles == {"receivers", "exporters"}, f"connector {connector} must be exporter and receiver"
    for kind, known in COLLECTOR_TYPES.items():
        for component in config.get(kind) or {}:
            assert component.split("/")[0] in known, f"unknown {kind[:-1]} type: {component}"
    # Exporter hosts are compose services; the optional ones belong to the profiles.
    for name, exporter in config["exporters"].items():
        endpoint = exporter.get("endpoint") or exporter.get("traces_endpoint")
        if endpoint and name.split("/")[0] != "prometheus":  # that one listens (a scrape target)
            assert _host(endpoint) in services, f"exporter {name}: unknown host in {endpoint}"
    assert {"otlp_grpc/jaeger", "otlp_http/phoenix"} <= set(config["exporters"])
    assert config["exporters"]["otlp_http/prometheus"]["endpoint"] == "http://prometheus:9090/api/v1/otlp"
    assert used["receivers"] == {"otlp"}
    grpc = config["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"]
    http = config["receivers"]["otlp"]["protocols"]["http"]["endpoint"]
    assert (grpc, http) == ("0.0.0.0:4317", "0.0.0.0:4318")


def test_tempo_config_structure() -> None:
    config = _load_yaml(STACK / "tempo.yaml")
    services = set(_compose()["services"])
    assert config["server"]["http_listen_port"] == 3200
    assert config["distributor"]["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"] == "0.0.0.0:4317"
    for remote in config["metrics_generator"]["storage"]["remote_write"]:
        assert _host(remote["url"]) in services
        assert remote["url"].endswith("/api/v1/write")
    assert {"service-graphs", "span-metrics"} <= set(
        config["overrides"]["defaults"]["metrics_generator"]["processors"]
    )


def test_prometheus_and_alertmanager_targets_are_compose_services() -> None:
    config = _load_yaml(STACK / "prometheus.yml")
    services = set(_compose()["services"]) | {"localhost"}
    for am in config["alerting"]["alertmanagers"]:
        for static in am["static_configs"]:
            assert {_host(t) for t in static["targets"]} <= services
    for job in config["scrape_configs"]:
        for static in job.get("static_configs", []):
            assert {_host(t) for t in static["targets"]} <= services, job["job_name"]


# --- Grafana provisioning and dashboards -----------------------------------------------------------


def _datasources() -> dict[str, dict[str, Any]]:
    doc = _load_yaml(GRAFANA / "provisioning" / "datasources" / "datasources.yaml")
    return {ds["uid"]: ds for ds in doc["datasources"]}


@pytest.mark.parametrize("path", PROVISIONING, ids=[p.name for p in PROVISIONING])
def test_provisioning_yaml_loads_and_escapes_dollars(path: Path) -> None:
    doc = _load_yaml(path)
    assert doc["apiVersion"] == 1
    # Grafana expands $VAR and ${VAR} from its environment in provisioning files; literal `$` is `$$`.
    text = "\n".join(line for line in path.read_text().splitlines() if not line.lstrip().startswith("#"))
    unescaped = re.findall(r"\$[\w{]", text.replace("$$", ""))
    assert not unescaped, f"{path.name}: unescaped $ (Grafana would expand it as an env var)"


def test_datasources_wiring() -> None:
    ds = _datasources()
    assert {"prometheus", "tempo"} <= set(ds)
    assert ds["prometheus"]["type"] == "prometheus"
    assert ds["tempo"]["type"] == "tempo"
    services = set(_compose()["services"])
    for source in ds.values():
        assert _host(source["url"]) in services, source["uid"]
    exemplars = ds["prometheus"]["jsonData"]["exemplarTraceIdDestinations"]
    assert {"name": "trace_id", "datasourceUid": "tempo"}.items() <= exemplars[0].items()
    tempo = ds["tempo"]["jsonData"]
    assert tempo["serviceMap"]["datasourceUid"] == "prometheus"
    assert tempo["tracesToMetrics"]["datasourceUid"] == "prometheus"


def test_dashboard_provider_points_at_the_mounted_folder() -> None:
    doc = _load_yaml(GRAFANA / "provisioning" / "dashboards" / "dashboards.yaml")
    (provider,) = doc["providers"]
    assert provider["type"] == "file"
    assert provider["options"]["path"] == "/var/lib/grafana/dashboards"
    assert (
        "./grafana/dashboards:/var/lib/grafana/dashboards:ro" in _compose()["services"]["grafana"]["volumes"]
    )


def test_grafana_alert_rules_mirror_prometheus_alerts() -> None:
    doc = _load_yaml(GRAFANA / "provisioning" / "alerting" / "copilot-alerts.yaml")
    rules = [rule for group in doc["groups"] for rule in group["rules"]]
    titles = [rule["title"] for rule in rules]
    uids = [rule["uid"] for rule in rules]
    assert len(set(titles)) == len(titles)
    assert len(set(uids)) == len(uids)
    assert all(len(uid) <= 40 for uid in uids)
    assert set(titles) <= EXPECTED_ALERTS
    assert {"CopilotPromptTooManyTurns", "CopilotRunawayLivePrompt", "CopilotRunawayDetected"} <= set(titles)
    for rule in rules:
        refs = {query["refId"] for query in rule["data"]}
        assert rule["condition"] in refs, rule["title"]
        for query in rule["data"]:
            assert query["datasourceUid"] in {"prometheus", "__expr__"}, rule["title"]
            if query["datasourceUid"] == "__expr__":
                assert query["model"]["expression"] in refs, rule["title"]


@pytest.mark.stack
def test_grafana_alert_exprs_pass_the_promtool_cases(tmp_path: Path) -> None:
    """The inlined PromQL of each Grafana-managed rule behaves like the Prometheus alert it mirrors: the
    alert cases of copilot.rules.test.yml (labels only) pass against a rule file made from them."""
    promtool = _binary("promtool", "PROMTOOL_BIN")
    doc = _load_yaml(GRAFANA / "provisioning" / "alerting" / "copilot-alerts.yaml")
    mirrored = []
    for rule in (rule for group in doc["groups"] for rule in group["rules"]):
        (query,) = [q for q in rule["data"] if q["datasourceUid"] == "prometheus"]
        alert = {"alert": rule["title"], "expr": query["model"]["expr"], "labels": rule["labels"]}
        if rule["for"] not in {"0s", "0m"}:
            alert["for"] = rule["for"]
        mirrored.append(alert)
    (tmp_path / "grafana.rules.yml").write_text(
        yaml.safe_dump({"groups": [{"name": "g", "rules": mirrored}]})
    )
    names = {alert["alert"] for alert in mirrored}
    tests = _load_yaml(RULES_TEST)
    tests["rule_files"] = ["grafana.rules.yml"]
    kept = []
    for test in tests["tests"]:
        test.pop("promql_expr_test", None)
        cases = [case for case in test.get("alert_rule_test", []) if case["alertname"] in names]
        for case in cases:
            for alert in case.get("exp_alerts") or []:
                alert.pop("exp_annotations", None)
        if cases:
            test["alert_rule_test"] = cases
            kept.append(test)
    tests["tests"] = kept
    (tmp_path / "grafana.rules.test.yml").write_text(yaml.safe_dump(tests))
    result = _run([promtool, "test", "rules", "grafana.rules.test.yml"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    covered = {case["alertname"] for test in kept for case in test["alert_rule_test"]}
    assert covered == names


@pytest.mark.parametrize("path", DASHBOARDS, ids=[p.name for p in DASHBOARDS])
def test_dashboard_json_lint(path: Path) -> None:
    dashboard = json.loads(path.read_text())
    uids = set(_datasources())
    assert dashboard["uid"] == path.stem
    # Fixed datasource uids; the only variables are the host and user filters (tests/test_firstrun.py).
    assert {v["name"] for v in dashboard["templating"]["list"]} == {"host", "user"}
    panels = list(all_panels(dashboard["panels"]))
    ids = [panel["id"] for panel in panels]
    assert len(ids) == len(set(ids)), "duplicate panel ids"
    for panel in panels:
        if panel["type"] in {"row", "alertlist", "text"}:
            continue
        ref_ids = [target["refId"] for target in panel["targets"]]
        assert ref_ids and all(ref_ids) and len(ref_ids) == len(set(ref_ids)), panel["title"]
        for target in panel["targets"]:
            uid = target_uid(panel, target)
            assert uid in uids, f"{panel['title']}: datasource uid {uid!r} is not provisioned"
            if uid == "tempo":
                query = target["query"]
                assert target["queryType"] == "traceql"
                assert query.startswith("{") and query.count("{") == query.count("}"), panel["title"]
                assert query.count('"') % 2 == 0, panel["title"]
    uids_seen = [json.loads(p.read_text())["uid"] for p in DASHBOARDS]
    assert len(uids_seen) == len(set(uids_seen))


def test_overview_dashboard_covers_the_brief() -> None:
    exprs = " ".join(expr for where, expr in dashboard_queries() if where.startswith("copilot-overview"))
    for name in (
        "copilot_otel_session_count_total", "copilot_otel_prompt_count_total",
        "github_copilot_agent_turn_count_bucket", "github_copilot_tool_call_count_total",
        "github_copilot_tool_call_duration_seconds_bucket", "gen_ai_client_token_usage_sum",
        "copilot_otel_premium_requests_total", "copilot_otel_nano_aiu_total",
        "github_copilot_code_lines_added_total", "copilot_otel_code_lines_removed_total",
        "copilot_otel_runaway_detections_total", "copilot_otel_live_max_turns",
        "copilot_otel_export_backlog", "copilot_otel_export_retries_total",
        "copilot_otel_lines_dropped_total", "copilot_otel_export_last_success_seconds",
    ):  # fmt: skip
        assert name in exprs, name


def test_prompts_dashboard_links_traces_and_exemplars() -> None:
    dashboard = json.loads((GRAFANA / "dashboards" / "copilot-prompts.json").read_text())
    panels = list(all_panels(dashboard["panels"]))
    tempo_queries = [t["query"] for p in panels for t in p.get("targets", []) if target_uid(p, t) == "tempo"]
    assert any('span.gen_ai.operation.name = "invoke_agent"' in q and "github.copilot.turn_count" in q
               for q in tempo_queries)  # fmt: skip
    sorts = {
        p["options"]["sortBy"][0]["displayName"]
        for p in panels
        if p.get("datasource", {}).get("uid") == "tempo"
    }
    assert {"Duration", "github.copilot.turn_count"} <= sorts
    links = json.dumps(
        [p["fieldConfig"]["overrides"] for p in panels if p.get("datasource", {}).get("uid") == "tempo"]
    )
    assert "/explore?" in links
    assert any(t.get("exemplar") for p in panels for t in p.get("targets", []))
