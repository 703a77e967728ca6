"""``copilot-otel report`` on a real pseudo-terminal (tmux) at 80 and 200 columns, and piped.

The 80-column captures of ``report monthly`` and ``report repo`` over the fixtures are what
docs/reports-and-live.md shows (``docs/report-monthly.txt``, ``docs/report-repo.txt``): ``DOCS_UPDATE=1`` writes them
anew (a test run leaves the checkout as it found it; the captures name the month they were made in).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import CLI_GENERATED, FIXTURES, ROOT
from tests.test_cli_commands import SGR, _console_script, _tmux_capture

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

ROOTS = [str(CLI_GENERATED), str(FIXTURES / "cli-shapes"), str(FIXTURES / "public")]
HEADINGS = [
    "sess",
    "prompts",
    "turns",
    "tools",
    "failed",
    "input",
    "output",
    "cache rd",
    "cache wr",
    "premium",
    "AIU",
    "+lines",
    "-lines",
    "runaway",
    "wall",
    "cost $",
]
RED = re.compile(r"\x1b\[(?:[0-9;]*;)?(?:31|91|38;5;(?:1|9))m")


def _lines(screen: str) -> list[str]:
    return screen.rstrip("\n").split("\n")


def test_80_columns_fits_and_colours_failures(tmp_path: Path) -> None:
    screen, _ = _tmux_capture(
        tmp_path, [*_console_script(), "report", "session", str(CLI_GENERATED), "--tz", "UTC"], width=80
    )
    lines = _lines(screen)
    assert max(len(line) for line in lines) <= 80
    assert lines[0].startswith("Copilot CLI usage, session (UTC)")
    header = lines[1].split()
    assert header[:3] == ["session", "last", "active"]  # the day of each session's latest event
    assert {"prompts", "tools", "input", "output", "premium"} <= set(header)
    capi = next(line for line in lines if line.startswith("capi-fai"))
    assert capi.split()[2] == "2026-11-29"
    total = next(line for line in lines if line.startswith("total"))
    assert total.split()[1:3] == ["11", "12"]  # 11 sessions, 12 prompts
    assert "3.00" in total  # premium requests: the three capi-* prompts
    assert any("more figures with a wider terminal, --wide or --json" in line for line in lines)
    # failed tool calls are red on a terminal; the failing-tool folder's row has 6 (two sessions of 3)
    screen, colour = _tmux_capture(
        tmp_path, [*_console_script(), "report", "repo", str(CLI_GENERATED), "--tz", "UTC"], width=80
    )
    assert "failed" in _lines(screen)[1].split()
    failing = next(line for line in colour.splitlines() if "failing-tool" in SGR.sub("", line))
    assert RED.search(failing), repr(failing)


def test_200_columns_shows_every_figure(tmp_path: Path) -> None:
    screen, _ = _tmux_capture(
        tmp_path, [*_console_script(), "report", "model", *ROOTS, "--tz", "UTC"], width=200
    )
    lines = _lines(screen)
    assert max(len(line) for line in lines) <= 200
    header = lines[1]
    positions = [header.index(h) for h in HEADINGS]
    assert positions == sorted(positions)  # every figure, in the JSON's order
    assert not any("more figures" in line for line in lines)
    assert any(line.startswith("~ estimated") for line in lines)  # the 0.0.354 logs have no usage figures


def test_no_color_on_a_terminal(tmp_path: Path) -> None:
    _, colour = _tmux_capture(
        tmp_path, ["env", "NO_COLOR=1", *_console_script(), "report", "session", str(CLI_GENERATED)], width=80
    )
    # NO_COLOR removes colour, not emphasis (bold, italic stay): no foreground/background colour but the defaults
    for code in SGR.findall(colour):
        params = code[2:-1].split(";")
        assert not any(p[:1] in ("3", "4", "9") and p not in ("3", "39", "4", "49") for p in params), repr(
            code
        )
    assert "failing-" in SGR.sub("", colour)


def test_piped_output_is_plain_and_80_columns() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "FORCE_COLOR")}
    done = subprocess.run(
        [*_console_script(), "report", "session", *ROOTS, "--tz", "UTC"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=120,
    )
    assert "\x1b" not in done.stdout
    lines = done.stdout.rstrip("\n").split("\n")
    assert max(len(line.rstrip()) for line in lines) <= 80
    assert any(line.startswith("total") for line in lines)


@pytest.mark.parametrize("period", ["monthly", "repo"])
def test_readme_captures(tmp_path: Path, period: str) -> None:
    limit = ["--limit", "5"] if period == "repo" else []
    screen, _ = _tmux_capture(
        tmp_path,
        [*_console_script(), "report", period, *ROOTS, "--tz", "UTC", "--quota", "300", *limit],
        width=80,
    )
    assert max(len(line) for line in _lines(screen)) <= 80
    assert "Premium requests in" in screen and "of 300 used" in screen
    if os.environ.get("DOCS_UPDATE") == "1":
        (ROOT / "docs" / f"report-{period}.txt").write_text(screen, encoding="utf-8")
