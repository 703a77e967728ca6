"""The promises of the README and the docs/ pages, each held by the real program: a real command or a real
``copilot-otel run`` over copies of the test fixtures, in a tmp home, against the real receiver. Each test quotes
the sentence it holds and names the page that says it.

The promises other files already hold are not repeated here (tests/test_readme.py: the metric and settings tables,
the Quick start command; the others are named in the report of the review that wrote this file).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from copilot_otel.cli import main
from tests.conftest import CLI_GENERATED, replay_into
from tests.daemon_process import ROOT, DaemonProcess
from tests.doc_pages import page, says, section
from tests.otlp_receiver import OtlpReceiver
from tests.waiting import until

SESSION = "0a000001-0000-4000-8000-000000000001"


def _page_says(name: str, sentence: str) -> None:
    """The sentence a test holds is still on its page, word for word (line breaks aside)."""
    assert says(name, sentence), f"{name} no longer says: {sentence}"


def _history(tmp_path: Path, *names: str) -> Path:
    root = tmp_path / "session-state"
    for i, name in enumerate(names or ("multi-tool",)):
        shutil.copytree(CLI_GENERATED / name, root / f"0a00000{i + 1}-0000-4000-8000-00000000000{i + 1}")
    return root


def _lines_with(daemon: DaemonProcess, text: str) -> list[str]:
    return [line for line in daemon.output().splitlines() if text in line]


# ---------------------------------------------------------------- the daemon's own lines


def test_the_daemon_stops_with_one_line_saying_what_it_delivered(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    """docs/operations.md, Guarantees: "SIGTERM/SIGINT ...: stop reading, deliver what is queued within 10 s ...,
    save state, exit 0. Its last line says what was delivered and what was not". On main the last line was "stopping:
    delivering what is queued (up to 10s)" and nothing after it when everything was delivered."""
    _page_says("docs/operations.md", "exit 0. Its last line says what was delivered and what was not")
    daemon = DaemonProcess(_history(tmp_path), tmp_path / "state", receiver.http_endpoint, tmp_path / "d.log")
    daemon.start()
    daemon.until("spans", lambda: len(receiver.spans()) == 14 and len(receiver.logs()) == 4)
    assert daemon.terminate() == 0
    last = daemon.output().strip().splitlines()[-1]
    assert last.endswith("stopped: delivered 14 spans and 4 log events in this run, nothing left waiting"), (
        last
    )


def test_a_daemon_stopped_with_the_collector_down_says_what_is_left_for_the_next_start(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    """docs/operations.md, Guarantees: "(`stopped: delivered 1,204 spans and 310 log events in this run; 106 records
    were not delivered (read again at the next start)`)", and the retry line counts as every message does ("1 retry so
    far", not "1 retries so far")."""
    _page_says("docs/operations.md", "106 records were not delivered (read again at the next start)")
    receiver.stop()
    daemon = DaemonProcess(_history(tmp_path), tmp_path / "state", receiver.http_endpoint, tmp_path / "d.log")
    daemon.start()
    daemon.until("a retry", lambda: "retry so far" in daemon.output())
    assert daemon.terminate(timeout=40) == 0
    out = daemon.output()
    assert "(1 retry so far)" in out and "retries so far)" not in out.split("(1 retry so far)")[0], out[
        -2000:
    ]
    last = out.strip().splitlines()[-1]
    assert last.endswith(
        "stopped: delivered 0 spans and 0 log events in this run; 18 records were not delivered "
        "(read again at the next start)"
    ), last


def test_the_start_line_names_where_each_signal_goes(tmp_path: Path, receiver: OtlpReceiver) -> None:
    """docs/configuration.md, settings table: a signal's own ``OTEL_EXPORTER_OTLP_<SIGNAL>_ENDPOINT`` "is used as
    given ...; without it the signal goes to the endpoint, with its path appended". The start line says so: on main it named
    the traces URL only, whatever the logs and metrics were sent to."""
    root = _history(tmp_path)
    base = receiver.http_endpoint.rstrip("/")
    shared = DaemonProcess(
        root, tmp_path / "s1", base, tmp_path / "a.log", env={"COPILOT_OTEL_METRICS": "true"}
    ).start()
    assert shared.terminate() == 0
    [line] = _lines_with(shared, " following ")
    assert f"→ OTLP/HTTP {base} (/v1/traces, /v1/logs, /v1/metrics) (state in " in line, line

    split = DaemonProcess(
        root,
        tmp_path / "s2",
        base,
        tmp_path / "b.log",
        env={
            "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "http://127.0.0.1:9/otel/logs",
            "COPILOT_OTEL_METRICS": "false",
        },
    ).start()
    assert split.terminate() == 0
    [line] = _lines_with(split, " following ")
    assert (
        f"→ OTLP/HTTP traces to {base}/v1/traces, logs to http://127.0.0.1:9/otel/logs; metrics off (state in "
        in line
    ), line


def test_a_corrupt_state_under_backfill_none_says_what_really_happens(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    """README.md, Quick start: "`--backfill none` starts with what is written from now on". With a corrupt state.db
    main said "Starting empty: every session file is read again from the start", which under `--backfill none`
    is untrue: nothing already on disk is read again."""
    _page_says("README.md", "`--backfill none` starts with what is written from now on")
    state = tmp_path / "state"
    state.mkdir()
    (state / "state.db").write_bytes(b"this is not a database, it only has its name" * 100)
    daemon = DaemonProcess(
        _history(tmp_path), state, receiver.http_endpoint, tmp_path / "d.log", "--backfill", "none"
    ).start()
    status = state / "status.json"  # the first scan compared: what would be read again is read by then
    daemon.until("a scan", lambda: status.exists() and json.loads(status.read_text())["scans"] >= 1)
    assert daemon.terminate() == 0
    out = daemon.output()
    [said] = _lines_with(daemon, "is corrupt")
    assert "read again from the start" not in said, said
    assert "--backfill decides what of the session files on disk is read again" in said
    assert "none: only what is written from then on" in said
    assert receiver.spans() == [] and receiver.logs() == [], out[-2000:]
    assert list(state.glob("state.db.corrupt-*")), "the corrupt database is kept"


def test_a_traces_only_backend_the_daemon_names_each_refused_signal_once_and_keeps_sending_traces(
    tmp_path: Path,
) -> None:
    """README.md, Quick start: "Sending straight to a traces-only backend such as Arize Phoenix ...: the daemon logs
    each once and keeps exporting traces". The collector's answer is a protobuf ``google.rpc.Status``, as the
    OTLP specification says: its message is shown, not its bytes (main showed "HTTP 404 \u2408\u240c\u2412$this
    server ...", the body's framing bytes as control pictures)."""
    _page_says("README.md", "the daemon logs each once and keeps exporting traces")
    with OtlpReceiver(accept_only={"traces"}) as phoenix:
        daemon = DaemonProcess(
            _history(tmp_path),
            tmp_path / "state",
            phoenix.http_endpoint,
            tmp_path / "d.log",
            env={"COPILOT_OTEL_METRICS": "true", "OTEL_METRIC_EXPORT_INTERVAL": "300"},
        ).start()
        daemon.until("the spans", lambda: len(phoenix.spans()) == 14)
        daemon.until("metrics refused", lambda: "accept metrics" in daemon.output())
        refused = len(phoenix.request_log("metrics"))
        daemon.until(  # several more metric exports, each refused: still one line
            "more metric exports", lambda: len(phoenix.request_log("metrics")) >= refused + 3
        )
        assert daemon.terminate() == 0
    logs = _lines_with(daemon, "does not accept logs")
    metrics = _lines_with(daemon, "does not accept metrics")
    assert len(logs) == 1 and len(metrics) == 1, daemon.output()[-3000:]
    assert "HTTP 404 this server does not serve OTLP logs from http://127.0.0.1:" in logs[0], logs
    assert "set COPILOT_OTEL_LOGS=false" in logs[0] and "set COPILOT_OTEL_METRICS=false" in metrics[0]
    assert "\u2408" not in daemon.output()  # no control picture: the Status was decoded


def test_run_warns_once_at_start_which_content_leaves_the_machine(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    """README.md, Privacy: "`copilot-otel config` (the `content_capture` row), `copilot-otel doctor` ... and
    `copilot-otel run` (a warning at start while capture is on) each say in one line which content leaves the
    machine, on what, and where to". config's and doctor's are held in test_firstrun; this is run's, the same
    sentence."""
    _page_says(
        "README.md", "`copilot-otel run` (a warning at start while capture is on) each say in one line"
    )
    base = receiver.http_endpoint.rstrip("/")
    env = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}
    daemon = DaemonProcess(_history(tmp_path), tmp_path / "state", base, tmp_path / "d.log", env=env).start()
    assert daemon.terminate() == 0
    [warned] = _lines_with(daemon, "content capture")
    assert (
        " WARNING: content capture: ON: prompts, responses, tool arguments and tool results leave this machine "
        in (warned)
    )
    assert f"on spans to {base} " in warned, warned


def test_the_prometheus_endpoint_binds_to_loopback_unless_told(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    """docs/signals.md, Metrics: "`copilot-otel run --prometheus-port 9464` serves them for scraping (bound to
    127.0.0.1 unless `--prometheus-host` says otherwise)"; "Prometheus names: dots become `_`, ..., counters get `_total`"."""
    _page_says("docs/signals.md", "(bound to 127.0.0.1 unless `--prometheus-host` says otherwise)")
    daemon = DaemonProcess(
        _history(tmp_path),
        tmp_path / "state",
        receiver.http_endpoint,
        tmp_path / "d.log",
        "--prometheus-port",
        "0",
    ).start()
    try:
        daemon.until("the Prometheus line", lambda: "Prometheus metrics on " in daemon.output())
        [said] = _lines_with(daemon, "Prometheus metrics on ")
        url = said.split("Prometheus metrics on ", 1)[1].split()[0]
        assert url.startswith("http://127.0.0.1:") and url.endswith("/metrics"), said
        daemon.until("spans", lambda: len(receiver.spans()) == 14)
        scraped = [""]

        def counted() -> str | None:
            with urllib.request.urlopen(url, timeout=5) as answer:
                scraped[0] = answer.read().decode()
            return scraped[0] if "copilot_otel_prompt_count_total{" in scraped[0] else None

        text = until(counted, 20, "the prompt counter scraped", detail=lambda: scraped[0][-2000:])
    finally:
        assert daemon.terminate() == 0
    assert "copilot_otel_prompt_count_total{" in text and "copilot_otel_lines_read_total" in text, text[
        -2000:
    ]


def test_the_instance_id_is_stable_per_machine_and_state_directory(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    """README.md, Service and teams: "`service.instance.id` (stable per machine and state directory, so restarts and
    replays do not look like new instances)": two replays and a daemon on one state directory share it, another one's differs."""
    _page_says(
        "README.md", "`service.instance.id` (stable per machine and state directory, so restarts and replays"
    )
    root = _history(tmp_path)
    session = next(root.iterdir())

    def instances() -> set[str]:
        return {span["resource"]["service.instance.id"] for span in receiver.spans()}

    seen = []
    for state in ("a", "a", "b"):
        receiver.clear()
        assert replay_into(receiver, session, extra=("--state-dir", str(tmp_path / state))) == 0
        seen.append(instances())
    receiver.clear()
    daemon = DaemonProcess(root, tmp_path / "a", receiver.http_endpoint, tmp_path / "d.log").start()
    daemon.until("spans", lambda: len(receiver.spans()) == 14)
    assert daemon.terminate() == 0
    assert all(len(ids) == 1 for ids in seen) and seen[0] == seen[1] == instances() != seen[2], seen


# ---------------------------------------------------------------- install


def test_the_install_line_works_with_a_git_file_url(tmp_path: Path) -> None:
    """README.md, Quick start: "put the URL of the repository you cloned or downloaded this from after `git+` (...,
    or `git+file:///path/to/your/clone` for a local one, work too; a test installs from a `git+file://` URL with
    pip, which pipx runs ...)". pipx and uv are not installed here: this runs the install pipx runs
    (``pip install <spec>``), from a clone of this repository's committed tree, without the dependencies (the
    Quick start's own install covers those)."""
    _page_says("README.md", "a test installs from a `git+file://` URL with pip, which pipx runs")
    line = next(ln for ln in page("README.md").splitlines() if ln.startswith("pipx install "))
    spec = line.split()[2]
    assert spec == "git+https://github.com/OWNER/copilot-otel" and "uv tool install " + spec in line
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=120)
    target = tmp_path / "installed"
    url = spec.replace("https://github.com/OWNER/copilot-otel", clone.as_uri())
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), url],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0 and "CI" not in os.environ and "Could not find a version" in done.stderr:
        pytest.skip(f"no package index here for the build backend: {done.stderr[-300:]}")
    assert done.returncode == 0, done.stderr[-3000:]
    script = target / "bin" / "copilot-otel"
    assert script.exists(), sorted(p.name for p in target.iterdir())
    ran = subprocess.run(
        [sys.executable, str(script), "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(target)},
        cwd=tmp_path,
    )
    assert ran.returncode == 0 and ran.stdout.startswith("copilot-otel "), (ran.stdout, ran.stderr)
    where = subprocess.run(
        [sys.executable, "-c", "import copilot_otel; print(copilot_otel.__file__)"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(target)},
        cwd=tmp_path,
        check=True,
    )
    assert where.stdout.strip().startswith(str(target)), "the installed copy ran, not this checkout"


# ---------------------------------------------------------------- commands without a daemon


def test_the_python_example_runs_as_written(tmp_path: Path) -> None:
    """docs/reports-and-live.md, From Python: the example, with ``<id>`` a real session's folder, runs and says what
    the session did."""
    code = section("docs/reports-and-live.md", "## From Python").split("```python\n", 1)[1].split("```", 1)[0]
    sid = "0a000003-0000-4000-8000-000000000003"
    shutil.copytree(CLI_GENERATED / "failing-tool", Path.home() / ".copilot" / "session-state" / sid)
    assert "~/.copilot/session-state/<id>" in code
    out = io.StringIO()
    namespace: dict[str, object] = {}
    with contextlib.redirect_stdout(out):
        exec(compile(code.replace("<id>", sid), "docs/reports-and-live.md", "exec"), namespace)
    assert out.getvalue() == "completed 5 6000 gpt-4.1\n"
    assert namespace["failed"] == ["view", "run_tests", "edit"]  # the three failed tool calls, by name


def test_live_json_has_the_keys_the_readme_lists(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/reports-and-live.md, Live view: "`--json` prints one JSON object per refresh, one per line (keys: `time`,
    `time_zone`, `day`, `quota` {`month`, `allowance`, `used`, `left`}, `today`, `sessions` [...], `daemon`, `logs`" and
    "`copilot-otel live --json --once | jq .quota.left`" (the allowance from `COPILOT_OTEL_PREMIUM_QUOTA`)."""
    _page_says(
        "docs/reports-and-live.md",
        "(keys: `time`, `time_zone`, `day`, `quota` {`month`, `allowance`, `used`, `left`}, `today`,",
    )
    root = _history(Path.home(), "multi-tool")
    monkeypatch.setenv("COPILOT_OTEL_PREMIUM_QUOTA", "300")
    assert main(["live", "--json", "--once", "--session-state", str(root)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1
    doc = json.loads(lines[0])
    assert set(doc) == {"time", "time_zone", "day", "quota", "today", "sessions", "daemon", "logs"}
    assert set(doc["quota"]) == {"month", "allowance", "used", "left"}
    assert doc["quota"]["allowance"] == 300 and doc["quota"]["left"] == 300 - doc["quota"]["used"]


def test_show_lists_the_20_most_recently_active_sessions_and_says_how_many_more(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/reports-and-live.md: "`show` lists the 20 most recently active sessions (`--limit N`, `--limit 0` for
    all; it says how many more there are)"."""
    _page_says("docs/reports-and-live.md", "`show` lists the 20 most recently active sessions")
    root = tmp_path / "session-state"
    for i in range(22):
        shutil.copytree(CLI_GENERATED / "multi-tool", root / f"0a0000{i:02d}-0000-4000-8000-000000000000")
    assert main(["show", "--session-state", str(root)]) == 0
    out = capsys.readouterr().out
    assert "… and 2 more (of 22); --limit 0 lists them all" in out
    assert sum(1 for line in out.splitlines() if "0a0000" in line) == 20


def test_status_of_a_daemon_in_its_first_seconds_says_it_is_starting(
    tmp_path: Path, receiver: OtlpReceiver, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/operations.md, Troubleshooting: "In its first seconds a daemon has written no status yet: `status` then
    says it is starting (its lock names a live process)"."""
    _page_says("docs/operations.md", "`status` then says it is starting (its lock names a live process)")
    state = tmp_path / "state"
    daemon = DaemonProcess(_history(tmp_path), state, receiver.http_endpoint, tmp_path / "d.log").start()
    try:
        assert not (state / "status.json").exists()  # the first is written after 5 s
        assert main(["status", "--state-dir", str(state)]) == 0
    finally:
        assert daemon.terminate() == 0
    assert daemon.proc is not None
    assert (
        f"copilot-otel daemon starting (pid {daemon.proc.pid}, state in {state}); no status written yet"
        in (capsys.readouterr().out)
    )
