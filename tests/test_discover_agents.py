"""Discovery of the other agents' deeper log trees: Claude Code's ``projects``, Codex's ``sessions`` and Gemini
CLI's ``tmp``.

Their layouts are folder and file names only (discovery sits below the readers), so the first tests hold them
equal to the readers' own ``scan`` over every real fixture. Then the platform's real watcher over a real tree: a
log in a folder made while it is watched (``mkdir -p`` of a session's ``subagents``, of a day's ``YYYY/MM/DD``,
of a Gemini project's ``chats`` and a session's sub-agent folder in it)
is reported without waiting for a scan, only the folders that may hold logs are watched, and several roots
discovered as one hand over one scan.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from pathlib import Path

import pytest
from watchdog.observers import Observer

from copilot_otel._platform import current
from copilot_otel.daemon.discover import Discoveries, Discovery
from copilot_otel.sources.claude_code import reader as claude_code
from copilot_otel.sources.codex import reader as codex
from copilot_otel.sources.gemini import reader as gemini
from tests.conftest import FIXTURES
from tests.test_discover import Changes, changes, mode_of, scanned
from tests.waiting import until

__all__ = ["changes"]

OTHER = FIXTURES / "other-agents"
HOMES = {
    "claude-code": [
        *sorted((OTHER / "claude-code").glob("*/")),
        *sorted((OTHER / "recorded" / "claude-code").glob("*/")),
    ],
    "codex": [*sorted((OTHER / "codex").glob("*/")), *sorted((OTHER / "recorded" / "codex").glob("*/"))],
    "gemini": sorted((OTHER / "gemini").glob("*/")),
}
# Each agent's reader's scan and the folder under its home that discovery watches.
READERS = {
    "claude-code": (claude_code.scan, claude_code.PROJECTS),
    "codex": (codex.scan, codex.SESSIONS),
    "gemini": (gemini.scan, gemini.TMP),
}


@pytest.mark.parametrize("agent", sorted(HOMES))
def test_the_scan_finds_what_the_readers_scan_finds(agent: str) -> None:
    scan, logs = READERS[agent]
    homes = [home for home in HOMES[agent] if (home / logs).is_dir()]
    assert len(homes) >= 10
    for home in homes:
        found = scanned(Discovery(home / logs, lambda _: None, layout=agent))  # type: ignore[arg-type]
        assert found == [str(log.path) for log in scan(home)], home
        assert found, home


def test_a_claude_code_tree_with_more_than_logs_in_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A session folder holds more than sub-agents (tool results the CLI spills); none of it is a log, nor is a
    ``.jsonl`` at the wrong depth; a link out of the tree is refused."""
    projects = tmp_path / "projects"
    session = projects / "-home-dev-app" / "0aa.jsonl"
    sub = projects / "-home-dev-app" / "0aa" / "subagents" / "agent-1.jsonl"
    for path in (
        session,
        sub,
        projects / "-home-dev-app" / "0aa" / "tool-results" / "x.jsonl",
        projects / "top.jsonl",
    ):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"{}\n")
    outside = tmp_path / "outside.jsonl"
    outside.write_bytes(b"{}\n")
    (projects / "-home-dev-app" / "link.jsonl").symlink_to(outside)
    disc = Discovery(projects, lambda _: None, layout="claude-code")
    with caplog.at_level(logging.WARNING, logger="copilot_otel.daemon.discover"):
        assert scanned(disc) == [str(session), str(sub)]
    link = projects / "-home-dev-app" / "link.jsonl"
    assert [r.getMessage() for r in caplog.records] == [
        f"skipped {link}: it is a link that leads out of the agent's log folder; it is not read"
    ]


def _watched(tmp_path: Path, agent: str, changes: Changes, watcher: str = "platform") -> Discovery:
    """Discovery of a new ``agent`` root, watching: through the platform's watcher, or watchdog's (macOS's and
    Windows's, run here over inotify). Its scans come too late for the tests (30 s)."""
    root = tmp_path / agent
    root.mkdir()
    observer = Observer if watcher == "watchdog" else None
    disc = Discovery(root, changes, poll_interval_s=30, layout=agent, observer_factory=observer)  # type: ignore[arg-type]
    disc.start()
    assert mode_of(disc) == "inotify"
    return disc


def _watches_only(disc: Discovery, watcher: str, folders: set[str]) -> None:
    """Linux's own watcher watches exactly ``folders`` (below the root): those that may hold logs."""
    if watcher == "platform" and type(current).__name__ == "Linux":
        inotify = disc._watcher
        assert inotify is not None
        assert inotify.watched_folders == folders  # type: ignore[attr-defined]


@pytest.mark.parametrize("watcher", ["platform", "watchdog"])
@pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")  # watchdog's own, at a `mkdir -p`
def test_a_sub_agent_file_in_a_folder_made_while_watched_is_reported(
    tmp_path: Path, changes: Changes, watcher: str
) -> None:
    disc = _watched(tmp_path, "claude-code", changes, watcher)
    try:
        project = disc.root / "-home-dev-app"
        project.mkdir()
        session = project / "0aa.jsonl"
        session.write_bytes(b"{}\n")
        assert changes.wait_for(session, timeout=5)
        subagents = project / "0aa" / "subagents"
        subagents.mkdir(parents=True)  # the session folder and its subagents at once
        sub = subagents / "agent-1.jsonl"
        sub.write_bytes(b"{}\n")
        assert changes.wait_for(sub, timeout=5)
        changes.clear()
        (project / "0aa" / "tool-results").mkdir()
        spilled = project / "0aa" / "tool-results" / "x.jsonl"
        spilled.write_bytes(b"{}\n")
        with open(sub, "ab") as fh:
            fh.write(b"{}\n")  # appended after the spilled file: its report would come first
        assert changes.wait_for(sub, timeout=5)
        assert spilled not in changes.paths
        _watches_only(
            disc,
            watcher,
            {
                "-home-dev-app",
                os.path.join("-home-dev-app", "0aa"),
                os.path.join("-home-dev-app", "0aa", "subagents"),
            },
        )  # the folders that may hold logs, not the tool results
    finally:
        disc.stop()


@pytest.mark.parametrize("watcher", ["platform", "watchdog"])
@pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")  # watchdog's own, at a `mkdir -p`
def test_a_gemini_session_and_its_sub_agent_in_folders_made_while_watched_are_reported(
    tmp_path: Path, changes: Changes, watcher: str
) -> None:
    """``tmp/<project>/chats`` made at once (a project's first session), a session's log in it, then the session's
    sub-agent folder: each log is reported; the project's other folders (the CLI keeps more there) are not
    watched, and nothing in them is a log."""
    disc = _watched(tmp_path, "gemini", changes, watcher)
    try:
        chats = disc.root / "project" / "chats"
        chats.mkdir(parents=True)
        session = chats / "session-2026-12-02T07-35-6b4f93a2.jsonl"
        session.write_bytes(b"{}\n")
        assert changes.wait_for(session, timeout=5)
        sub = chats / "6b4f93a2-dc6b-407d-ba74-03d8f2e5f5ab" / "f418ac7a.jsonl"
        sub.parent.mkdir()
        sub.write_bytes(b"{}\n")
        assert changes.wait_for(sub, timeout=5)
        changes.clear()
        other = disc.root / "project" / "checkpoints" / "x.jsonl"
        other.parent.mkdir()
        other.write_bytes(b"{}\n")
        with open(sub, "ab") as fh:
            fh.write(b"{}\n")  # appended after the other file: its report would come first
        assert changes.wait_for(sub, timeout=5)
        assert other not in changes.paths
        assert scanned(disc) == [str(sub), str(session)]
        folder = os.path.join("project", "chats")
        _watches_only(
            disc, watcher, {"project", folder, os.path.join(folder, sub.parent.name)}
        )  # not its others
    finally:
        disc.stop()


@pytest.mark.parametrize("watcher", ["platform", "watchdog"])
def test_a_rollout_in_a_new_day_folder_is_reported(tmp_path: Path, changes: Changes, watcher: str) -> None:
    disc = _watched(tmp_path, "codex", changes, watcher)
    try:
        day = disc.root / "2026" / "12" / "02"
        day.mkdir(parents=True)
        rollout = day / "rollout-2026-12-02T07-00-00-0199aaaa-0000-7000-8000-000000000001.jsonl"
        rollout.write_bytes(b"{}\n")
        assert changes.wait_for(rollout, timeout=5)
        changes.clear()
        (day.parent / "03").mkdir()
        later = day.parent / "03" / rollout.name.replace("0001", "0002")
        shutil.copyfile(rollout, later)
        assert changes.wait_for(later, timeout=5)
    finally:
        disc.stop()


def test_several_roots_hand_over_one_scan(tmp_path: Path, changes: Changes) -> None:
    """One scan of every folder (the daemon compares it with all it tracks); a folder that does not exist is an
    agent not installed, and does not make the whole ``waiting``."""
    copilot = tmp_path / "session-state"
    (copilot / "s1").mkdir(parents=True)
    (copilot / "s1" / "events.jsonl").write_bytes(b"{}\n")
    projects = tmp_path / ".claude" / "projects"
    (projects / "p").mkdir(parents=True)
    (projects / "p" / "a.jsonl").write_bytes(b"{}\n")
    both = Discoveries(
        [(copilot, "copilot"), (projects, "claude-code"), (tmp_path / ".codex" / "sessions", "codex")],
        changes,
        poll_interval_s=0.05,
    )
    got: list[dict[str, int]] = []
    done = threading.Event()
    both.start()
    try:

        def scanned(stats: dict[str, int], cost: float) -> None:
            got.append(stats)
            done.set()

        both.request_scan(scanned)
        assert done.wait(5)
        assert sorted(got[0]) == sorted(
            [str(copilot / "s1" / "events.jsonl"), str(projects / "p" / "a.jsonl")]
        )
        assert both.mode == "inotify"
        assert both.description == "inotify"  # what status and doctor read, as with one folder
    finally:
        both.stop()


@pytest.mark.parametrize("watcher", ["platform", "watchdog"])
@pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")  # watchdog's own, at a `mkdir -p`
def test_a_renamed_project_folder_reports_its_logs_under_the_new_name(
    tmp_path: Path, changes: Changes, watcher: str
) -> None:
    """A folder renamed within the tree keeps its watches (inotify: the folders below it take the new name); one
    moved out of the tree is no longer watched."""
    disc = _watched(tmp_path, "claude-code", changes, watcher)
    try:
        old = disc.root / "-home-dev-app"
        (old / "0aa" / "subagents").mkdir(parents=True)
        sub = old / "0aa" / "subagents" / "agent-1.jsonl"
        sub.write_bytes(b"{}\n")
        assert changes.wait_for(sub, timeout=5)
        new = disc.root / "-home-dev-app2"
        old.rename(new)
        moved = new / "0aa" / "subagents" / "agent-1.jsonl"
        assert changes.wait_for(moved, timeout=5)  # the folder that came in is scanned
        if watcher == "watchdog":
            # watchdog over inotify (what runs here; macOS and Windows use FSEvents and ReadDirectoryChangesW)
            # renames its watches of a moved tree only once it has paired the move's two events: in about one run
            # in twelve a write right after the move is reported under no name at all, however often it is
            # repeated, and only the periodic scan (the truth) finds it. That is watchdog's inotify backend, which
            # no user of ours runs (Linux has the platform watcher), so the check stops at the scan of the moved
            # folder above.
            return
        changes.clear()
        with open(moved, "ab") as fh:
            fh.write(b"{}\n")
        assert changes.wait_for(
            moved, timeout=5
        )  # (the old name may still come: the first write's late events)
        if watcher == "platform" and type(current).__name__ == "Linux":
            assert disc._watcher.watched_folders == {  # type: ignore[union-attr]
                "-home-dev-app2",
                os.path.join("-home-dev-app2", "0aa"),
                os.path.join("-home-dev-app2", "0aa", "subagents"),
            }
            (new / "0aa").rename(tmp_path / "elsewhere")  # out of the tree: its watches go with it
            until(
                lambda: disc._watcher.watched_folders == {"-home-dev-app2"},  # type: ignore[union-attr]
                2.0,
                "the moved folder's watches gone",
            )
    finally:
        disc.stop()
