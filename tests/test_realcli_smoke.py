"""Smoke tests: the real Copilot CLI, driven by the scripted fake model, writes the session we expect.

These pin down the harness (``tests/realcli``) and the CLI behaviour the rest of the suite
relies on. Without the CLI installed they skip locally; under ``CI`` they fail instead,
because CI installs it with ``.ci/install-copilot-cli.sh``.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.realcli.fake_model import FakeModelServer, default_scripts, prompt_for
from tests.realcli.harness import find_copilot_binary, read_events, run_copilot, session_dir
from tests.waiting import until

pytestmark = [pytest.mark.realcli, pytest.mark.timeout(60)]

# Fixed ids: the CLI takes --session-id verbatim (a random id would make failures harder to compare).
TOOLS_SESSION = "0b000001-0000-4000-8000-000000000001"
SUBAGENT_SESSION = "0b000002-0000-4000-8000-000000000002"
LIVE_SESSION = "0b000003-0000-4000-8000-000000000003"
HANG_SESSION = "0b000004-0000-4000-8000-000000000004"
# How long to wait for something the CLI writes while running (it starts in ~0.5-2 s).
LIVE_DEADLINE_S = 20.0


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@pytest.fixture(scope="module")
def copilot_binary() -> Path:
    binary = find_copilot_binary()
    if binary is None:
        reason = "Copilot CLI not installed: run .ci/install-copilot-cli.sh (or set COPILOT_CLI_BIN)"
        if _in_ci():
            pytest.fail(f"{reason}; CI=true, so it must be installed", pytrace=False)
        pytest.skip(reason)
    return binary


def _types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def _by_call_id(events: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {e["data"]["toolCallId"]: e for e in events if e["type"] == kind}


def test_tools_scenario_writes_parallel_then_sequential_tools(copilot_binary: Path, tmp_path: Path) -> None:
    home, workdir = tmp_path / "home", tmp_path / "work"
    with FakeModelServer() as server:
        proc = run_copilot(
            copilot_binary, home, workdir, prompt_for("tools"), server.base_url, session_id=TOOLS_SESSION
        )

    assert proc.returncode == 0, proc.stderr
    assert [(r.script, r.step_index) for r in server.chat_requests()] == [
        ("tools", 0),
        ("tools", 1),
        ("tools", 2),
    ]
    events = read_events(session_dir(home, TOOLS_SESSION))
    types = _types(events)
    assert types[0] == "session.start"
    assert types[-1] == "session.shutdown"
    assert events[0]["data"]["sessionId"] == TOOLS_SESSION
    assert events[0]["data"]["context"]["cwd"] == str(workdir)
    counts = Counter(types)
    assert counts["user.message"] == 1
    assert counts["assistant.turn_start"] == 3
    assert counts["assistant.turn_end"] == 3

    starts = _by_call_id(events, "tool.execution_start")
    completes = _by_call_id(events, "tool.execution_complete")
    commands = {call_id: e["data"]["arguments"]["command"] for call_id, e in starts.items()}
    assert commands == {
        "call_tools_0_0": "echo one",
        "call_tools_0_1": "echo two",
        "call_tools_1_0": "sleep 1; echo three",
    }
    assert {e["data"]["toolName"] for e in starts.values()} == {"bash"}
    assert completes.keys() == starts.keys()
    for call_id, word in (("call_tools_0_0", "one"), ("call_tools_0_1", "two"), ("call_tools_1_0", "three")):
        assert completes[call_id]["data"]["success"] is True
        assert completes[call_id]["data"]["result"]["content"].startswith(word)
    # The parallel pair starts before either completes; the third call only after both did.
    position = {(e["type"], e["data"].get("toolCallId")): i for i, e in enumerate(events)}
    pair_completes = [position[("tool.execution_complete", c)] for c in ("call_tools_0_0", "call_tools_0_1")]
    assert position[("tool.execution_start", "call_tools_0_1")] < min(pair_completes)
    assert position[("tool.execution_start", "call_tools_1_0")] > max(pair_completes)


def test_subagent_scenario_writes_subagent_lifecycle(copilot_binary: Path, tmp_path: Path) -> None:
    home, workdir = tmp_path / "home", tmp_path / "work"
    (workdir / "src").mkdir(parents=True)
    (workdir / "src" / "app.py").write_text("print('hi')\n")
    with FakeModelServer() as server:
        proc = run_copilot(
            copilot_binary,
            home,
            workdir,
            prompt_for("subagent"),
            server.base_url,
            session_id=SUBAGENT_SESSION,
        )

    assert proc.returncode == 0, proc.stderr
    assert [(r.script, r.step_index) for r in server.chat_requests()] == [
        ("subagent", 0),
        ("subagentchild", 0),
        ("subagentchild", 1),
        ("subagent", 1),
    ]
    events = read_events(session_dir(home, SUBAGENT_SESSION))
    types = _types(events)
    assert types[0] == "session.start"
    assert types[-1] == "session.shutdown"
    started = [e for e in events if e["type"] == "subagent.started"]
    completed = [e for e in events if e["type"] == "subagent.completed"]
    assert len(started) == 1
    assert len(completed) == 1
    assert started[0]["data"]["toolCallId"] == completed[0]["data"]["toolCallId"] == "call_subagent_0_0"
    assert started[0]["data"]["agentName"] == "explore"
    assert types.index("subagent.started") < types.index("subagent.completed")

    starts = _by_call_id(events, "tool.execution_start")
    completes = _by_call_id(events, "tool.execution_complete")
    assert starts["call_subagent_0_0"]["data"]["toolName"] == "task"
    child = starts["call_subagentchild_0_0"]
    assert child["data"]["toolName"] == "glob"
    assert child["data"]["arguments"]["paths"] == str(workdir)  # {cwd} substituted
    assert child["data"]["parentToolCallId"] == "call_subagent_0_0"
    assert child["agentId"] == started[0]["agentId"]
    assert "app.py" in completes["call_subagentchild_0_0"]["data"]["result"]["content"]


def test_background_run_is_observable_while_it_runs(copilot_binary: Path, tmp_path: Path) -> None:
    home, workdir = tmp_path / "home", tmp_path / "work"
    folder = session_dir(home, LIVE_SESSION)
    with FakeModelServer(scripts=default_scripts(step_delay_s=1.5)) as server:
        proc = run_copilot(
            copilot_binary,
            home,
            workdir,
            prompt_for("plain"),
            server.base_url,
            session_id=LIVE_SESSION,
            background=True,
        )
        try:
            # The model call is held for 1.5 s, so the user message is on disk while the CLI still runs.
            until(
                lambda: "user.message" in _types(read_events(folder)),
                LIVE_DEADLINE_S,
                "the user message on disk",
            )
            assert proc.poll() is None
            assert "session.shutdown" not in _types(read_events(folder))
            result = proc.result(timeout=30)
        finally:
            proc.kill_group()

    assert result.returncode == 0, result.stderr
    assert _types(read_events(folder))[-1] == "session.shutdown"


def test_hang_then_sigint_aborts_the_session(copilot_binary: Path, tmp_path: Path) -> None:
    home, workdir = tmp_path / "home", tmp_path / "work"
    with FakeModelServer() as server:
        proc = run_copilot(
            copilot_binary,
            home,
            workdir,
            prompt_for("hang"),
            server.base_url,
            session_id=HANG_SESSION,
            background=True,
        )
        try:
            assert server.wait_for_requests(1, script="hang", timeout_s=LIVE_DEADLINE_S)
            proc.interrupt()
            result = proc.result(timeout=30)
        finally:
            proc.kill_group()

    assert result.returncode == 0, result.stderr
    events = read_events(session_dir(home, HANG_SESSION))
    types = _types(events)
    assert "abort" in types
    assert types[-1] == "session.shutdown"
    assert "assistant.message" not in types
