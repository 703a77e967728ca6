"""``--repo``: one repository's sessions across the agents, by name or by path (issue 34, point 5).

Real captures of three agents, each recorded in a project folder of its own name (Copilot CLI's under
``/home/dev/lab/projects/``, Claude Code's and Codex's under ``/home/dev/agents/projects/``), laid out in a home as
each CLI lays out its logs.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from copilot_otel.cli import main
from copilot_otel.settings.repos import RepoFilter
from tests.conftest import CLI_GENERATED, FIXTURES, read_events

OTHERS = FIXTURES / "other-agents"


@pytest.fixture
def home(tmp_path: Path) -> list[str]:
    """The command-line flags of a home with the Copilot, Claude Code and Codex captures in it."""
    state = tmp_path / "session-state"
    for fixture in sorted(p for p in CLI_GENERATED.iterdir() if (p / "events.jsonl").is_file()):
        sid = str(read_events(fixture / "events.jsonl")[0]["data"]["sessionId"])
        shutil.copytree(fixture, state / sid, ignore=shutil.ignore_patterns("_capture"), dirs_exist_ok=True)
    for agent, sub in (("claude-code", "projects"), ("codex", "sessions")):
        for scenario in sorted((OTHERS / agent).glob(f"*/{sub}")):
            shutil.copytree(scenario, tmp_path / agent / sub, dirs_exist_ok=True)
    return [
        "--session-state", str(state), "--claude-code-home", str(tmp_path / "claude-code"),
        "--codex-home", str(tmp_path / "codex"), "--agents", "copilot,claude-code,codex",
    ]  # fmt: skip


def _report(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["report", *argv, "--json"]) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


@pytest.mark.parametrize(
    ("given", "repository", "git_root", "cwd", "matched"),
    [
        ("octo/app", "octo/app", None, "/w/x", True),
        ("OCTO/App", "octo/app", None, None, True),  # names are compared without case
        ("app", "octo/app", None, None, True),  # the name alone
        ("app", None, "/src/app", "/src/app/sub", True),  # the git root's last part
        ("failing-tool", None, None, "/home/dev/agents/projects/failing-tool", True),  # the working folder's
        ("other/app", "octo/app", None, None, False),
        ("pp", "octo/app", None, "/w/app", False),  # a name is whole, never a part of one
        (
            "/home/dev/agents",
            None,
            None,
            "/home/dev/agents/projects/x",
            True,
        ),  # a folder and what is under it
        ("/home/dev/agents/projects/x", None, None, "/home/dev/agents/projects/x", True),
        ("/home/dev/age", None, None, "/home/dev/agents/projects/x", False),  # a path is whole folders
        ("/src/app", None, "/src/app", "/elsewhere", True),  # the git root counts too
        ("C:\\work\\app", None, None, "C:\\work\\app\\src", True),  # a Windows agent's folders
        ("app", None, None, None, False),  # a session that says nothing of where it ran
    ],
)
def test_a_repository_is_matched_by_name_or_path(
    given: str, repository: str | None, git_root: str | None, cwd: str | None, matched: bool
) -> None:
    assert RepoFilter.parse(given).matches(repository, git_root, cwd) is matched


def test_report_repo_by_name_counts_every_agents_sessions_of_it_and_no_other(
    capsys: pytest.CaptureFixture[str], home: list[str]
) -> None:
    every = _report(capsys, "session", *home)["rows"]
    expected = {row["key"] for row in every if (row.get("cwd") or "").endswith("/failing-tool")}
    assert len(expected) >= 3  # a Copilot, a Claude Code and a Codex session at least

    doc = _report(capsys, "session", *home, "--repo", "failing-tool")
    assert {row["key"] for row in doc["rows"]} == expected  # on main: no --repo flag (exit 2)
    assert doc["report"]["repo"] == "failing-tool"
    by_agent = _report(capsys, "agent", *home, "--repo", "failing-tool")
    assert {row["key"] for row in by_agent["rows"]} == {"copilot", "claude-code", "codex"}
    assert by_agent["totals"]["sessions"] == len(expected)


def test_report_repo_by_path_counts_the_sessions_under_the_folder(
    capsys: pytest.CaptureFixture[str], home: list[str]
) -> None:
    every = _report(capsys, "session", *home)["rows"]
    under = {row["key"] for row in every if (row.get("cwd") or "").startswith("/home/dev/agents/projects/")}
    doc = _report(capsys, "session", *home, "--repo", "/home/dev/agents/projects")
    assert under and {row["key"] for row in doc["rows"]} == under
    assert all(row["agent"] in ("claude-code", "codex") for row in doc["rows"])


def test_show_repo_lists_only_that_repositorys_sessions_and_each_prefix_resolves(
    capsys: pytest.CaptureFixture[str], home: list[str]
) -> None:
    assert main(["show", *home, "--json", "--limit", "0", "--repo", "failing-tool"]) == 0
    listing = json.loads(capsys.readouterr().out)
    cwds = {row["cwd"] for row in listing["sessions"]}
    assert listing["total"] >= 3 and all(cwd.endswith("/failing-tool") for cwd in cwds), cwds
    assert main(["show", *home, "--repo", "failing-tool"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line[:2].isdigit()]
    assert len(rows) == listing["total"]
    for row in rows:
        assert main(["show", *home, row.split()[2]]) == 0
        assert "failing-tool" in capsys.readouterr().out


def test_a_gemini_session_is_of_the_project_its_cli_marked(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """No Gemini CLI log line names the folder a session ran in; the CLI marks each project's folder under
    ``tmp/`` with ``.project_root`` (recorded with ``plain-question``; the other scenarios were recorded without
    it). That session is the project's, in ``report`` and ``show``; the others say nothing of where they ran."""
    gemini = tmp_path / "gemini"
    for scenario in sorted((OTHERS / "gemini").glob("*/tmp")):
        shutil.copytree(scenario, gemini / "tmp", dirs_exist_ok=True)
    # every scenario's logs are in one project folder now: the marker's project is each one's
    home = ["--gemini-home", str(gemini), "--agents", "gemini"]
    every = _report(capsys, "session", *home)["rows"]
    assert len(every) == 10 and {row.get("cwd") for row in every} == {"/home/dev/gemini/project"}

    marked = tmp_path / "marked"
    shutil.copytree(OTHERS / "gemini" / "plain-question" / "tmp", marked / "tmp")
    unmarked = OTHERS / "gemini" / "multi-tool" / "tmp" / "project" / "chats"
    shutil.copytree(unmarked, marked / "tmp" / "elsewhere" / "chats")  # a project folder with no marker
    home = ["--gemini-home", str(marked), "--agents", "gemini"]
    rows = _report(capsys, "session", *home)["rows"]
    assert sorted(str(row.get("cwd")) for row in rows) == [
        "/home/dev/gemini/project",
        "None",
    ]  # on main: both None
    for given in ("project", "/home/dev/gemini", "/home/dev/gemini/project"):
        doc = _report(capsys, "session", *home, "--repo", given)
        assert [row["cwd"] for row in doc["rows"]] == ["/home/dev/gemini/project"], given
    assert main(["show", *home, "--json", "--limit", "0", "--repo", "project"]) == 0
    (listed,) = json.loads(capsys.readouterr().out)["sessions"]
    assert listed["cwd"] == "/home/dev/gemini/project"
    assert listed["first_prompt"] == _checks_prompt("plain-question")


def _checks_prompt(scenario: str) -> str:
    checks = json.loads((OTHERS / "gemini" / scenario / "checks.json").read_text(encoding="utf-8"))
    prompt: str = checks["runs"][0]["prompt"]
    return prompt
