"""Helpers for ``tests/test_stack_backends.py``: server processes, PromQL over HTTP, the shipped queries.

Nothing here fakes a backend: the helpers start real binaries (VictoriaMetrics, vmalert, Prometheus, Arize
Phoenix) as process groups on 127.0.0.1, poll them with deadlines and stop them by process group. The
query inventory is the same as ``tests/test_stack_static.py``'s (asserted there and here), but keeps what
the static test drops: whether a dashboard target is an instant or a range query, and which queries of
the rule file are alerts (so they can be checked against alert states, not only for data).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml

from tests.waiting import until

ROOT = Path(__file__).resolve().parent.parent
GRAFANA = ROOT / "grafana"
RULES = GRAFANA / "stack" / "rules" / "copilot.rules.yml"
ALERTING = GRAFANA / "provisioning" / "alerting" / "copilot-alerts.yaml"
DATASOURCES = GRAFANA / "provisioning" / "datasources" / "datasources.yaml"
DASHBOARDS = sorted((GRAFANA / "dashboards").glob("*.json"))
CACHE = ROOT / ".cache"
DEB13_BIN = CACHE / "deb13" / "root" / "usr" / "bin"

# Grafana macros -> values for a test run that lasts a minute or two. A 1m rate window over 1 s samples is
# what Grafana's $__rate_interval gives a 15 s scrape; $__range is the dashboard's default "last 1 hour".
GRAFANA_MACROS = {
    "$__rate_interval": "1m",
    "$__interval_ms": "15000",
    "$__interval": "15s",
    "$__range_s": "3600",
    "$__range_ms": "3600000",
    "$__range": "1h",
    # The dashboards' host and user variables at their default, All (their allValue).
    "$host": ".*",
    "$user": ".*",
}

QueryKind = Literal["instant", "range", "record", "alert", "grafana-alert", "datasource"]
T = TypeVar("T")


@dataclass(frozen=True)
class Query:
    """One PromQL expression we ship, with Grafana macros substituted."""

    where: str  # "copilot-overview.json: Prompts [A]", "rules: CopilotRunawayDetected", ...
    expr: str
    kind: QueryKind
    name: str = ""  # alert or record name for rule queries


def substitute(expr: str) -> str:
    for macro, value in GRAFANA_MACROS.items():
        expr = expr.replace(macro, value)
    return expr


def panels(items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Every panel of a dashboard, rows' nested panels included."""
    for panel in items:
        yield panel
        yield from panels(panel.get("panels", []))


def target_uid(panel: dict[str, Any], target: dict[str, Any]) -> str | None:
    """The datasource uid a panel target queries (its own, else the panel's)."""
    ds = target.get("datasource") or panel.get("datasource") or {}
    return ds.get("uid") if isinstance(ds, dict) else ds


def shipped_queries() -> list[Query]:
    """Every PromQL query of every dashboard panel target, rule, Grafana-managed alert and datasource link."""
    out: list[Query] = []
    for path in DASHBOARDS:
        for panel in panels(json.loads(path.read_text())["panels"]):
            for target in panel.get("targets", []):
                if target_uid(panel, target) != "prometheus":
                    continue
                kind: QueryKind = "instant" if target.get("instant") and not target.get("range") else "range"
                out.append(
                    Query(
                        f"{path.name}: {panel['title']} [{target['refId']}]", substitute(target["expr"]), kind
                    )
                )
    for group in yaml.safe_load(RULES.read_text())["groups"]:
        for rule in group["rules"]:
            name = rule.get("alert") or rule["record"]
            out.append(
                Query(
                    f"rules: {name}", substitute(rule["expr"]), "alert" if "alert" in rule else "record", name
                )
            )
    for group in yaml.safe_load(ALERTING.read_text())["groups"]:
        for rule in group["rules"]:
            for data in rule["data"]:
                if data["datasourceUid"] == "prometheus":
                    out.append(
                        Query(
                            f"grafana alert: {rule['title']}",
                            substitute(data["model"]["expr"]),
                            "grafana-alert",
                            rule["title"],
                        )
                    )
    for ds in yaml.safe_load(DATASOURCES.read_text())["datasources"]:
        for q in ds.get("jsonData", {}).get("tracesToMetrics", {}).get("queries", []):
            expr = q["query"].replace("$$__tags", 'service_name="copilot-otel"')
            out.append(Query(f"datasource {ds['uid']}: {q['name']}", substitute(expr), "datasource"))
    return out


def fast_rules(path: Path, interval: str = "1s") -> Path:
    """A copy of the shipped rule file whose groups are evaluated every ``interval`` (expressions, ``for``,
    labels and annotations untouched), so a rule engine reacts within a test's lifetime."""
    doc = yaml.safe_load(RULES.read_text())
    for group in doc["groups"]:
        group["interval"] = interval
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


# --- binaries ----------------------------------------------------------------------------------------------


def missing(reason: str) -> None:
    """Skip the test, or fail it under ``CI=true`` (where every backend must be installed)."""
    import pytest

    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def find_binary(name: str, env_var: str, *candidates: Path) -> str:
    """``$env_var``, the first executable candidate, or ``name`` on PATH; else skip (fail when CI=true)."""
    path = os.environ.get(env_var)
    if path:
        if not os.access(path, os.X_OK):
            import pytest

            pytest.fail(f"{env_var}={path!r} is not an executable")
        return path
    for candidate in candidates:
        if os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which(name)
    if found:
        return found
    missing(f"{name} not found (set {env_var} or run .ci/install-stack.sh --all)")
    raise AssertionError("unreachable")


# --- processes ---------------------------------------------------------------------------------------------


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """A child process in its own process group, its output in ``log``; ``stop()`` ends the whole group."""

    def __init__(
        self,
        name: str,
        argv: list[str],
        log: Path,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.argv = argv
        self.log = log
        self._log_fh = log.open("wb")
        self.proc = subprocess.Popen(
            argv,
            stdout=self._log_fh,
            stderr=subprocess.STDOUT,
            env=dict(env or os.environ),
            cwd=cwd,
            start_new_session=True,
        )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_ready(self, probe: Callable[[], bool], timeout_s: float) -> None:
        """Until ``probe`` answers true (a refused connection is not yet); fails at once if the server exited."""

        def ready() -> bool:
            try:
                if probe():
                    return True
            except OSError:
                pass
            if not self.alive():
                raise AssertionError(
                    f"{self.name} exited with {self.proc.returncode}:\n{self.output()[-4000:]}"
                )
            return False

        until(ready, timeout_s, f"{self.name} ready", detail=lambda: self.output()[-4000:], poll_s=0.2)

    def stop(self, timeout_s: float = 15.0) -> int | None:
        """SIGTERM the process group, SIGKILL it after ``timeout_s``; returns the exit code."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        # Children that outlived the leader (none expected) go too.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self._log_fh.close()
        return self.proc.returncode


def copilot_otel(*args: str) -> list[str]:
    """argv running the installed package's CLI with this interpreter (the editable install under test)."""
    return [sys.executable, "-m", "copilot_otel", *args]


def wait_for(what: str, probe: Callable[[], T | None], timeout_s: float, interval_s: float = 0.25) -> T:
    """Poll ``probe`` until it returns something truthy (a server not answering yet, or answering without the
    data, is not yet); at the deadline, fail naming ``what`` and the last answer."""
    last: list[T | Exception | None] = [None]

    def answer() -> T | None:
        try:
            value = probe()
        except (OSError, KeyError, ValueError) as exc:  # server not answering yet / transient
            last[0] = exc
            return None
        last[0] = value
        return value

    got: T | None = until(answer, timeout_s, what, detail=lambda: f"last: {last[0]!r}", poll_s=interval_s)
    assert got is not None
    return got


# --- HTTP ------------------------------------------------------------------------------------------------


def http(url: str, data: bytes | None = None, timeout_s: float = 10.0) -> tuple[int, Any]:
    """GET (or POST ``data``); the body decoded as JSON when it is JSON, else text."""
    request = urllib.request.Request(url, data=data)
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            status, body = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, body = error.code, error.read()
    try:
        return status, json.loads(body)
    except ValueError:
        return status, body.decode(errors="replace")


def ok(url: str) -> bool:
    return http(url, timeout_s=2)[0] == 200


class PromAPI:
    """The Prometheus HTTP query API of Prometheus or VictoriaMetrics."""

    def __init__(self, base: str, name: str) -> None:
        self.base = base.rstrip("/")
        self.name = name

    def _get(self, path: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        status, body = http(f"{self.base}{path}?" + urllib.parse.urlencode(params))
        if status != 200 or not isinstance(body, dict) or body.get("status") != "success":
            raise QueryError(f"{self.name} {path} {params.get('query')!r}: HTTP {status}: {body}")
        return list(body["data"]["result"]) if isinstance(body["data"]["result"], list) else [body["data"]]

    def instant(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        return self._get("/api/v1/query", params)

    def range(self, expr: str, start: float, end: float, step: str = "1s") -> list[dict[str, Any]]:
        params = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": step, "nocache": "1"}
        return self._get("/api/v1/query_range", params)

    def values(self, expr: str, at: float | None = None) -> list[float]:
        return [float(sample["value"][1]) for sample in self.instant(expr, at)]

    def value(self, expr: str, at: float | None = None) -> float | None:
        """The single value of an aggregated expression, or None without data."""
        vals = self.values(expr, at)
        assert len(vals) <= 1, f"{expr!r} returned {len(vals)} series"
        return vals[0] if vals else None


def stored_since(api: PromAPI, selector: str, since: float, samples: int = 2) -> bool:
    """Whether every series of ``selector`` has at least ``samples`` samples taken since ``since`` (a wall-clock
    time): the backend has stored the values as they are now, pushed or scraped, that many times."""
    window_s = int(time.time() - since) + 1
    return bool(api.instant(f"min(count_over_time({selector}[{window_s}s])) >= {samples}"))


class QueryError(AssertionError):
    """A query the backend refused (syntax error, unknown function...)."""


# --- session logs ----------------------------------------------------------------------------------------


def session_id_of(log: Path) -> str:
    """The session id of a log: ``session.start``'s ``sessionId`` on the first line, else the file's stem."""
    first = json.loads(log.read_text(encoding="utf-8").splitlines()[0])
    return str(first.get("data", {}).get("sessionId") or log.stem)


def copy_as_session_state(logs: list[Path], root: Path) -> int:
    """Lay ``logs`` out as the CLI does (``<root>/<sessionId>/events.jsonl``, mtime kept); returns how many
    lines a tailer reads from them: complete (newline-terminated) non-empty lines. Two public logs end
    without a newline; their last line stays unread, as a line still being written would."""
    lines = 0
    for log in logs:
        target = root / session_id_of(log) / "events.jsonl"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(log, target)
        lines += sum(
            1 for line in log.read_bytes().splitlines(keepends=True) if line.strip() and line.endswith(b"\n")
        )
    return lines


def split_before_final_turn(lines: list[str]) -> tuple[list[str], list[str]]:
    """(everything before the last ``assistant.turn_start``, the final turn and ``session.shutdown``)."""
    types = [json.loads(line)["type"] for line in lines]
    cut = len(types) - 1 - types[::-1].index("assistant.turn_start")
    return lines[:cut], lines[cut:]


def append_lines(path: Path, lines: list[str], pause_s: float = 0.0, torn_every: int = 0) -> int:
    """Append ``lines`` one at a time (flushed, as the CLI writes them). With ``torn_every`` N, every N-th
    line is preceded by a torn copy of itself (its first half and a newline, as a crash mid-write leaves it);
    returns how many torn lines were written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    torn = 0
    with path.open("a", encoding="utf-8", newline="\n") as fh:
        for index, line in enumerate(lines, 1):
            if torn_every and index % torn_every == 0:
                fh.write(line[: len(line) // 2] + "\n")
                torn += 1
            fh.write(line)
            fh.flush()
            if pause_s:
                # Not a wait: paces the writer as the CLI writes, so the daemon reads a prompt that is still open.
                time.sleep(pause_s)
    return torn


# --- Phoenix REST ------------------------------------------------------------------------------------------


def phoenix_spans(base: str, project: str) -> list[dict[str, Any]]:
    """Every span of a Phoenix project (``GET /v1/projects/{name}/spans``, paged by ``next_cursor``)."""
    spans: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        params = {"limit": "1000", **({"cursor": cursor} if cursor else {})}
        status, body = http(
            f"{base}/v1/projects/{urllib.parse.quote(project)}/spans?" + urllib.parse.urlencode(params)
        )
        if status == 404:
            return []
        assert status == 200, f"GET spans of {project}: HTTP {status}: {body}"
        spans += body["data"]
        cursor = body.get("next_cursor")
        if not cursor:
            return spans


def phoenix_project_id(base: str, project: str) -> str | None:
    status, body = http(f"{base}/v1/projects")
    assert status == 200, body
    return next((p["id"] for p in body["data"] if p["name"] == project), None)


def project_name(nodeid: str) -> str:
    """A Phoenix project name from a pytest node id (letters, digits, dashes)."""
    return re.sub(r"[^A-Za-z0-9]+", "-", nodeid.split("::")[-1]).strip("-").lower()[:60]


def _selector(braced: str, bare: str, match: re.Match[str]) -> str:
    return braced if match.group(1) else bare


def with_matcher(expr: str, matcher: str) -> str:
    """``expr`` with ``matcher`` (e.g. ``test_feed="daemon"``) added to every metric selector.

    Used to look at one feed's series through an unchanged shipped expression. (It also sidesteps a
    VictoriaMetrics 1.112 quirk seen here: a name-only selector first queried before a new series of that
    name existed can keep missing the new series for tens of seconds, while a selector with a label
    matcher finds it at once.)
    """
    from tests.test_stack_static import metric_names

    for name in sorted(metric_names(expr), key=len, reverse=True):
        pattern = re.compile(r"(?<![\w:\"'])" + re.escape(name) + r"(?![\w:])(\s*\{)?")
        braced, bare = f"{name}{{{matcher},", f"{name}{{{matcher}}}"
        expr = pattern.sub(partial(_selector, braced, bare), expr)
    return expr
