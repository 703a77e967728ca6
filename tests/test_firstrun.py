"""A first run that just works: what ``config``, ``doctor`` and ``run`` tell a new user, and the team setup.

Every test goes through the real entry point (``main([...])`` in-process, or the installed console script in a
subprocess or a tmux pseudo-terminal) against the real OTLP receiver; nothing of ours is mocked.
"""

from __future__ import annotations

import getpass
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from copilot_otel.cli import main
from copilot_otel.settings.config import SETTINGS
from tests.conftest import CLI_GENERATED, ROOT
from tests.doc_pages import page, section
from tests.otlp_receiver import OtlpReceiver
from tests.waiting import until

README = page("README.md")
CONFIGURATION = page("docs/configuration.md")
FAILING = CLI_GENERATED / "failing-tool"
# 2026-12-01T12:34:56.789+00:00: the local time in ISO 8601, milliseconds and offset.
TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d copilot-otel: ")


def _console_script() -> list[str]:
    script = Path(sys.executable).parent / "copilot-otel"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "copilot_otel"]


def _write_config(home: Path, text: str) -> Path:
    path = home / ".config" / "copilot-otel" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# ============================================================================== config keys and protocols
def test_readme_config_keys_are_the_real_ones() -> None:
    """Every `key` in the settings table of docs/configuration.md is a setting name, and every file key is in it."""
    table = CONFIGURATION.split("| setting (config file key) |")[1].split("\n\n")[0]
    named = {key for line in table.splitlines()[2:] for key in re.findall(r"`([a-z_]+)`", line.split("|")[1])}
    names = {setting.name for setting in SETTINGS}
    assert named <= names, named - names
    assert {s.name for s in SETTINGS if s.file} <= named
    assert "| metrics / logs |" not in CONFIGURATION


def test_a_misspelt_config_key_gets_a_did_you_mean(
    _isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write_config(_isolated_home, "metrics = false\n")
    assert main(["config"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(
        f"copilot-otel: error: Unknown key 'metrics' in config file {path}; did you mean 'metrics_enabled'?"
    ), err
    assert "\n" not in err and "Traceback" not in err
    _write_config(_isolated_home, "metrics_enabled = false\nlogs_enabled = false\n")
    assert main(["config"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^metrics_enabled +false +\(file ", out, re.M), out
    assert re.search(r"^logs_enabled +false +\(file ", out, re.M), out


@pytest.mark.parametrize("command", ["run", "replay", "doctor", "service"])
def test_help_offers_only_protocols_that_work(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    out = capsys.readouterr().out
    assert "{grpc,http/protobuf}" in out
    assert "http/json" not in out


def test_http_json_is_refused_in_one_line_saying_why(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--protocol", "http/json", "--endpoint", "http://127.0.0.1:1"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "copilot-otel: error: Expected --protocol to be one of grpc, http/protobuf (copilot-otel does not send "
        "OTLP/JSON; every collector accepts http/protobuf), got 'http/json'\n"
    )


# ============================================================================== content capture
def test_config_shows_the_content_capture_state(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["config"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("content_capture"))
    assert "off: no prompt, response, tool argument or tool result is exported  (default)" in row
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_AND_EVENT")
    monkeypatch.setenv("COPILOT_OTEL_CAPTURE_TOOL_RESULTS", "false")
    assert main(["config", "--endpoint", "http://user:pw@collector.example:4318"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("content_capture"))
    assert (
        "ON: prompts, responses and tool arguments leave this machine on spans and log events to "
        "http://***@collector.example:4318"
    ) in row
    assert (
        "(env OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_AND_EVENT, "
        "COPILOT_OTEL_CAPTURE_TOOL_RESULTS=false)"
    ) in row
    assert "pw" not in row


def test_config_says_when_event_only_capture_has_nowhere_to_go(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "EVENT_ONLY")
    monkeypatch.setenv("COPILOT_OTEL_LOGS", "false")
    assert main(["config"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("content_capture"))
    assert "off: " in row and "logs_enabled is false" in row


def test_doctor_shows_the_content_capture_state(
    receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["doctor", "--endpoint", receiver.http_endpoint]) == 0
    out = capsys.readouterr().out
    assert "ok   content capture: off: no prompt, response, tool argument or tool result is exported" in out
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    assert main(["doctor", "--endpoint", receiver.http_endpoint]) == 0  # a warning, not a failure
    out = capsys.readouterr().out
    assert (
        "warn content capture: ON: prompts, responses, tool arguments and tool results leave this machine on "
        f"spans to {receiver.http_endpoint}"
    ) in out
    assert "unset OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT" in out


# ============================================================================== doctor: every signal
def test_doctor_sends_a_span_a_log_event_and_a_metric_and_prints_the_trace_id(
    receiver: OtlpReceiver, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["doctor", "--endpoint", receiver.http_endpoint]) == 0
    out = capsys.readouterr().out
    span = receiver.wait_for_spans(1)[0]
    assert f"; trace id {span['trace_id']} " in out
    assert "ok   test log event: accepted" in out
    assert "ok   test metric: accepted" in out
    receiver.wait_for(lambda r: bool(r.logs()) and bool(r.metrics()))
    [event] = receiver.logs()
    assert event["event_name"] == "copilot_otel.doctor"
    assert (event["trace_id"], event["span_id"]) == (span["trace_id"], span["span_id"])
    assert [m["name"] for m in receiver.metrics()] == ["copilot_otel.doctor.probes"]


@pytest.mark.parametrize("signal_name", ["metrics", "logs"])
def test_doctor_fails_when_the_backend_refuses_a_signal(
    signal_name: str, receiver: OtlpReceiver, capsys: pytest.CaptureFixture[str]
) -> None:
    receiver.fail_next(20, "bad_request", signal=signal_name)  # type: ignore[arg-type]
    assert main(["doctor", "--endpoint", receiver.http_endpoint]) == 1
    out = capsys.readouterr().out
    what = "test metric" if signal_name == "metrics" else "test log event"
    line = next(line for line in out.splitlines() if line.startswith(f"FAIL {what}:"))
    assert "HTTP 400" in line
    assert f"the collector takes traces but not {signal_name}" in line
    assert f"COPILOT_OTEL_{signal_name.upper()}=false" in line
    assert "All checks passed" not in out and out.rstrip().endswith("1 check failed.")
    assert receiver.spans(), "the traces themselves went through"


def test_doctor_skips_signals_that_are_off(
    receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A traces-only backend set up as the README says passes (Phoenix: metrics and logs off)."""
    receiver.fail_next(20, "bad_request", signal="metrics")
    receiver.fail_next(20, "bad_request", signal="logs")
    monkeypatch.setenv("COPILOT_OTEL_METRICS", "false")
    monkeypatch.setenv("COPILOT_OTEL_LOGS", "false")
    assert main(["doctor", "--endpoint", receiver.http_endpoint]) == 0
    out = capsys.readouterr().out
    assert "ok   test log event: not sent: log events are off" in out
    assert "ok   test metric: not sent: metrics are off" in out
    assert receiver.requests.get("metrics", 0) == 0 and receiver.requests.get("logs", 0) == 0


def test_doctor_flags_an_endpoint_with_the_traces_path(
    receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["doctor", "--endpoint", f"{receiver.http_endpoint}/v1/traces"]) == 1
    out = capsys.readouterr().out
    assert (
        f"FAIL endpoint: {receiver.http_endpoint}/v1/traces (flag --endpoint) ends in /v1/traces — give the "
        f"base URL {receiver.http_endpoint}"
    ) in out
    # The per-signal variable is a full URL by definition: not flagged, and it works.
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"{receiver.http_endpoint}/v1/traces")
    assert main(["doctor"]) == 0, capsys.readouterr().out


# ============================================================================== the daemon's log
def test_the_daemon_log_has_timestamps_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    log = tmp_path / "stderr.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            [*_console_script(), "run", "--state-dir", str(tmp_path / "state")],
            stdout=fh,
            stderr=fh,
            env={**os.environ, "COPILOT_OTEL_METRICS": "false"},
        )
        try:
            until(lambda: " following " in log.read_text(), 30, "the following line")
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0
    lines = log.read_text().splitlines()
    assert lines and all(TIMESTAMP.match(line) for line in lines), lines


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_the_daemon_log_has_no_timestamps_on_a_terminal(tmp_path: Path) -> None:
    import psutil

    tmux = shutil.which("tmux")
    assert tmux is not None
    conf = tmp_path / "tmux.conf"
    conf.write_text("set -g remain-on-exit on\nset -g status off\n")
    base = [tmux, "-L", f"copilot-otel-firstrun-{os.getpid()}", "-f", str(conf)]
    # The daemon runs under a shell that waits for it and prints its exit status on the terminal: tmux 3.3a
    # sometimes leaves a pane's exited process a zombie for good (seen once in ~15 runs on a loaded machine, the
    # server never reaps it), so the pane's own "dead" flag cannot say whether or how the daemon ended.
    daemon = " ".join(
        "'" + part + "'" for part in [*_console_script(), "run", "--state-dir", str(tmp_path / "state")]
    )
    command = f'sh -c \'"$@"; echo "exit status $?"\' sh {daemon}'
    env = ["-e", f"HOME={os.environ['HOME']}", "-e", "COPILOT_OTEL_METRICS=false"]
    subprocess.run(
        [*base, "new-session", "-d", "-x", "200", "-y", "50", *env, command], check=True, timeout=30
    )

    def screen() -> str:
        return subprocess.run(
            [*base, "capture-pane", "-p", "-J", "-S", "-"], capture_output=True, text=True, timeout=30
        ).stdout

    try:
        until(lambda: " following " in screen(), 30, "the following line", detail=screen)
        pane_pid = subprocess.run(
            [*base, "display-message", "-p", "#{pane_pid}"], capture_output=True, text=True, timeout=30
        ).stdout.strip()
        # Stopped the way a service manager or `kill` stops it: SIGTERM to the daemon (the shell's child).
        (child,) = psutil.Process(int(pane_pid)).children()
        child.send_signal(signal.SIGTERM)
        until(lambda: "exit status " in screen(), 60, "its exit status after SIGTERM", detail=screen)
        text = screen()
    finally:
        subprocess.run([*base, "kill-server"], capture_output=True, timeout=30)
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("Pane is dead")]
    status = lines.pop()
    assert status == "exit status 0", (status, text)
    assert all(line.startswith("copilot-otel: INFO: ") for line in lines), lines
    assert any(" following " in line for line in lines), lines


# ============================================================================== teams
def _resources(receiver: OtlpReceiver) -> list[dict[str, object]]:
    return [span["resource"] for span in receiver.spans()]


def test_user_name_is_opt_in(receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ["replay", str(FAILING), "--endpoint", receiver.http_endpoint, "--no-progress"]
    assert main(argv) == 0
    assert all("user.name" not in r and r["host.name"] for r in _resources(receiver))
    receiver.clear()
    monkeypatch.setenv("COPILOT_OTEL_INCLUDE_USER_NAME", "true")
    assert main([*argv, "--state-dir", str(Path(os.environ["HOME"]) / "s2")]) == 0
    assert {r["user.name"] for r in _resources(receiver)} == {getpass.getuser()}
    receiver.clear()
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "user.name=alice")
    assert main([*argv, "--state-dir", str(Path(os.environ["HOME"]) / "s3")]) == 0
    assert {r["user.name"] for r in _resources(receiver)} == {"alice"}


def test_the_readme_tells_a_team_how_to_set_up() -> None:
    teams = section("README.md", "## Service and teams: many machines, one collector")
    for needle in (
        "COPILOT_OTEL_INCLUDE_USER_NAME=true",
        "host.name",
        "user.name",
        "OTEL_RESOURCE_ATTRIBUTES",
    ):
        assert needle in teams, needle


DASHBOARDS = sorted((ROOT / "grafana" / "dashboards").glob("*.json"))


@pytest.mark.parametrize("path", DASHBOARDS, ids=[p.name for p in DASHBOARDS])
def test_dashboards_filter_by_host_and_user(path: Path) -> None:
    from tests.stack_data import panels, target_uid
    from tests.test_stack_static import metric_names

    dashboard = json.loads(path.read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert set(variables) == {"host", "user"}
    for name, label in (("host", "host_name"), ("user", "user_name")):
        variable = variables[name]
        assert variable["type"] == "query" and variable["datasource"]["uid"] == "prometheus"
        assert variable["includeAll"] and variable["multi"] and variable["allValue"] == ".*"
        assert label in variable["definition"]
    promote = (ROOT / "grafana" / "stack" / "prometheus.yml").read_text()
    assert "- host.name" in promote and "- user.name" in promote
    for panel in panels(dashboard["panels"]):
        for target in panel.get("targets", []):
            uid = target_uid(panel, target)
            if uid == "prometheus":
                expr = target["expr"]
                for name in metric_names(re.sub(r"\$__\w+", "1m", expr)):
                    for selector in re.findall(re.escape(name) + r"(?![\w:])(\{[^}]*\})?", expr):
                        assert 'host_name=~"$host"' in selector and 'user_name=~"$user"' in selector, (
                            panel["title"],
                            expr,
                        )
            elif uid == "tempo":
                query = target["query"]
                # By host only: TraceQL's =~ ".*" does not match spans that lack the attribute, and user.name
                # is opt-in, so "All users" would hide every trace sent without it.
                assert 'resource.host.name =~ "$host"' in query, (panel["title"], query)


@pytest.mark.parametrize("capture", [None, "true"])
def test_run_says_at_start_when_content_leaves_the_machine(tmp_path: Path, capture: str | None) -> None:
    log = tmp_path / "stderr.log"
    env = {**os.environ, "COPILOT_OTEL_METRICS": "false"}
    if capture is not None:
        env["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = capture
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            [*_console_script(), "run", "--state-dir", str(tmp_path / "state")], stdout=fh, stderr=fh, env=env
        )
        try:
            until(lambda: " following " in log.read_text(), 30, "the following line")
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0
    warned = [line for line in log.read_text().splitlines() if "WARNING" in line and "ON: prompts" in line]
    assert len(warned) == (1 if capture else 0), log.read_text()
