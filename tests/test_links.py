"""Session logs that are links, FIFOs or devices (issue "Trust at the edges", point 4).

Rule: a log reached through a link is read only if the link stays inside the session-state folder (a user's own
layout); a link out of it is not followed (as root, a link to ``/etc/shadow`` was opened and read, and a link to any
JSON-lines file elsewhere was exported as a session). A FIFO or device in place of a log is never opened for reading
and never blocks. Each refusal is said once per path, and ``replay`` names what it skipped (exit 8: partial).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from copilot_otel.cli import main
from copilot_otel.daemon.discover import Discovery
from tests import test_daemon
from tests.conftest import CLI_GENERATED
from tests.daemon_process import assert_delivered_like_replay

env = test_daemon.env


def _layout(root: Path, outside: Path) -> dict[str, Path]:
    """A session-state folder with one real log, links in and out of it, and a FIFO."""
    outside.mkdir(parents=True, exist_ok=True)
    real = root / "plain-question"
    shutil.copytree(CLI_GENERATED / "plain-question", real)
    # In the tree: a session whose log is a link to another file inside the folder (kept).
    shutil.copytree(CLI_GENERATED / "failing-tool", root / ".store" / "failing-tool")  # not a session folder
    (root / "failing-tool").mkdir()
    (root / "failing-tool" / "events.jsonl").symlink_to(root / ".store" / "failing-tool" / "events.jsonl")
    # Out of the tree: a log that links out, and a session folder that links out.
    shutil.copytree(CLI_GENERATED / "multi-tool", outside / "multi-tool")
    (root / "linked-out").mkdir()
    (root / "linked-out" / "events.jsonl").symlink_to(outside / "multi-tool" / "events.jsonl")
    shutil.copytree(CLI_GENERATED / "subagent", outside / "subagent")
    (root / "folder-out").symlink_to(outside / "subagent")
    (root / "fifo").mkdir()
    os.mkfifo(root / "fifo" / "events.jsonl")
    return {
        "real": real / "events.jsonl",
        "in_tree": root / "failing-tool" / "events.jsonl",
        "link_out": root / "linked-out" / "events.jsonl",
        "folder_out": root / "folder-out" / "events.jsonl",
        "fifo": root / "fifo" / "events.jsonl",
    }


def test_discovery_follows_links_inside_the_folder_only(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "session-state"
    paths = _layout(root, tmp_path / "elsewhere")
    discovery = Discovery(root, lambda _: None)
    scans: list[dict[str, int]] = []
    with caplog.at_level(logging.WARNING, logger="copilot_otel.daemon.discover"):
        discovery.request_scan(
            lambda stats, _cost_s: scans.append(stats)
        )  # the daemon's scan (not started: now)
        discovery.request_scan(
            lambda stats, _cost_s: scans.append(stats)
        )  # every scan finds them again: said once
    assert [set(found) for found in scans] == [{str(paths["real"]), str(paths["in_tree"])}] * 2
    skipped = [r.getMessage() for r in caplog.records if r.getMessage().startswith("skipped ")]
    assert {m.removeprefix("skipped ").split(": ", 1)[0] for m in skipped} == {
        str(paths["link_out"]),
        str(paths["folder_out"]),
        str(paths["fifo"]),
    }
    assert len(skipped) == 3, skipped
    assert any("leads out of the session-state folder" in m and "linked-out" in m for m in skipped)
    assert any("not a regular file" in m and "fifo" in m for m in skipped)


def test_the_daemon_reads_nothing_through_a_link_out_of_the_folder(env: dict[str, Any]) -> None:
    root = env["root"]
    paths = _layout(root, env["tmp"] / "elsewhere")
    if Path("/etc/shadow").exists():
        (root / "shadow").mkdir()
        (root / "shadow" / "events.jsonl").symlink_to("/etc/shadow")  # as root, this was opened and read
    d = env["daemon"]()
    assert_delivered_like_replay(env["receiver"], [paths["real"], paths["in_tree"]], env["tmp"])
    assert d.terminate() == 0
    status = json.loads((env["state"] / "status.json").read_text())
    assert status["lines_dropped"] == {}, "a file out of the folder was read (its lines dropped as bad JSON)"
    out = d.output()
    assert out.count("skipped ") >= 3 and "Traceback" not in out
    for name in ("linked-out", "folder-out", "fifo"):
        assert sum(name in line and "skipped" in line for line in out.splitlines()) == 1, name


def test_replay_skips_and_names_links_out_of_the_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "session-state"
    _layout(root, tmp_path / "elsewhere")
    out = tmp_path / "out.jsonl"
    code = main(["replay", str(root), "--output-file", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 8, err  # partial: the readable sessions are exported, the others named
    assert "linked-out" in err and "folder-out" in err and "leads out of the session-state folder" in err
    exported = out.read_text()
    assert exported.count('"resourceSpans"') >= 1
    # Only the two sessions inside the folder: the multi-tool and subagent logs out of it are not exported.
    outside_ids = {
        line.split('"sessionId":"', 1)[1].split('"', 1)[0]
        for name in ("multi-tool", "subagent")
        for line in (CLI_GENERATED / name / "events.jsonl").read_text().splitlines()[:1]
    }
    inside_id = (
        (CLI_GENERATED / "plain-question" / "events.jsonl").read_text().split('"sessionId":"', 1)[1][:36]
    )
    assert inside_id in exported and not any(sid in exported for sid in outside_ids)
