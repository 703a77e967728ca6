"""A plain file given as the session-state folder is refused; a session folder whose log cannot be read is
reported as unreadable (not as an unknown id) and stays in the listings of ``show`` and ``doctor``.

The tests run as root in CI, where permissions do not stop a read: the unreadable logs here are a folder and
a broken link where ``events.jsonl`` should be, which no user can read.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from copilot_otel.cli import main
from tests.conftest import CLI_GENERATED, replay_into
from tests.otlp_receiver import OtlpReceiver
from tests.test_cli_commands import _console_script

BAD_DIR = "0badd1r0-0000-4000-8000-000000000001"
BAD_LINK = "0bad1111-0000-4000-8000-000000000002"


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("command", ["replay", "run"])
def test_a_plain_file_is_not_a_session_state_folder(tmp_path: Path, command: str) -> None:
    plain = tmp_path / "notes.txt"
    plain.write_text("not a folder\n")
    argv = [*_console_script(), command, "--session-state", str(plain), "--state-dir", str(tmp_path / "st")]
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{command} ran on with a plain file as its session-state folder")
    assert result.returncode == 3, (result.returncode, result.stderr)
    line = _one_line(result.stderr)
    assert line == (
        f"copilot-otel: error: the session-state folder {plain} is a file, not a folder: set --session-state "
        "or COPILOT_OTEL_SESSION_STATE to the Copilot CLI's session-state folder (~/.copilot/session-state)"
    )


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "session-state"
    shutil.copytree(CLI_GENERATED / "plain-question", root / "0a0000aa-good")
    (root / BAD_DIR / "events.jsonl").mkdir(parents=True)
    (root / BAD_LINK).mkdir()
    (root / BAD_LINK / "events.jsonl").symlink_to(tmp_path / "gone" / "events.jsonl")
    return root


def test_an_unreadable_session_is_named_as_such(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _root(tmp_path)
    assert main(["show", "0badd1r0", "--session-state", str(root)]) == 3
    line = _one_line(capsys.readouterr().err)
    assert line == (
        f"copilot-otel: error: cannot read session {BAD_DIR} ({root / BAD_DIR / 'events.jsonl'}): "
        "events.jsonl is a folder, not a file"
    )
    assert main(["show", str(root / BAD_LINK)]) == 3
    assert "events.jsonl is a broken link" in _one_line(capsys.readouterr().err)


def test_unreadable_sessions_stay_in_the_listings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _root(tmp_path)
    assert main(["show", "--session-state", str(root), "--json"]) == 0
    rows = {row["session_id"]: row for row in json.loads(capsys.readouterr().out)["sessions"]}
    assert set(rows) == {"0a0000aa-good", BAD_DIR, BAD_LINK}
    assert rows[BAD_DIR]["problem"] == "unreadable: events.jsonl is a folder, not a file"
    assert rows[BAD_LINK]["problem"] == "unreadable: events.jsonl is a broken link"
    assert rows["0a0000aa-good"]["problem"] is None and rows["0a0000aa-good"]["prompts"] == 1

    assert main(["show", "--session-state", str(root)]) == 0
    out = capsys.readouterr().out
    assert out.count("unreadable: ") == 2, out

    main(["doctor", "--session-state", str(root), "--state-dir", str(tmp_path / "st"), "--timeout", "2"])
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if "session logs" in line)
    assert f"1 session in {root}, 2 unreadable" in line, out
    assert f"{BAD_DIR}: events.jsonl is a folder, not a file" in line


def test_replay_of_a_root_says_which_sessions_it_skipped(
    tmp_path: Path, receiver: OtlpReceiver, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _root(tmp_path)
    assert replay_into(receiver, root) == 0
    err = capsys.readouterr().err
    assert f"skipped session {BAD_DIR} ({root / BAD_DIR / 'events.jsonl'}): events.jsonl is a folder" in err
    assert f"skipped session {BAD_LINK} (" in err and "is a broken link" in err
    assert {s["resource"]["service.name"] for s in receiver.spans()}  # the readable session was exported
