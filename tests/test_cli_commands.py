"""``show``, ``doctor``, ``status`` and ``service`` through their real entry points.

Every test runs ``copilot_otel.cli.main([...])`` in-process (capsys) or the installed console script in a
subprocess, on the real fixtures, against the real OTLP receiver, in a real pseudo-terminal (tmux) where the
rendering matters. Nothing of ours is mocked; the only stand-ins are at the edge: a closed port, a scripted
receiver, and a ``systemctl`` replaced by a recording shell script (or pointed at a path that does not exist).
"""

from __future__ import annotations

import itertools
import json
import os
import plistlib
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from copilot_otel.cli import main
from tests.conftest import CLI_GENERATED, ROOT, all_fixture_logs, read_events
from tests.otlp_receiver import OtlpReceiver
from tests.waiting import until

FIXTURE_LOGS = all_fixture_logs()
IDS = [p.parent.name if p.name == "events.jsonl" else p.stem for p in FIXTURE_LOGS]
FAILING = CLI_GENERATED / "failing-tool"
SUBAGENT = CLI_GENERATED / "subagent"
DOCS_CAPTURE = ROOT / "docs" / "show.txt"
SGR = re.compile(r"\x1b\[[0-9;]*m")


def _console_script() -> list[str]:
    script = Path(sys.executable).parent / "copilot-otel"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "copilot_otel"]


_events = read_events


def _session_id(folder: Path) -> str:
    starts = (e for e in _events(folder / "events.jsonl") if e["type"] == "session.start")
    return str(next(starts)["data"]["sessionId"])


def _install_sessions(home: Path, *folders: Path) -> Path:
    """Copy fixture sessions into ``~/.copilot/session-state/<session id>/`` as the Copilot CLI lays them out,
    oldest first (mtimes one minute apart, so "newest first" is well defined)."""
    root = home / ".copilot" / "session-state"
    root.mkdir(parents=True, exist_ok=True)
    base = time.time() - 3600
    for index, folder in enumerate(folders):
        target = root / _session_id(folder)
        shutil.copytree(folder, target, ignore=shutil.ignore_patterns("_capture"))
        os.utime(target / "events.jsonl", (base + 60 * index, base + 60 * index))
    return root


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _one_error_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got: {stderr!r}"
    assert lines[0].startswith("copilot-otel: error: "), lines[0]
    assert "Traceback" not in stderr
    return lines[0]


@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rich wraps at 80 columns when output is not a terminal; the assertions read whole lines."""
    monkeypatch.setenv("COLUMNS", "200")


# ============================================================================================ show
def test_show_draws_the_prompt_as_a_tree(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(FAILING)]) == 0
    out = capsys.readouterr().out
    assert "Session 0a000003-0000-4000-8000-000000000003" in out
    assert "Check the config and run the tests" in out  # the title and the prompt itself
    assert "Prompt 1/1" in out and "completed" in out
    assert "5 turns · 4 tool calls (3 failed) · 6,000 in / 200 out tokens · gpt-4.1" in out
    for turn in range(5):
        assert f"turn {turn}" in out
    assert out.count("chat gpt-4.1") == 5
    assert "✗ view" in out and "failed: Path does not exist" in out
    assert "✗ run_tests" in out and "failed: Tool 'run_tests' does not exist." in out
    assert "✗ edit" in out and "failed: No match found" in out
    assert "✓ bash" in out and "exit 3" in out  # a non-zero exit code is not a failed tool call
    assert "1,200 in / 40 out tokens" in out
    # the tree: each tool call sits under its turn
    lines = out.splitlines()
    turn0 = next(i for i, line in enumerate(lines) if "turn 0" in line)
    assert "✗ view" in lines[turn0 + 2] and lines[turn0 + 2].startswith("│   └── ")


@pytest.mark.parametrize("log", FIXTURE_LOGS, ids=IDS)
def test_show_every_fixture(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(log)]) == 0
    out = capsys.readouterr().out
    events = _events(log)
    completes = {
        e["data"].get("toolCallId"): e["data"] for e in events if e["type"] == "tool.execution_complete"
    }
    for start in (e["data"] for e in events if e["type"] == "tool.execution_start"):
        call = completes.get(start.get("toolCallId"))
        failed = call is None or call.get("success") is False
        assert f"{'✗' if failed else '✓'} {start['toolName']}" in out, start
    prompts = sum(
        1
        for e in events
        if e["type"] == "user.message" and not e.get("agentId") and not e["data"].get("source")
    )
    if prompts:
        assert "Prompt 1/" in out


def test_show_nests_sub_agents_under_their_task_call(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(SUBAGENT)]) == 0
    lines = capsys.readouterr().out.splitlines()
    task = next(i for i, line in enumerate(lines) if "✓ task" in line)
    agent = lines[task + 1]
    assert "sub-agent explore (surveyor)" in agent and "2 turns · 1 tool call" in agent
    indent = agent.index("sub-agent") - lines[task].index("✓ task")
    assert indent == 4, "the sub-agent is a child of the task call"
    glob = next(line for line in lines[task:] if "✓ glob" in line)
    assert glob.index("✓ glob") > agent.index("sub-agent"), "the sub-agent's tool call is its child"


def test_show_marks_runaway_detections(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COPILOT_OTEL_RUNAWAY_TURNS", "3")
    assert main(["show", str(FAILING)]) == 0
    out = capsys.readouterr().out
    assert "⚠ runaway detected: turns (threshold 3)" in out
    assert main(["show", str(FAILING), "--json"]) == 0
    spans = json.loads(capsys.readouterr().out)["spans"]
    root = next(s for s in spans if s["parent_span_id"] is None)
    detections = [e for e in root["events"] if e["name"] == "copilot_otel.runaway.detected"]
    assert [d["attributes"]["copilot_otel.runaway.reason"] for d in detections] == ["turns"]


def test_show_aborted_and_failed_prompts(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(CLI_GENERATED / "aborted-tool")]) == 0
    out = capsys.readouterr().out
    assert "aborted" in out and "■ aborted: user_initiated" in out
    assert "✗ bash" in out and "failed: Operation aborted" in out
    assert main(["show", str(CLI_GENERATED / "model-error")]) == 0
    out = capsys.readouterr().out
    assert "  error\n" in out
    assert "✗ query: Failed to get response from the AI model" in out


def test_show_json_prints_one_document_with_the_span_records(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(FAILING), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)  # one document: `| python -m json.tool` works
    assert document["path"] == str(FAILING / "events.jsonl") and document["session_id"]
    spans = document["spans"]
    assert len(spans) == 15  # 1 prompt + 5 turns + 5 model calls + 4 tool calls
    ids = {s["span_id"] for s in spans}
    for span in spans:
        assert set(span) >= {
            "trace_id",
            "span_id",
            "parent_span_id",
            "name",
            "start_ns",
            "end_ns",
            "attributes",
            "status",
            "events",
        }
        assert re.fullmatch(r"[0-9a-f]{32}", span["trace_id"]) and re.fullmatch(
            r"[0-9a-f]{16}", span["span_id"]
        )
        assert span["parent_span_id"] is None or span["parent_span_id"] in ids
        assert span["end_ns"] >= span["start_ns"]
    failed = sorted(s["attributes"]["gen_ai.tool.name"] for s in spans if s["status"] == "ERROR")
    assert failed == ["edit", "run_tests", "view"]
    root = next(s for s in spans if s["parent_span_id"] is None)
    assert root["name"] == "invoke_agent"
    assert "input.value" not in root["attributes"], "--json follows the capture policy (off by default)"
    assert root["events"][0]["name"] == "github.copilot.user.message"


def test_show_finds_sessions_by_id_prefix(_isolated_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _install_sessions(_isolated_home, FAILING, SUBAGENT, CLI_GENERATED / "plain-question")
    assert main(["show", "0a000003"]) == 0
    assert "Check the config and run the tests" in capsys.readouterr().out
    assert main(["show", "0a000008-0000-4000-8000-000000000008"]) == 0
    assert "sub-agent explore" in capsys.readouterr().out

    assert main(["show", "0a00000"]) == 3
    line = _one_error_line(capsys.readouterr().err)
    assert "ambiguous" in line

    assert main(["show", "deadbeef"]) == 3
    line = _one_error_line(capsys.readouterr().err)
    assert "no such file, folder or session id: 'deadbeef'" in line


def test_show_without_argument_lists_recent_sessions(
    _isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _install_sessions(_isolated_home, FAILING, SUBAGENT, CLI_GENERATED / "resumed")
    assert main(["show"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line[:2].isdigit()]
    assert len(rows) == 3
    # newest first by the events' own times (subagent 17:12:22, resumed 17:12:20, failing-tool 17:11:35), not by
    # the files' (installed in another order)
    assert "Use a helper agent to survey the files" in rows[0]
    assert "Create hello.txt with hello world" in rows[1]
    assert "Check the config and run the tests" in rows[2]
    assert rows[1].split()[-4:] == ["2", "4", "2", "0"]  # prompts, turns, tools, errors
    assert rows[2].split()[-4:] == ["1", "5", "4", "3"]
    assert "/home/dev/lab/projects/failing-tool" in rows[2]

    assert main(["show", "--limit", "1"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line[:2].isdigit()]
    assert len(rows) == 1 and "Use a helper agent" in rows[0]


def test_show_a_session_state_root_lists_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(CLI_GENERATED), "--limit", "50"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line[:2].isdigit()]
    assert len(rows) == len(list(CLI_GENERATED.glob("*/events.jsonl")))


def test_show_without_session_state(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show"]) == 3
    line = _one_error_line(capsys.readouterr().err)
    assert ".copilot/session-state does not exist" in line


_TMUX_SERVERS = itertools.count()


def _tmux_capture(tmp_path: Path, argv: list[str], width: int = 100, height: int = 60) -> tuple[str, str]:
    """Run ``argv`` in a detached tmux pane; return the screen as text and with its colours (SGR codes)."""
    tmux = shutil.which("tmux")
    assert tmux is not None
    conf = tmp_path / "tmux.conf"
    conf.write_text("set -g remain-on-exit on\nset -g status off\n")
    # A server of its own per capture: reusing one name, a capture could start while the previous server was
    # still exiting ("server exited unexpectedly", seen under load).
    socket_name = f"copilot-otel-test-{os.getpid()}-{next(_TMUX_SERVERS)}"
    base = [tmux, "-L", socket_name, "-f", str(conf)]
    command = " ".join(map(_shell_quote, argv))
    subprocess.run(
        [
            *base,
            "new-session",
            "-d",
            "-x",
            str(width),
            "-y",
            str(height),
            "-e",
            "TZ=UTC",
            "-e",
            f"HOME={os.environ['HOME']}",
            "-e",
            "COLUMNS=",
            command,
        ],
        check=True,
        timeout=30,
    )
    try:
        until(
            lambda: (
                subprocess.run(
                    [*base, "display-message", "-p", "#{pane_dead}"],
                    capture_output=True,
                    text=True,
                    timeout=30,
                ).stdout.strip()
                == "1"
            ),
            60,
            "the command to end in tmux",
        )
        # -S -: from the start of the history, in case anything scrolled off the visible screen
        plain = subprocess.run(
            [*base, "capture-pane", "-p", "-S", "-"], capture_output=True, text=True, check=True, timeout=30
        ).stdout
        colour = subprocess.run(
            [*base, "capture-pane", "-p", "-e", "-S", "-"],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout
    finally:
        subprocess.run([*base, "kill-server"], capture_output=True, timeout=30)
    keep = [line.rstrip() for line in plain.splitlines() if not line.startswith("Pane is dead")]
    while keep and not keep[-1]:
        keep.pop()
    while keep and not keep[0]:
        keep.pop(0)
    return "\n".join(keep) + "\n", colour


def _shell_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_show_in_a_real_terminal(tmp_path: Path) -> None:
    screen, colour = _tmux_capture(tmp_path, [*_console_script(), "show", str(FAILING)])
    assert screen.startswith(
        "Session 0a000003-0000-4000-8000-000000000003  Check the config and run the tests\n"
    )
    for turn in range(5):
        assert f"turn {turn}" in screen
    for tool in ("✗ view", "✓ bash", "✗ run_tests", "✗ edit"):
        assert tool in screen
    assert "failed: Path does not exist" in screen
    assert "├── turn 0" in screen and "│   └── ✗ view" in screen  # a real tree, drawn with box characters
    # the failed tool call is red on screen (SGR 31 / 91 / 38;5;1 / 38;5;9), the successful one is not
    view_line = next(line for line in colour.splitlines() if "view" in SGR.sub("", line) and "✗" in line)
    assert re.search(r"\x1b\[(?:[0-9;]*;)?(?:31|91|38;5;(?:1|9))m", view_line), repr(view_line)
    bash_line = next(line for line in colour.splitlines() if "✓" in line and "bash" in SGR.sub("", line))
    assert not re.search(r"\x1b\[(?:[0-9;]*;)?(?:31|91)m✓", bash_line)
    DOCS_CAPTURE.parent.mkdir(exist_ok=True)
    DOCS_CAPTURE.write_text(screen, encoding="utf-8")  # docs/signals.md shows this capture


# ============================================================================================ doctor
def _doctor(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["doctor", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_doctor_against_the_receiver(receiver: OtlpReceiver, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _doctor(capsys, "--endpoint", receiver.http_endpoint)
    assert code == 0, out
    assert "FAIL" not in out
    assert f"ok   endpoint: {receiver.http_endpoint} (flag --endpoint)" in out
    assert "ok   protocol: http/protobuf (default)" in out
    assert "ok   headers: not set" in out
    assert "ok   state dir: " in out and "is writable" in out
    assert f"ok   collector: 127.0.0.1:{receiver.http_port} accepts connections" in out
    assert "ok   test span: accepted by OTLP/HTTP" in out
    assert out.rstrip().endswith("All checks passed.")
    spans = receiver.wait_for_spans(1)
    assert [s["name"] for s in spans] == ["copilot-otel doctor"]
    assert spans[0]["resource"]["service.name"] == "copilot-otel"


def test_doctor_over_grpc_with_headers(
    receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.grpc_endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20topsecret")
    code, out, _ = _doctor(capsys)
    assert code == 0, out
    assert "(env OTEL_EXPORTER_OTLP_ENDPOINT)" in out
    assert "ok   protocol: grpc (env OTEL_EXPORTER_OTLP_PROTOCOL)" in out
    assert "ok   headers: set by OTEL_EXPORTER_OTLP_HEADERS (values not shown)" in out
    assert "topsecret" not in out
    assert "ok   test span: accepted by OTLP/gRPC" in out
    assert [s["name"] for s in receiver.wait_for_spans(1)] == ["copilot-otel doctor"]


def test_doctor_with_nothing_listening(capsys: pytest.CaptureFixture[str]) -> None:
    port = _closed_port()
    code, out, _ = _doctor(capsys, "--endpoint", f"http://127.0.0.1:{port}")
    assert code == 1
    assert (
        f"FAIL collector: connection refused at 127.0.0.1:{port} — is the collector running? try "
        "OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318"
    ) in out
    assert "FAIL test span: not sent" in out
    assert out.rstrip().endswith("2 checks failed.")


def test_doctor_reports_a_rejection(receiver: OtlpReceiver, capsys: pytest.CaptureFixture[str]) -> None:
    receiver.fail_next(5, "bad_request")
    code, out, err = _doctor(capsys, "--endpoint", receiver.http_endpoint)
    assert code == 1
    line = next(line for line in out.splitlines() if "test span" in line)
    assert line.startswith("FAIL test span: rejected by the collector: HTTP 400")
    assert "refused the data as invalid" in line
    assert receiver.spans() == []
    assert "dead-letter" not in err
    assert not list(Path(os.environ["HOME"]).rglob("dead-letter.jsonl")), "a rejected probe is not kept"


def test_doctor_wrong_path(receiver: OtlpReceiver, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _doctor(capsys, "--endpoint", f"{receiver.http_endpoint}/v1/traces")
    assert code == 1
    assert "HTTP 404" in out and "wrong path or port: give the base URL" in out


def test_doctor_protocol_mismatches(receiver: OtlpReceiver, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _doctor(capsys, "--endpoint", receiver.grpc_endpoint, "--timeout", "1")
    assert code == 1
    assert "that port speaks gRPC (HTTP/2 only): use --protocol grpc" in out
    code, out, _ = _doctor(
        capsys, "--endpoint", receiver.http_endpoint, "--protocol", "grpc", "--timeout", "1"
    )
    assert code == 1
    assert "that port speaks plain HTTP, not gRPC: use --protocol http/protobuf" in out
    code, out, _ = _doctor(
        capsys, "--endpoint", receiver.http_endpoint.replace("http://", "https://"), "--timeout", "1"
    )
    assert code == 1
    assert "that port speaks plain HTTP: use an http:// endpoint" in out


def test_doctor_without_an_endpoint_explains_the_embedded_file(
    _isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _install_sessions(_isolated_home, FAILING, SUBAGENT)
    code, out, _ = _doctor(capsys)
    assert code == 0, out
    state = _isolated_home / ".local" / "state" / "copilot-otel"
    assert "ok   endpoint: none set: telemetry goes to the embedded OTLP/JSON file" in out
    assert f"ok   embedded file: {state / 'otlp.jsonl'} is writable" in out
    assert "set OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318" in out
    assert f"ok   session logs: 2 sessions in {_isolated_home / '.copilot' / 'session-state'}" in out
    assert "test span" not in out


def test_doctor_reports_an_unwritable_state_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    code, out, _ = _doctor(capsys, "--state-dir", str(blocker / "state"))
    assert code == 1
    assert f"FAIL state dir: {blocker / 'state'} is not writable" in out
    assert "set --state-dir or COPILOT_OTEL_STATE_DIR" in out


def test_doctor_marks_in_a_terminal(tmp_path: Path) -> None:
    """On a terminal the marks are ✓/✗/!; piped they are ok/FAIL/warn (the tests above)."""
    import pty

    leader, follower = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "200"}
    proc = subprocess.Popen(
        [*_console_script(), "doctor", "--endpoint", f"http://127.0.0.1:{_closed_port()}"],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=env,
        close_fds=True,
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert proc.wait(timeout=60) == 1
    screen = SGR.sub("", b"".join(chunks).decode())
    assert "✓ state dir:" in screen
    assert "✗ collector: connection refused" in screen
    assert "! session logs:" in screen


# ============================================================================================ status
def _status_doc(pid: int) -> dict[str, Any]:
    now = time.time()
    return {
        "pid": pid,
        "started_at": now - 3 * 3600,
        "updated_at": now - 2,
        "files_tracked": 12,
        "sessions_open_prompts": 1,
        "backlog_spans": 40,
        "spans_exported": 12345,
        "logs_exported": 678,
        "dead_lettered": 1,
        "retries": 3,
        "last_export_ok_at": now - 5,
        "last_error": "HTTP 503 collector overloaded",
        "lines_read": 99999,
        "lines_dropped": {"invalid_json": 2},
        "values_dropped": {"bad_timestamp": 1, "out_of_range": 3},
        "detections": {"turns": 1, "tool_errors": 2},
        "destination": "OTLP/HTTP http://localhost:4318/v1/traces",
    }


def _write_status(state_dir: Path, doc: dict[str, Any]) -> None:
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / "status.json").write_text(json.dumps(doc))


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_status_of_a_running_daemon(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "state"
    _write_status(state, _status_doc(os.getpid()))
    assert main(["status", "--state-dir", str(state)]) == 0
    out = capsys.readouterr().out
    assert f"copilot-otel daemon running (pid {os.getpid()}, up 3h00m)" in out
    expected = {
        "destination": "OTLP/HTTP http://localhost:4318/v1/traces",
        "files tracked": "12",
        "open prompts": "1",
        "backlog": "40 spans waiting",
        "exported": "12,345 spans, 678 log events",
        "retries": "3",
        "dead-lettered": "1",
        "last error": "HTTP 503 collector overloaded",
        "lines read": "99,999",
        "lines dropped": "2 (invalid_json 2)",
        "values dropped": "4 (bad_timestamp 1, out_of_range 3)",
        "detections": "3 (tool_errors 2, turns 1)",
    }
    rows = {line[:15].strip(): line[15:].strip() for line in out.splitlines()[1:]}
    for key, value in expected.items():
        assert rows[key] == value, (key, out)
    assert re.match(r"[5-9]s ago \(", rows["last export"]), rows["last export"]


def test_status_when_the_daemon_is_gone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "state"
    pid = _dead_pid()
    _write_status(state, _status_doc(pid))
    assert main(["status", "--state-dir", str(state)]) == 1
    out = capsys.readouterr().out
    assert (
        f"No copilot-otel daemon is running (process {pid} named in {state / 'status.json'} is gone)" in out
    )
    assert "Last status it wrote:" in out
    assert "OTLP/HTTP http://localhost:4318/v1/traces" in out


def test_status_without_a_daemon(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status"]) == 1
    out = capsys.readouterr().out
    assert "No copilot-otel daemon is running (no status in " in out
    assert "copilot-otel run" in out


def test_status_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "state"
    doc = _status_doc(os.getpid())
    _write_status(state, doc)
    assert main(["status", "--state-dir", str(state), "--json"]) == 0
    captured = capsys.readouterr()
    shown = json.loads(captured.out)
    assert shown.pop("agent_logs")
    assert shown == doc
    assert captured.err == ""
    doc["pid"] = _dead_pid()
    _write_status(state, doc)
    assert main(["status", "--state-dir", str(state), "--json"]) == 1
    captured = capsys.readouterr()
    shown = json.loads(captured.out)
    assert shown.pop("agent_logs")
    assert shown == doc
    assert "No copilot-otel daemon is running" in captured.err


def test_status_with_a_broken_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "status.json").write_text("{not json")
    assert main(["status", "--state-dir", str(state)]) == 4
    assert "is not valid JSON" in _one_error_line(capsys.readouterr().err)


# ============================================================================================ service
def _unit_sections(text: str) -> dict[str, list[tuple[str, str]]]:
    """A unit file as ``{section: [(key, value), ...]}`` (keys repeat, so not configparser's dict)."""
    sections: dict[str, list[tuple[str, str]]] = {}
    current = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], [])
            continue
        assert current is not None, raw
        key, _, value = line.partition("=")
        current.append((key, value))
    return sections


def _environment(sections: dict[str, list[tuple[str, str]]]) -> dict[str, str]:
    env = {}
    for key, value in sections["Service"]:
        if key == "Environment":
            assert value.startswith('"') and value.endswith('"'), value
            name, _, val = value[1:-1].partition("=")
            env[name] = val.replace('\\"', '"').replace("\\\\", "\\").replace("%%", "%")
    return env


def _verify_unit(unit: Path, tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed; the unit was checked by parsing only")
    # A runtime dir with a short path of its own: systemd puts sockets in it (gnupg/S.gpg-agent.browser), and a
    # socket path has at most 107 bytes, which a test's tmp_path under `pytest -n` (.../popen-gw0/...) can exceed.
    with tempfile.TemporaryDirectory(prefix="xdg-") as runtime:
        env = {**os.environ, "XDG_RUNTIME_DIR": runtime}
        proc = subprocess.run(
            [analyze, "--user", "verify", str(unit)], capture_output=True, text=True, env=env, timeout=60
        )
    if proc.returncode != 0 and "Failed to initialize manager" in proc.stderr:
        proc = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == "", proc.stderr  # no warnings either (unknown keys, bad quoting)


@pytest.fixture
def linux(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Platform linux, and a ``systemctl`` that does not exist: the "print the commands" path."""
    monkeypatch.setenv("COPILOT_OTEL_SERVICE_PLATFORM", "linux")
    monkeypatch.setenv("COPILOT_OTEL_SYSTEMCTL", str(tmp_path / "no" / "systemctl"))
    return Path(os.environ["HOME"]) / ".config" / "systemd" / "user" / "copilot-otel.service"


@pytest.fixture
def recording_systemctl(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """A stand-in ``systemctl`` (a shell script at the process edge) that records its arguments."""
    log = tmp_path / "systemctl.log"
    script = tmp_path / "systemctl"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> "{log}"\n'
        'case "$2" in is-active) echo active;; is-enabled) echo enabled;; esac\n'
        "exit 0\n"
    )
    script.chmod(0o755)
    monkeypatch.setenv("COPILOT_OTEL_SYSTEMCTL", str(script))
    yield log


def test_service_install_writes_a_valid_unit(
    linux: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector.example:4317")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer topsecret%21")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "copilot on my laptop")
    state = tmp_path / "my state"
    assert main(["service", "install", "--state-dir", str(state)]) == 0
    out = capsys.readouterr().out

    text = linux.read_text()
    sections = _unit_sections(text)
    service = dict(sections["Service"])
    exec_start = service["ExecStart"].split()
    assert os.path.isabs(exec_start[0]) and os.access(exec_start[0], os.X_OK)
    assert exec_start[1:] == ["run"] or exec_start[1:] == ["-m", "copilot_otel", "run"]
    assert service["Restart"] == "on-failure"
    assert dict(sections["Install"])["WantedBy"] == "default.target"
    env = _environment(sections)
    assert env == {
        "COPILOT_OTEL_STATE_DIR": str(state),
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector.example:4317",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        "OTEL_SERVICE_NAME": "copilot on my laptop",
    }
    # headers may be secrets: only in the 0600 environment file
    assert "topsecret" not in text and "topsecret" not in out
    env_file = Path(os.environ["HOME"]) / ".config" / "copilot-otel" / "service.env"
    assert service["EnvironmentFile"] == f"-{env_file}"
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    assert 'OTEL_EXPORTER_OTLP_HEADERS="authorization=Bearer topsecret%21"' in env_file.read_text()
    # systemctl is not there: the unit is written and the exact commands are printed
    assert "Could not enable it with systemctl --user" in out
    assert "  systemctl --user daemon-reload\n" in out
    assert "  systemctl --user enable copilot-otel.service\n" in out
    assert "  systemctl --user restart copilot-otel.service\n" in out
    _verify_unit(linux, tmp_path)


def test_service_install_from_the_console_script(tmp_path: Path) -> None:
    """The unit runs the very executable the user ran, with the user's endpoint flag."""
    env = {**os.environ, "COPILOT_OTEL_SERVICE_PLATFORM": "linux", "COPILOT_OTEL_SYSTEMCTL": "/nonexistent"}
    proc = subprocess.run(
        [
            *_console_script(),
            "service",
            "install",
            "--no-enable",
            "--endpoint",
            "http://localhost:4318",
            "--protocol",
            "http/protobuf",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Not enabled (--no-enable). To enable and start it:" in proc.stdout
    unit = Path(os.environ["HOME"]) / ".config" / "systemd" / "user" / "copilot-otel.service"
    sections = _unit_sections(unit.read_text())
    exec_start = dict(sections["Service"])["ExecStart"].split()
    if _console_script()[0].endswith("copilot-otel"):
        assert exec_start == [str(Path(_console_script()[0]).resolve()), "run"]
    assert _environment(sections) == {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://localhost:4318",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
    }
    assert not (Path(os.environ["HOME"]) / ".config" / "copilot-otel" / "service.env").exists()
    _verify_unit(unit, tmp_path)


def test_service_lifecycle_with_systemctl(
    linux: Path,
    recording_systemctl: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "x-api-key=abc")
    assert main(["service", "install", "--no-enable"]) == 0
    assert not recording_systemctl.exists(), "--no-enable writes only"
    capsys.readouterr()

    assert main(["service", "install"]) == 0
    out = capsys.readouterr().out
    assert recording_systemctl.read_text().splitlines() == [
        "--user daemon-reload",
        "--user enable copilot-otel.service",
        "--user restart copilot-otel.service",
    ]
    assert "Enabled and started copilot-otel.service" in out
    assert _environment(_unit_sections(linux.read_text())) == {}, "defaults are not written out"

    assert main(["service", "status"]) == 0
    out = capsys.readouterr().out
    assert f"Installed: {linux}" in out
    assert "is-active: active" in out and "is-enabled: enabled" in out
    assert "secrets in " in out and "(mode 0600)" in out

    recording_systemctl.unlink()
    assert main(["service", "uninstall"]) == 0
    out = capsys.readouterr().out
    assert recording_systemctl.read_text().splitlines() == [
        "--user disable --now copilot-otel.service",
        "--user daemon-reload",
    ]
    assert not linux.exists()
    assert not (Path(os.environ["HOME"]) / ".config" / "copilot-otel" / "service.env").exists()
    assert "Stopped and disabled copilot-otel.service" in out

    assert main(["service", "status"]) == 1
    assert "Not installed" in capsys.readouterr().out
    assert main(["service", "uninstall"]) == 0
    assert "Not installed" in capsys.readouterr().out


def test_service_uninstall_without_systemctl(linux: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["service", "install"]) == 0
    wants = linux.parent / "default.target.wants" / "copilot-otel.service"
    wants.parent.mkdir()
    wants.symlink_to(linux)  # as `systemctl --user enable` would have left it
    assert main(["service", "status"]) == 0
    assert "systemctl --user is unavailable" in capsys.readouterr().out
    assert main(["service", "uninstall"]) == 0
    out = capsys.readouterr().out
    assert not linux.exists() and not wants.is_symlink()
    assert "  systemctl --user stop copilot-otel.service\n" in out


def test_service_install_launchd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COPILOT_OTEL_SERVICE_PLATFORM", "darwin")
    monkeypatch.setenv("COPILOT_OTEL_LAUNCHCTL", str(tmp_path / "no" / "launchctl"))
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "https://otlp.example.com")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Basic c2VjcmV0")
    sessions = tmp_path / "sessions"
    assert main(["service", "install", "--session-state", str(sessions)]) == 0
    out = capsys.readouterr().out
    home = Path(os.environ["HOME"])
    plist_path = home / "Library" / "LaunchAgents" / "io.github.copilot-otel.plist"
    with open(plist_path, "rb") as fh:
        plist = plistlib.load(fh)
    assert plist["Label"] == "io.github.copilot-otel"
    assert plist["ProgramArguments"][-1] == "run" and os.path.isabs(plist["ProgramArguments"][0])
    assert plist["EnvironmentVariables"] == {
        "COPILOT_OTEL_SESSION_STATE": str(sessions),
        "OTEL_EXPORTER_OTLP_ENDPOINT": "https://otlp.example.com",
        "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Basic c2VjcmV0",
    }
    assert plist["RunAtLoad"] is True and plist["KeepAlive"]
    state = home / ".local" / "state" / "copilot-otel"
    assert plist["StandardOutPath"] == str(state / "service.out.log")
    assert plist["StandardErrorPath"] == str(state / "service.err.log")
    assert stat.S_IMODE(plist_path.stat().st_mode) == 0o600, "it holds the headers"
    assert "c2VjcmV0" not in out
    assert f"  launchctl bootstrap gui/{os.getuid()} {plist_path}\n" in out

    assert main(["service", "status"]) == 0
    assert f"Installed: {plist_path}" in capsys.readouterr().out
    assert main(["service", "uninstall"]) == 0
    assert f"  launchctl bootout gui/{os.getuid()}/io.github.copilot-otel\n" in capsys.readouterr().out
    assert not plist_path.exists()


# ============================================================================================ user errors
def test_user_errors_are_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def error(argv: list[str], code: int) -> str:
        assert main(argv) == code, argv
        return _one_error_line(capsys.readouterr().err)

    # unreachable endpoint
    port = _closed_port()
    line = error(
        [
            "replay",
            str(FAILING),
            "--endpoint",
            f"http://127.0.0.1:{port}",
            "--max-retry-time",
            "1",
            "--no-progress",
            "--log-level",
            "error",
        ],
        5,
    )
    assert f"cannot connect to http://127.0.0.1:{port}/v1/traces" in line

    # bad protocol value, as a flag and from the environment
    line = error(["doctor", "--protocol", "udp"], 2)
    assert "Expected --protocol to be one of grpc, http/protobuf, got 'udp'" in line
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "udp")
    line = error(["show", str(FAILING)], 2)
    assert "Expected OTEL_EXPORTER_OTLP_PROTOCOL to be one of" in line
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_PROTOCOL")

    # unreadable session dir (a file where the folder should be: unreadable even for root)
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    line = error(["show", "--session-state", str(blocker)], 3)
    assert f"cannot read session folder {blocker}" in line

    # unwritable state dir (on systemd: the no-POSIX run's portable platform has no service manager)
    monkeypatch.setenv("COPILOT_OTEL_SERVICE_PLATFORM", "linux")
    line = error(["service", "install", "--no-enable", "--state-dir", str(blocker / "state")], 4)
    assert f"the state dir {blocker / 'state'} is not writable" in line

    # unknown session id
    line = error(["show", "0a0000ff"], 3)
    assert "no such file, folder or session id: '0a0000ff'" in line

    # unsupported platform override
    monkeypatch.setenv("COPILOT_OTEL_SERVICE_PLATFORM", "windows")
    line = error(["service", "status"], 2)
    assert "Expected COPILOT_OTEL_SERVICE_PLATFORM to be one of linux, darwin, got 'windows'" in line


@pytest.mark.parametrize("command", ["show", "doctor", "status", "service"])
def test_every_command_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0
    assert "usage: copilot-otel " + command in capsys.readouterr().out
