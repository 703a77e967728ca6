"""StateStore against a real directory: atomic flushes, corruption fallback, the lock, timing."""

from __future__ import annotations

import logging
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from copilot_otel.errors import StateError
from copilot_otel.state import (
    LOCK_FILE,
    PREV_FILE,
    STATE_FILE,
    Checkpoint,
    LoadOutcome,
    StateStore,
)
from copilot_otel.tail import FileIdentity

ROOT = Path(__file__).resolve().parent.parent


def cp(n: int, context: dict[str, Any] | None = None) -> Checkpoint:
    identity = FileIdentity(dev=64769, inode=1000 + n, fingerprint=f"{n:032x}", fingerprint_len=1024)
    return Checkpoint(identity, safe_offset=n * 10, acked_offset=n * 10 + 5, context=context, updated_ns=n)


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
    assert store.dirty
    assert store.flush()
    assert not store.dirty
    store.close()

    again = StateStore(state_dir)
    assert again.load_outcome is LoadOutcome.LOADED
    assert again.all() == {"/s/a/events.jsonl": cp(1, ctx), "/s/b.jsonl": cp(2)}
    assert again.get(Path("/s/a/events.jsonl")) == cp(1, ctx)
    assert len(again) == 2
    again.close()


def test_flush_is_atomic_and_keeps_one_previous_generation(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    store.put("/a", cp(1))
    assert store.flush()
    first = (tmp_path / STATE_FILE).read_bytes()
    store.put("/a", cp(2))
    assert store.flush()
    assert (tmp_path / PREV_FILE).read_bytes() == first
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["user-home", LOCK_FILE, STATE_FILE, PREV_FILE]
    )
    doc = orjson.loads((tmp_path / STATE_FILE).read_bytes())
    assert doc["version"] == 1
    assert doc["checkpoints"]["/a"]["acked_offset"] == 25
    # Nothing changed: no write at all.
    mtime = (tmp_path / STATE_FILE).stat().st_mtime_ns
    assert store.flush()
    assert (tmp_path / STATE_FILE).stat().st_mtime_ns == mtime
    store.close()


def test_stale_tmp_from_a_crash_is_removed(tmp_path: Path) -> None:
    (tmp_path / "state.json.tmp").write_bytes(b'{"version": 1, "checkp')
    StateStore(tmp_path).close()
    assert not (tmp_path / "state.json.tmp").exists()


def test_corrupt_state_falls_back_to_prev(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = StateStore(tmp_path)
    store.put("/a", cp(1))
    assert store.flush()
    store.put("/a", cp(2))
    store.put("/b", cp(3))
    assert store.flush()
    store.close()
    torn = (tmp_path / STATE_FILE).read_bytes()[:40]  # a torn write
    (tmp_path / STATE_FILE).write_bytes(torn)

    with caplog.at_level(logging.WARNING, logger="copilot_otel.state"):
        recovered = StateStore(tmp_path)
    assert recovered.load_outcome is LoadOutcome.FROM_PREVIOUS
    assert recovered.all() == {"/a": cp(1)}
    [kept] = recovered.corrupt_copies
    assert kept.name.startswith("state.json.corrupt-") and kept.read_bytes() == torn
    assert "is corrupt" in caplog.text and "state.json.prev" in caplog.text
    # The recovered state was written back as a good state.json.
    assert orjson.loads((tmp_path / STATE_FILE).read_bytes())["checkpoints"].keys() == {"/a"}
    recovered.close()


@pytest.mark.parametrize(
    "bad", [b"", b"\x00" * 512, b"[1,2]", b'{"version":1,"checkpoints":{"/a":{"safe":1}}}']
)
def test_everything_corrupt_starts_empty_never_at_eof(
    tmp_path: Path, bad: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / STATE_FILE).write_bytes(bad)
    (tmp_path / PREV_FILE).write_bytes(b'{"version":1,"checkpoints":')
    with caplog.at_level(logging.WARNING, logger="copilot_otel.state"):
        store = StateStore(tmp_path)
    assert store.load_outcome is LoadOutcome.EMPTY_AFTER_CORRUPTION
    assert store.all() == {}
    assert len(store.corrupt_copies) == 2
    assert "read again from the start" in caplog.text
    store.close()


def test_missing_state_with_prev_uses_prev(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    store.put("/a", cp(7))
    assert store.flush()
    store.close()
    os.replace(tmp_path / STATE_FILE, tmp_path / PREV_FILE)  # crash between the two renames
    again = StateStore(tmp_path)
    assert again.load_outcome is LoadOutcome.FROM_PREVIOUS
    assert again.all() == {"/a": cp(7)}
    again.close()


def test_state_from_a_newer_version_is_refused(tmp_path: Path) -> None:
    (tmp_path / STATE_FILE).write_bytes(b'{"version": 99, "checkpoints": {}}')
    with pytest.raises(StateError, match="newer copilot-otel"):
        StateStore(tmp_path)
    # The refused store released its lock.
    (tmp_path / STATE_FILE).unlink()
    StateStore(tmp_path).close()


def test_second_store_in_process_is_refused(tmp_path: Path) -> None:
    first = StateStore(tmp_path)
    with pytest.raises(StateError, match=rf"already using {tmp_path} \(pid {os.getpid()}\)"):
        StateStore(tmp_path)
    first.close()
    StateStore(tmp_path).close()  # released by close()


def test_lock_held_by_another_process(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from copilot_otel.state import StateStore\n"
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


def test_failed_flush_keeps_state_and_is_retried(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = StateStore(tmp_path)
    store.put("/a", cp(1))
    assert store.flush()
    good = (tmp_path / STATE_FILE).read_bytes()
    # Make the write fail even for root: the tmp file's name is taken by a directory (EISDIR).
    (tmp_path / "state.json.tmp").mkdir()
    store.put("/a", cp(2))
    with caplog.at_level(logging.WARNING, logger="copilot_otel.state"):
        assert not store.flush()
        assert not store.flush()
    assert store.flush_failures == 2 and store.consecutive_flush_failures == 2
    assert store.last_flush_error is not None and "EISDIR" in store.last_flush_error
    assert caplog.text.count("cannot write the state") == 1  # rate-limited
    assert store.dirty and store.get("/a") == cp(2)  # kept in memory
    assert (tmp_path / STATE_FILE).read_bytes() == good  # last good state intact on disk

    (tmp_path / "state.json.tmp").rmdir()  # "space came back"
    assert store.flush()
    assert not store.dirty and store.consecutive_flush_failures == 0 and store.last_flush_error is None
    store.close()
    assert StateStore(tmp_path).get("/a") == cp(2)


def test_startup_flush_failure_is_a_state_error(tmp_path: Path) -> None:
    (tmp_path / "state.json.tmp").mkdir()
    (tmp_path / "state.json.tmp" / "keep").write_bytes(b"")  # so the stale-tmp cleanup cannot remove it
    with pytest.raises(StateError, match="cannot write the state"):
        StateStore(tmp_path)


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
    size = (tmp_path / STATE_FILE).stat().st_size

    load_ms = []
    for _ in range(5):
        t0 = time.perf_counter()
        loaded = StateStore(tmp_path)  # load + lock + the startup flush
        load_ms.append((time.perf_counter() - t0) * 1e3)
        assert len(loaded) == 5_001
        loaded.close()
    print(
        f"\n5,000 checkpoints ({size / 1e6:.2f} MB): flush median {statistics.median(flush_ms):.1f} ms "
        f"(max {max(flush_ms):.1f}), "
        f"open incl. load + startup flush median {statistics.median(load_ms):.1f} ms"
    )
