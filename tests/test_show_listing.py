"""``copilot-otel show`` without a session: the listing's last activity, running sessions, ``--limit``, pipes.

Real CLI captures copied into a session-state folder as the Copilot CLI lays them out; the running session is
held by this test's own process (a real live pid, and a real open file for the CLI's ``inuse.<pid>.hold``).
"""

from __future__ import annotations

import json
import os
import shutil
from datetime import datetime
from pathlib import Path

import pytest

from copilot_otel.cli import main
from copilot_otel.commands.show import TAIL_LIMIT_BYTES, last_event_ns
from copilot_otel.model.timestamps import parse_timestamp
from tests.conftest import CLI_GENERATED, FIXTURES, read_events

# Three sessions and when each really ended (their last events' own timestamps).
SESSIONS = ("failing-tool", "resumed", "subagent")


def _session_id(fixture: Path) -> str:
    return str(read_events(fixture / "events.jsonl")[0]["data"]["sessionId"])


def _last_event(fixture: Path) -> str:
    return str(read_events(fixture / "events.jsonl")[-1]["timestamp"])


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """The sessions copied in, with modification times the wrong way round: the session that ended last was copied
    first (a restored backup, a copied history), so the files' times say nothing of when each was active."""
    root = tmp_path / "session-state"
    fixtures = sorted((CLI_GENERATED / name for name in SESSIONS), key=_last_event, reverse=True)
    for index, fixture in enumerate(fixtures):
        target = root / _session_id(fixture)
        shutil.copytree(fixture, target, ignore=shutil.ignore_patterns("_capture"))
        os.utime(target / "events.jsonl", (1_000_000 + index * 3600, 1_000_000 + index * 3600))
    return root


def _rows(out: str) -> list[str]:
    return [line for line in out.splitlines() if line[:2].isdigit() or line.startswith("running ")]


def _local(timestamp: str) -> str:
    return datetime.fromtimestamp(parse_timestamp(timestamp) / 1e9).strftime("%m-%d %H:%M")


def test_last_active_is_the_last_events_own_time_not_the_files(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["show", "--session-state", str(root)]) == 0
    rows = _rows(capsys.readouterr().out)
    newest_first = sorted((CLI_GENERATED / name for name in SESSIONS), key=_last_event, reverse=True)
    assert [row.split()[2] for row in rows] == [_session_id(f)[:8] for f in newest_first]
    assert [" ".join(row.split()[:2]) for row in rows] == [_local(_last_event(f)) for f in newest_first]

    assert main(["show", "--json", "--session-state", str(root)]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert [row["last_active"] for row in listing["sessions"]] == [
        parse_timestamp(_last_event(f)) / 1e9 for f in newest_first
    ]


def test_a_session_a_cli_holds_now_is_marked_running(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = root / _session_id(CLI_GENERATED / "failing-tool")
    (folder / f"inuse.{os.getpid()}.lock").write_text("")
    hold = folder / f"inuse.{os.getpid()}.hold"
    hold.write_text("")
    # The pid is alive but does not hold the session's hold file: another machine's pid, or another program.
    assert main(["show", "--json", "--session-state", str(root)]) == 0
    assert not any(row["running"] for row in json.loads(capsys.readouterr().out)["sessions"])

    with hold.open("rb"):  # as the Copilot CLI holds it while it runs
        assert main(["show", "--json", "--session-state", str(root)]) == 0
        rows = {row["session_id"]: row for row in json.loads(capsys.readouterr().out)["sessions"]}
        assert main(["show", "--session-state", str(root)]) == 0
        out = capsys.readouterr().out
    assert [sid for sid, row in rows.items() if row["running"]] == [folder.name]
    assert rows[folder.name]["running_pid"] == os.getpid()
    running = [row for row in _rows(out) if row.startswith("running ")]
    assert len(running) == 1 and folder.name[:8] in running[0]
    assert "running: a Copilot CLI has the session open now" in out


def test_limit_says_how_many_more_and_zero_lists_all(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", "--session-state", str(root), "--limit", "1"]) == 0
    out = capsys.readouterr().out
    assert len(_rows(out)) == 1
    assert "… and 2 more (of 3); --limit 0 lists them all" in out

    assert (
        main(["show", "--session-state", str(root), "--limit", "0"]) == 0
    )  # on main: "No Copilot CLI sessions"
    out = capsys.readouterr().out
    assert len(_rows(out)) == 3 and "more (of" not in out and "No Copilot CLI sessions" not in out

    assert main(["show", "--json", "--session-state", str(root), "--limit", "2"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert (len(listing["sessions"]), listing["total"], listing["more"]) == (2, 3, 1)


def test_piped_rows_are_whole_and_not_padded(
    root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    folder = root / _session_id(CLI_GENERATED / "subagent")
    title = "A long title that a terminal of 80 columns would cut short, but a pipe must not cut at all"
    (folder / "workspace.yaml").write_text(f"name: {title}\ncwd: /home/dev/lab/projects/subagent\n")
    assert main(["show", "--session-state", str(root)]) == 0
    out = capsys.readouterr().out
    assert all(line == line.rstrip() for line in out.splitlines()), "no trailing padding"
    assert title in out
    assert max(len(line) for line in out.splitlines()) > 80


def test_the_last_events_time_is_read_from_the_end_only(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    lines = (CLI_GENERATED / "multi-tool" / "events.jsonl").read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(lines) + b'{"type":"assistant.message","data":{"content":"still bei')
    assert last_event_ns(log) == parse_timestamp(_last_event(CLI_GENERATED / "multi-tool")), (
        "a last line still being written is passed over"
    )
    # Timestamped events first, then more than the limit of lines without a timestamp: the reader stops at the
    # limit instead of reading back through the whole log (and the listing falls back to the file's time).
    filler = b'{"type":"session.info","data":{}}\n' * (TAIL_LIMIT_BYTES // 30)
    log.write_bytes(b"".join(lines) + filler)
    assert last_event_ns(log) is None
    log.write_bytes(b"".join(lines) + filler[: TAIL_LIMIT_BYTES // 2])
    assert last_event_ns(log) == parse_timestamp(_last_event(CLI_GENERATED / "multi-tool"))


def _codex_home(tmp_path: Path) -> Path:
    """Every recorded Codex session in one ~/.codex: their thread ids are UUIDv7s whose first 8 characters (the
    minute they started) are shared, so a listing needs longer prefixes to tell them apart."""
    home = tmp_path / "codex-home"
    for sessions in sorted((FIXTURES / "other-agents" / "codex").glob("*/sessions")):
        shutil.copytree(sessions, home / "sessions", dirs_exist_ok=True)
    return home


def test_at_80_columns_ids_and_times_are_whole_and_every_printed_prefix_resolves(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    codex = _codex_home(tmp_path)
    agents = ["--session-state", str(root), "--codex-home", str(codex), "--agents", "copilot,codex"]
    # --limit and --agent leave sessions out; a prefix printed must still name one session among all of them
    # (on main the ids were cut to "01a233e7-…" and the times to "12-01 23:…", and a prefix unique among the
    # rows shown could be another session's too)
    for extra in (["--limit", "3", "--agent", "codex"], ["--limit", "2"], []):
        assert main(["show", *agents, *extra]) == 0
        out = capsys.readouterr().out
        rows = _rows(out)
        assert rows and all(len(line) <= 80 for line in out.splitlines())
        assert all("…" not in " ".join(row.split()[:3]) for row in rows), rows
        for row in rows:
            prefix = row.split()[2]
            assert main(["show", *agents, prefix]) == 0, f"{prefix} printed but does not resolve"
            assert capsys.readouterr().out.startswith("Session ")


def test_a_session_of_another_year_is_dated_with_its_year(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fixture = CLI_GENERATED / "failing-tool"
    log = root / _session_id(fixture) / "events.jsonl"
    year = datetime.now().year
    # the same capture, a year older (its events' own timestamps moved back: the listing reads those)
    log.write_text(log.read_text().replace(f'"timestamp":"{year}-', f'"timestamp":"{year - 1}-'))
    assert main(["show", "--session-state", str(root)]) == 0
    rows = _rows(capsys.readouterr().out)
    assert any(row.startswith(f"{year - 1}-") for row in rows), rows


def test_a_negative_limit_is_refused(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["show", "--session-state", str(root), "--limit", "-1"])
    assert exit_.value.code == 2  # on main: taken silently as "all"
    assert "--limit: expected 0 or more, got -1" in capsys.readouterr().err


def test_a_session_its_log_gives_no_title_is_named_by_its_first_prompt(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Codex logs give a session no title (Copilot CLI's have its summary): the listing names each by its first
    human prompt, in quotes, as ``codex resume`` lists them (on main every row read "(untitled)"); a secret in it is
    scrubbed, as in the tree."""
    monkeypatch.setenv("COLUMNS", "200")
    codex = _codex_home(tmp_path)
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0" * 2
    (rollout,) = (codex / "sessions").rglob("*01a233e6-c8*.jsonl")  # plain-question's
    rollout.write_text(rollout.read_text().replace("What is the capital of France?", f"Is {secret} valid?"))
    agents = ["--session-state", str(root), "--codex-home", str(codex), "--agents", "copilot,codex"]
    assert main(["show", *agents, "--json", "--limit", "0"]) == 0
    listed = json.loads(capsys.readouterr().out)["sessions"]
    codex_rows = [row for row in listed if row["agent"] == "codex"]
    scenarios = json.loads((FIXTURES / "other-agents" / "codex" / "checks.json").read_text())["scenarios"]
    expected = {facts["human_prompts"][0] for name, facts in scenarios.items() if name != "plain-question"}
    assert len(codex_rows) == 9 and all(row["title"] == "" for row in codex_rows)
    firsts = {row["first_prompt"] for row in codex_rows}
    assert expected <= firsts and secret not in str(firsts)
    (scrubbed,) = firsts - expected
    assert scrubbed.startswith("Is ") and scrubbed.endswith(" valid?")
    assert main(["show", *agents, "--agent", "codex"]) == 0
    out = capsys.readouterr().out
    assert "(untitled)" not in out and secret not in out
    assert all(f"“{prompt[:20]}" in out for prompt in expected)
