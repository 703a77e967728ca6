"""Discovery through the Linux watcher (one inotify descriptor, a watch per session folder) on a real tree.

Real inotify throughout. Two things cannot be made to happen here and are stood in for, as said where they are:
the kernel's queue overflow (``fs.inotify.max_queued_events`` cannot be lowered unprivileged, and the reader drains
the queue faster than a test can fill it) is a real ``IN_Q_OVERFLOW`` record, packed as the kernel packs it, handed
to the watcher's decoder; the watch limit (``fs.inotify.max_user_watches``) is the watcher's ``watch_limit``.
"""

from __future__ import annotations

import logging
import os
import shutil
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from copilot_otel._platform import DirWatcher, WatchSink, current
from copilot_otel._platform._linux import (
    IN_CREATE,
    IN_ISDIR,
    IN_Q_OVERFLOW,
    InotifyWatcher,
    _libc,
    _WdTable,
    decode_events,
)
from copilot_otel.daemon.discover import Discovery
from tests.test_discover import Changes, changes, mode_of, root
from tests.waiting import until

__all__ = ["changes", "root"]  # the fixtures, shared with test_discover.py

pytestmark = pytest.mark.skipif(
    type(current).__name__ != "Linux", reason="the inotify watcher is Linux's (not the portable platform's)"
)


class _Kept:
    """A watcher factory that keeps what it built, so a test can look at its watches."""

    def __init__(self, watch_limit: int | None = None) -> None:
        self.watch_limit = watch_limit
        self.built: list[InotifyWatcher] = []

    def __call__(self, root: str, sink: WatchSink) -> DirWatcher:
        watcher = InotifyWatcher(root, sink, watch_limit=self.watch_limit)
        self.built.append(watcher)
        return watcher

    @property
    def last(self) -> InotifyWatcher:
        return self.built[-1]


@pytest.fixture
def kept() -> _Kept:
    return _Kept()


@pytest.fixture
def disc(root: Path, changes: Changes, kept: _Kept) -> Iterator[Discovery]:
    d = Discovery(root, changes, poll_interval_s=0.05, watcher_factory=kept)
    yield d
    d.stop()


def _session(root: Path, name: str) -> Path:
    log = root / name / "events.jsonl"
    log.parent.mkdir()
    log.write_bytes(b"{}\n")
    return log


def _inotify_watches() -> list[int]:
    """The number of watches of each inotify descriptor this process holds, from ``/proc/self/fdinfo``."""
    counts = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:inotify":
                with open(f"/proc/self/fdinfo/{fd}", encoding="ascii") as fh:
                    counts.append(sum(line.startswith("inotify wd:") for line in fh))
        except OSError:
            continue
    return counts


def test_the_platform_gives_the_inotify_watcher(root: Path) -> None:
    assert isinstance(current.dir_watcher(str(root), _NullSink()), InotifyWatcher)


def test_one_descriptor_one_watch_per_session_folder_plus_the_root(
    root: Path, disc: Discovery, changes: Changes
) -> None:
    logs = [_session(root, f"s{i}") for i in range(30)]
    (root / "legacy.jsonl").write_bytes(b"{}\n")
    before = _inotify_watches()
    disc.start()
    assert mode_of(disc) == "inotify"
    assert changes.wait_for(*logs, root / "legacy.jsonl")
    assert sorted(_inotify_watches()) == sorted([*before, 31])  # one descriptor more, with 30 + 1 watches
    disc.stop()
    assert sorted(_inotify_watches()) == sorted(before)  # released


def test_our_own_reads_do_not_wake_discovery(root: Path, disc: Discovery, changes: Changes) -> None:
    log = _session(root, "s1")
    disc.start()
    assert changes.wait_for(log)
    changes.clear()
    for _ in range(20):
        log.read_bytes()  # open, read, close: not in the watch mask
    _session(root, "marker")  # a change after the reads: once it is seen, the reads would have been too
    assert changes.wait_for(root / "marker" / "events.jsonl")
    assert changes.paths == {root / "marker" / "events.jsonl"}


def test_new_folder_written_before_its_watch_is_reported_and_then_watched(
    root: Path, disc: Discovery, changes: Changes, kept: _Kept
) -> None:
    disc.start()
    for i in range(20):
        log = _session(root, f"new-{i}")  # the log is written at once: before the watch on its folder exists
        assert changes.wait_for(log), f"{log} not reported"
    until(
        lambda: kept.last.watched_folders == {f"new-{i}" for i in range(20)},
        2.0,
        "a watch on each new folder",
    )
    changes.clear()
    with open(root / "new-7" / "events.jsonl", "ab") as fh:
        fh.write(b"{}\n")
    assert changes.wait_for(root / "new-7" / "events.jsonl")


def test_deleted_and_moved_folders_are_forgotten(
    root: Path, disc: Discovery, changes: Changes, kept: _Kept, tmp_path: Path
) -> None:
    gone, renamed, moved_out = (_session(root, name) for name in ("gone", "renamed", "moved-out"))
    disc.start()
    assert changes.wait_for(gone, renamed, moved_out)
    changes.clear()
    shutil.rmtree(gone.parent)
    os.rename(renamed.parent, root / "renamed-2")
    os.rename(moved_out.parent, tmp_path / "elsewhere")
    new_name = root / "renamed-2" / "events.jsonl"
    assert changes.wait_for(gone, renamed, moved_out, new_name)
    until(lambda: kept.last.watched_folders == {"renamed-2"}, 2.0, "the watch on the renamed folder only")
    changes.clear()
    with open(new_name, "ab") as fh:
        fh.write(b"{}\n")
    with open(tmp_path / "elsewhere" / "events.jsonl", "ab") as fh:  # no longer ours: its watch was removed
        fh.write(b"{}\n")
    assert changes.wait_for(new_name)
    _session(root, "marker")
    assert changes.wait_for(root / "marker" / "events.jsonl")
    assert changes.paths == {new_name, root / "marker" / "events.jsonl"}
    assert _inotify_watches().count(3) == 1  # root, renamed-2, marker: nothing left on the removed folders


def test_root_moved_away_and_recreated_is_watched_again(tmp_path: Path, kept: _Kept) -> None:
    root = tmp_path / "session-state"
    root.mkdir()
    changes = Changes()
    disc = Discovery(root, changes, poll_interval_s=0.05, watcher_factory=kept)
    disc.start()
    try:
        first = kept.last
        os.rename(root, tmp_path / "old-session-state")
        until(
            lambda: not first.alive(), 2.0, "the watcher's end"
        )  # the root's IN_MOVE_SELF ends that watcher
        root.mkdir()
        log = _session(root, "s")
        assert changes.wait_for(log, timeout=2.0)
        assert len(kept.built) == 2 and mode_of(disc) == "inotify"
    finally:
        disc.stop()


def test_overflow_mends_the_watches_and_rescans_once(
    root: Path, disc: Discovery, changes: Changes, kept: _Kept, caplog: pytest.LogCaptureFixture
) -> None:
    logs = [_session(root, f"s{i}") for i in range(3)]
    disc.start()
    assert changes.wait_for(*logs)
    watcher = kept.last
    # A folder whose watch went away unseen: its watch removed behind the watcher's back (the kernel's IN_IGNORED
    # then drops it from the watcher's table), as a folder created while events were being lost is unwatched.
    (wd,) = [wd for wd, name in watcher._folders.items() if name == "s2"]
    assert _libc().inotify_rm_watch(watcher._fd, wd) == 0
    until(lambda: "s2" not in watcher.watched_folders, 2.0, "the deleted folder's watch gone")
    changes.clear()
    overflow = struct.pack("iIII", -1, IN_Q_OVERFLOW, 0, 0)  # struct inotify_event as the kernel writes it
    with caplog.at_level(logging.WARNING, logger="copilot_otel.daemon.discover"):
        watcher.dispatch(overflow)
        assert changes.wait_for(*logs)  # the full scan
    assert caplog.text.count("inotify queue overflowed") == 1
    assert watcher.watched_folders == {"s0", "s1", "s2"}  # mended by one listing of the root
    changes.clear()
    with open(logs[2], "ab") as fh:
        fh.write(b"{}\n")
    assert changes.wait_for(logs[2])


def test_decode_events_reads_names_and_padding() -> None:
    def record(wd: int, mask: int, name: bytes) -> bytes:
        padded = name + b"\0" * (16 - len(name) % 16) if name else b""
        return struct.pack("iIII", wd, mask, 0, len(padded)) + padded

    data = (
        record(1, IN_CREATE | IN_ISDIR, b"0a0b")
        + record(-1, IN_Q_OVERFLOW, b"")
        + record(7, 2, b"events.jsonl")
    )
    assert list(decode_events(data)) == [
        (1, IN_CREATE | IN_ISDIR, "0a0b"),
        (-1, IN_Q_OVERFLOW, ""),
        (7, 2, "events.jsonl"),
    ]


def test_the_wd_table_keeps_numbers_near_and_far() -> None:
    table = _WdTable()
    table[1], table[5], table[10**7] = "a", "b", "far"  # 10**7: past the list's reach, kept in the dict
    table[5] = "b2"  # renamed: still one entry
    assert len(table) == 3 and table.get(5) == "b2" and table.get(10**7) == "far" and table.get(4) is None
    assert sorted(table.items()) == [(1, "a"), (5, "b2"), (10**7, "far")]
    assert table.pop(10**7) == "far" and table.pop(1) == "a" and table.pop(1) is None
    assert list(table.values()) == ["b2"] and len(table) == 1


def test_watch_limit_at_start_falls_back_to_polling_with_the_reason(
    root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    logs = [_session(root, f"s{i}") for i in range(5)]
    changes = Changes()
    # The limit stands in for fs.inotify.max_user_watches (ENOSPC from inotify_add_watch): 3 watches, 6 needed.
    disc = Discovery(root, changes, poll_interval_s=0.05, watcher_factory=_Kept(watch_limit=3))
    with caplog.at_level(logging.WARNING, logger="copilot_otel.daemon.discover"):
        disc.start()
    try:
        assert mode_of(disc) == "polling"
        assert disc.description == "polling (inotify watches exhausted)"
        assert "3 of 5 session folders cannot be watched" in caplog.text
        assert "max_user_watches" in caplog.text
        assert changes.wait_for(*logs)
        later = _session(root, "later")
        assert changes.wait_for(later)  # found by polling
    finally:
        disc.stop()
    assert caplog.text.count("falling back to polling") == 1
    assert _inotify_watches().count(3) == 0  # the half-built watcher's descriptor was closed


def test_watch_limit_reached_by_a_new_folder_falls_back_to_polling(
    root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="copilot_otel.daemon.discover")
    first = _session(root, "s0")
    changes = Changes()
    disc = Discovery(root, changes, poll_interval_s=0.05, watcher_factory=_Kept(watch_limit=3))
    disc.start()
    try:
        assert mode_of(disc) == "inotify"  # root + s0: 2 of 3
        assert changes.wait_for(first)
        second, third = (
            _session(root, "s1"),
            _session(root, "s2"),
        )  # the third watch fits, the fourth does not
        assert changes.wait_for(second, third)
        until(lambda: mode_of(disc) == "polling", 2.0, "polling")
        assert disc.degraded == "inotify watches exhausted"
        assert "max_user_watches) is reached" in caplog.text and "s2" in caplog.text
        fourth = _session(root, "s3")
        assert changes.wait_for(fourth)
    finally:
        disc.stop()


def test_no_inotify_at_all_polls_and_says_so(root: Path) -> None:
    def no_inotify(root: str, sink: WatchSink) -> DirWatcher:
        raise OSError(
            38, "Function not implemented", "inotify_init1"
        )  # ENOSYS: a kernel built without inotify

    changes = Changes()
    disc = Discovery(root, changes, poll_interval_s=0.05, watcher_factory=no_inotify)
    disc.start()
    try:
        assert disc.description == "polling (no inotify on this system)"
        log = _session(root, "s1")
        assert changes.wait_for(log)
    finally:
        disc.stop()


def test_a_linked_session_folder_gets_no_watch(
    root: Path,
    disc: Discovery,
    changes: Changes,
    kept: _Kept,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "events.jsonl").write_bytes(b"{}\n")
    (root / "linked").symlink_to(outside, target_is_directory=True)
    log = _session(root, "real")
    with caplog.at_level(logging.WARNING, logger="copilot_otel.daemon.discover"):
        disc.start()
        assert changes.wait_for(log)
        assert kept.last.watched_folders == {"real"}
        refused = f"skipped {root / 'linked' / 'events.jsonl'}: it is a link that leads out of"
        until(  # refused by the scan, as before
            lambda: any(r.getMessage().startswith(refused) for r in caplog.records),
            what="the link said skipped",
        )


class _NullSink(WatchSink):
    def changed(self, path: str) -> None: ...
    def folder_added(self, path: str) -> None: ...
    def folder_removed(self, path: str) -> None: ...
    def root_lost(self) -> None: ...
    def overflowed(self) -> None: ...
    def exhausted(self, error: OSError) -> None: ...
