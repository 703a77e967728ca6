"""End to end with the real Copilot CLI: ``copilot-otel run`` tails a genuine session while it is written.

The CLI (npm ``@github/copilot``) runs offline against the project's scripted fake model on 127.0.0.1 (the only
thing faked: the model); the daemon follows ``$HOME/.copilot/session-state`` and exports to a real OTLP receiver.
"""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SERIAL
from tests.daemon_process import DaemonProcess, assert_delivered_like_replay
from tests.otlp_receiver import OtlpReceiver
from tests.realcli.fake_model import FakeModelServer, default_scripts, prompt_for
from tests.realcli.harness import run_copilot, session_dir
from tests.test_realcli_smoke import copilot_binary  # noqa: F401 - the shared "installed or skip/fail" fixture

pytestmark = [pytest.mark.realcli, pytest.mark.timeout(120), SERIAL]


def test_live_trace_of_a_real_cli_session(copilot_binary: Path, tmp_path: Path) -> None:  # noqa: F811
    home = tmp_path / "cli-home"
    workdir = tmp_path / "project"
    workdir.mkdir(parents=True)
    (workdir / "README.md").write_text("# demo\n")
    session_state = home / ".copilot" / "session-state"
    session_state.mkdir(parents=True)
    first_seen: dict[str, int] = {}
    lock = threading.Lock()

    def on_accept(signal: str, items: list[dict[str, Any]] | None, count: int, received_ns: int) -> None:
        if signal == "traces" and items:
            with lock:
                for span in items:
                    first_seen.setdefault(span["span_id"], received_ns)

    session_id = str(uuid.UUID(int=0x0C00_0000_0000_4000_8000_0000_0000_0042))
    with (
        OtlpReceiver(on_accept=on_accept) as receiver,
        FakeModelServer(scripts=default_scripts(step_delay_s=1.0)) as model,
    ):
        daemon = DaemonProcess(
            session_state, tmp_path / "state", receiver.http_endpoint, tmp_path / "daemon.log"
        )
        daemon.start()
        try:
            cli = run_copilot(
                copilot_binary,
                home,
                workdir,
                prompt_for("tools"),
                model.base_url,
                session_id=session_id,
                background=True,
            )
            # the first tool spans arrive while the CLI is still running (the last step is still pending)
            receiver.wait_for(lambda r: any(s["name"] == "execute_tool bash" for s in r.spans()), 60)
            assert cli.poll() is None, "tool spans must arrive while the session is still being written"
            result = cli.result(timeout=90)
            assert result.returncode == 0, result.stderr
            log = session_dir(home, session_id) / "events.jsonl"
            assert_delivered_like_replay(receiver, [log], tmp_path, timeout=30)
        finally:
            assert daemon.terminate() == 0
    spans = receiver.spans()
    tools = [s for s in spans if s["name"] == "execute_tool bash"]
    assert sorted(s["attributes"]["gen_ai.tool.call.id"] for s in tools) == [
        "call_tools_0_0",
        "call_tools_0_1",
        "call_tools_1_0",
    ]
    turns = [s for s in spans if s["name"].startswith("turn ")]
    assert len(turns) == 3
    root = next(s for s in spans if s["parent_span_id"] is None)
    assert root["attributes"]["gen_ai.conversation.id"] == session_id
    assert root["attributes"]["copilot_otel.cli.version"] == "1.0.102"
    # each tool span reached the collector within about a second of the tool finishing (end = the CLI's own
    # timestamp of tool.execution_complete, same machine clock)
    latencies = [(first_seen[s["span_id"]] - s["end_ns"]) / 1e9 for s in tools]
    assert all(lat < 1.5 for lat in latencies), latencies
    # and the turns without waiting for the prompt to end: the first turn arrived before the root span
    assert min(first_seen[t["span_id"]] for t in turns) < first_seen[root["span_id"]] - 500_000_000


def test_runaway_of_a_real_cli_session_is_detected_while_it_runs(
    copilot_binary: Path,  # noqa: F811 - the fixture imported above
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The real CLI loops (30 identical `bash echo loop` turns); the alarm must arrive before the CLI is done."""
    home = tmp_path / "cli-home"
    workdir = tmp_path / "project"
    workdir.mkdir(parents=True)
    session_state = home / ".copilot" / "session-state"
    session_state.mkdir(parents=True)
    session_id = str(uuid.UUID(int=0x0C00_0000_0000_4000_8000_0000_0000_0043))
    arrivals: dict[str, int] = {}

    def on_accept(signal: str, items: list[dict[str, Any]] | None, count: int, received_ns: int) -> None:
        for item in items or ():
            if signal == "logs" and item["event_name"] == "copilot_otel.runaway.detected":
                arrivals.setdefault(item["attributes"]["copilot_otel.runaway.reason"], received_ns)

    scripts = default_scripts(runaway_turns=30, step_delay_s=0.15)
    with OtlpReceiver(on_accept=on_accept) as receiver, FakeModelServer(scripts=scripts) as model:
        # the same threshold for the daemon (it inherits the environment) and the replay it is compared with
        monkeypatch.setenv("COPILOT_OTEL_RUNAWAY_TURNS", "10")
        daemon = DaemonProcess(
            session_state, tmp_path / "state", receiver.http_endpoint, tmp_path / "daemon.log"
        )
        daemon.start()
        try:
            cli = run_copilot(
                copilot_binary,
                home,
                workdir,
                prompt_for("runaway"),
                model.base_url,
                session_id=session_id,
                background=True,
            )
            receiver.wait_for(lambda r: "turns" in arrivals and "identical_tool_calls" in arrivals, 60)
            still_running = cli.poll() is None
            result = cli.result(timeout=90)
            assert result.returncode == 0, result.stderr
            assert still_running, "the detection must arrive while the runaway is still going on"
            log = session_dir(home, session_id) / "events.jsonl"
            assert_delivered_like_replay(receiver, [log], tmp_path, timeout=30)
        finally:
            assert daemon.terminate() == 0
    root = next(s for s in receiver.spans() if s["parent_span_id"] is None)
    assert root["attributes"]["github.copilot.turn_count"] == 31
    reasons = sorted(
        e["attributes"]["copilot_otel.runaway.reason"]
        for e in root["events"]
        if e["name"] == "copilot_otel.runaway.detected"
    )
    assert reasons == ["identical_tool_calls", "turns"]


@pytest.mark.parametrize("name", ["hooks", "custom-agent", "error-context"])
def test_live_agent_loop_features_equal_replay(
    copilot_binary: Path,  # noqa: F811 - the fixture imported above
    tmp_path: Path,
    name: str,
) -> None:
    """A feature shape of tests/realcli/shapes.py (hooks with a denial, a timeout and a crash; a custom main
    agent; a model call failed with HTTP 400) written by the real CLI while the daemon tails it: what the
    daemon delivers is exactly what replay makes of the finished log."""
    from tests.realcli.shapes import SHAPES

    shape = next(s for s in SHAPES if s.name == name)
    (run,) = shape.runs
    home = tmp_path / "cli-home"
    workdir = tmp_path / "project"
    for rel, text in shape.files.items():
        (workdir / rel).parent.mkdir(parents=True, exist_ok=True)
        (workdir / rel).write_text(text)
    session_state = home / ".copilot" / "session-state"
    session_state.mkdir(parents=True)
    if shape.trusted:
        (home / ".copilot" / "config.json").write_text(f'{{"trustedFolders": ["{workdir}"]}}')
    with OtlpReceiver() as receiver, FakeModelServer(scripts={s.name: s for s in shape.scripts}) as model:
        daemon = DaemonProcess(
            session_state, tmp_path / "state", receiver.http_endpoint, tmp_path / "daemon.log"
        )
        daemon.start()
        try:
            result = run_copilot(
                copilot_binary,
                home,
                workdir,
                run.prompt,
                model.base_url,
                session_id=shape.session_id,
                extra_args=run.args,
                timeout=90,
            )
            assert result.returncode == (1 if name == "error-context" else 0), result.stderr
            log = session_dir(home, shape.session_id) / "events.jsonl"
            assert_delivered_like_replay(receiver, [log], tmp_path, timeout=30)
        finally:
            assert daemon.terminate() == 0
    names = [s["name"] for s in receiver.spans()]
    expected = {
        "hooks": "hook postToolUse",
        "custom-agent": "invoke_agent reviewer",
        "error-context": "chat gpt-4.1",
    }
    assert expected[name] in names
