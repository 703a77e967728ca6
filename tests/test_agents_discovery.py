"""Every agent's logs by default (issue 26, points 2 and 5): ``replay``, ``show``, ``report`` and ``doctor`` with no
path read each enabled agent's folder (``agents``: Copilot CLI's ``session-state``, Claude Code's ``projects``,
Codex's ``sessions``, Gemini CLI's ``tmp``), each under a temporary HOME laid out as the CLIs lay it out, from the real recordings of
``tests/fixtures/other-agents/`` and ``tests/fixtures/cli-generated/``.

What each command must find is read from the fixtures' own ``checks.json`` (written by whoever recorded them, from
the scripted model server), never from our output: model calls per session and sub-agent, human prompts, tokens.
Codex's logs need its framer (``sources/codex_loop.py``, another change): the cases that fold them are skipped,
saying so, until :func:`copilot_otel.sources.loop_source` has one; until then the default folders leave Codex's out
with one warning, which the cases without the framer pin.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from copilot_otel import library
from copilot_otel.cli import main
from tests.conftest import CLI_GENERATED, FIXTURES, read_events, replay_into
from tests.otlp_receiver import OtlpReceiver

OTHER = FIXTURES / "other-agents"
CLAUDE = json.loads((OTHER / "claude-code" / "checks.json").read_text(encoding="utf-8"))["scenarios"]
CODEX = json.loads((OTHER / "codex" / "checks.json").read_text(encoding="utf-8"))["scenarios"]
GEMINI = {
    name: json.loads((OTHER / "gemini" / name / "checks.json").read_text(encoding="utf-8"))
    for name in ("subagent", "multi-tool")
}
# The scenarios laid out in each HOME: a sub-agent (Claude Code: a file of its own beside the session; Codex: a
# thread of its own), and a plain one.
SCENARIOS = ("subagent", "multi-tool")
COPILOT_SESSIONS = ("failing-tool", "subagent")


@pytest.fixture(autouse=True)
def _agents_homes_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each agent's folder is found under the test's HOME, as its CLI finds it there (no variable moves it)."""
    for variable in (
        "CLAUDE_CONFIG_DIR",
        "CODEX_HOME",
        "GEMINI_CLI_HOME",
        "COPILOT_OTEL_AGENTS",
        "COPILOT_OTEL_SESSION_STATE",
        "COPILOT_OTEL_CLAUDE_CODE_HOME",
        "COPILOT_OTEL_CODEX_HOME",
        "COPILOT_OTEL_GEMINI_HOME",
    ):
        monkeypatch.delenv(variable, raising=False)
    # Piped with no COLUMNS, show's listing prints whole rows (a terminal's width would cut ids and titles).
    monkeypatch.delenv("COLUMNS", raising=False)


def _claude(home: Path) -> Path:
    for name in SCENARIOS:
        shutil.copytree(
            OTHER / "claude-code" / name / "projects", home / ".claude" / "projects", dirs_exist_ok=True
        )
    return home / ".claude"


def _codex(home: Path) -> Path:
    for name in SCENARIOS:
        shutil.copytree(OTHER / "codex" / name / "sessions", home / ".codex" / "sessions", dirs_exist_ok=True)
    return home / ".codex"


def _gemini(home: Path) -> Path:
    """Gemini CLI's folder with the scenarios' logs (each project's ``chats``, a sub-agent's in its session's
    folder there)."""
    for name in GEMINI:
        shutil.copytree(OTHER / "gemini" / name / "tmp", home / ".gemini" / "tmp", dirs_exist_ok=True)
    return home / ".gemini"


def _gemini_sessions() -> dict[str, str]:
    """Each scenario by the id its session log's name holds (``session-<time>-<the id's first 8>.jsonl``)."""
    return {f[-14:-6]: n for n, checks in GEMINI.items() for f in checks["files"] if "/chats/session-" in f}


def _gemini_calls() -> int:
    return sum(
        sum(c["main_model_calls_per_prompt"]) + sum(c["subagent_model_calls"].values())
        for c in GEMINI.values()
    )


def _gemini_tokens() -> tuple[int, int]:
    """Input and output tokens as the fold counts them (output with the thoughts), from the scripted usage."""
    usages = [u for checks in GEMINI.values() for u in checks["scripted_usage"]]
    return sum(u["input"] for u in usages), sum(u["output"] + u["thoughts"] for u in usages)


def _copilot(home: Path) -> Path:
    root = home / ".copilot" / "session-state"
    for name in COPILOT_SESSIONS:
        sid = read_events(CLI_GENERATED / name / "events.jsonl")[0]["data"]["sessionId"]
        shutil.copytree(CLI_GENERATED / name, root / sid, ignore=shutil.ignore_patterns("_capture"))
    return root


def _ids(receiver: OtlpReceiver) -> set[tuple[str, str, str]]:
    return {(s["trace_id"], s["span_id"], s["name"]) for s in receiver.spans()}


def _explicit(*paths: Path) -> set[tuple[str, str, str]]:
    """The spans replaying ``paths`` as given exports (the behaviour before this change)."""
    with OtlpReceiver() as other:
        assert replay_into(other, *paths) == 0
        return _ids(other)


def _claude_calls() -> int:
    return sum(
        CLAUDE[n]["model_calls_transcript"]["main"]
        + sum(CLAUDE[n]["model_calls_transcript"]["subagents"].values())
        for n in SCENARIOS
    )


def _tokens(checks: dict[str, Any], names: tuple[str, ...]) -> tuple[int, int]:
    """Input and output tokens of the scenarios' main agents and sub-agents, as the recorder counted them."""
    usages = [checks[n]["usage_main"] for n in names] + [
        a["usage"] for n in names for a in checks[n]["subagents"]
    ]
    return sum(u["input_tokens"] for u in usages), sum(u["output_tokens"] for u in usages)


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# ------------------------------------------------------------------------------------------------ replay
def test_replay_with_only_claude_code_logs_exports_them(_isolated_home: Path, receiver: OtlpReceiver) -> None:
    """No ~/.copilot at all: a plain ``replay`` exports Claude Code's sessions, sub-agents rooted in their parent's
    trace, exactly what ``replay ~/.claude`` exports."""
    claude = _claude(_isolated_home)
    assert replay_into(receiver) == 0
    spans = receiver.spans()
    assert sum(s["name"].startswith("chat ") for s in spans) == _claude_calls()
    # one trace per human prompt, the sub-agent's spans in its parent's
    assert len({s["trace_id"] for s in spans}) == sum(len(CLAUDE[n]["human_prompts"]) for n in SCENARIOS)
    agent = next(s for s in spans if s["name"] == "invoke_agent general-purpose")
    tool = next(s for s in spans if s["name"] == "execute_tool Agent")
    assert (agent["trace_id"], agent["parent_span_id"]) == (tool["trace_id"], tool["span_id"])
    assert _ids(receiver) == _explicit(claude)


def test_replay_with_only_copilot_logs_is_as_before(_isolated_home: Path, receiver: OtlpReceiver) -> None:
    root = _copilot(_isolated_home)
    assert replay_into(receiver) == 0
    assert _ids(receiver) == _explicit(root) and receiver.spans()


def test_replay_of_all_three_is_each_folder_replayed(
    _isolated_home: Path, receiver: OtlpReceiver, capsys: pytest.CaptureFixture[str]
) -> None:
    copilot, claude, codex = _copilot(_isolated_home), _claude(_isolated_home), _codex(_isolated_home)
    assert replay_into(receiver) == 0
    out = capsys.readouterr()
    assert _ids(receiver) == _explicit(copilot) | _explicit(claude) | _explicit(codex)
    # Each agent's sessions: a sub-agent's file or thread is part of its session (as report counts it).
    sessions = len(COPILOT_SESSIONS) + 2 * len(SCENARIOS)
    assert "left out" not in out.err
    assert f"exported {sessions} sessions:" in out.out


def test_replay_to_the_file_exporter_reads_every_folder(_isolated_home: Path) -> None:
    """The embedded file exporter (no endpoint): the Copilot and Claude Code sessions' spans are in its file."""
    _copilot(_isolated_home)
    _claude(_isolated_home)
    assert main(["replay", "--no-progress"]) == 0
    lines = (_isolated_home / ".local/state/copilot-otel/otlp.jsonl").read_text().splitlines()
    spans = [
        span
        for record in map(json.loads, lines)
        for rs in record.get("resourceSpans", [])
        for ss in rs["scopeSpans"]
        for span in ss["spans"]
    ]
    claude_calls = sum(span["name"] == "chat claude-opus-4-8" for span in spans)
    assert claude_calls == _claude_calls()
    copilot_calls = sum(
        1 for name in COPILOT_SESSIONS for e in read_events(CLI_GENERATED / name / "events.jsonl")
        if e["type"] == "assistant.turn_start"
    )  # fmt: skip
    assert sum(span["name"].startswith("chat ") for span in spans) == claude_calls + copilot_calls


def test_with_no_folder_there_one_line_names_each_and_how_to_move_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for command in (["replay", "--no-progress"], ["show"], ["report"]):
        assert main(command) == 3, command
        line = _one_line(capsys.readouterr().err)
        assert line.startswith(
            "copilot-otel: error: no session logs found: ~/.copilot/session-state does not exist"
        )
        assert "~/.claude/projects does not exist (Claude Code)" in line
        assert "~/.codex/sessions does not exist (Codex CLI)" in line
        assert "~/.gemini/tmp does not exist (Gemini CLI)" in line
        assert "set --session-state, --claude-code-home, --codex-home or --gemini-home" in line


def test_agents_switches_the_others_off(
    _isolated_home: Path, receiver: OtlpReceiver, capsys: pytest.CaptureFixture[str]
) -> None:
    claude = _claude(_isolated_home)
    assert replay_into(receiver, extra=("--agents", "copilot")) == 3
    line = _one_line(capsys.readouterr().err)
    assert "~/.copilot/session-state does not exist (Copilot CLI)" in line and ".claude" not in line
    assert line.endswith("(switched off by --agents / COPILOT_OTEL_AGENTS: claude-code, codex, gemini)")
    assert replay_into(receiver, extra=("--agents", "none")) == 3
    assert "the agents setting is none" in _one_line(capsys.readouterr().err)
    assert not receiver.spans()
    # a path given is read whatever the setting says
    assert replay_into(receiver, claude, extra=("--agents", "none")) == 0 and receiver.spans()

    copilot = _copilot(_isolated_home)
    with OtlpReceiver() as only:
        assert replay_into(only, extra=("--agents", "copilot")) == 0
        assert _ids(only) == _explicit(copilot)


def test_claude_code_home_moves_its_folder(tmp_path: Path, receiver: OtlpReceiver) -> None:
    claude = _claude(tmp_path / "elsewhere")
    assert replay_into(receiver, extra=("--claude-code-home", str(claude))) == 0
    assert sum(s["name"].startswith("chat ") for s in receiver.spans()) == _claude_calls()


@pytest.mark.parametrize("target", ["home", "sessions"])
def test_codex_home_and_its_sessions_folder_expand_into_its_rollouts(
    _isolated_home: Path, target: str
) -> None:
    """``replay ~/.codex`` and ``~/.codex/sessions`` name each rollout, the thread id (its name's trailing UUID)
    as the session's id, as ``~/.claude`` names each session."""
    codex = _codex(_isolated_home)
    logs = library.other_agent_logs(codex if target == "home" else codex / "sessions", subagents=True)
    assert logs is not None
    assert {s.session_id for s in logs} == {t for n in SCENARIOS for t in _threads(n)}
    assert {s.agent for s in logs} == {"codex"}


def _threads(name: str) -> list[str]:
    return [CODEX[name]["session_ids"][0], *(a["thread_id"] for a in CODEX[name]["subagents"])]


@pytest.mark.parametrize("target", ["home", "sessions"])
def test_replay_of_codex_folders_exports_every_thread(
    _isolated_home: Path, receiver: OtlpReceiver, target: str
) -> None:
    codex = _codex(_isolated_home)
    assert replay_into(receiver, codex if target == "home" else codex / "sessions") == 0
    calls = sum(
        CODEX[n]["model_calls_rollout"]["main"] + sum(CODEX[n]["model_calls_rollout"]["subagents"].values())
        for n in SCENARIOS
    )
    assert sum(s["name"].startswith("chat ") for s in receiver.spans()) == calls


def test_replay_exports_gemini_logs_by_default_as_replay_of_its_folder_does(
    _isolated_home: Path, receiver: OtlpReceiver, capsys: pytest.CaptureFixture[str]
) -> None:
    """Only Gemini CLI has run: a plain ``replay`` exports its sessions and the sub-agent's log (folded alone,
    under its parent's ``invoke_agent`` call), exactly what ``replay ~/.gemini`` and ``replay ~/.gemini/tmp``
    export; ``--agents`` without gemini leaves its folder unread."""
    gemini = _gemini(_isolated_home)
    assert replay_into(receiver) == 0
    assert "exported 2 sessions:" in capsys.readouterr().out  # the sub-agent's log is part of its session
    spans = receiver.spans()
    assert sum(s["name"].startswith("chat ") for s in spans) == _gemini_calls()
    assert len({s["trace_id"] for s in spans}) == sum(len(c["human_prompts"]) for c in GEMINI.values())
    agent = next(s for s in spans if s["name"] == "invoke_agent generalist")
    tool = next(s for s in spans if s["name"] == "execute_tool invoke_agent")
    assert (agent["trace_id"], agent["parent_span_id"]) == (tool["trace_id"], tool["span_id"])
    assert _ids(receiver) == _explicit(gemini) == _explicit(gemini / "tmp")
    assert {s["attributes"]["copilot_otel.agent"] for s in spans} == {"gemini"}

    with OtlpReceiver() as off:
        assert replay_into(off, extra=("--agents", "copilot,claude-code,codex")) == 3
        line = _one_line(capsys.readouterr().err)
        assert ".gemini" not in line.split(";")[0] and line.endswith("COPILOT_OTEL_AGENTS: gemini)")
        assert not off.spans()


def test_gemini_home_moves_its_folder(tmp_path: Path, receiver: OtlpReceiver) -> None:
    gemini = _gemini(tmp_path / "elsewhere")
    assert replay_into(receiver, extra=("--gemini-home", str(gemini))) == 0
    assert sum(s["name"].startswith("chat ") for s in receiver.spans()) == _gemini_calls()


# ------------------------------------------------------------------------------------------------ show
def _listing(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["show", "--json", *args]) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


def test_show_lists_every_agents_sessions_with_their_agent(
    _isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copilot = _copilot(_isolated_home)
    claude_home = _claude(_isolated_home)
    doc = _listing(capsys)
    assert doc["folders"] == [str(copilot), str(claude_home / "projects")]
    assert doc["session_state"] == str(copilot) and doc["total"] == len(COPILOT_SESSIONS) + len(SCENARIOS)
    rows = {row["session_id"]: row for row in doc["sessions"]}
    claude = {CLAUDE[n]["session_ids"][0]: n for n in SCENARIOS}
    assert {sid: row["agent"] for sid, row in rows.items() if row["agent"] == "claude-code"} == dict.fromkeys(
        claude, "claude-code"
    )  # each session once: the sub-agent's file is read with its session, not listed
    assert sum(row["agent"] == "copilot" for row in rows.values()) == len(COPILOT_SESSIONS)
    for sid, name in claude.items():
        assert rows[sid]["prompts"] == len(CLAUDE[name]["human_prompts"])
        assert rows[sid]["problem"] is None
    # the sub-agent's tools count with its session's
    assert rows[CLAUDE["subagent"]["session_ids"][0]]["tool_calls"] == len(CLAUDE["subagent"]["tool_calls"])

    assert main(["show"]) == 0
    out = capsys.readouterr().out
    assert "Recent sessions in ~/.copilot/session-state, ~/.claude/projects" in out
    table = [line.split() for line in out.splitlines() if line[:2].isdigit()]
    assert Counter(row[3] for row in table) == {
        "copilot": len(COPILOT_SESSIONS),
        "claude-code": len(SCENARIOS),
    }
    assert {row[2] for row in table if row[3] == "claude-code"} == {sid[:8] for sid in claude}

    only = _listing(capsys, "--agent", "claude-code")["sessions"]
    assert {row["session_id"] for row in only} == set(claude)
    assert {row["agent"] for row in _listing(capsys, "--agents", "copilot")["sessions"]} == {"copilot"}


def test_show_draws_a_claude_code_session_by_id_prefix_with_its_sub_agent(
    _isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _claude(_isolated_home)
    sid = CLAUDE["subagent"]["session_ids"][0]
    assert main(["show", sid[:6]]) == 0
    out = capsys.readouterr().out
    assert f"Session {sid}" in out and "claude-code 2.1.197" in out
    assert "sub-agent general-purpose" in out

    doc = _listing(capsys, sid)
    assert (doc["session_id"], doc["agent"]) == (sid, "claude-code")
    calls = CLAUDE["subagent"]["model_calls_transcript"]
    chats = [s for s in doc["spans"] if s["name"].startswith("chat ")]
    assert len(chats) == calls["main"] + sum(calls["subagents"].values())


def test_show_finds_a_codex_thread_by_id(_isolated_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A thread id is the rollout's trailing UUID; Codex's ids share their first characters (UUIDv7: the time),
    so a prefix that two threads share is ambiguous and says which."""
    _codex(_isolated_home)
    thread = CODEX["subagent"]["subagents"][0]["thread_id"]
    doc = _listing(capsys, thread)
    assert doc["agent"] == "codex" and doc["path"].endswith(f"-{thread}.jsonl")
    assert main(["show", thread[:8]]) == 3
    assert "is ambiguous" in _one_line(capsys.readouterr().err)


def test_show_lists_codex_threads_by_the_shortest_unique_prefix(
    _isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    codex = _codex(_isolated_home)
    assert main(["show", str(codex)]) == 0
    ids = [line.split()[2] for line in capsys.readouterr().out.splitlines() if line[:2].isdigit()]
    threads = [t for n in SCENARIOS for t in _threads(n)]
    # one row per session: a sub-agent's thread is read with the session that spawned it (as Claude Code's file is)
    assert len(ids) == len(SCENARIOS)
    for short in ids:  # each names one thread, as show <prefix> takes it
        assert len(short) >= 8 and sum(t.startswith(short) for t in threads) == 1
    assert {t for t in threads for short in ids if t.startswith(short)} == {_threads(n)[0] for n in SCENARIOS}


def test_show_lists_codex_threads_with_their_prompts(
    _isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _codex(_isolated_home)
    rows = {row["session_id"]: row for row in _listing(capsys)["sessions"]}
    for name in SCENARIOS:
        row = rows[CODEX[name]["session_ids"][0]]
        assert (row["agent"], row["prompts"], row["problem"]) == (
            "codex",
            len(CODEX[name]["human_prompts"]),
            None,
        )


def test_show_lists_gemini_sessions_with_their_agent_and_draws_one_by_its_full_id(
    _isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each Gemini session once (its sub-agent's log read with it, not listed), named by the id its log's name
    holds; ``show`` of the full session id (the sub-agent's folder is named by it) draws the session with its
    sub-agent."""
    gemini = _gemini(_isolated_home)
    _claude(_isolated_home)
    doc = _listing(capsys)
    assert doc["folders"] == [str(_isolated_home / ".claude" / "projects"), str(gemini / "tmp")]
    rows = {row["session_id"]: row for row in doc["sessions"] if row["agent"] == "gemini"}
    assert set(rows) == set(_gemini_sessions())
    for short, name in _gemini_sessions().items():
        assert rows[short]["prompts"] == len(GEMINI[name]["human_prompts"]) and rows[short]["problem"] is None
        assert rows[short]["tool_calls"] == len(GEMINI[name]["scripted_tool_calls"])  # the sub-agent's too

    assert main(["show"]) == 0
    table = [line.split() for line in capsys.readouterr().out.splitlines() if line[:2].isdigit()]
    assert Counter(row[3] for row in table) == {"gemini": len(GEMINI), "claude-code": len(SCENARIOS)}
    only = _listing(capsys, "--agent", "gemini")["sessions"]
    assert {row["agent"] for row in only} == {"gemini"} and len(only) == len(GEMINI)

    (folder,) = [p for p in (gemini / "tmp").glob("*/chats/*") if p.is_dir()]  # chats/<full session id>
    drawn = _listing(capsys, folder.name)
    assert (drawn["session_id"], drawn["agent"]) == (folder.name, "gemini")
    chats = [s for s in drawn["spans"] if s["name"].startswith("chat ")]
    checks = GEMINI["subagent"]
    assert len(chats) == sum(checks["main_model_calls_per_prompt"]) + sum(
        checks["subagent_model_calls"].values()
    )
    assert main(["show", folder.name]) == 0
    assert "sub-agent generalist" in capsys.readouterr().out


# ------------------------------------------------------------------------------------------------ report
def _report(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["report", *args, "--json", "--tz", "UTC"]) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


def test_report_rows_per_agent_add_up_each_agents_tokens(
    _isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copilot = _copilot(_isolated_home)
    _claude(_isolated_home)
    rows = {row["key"]: row for row in _report(capsys, "agent")["rows"]}
    assert set(rows) == {"copilot", "claude-code"}
    claude = rows["claude-code"]
    assert (claude["input_tokens"], claude["output_tokens"]) == _tokens(CLAUDE, SCENARIOS)
    assert claude["sessions"] == len(SCENARIOS) and claude["agent"] == "claude-code"
    assert claude["prompts"] == sum(len(CLAUDE[n]["human_prompts"]) for n in SCENARIOS)
    assert claude["tool_calls"] == sum(len(CLAUDE[n]["tool_calls"]) for n in SCENARIOS)
    # Copilot's row is what a report of its folder alone says
    alone = _report(capsys, "monthly", str(copilot))["totals"]
    assert {k: v for k, v in rows["copilot"].items() if k not in ("key", "first_seen", "last_seen")} == {
        k: v for k, v in alone.items() if k not in ("key", "first_seen", "last_seen")
    }
    # every session row says its agent; the totals both
    sessions = _report(capsys, "session")
    assert Counter(row["agent"] for row in sessions["rows"]) == {
        "copilot": len(COPILOT_SESSIONS),
        "claude-code": len(SCENARIOS),
    }
    assert sessions["totals"]["agent"] == "claude-code,copilot"
    # --agent: only that agent's sessions count
    only = _report(capsys, "daily", "--agent", "claude-code")["totals"]
    assert (only["input_tokens"], only["output_tokens"], only["agent"]) == (
        *_tokens(CLAUDE, SCENARIOS),
        "claude-code",
    )


def test_report_table_says_whose_usage_and_each_sessions_agent(
    _isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _claude(_isolated_home)
    assert main(["report", "--tz", "UTC"]) == 0
    assert capsys.readouterr().out.startswith("Claude Code usage, daily")
    _copilot(_isolated_home)
    assert main(["report", "session", "--tz", "UTC", "--wide"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Coding agents' usage, session")
    lines = out.splitlines()
    assert lines[1].split()[:4] == ["session", "last", "active", "agent"]
    rows = [
        line.split() for line in lines[2:] if line[:8] in {CLAUDE[n]["session_ids"][0][:8] for n in SCENARIOS}
    ]
    assert len(rows) == len(SCENARIOS) and all("claude-code" in row for row in rows)


def test_report_of_claude_code_home_counts_each_session_once(
    _isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``report ~/.claude`` reads each session with its sub-agents' files (not also each file alone)."""
    claude = _claude(_isolated_home)
    totals = _report(capsys, "monthly", str(claude))["totals"]
    assert totals["sessions"] == len(SCENARIOS)
    assert (totals["input_tokens"], totals["output_tokens"]) == _tokens(CLAUDE, SCENARIOS)


def test_report_adds_up_codex_threads_the_same_way(
    _isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _codex(_isolated_home)
    (row,) = _report(capsys, "agent")["rows"]
    # a session each, its sub-agents' threads counted in it (their tokens too), as Claude Code's files are
    assert row["key"] == "codex" and row["sessions"] == len(SCENARIOS)
    assert (row["input_tokens"], row["output_tokens"]) == _tokens(CODEX, SCENARIOS)
    # a session's row is keyed by its root thread's id, as show names it
    keys = {r["key"] for r in _report(capsys, "session")["rows"]}
    assert keys == {_threads(n)[0] for n in SCENARIOS}


def test_report_has_a_gemini_row_that_adds_up_its_tokens(
    _isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Gemini's row: each session once with its sub-agent's work, the tokens in the fold's meaning (output with
    the thoughts), as the recorder scripted them; ``report ~/.gemini`` says the same."""
    gemini = _gemini(_isolated_home)
    _claude(_isolated_home)
    rows = {row["key"]: row for row in _report(capsys, "agent")["rows"]}
    assert set(rows) == {"claude-code", "gemini"}
    row = rows["gemini"]
    assert (row["input_tokens"], row["output_tokens"]) == _gemini_tokens()
    assert (row["sessions"], row["agent"]) == (len(GEMINI), "gemini")
    assert row["prompts"] == sum(len(c["human_prompts"]) for c in GEMINI.values())
    assert row["tool_calls"] == sum(len(c["scripted_tool_calls"]) for c in GEMINI.values())
    totals = _report(capsys, "monthly", str(gemini))["totals"]
    assert (totals["sessions"], totals["input_tokens"], totals["output_tokens"]) == (
        len(GEMINI),
        *_gemini_tokens(),
    )
    assert main(["report", "--tz", "UTC", "--agent", "gemini"]) == 0
    assert capsys.readouterr().out.startswith("Gemini CLI usage, daily")


# ------------------------------------------------------------------------------------------------ doctor
def _doctor(capsys: pytest.CaptureFixture[str], *args: str) -> list[str]:
    main(["doctor", "--timeout", "1", "--endpoint", "http://127.0.0.1:9", *args])
    return capsys.readouterr().out.splitlines()


def test_doctor_lists_each_agents_folder(_isolated_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    claude = _claude(_isolated_home)
    lines = _doctor(capsys)
    assert (
        f"ok   Claude Code logs: {len(SCENARIOS)} sessions in {claude / 'projects'} (and 1 sub-agent file)"
        in lines
    )
    codex = _isolated_home / ".codex" / "sessions"
    assert (
        f"ok   Codex CLI logs: {codex} does not exist (fine if Codex CLI has not run as this user; "
        in "\n".join(lines)
    )
    assert any(line.startswith("warn session logs: ") and "does not exist yet" in line for line in lines)

    lines = _doctor(capsys, "--agents", "copilot")
    off = "not read: switched off by the agents setting (--agents, COPILOT_OTEL_AGENTS)"
    assert f"ok   Claude Code logs: {claude / 'projects'} {off}" in lines
    assert f"ok   Codex CLI logs: {codex} {off}" in lines
    lines = _doctor(capsys, "--agents", "claude-code")
    assert f"ok   session logs: {_isolated_home / '.copilot' / 'session-state'} {off}" in lines

    gemini = _isolated_home / ".gemini" / "tmp"
    assert f"ok   Gemini CLI logs: {gemini} {off}" in lines

    _codex(_isolated_home)
    children = sum(len(_threads(n)) - 1 for n in SCENARIOS)  # a sub-agent's thread is part of its session
    line = next(line for line in _doctor(capsys) if "Codex CLI logs" in line)
    assert (
        line == f"ok   Codex CLI logs: {len(SCENARIOS)} sessions in {codex} (and {children} sub-agent file)"
    )

    lines = _doctor(capsys)
    assert (
        f"ok   Gemini CLI logs: {gemini} does not exist (fine if Gemini CLI has not run as this user; "
        in ("\n".join(lines))
    )
    _gemini(_isolated_home)
    line = next(line for line in _doctor(capsys) if "Gemini CLI logs" in line)
    assert line == f"ok   Gemini CLI logs: {len(GEMINI)} sessions in {gemini} (and 1 sub-agent file)"


def test_an_id_prefix_two_agents_share_is_ambiguous_and_names_both(
    _isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _claude(_isolated_home)
    sid = CLAUDE["subagent"]["session_ids"][0]
    twin = f"{sid[:8]}-0000-4000-8000-000000000000"  # a Copilot session whose id starts alike
    shutil.copytree(CLI_GENERATED / "multi-tool", _isolated_home / ".copilot" / "session-state" / twin)
    assert main(["show", sid[:8]]) == 3
    line = _one_line(capsys.readouterr().err)
    assert f"session id prefix {sid[:8]!r} is ambiguous" in line
    assert f"{twin} (copilot)" in line and f"{sid} (claude-code)" in line
    assert main(["show", "--json", sid[:10]]) == 0  # past the dash: the Claude Code session alone
    assert json.loads(capsys.readouterr().out)["session_id"] == sid


def test_an_agent_switched_off_is_not_listed_and_said_so(
    _isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _claude(_isolated_home)
    assert main(["show", "--agent", "claude-code", "--agents", "copilot"]) == 3
    line = _one_line(capsys.readouterr().err)
    assert line == (
        "copilot-otel: error: no session logs to read: claude-code is switched off by the agents setting "
        "(--agents, COPILOT_OTEL_AGENTS)"
    )
    # nor looked up by id
    assert main(["show", CLAUDE["subagent"]["session_ids"][0], "--agents", "copilot"]) == 3
    assert "no such file, folder or session id" in _one_line(capsys.readouterr().err)
