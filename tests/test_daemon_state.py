"""The daemon's followed files, checkpoints and state store across restarts and damage (issue 32, items 4, 7, 8,
12): real logs, a real ``copilot-otel run`` process, a real OTLP receiver, real files under the state dir.

* An old log whose last prompt never ended (the public Copilot CLI 0.0.354 logs: their last line has no newline,
  so nothing ever ends the prompt) is closed once, under replay's ids, however often the daemon restarts.
* A log replaced under its name (written to a temporary and renamed over it) is read at once: a new inode at a
  known path is a new file, whether or not it is larger than the old one.
* A damaged ``state.db`` (an offset out of range, a damaged page) is set aside: the daemon starts empty with one
  line, never a traceback or a failing exit at every start.
* ``status`` says when the last state write failed, and why.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import sqlite3
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from copilot_otel.cli import main
from copilot_otel.daemon.followed import FollowedFile
from copilot_otel.daemon.state import DB_FILE, read_checkpoints
from copilot_otel.deliver.outbox import Marker
from copilot_otel.model.records import SpanRecord
from copilot_otel.sources.sessions import SessionFile
from copilot_otel.sources.tail import FileTailer, Line
from tests.conftest import CLI_GENERATED, FIXTURES
from tests.daemon_process import assert_delivered_like_replay, expected_spans
from tests.otlp_receiver import OtlpReceiver
from tests.test_daemon import _status, env
from tests.test_followed import ListOutbox, _key, _replayed, _shared

__all__ = ["env"]  # the fixture, shared with test_daemon.py

PUBLIC = FIXTURES / "public"
# The two public 0.0.354 logs whose last line (the answer to the last prompt) has no newline.
UNFINISHED = ("simple-qa", "two-questions")
# The logs' own time (2025-11-07): what their mtime would say on the machine that wrote them.
LOGS_WRITTEN_AT = 1_762_480_000


def _ids(span: dict[str, Any]) -> tuple[str, str, str | None, str]:
    return (span["trace_id"], span["span_id"], span["parent_span_id"], span["name"])


def _has(spans: set[tuple[str, str, str | None, str]]) -> Callable[[OtlpReceiver], bool]:
    """The receiver got these spans (by their ids and names)."""
    return lambda r: {_ids(s) for s in r.spans()} >= spans


def _public(name: str) -> Path:
    return PUBLIC / f"microsoft__vscode-copilot-chat__0.0.354-{name}.jsonl"


def _sentinel(root: Path, number: int) -> Path:
    """A 0.0.354 log of its own session (the parallel-tools capture under another session id), whose last prompt
    also never ends: its idle closing shows that the daemon's owner and idle checks have run."""
    text = _public("parallel-tools").read_text()
    session = "c8963ad7-e7b1-414c-a9fc-930905e76708"
    assert session in text
    new = f"{session[:-2]}{number:02d}"
    path = root / f"{new}.jsonl"
    path.write_text(text.replace(session, new))
    return path


def test_old_unfinished_prompts_are_closed_once_under_replays_ids_across_restarts(
    env: dict[str, Any], receiver: OtlpReceiver
) -> None:
    """Issue 32, item 4: every start of run used to fold the last line again over a context that already held it
    (a new trace id each time, from the repeat counter of the prompt's first event) and close that prompt again:
    6 spans and 2 log events more per start. The folded last line and the closing are part of the checkpoint."""
    old = []
    for name in UNFINISHED:
        path = env["root"] / f"{name}.jsonl"
        shutil.copy(_public(name), path)
        assert not path.read_bytes().endswith(b"\n")
        os.utime(path, (LOGS_WRITTEN_AT, LOGS_WRITTEN_AT))
        old.append(path)
    sentinels = []
    for start in range(3):
        d = env["daemon"]("--idle-timeout", "1")
        sentinel = _sentinel(env["root"], start)
        sentinels.append(sentinel)
        closed = {_ids(s) for s in expected_spans([sentinel], env["tmp"] / f"sentinel-{start}").values()}
        receiver.wait_for(_has(closed), 30)
        assert d.terminate() == 0
        assert "Traceback" not in d.output()
    want = {_ids(s) for s in expected_spans([*old, *sentinels], env["tmp"] / "replay").values()}
    got = Counter(_ids(s) for s in receiver.spans())
    assert set(got) == want, "the spans replay makes of the logs, under its ids"
    assert [span for span, n in got.items() if n > 1] == [], "each span exported once over three starts"


def test_a_log_replaced_under_its_name_is_read_at_once(env: dict[str, Any], receiver: OtlpReceiver) -> None:
    """Issue 32, item 7: a log written whole to a temporary and renamed over the one followed (audit case S3) was
    drained to its end and then left unread until it grew again or the daemon restarted, since the stat the
    daemon compares had become the new file's. A new inode at a known path is a new file: read it now. The
    replacement is smaller than the log it replaces (another session), so no growth can hide the fault."""
    first, second = (CLI_GENERATED / name / "events.jsonl" for name in ("subagent", "plain-question"))
    assert second.stat().st_size < first.stat().st_size
    log = env["root"] / "replaced" / "events.jsonl"
    log.parent.mkdir()
    shutil.copy(first, log)
    d = env["daemon"]()
    assert_delivered_like_replay(receiver, [first], env["tmp"] / "first")
    temporary = log.with_name("events.jsonl.tmp")
    shutil.copy(second, temporary)
    os.replace(temporary, log)
    assert_delivered_like_replay(receiver, [first, second], env["tmp"] / "both")
    assert d.terminate() == 0
    assert "Traceback" not in d.output()


def _offset(value: object) -> Callable[[Path], None]:
    def damage(db: Path) -> None:
        with contextlib.closing(sqlite3.connect(db)) as conn, conn:
            conn.execute("UPDATE checkpoints SET safe_offset = ?", (value,))

    return damage


def _damaged_page(db: Path) -> None:
    """The checkpoints table's page overwritten (what a bad sector or a torn copy leaves)."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'checkpoints'").fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    with open(db, "r+b") as fh:
        fh.seek((page - 1) * size)
        fh.write(b"\xa5" * size)


@pytest.mark.parametrize(
    "damage",
    [_offset(-5), _offset("12abc"), _offset(1.5), _damaged_page],
    ids=["negative-offset", "text-offset", "fractional-offset", "damaged-page"],
)
def test_a_damaged_state_db_is_set_aside_and_the_daemon_starts_empty(
    env: dict[str, Any], receiver: OtlpReceiver, damage: Callable[[Path], None]
) -> None:
    """Issue 32, item 8: a negative or non-integer offset in state.db stopped every start with a traceback
    (``ValueError: Expected offset to be >= 0, got -5``), a damaged page with exit 4 and no hint. Both are
    corruption, as the other kinds of damage are: the file is set aside with one line, the daemon starts empty
    (every log read again from its start, under the same ids), and the next start finds a sound state."""
    logs = []
    for name in ("multi-tool", "failing-tool"):
        shutil.copytree(CLI_GENERATED / name, env["root"] / name)
        logs.append(env["root"] / name / "events.jsonl")
    d = env["daemon"]()
    assert_delivered_like_replay(receiver, logs, env["tmp"] / "first")
    d.until("both checkpoints", lambda: len(read_checkpoints(env["state"])) == 2)
    assert d.terminate() == 0
    damage(env["state"] / DB_FILE)
    receiver.clear()
    d2 = env["daemon"]()
    assert_delivered_like_replay(receiver, logs, env["tmp"] / "again")
    d2.until("both checkpoints again", lambda: len(read_checkpoints(env["state"])) == 2)
    assert d2.terminate() == 0
    said = d2.output()
    assert "Traceback" not in said
    [line] = [line for line in said.splitlines() if "is corrupt" in line]
    assert "kept as" in line and "Starting empty" in line
    kept = [p for p in env["state"].glob(f"{DB_FILE}.corrupt-*") if not p.name.endswith(("-wal", "-shm"))]
    assert len(kept) == 1
    d3 = env["daemon"]()
    assert d3.terminate() == 0
    assert d3.output().count("is corrupt") == 1, "the next start finds a sound state"


def _status_text(state: Path, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert main(["status", "--state-dir", str(state)]) == 0
    return " ".join(capsys.readouterr().out.split())


def test_status_says_when_the_last_state_write_failed_and_why(
    env: dict[str, Any],
    receiver: OtlpReceiver,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 32, item 12: while another program holds state.db's write lock the checkpoints cannot be written
    (held in memory, retried every second); ``status`` said nothing of it. Now it says that the writes fail and
    why, and once they succeed again, when the last one failed; ``--json`` has the same keys."""
    monkeypatch.setenv("COLUMNS", "400")  # one table row a line
    first = CLI_GENERATED / "multi-tool" / "events.jsonl"
    shutil.copytree(first.parent, env["root"] / "one")
    d = env["daemon"]()
    assert_delivered_like_replay(receiver, [first], env["tmp"] / "one")
    d.until("the first checkpoint", lambda: len(read_checkpoints(env["state"])) == 1)
    assert "state writes" not in _status_text(env["state"], capsys)
    with contextlib.closing(sqlite3.connect(env["state"] / DB_FILE, isolation_level=None)) as other:
        # Another program's write transaction: the daemon's writes get SQLITE_BUSY.
        other.execute("BEGIN IMMEDIATE")
        second = CLI_GENERATED / "failing-tool" / "events.jsonl"
        shutil.copytree(second.parent, env["root"] / "two")
        assert_delivered_like_replay(receiver, [first, second], env["tmp"] / "two")
        d.until(
            "a failed write in status.json",
            lambda: _status(env["state"]).get("state_writes_failing", 0) > 0,
        )
        said = _status_text(env["state"], capsys)
        assert "state writes failing" in said and "database is locked" in said, said
        other.execute("ROLLBACK")
    d.until("the second checkpoint, once the lock is gone", lambda: len(read_checkpoints(env["state"])) == 2)
    d.until(
        "writes succeeding in status.json", lambda: _status(env["state"]).get("state_writes_failing") == 0
    )
    said = _status_text(env["state"], capsys)
    assert "state writes ok; the last failure" in said and "database is locked" in said, said
    capsys.readouterr()
    assert main(["status", "--state-dir", str(env["state"]), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert "database is locked" in doc["state_write_error"] and doc["state_writes_failing"] == 0
    assert doc["state_write_failed_at"] <= time.time() and doc["state_flush_failures"] >= 1
    assert d.terminate() == 0


# -- the same in-process: a followed file restarted from each acknowledged marker (tests/test_followed.py's way)


def _restarted(path: Path, marker: Marker, outbox: ListOutbox) -> FollowedFile:
    return FollowedFile(
        SessionFile.from_path(path),
        FileTailer(path, offset=marker.safe_offset, identity=marker.identity),
        _shared(outbox),
        context=marker.context,
        suppress_until=marker.offset,
        live=True,
    )


def _housekeep(f: FollowedFile) -> None:
    """What the owner and idle checks do to a quiet log whose CLI is gone (legacy logs name no process)."""
    if f.tail_bytes and f.fed_unterminated is None:  # a last line without its newline, not folded yet
        f.fold_unterminated()
    if f.has_open_prompt:
        f.close_prompt("idle_timeout")


@pytest.mark.parametrize("name", UNFINISHED)
def test_a_folded_unterminated_line_is_put_out_once_from_every_acknowledged_point(
    tmp_path: Path, name: str
) -> None:
    """Restarted from each marker (the last line folded or not yet, its prompt open or closed), the spans put out
    after the restart and those acknowledged before are each of the log's spans once."""
    path = tmp_path / "session-state" / f"{name}.jsonl"
    path.parent.mkdir()
    shutil.copy(_public(name), path)
    outbox = ListOutbox()
    f = FollowedFile(SessionFile.from_path(path), FileTailer(path), _shared(outbox), live=True)
    f.read(1 << 20)
    _housekeep(f)
    expected = sorted(map(_key, outbox.spans()))
    assert {(k[0], k[1], k[2]) for k in expected} == {
        (s.trace_id, s.span_id, s.name) for s in _replayed(path)
    }, "replay's spans"
    for cut in range(1, len(outbox.batches) + 1):
        delivered = outbox.batches[:cut]
        again = ListOutbox()
        restarted = _restarted(path, delivered[-1][1], again)
        restarted.read(1 << 20)
        _housekeep(restarted)
        before = [_key(r) for records, _ in delivered for r in records if isinstance(r, SpanRecord)]
        after = [_key(s) for s in again.spans()]
        assert sorted(before + after) == expected, f"restart at batch {cut} of {len(outbox.batches)}"


@pytest.mark.parametrize("closed", [True, False], ids=["prompt-closed", "prompt-open"])
def test_a_newline_after_a_restart_does_not_put_the_last_line_out_twice(tmp_path: Path, closed: bool) -> None:
    """The first answer folded without its newline, checkpointed with its prompt closed (idle), or still open (its
    CLI gone, the prompt not idle yet); after a restart the CLI is resumed and writes on, the newline first. Closed,
    the line is not folded again (and needs no owner or idle check meanwhile); open, it is folded again to rebuild
    the prompt, but what it put out was delivered before."""
    lines = _public("two-questions").read_bytes().split(b"\n")
    path = tmp_path / "session-state" / "two-questions.jsonl"
    path.parent.mkdir()
    path.write_bytes(b"\n".join(lines[:5]))  # up to the first answer, which has no newline yet
    outbox = ListOutbox()
    f = FollowedFile(SessionFile.from_path(path), FileTailer(path), _shared(outbox), live=True)
    f.read(1 << 20)
    f.fold_unterminated()
    if closed:
        f.close_prompt("idle_timeout")
    again = ListOutbox()
    restarted = _restarted(path, outbox.batches[-1][1], again)
    restarted.read(1 << 20)
    assert restarted.needs_attention is not closed
    with path.open("ab") as out:
        out.write(b"\n" + b"\n".join(lines[5:]))
    restarted.read(1 << 20)
    _housekeep(restarted)
    got = Counter((s.trace_id, s.span_id, s.name) for s in [*outbox.spans(), *again.spans()])
    assert set(got) == {(s.trace_id, s.span_id, s.name) for s in _replayed(path)}
    assert [span for span, n in got.items() if n > 1] == []


def test_a_log_rewritten_whole_under_a_new_inode_is_read_on_from_where_it_was(tmp_path: Path) -> None:
    """A writer that rewrites its log whole (to a temporary, renamed over it) leaves the same content under a new
    inode: the tailer drains the old file, then reads the new one on from its offset, nothing ended or reset."""
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"one\ntwo\npart")
    tailer = FileTailer(path)
    assert [item.data for item in tailer.read_lines().lines if isinstance(item, Line)] == [b"one", b"two"]
    temporary = tmp_path / "events.jsonl.tmp"
    temporary.write_bytes(b"one\ntwo\npartial\nthree\n")
    os.replace(temporary, path)
    drained = tailer.read_lines()
    assert (drained.lines, drained.end, drained.reset, drained.at_eof) == ([], None, None, False)
    batch = tailer.read_lines()
    assert batch.lines == [Line(8, 16, b"partial"), Line(16, 22, b"three")] and batch.reset is None
    assert batch.identity is not None and batch.identity.inode == path.stat().st_ino
    tailer.close()


def _read_to(state: Path, log: Path, lines: list[bytes]) -> bool:
    """The daemon's checkpoint of ``log`` is at the end of these lines (read, delivered, flushed)."""
    checkpoint = read_checkpoints(state).get(str(log))
    return checkpoint is not None and checkpoint.acked_offset == len(b"".join(lines))


def test_a_log_rewritten_whole_while_its_prompts_run_is_delivered_like_replay(
    env: dict[str, Any], receiver: OtlpReceiver
) -> None:
    """Audit case S3 as a writer that rewrites its log whole at every step (to a temporary, renamed over it),
    prompts open at each rewrite: every span once, as replay makes it. Read as a new file each time, the open
    prompt was closed at every rewrite, its spans sent again with other content."""
    source = CLI_GENERATED / "subagent" / "events.jsonl"
    lines = source.read_bytes().splitlines(keepends=True)
    log = env["root"] / "rewritten" / "events.jsonl"
    log.parent.mkdir()
    log.write_bytes(b"".join(lines[:8]))
    d = env["daemon"]()
    d.until("the log read", functools.partial(_read_to, env["state"], log, lines[:8]))
    temporary = log.with_name("events.jsonl.tmp")
    for end in range(15, len(lines) + 7, 7):
        temporary.write_bytes(b"".join(lines[:end]))
        os.replace(temporary, log)
        d.until("the rewrite read", functools.partial(_read_to, env["state"], log, lines[:end]))
    assert_delivered_like_replay(receiver, [source], env["tmp"])
    assert len(receiver.spans()) == len(expected_spans([source], env["tmp"] / "again")), "each span once"
    assert d.terminate() == 0
