"""Escape sequences from a session log never reach the terminal (issue 22, point 5).

A real fixture log is edited so that a tool's error message carries an OSC 52 clipboard write, a title change and
a screen clear, and its session folder's name carries a title change too (the agent's tools read files and
command output an attacker can control; folder names come from the same tree). ``show <id>``, ``show``,
``report`` and a real daemon's log lines must show them as visible characters (ESC as ␛), never as ESC itself.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from copilot_otel.cli import main
from copilot_otel.common import display
from tests.conftest import CLI_GENERATED
from tests.daemon_process import DaemonProcess
from tests.otlp_receiver import OtlpReceiver

CLIPBOARD, TITLE, CLEAR = "\x1b]52;c;cm0gLXJmIH4=\x07", "\x1b]0;pwned\x07", "\x1b[2J"
FOLDER = f"hostile{TITLE}{CLEAR}session"


@pytest.fixture
def hostile_root(tmp_path: Path) -> Path:
    root = tmp_path / "session-state"
    folder = root / FOLDER
    shutil.copytree(CLI_GENERATED / "failing-tool", folder)
    log = folder / "events.jsonl"
    text = log.read_text()
    hostile = "Path does not exist \\u001b]52;c;cm0gLXJmIH4=\\u0007\\u001b]0;pwned\\u0007\\u001b[2J"
    assert "Path does not exist" in text
    log.write_text(text.replace("Path does not exist", hostile, 1))
    return root


def _assert_neutralised(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text, repr(text[:400])


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["show", FOLDER], id="show-id"),
        pytest.param(["show"], id="show-list"),
        pytest.param(["report", "session"], id="report"),
        pytest.param(["report", "session", "--csv"], id="report-csv"),
    ],
)
def test_commands_show_escape_sequences_from_the_log_as_visible_text(
    hostile_root: Path, argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # wide enough that the error message is not cut
    assert main([*argv, "--session-state", str(hostile_root)]) == 0
    out, err = capsys.readouterr()
    _assert_neutralised(out + err)
    if argv[0] == "show" and len(argv) > 1:  # the tree names the session by its id, not its folder
        assert "Path does not exist ␛]52;c;" in out and "␛[2J" in out
    else:
        assert (
            "hostile␛" in out
        )  # the folder name (its first 8 characters in the list) is shown, made visible


def test_the_daemons_log_lines_neutralise_folder_names(hostile_root: Path, tmp_path: Path) -> None:
    log = hostile_root / FOLDER / "events.jsonl"
    with log.open("ab") as fh:  # a bad line: the daemon's warning names the file (and so the folder)
        fh.write(b'{"not": json\n')
    with OtlpReceiver() as receiver:
        daemon = DaemonProcess(hostile_root, tmp_path / "state", receiver.http_endpoint, tmp_path / "d.log")
        daemon.start()
        receiver.wait_for(lambda r: len(r.spans()) >= 10, 20)
        daemon.terminate()
    output = daemon.output()
    assert "skipped a bad line in" in output and "hostile␛]0;pwned␇␛[2Jsession" in output, output
    _assert_neutralised(output)


def test_the_log_filter_neutralises_arguments_and_keeps_them_on_one_line() -> None:
    record = logging.LogRecord(
        "copilot_otel", logging.WARNING, __file__, 1, "in %s: %d", (f"a{CLEAR}\nb", 3), None
    )
    assert display.SafeLogFilter().filter(record)
    assert record.getMessage() == "in a␛[2J␊b: 3"


@pytest.mark.parametrize(
    ("n", "noun", "said"),
    [
        (0, "session", "0 sessions"),
        (1, "session", "1 session"),
        (2, "span", "2 spans"),
        (12_345, "log event", "12,345 log events"),
    ],
)
def test_counts_are_said_with_their_number(n: int, noun: str, said: str) -> None:
    """'exported 1 sessions', and counts without thousands separators, were what users read (issue 24, point 10)."""
    assert display.count(n, noun) == said
