"""Claude Code 2.1.332's recordings as recordings: what only their ``checks.json`` form says, and rule C over them.

The sessions in ``tests/fixtures/other-agents/claude-code-2.1.332`` were recorded by ``tests/otheragents/record.py
--set 2.1.332`` from the real CLI; ``checks.json`` was written from the recorder's scripts and runs, never from the
session files (which sessions each run made, the requests the fake model server answered per script and the stop
reason it sent, the tool calls it asked for and how each was meant to end, the sub-agents and the call that started
each). The loop's facts every source shares (a trace per human prompt, the model calls and tools with their
outcomes, the last reply the final answer, how each prompt ended, sub-agents under their ``Agent`` call, live ==
replay, the sniff) are checked over these sessions with the other sources' in ``tests/test_loop_facts.py``
(``tests/loop_scenarios.py`` reads them, a scenario per session). Here: that every recording is 2.1.332's and each
of its sessions is checked there, that the files are the runs' sessions and sub-agents as ``checks.json`` says and
end with the reply the server sent last, rule C (a trace per ``promptId``) for each session, and ``replay`` of each
recording to a real receiver.

What the loop makes of what 2.1.332 writes anew (a trace per human prompt with background agents, refusals as
denials, a fork's copied history, queued prompts, failed attempts, the title and the CLI's accounting) is held by
``tests/test_claude_code_332_loop.py``, which looks the recordings up in :data:`SCENARIOS` here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from copilot_otel.model import ids
from copilot_otel.model.activity import PromptRun, Record
from copilot_otel.sources import LogKind
from copilot_otel.sources.claude_code import reader as cc
from tests.conftest import replay_into
from tests.loop_scenarios import CC_332, IDS, fold
from tests.loop_scenarios import SCENARIOS as LOOP_SCENARIOS
from tests.otlp_receiver import OtlpReceiver


@dataclass
class Recording:
    """One recording's ``checks.json`` in its own terms, what 2.1.332's own tests look up."""

    name: str
    root: Path
    checks: dict[str, object]
    sessions: list[str]  # the session each run's stdout named, in order, once each
    main_scripts: list[str]  # the scripts the main agent's requests were answered by
    sub_scripts: dict[str, str]  # a sub-agent's script → the id of the Agent call that started it
    answered: dict[str, int]  # requests answered (no HTTP error) per script
    tools: dict[str, tuple[str, str]]  # scripted tool call id → (its script, how it was meant to end)


def _recording(folder: Path) -> Recording:
    c = json.loads((folder / "checks.json").read_text(encoding="utf-8"))
    sub_scripts = {s["script"]: s["spawned_by"] for s in c["subagents"]}
    return Recording(
        folder.name, folder, c, list(dict.fromkeys(r["session_id"] for r in c["runs"])),
        [s for s in c["requests_answered"] if s not in sub_scripts], sub_scripts, c["requests_answered"],
        {t["id"]: (t["script"], t["expect"]) for t in c["scripted_tool_calls"] if t["answered"]},
    )  # fmt: skip


SCENARIOS = {p.name: _recording(p) for p in sorted(CC_332.iterdir()) if (p / "checks.json").is_file()}
# The sessions as test_loop_facts.py checks them, a scenario each (the fork's two: ``…-fork-run1``, ``…-fork-run2``).
SESSIONS = [sid for sid in IDS if sid.startswith("claude-code/2.1.332-")]


def _fold(path: Path) -> list[Record]:
    return fold(path).records


def _session_logs(root: Path) -> dict[str, Path]:
    return {log.path.stem: log.path for log in cc.scan(root) if log.kind is LogKind.SESSION}


def _spawned_by(path: Path) -> str:
    """The id of the ``Agent`` call a sub-agent's file says started it (its ``.meta.json``)."""
    meta = cc.read_meta(path)
    assert meta is not None and meta.tool_use_id, path
    return meta.tool_use_id


def _first_prompt_id(path: Path) -> str:
    for line in path.read_bytes().splitlines():
        obj = json.loads(line)
        if obj.get("type") == "user" and obj.get("promptId"):
            return str(obj["promptId"])
    raise AssertionError(f"no promptId in {path}")


def _main_expectations(s: Recording, scripts: list[str]) -> tuple[int, dict[str, bool]]:
    """The main agent's answered calls over ``scripts``, and whether each of their tool calls was meant to run ok."""
    calls = sum(s.answered[name] for name in scripts)
    tools = {call_id: expect == "ok" for call_id, (script, expect) in s.tools.items() if script in scripts}
    return calls, tools


def test_every_recording_is_2_1_332s_and_each_session_is_a_loop_facts_scenario() -> None:
    """The eleven recordings, each of 2.1.332, and every session file of theirs a scenario of
    ``test_loop_facts.py``."""
    assert sorted(SCENARIOS) == [
        "api-errors-retried", "background-subagent", "fork", "hook-refusal", "interactive-subagent", "multi-tool",
        "parallel-subagents", "plain-question", "plan-mode-refusal", "queued-prompts", "statusline", "titled-session",
    ]  # fmt: skip
    for s in SCENARIOS.values():
        assert s.checks["cli_version"] == "2.1.332 (Claude Code)"
    checked = sorted(LOOP_SCENARIOS[sid].main for sid in SESSIONS)
    assert checked == sorted(path for s in SCENARIOS.values() for path in _session_logs(s.root).values())


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_files_are_the_runs_sessions_and_their_subagents(name: str) -> None:
    """Each run's session (the fork's a new one) is one session log; each sub-agent has a file of its own whose
    ``.meta.json`` names the call that started it."""
    s = SCENARIOS[name]
    assert sorted(_session_logs(s.root)) == sorted(s.sessions)
    subagents = [log for log in cc.scan(s.root) if log.kind is LogKind.SUBAGENT]
    assert sorted(_spawned_by(log.path) for log in subagents) == sorted(s.sub_scripts.values())


@pytest.mark.parametrize("sid", SESSIONS)
def test_the_files_last_reply_is_the_answer_the_server_sent_last(sid: str) -> None:
    """The reply the server sent last for the session was its final answer (``end_turn``), and the session file's
    last ``assistant`` record says so (the fold's last call's finish reason is in ``test_loop_facts.py``)."""
    s = LOOP_SCENARIOS[sid]
    assert s.final_answer
    assistants = [
        obj for obj in map(json.loads, s.main.read_bytes().splitlines()) if obj.get("type") == "assistant"
    ]
    assert assistants[-1]["message"]["stop_reason"] == "end_turn"


@pytest.mark.parametrize("sid", SESSIONS)
def test_rule_c_a_sessions_first_prompt_is_a_trace_keyed_by_its_prompt_id(sid: str) -> None:
    """Loop rule C for 2.1.332's sessions (a fork's too, whose copied records carry its own new ``promptId``): the
    first human prompt is a trace of its own, keyed by the file's first ``promptId``."""
    path = LOOP_SCENARIOS[sid].main
    runs = sorted((r for r in _fold(path) if isinstance(r, PromptRun)), key=lambda r: r.start_ns)
    assert runs[0].human and runs[0].trace_id == ids.trace_id(path.stem, _first_prompt_id(path))


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_replay_exports_a_chat_span_per_answered_call(name: str, receiver: OtlpReceiver) -> None:
    """``replay`` of the scenario's CLI home to a real OTLP receiver: one chat span that did not fail per request
    the server answered (main agent and sub-agents), one ``execute_tool`` span per scripted tool call, by id."""
    s = SCENARIOS[name]
    assert replay_into(receiver, s.root) == 0
    spans = receiver.spans()
    chats = [span for span in spans if span["name"].startswith("chat ") and span["status_code"] != 2]
    assert len(chats) == sum(s.answered.values())
    tools = sorted(
        span["attributes"]["gen_ai.tool.call.id"]
        for span in spans
        if span["name"].startswith("execute_tool ")
    )
    assert tools == sorted(s.tools)
