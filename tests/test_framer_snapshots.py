"""Another agent's framer state is kept only before the lines that may open a prompt (``Framer.may_open``), not
before every line; every prompt of every fixture still gets the state at its first line (a restart re-reads it
from there: tests/test_daemon_other_agents.py restarts after every line). And a framer's state as an older checkpoint
holds it restores whole."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from copilot_otel.loop.agentloop import FoldSettings
from copilot_otel.loop.foldstate import Prompt
from copilot_otel.model.inputs import Event
from copilot_otel.pipeline import FRAME_KEY, Pipeline, split_lines
from copilot_otel.sources.claude_code import reader as cc
from copilot_otel.sources.claude_code.framer import ClaudeCodeFramer, seed
from copilot_otel.sources.sessions import SessionFile
from copilot_otel.sources.tail import Line
from tests.conftest import FIXTURES

LOGS = sorted(p for p in (FIXTURES / "other-agents").rglob("*.jsonl") if "_capture" not in p.parts)


@pytest.mark.parametrize("log", LOGS, ids=lambda p: str(p.relative_to(FIXTURES / "other-agents")))
def test_every_prompt_opens_on_a_line_its_framer_foresaw(log: Path) -> None:
    fold = Pipeline.for_session(SessionFile.from_path(log), FoldSettings())
    assert fold.source is not None
    opened: list[Prompt] = []
    for _ in fold.feed_file(log):
        opened.extend(fold.loop.prompts.values())
    assert fold.unforeseen_opens == 0
    assert all(FRAME_KEY in prompt.context_at_open for prompt in opened)


# Claude Code framer states as checkpoints hold them (the context's FRAME_KEY), written by the framer before it was
# split by concern into the modules beside it (sub-agents, steering, forks, retries, self-reports): one state per
# concern, each at a line of a fixture where that concern's part of the state is set. A daemon upgraded over such
# a checkpoint must restore it whole and go on as if it had never stopped.
CLAUDE_CODE_STATES: list[tuple[str, int, dict[str, Any]]] = [
    # a failed attempt held for its call's turn (11)
    (
        "claude-code-2.1.332/api-errors-retried/projects/-home-agentrec-agents-claude-code-api-errors-retried-project/97e00c26-d6ea-4d54-bf54-54778630f4fd.jsonl",
        19,
        {
            "seed": None,
            "started": True,
            "prompt_id": "386bf89a-4f80-4074-86a2-7a27a567c357",
            "prompt_ns": 1796528351172000000,
            "queued": None,
            "message_id": None,
            "turn_open": False,
            "aborted": False,
            "ending": None,
            "ended": False,
            "background": 0,
            "last_uuid": "8a440766-a684-4d88-bf72-5e4cf3ae7863",
            "last_ns": 1796528351269000000,
            "held": [],
            "starts": [],
            "request": None,
            "attempts": [
                {
                    "id": "8a440766-a684-4d88-bf72-5e4cf3ae7863",
                    "time_ns": 1796528351269000000,
                    "start_ns": 1796528351263000000,
                    "offset": 85839,
                    "end_offset": 86580,
                    "model": "claude-opus-5-5",
                    "status": 429,
                    "error_type": "429",
                    "message": "429 Scripted HTTP 429.",
                    "attempt": 1,
                }
            ],
            "fork": None,
            "copied": 0,
            "copied_prompt": None,
            "enqueue_ns": 1796528351076000000,
            "title": None,
            "aliases": [],
            "companion": None,
        },
    ),
    # a background sub-agent running, an api-request seen (11, 15)
    (
        "claude-code-2.1.332/parallel-subagents/projects/-home-agentrec-agents-claude-code-parallel-subagents-project/5cc0d6cf-6edd-4ae3-98f5-2cbba73ad77a.jsonl",
        22,
        {
            "seed": None,
            "started": True,
            "prompt_id": "66803477-5618-4c6e-842e-fe9b0029a93c",
            "prompt_ns": 1796528342290000000,
            "queued": None,
            "message_id": "msg_parmain_0_b080d996",
            "turn_open": True,
            "aborted": False,
            "ending": None,
            "ended": False,
            "background": 1,
            "last_uuid": "4106a6d2-ec5d-4cb1-910b-1a6d5cb529b6",
            "last_ns": 1796528342402000000,
            "held": [],
            "starts": [],
            "request": {"time_ns": 1796528342358000000, "model": "claude-opus-5-5"},
            "attempts": [],
            "fork": None,
            "copied": 0,
            "copied_prompt": None,
            "enqueue_ns": 1796528342231000000,
            "title": None,
            "aliases": [],
            "companion": None,
        },
    ),
    # a companion record waiting for its task notification (15)
    (
        "claude-code-2.1.332/background-subagent/projects/-home-agentrec-agents-claude-code-background-subagent-project/aa306048-23c2-424f-9222-6cdb75fede68.jsonl",
        31,
        {
            "seed": None,
            "started": True,
            "prompt_id": "752ec85e-3801-4222-adc6-83eb5b4c8ad9",
            "prompt_ns": 1796528340648000000,
            "queued": '<task-notification>\n<task-id>a1a66f2b8cb6ca6b0</task-id>\n<tool-use-id>toolu_bgmain_0_0</tool-use-id>\n<output-file>/tmp/claude-1001/-home-agentrec-agents-claude-code-background-subagent-project/aa306048-23c2-424f-9222-6cdb75fede68/tasks/a1a66f2b8cb6ca6b0.output</output-file>\n<status>completed</status>\n<summary>Agent "Find where the greeting is defined" finished</summary>\n<note>A task-notification fires each time this agent stops with no live background children of its own. The user can send it another message and resume it, so the same task-id may notify more than once.</note>\n<result>src/greet.py, line 2.</result>\n<usage><subagent_tokens>8008</subagent_tokens><tool_uses>1</tool_uses><duration_ms>251</duration_ms></usage>\n</task-notification>',
            "message_id": "msg_bgmain_1_e2209ae8",
            "turn_open": False,
            "aborted": False,
            "ending": None,
            "ended": False,
            "background": 1,
            "last_uuid": "ca7af79e-8818-4143-996d-dbd7d2cc4d62",
            "last_ns": 1796528340990000000,
            "held": [],
            "starts": [],
            "request": {"time_ns": 1796528340827000000, "model": "claude-opus-5-5"},
            "attempts": [],
            "fork": None,
            "copied": 0,
            "copied_prompt": None,
            "enqueue_ns": 1796528340983000000,
            "title": None,
            "aliases": [],
            "companion": "c00b5183-cfbc-45de-9552-18ce4be4504d",
        },
    ),
    # a task notification's promptId, an alias of the prompt (15)
    (
        "claude-code-2.1.332/background-subagent/projects/-home-agentrec-agents-claude-code-background-subagent-project/aa306048-23c2-424f-9222-6cdb75fede68.jsonl",
        32,
        {
            "seed": None,
            "started": True,
            "prompt_id": "752ec85e-3801-4222-adc6-83eb5b4c8ad9",
            "prompt_ns": 1796528340648000000,
            "queued": '<task-notification>\n<task-id>a1a66f2b8cb6ca6b0</task-id>\n<tool-use-id>toolu_bgmain_0_0</tool-use-id>\n<output-file>/tmp/claude-1001/-home-agentrec-agents-claude-code-background-subagent-project/aa306048-23c2-424f-9222-6cdb75fede68/tasks/a1a66f2b8cb6ca6b0.output</output-file>\n<status>completed</status>\n<summary>Agent "Find where the greeting is defined" finished</summary>\n<note>A task-notification fires each time this agent stops with no live background children of its own. The user can send it another message and resume it, so the same task-id may notify more than once.</note>\n<result>src/greet.py, line 2.</result>\n<usage><subagent_tokens>8008</subagent_tokens><tool_uses>1</tool_uses><duration_ms>251</duration_ms></usage>\n</task-notification>',
            "message_id": "msg_bgmain_1_e2209ae8",
            "turn_open": False,
            "aborted": False,
            "ending": None,
            "ended": False,
            "background": 0,
            "last_uuid": "a6c51ca6-d94c-4a8d-9153-7c9f31b84144",
            "last_ns": 1796528340990000000,
            "held": [],
            "starts": [],
            "request": {"time_ns": 1796528340827000000, "model": "claude-opus-5-5"},
            "attempts": [],
            "fork": None,
            "copied": 0,
            "copied_prompt": None,
            "enqueue_ns": 1796528340983000000,
            "title": None,
            "aliases": ["c00b5183-cfbc-45de-9552-18ce4be4504d"],
            "companion": None,
        },
    ),
    # a fork's copied history being skipped (13)
    (
        "claude-code-2.1.332/fork/projects/-home-agentrec-agents-claude-code-fork-project/d2f95600-8dd3-4d4e-9666-de787028ca7e.jsonl",
        6,
        {
            "seed": None,
            "started": False,
            "prompt_id": None,
            "prompt_ns": 0,
            "queued": "And what does the app print for Ada? [[script:fork2]]",
            "message_id": None,
            "turn_open": False,
            "aborted": False,
            "ending": None,
            "ended": False,
            "background": 0,
            "last_uuid": None,
            "last_ns": 0,
            "held": [],
            "starts": [],
            "request": None,
            "attempts": [],
            "fork": {
                "parent": "c0c27aee-6f19-458f-8b8b-c0db8e020f4e",
                "prompts": {
                    "83f1e900-3055-42bd-a7d7-3dcf7a512b1a": "a02e3204-5c5d-41b5-8848-26e82d0f0d78",
                    "8677ac54-9cf0-4577-b691-a62c80de67f3": "a02e3204-5c5d-41b5-8848-26e82d0f0d78",
                },
            },
            "copied": 1,
            "copied_prompt": "83f1e900-3055-42bd-a7d7-3dcf7a512b1a",
            "enqueue_ns": 1796528347147000000,
            "title": None,
            "aliases": [],
            "companion": None,
        },
    ),
    # a /compact's compaction held for its prompt (8, 12)
    (
        "claude-code/compaction/projects/-home-dev-agents-projects-compaction/5b1c3f0e-6a2d-4c1b-9e7f-0c2a4d6e8f10.jsonl",
        17,
        {
            "seed": None,
            "started": True,
            "prompt_id": "17af6de3-dd22-456a-a4bd-b3520cde9361",
            "prompt_ns": 1796167066088000000,
            "queued": "/compact",
            "message_id": "msg_fake_078b3eb96f9340fc9a2a",
            "turn_open": False,
            "aborted": False,
            "ending": None,
            "ended": True,
            "background": 0,
            "last_uuid": "21e21b35-bb27-4534-b4bb-aad8477bbda6",
            "last_ns": 1796167068930000000,
            "held": [
                {
                    "id": "21e21b35-bb27-4534-b4bb-aad8477bbda6",
                    "time_ns": 1796167068930000000,
                    "offset": 15287,
                    "end_offset": 16267,
                    "trigger": "manual",
                    "pre_tokens": 19467,
                }
            ],
            "starts": [],
            "request": None,
            "attempts": [],
            "fork": None,
            "copied": 0,
            "copied_prompt": None,
            "enqueue_ns": 1796167068662000000,
            "title": None,
            "aliases": [],
            "companion": None,
        },
    ),
    # a final answer's end held, the title said (14)
    (
        "claude-code-2.1.332/titled-session/projects/-home-agentrec-agents-claude-code-titled-session-project/5d2a1b35-7fb2-4a0a-8fbd-35d60f4eff31.jsonl",
        30,
        {
            "seed": None,
            "started": True,
            "prompt_id": "6bec10ae-9fe1-4392-bb39-7cb934c180e2",
            "prompt_ns": 1796528353740000000,
            "queued": None,
            "message_id": "msg_titled_1_38429323",
            "turn_open": False,
            "aborted": False,
            "ending": {
                "id": "712e3508-9046-497d-b2df-778e110a36c3",
                "time_ns": 1796528353955000000,
                "offset": 147001,
                "end_offset": 148196,
            },
            "ended": False,
            "background": 0,
            "last_uuid": "712e3508-9046-497d-b2df-778e110a36c3",
            "last_ns": 1796528353955000000,
            "held": [],
            "starts": [],
            "request": {"time_ns": 1796528353950000000, "model": "claude-opus-5-5"},
            "attempts": [],
            "fork": None,
            "copied": 0,
            "copied_prompt": None,
            "enqueue_ns": 1796528353633000000,
            "title": "greeter-check",
            "aliases": [],
            "companion": None,
        },
    ),
    # a call's tool_use blocks waiting for its last block (3)
    (
        "claude-code-2.1.332/multi-tool/projects/-home-agentrec-agents-claude-code-multi-tool-project/e67f3e52-3855-4c56-8acc-8b6aa4da31a5.jsonl",
        21,
        {
            "seed": None,
            "started": True,
            "prompt_id": "e9361646-208c-4deb-9018-f268ad8d56f2",
            "prompt_ns": 1796528334493000000,
            "queued": None,
            "message_id": "msg_multi_0_d9020a64",
            "turn_open": True,
            "aborted": False,
            "ending": None,
            "ended": False,
            "background": 0,
            "last_uuid": "4de90983-a2d2-4439-a507-c1d2ced51381",
            "last_ns": 1796528334568000000,
            "held": [],
            "starts": [
                {
                    "id": "toolu_multi_0_0",
                    "time_ns": 1796528334568000000,
                    "offset": 87058,
                    "end_offset": 88379,
                    "call_id": "toolu_multi_0_0",
                    "name": "Read",
                    "arguments": {
                        "file_path": "/home/agentrec/agents/claude-code/multi-tool/project/src/greet.py"
                    },
                }
            ],
            "request": {"time_ns": 1796528334562000000, "model": "claude-opus-5-5"},
            "attempts": [],
            "fork": None,
            "copied": 0,
            "copied_prompt": None,
            "enqueue_ns": 1796528334436000000,
            "title": None,
            "aliases": [],
            "companion": None,
        },
    ),
    # a sub-agent's file, rooted (rule A)
    (
        "claude-code-2.1.332/background-subagent/projects/-home-agentrec-agents-claude-code-background-subagent-project/aa306048-23c2-424f-9222-6cdb75fede68/subagents/agent-a1a66f2b8cb6ca6b0.jsonl",
        1,
        {
            "seed": {
                "agent_id": "a1a66f2b8cb6ca6b0",
                "tool_use_id": "toolu_bgmain_0_0",
                "agent_type": "general-purpose",
                "description": "Find where the greeting is defined",
                "rooted": True,
            },
            "started": True,
            "prompt_id": "752ec85e-3801-4222-adc6-83eb5b4c8ad9",
            "prompt_ns": 1796528340747000000,
            "queued": None,
            "message_id": None,
            "turn_open": False,
            "aborted": False,
            "ending": None,
            "ended": False,
            "background": 0,
            "last_uuid": "27df0a7f-e792-419b-ba4e-658983dba401",
            "last_ns": 1796528340747000000,
            "held": [],
            "starts": [],
            "request": None,
            "attempts": [],
            "fork": None,
            "copied": 0,
            "copied_prompt": None,
            "enqueue_ns": 0,
            "title": None,
            "aliases": [],
            "companion": None,
        },
    ),
]


# Keys of the Claude Code framer's state added after those checkpoints were written: ``running``, the background
# sub-agents not reported yet by id (a checkpoint without it resumes with none: a prompt the user leaves before one
# reports says nothing of it on its root, as before the key).
ADDED_SINCE_THE_SPLIT = frozenset({"running"})


def _framed(framer: ClaudeCodeFramer, log: Path, after: int) -> list[Event]:
    """The events ``framer`` gives for the lines of ``log`` after line ``after``, and at its end."""
    out: list[Event] = []
    for number, item in enumerate(split_lines(log.read_bytes()), 1):
        if number > after and isinstance(item, Line) and item.data.strip():
            out.extend(framer.frame(cc.read_line(item.data, item.start, item.end, number)))  # type: ignore[arg-type]
    return out + framer.close()


@pytest.mark.parametrize(
    ("log", "line", "state"),
    CLAUDE_CODE_STATES,
    ids=[f"{s[0].split('/')[1]}:{s[1]}" for s in CLAUDE_CODE_STATES],
)
def test_claude_code_framer_resumes_from_a_checkpoint_written_before_its_split(
    log: str, line: int, state: dict[str, Any]
) -> None:
    path = FIXTURES / "other-agents" / log
    resumed = ClaudeCodeFramer(copy.deepcopy(state))
    assert resumed.snapshot() == state  # every key read back, none renamed, none added
    first = seed(path)
    whole = ClaudeCodeFramer({"seed": first} if first is not None else None)
    for number, item in enumerate(split_lines(path.read_bytes()), 1):
        if number > line:
            break
        if isinstance(item, Line) and item.data.strip():
            whole.frame(cc.read_line(item.data, item.start, item.end, number))  # type: ignore[arg-type]
    # the fixture gives this state at that line, but for keys added since (which such a checkpoint lacks)
    assert {k: v for k, v in whole.snapshot().items() if k not in ADDED_SINCE_THE_SPLIT} == state
    rest = _framed(whole, path, line)
    assert rest and _framed(resumed, path, line) == rest
