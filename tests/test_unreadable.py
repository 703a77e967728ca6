"""A plain file given as the session-state folder is refused; a session folder whose log cannot be read is
reported as unreadable (not as an unknown id) and stays in the listings of ``show`` and ``doctor``.

The tests run as root in CI, where permissions do not stop a read: the unreadable logs here are a folder and
a broken link where ``events.jsonl`` should be, which no user can read.
"""

from __future__ import annotations

import json
import os
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
    """Issue 24: skipped sessions were only warned about, and the exit code (0) said everything went."""
    root = _root(tmp_path)
    assert replay_into(receiver, root) == 8  # partial: the readable session went, two could not be read
    err = capsys.readouterr().err
    assert (
        f"skipped: cannot read session {BAD_DIR} ({root / BAD_DIR / 'events.jsonl'}): events.jsonl is a folder"
        in err
    )
    assert f"skipped: cannot read session {BAD_LINK} (" in err and "is a broken link" in err
    last = err.strip().splitlines()[-1]
    assert "from 1 of 1 session " in last and "2 sessions could not be read and were skipped" in last, last
    assert {s["resource"]["service.name"] for s in receiver.spans()}  # the readable session was exported


def test_replay_of_ids_skips_the_unreadable_one_and_exports_the_rest(
    tmp_path: Path, receiver: OtlpReceiver, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 24: one unreadable session among the ids given made replay export nothing and exit 3."""
    root = _root(tmp_path)
    code = replay_into(receiver, "0a0000aa", "0badd1r0", extra=("--session-state", str(root)))
    err = capsys.readouterr().err
    assert code == 8, err
    assert receiver.spans(), "the readable session was exported"
    assert f"skipped: cannot read session {BAD_DIR}" in err
    assert "1 session could not be read and was skipped" in err.strip().splitlines()[-1]
    # Nothing readable at all is "nothing" (3), not "partial" (8).
    assert replay_into(receiver, "0badd1r0", extra=("--session-state", str(root))) == 3
    assert "nothing to replay: 1 session could not be read" in capsys.readouterr().err


def test_report_says_which_sessions_it_left_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 24: report left unreadable sessions out of the totals without a word (exit 0)."""
    root = _root(tmp_path)
    assert main(["report", "--session-state", str(root), "--json"]) == 8
    out, err = capsys.readouterr()
    assert json.loads(out)["totals"]["sessions"] == 1
    assert f"left out of the totals: cannot read session {BAD_DIR}" in err
    assert "2 sessions could not be read and are not counted" in err


def test_a_log_without_read_permission_is_listed_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A regular file that cannot be opened is found by the scan and by the unreadable check: one row."""
    root = tmp_path / "session-state"
    shutil.copytree(CLI_GENERATED / "plain-question", root / "0a0000aa-good")
    shutil.copytree(CLI_GENERATED / "plain-question", root / "0a0000bb-locked")
    locked = root / "0a0000bb-locked" / "events.jsonl"
    locked.chmod(0)
    if os.access(locked, os.R_OK):
        pytest.skip("permissions do not stop this user (root): the folder and link cases above stand in")
    assert main(["show", "--session-state", str(root), "--json"]) == 0
    ids = [row["session_id"] for row in json.loads(capsys.readouterr().out)["sessions"]]
    assert sorted(ids) == ["0a0000aa-good", "0a0000bb-locked"]


@pytest.mark.skipif(not Path("/proc/self/mem").exists(), reason="needs Linux's /proc/self/mem")
def test_a_log_that_fails_while_read_is_skipped(
    tmp_path: Path, receiver: OtlpReceiver, capsys: pytest.CaptureFixture[str]
) -> None:
    """A log that looks fine but fails when read (an I/O error: /proc/self/mem at offset 0 answers EIO, even
    to root) used to stop replay with exit 3 after the sessions before it. Reached through a link out of the
    session-state folder, it is now refused before it is opened (tests/test_links.py); either way it is skipped,
    named, and the rest exported (exit 8)."""
    root = tmp_path / "session-state"
    shutil.copytree(CLI_GENERATED / "plain-question", root / "0a0000aa-good")
    (root / "0a0000ff-eio").mkdir()
    (root / "0a0000ff-eio" / "events.jsonl").symlink_to("/proc/self/mem")
    assert replay_into(receiver, root) == 8
    err = capsys.readouterr().err
    assert "0a0000ff-eio" in err and "leads out of the session-state folder" in err
    assert "from 1 of 1 session " in err.strip().splitlines()[-1]
    assert receiver.spans()
    assert main(["report", "--session-state", str(root), "--json"]) == 8
    assert "1 session could not be read and is not counted" in capsys.readouterr().err
