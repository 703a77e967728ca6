"""FileTailer against real files: partial lines, long lines, truncation, replacement, deletion."""

from __future__ import annotations

import os
import random
import tracemalloc
from pathlib import Path

import pytest

from copilot_otel.sources.tail import (
    DEFAULT_READ_CHUNK_BYTES,
    FINGERPRINT_BYTES,
    EndReason,
    FileIdentity,
    FileTailer,
    Line,
    ResetReason,
    TailBatch,
    TooLong,
)


def write(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


def read_all(tailer: FileTailer, max_bytes: int = 1 << 20) -> list[TailBatch]:
    """Read until EOF (or the end of the file generation); returns every batch."""
    batches = []
    while True:
        batch = tailer.read_lines(max_bytes)
        batches.append(batch)
        if batch.at_eof or batch.end:
            return batches


def datas(batches: list[TailBatch]) -> list[bytes]:
    """The data of every complete line (TooLong markers left out)."""
    return [item.data for b in batches for item in b.lines if isinstance(item, Line)]


def check_contiguous(items: list[Line | TooLong], start: int = 0) -> None:
    for item in items:
        assert item.start == start
        start = item.end


def test_partial_line_then_completion(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    write(path, b'{"a":1}\n{"b":')
    tailer = FileTailer(path)

    batch = tailer.read_lines()
    assert batch.lines == [Line(0, 8, b'{"a":1}')]
    assert batch.offset == 8 and batch.at_eof and batch.reset is None and batch.end is None
    # Polling again without new bytes consumes nothing.
    assert tailer.read_lines().lines == []
    assert tailer.offset == 8

    append(path, b"2}\n")
    batch = tailer.read_lines()
    assert batch.lines == [Line(8, 16, b'{"b":2}')]
    assert batch.offset == 16
    tailer.close()


def test_many_lines_with_small_budget(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    lines = [f'{{"i":{i},"pad":"{"x" * (i % 97)}"}}'.encode() for i in range(50_000)]
    write(path, b"\n".join(lines) + b"\n")
    with FileTailer(path) as tailer:
        batches = read_all(tailer, max_bytes=8_192)
    assert len(batches) > 100
    assert all(not b.at_eof for b in batches[:-1])  # stopped by the budget, not by EOF
    items = [item for b in batches for item in b.lines]
    check_contiguous(items)
    assert datas(batches) == lines
    assert batches[-1].offset == path.stat().st_size


def test_crlf_lines_stay_intact(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    write(path, b'{"a":1}\r\n{"b":2}\r\n\r\n')
    with FileTailer(path) as tailer:
        batch = tailer.read_lines()
    assert batch.lines == [Line(0, 9, b'{"a":1}\r'), Line(9, 18, b'{"b":2}\r'), Line(18, 20, b"\r")]


def test_invalid_utf8_passes_through_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    bad = b'{"a":"\xff\xfe\xc3("}'
    write(path, bad + b"\n\x00\x00\x00\n")
    with FileTailer(path) as tailer:
        assert datas([tailer.read_lines()]) == [bad, b"\x00\x00\x00"]


def test_20mb_line_is_skipped_with_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    huge = 20 * 1024 * 1024
    with open(path, "wb") as f:
        f.write(b'{"good":1}\n')
        block = b"x" * (1024 * 1024)
        for _ in range(huge // len(block)):
            f.write(block)
        f.write(b"\n")
        f.write(b'{"good":2}\n')
    del block
    tailer = FileTailer(path)  # default max_line_bytes = 16 MiB < 20 MiB

    tracemalloc.start()
    try:
        batches = read_all(tailer, max_bytes=1 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    tailer.close()

    items = [item for b in batches for item in b.lines]
    check_contiguous(items)
    assert items == [
        Line(0, 11, b'{"good":1}'),
        TooLong(11, 11 + huge + 1),
        Line(11 + huge + 1, 11 + huge + 12, b'{"good":2}'),
    ]
    assert isinstance(items[1], TooLong) and items[1].length == huge + 1
    assert len(batches) >= 20  # the skip honoured the 1 MiB budget per call instead of one 20 MB gulp
    print(
        f"\n20 MB line: tracemalloc peak {peak / 1024:.0f} KiB (chunk {DEFAULT_READ_CHUNK_BYTES // 1024} KiB)"
    )
    assert peak < 3 * DEFAULT_READ_CHUNK_BYTES


def test_long_line_within_limit_is_returned_whole(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    line = b'{"big":"' + b"y" * (3 * 1024 * 1024) + b'"}'
    write(path, line + b"\n" + b"{}\n")
    with FileTailer(path) as tailer:
        items = [i for b in read_all(tailer) for i in b.lines]
    assert items == [Line(0, len(line) + 1, line), Line(len(line) + 1, len(line) + 4, b"{}")]


def test_long_partial_line_waits_then_completes(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    write(path, b"a" * 300_000)
    tailer = FileTailer(path, max_line_bytes=1_000_000)
    batch = tailer.read_lines()
    assert batch.lines == [] and batch.at_eof and tailer.offset == 0
    append(path, b"b" * 300_000)
    assert tailer.read_lines().lines == []
    append(path, b"\n{}\n")
    batch = tailer.read_lines()
    assert batch.lines == [Line(0, 600_001, b"a" * 300_000 + b"b" * 300_000), Line(600_001, 600_004, b"{}")]
    tailer.close()


def test_long_partial_line_over_the_limit_becomes_too_long(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    write(path, b"{}\n" + b"z" * 200_000)
    tailer = FileTailer(path, max_line_bytes=100_000)
    assert tailer.read_lines().lines == [Line(0, 3, b"{}")]
    append(path, b"z\n{}\n")
    assert tailer.read_lines().lines == [TooLong(3, 200_005), Line(200_005, 200_008, b"{}")]
    tailer.close()


def test_truncation_while_open_restarts_at_zero(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    write(path, b"one\ntwo\nthree\n")
    tailer = FileTailer(path)
    assert datas([tailer.read_lines()]) == [b"one", b"two", b"three"]
    inode = path.stat().st_ino

    with open(path, "r+b") as f:  # copytruncate: same inode, emptied, then written again
        f.truncate(0)
    append(path, b"new\n")
    assert path.stat().st_ino == inode
    batch = tailer.read_lines()
    assert batch.reset is ResetReason.TRUNCATED
    assert batch.lines == [Line(0, 4, b"new")]
    assert batch.identity is not None and batch.identity.fingerprint_len == 4
    # Later reads continue normally.
    append(path, b"more\n")
    batch = tailer.read_lines()
    assert batch.reset is None and batch.lines == [Line(4, 9, b"more")]
    tailer.close()


def test_truncated_and_regrown_while_stopped_is_read_from_zero(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    write(path, b'{"old":1}\n{"old":2}\n')
    tailer = FileTailer(path)
    batch = tailer.read_lines()
    saved_offset, saved_identity = batch.offset, batch.identity
    tailer.close()

    # While "stopped": truncated in place and regrown past the old offset with other content.
    with open(path, "r+b") as f:
        f.truncate(0)
        f.write(b'{"new":1}\n{"new":2}\n{"new":3}\n')
    assert path.stat().st_size >= saved_offset

    resumed = FileTailer(path, offset=saved_offset, identity=saved_identity)
    batch = resumed.read_lines()
    assert batch.reset is ResetReason.CONTENT_CHANGED
    assert datas([batch]) == [b'{"new":1}', b'{"new":2}', b'{"new":3}']
    check_contiguous(batch.lines)
    resumed.close()


def test_resume_from_checkpoint_with_matching_identity(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    head = b'{"header":"' + b"h" * 2000 + b'"}\n'
    write(path, head + b"a\n")
    first = FileTailer(path)
    batch = first.read_lines()
    first.close()
    assert batch.identity is not None and batch.identity.complete
    append(path, b"b\n")

    resumed = FileTailer(path, offset=batch.offset, identity=batch.identity)
    again = resumed.read_lines()
    assert again.reset is None
    assert again.lines == [Line(batch.offset, batch.offset + 2, b"b")]
    resumed.close()


def test_offset_not_on_a_line_boundary_restarts(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    write(path, b"abcdef\nxyz\n")
    with FileTailer(path, offset=3) as tailer:
        batch = tailer.read_lines()
    assert batch.reset is ResetReason.CONTENT_CHANGED
    assert datas([batch]) == [b"abcdef", b"xyz"]


@pytest.mark.parametrize("how", ["rename", "delete_create"])
def test_replacement_drains_old_file_first(tmp_path: Path, how: str) -> None:
    path = tmp_path / "events.jsonl"
    write(path, b"old-1\n")
    tailer = FileTailer(path)
    assert datas([tailer.read_lines()]) == [b"old-1"]
    old_identity = tailer.identity
    append(path, b"old-2\nold-3\nold-partial")  # unread when the name moves on

    if how == "rename":
        tmp = tmp_path / "events.jsonl.new"
        write(tmp, b"new-1\nnew-2\n")
        os.replace(tmp, path)
    else:
        path.unlink()
        write(path, b"new-1\nnew-2\n")

    batch = tailer.read_lines()
    assert batch.end is EndReason.REPLACED
    assert batch.identity == old_identity or (
        batch.identity is not None and batch.identity.inode == old_identity.inode  # type: ignore[union-attr]
    )
    assert batch.lines == [Line(6, 12, b"old-2"), Line(12, 18, b"old-3")]
    assert batch.final_partial == Line(18, 29, b"old-partial")
    assert batch.offset == 18
    assert not tailer.is_open
    assert tailer.stat_changed()  # a new file is waiting

    batch = tailer.read_lines()
    assert batch.reset is ResetReason.REPLACED and batch.end is None
    assert batch.lines == [Line(0, 6, b"new-1"), Line(6, 12, b"new-2")]
    assert batch.identity is not None and batch.identity.inode == path.stat().st_ino
    tailer.close()


def test_replacement_drain_honours_the_budget(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    write(path, b"")
    tailer = FileTailer(path)
    tailer.read_lines()
    append(path, b"".join(b"old-%05d\n" % i for i in range(2_000)))
    tmp = tmp_path / "next"
    write(tmp, b"new\n")
    os.replace(tmp, path)

    batches = read_all(tailer, max_bytes=1_000)
    assert batches[-1].end is EndReason.REPLACED
    assert all(b.end is None for b in batches[:-1])
    assert datas(batches) == [b"old-%05d" % i for i in range(2_000)]
    assert datas([tailer.read_lines()]) == [b"new"]
    tailer.close()


def test_replaced_while_closed_reads_new_file_from_zero(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    write(path, b"old-1\nold-2\n")
    tailer = FileTailer(path)
    tailer.read_lines()
    tailer.close()
    tmp = tmp_path / "next"
    write(tmp, b"new-1\nnew-2\nnew-3\n")
    os.replace(tmp, path)

    assert tailer.stat_changed()
    batch = tailer.read_lines()
    assert batch.reset is ResetReason.REPLACED
    assert datas([batch]) == [b"new-1", b"new-2", b"new-3"]
    tailer.close()


def test_deletion_while_open_drains_then_reports_deleted(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    write(path, b"a\n")
    tailer = FileTailer(path)
    assert datas([tailer.read_lines()]) == [b"a"]
    append(path, b"b\nc\nunfinished")
    path.unlink()

    assert tailer.stat_changed()
    batch = tailer.read_lines()
    assert batch.end is EndReason.DELETED
    assert batch.lines == [Line(2, 4, b"b"), Line(4, 6, b"c")]
    assert batch.final_partial == Line(6, 16, b"unfinished")
    assert tailer.spent and not tailer.is_open
    assert not tailer.stat_changed()
    # A spent tailer keeps answering "deleted" with nothing.
    again = tailer.read_lines()
    assert again.end is EndReason.DELETED and again.lines == []


def test_missing_file_reports_deleted(tmp_path: Path) -> None:
    tailer = FileTailer(tmp_path / "nope" / "events.jsonl")
    batch = tailer.read_lines()
    assert batch.end is EndReason.DELETED and batch.lines == [] and batch.identity is None


def test_short_file_has_growing_fingerprint(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    write(path, b'{"a":1}\n')
    tailer = FileTailer(path)
    batch = tailer.read_lines()
    short_identity = batch.identity
    assert short_identity is not None and short_identity.fingerprint_len == 8 and not short_identity.complete
    tailer.close()

    append(path, b'{"b":"' + b"x" * 3000 + b'"}\n')
    # A tailer restored with the short (8-byte) identity still recognises the grown file.
    resumed = FileTailer(path, offset=batch.offset, identity=short_identity)
    grown = resumed.read_lines()
    assert grown.reset is None
    assert grown.lines[0].start == 8
    assert grown.identity is not None and grown.identity.fingerprint_len == FINGERPRINT_BYTES
    assert grown.identity.inode == short_identity.inode
    assert grown.identity == FileIdentity.of_path(path)
    assert short_identity.matches_path(path) and grown.identity.matches_path(path)
    resumed.close()

    # ...but not once its first bytes changed.
    with open(path, "r+b") as f:
        f.write(b'{"A"')
    assert not short_identity.matches_path(path)
    changed = FileTailer(path, offset=batch.offset, identity=short_identity).read_lines()
    assert changed.reset is ResetReason.CONTENT_CHANGED


def test_empty_file_then_growing(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    write(path, b"")
    tailer = FileTailer(path)
    batch = tailer.read_lines()
    assert batch.lines == [] and batch.identity is not None and batch.identity.fingerprint_len == 0
    append(path, b"x\n")
    batch = tailer.read_lines()
    assert batch.lines == [Line(0, 2, b"x")] and batch.reset is None
    assert batch.identity is not None and batch.identity.fingerprint_len == 2
    tailer.close()


def test_identical_first_bytes_in_two_session_dirs_are_distinct(tmp_path: Path) -> None:
    # Two sessions whose logs start with the same 2 KiB: same fingerprint, different inode. The state
    # is keyed by path, so they are two files; an identity never matches the other path.
    header = b'{"type":"session.start","data":{"pad":"' + b"p" * 2048 + b'"}}\n'
    a, b = tmp_path / "s1" / "events.jsonl", tmp_path / "s2" / "events.jsonl"
    a.parent.mkdir()
    b.parent.mkdir()
    write(a, header + b"a-only\n")
    write(b, header + b"b-only\nb-two\n")
    ta, tb = FileTailer(a), FileTailer(b)
    batch_a, batch_b = ta.read_lines(), tb.read_lines()
    assert datas([batch_a]) == [header[:-1], b"a-only"]
    assert datas([batch_b]) == [header[:-1], b"b-only", b"b-two"]
    assert batch_a.identity is not None and batch_b.identity is not None
    assert batch_a.identity.fingerprint == batch_b.identity.fingerprint
    assert batch_a.identity != batch_b.identity  # inode differs
    assert not batch_a.identity.matches_path(b)
    # A checkpoint of one applied to the other is rejected (inode), so it is read from 0.
    cross = FileTailer(b, offset=batch_a.offset, identity=batch_a.identity).read_lines()
    assert cross.reset is ResetReason.REPLACED and cross.lines[0].start == 0
    ta.close()
    tb.close()


def test_close_then_lazy_reopen_and_stat_changed(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    write(path, b"1\n")
    tailer = FileTailer(path)
    tailer.read_lines()
    tailer.close()
    assert not tailer.is_open
    assert not tailer.stat_changed()
    append(path, b"2\n")
    assert tailer.stat_changed()
    batch = tailer.read_lines()
    assert tailer.is_open
    assert batch.lines == [Line(2, 4, b"2")] and batch.reset is None
    assert not tailer.stat_changed()
    tailer.close()
    tailer.close()  # idempotent


def test_read_unterminated_does_not_consume(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    write(path, b'{"a":1}\n{"last":true}')
    tailer = FileTailer(path, max_line_bytes=1_000)
    tailer.read_lines()
    assert tailer.read_unterminated() == Line(8, 21, b'{"last":true}')
    assert tailer.offset == 8
    append(path, b"\n")
    assert tailer.read_unterminated() is None
    assert tailer.read_lines().lines == [Line(8, 22, b'{"last":true}')]
    assert tailer.read_unterminated() is None
    append(path, b"w" * 5_000)
    assert tailer.read_unterminated() == TooLong(22, 5_022)
    tailer.close()


def test_directory_is_not_a_source(tmp_path: Path) -> None:
    from copilot_otel.common.errors import SourceError

    with pytest.raises(SourceError, match="not a regular file"):
        FileTailer(tmp_path).read_lines()


@pytest.mark.parametrize("seed", range(6))
def test_random_writes_and_reads_match_the_lines(tmp_path: Path, seed: int) -> None:
    """Lines of random length written in random pieces, read with random budgets: exact result."""
    rng = random.Random(seed)
    chunk = rng.choice([7, 64, 4096])
    max_line = rng.choice([10, 300, 5000, 1 << 20])
    lines = [
        bytes(rng.getrandbits(8) for _ in range(rng.choice([0, 1, 5, 50, 400, 3000, 9000]))).replace(
            b"\n", b"n"
        )
        for _ in range(150)
    ]
    blob = b"".join(line + b"\n" for line in lines) + b"trailing-partial"
    path = tmp_path / "events.jsonl"
    write(path, b"")
    tailer = FileTailer(path, max_line_bytes=max_line, read_chunk_bytes=chunk)
    got: list[Line | TooLong] = []
    written = 0
    while written < len(blob) or not got or got[-1].end < len(blob) - len(b"trailing-partial"):
        if written < len(blob):
            step = rng.choice([1, 3, 100, 5000, 20000])
            append(path, blob[written : written + step])
            written = min(len(blob), written + step)
        batch = tailer.read_lines(rng.choice([1, 50, 1000, 1 << 20]))
        assert batch.reset is None and batch.end is None
        got.extend(batch.lines)
        assert batch.offset == (got[-1].end if got else 0) == tailer.offset
    tailer.close()
    check_contiguous(got)
    assert len(got) == len(lines)
    for item, line in zip(got, lines, strict=True):
        if len(line) > max_line:
            assert isinstance(item, TooLong) and item.length == len(line) + 1
        else:
            assert item == Line(item.start, item.start + len(line) + 1, line)
