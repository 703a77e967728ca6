"""Drift is said (issue 31, point 9): records of kinds an agent's reader does not read are counted per agent and CLI
version and said once per version, in the daemon's log, ``status`` (text and ``--json``) and ``doctor``.

The expected kinds come from the logs themselves (every kind a real capture holds that its reader has no view of)
and, for Claude Code 2.1.332, from its recording's README, which lists each new kind with a real line.
"""

from __future__ import annotations

import os
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from copilot_otel.cli import main
from copilot_otel.library import not_read_in, other_agent_logs
from copilot_otel.pipeline import FoldSettings, Pipeline, split_lines
from copilot_otel.sources import sniff
from copilot_otel.sources.claude_code import reader as claude_code
from copilot_otel.sources.codex import reader as codex
from copilot_otel.sources.copilot import events
from copilot_otel.sources.gemini import reader as gemini
from copilot_otel.sources.sessions import SessionFile
from tests.conftest import FIXTURES, SERIAL, replay_into
from tests.daemon_process import DaemonProcess
from tests.otlp_receiver import OtlpReceiver
from tests.waiting import until

OTHER = FIXTURES / "other-agents"
CC_332 = OTHER / "claude-code-2.1.332"
CC_197 = [OTHER / "claude-code", OTHER / "recorded" / "claude-code"]
CODEX = [OTHER / "codex", OTHER / "recorded" / "codex"]
GEMINI = OTHER / "gemini"
COPILOT = FIXTURES / "cli-generated"

Tally = dict[tuple[str, str | None], Counter[str]]


def _logs(base: Path) -> list[Path]:
    return sorted(p for p in base.rglob("*.jsonl") if "_capture" not in p.parts)


def _records(paths: list[Path]) -> list[dict[str, Any]]:
    out = []
    for path in paths:
        for line in path.read_bytes().splitlines():
            if line.strip():
                obj = orjson.loads(line)
                if isinstance(obj, dict):
                    out.append(obj)
    return out


def _fold(sessions: list[SessionFile]) -> Tally:
    """Each log folded whole, as replay folds it; its not-read records per (agent, version)."""
    found: Tally = {}
    for session in sessions:
        fold = Pipeline.for_session(session, FoldSettings(), project=False)
        for _step in fold.feed_file(session.path):
            pass
        fold.close("file_ended")
        for note in fold.take_not_read(final=True):
            found.setdefault((note.agent, note.cli_version), Counter())[note.kind] += note.records
    return found


def _other(bases: list[Path]) -> list[SessionFile]:
    return [
        s for base in bases for scenario in sorted(base.iterdir()) if scenario.is_dir()
        for s in other_agent_logs(scenario, subagents=True) or []
    ]  # fmt: skip


# --------------------------------------------------------------------------------------- the oracle: raw JSON
def _claude_kind(obj: dict[str, Any]) -> str:
    """A Claude Code record's kind as its 2.1.332 recording's README names kinds (``type``; ``system.<subtype>``;
    ``attachment.<attachment.type>``; ``queue-operation.<operation>``)."""
    kind = obj["type"]
    sub = {"system": obj.get("subtype"), "queue-operation": obj.get("operation")}.get(kind)
    if kind == "attachment":
        sub = obj["attachment"]["type"]
    return f"{kind}.{sub}" if sub else kind


def _claude_unknown(paths: list[Path]) -> Counter[str]:
    """The kinds of these logs that the reader neither has a view of nor names as passed over."""
    kinds = Counter(_claude_kind(o) for o in _records(paths))
    return Counter(
        {
            k: n
            for k, n in kinds.items()
            if k not in (claude_code.KNOWN_SUB_KINDS if "." in k else claude_code.CLASSES)
        }
    )


def _codex_unknown(paths: list[Path]) -> Counter[str]:
    kinds: Counter[str] = Counter()
    for obj in _records(paths):
        kind = obj["type"]
        if kind in ("event_msg", "response_item"):
            kind = f"{kind}.{obj['payload']['type']}"
        if kind not in codex.CLASSES:
            kinds[kind] += 1
    return kinds


def _kinds_in(message: str) -> list[str]:
    """The kinds a drift line names (``…: N record kinds not read: a, b (first in …)``)."""
    return message.split(" not read: ", 1)[1].split(" (", 1)[0].split(", ")


def _readme_kinds() -> set[str]:
    """The kinds the 2.1.332 recording's README lists as new and not read (its table), and ``mode``, which it
    says 2.1.197 wrote too and the reader does not read."""
    text = (CC_332 / "README.md").read_text()
    table = text.split("## What 2.1.332 writes that 2.1.197 did not", 1)[1].split("New fields", 1)[0]
    assert "nor `mode`, which 2.1.197 wrote too" in table
    return set(re.findall(r"^\| `([^`]+)` \|", table, re.MULTILINE)) | {"mode"}


# --------------------------------------------------------------------------------------------- the readers
def test_claude_code_2_1_332_kinds_not_read_are_the_recordings_new_kinds() -> None:
    """Every record of a kind the reader has no view of is counted under 2.1.332, sub-agent files included (their
    ``api-request-blob`` records name no version: dated by the file's other records), and nothing else is."""
    found = _fold(_other([CC_332]))
    assert set(found) == {("claude-code", "2.1.332")}, found
    kinds = found["claude-code", "2.1.332"]
    # Of the recording's 24, issue 31's other points read these seven since: none of them is counted any more.
    read_since = {
        "api-request",
        "cost-state",
        "custom-title",
        "attachment.queued_command",
        "queue-operation.remove",
        "system.api_error",
        "system.turn_duration",
    }
    assert read_since <= _readme_kinds() and not read_since & set(kinds)
    assert set(kinds) == _readme_kinds() - read_since
    assert len(kinds) == 17
    assert kinds == _claude_unknown(_logs(CC_332))


def test_claude_code_2_1_197_fixtures_have_one_kind_not_read() -> None:
    found = _fold(_other(CC_197))
    assert set(found) == {("claude-code", "2.1.197")}
    assert found["claude-code", "2.1.197"] == _claude_unknown([p for b in CC_197 for p in _logs(b)])
    assert set(found["claude-code", "2.1.197"]) == {"mode"}


def test_codex_kinds_not_read_are_dated_by_each_rollouts_cli_version() -> None:
    """Codex 0.171.0 writes ``world_state`` and ``event_msg.thread_settings_applied``, which the reader does not
    read; a sub-agent's rollout (no session start of its own) is dated by its ``session_meta`` too."""
    found = _fold(_other(CODEX))
    assert set(found) == {("codex", "0.171.0")}, found
    assert found["codex", "0.171.0"] == _codex_unknown([p for b in CODEX for p in _logs(b)])
    assert set(found["codex", "0.171.0"]) == {"world_state", "event_msg.thread_settings_applied"}


def test_copilot_event_types_not_read_are_counted_by_copilot_version() -> None:
    sessions = [SessionFile(d.name, d / "events.jsonl", d) for d in sorted(COPILOT.iterdir()) if d.is_dir()]
    found = _fold(sessions)
    types = Counter(
        o["type"] for s in sessions for o in _records([s.path]) if o["type"] not in events.CLASSES
    )
    assert found == {("copilot", "1.0.102"): types}
    assert set(types) == {"subagent.configured"}


def test_gemini_logs_name_no_version_and_every_type_is_read_or_passed_over() -> None:
    records = _records(_logs(GEMINI))
    assert not any("version" in o for o in records if "type" not in o)  # the header names none
    assert _fold(_other([GEMINI])) == {}


def test_gemini_type_not_known_is_counted_without_a_version(tmp_path: Path) -> None:
    """A Gemini CLI log with a message type its reader has never seen: counted, with no version (the log names
    none); its notes (``info``) are passed over."""
    source = next(p for p in _logs(GEMINI / "plain-question"))
    log = tmp_path / "tmp" / "project" / "chats" / source.name
    log.parent.mkdir(parents=True)
    lines = source.read_bytes().splitlines(keepends=True)
    extra = [
        b'{"id":"x1","timestamp":"2026-12-02T07:35:45.200Z","type":"info","content":"note"}\n',
        b'{"id":"x2","timestamp":"2026-12-02T07:35:45.201Z","type":"plan_update","content":"new"}\n',
    ]
    log.write_bytes(b"".join(lines[:2] + extra + lines[2:]))
    found = _fold([SessionFile(log.stem, log, None, "gemini")])
    assert found == {("gemini", None): Counter({"plan_update": 1})}
    assert {"info"} <= gemini.PASSED_OVER


@pytest.mark.parametrize("scenario", ["interactive-subagent", "fork", "titled-session"])
def test_read_line_by_line_each_record_is_dated_as_a_whole_read_dates_it(scenario: str) -> None:
    """Live, the daemon takes the counts after each batch: a Claude Code log opens with records that name no version
    (``mode``, ``atis-latch``, ``tools-used``), held until the log names one, so a log written a line at a time is
    counted as a whole read counts it, under 2.1.332, never under no version; the same for its sub-agents' files."""
    for session in _other([CC_332 / scenario]):
        fold = Pipeline.for_session(session, FoldSettings(), project=False)
        live: Counter[tuple[str | None, str]] = Counter()
        blob = session.path.read_bytes()
        for item in split_lines(blob):
            fold.feed(item)
            for note in fold.take_not_read():
                live[note.cli_version, note.kind] += note.records
        fold.close("file_ended")
        for note in fold.take_not_read(final=True):
            live[note.cli_version, note.kind] += note.records
        whole = _fold([session])
        assert live == Counter({("2.1.332", k): n for k, n in whole["claude-code", "2.1.332"].items()})


def test_a_not_read_record_is_no_dropped_value_and_costs_its_line_nothing() -> None:
    """The notes are taken out of the line's dropped values: a replay of a 2.1.332 log reports no value dropped,
    and gives the same records as a fold that ignores them."""
    session = _other([CC_332 / "multi-tool"])[0]
    fold = Pipeline.for_session(session, FoldSettings())
    steps = list(fold.feed_file(session.path))
    assert not [v for s in steps for v in s.values_dropped]
    assert fold.take_not_read() and not fold.take_not_read(), "taken once"


def _doc_rows() -> dict[tuple[str, str | None], set[str]]:
    """The version table of docs/other-agents.md: (agent, version) → the kinds its last column names."""
    text = (FIXTURES.parent.parent / "docs" / "other-agents.md").read_text()
    table = text.split("## CLI versions each reader was recorded against", 1)[1].split("\n\n| agent |", 1)[1]
    titles = {
        "Copilot CLI": "copilot",
        "Claude Code": "claude-code",
        "Codex CLI": "codex",
        "Gemini CLI": "gemini",
    }
    rows: dict[tuple[str, str | None], set[str]] = {}
    for line in table.split("\n\n", 1)[0].splitlines()[2:]:
        agent, versions, _where, kinds = (cell.strip() for cell in line.strip("|").split("|"))
        named = set(re.findall(r"`([^`]+)`", kinds))
        for version in versions.split(" (", 1)[0].split(", "):
            key = (titles[agent], None if agent == "Gemini CLI" else version)
            rows[key] = rows.get(key, set()) | named
    return rows


def test_the_docs_version_table_is_what_the_recordings_hold() -> None:
    """Each row of the table: the kinds the readers do not read in that CLI version's recordings (every log in
    ``tests/fixtures``), and a row for every version recorded."""
    copilot = [
        SessionFile(p.stem, p, p.parent if p.name == "events.jsonl" else None)
        for p in sorted(FIXTURES.rglob("*.jsonl"))
        if "_capture" not in p.parts and "other-agents" not in p.parts and p.parent.name != "contexts"
    ]
    found = _fold([s for s in copilot if not _other_agent(s.path)])
    found.update(_fold(_other([CC_332, *CC_197, *CODEX, GEMINI])))
    rows = _doc_rows()
    assert {key: set(kinds) for key, kinds in found.items()} == {k: v for k, v in rows.items() if v}
    assert ("gemini", None) in rows and ("claude-code", "2.1.197") in rows


def _other_agent(path: Path) -> bool:
    """A log another agent wrote (a fixture of the shapes tests may be one)."""
    return path.name != "events.jsonl" and sniff(path) is not None


# ----------------------------------------------------------------------------------- replay: said once, counted
def test_replay_says_each_version_once_and_counts_a_self_metric(
    receiver: OtlpReceiver, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = [CC_332 / name / "projects" for name in ("plain-question", "multi-tool", "titled-session")]
    assert (
        replay_into(receiver, *paths, *(CC_197[0] / n / "projects" for n in ("plain-question", "compaction")))
        == 0
    )
    said = [
        line.split(" INFO: ", 1)[1] for line in capsys.readouterr().err.splitlines() if " not read: " in line
    ]
    assert len([m for m in said if m.startswith("Claude Code 2.1.332: ") and " more " not in m]) == 1, said
    assert len([m for m in said if m.startswith("Claude Code 2.1.197: ")]) == 1, said
    assert "Claude Code 2.1.197: 1 record kind not read: mode (first in " in "\n".join(said)
    # Later logs say only the kinds the version had not shown before: each kind is said once in all.
    named = [k for m in said if m.startswith("Claude Code 2.1.332: ") for k in _kinds_in(m)]
    want = _fold(_other([CC_332 / n for n in ("plain-question", "multi-tool", "titled-session")]))
    assert sorted(named) == sorted(want["claude-code", "2.1.332"])
    # (the titled session's agent-name records: a kind the first two logs do not have)
    assert any(" more record kind" in m and "agent-name" in m for m in said), said
    points = [
        m for m in receiver.metrics()
        if m["name"] == "copilot_otel.values.dropped" and m["attributes"].get("copilot_otel.drop.reason") == "not_read"
    ]  # fmt: skip
    # Every record not read, counted once (a cumulative counter: its last point), its agent and version in the log.
    mode = _fold(_other([CC_197[0] / "plain-question", CC_197[0] / "compaction"]))["claude-code", "2.1.197"]
    assert [p["attributes"] for p in points][-1:] == [{"copilot_otel.drop.reason": "not_read"}]
    assert points[-1]["value"] == sum(want["claude-code", "2.1.332"].values()) + sum(mode.values())


# -------------------------------------------------------------------------------------------------- doctor
def test_doctor_says_a_line_per_agent_version_with_kinds_not_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = Path.home()
    for scenario in ("plain-question", "api-errors-retried"):
        shutil.copytree(CC_332 / scenario / "projects", home / ".claude" / "projects", dirs_exist_ok=True)
    shutil.copytree(CC_197[0] / "compaction" / "projects", home / ".claude" / "projects", dirs_exist_ok=True)
    shutil.copytree(
        CODEX[0] / "plain-question" / "sessions", home / ".codex" / "sessions", dirs_exist_ok=True
    )
    main(["doctor", "--timeout", "1", "--endpoint", "http://127.0.0.1:9"])
    lines = [line for line in capsys.readouterr().out.splitlines() if " record kinds: " in line]
    sessions = [s for d in ("plain-question", "api-errors-retried") for s in _other([CC_332 / d])]
    kinds = _fold(sessions)["claude-code", "2.1.332"]
    assert lines == [
        f"warn record kinds: Claude Code 2.1.197: 1 record kind not read: mode — {_DOCTOR_FIX}",
        f"warn record kinds: Claude Code 2.1.332: {len(kinds)} record kinds not read: "
        f"{', '.join(sorted(kinds))} — {_DOCTOR_FIX}",
        "warn record kinds: Codex CLI 0.171.0: 2 record kinds not read: event_msg.thread_settings_applied, "
        f"world_state — {_DOCTOR_FIX}",
    ]


_DOCTOR_FIX = "what they say is not exported; docs/other-agents.md lists the CLI versions each reader was recorded against"


def test_not_read_in_reads_each_agents_newest_logs_only(tmp_path: Path) -> None:
    """``doctor`` reads each agent's newest logs (drift is in the newest CLI's): older ones are not read."""
    for n, scenario in enumerate((CC_197[0] / "compaction", CC_332 / "plain-question")):
        shutil.copytree(scenario / "projects", tmp_path / str(n) / "projects")
    old, new = (other_agent_logs(tmp_path / str(n), subagents=True) or [] for n in range(2))
    for session in old:
        os.utime(session.path, (1_000_000, 1_000_000))
    assert (len(old), len(new)) == (1, 1)
    assert set(not_read_in(old + new, newest=1)) == {("claude-code", "2.1.332")}
    assert set(not_read_in(old + new, newest=2)) == {("claude-code", "2.1.332"), ("claude-code", "2.1.197")}


# -------------------------------------------------------------------------------------------------- daemon
@SERIAL
def test_the_daemon_says_it_once_per_version_in_its_log_and_status(
    tmp_path: Path, receiver: OtlpReceiver, capsys: pytest.CaptureFixture[str]
) -> None:
    """A daemon started over finished Claude Code 2.1.332 and 2.1.197 history: one log line per version, the
    kinds in ``status.json``, ``status`` and ``status --json``."""
    home = Path.home()
    for scenario in sorted(p for p in CC_332.iterdir() if (p / "projects").is_dir()):
        shutil.copytree(scenario / "projects", home / ".claude" / "projects", dirs_exist_ok=True)
    shutil.copytree(CC_197[0] / "compaction" / "projects", home / ".claude" / "projects", dirs_exist_ok=True)
    daemon = DaemonProcess(
        tmp_path / "no-copilot" / "session-state",
        tmp_path / "state",
        receiver.http_endpoint,
        tmp_path / "daemon.log",
        "--log-level",
        "info",
        env={"COPILOT_OTEL_NOTIFY_DESKTOP": "false"},
    ).start()
    want = _fold(_other([CC_332, CC_197[0] / "compaction"]))
    try:
        path = tmp_path / "state" / "status.json"

        def rows() -> list[dict[str, Any]]:
            try:
                doc = orjson.loads(path.read_bytes())
            except (OSError, orjson.JSONDecodeError):
                return []
            got: list[dict[str, Any]] = doc.get("records_not_read", [])
            return got

        until(
            lambda: {(r["agent"], r["cli_version"]): Counter(r["kinds"]) for r in rows()} == want,
            60,
            "the records not read in status.json",
            detail=rows,
        )
        assert main(["status", "--state-dir", str(tmp_path / "state")]) == 0
        text = capsys.readouterr().out
        assert main(["status", "--json", "--state-dir", str(tmp_path / "state")]) == 0
        doc = orjson.loads(capsys.readouterr().out)
    finally:
        assert daemon.terminate() == 0
    kinds = want["claude-code", "2.1.332"]
    flat = " ".join(text.split())
    assert f"record kinds Claude Code 2.1.332: {len(kinds)} record kinds not read: " in flat, text
    assert "Claude Code 2.1.197: 1 record kind not read: mode" in flat
    assert {(r["agent"], r["cli_version"]) for r in doc["records_not_read"]} == set(want)
    out = daemon.output()
    assert len(re.findall(r"Claude Code 2\.1\.332: \d+ record kinds not read", out)) == 1, out[-3000:]
    assert len(re.findall(r"Claude Code 2\.1\.197: 1 record kind not read: mode", out)) == 1
    assert "Traceback" not in out
