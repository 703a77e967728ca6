"""A prompt's cost on its root is its whole trace's, the calls its sub-agents made in logs of their own included.

Claude Code, Codex and Gemini CLI write a sub-agent's work to a log of its own, which is folded apart (its spans
hang in the parent's trace). When the parent's prompt ends, its pipeline reads the logs of the sub-agents it ran
for their calls, and the root adds their cost (``copilot_otel.prompt.subagent_cost_usd`` says that part). Every
scenario of the three agents is replayed whole into a real OTLP receiver and each root held to the chat spans of
its trace. What cannot be read is said on the root (``copilot_otel.prompt.subagents_unread``), never guessed: a
missing log (also one a sub-agent of a sub-agent ran), a FIFO in its place, an id that would lead out of the
folder; a log that names itself is read once; a last line without its newline counts as replay counts it. The
daemon's side (a log the CLI deletes once the sub-agent ended) is in tests/test_vanishing_subagents.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from copilot_otel.sources.claude_code.subagents import subagent_log
from copilot_otel.sources.codex.reader import thread_log
from copilot_otel.sources.gemini.reader import subagent_log as gemini_subagent_log
from tests.conftest import FIXTURES, replay_into
from tests.otlp_receiver import OtlpReceiver
from tests.test_golden import SOURCES

SUBAGENT_COST = "copilot_otel.prompt.subagent_cost_usd"
UNREAD = "copilot_otel.prompt.subagents_unread"
RUNNING = "copilot_otel.prompt.subagents_running"
COST = "copilot_otel.prompt.cost_usd"
CLAUDE_SUBAGENT = FIXTURES / "other-agents" / "claude-code" / "subagent"


def _replays() -> list[Any]:
    return [
        pytest.param(paths, id=f"{agent}:{name}")
        for agent in ("claude-code", "codex", "gemini")
        for name, paths in sorted(SOURCES[agent].replays.items())
    ]


def _roots_and_chats(spans: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    roots = [s for s in spans if s["parent_span_id"] is None]
    chats = [s for s in spans if s["attributes"].get("openinference.span.kind") == "LLM"]
    return roots, chats


def _trace_cost(root: dict[str, Any], chats: list[dict[str, Any]]) -> float:
    """What the chat spans of the root's trace cost, each as its own span says."""
    return float(
        sum(
            c["attributes"]["llm.cost.total"]
            for c in chats
            if c["trace_id"] == root["trace_id"] and "llm.cost.total" in c["attributes"]
        )
    )


@pytest.mark.parametrize("paths", _replays())
def test_a_prompts_root_costs_every_chat_of_its_trace(paths: list[Path], receiver: OtlpReceiver) -> None:
    """Each root costs what its trace's chat spans cost (a sub-agent's among them); the part its sub-agents made
    is the cost of the chats under its sub-agents' logs, and nothing is said unread."""
    assert replay_into(receiver, *paths) == 0
    roots, chats = _roots_and_chats(receiver.spans())
    assert roots
    for root in roots:
        attrs = root["attributes"]
        assert attrs.get(COST, 0.0) == pytest.approx(_trace_cost(root, chats)), root["name"]
        assert UNREAD not in attrs


@pytest.mark.parametrize(
    "paths",
    [p for p in _replays() if "subagent" in p.id],
)
def test_the_sub_agents_part_is_said_apart(paths: list[Path], receiver: OtlpReceiver) -> None:
    """Every scenario with a sub-agent (5 of Claude Code, 2 of Codex, 1 of Gemini CLI): the root says how much of
    its cost its sub-agents' own logs made, which is more than nothing and less than the whole."""
    assert replay_into(receiver, *paths) == 0
    roots, _ = _roots_and_chats(receiver.spans())
    parts = [
        (r["attributes"][SUBAGENT_COST], r["attributes"][COST])
        for r in roots
        if SUBAGENT_COST in r["attributes"]
    ]
    assert parts, "a root with its sub-agents' part"
    for part, whole in parts:
        assert 0 < part < whole


def _claude_copy(tmp_path: Path) -> tuple[Path, Path]:
    """The Claude Code [subagent] scenario's ``projects`` copied: (the copy, the sub-agent's log in it)."""
    home = tmp_path / "claude"
    shutil.copytree(CLAUDE_SUBAGENT / "projects", home / "projects")
    (log,) = (home / "projects").glob("*/*/subagents/agent-*.jsonl")
    return home, log


def test_a_sub_agents_missing_log_is_said_unread(tmp_path: Path, receiver: OtlpReceiver) -> None:
    """The sub-agent's log is gone (deleted, not synced): the root costs what is known (its own calls) and says one
    sub-agent unread, instead of a cost that looks whole."""
    home, log = _claude_copy(tmp_path)
    log.unlink()
    assert replay_into(receiver, home / "projects") == 0
    roots, chats = _roots_and_chats(receiver.spans())
    (root,) = roots
    assert root["attributes"][UNREAD] == 1
    assert SUBAGENT_COST not in root["attributes"]
    assert root["attributes"][COST] == pytest.approx(_trace_cost(root, chats))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="a FIFO is a POSIX file type")
def test_a_fifo_in_a_sub_agents_place_is_not_waited_for(tmp_path: Path, receiver: OtlpReceiver) -> None:
    """A FIFO where the sub-agent's log should be (anyone who can write in the folder can make one): its ``open``
    would wait for a writer for ever. The replay ends, says which file it skipped and why, and the root says the
    sub-agent unread."""
    home, log = _claude_copy(tmp_path)
    log.unlink()
    os.mkfifo(log)
    done = subprocess.run(
        [sys.executable, "-m", "copilot_otel", "replay", str(home / "projects"), "--endpoint",
         receiver.http_endpoint, "--no-progress", "--state-dir", str(tmp_path / "state")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"skipped {log} (a sub-agent's log): it is a FIFO" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    (root,) = [s for s in receiver.spans() if s["parent_span_id"] is None]
    assert root["attributes"][UNREAD] == 1


def _agent_result(parent: Path) -> bytes:
    """The parent's ``Agent`` result line (it names the sub-agent that ran)."""
    return next(line for line in parent.read_bytes().splitlines(keepends=True) if b'"agentId"' in line)


def test_a_sub_agents_log_that_names_itself_is_read_once(tmp_path: Path, receiver: OtlpReceiver) -> None:
    """A sub-agent's log that says 25 times that it ran itself as a sub-agent (its parent's ``Agent`` result copied
    into it: a hostile or corrupt log): it is read once for the prompt, not 25 ** depth times, each call counts once
    (by its span), and nothing is unread: the root still costs its trace."""
    home, log = _claude_copy(tmp_path)
    (parent,) = (home / "projects").glob("*/*.jsonl")
    result = _agent_result(parent)
    assert log.name[len("agent-") : -len(".jsonl")].encode() in result
    with log.open("ab") as out:
        for n in range(25):
            out.write(result.replace(b'"uuid":"', f'"uuid":"copy{n}-'.encode(), 1))
    assert replay_into(receiver, home / "projects") == 0
    roots, chats = _roots_and_chats(receiver.spans())
    (root,) = roots
    assert UNREAD not in root["attributes"]
    assert root["attributes"][COST] == pytest.approx(_trace_cost(root, chats))
    assert 0 < root["attributes"][SUBAGENT_COST] < root["attributes"][COST]


def test_a_sub_agent_of_a_sub_agent_that_cannot_be_read_is_said(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    """The sub-agent's log says it ran a sub-agent of its own whose log is not there: the root counts the first
    sub-agent's calls and says one sub-agent unread (the depth it was found at does not hide it)."""
    home, log = _claude_copy(tmp_path)
    (parent,) = (home / "projects").glob("*/*.jsonl")
    agent = log.name[len("agent-") : -len(".jsonl")]
    with log.open("ab") as out:
        out.write(_agent_result(parent).replace(agent.encode(), b"a000000000000missing"))
    assert replay_into(receiver, home / "projects") == 0
    roots, chats = _roots_and_chats(receiver.spans())
    (root,) = roots
    assert root["attributes"][UNREAD] == 1
    assert root["attributes"][COST] == pytest.approx(_trace_cost(root, chats))
    assert root["attributes"][SUBAGENT_COST] > 0


def test_a_sub_agents_last_line_without_its_newline_counts(tmp_path: Path, receiver: OtlpReceiver) -> None:
    """A sub-agent's log cut before its last newline (a CLI killed while writing): replay folds that line into the
    sub-agent's spans, and the root counts it too."""
    home, log = _claude_copy(tmp_path)
    data = log.read_bytes()
    assert data.endswith(b"\n")
    log.write_bytes(data[:-1])
    assert replay_into(receiver, home / "projects") == 0
    roots, chats = _roots_and_chats(receiver.spans())
    (root,) = roots
    assert UNREAD not in root["attributes"]
    assert root["attributes"][COST] == pytest.approx(_trace_cost(root, chats))


def test_a_sub_agents_log_is_found_only_where_its_agent_writes_it(tmp_path: Path) -> None:
    """The id that names a sub-agent's log is the log's data: one that is no agent's or thread's id is no path
    (``..``, separators, glob patterns), and a link out of the parent's folder is not followed."""
    home, log = _claude_copy(tmp_path)
    (parent,) = (home / "projects").glob("*/*.jsonl")
    agent = log.name[len("agent-") : -len(".jsonl")]
    assert subagent_log(parent, agent) == log
    assert subagent_log(log, agent) == log  # a sub-agent's own sub-agents are beside it
    for bad in ("../../x", "a/b", "a\\b", "", "*"):
        assert subagent_log(parent, bad) is None, bad
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_bytes(log.read_bytes())
    log.unlink()
    log.symlink_to(outside)
    assert subagent_log(parent, agent) is None
    (rollout, child) = sorted(
        (FIXTURES / "other-agents" / "codex" / "subagent" / "sessions").rglob("*.jsonl")
    )
    thread = child.name[-len("01a23469-9aa1-7871-a529-508358d53bcb.jsonl") : -len(".jsonl")]
    assert thread_log(rollout, thread) == child
    for bad in ("*", "../" + thread, thread + "/..", ""):
        assert thread_log(rollout, bad) is None, bad
    gemini = FIXTURES / "other-agents" / "gemini" / "subagent" / "tmp"
    (session,) = gemini.glob("*/chats/session-*.jsonl")
    (sub,) = gemini.glob("*/chats/*/*.jsonl")
    assert gemini_subagent_log(session, sub.stem) == sub
    for bad in ("../" + sub.stem, "*", sub.stem + "/x", ""):
        assert gemini_subagent_log(session, bad) is None, bad


def test_a_rollout_in_the_last_days_folder_is_no_crash(tmp_path: Path, receiver: OtlpReceiver) -> None:
    """A Codex rollout filed under ``sessions/9999/12/31`` (a clock set wrong, a copied folder): the next days'
    folders, where a sub-agent's rollout may be, do not exist in any calendar; the replay goes on, and the root still
    costs its sub-agent's calls (its rollout is beside it)."""
    source = FIXTURES / "other-agents" / "codex" / "subagent" / "sessions"
    day = tmp_path / "codex" / "sessions" / "9999" / "12" / "31"
    day.mkdir(parents=True)
    for rollout in source.rglob("rollout-*.jsonl"):
        shutil.copy(rollout, day / rollout.name)
    assert replay_into(receiver, tmp_path / "codex") == 0
    roots, chats = _roots_and_chats(receiver.spans())
    assert roots and any(SUBAGENT_COST in r["attributes"] for r in roots)
    for root in roots:
        assert root["attributes"].get(COST, 0.0) == pytest.approx(_trace_cost(root, chats))


def test_a_background_sub_agent_the_user_did_not_wait_for_is_counted_so_far_and_said(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    """Claude Code 2.1.332 [background-subagent] with a human prompt typed before the background sub-agent reported
    (the log as the CLI writes it then: a new ``promptId`` opens before the ``<task-notification>``). The first
    prompt ends there: its root costs the sub-agent's calls so far (here all of them: its log was complete) and says
    one sub-agent still running; the second, which the report reaches, adds nothing of another trace's."""
    source = FIXTURES / "other-agents" / "claude-code-2.1.332" / "background-subagent" / "projects"
    home = tmp_path / "claude"
    shutil.copytree(source, home / "projects")
    (log,) = (home / "projects").glob("*/*.jsonl")
    lines = log.read_bytes().splitlines(keepends=True)
    prompt = json.loads(lines[2])
    assert prompt["type"] == "user" and isinstance(prompt["message"]["content"], str)
    companion = next(i for i, line in enumerate(lines) if b'"turnCompanion":true' in line)
    typed = {**prompt, "promptId": "00000000-0000-4000-8000-000000000002", "uuid": "00000000-0000-4000-8000-0000000000aa",
             "message": {"role": "user", "content": "While that runs: what time is it?"},
             "timestamp": json.loads(lines[companion])["timestamp"]}  # fmt: skip
    lines.insert(companion, (json.dumps(typed) + "\n").encode())
    log.write_bytes(b"".join(lines))
    assert replay_into(receiver, home / "projects") == 0
    roots, chats = _roots_and_chats(receiver.spans())
    assert len(roots) == 2
    first = min(roots, key=lambda r: r["start_ns"])
    second = max(roots, key=lambda r: r["start_ns"])
    assert first["attributes"][RUNNING] == 1
    assert first["attributes"][SUBAGENT_COST] > 0
    for root in roots:
        assert root["attributes"].get(COST, 0.0) == pytest.approx(_trace_cost(root, chats))
    assert RUNNING not in second["attributes"] and SUBAGENT_COST not in second["attributes"]
