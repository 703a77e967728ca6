"""The SQLite store (issue 21) and the state directory's hardening (issue 22): migration from the JSON file the
previous version wrote, SIGKILL at every step of a flush, read-only readers, a deleted directory, permissions,
links planted at our file names.

Real files, real processes, the real ``sqlite3``; nothing of ours is faked. The crash test kills a real child
process: at random moments, and at the Nth SQLite statement and the Nth virtual-machine step of a flush (through
the connection's trace callback and progress handler, the one place a test reaches into the store).
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from copilot_otel._platform import current
from copilot_otel.common.errors import StateError
from copilot_otel.daemon.state import (
    DB_FILE,
    LEGACY_FILE,
    LEGACY_PREV_FILE,
    Checkpoint,
    LoadOutcome,
    StateStore,
    read_checkpoints,
    stored_checkpoints,
)
from copilot_otel.deliver.export import FileTransport, Signal
from copilot_otel.deliver.sink import RotatingFile
from copilot_otel.sources.tail import FileIdentity
from tests.conftest import FIXTURES
from tests.test_state import held

ROOT = Path(__file__).resolve().parent.parent
LEGACY = FIXTURES / "state"
POSIX = current.name in ("linux", "darwin")


def cp(n: int, context: dict[str, object] | None = None) -> Checkpoint:
    identity = FileIdentity(dev=64769, inode=1000 + n, fingerprint=f"{n:032x}", fingerprint_len=1024)
    return Checkpoint(identity, n * 10, n * 10 + 5, context, n, size=n * 10 + 9, mtime_ns=n * 7)


def _legacy_checkpoints(doc: bytes) -> dict[str, Checkpoint]:
    """The checkpoints of a state.json, decoded here with the json module (not with the store's decoder)."""
    out = {}
    for path, e in json.loads(doc)["checkpoints"].items():
        ident = e["identity"]
        identity = FileIdentity(ident["dev"], ident["inode"], ident["fingerprint"], ident["fingerprint_len"])
        out[path] = Checkpoint(
            identity,
            e["safe_offset"],
            e["acked_offset"],
            e["context"],
            e["updated_ns"],
            e.get("size", 0),  # written by the JSON file's last version only
            e.get("mtime_ns", 0),
        )
    return out


# ------------------------------------------------------------------------------------------------ migration
def test_the_previous_versions_state_json_is_imported_once_and_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    shutil.copy(LEGACY / LEGACY_FILE, tmp_path / LEGACY_FILE)
    shutil.copy(LEGACY / LEGACY_PREV_FILE, tmp_path / LEGACY_PREV_FILE)
    original = (LEGACY / LEGACY_FILE).read_bytes()
    want = _legacy_checkpoints(original)
    assert len(want) == 3 and all(c.context for c in want.values())
    with caplog.at_level(logging.INFO, logger="copilot_otel.daemon.state"):
        store = StateStore(tmp_path)
    assert store.load_outcome is LoadOutcome.MIGRATED
    assert held(store) == set(want) and {path: store.get(path) for path in want} == want
    assert [r.getMessage() for r in caplog.records if "imported" in r.getMessage()] == [
        f"imported 3 checkpoints from {tmp_path / LEGACY_FILE} into {tmp_path / DB_FILE} "
        f"({LEGACY_FILE} is kept beside it and no longer read)"
    ]
    store.put(next(iter(want)), cp(1))
    assert store.flush()
    store.close()
    assert (tmp_path / LEGACY_FILE).read_bytes() == original  # untouched
    assert read_checkpoints(tmp_path) == {**want, next(iter(want)): cp(1)}
    # Not imported again: what the database says wins, even over a state.json changed since.
    (tmp_path / LEGACY_FILE).write_bytes(original.replace(b'"acked_offset":', b'"acked_offset":1'))
    again = StateStore(tmp_path)
    assert again.load_outcome is LoadOutcome.LOADED
    assert again.get(next(iter(want))) == cp(1)
    again.close()


def test_a_torn_state_json_imports_its_prev(tmp_path: Path) -> None:
    good = (LEGACY / LEGACY_FILE).read_bytes()
    torn = good[: len(good) // 2]
    (tmp_path / LEGACY_FILE).write_bytes(torn)
    (tmp_path / LEGACY_PREV_FILE).write_bytes(good)
    store = StateStore(tmp_path)
    assert store.load_outcome is LoadOutcome.FROM_PREVIOUS
    want = _legacy_checkpoints(good)
    assert held(store) == set(want) and {path: store.get(path) for path in want} == want
    store.close()
    assert (tmp_path / LEGACY_FILE).read_bytes() == torn and (
        tmp_path / LEGACY_PREV_FILE
    ).read_bytes() == good


def test_both_json_files_corrupt_start_empty_and_keep_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / LEGACY_FILE).write_bytes(b"\0" * 512)
    (tmp_path / LEGACY_PREV_FILE).write_bytes(b'{"version":1,"checkpoints":')
    with caplog.at_level(logging.WARNING, logger="copilot_otel.daemon.state"):
        store = StateStore(tmp_path)
    assert store.load_outcome is LoadOutcome.EMPTY_AFTER_CORRUPTION and held(store) == set()
    assert "--backfill decides what" in caplog.text
    store.close()
    assert (tmp_path / LEGACY_FILE).exists() and (tmp_path / LEGACY_PREV_FILE).exists()
    assert StateStore(tmp_path).load_outcome is LoadOutcome.LOADED  # (and never tried again)


# ------------------------------------------------------------------------------------------------ the API
def test_get_and_settled_see_pending_changes_over_the_rows(tmp_path: Path) -> None:
    """What start-up lists (:meth:`StateStore.settled`) and what it reads back (``get``) are the rows with the
    changes not flushed yet laid over them."""
    identity = FileIdentity(dev=64769, inode=7, fingerprint="0" * 32, fingerprint_len=1024)
    at_end = Checkpoint(
        identity, 50, 50, None, 1, size=50, mtime_ns=70
    )  # taken at its file's end, with a stat
    with StateStore(tmp_path) as store:
        for n in range(1_000):
            store.put(f"/s/{n:05d}", cp(n, {"n": n}))
        store.put("/s/00004", at_end)
        store.put("/s/00005", at_end)
        assert store.flush()
        store.put("/s/00001", cp(9_001, {"n": 9_001}))  # changed
        store.forget("/s/00002")  # deleted
        store.put("/new", at_end)  # added
        store.put("/s/00004", cp(4))  # no longer at its file's end
        assert store.get("/s/00001") == cp(9_001, {"n": 9_001}) and store.get("/s/00002") is None
        assert store.get("/s/00003") == cp(3, {"n": 3})  # from the database
        known, others = store.settled()
        assert known == {"/s/00005": hash((7, 50, 70)), "/new": hash((7, 50, 70))}  # a row, and a pending put
        assert sorted(others) == [f"/s/{n:05d}" for n in range(1_000) if n not in (2, 5)]
        assert len(known) + len(others) == 1_000
        assert store.forget("/new") and not store.forget("/new") and not store.forget("/nowhere")
        assert len(held(store)) == 999
        assert stored_checkpoints(tmp_path) == 1_000  # not flushed yet


def test_identities_beyond_64_bits_round_trip(tmp_path: Path) -> None:
    big = Checkpoint(FileIdentity(2**64 - 1, 2**127 + 5, "f" * 32, 1024), 1, 2)
    with StateStore(tmp_path) as store:
        store.put("/ntfs", big)
        assert store.flush()
    assert read_checkpoints(tmp_path) == {"/ntfs": big}


def test_the_read_only_reader_works_beside_a_writing_store(tmp_path: Path) -> None:
    assert read_checkpoints(tmp_path) == {} and stored_checkpoints(tmp_path) is None  # no database yet
    store = StateStore(tmp_path)
    store.put("/a", cp(1, {"ctx": True}))
    assert store.flush()
    assert read_checkpoints(tmp_path) == {"/a": cp(1, {"ctx": True})}
    store.put("/a", cp(2))
    assert store.flush()  # a reader does not hold the writer up
    assert read_checkpoints(tmp_path) == {"/a": cp(2)} and stored_checkpoints(tmp_path) == 1
    store.close()
    before = (tmp_path / DB_FILE).read_bytes()
    assert read_checkpoints(tmp_path) == {"/a": cp(2)}
    assert (tmp_path / DB_FILE).read_bytes() == before  # read-only
    assert (tmp_path / f"{DB_FILE}-wal").stat().st_size == 0  # (SQLite opens its empty log and index)


def test_two_stores_on_one_directory_the_second_is_refused_untouched(tmp_path: Path) -> None:
    first = StateStore(tmp_path)
    first.put("/a", cp(1))
    assert first.flush()
    with pytest.raises(StateError, match="another copilot-otel daemon is already using") as refused:
        StateStore(tmp_path)
    assert "\n" not in str(refused.value)
    first.put("/a", cp(2))
    assert first.flush()
    first.close()
    assert read_checkpoints(tmp_path) == {"/a": cp(2)}


@pytest.mark.skipif(not POSIX, reason="a directory with an open file cannot be deleted on Windows")
def test_a_deleted_directory_gets_every_row_back(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    state = tmp_path / "state"
    store = StateStore(state)
    for n in range(300):
        store.put(f"/s/{n}", cp(n, {"n": n}))
    assert store.flush()
    store.put("/s/0", cp(1_000))  # pending when the directory goes
    shutil.rmtree(state)
    with caplog.at_level(logging.WARNING, logger="copilot_otel.daemon.state"):
        assert store.check_dir()
    assert not store.check_dir()
    rows = read_checkpoints(state)
    assert len(rows) == 300 and rows["/s/0"] == cp(1_000) and rows["/s/299"] == cp(299, {"n": 299})
    assert "could not be copied" not in caplog.text
    store.close()


# ------------------------------------------------------------------------------------------------ SIGKILL
_ROWS = 40
_FLUSHER = """
import os, signal, sys
from copilot_otel.daemon.state import Checkpoint, StateStore
from copilot_otel.sources.tail import FileIdentity

state_dir, mode, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
store = StateStore(state_dir)
first = store.get("/r/0")
g = first.acked_offset if first is not None else 0
print("start", g, flush=True)
steps = 0

def die(*_args):
    global steps
    steps += 1
    if steps == n:
        os.kill(os.getpid(), signal.SIGKILL)
    return 0

for flushes in range(10**9):
    if flushes == 2 and mode == "trace":
        store._database.connection().set_trace_callback(die)  # the test's reach into the store: die at the Nth statement
    elif flushes == 2 and mode == "progress":
        store._database.connection().set_progress_handler(die, 1)  # ... or at the Nth virtual-machine step
    g += 1
    for r in range(ROWS):
        store.put(f"/r/{r}", Checkpoint(FileIdentity(1, r, "f" * 32, 1024), g, g, {"g": g, "pad": "x" * 300}, g))
    store.forget(f"/moving/{g - 1}")
    store.put(f"/moving/{g}", Checkpoint(FileIdentity(2, g, "e" * 32, 1024), g, g, None, g))
    assert store.flush(), store.last_flush_error
    sys.stdout.write(f"committed {g}\\n")
    sys.stdout.flush()
""".replace("ROWS", str(_ROWS))


def _run_flusher(state: Path, mode: str, n: int, kill_after_s: float | None) -> tuple[int, int]:
    """Start the flusher, let it die (or kill it); returns (generation it started at, last one it reported)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _FLUSHER, str(state), mode, str(n)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    start_line = proc.stdout.readline().split()
    assert start_line[:1] == ["start"], proc.stderr.read() if proc.stderr else ""
    if kill_after_s is not None:
        time.sleep(kill_after_s)  # not a wait: the kill lands at a random moment of the flushes, on purpose
        proc.send_signal(signal.SIGKILL)
    # Read through the same buffered stream as the "start" line: communicate() reads the raw pipe, and would miss
    # what readline() had already buffered (a report written right after "start" was lost under load).
    out = proc.stdout.read()
    err = proc.stderr.read() if proc.stderr else ""
    proc.wait(60)
    assert proc.returncode == -signal.SIGKILL, err
    # (a line the kill cut short is not a report: only whole lines count)
    committed = [
        int(line.split()[1])
        for line in out.splitlines(keepends=True)
        if line.startswith("committed") and line.endswith("\n")
    ]
    return int(start_line[1]), committed[-1] if committed else int(start_line[1])


def _assert_one_generation(state: Path, started: int, reported: int) -> int:
    """Every row holds one committed generation: the last reported, or the one whose commit was not reported."""
    rows = read_checkpoints(state)
    gens = {c.acked_offset for key, c in rows.items() if key.startswith("/r/")}
    assert len(gens) == 1, f"rows of different flushes: {sorted(gens)}"
    (g,) = gens
    assert reported <= g <= reported + 1 and g >= started
    assert all(rows[f"/r/{r}"] == Checkpoint(FileIdentity(1, r, "f" * 32, 1024), g, g, {"g": g, "pad": "x" * 300}, g)
               for r in range(_ROWS))  # fmt: skip
    moving = [key for key in rows if key.startswith("/moving/")]
    assert moving == [f"/moving/{g}"], "one moved row: none lost, none doubled"
    return g


@pytest.mark.skipif(not POSIX, reason="SIGKILL")
def test_sigkill_at_any_step_of_a_flush_leaves_the_old_or_the_new_rows(tmp_path: Path) -> None:
    state = tmp_path / "state"
    StateStore(state).close()
    rng = random.Random(21)  # fixed: the same kill points every run
    g = 0
    # At the Nth statement after two flushes (a flush is BEGIN, 41 upserts, 1 delete, COMMIT: 44 is just before
    # the COMMIT, 45 just after it) and at the Nth virtual-machine step (~2,000 a flush).
    kills = [("trace", n) for n in (1, 2, 21, 42, 43, 44, 45, 88)]
    kills += [("progress", rng.randrange(1, 4_000)) for _ in range(8)]
    for mode, n in kills:
        started, reported = _run_flusher(state, mode, n, None)
        g = _assert_one_generation(state, started, reported)
    # At random moments: mid-write and mid-fsync included.
    for _ in range(10):
        started, reported = _run_flusher(state, "none", 0, rng.uniform(0.05, 0.6))
        g = _assert_one_generation(state, started, reported)
    assert g > 2 * 26  # every run committed flushes before it died
    with StateStore(state) as store:
        assert store.load_outcome is LoadOutcome.LOADED and store.corrupt_copies == []


# ------------------------------------------------------------------------------------------------ hardening
@pytest.mark.skipif(not POSIX, reason="POSIX modes (Windows directories are guarded by ACLs)")
def test_a_state_dir_other_users_can_write_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o777)
    with pytest.raises(
        StateError, match=r"writable by other users \(mode 0777\): run 'chmod go-w"
    ) as refused:
        StateStore(state)
    assert "\n" not in str(refused.value) and not (state / DB_FILE).exists()
    state.chmod(0o755)  # readable by others is the user's choice; writable is not
    StateStore(state).close()


@pytest.mark.skipif(not POSIX or os.geteuid() != 0, reason="giving a directory to another user takes root")
def test_a_state_dir_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    os.chown(state, 4242, 4242)
    with pytest.raises(StateError, match="is owned by uid 4242, not by you"):
        StateStore(state)
    assert not (state / "lock").exists()


@pytest.mark.skipif(not POSIX, reason="POSIX modes")
def test_files_are_0600_under_umask_000(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        state = tmp_path / "state"
        with StateStore(state) as store:
            store.put("/a", cp(1))
            assert store.flush() and store.write_status({"pid": 1})
            RotatingFile(state / "otlp.jsonl").append(b"{}\n")
            modes = {p.name: p.stat().st_mode & 0o777 for p in state.iterdir()}
    finally:
        os.umask(old)
    assert modes.pop("user-home", None) is None
    assert set(modes) >= {"lock", DB_FILE, f"{DB_FILE}-wal", "status.json", "otlp.jsonl", ".otlp.jsonl.lock"}
    assert modes == dict.fromkeys(modes, 0o600)
    assert state.stat().st_mode & 0o777 == 0o700


def _outside(tmp_path: Path) -> Path:
    target = tmp_path / "outside" / "precious.txt"
    target.parent.mkdir()
    target.write_bytes(b"the user's own file\n")
    return target


def test_a_link_at_status_json_tmp_is_removed_not_written_through(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state, target = tmp_path / "state", _outside(tmp_path)
    with StateStore(state) as store:
        (state / "status.json.tmp").symlink_to(target)
        with caplog.at_level(logging.WARNING, logger="copilot_otel.daemon.state"):
            assert store.write_status({"pid": 7})
    assert target.read_bytes() == b"the user's own file\n"
    assert StateStore.read_status(state) == {"pid": 7}
    [line] = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert line.startswith(f"removed the symbolic link {state / 'status.json.tmp'} (to {target})")


def test_a_link_at_otlp_jsonl_is_refused_in_one_line(tmp_path: Path) -> None:
    state, target = tmp_path / "state", _outside(tmp_path)
    state.mkdir()
    (state / "otlp.jsonl").symlink_to(target)
    result = FileTransport(state / "otlp.jsonl").send(Signal.TRACES, b"", 1.0)
    assert not result.ok and result.message is not None
    assert result.message == (
        f"cannot write {state / 'otlp.jsonl'}: is a symbolic link; copilot-otel never writes through links in "
        "its state directory (remove it)"
    )
    assert target.read_bytes() == b"the user's own file\n"


@pytest.mark.parametrize("name", [DB_FILE, f"{DB_FILE}-wal", f"{DB_FILE}-shm"])
def test_a_link_at_the_database_is_refused_in_one_line(tmp_path: Path, name: str) -> None:
    state, target = tmp_path / "state", _outside(tmp_path)
    state.mkdir()
    (state / name).symlink_to(target)
    with pytest.raises(StateError, match="symbolic link; copilot-otel never writes through links") as refused:
        StateStore(state)
    assert "\n" not in str(refused.value)
    assert target.read_bytes() == b"the user's own file\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["precious.txt"]
    StateStore(tmp_path / "elsewhere").close()  # (the lock was released: nothing else is held)


def test_a_link_at_the_lock_is_not_followed(tmp_path: Path) -> None:
    state, target = tmp_path / "state", _outside(tmp_path)
    state.mkdir()
    (state / "lock").symlink_to(target)
    with pytest.raises(StateError, match="cannot use state directory"):
        StateStore(state)
    assert target.read_bytes() == b"the user's own file\n"


def test_a_link_at_a_dead_letter_file_is_refused(tmp_path: Path) -> None:
    from copilot_otel.deliver.deadletter import DeadLetters

    state, target = tmp_path / "state", _outside(tmp_path)
    state.mkdir()
    letters = DeadLetters(state / "dead-letter.jsonl")
    letters.path.symlink_to(target)
    with pytest.raises(OSError, match="symbolic link"):  # (the daemon logs it and counts the record as lost)
        letters.append("traces", "HTTP 400", {"name": "x"}, None)
    assert target.read_bytes() == b"the user's own file\n"


# ------------------------------------------------------------------------------------------------ doctor
def test_doctor_reads_the_checkpoints_read_only_and_names_an_unsafe_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from copilot_otel.cli import main

    state = tmp_path / "state"
    with StateStore(state) as store:  # (open: as while a daemon runs)
        store.put("/a", cp(1))
        store.put("/b", cp(2))
        assert store.flush()
        main(["doctor", "--state-dir", str(state), "--timeout", "1"])
        out = " ".join(capsys.readouterr().out.split())
        assert f"ok state dir: {state} is writable (2 checkpoints)" in out
        store.put("/c", cp(3))
        assert store.flush()  # doctor held nothing
    if POSIX:
        state.chmod(0o777)
        main(["doctor", "--state-dir", str(state), "--timeout", "1"])
        out = " ".join(capsys.readouterr().out.split())
        assert f"FAIL state dir: {state} is writable by other users (mode 0777)" in out
