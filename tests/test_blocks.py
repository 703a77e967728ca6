"""``report blocks``: each agent's use in 5-hour windows, the active one's burn rate and projection (issue 34,
point 3).

Real captures of the four agents (Copilot's of two days, so it has two windows); the active window is the
report's own clock set just after a capture (the library's ``now``), and in the terminal test a Copilot capture
re-timed to end now, run in tmux as a user runs ``report blocks --live``.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from copilot_otel.cli import main
from copilot_otel.commands.blocks import BLOCK_NS, blocks
from copilot_otel.commands.report import HOUR_NS
from copilot_otel.model.timestamps import parse_timestamp
from copilot_otel.settings.config import load_config
from tests.conftest import CLI_GENERATED, FIXTURES, read_events
from tests.test_cli_commands import _console_script
from tests.test_live import _now_history, _Pane, _retimed, _write, needs_tmux

OTHERS = FIXTURES / "other-agents"


@pytest.fixture
def flags(tmp_path: Path) -> list[str]:
    """A home of the four agents' captures: Copilot's of 2026-11-29 and of 2026-12-01 (two windows)."""
    state = tmp_path / "session-state"
    copilot = [p for p in CLI_GENERATED.iterdir() if (p / "events.jsonl").is_file()]
    copilot += [FIXTURES / "cli-shapes" / "fleet"]
    for fixture in copilot:
        sid = str(read_events(fixture / "events.jsonl")[0]["data"]["sessionId"])
        shutil.copytree(fixture, state / sid, ignore=shutil.ignore_patterns("_capture"), dirs_exist_ok=True)
    for agent, sub in (("claude-code", "projects"), ("codex", "sessions"), ("gemini", "tmp")):
        for scenario in sorted((OTHERS / agent).glob(f"*/{sub}")):
            shutil.copytree(scenario, tmp_path / agent / sub, dirs_exist_ok=True)
    return [
        "--session-state", str(state), "--claude-code-home", str(tmp_path / "claude-code"),
        "--codex-home", str(tmp_path / "codex"), "--gemini-home", str(tmp_path / "gemini"),
    ]  # fmt: skip


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main([*argv, "--json"]) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


def test_windows_are_five_whole_hours_from_the_first_records_hour_and_add_up_to_the_report(
    capsys: pytest.CaptureFixture[str], flags: list[str]
) -> None:
    before = time.time_ns()
    found = _json(capsys, "report", "blocks", *flags)["blocks"]
    after = time.time_ns()
    by_agent: dict[str, list[dict[str, Any]]] = {}
    for block in found:
        by_agent.setdefault(block["agent"], []).append(block)
    assert set(by_agent) == {"copilot", "claude-code", "codex", "gemini"}
    assert len(by_agent["copilot"]) == 2  # 2026-11-29 and 2026-12-01: a window each
    for agent, own in by_agent.items():
        previous_end = 0
        for block in own:
            start, end = parse_timestamp(block["start"]), parse_timestamp(block["end"])
            first, last = parse_timestamp(block["first_activity"]), parse_timestamp(block["last_activity"])
            assert end - start == BLOCK_NS and start % HOUR_NS == 0, block
            assert start <= first <= last < end and start == first - first % HOUR_NS, block
            assert start >= previous_end, f"{agent}: windows overlap"
            previous_end = end
            # A window is active while it has not ended (a capture recorded today is in one for up to 5 hours)
            if end <= before:
                assert block["active"] is False and block["seconds_left"] is None, block
            elif end > after:
                assert block["active"] is True and 0 < block["seconds_left"] <= BLOCK_NS / 1e9, block
    # every token of every agent is in exactly one window: the windows add up to the report's agent rows
    report = {row["key"]: row for row in _json(capsys, "report", "agent", *flags)["rows"]}
    for agent, own in by_agent.items():
        for figure in ("input_tokens", "output_tokens", "cache_read_tokens"):
            assert sum(b[figure] for b in own) == report[agent][figure], (agent, figure)
        assert sum(b["cost_usd"] for b in own) == pytest.approx(report[agent]["cost_usd"])


def test_the_active_window_has_its_time_left_burn_rate_and_projection(
    flags: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    config = load_config(_config_args(flags))
    # Copilot's 2026-11-29 window: minutes of use, so a rate; "now" ten minutes after its last record
    window = _json(capsys, "report", "blocks", *flags, "--agent", "copilot")["blocks"][0]
    assert window["tokens_per_minute"] is not None
    last = parse_timestamp(window["last_activity"])
    now = last + 10 * 60 * 10**9
    assert blocks(config, [], agent="copilot", output="json", now=lambda: now) == 0
    (active,) = [b for b in json.loads(capsys.readouterr().out)["blocks"] if b["active"]]
    assert active["start"] == window["start"]
    end = parse_timestamp(active["end"])
    assert active["seconds_left"] == round((end - now) / 1e9)
    minutes = (last - parse_timestamp(active["first_activity"])) / 60e9
    assert active["tokens_per_minute"] == pytest.approx(active["tokens"] / minutes, rel=1e-3)
    assert active["cost_per_hour_usd"] == pytest.approx(active["cost_usd"] / minutes * 60, rel=1e-3)
    expected = active["tokens"] + active["tokens"] / minutes * (end - now) / 60e9
    assert active["projected_tokens"] == pytest.approx(expected, abs=1)
    assert active["projected_cost_usd"] >= active["cost_usd"]


def _config_args(flags: list[str]) -> dict[str, str]:
    """The flags as ``load_config`` takes them (by setting name)."""
    return {flags[i][2:].replace("-", "_"): flags[i + 1] for i in range(0, len(flags), 2)}


@needs_tmux
def test_blocks_live_in_a_terminal_shows_the_active_window_and_quits_on_ctrl_c(
    tmp_path: Path, midday_home: Path
) -> None:
    home = midday_home
    root, _ = _now_history(home)  # three Copilot sessions that ended minutes ago
    live = _retimed("capi-subagent", root, time.time_ns())
    _write(root, "capi-subagent", live)
    argv = [*_console_script(), "report", "blocks", "--live", "--interval", "0.5", "--agent", "copilot"]
    pane = _Pane(tmp_path, home, argv, width=120, height=20)
    try:
        screen = pane.wait_for(lambda s: "active," in s and "left" in s, "the active window drawn")
        assert "5-hour windows (active)" in screen and "copilot" in screen
        pane.tmux("send-keys", "C-c")
        pane.wait_for(lambda s: "copilot-otel exited with status 0" in s, "a clean exit on Ctrl-C")
    finally:
        pane.close()
