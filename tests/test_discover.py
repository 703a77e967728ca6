"""Discovery against a real directory tree and the platform's real watcher (inotify on Linux, watchdog elsewhere)."""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver

from copilot_otel.daemon.discover import Discovery
from tests.waiting import until


class Changes:
    """The daemon's use of on_change: remember the path, wake a waiter."""

    def __init__(self) -> None:
        self.paths: set[Path] = set()
        self.calls = 0
        self._cond = threading.Condition()

    def __call__(self, path: Path) -> None:
        with self._cond:
            self.paths.add(path)
            self.calls += 1
            self._cond.notify_all()

    def wait_for(self, *paths: Path, timeout: float = 1.0) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: set(paths) <= self.paths, timeout)

    def clear(self) -> None:
        with self._cond:
            self.paths.clear()


def scanned(discovery: Discovery) -> list[str]:
    """The session logs the daemon's scan (:meth:`Discovery.request_scan`) finds, sorted: answered at once before
    ``start``, on discovery's thread after it."""
    answers: queue.Queue[dict[str, int]] = queue.Queue()
    discovery.request_scan(lambda stats, _cost_s: answers.put(stats))
    return sorted(answers.get(timeout=20))


def mode_of(discovery: Discovery) -> str:
    return discovery.mode  # (a call, so mypy does not narrow the property between two asserts)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "session-state"
    r.mkdir()
    return r


@pytest.fixture
def changes() -> Changes:
    return Changes()


@pytest.fixture
def discovery(root: Path, changes: Changes) -> Iterator[Discovery]:
    d = Discovery(root, changes, poll_interval_s=0.05)
    yield d
    d.stop()


def test_scan_finds_session_logs_and_legacy_files_only(root: Path) -> None:
    (root / "s1").mkdir()
    (root / "s1" / "events.jsonl").write_bytes(b"{}\n")
    (root / "s2").mkdir()  # no log yet
    (root / "s3").mkdir()
    (root / "s3" / "other.jsonl").write_bytes(b"")  # not a session log
    (root / "s4").mkdir()
    (root / "s4" / "events.jsonl").mkdir()  # not a regular file
    (root / "legacy.jsonl").write_bytes(b"{}\n")
    (root / "notes.txt").write_bytes(b"")
    assert scanned(Discovery(root, lambda p: None)) == [
        str(root / "legacy.jsonl"),
        str(root / "s1" / "events.jsonl"),
    ]
    assert scanned(Discovery(root / "missing", lambda p: None)) == []


def test_scan_2000_session_dirs(root: Path) -> None:
    for i in range(2_000):
        d = root / f"{i:08d}-0000-4000-8000-000000000000"
        d.mkdir()
        (d / "events.jsonl").write_bytes(b"")
        (d / "workspace.yaml").write_bytes(b"")
    for i in range(50):
        (root / f"legacy-{i}.jsonl").write_bytes(b"")
    disc = Discovery(root, lambda p: None)
    timings = []
    for _ in range(5):
        t0 = time.perf_counter()
        found = scanned(disc)
        timings.append((time.perf_counter() - t0) * 1e3)
    assert len(found) == 2_050
    print(
        f"\nscan of 2,000 session dirs + 50 legacy files: "
        f"best {min(timings):.1f} ms, worst {max(timings):.1f} ms"
    )


def test_new_session_dir_and_file_within_1ms_found(
    root: Path, changes: Changes, discovery: Discovery
) -> None:
    discovery.start()
    assert discovery.mode == "inotify"
    for i in range(20):
        session = root / f"session-{i}"
        session.mkdir()
        log = session / "events.jsonl"  # written at once: the watch on the dir may come later
        with open(log, "wb") as f:
            f.write(b'{"type":"session.start"}\n')
        assert changes.wait_for(log, timeout=1.0), f"{log} not reported within 1 s"


def test_appends_renames_and_deletes_are_reported(root: Path, changes: Changes, discovery: Discovery) -> None:
    session = root / "s1"
    session.mkdir()
    log = session / "events.jsonl"
    log.write_bytes(b"{}\n")
    discovery.start()
    assert changes.wait_for(log)  # already present when the watch started

    changes.clear()
    with open(log, "ab") as f:
        f.write(b"{}\n")
    assert changes.wait_for(log)

    changes.clear()
    tmp = session / "events.jsonl.tmp"
    tmp.write_bytes(b"{}\n")
    os.replace(tmp, log)  # replaced under the same name
    assert changes.wait_for(log)
    assert tmp not in changes.paths  # not a session log

    changes.clear()
    log.unlink()
    assert changes.wait_for(log)


def test_legacy_flat_file_found_by_watcher(root: Path, changes: Changes, discovery: Discovery) -> None:
    discovery.start()
    legacy = root / "0f1e2d3c.jsonl"
    legacy.write_bytes(b"{}\n")
    assert changes.wait_for(legacy)
    assert scanned(discovery) == [str(legacy)]


def test_root_created_after_start(tmp_path: Path, changes: Changes) -> None:
    root = tmp_path / "home" / ".copilot" / "session-state"
    disc = Discovery(root, changes, poll_interval_s=0.05)
    disc.start()
    try:
        assert disc.mode == "waiting"
        root.mkdir(parents=True)
        first = root / "s1" / "events.jsonl"
        first.parent.mkdir()
        first.write_bytes(b"{}\n")  # may land before the watch exists: reported by the catch-up scan
        assert changes.wait_for(first, timeout=2.0)
        assert mode_of(disc) == "inotify"
        second = root / "s2" / "events.jsonl"
        second.parent.mkdir()
        second.write_bytes(b"{}\n")
        assert changes.wait_for(second)
    finally:
        disc.stop()
    assert mode_of(disc) == "stopped"


def test_root_deleted_and_recreated_is_watched_again(tmp_path: Path, changes: Changes) -> None:
    root = tmp_path / "session-state"
    root.mkdir()
    disc = Discovery(root, changes, poll_interval_s=0.05)
    disc.start()
    try:
        root.rmdir()
        until(lambda: mode_of(disc) == "waiting", 2.0, "discovery to wait for its root")
        root.mkdir()
        log = root / "s" / "events.jsonl"
        log.parent.mkdir()
        log.write_bytes(b"{}\n")
        assert changes.wait_for(log, timeout=2.0)
    finally:
        disc.stop()


def test_forced_polling_reports_new_changed_and_deleted(root: Path, changes: Changes) -> None:
    disc = Discovery(root, changes, poll_interval_s=0.05, force_polling=True)
    disc.start()
    try:
        assert disc.mode == "polling"
        log = root / "s1" / "events.jsonl"
        log.parent.mkdir()
        log.write_bytes(b"{}\n")
        assert changes.wait_for(log)
        changes.clear()
        with open(log, "ab") as f:
            f.write(b"{}\n")
        assert changes.wait_for(log)
        changes.clear()
        log.unlink()
        assert changes.wait_for(log)
    finally:
        disc.stop()


def test_observer_failure_falls_back_to_polling_with_one_warning(
    root: Path, changes: Changes, caplog: pytest.LogCaptureFixture
) -> None:
    def failing_observer() -> BaseObserver:
        raise OSError(28, "inotify watch limit reached")

    disc = Discovery(root, changes, poll_interval_s=0.05, observer_factory=failing_observer)
    with caplog.at_level(logging.WARNING, logger="copilot_otel.daemon.discover"):
        disc.start()
        try:
            assert disc.mode == "polling"
            log = root / "s1" / "events.jsonl"
            log.parent.mkdir()
            log.write_bytes(b"{}\n")
            assert changes.wait_for(log)
            polled = changes.calls  # several poll rounds: more files found, still one warning
            for name in ("s2", "s3"):
                (root / name).mkdir()
                (root / name / "events.jsonl").write_bytes(b"{}\n")
            assert changes.wait_for(root / "s2" / "events.jsonl", root / "s3" / "events.jsonl")
            assert changes.calls > polled
        finally:
            disc.stop()
    assert caplog.text.count("falling back to polling") == 1


def test_on_change_exception_does_not_kill_the_watcher(root: Path, caplog: pytest.LogCaptureFixture) -> None:
    seen = Changes()

    def flaky(path: Path) -> None:
        seen(path)
        if path.name == "events.jsonl" and path.parent.name == "boom":
            raise RuntimeError("callback bug")

    disc = Discovery(root, flaky, poll_interval_s=0.05)
    disc.start()
    try:
        with caplog.at_level(logging.ERROR, logger="copilot_otel.daemon.discover"):
            (root / "boom").mkdir()
            (root / "boom" / "events.jsonl").write_bytes(b"{}\n")
            assert seen.wait_for(root / "boom" / "events.jsonl")
            after = root / "fine" / "events.jsonl"
            after.parent.mkdir()
            after.write_bytes(b"{}\n")
            assert seen.wait_for(after)
        # One thread reports both, in order: the failure was logged before the next log was reported.
        assert "discovery on_change callback failed" in caplog.text
    finally:
        disc.stop()


def test_watchdog_overflow_triggers_a_full_rescan(root: Path, changes: Changes) -> None:
    """Through watchdog (macOS, Windows; the Linux watcher's overflow is in test_discover_inotify.py)."""
    logs = [root / f"s{i}" / "events.jsonl" for i in range(3)]
    for log in logs:
        log.parent.mkdir()
        log.write_bytes(b"{}\n")
    discovery = Discovery(root, changes, poll_interval_s=0.05, observer_factory=Observer)
    discovery.start()
    assert changes.wait_for(*logs)
    changes.clear()
    # What watchdog (>= 7) logs when the kernel dropped events (IN_Q_OVERFLOW); it has no handler callback.
    logging.getLogger("watchdog.observers.inotify_c").warning(
        "Inotify queue overflowed; filesystem events were lost"
    )
    try:
        assert changes.wait_for(*logs)
    finally:
        discovery.stop()
