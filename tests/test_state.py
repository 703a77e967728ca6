"""StateStore against a real directory: changed rows only, corruption set aside, the lock, a locked database."""

from __future__ import annotations

import logging
import os
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from copilot_otel.common.errors import StateError
from copilot_otel.daemon.state import (
    DB_FILE,
    LEGACY_FILE,
    Checkpoint,
    LoadOutcome,
    StateStore,
    read_checkpoints,
)
from copilot_otel.sources.tail import FileIdentity

ROOT = Path(__file__).resolve().parent.parent


def cp(n: int, context: dict[str, Any] | None = None) -> Checkpoint:
    identity = FileIdentity(dev=64769, inode=1000 + n, fingerprint=f"{n:032x}", fingerprint_len=1024)
    return Checkpoint(identity, safe_offset=n * 10, acked_offset=n * 10 + 5, context=context, updated_ns=n)


def held(store: StateStore) -> set[str]:
    """Every path ``store`` holds a checkpoint for, as start-up lists them (:meth:`StateStore.settled`: the rows
    with the changes not flushed yet laid over them)."""
    known, others = store.settled()
    return {*known, *others}


def test_round_trip(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    store = StateStore(state_dir)
    assert store.load_outcome is LoadOutcome.FRESH
    assert store.get("/x") is None
    ctx = {"model": "gpt-5", "open_prompts": [{"id": "u1", "offset": 12}], "nested": {"ok": True}}
    store.put("/s/a/events.jsonl", cp(1, ctx))
    store.put(Path("/s/b.jsonl"), cp(2))
    store.put("/s/c/events.jsonl", cp(3))
    assert store.forget("/s/c/events.jsonl") and not store.forget("/s/c/events.jsonl")
    assert store.flush()
    store.close()

    again = StateStore(state_dir)
    assert again.load_outcome is LoadOutcome.LOADED
    assert held(again) == {"/s/a/events.jsonl", "/s/b.jsonl"}
    assert again.get(Path("/s/a/events.jsonl")) == cp(1, ctx) and again.get("/s/b.jsonl") == cp(2)
    again.close()


def test_flush_writes_only_the_changed_rows(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    database = (
        store._database.connection()
    )  # the rows changed, as SQLite counts them on the store's connection
    opened = database.total_changes
    for n in range(1_000):
        store.put(f"/s/{n}", cp(n))
    assert store.flush()
    written = database.total_changes
    assert written - opened == 1_000
    store.put("/s/7", cp(70))
    store.forget("/s/8")
    assert store.flush()
    assert database.total_changes - written == 2  # one upsert, one delete: not 1,000 rows again
    # Nothing changed: no transaction at all.
    assert store.flush() and database.total_changes - written == 2
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(DB_FILE)) == [
        "lock",
        "user-home",
    ]
    store.close()
    again = StateStore(tmp_path)
    assert len(held(again)) == 999 and again.get("/s/7") == cp(70) and again.get("/s/8") is None
    again.close()


def test_stale_status_tmp_from_a_crash_is_replaced(tmp_path: Path) -> None:
    (tmp_path / "status.json.tmp").write_bytes(b'{"pid": 1, "fil')
    with StateStore(tmp_path) as store:
        assert store.write_status({"pid": 2})
    assert not (tmp_path / "status.json.tmp").exists()
    assert StateStore.read_status(tmp_path) == {"pid": 2}


def test_a_db_that_is_not_a_database_is_set_aside(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = StateStore(tmp_path)
    store.put("/a", cp(1))
    assert store.flush()
    store.close()
    garbage = b"this is not a database, it only has its name" * 100
    (tmp_path / DB_FILE).write_bytes(garbage)
    with caplog.at_level(logging.WARNING, logger="copilot_otel.daemon.state"):
        recovered = StateStore(tmp_path)
    assert recovered.load_outcome is LoadOutcome.EMPTY_AFTER_CORRUPTION
    assert held(recovered) == set()
    [kept] = recovered.corrupt_copies
    assert kept.name.startswith("state.db.corrupt-") and kept.read_bytes() == garbage
    assert "is corrupt" in caplog.text and "--backfill decides what" in caplog.text
    # A good database again, used from now on.
    recovered.put("/b", cp(2))
    assert recovered.flush()
    recovered.close()
    again = StateStore(tmp_path)
    assert again.load_outcome is LoadOutcome.LOADED and held(again) == {"/b"} and again.get("/b") == cp(2)
    again.close()


def test_a_db_of_another_schema_is_set_aside(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / DB_FILE)
    conn.execute("CREATE TABLE checkpoints (path TEXT, offset INTEGER)")
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()
    store = StateStore(tmp_path)
    assert store.load_outcome is LoadOutcome.EMPTY_AFTER_CORRUPTION
    assert len(store.corrupt_copies) == 1 and held(store) == set()
    store.close()


def test_state_from_a_newer_version_is_refused(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / DB_FILE)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    with pytest.raises(StateError, match="newer copilot-otel") as refused:
        StateStore(tmp_path)
    assert "\n" not in str(refused.value)
    # The refused store released its lock.
    (tmp_path / DB_FILE).unlink()
    StateStore(tmp_path).close()


def test_json_state_from_a_newer_version_is_refused(tmp_path: Path) -> None:
    (tmp_path / LEGACY_FILE).write_bytes(b'{"version": 99, "checkpoints": {}}')
    with pytest.raises(StateError, match="newer copilot-otel"):
        StateStore(tmp_path)


def test_second_store_in_process_is_refused(tmp_path: Path) -> None:
    first = StateStore(tmp_path)
    with pytest.raises(StateError, match=rf"already using {tmp_path} \(pid {os.getpid()}\)"):
        StateStore(tmp_path)
    first.close()
    StateStore(tmp_path).close()  # released by close()


def test_lock_held_by_another_process(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from copilot_otel.daemon.state import StateStore\n"
        "store = StateStore(sys.argv[1])\n"
        "print('ready', flush=True)\n"
        "sys.stdin.read()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        with pytest.raises(
            StateError, match=rf"another copilot-otel daemon is already using .* \(pid {proc.pid}\)"
        ):
            StateStore(tmp_path)
    finally:
        proc.communicate("", timeout=10)
    # The lock dies with the process.
    StateStore(tmp_path).close()


def test_state_path_that_is_a_file_is_refused(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "state"
    not_a_dir.write_bytes(b"")
    with pytest.raises(StateError, match="cannot use state directory"):
        StateStore(not_a_dir)
    with pytest.raises(StateError, match="cannot use state directory"):
        StateStore(not_a_dir / "sub")


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_unwritable_state_dir_is_refused(tmp_path: Path) -> None:
    locked = tmp_path / "ro"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(StateError, match="cannot use state directory"):
            StateStore(locked)
    finally:
        locked.chmod(0o700)


def _writer_holding(db: Path) -> sqlite3.Connection:
    """Another program's connection in the middle of a write transaction on ``db``."""
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    return other


def test_failed_flush_keeps_state_and_is_retried(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = StateStore(tmp_path)
    store.put("/a", cp(1))
    assert store.flush()
    other = _writer_holding(tmp_path / DB_FILE)  # the database is locked: SQLITE_BUSY
    store.put("/a", cp(2))
    with caplog.at_level(logging.WARNING, logger="copilot_otel.daemon.state"):
        assert not store.flush()
        assert not store.flush()
    assert store.flush_failures == 2 and store.consecutive_flush_failures == 2
    assert store.last_flush_error is not None and "locked" in store.last_flush_error
    assert caplog.text.count("cannot write the state") == 1  # rate-limited
    assert store.get("/a") == cp(2)  # kept in memory
    assert read_checkpoints(tmp_path) == {"/a": cp(1)}  # last good state intact on disk

    other.execute("ROLLBACK")  # the other program is done
    other.close()
    assert store.flush()
    assert read_checkpoints(tmp_path) == {"/a": cp(2)}
    assert store.consecutive_flush_failures == 0 and store.last_flush_error is None
    store.close()
    assert StateStore(tmp_path).get("/a") == cp(2)


def test_startup_flush_failure_is_a_state_error(tmp_path: Path) -> None:
    StateStore(tmp_path).close()
    other = _writer_holding(tmp_path / DB_FILE)
    try:
        with pytest.raises(StateError, match="cannot write the state"):
            StateStore(tmp_path)
    finally:
        other.close()


def test_unserialisable_context_fails_at_put(tmp_path: Path) -> None:
    with StateStore(tmp_path) as store:
        with pytest.raises(TypeError):
            store.put("/a", cp(1, {"bad": object()}))
        assert store.get("/a") is None


def test_status_round_trip(tmp_path: Path) -> None:
    assert StateStore.read_status(tmp_path) is None
    with StateStore(tmp_path) as store:
        assert store.write_status({"pid": os.getpid(), "files": 3, "backlog": 0})
    assert StateStore.read_status(tmp_path) == {"pid": os.getpid(), "files": 3, "backlog": 0}
    (tmp_path / "status.json").write_bytes(b"{nope")
    with pytest.raises(StateError, match="not valid JSON"):
        StateStore.read_status(tmp_path)


def test_5000_checkpoints_load_and_flush_timing(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    ctx = {"session_id": "0" * 36, "model": "claude-sonnet-4.5", "cwd": "/home/user/project", "open": [1, 2]}
    for n in range(5_000):
        store.put(
            f"/home/user/.copilot/session-state/{n:08d}-aaaa-bbbb-cccc-dddddddddddd/events.jsonl", cp(n, ctx)
        )
    flush_ms = []
    for i in range(15):
        store.put("/touch", cp(i))
        t0 = time.perf_counter()
        assert store.flush()
        flush_ms.append((time.perf_counter() - t0) * 1e3)
    store.close()
    size = (tmp_path / DB_FILE).stat().st_size

    load_ms = []
    for _ in range(5):
        t0 = time.perf_counter()
        loaded = StateStore(tmp_path)  # load + lock + the startup flush
        load_ms.append((time.perf_counter() - t0) * 1e3)
        assert len(held(loaded)) == 5_001
        loaded.close()
    print(
        f"\n5,000 checkpoints ({size / 1e6:.2f} MB): flush median {statistics.median(flush_ms):.1f} ms "
        f"(max {max(flush_ms):.1f}), "
        f"open incl. load + startup flush median {statistics.median(load_ms):.1f} ms"
    )
