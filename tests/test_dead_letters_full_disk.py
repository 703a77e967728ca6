"""A rejected record whose dead letter cannot be written is never passed by a checkpoint: the daemon holds it (one
ERROR line, rate-limited) until the write succeeds, ``replay`` fails and says why; neither counts it as kept.

The full disk is a real one: the state directory is a small tmpfs, filled to ``ENOSPC`` by a file that is deleted
when space should return. Mounting it takes root (the test is skipped, saying so, where ``mount`` is refused). The
collector is the real OTLP receiver refusing the tool spans (HTTP 400); the daemon a real child process.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from copilot_otel.common.errors import ExportError
from copilot_otel.daemon.state import read_checkpoints
from copilot_otel.deliver.deadletter import DeadLetters
from tests.conftest import CLI_GENERATED, replay_into
from tests.daemon_process import DaemonProcess, checkpointed_at_end, expected_spans
from tests.otlp_receiver import OtlpReceiver

_CANNOT = "cannot write the dead-letter file"


class SmallDisk:
    """A 2 MiB tmpfs at ``path``: :meth:`fill` takes every free page, :meth:`free` gives them back."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._filler = path / "filler"

    def fill(self) -> None:
        size = 65536
        fd = os.open(self._filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            while size:  # smaller and smaller writes until not one byte more fits
                try:
                    os.write(fd, b"\0" * size)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC, exc
                    size //= 2
        finally:
            os.close(fd)

    def free(self) -> None:
        self._filler.unlink()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[SmallDisk]:
    mount = tmp_path / "state"
    mount.mkdir(mode=0o700)
    if not sys.platform.startswith("linux"):
        pytest.skip("a small tmpfs to fill is a Linux mount")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(
            f"a really full disk needs a small tmpfs, and mounting one needs root: {done.stderr.strip()}"
        )
    try:
        yield SmallDisk(mount)
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _tools(span: dict[str, object]) -> bool:
    return str(span["name"]).startswith("execute_tool")


def test_replay_fails_and_claims_nothing_when_a_dead_letter_cannot_be_written(
    receiver: OtlpReceiver, capsys: pytest.CaptureFixture[str], small_disk: SmallDisk
) -> None:
    small_disk.fill()
    receiver.reject_when(_tools)
    rc = replay_into(receiver, CLI_GENERATED / "multi-tool", extra=("--state-dir", str(small_disk.path)))
    err = capsys.readouterr().err
    assert rc == ExportError.exit_code, err
    assert f"{_CANNOT} {small_disk.path / 'dead-letter.jsonl'}: No space left on device" in err, err
    assert "were dead-lettered" not in err, "a record that is in no file is not dead-lettered"
    small_disk.free()
    assert DeadLetters(small_disk.path / "dead-letter.jsonl").count() == 0


def test_the_daemon_holds_a_rejected_record_until_its_dead_letter_is_written(
    tmp_path: Path, receiver: OtlpReceiver, small_disk: SmallDisk
) -> None:
    root, state = tmp_path / "session-state", small_disk.path
    root.mkdir()
    source = CLI_GENERATED / "multi-tool"
    want = expected_spans([source / "events.jsonl"], tmp_path)
    refused = {span_id for span_id, span in want.items() if _tools(span)}
    assert len(refused) == 5
    d = DaemonProcess(root, state, receiver.http_endpoint, tmp_path / "daemon.log").start()
    try:
        d.until("status.json", (state / "status.json").exists)
        small_disk.fill()
        receiver.reject_when(_tools)
        shutil.copytree(source, root / "multi-tool")
        log = root / "multi-tool" / "events.jsonl"
        d.until("the line saying the dead letter cannot be written", lambda: _CANNOT in d.output())
        assert DeadLetters(state / "dead-letter.jsonl").count() == 0
        with contextlib.suppress(OSError):  # (an unreadable state.db while the disk is full is no checkpoint)
            assert str(log) not in read_checkpoints(state), "checkpointed past records kept nowhere"
        # space returns: the held dead letters are written, then the file is checkpointed
        small_disk.free()
        letters = DeadLetters(state / "dead-letter.jsonl")
        d.until("the five dead letters", lambda: letters.count() == 5, timeout=60)
        d.until("the checkpoint at the end of the log", lambda: checkpointed_at_end(state, [log]), timeout=30)
    finally:
        assert d.terminate() == 0, d.output()[-3000:]
    entries = list(letters.entries())
    assert {entry.record["span_id"] for entry in entries} == refused
    assert all(entry.request is not None for entry in entries), "each one re-sendable"
    got = Counter(span["span_id"] for span in receiver.spans())
    assert set(got) == set(want) - refused and max(got.values()) == 1
    assert d.output().count(_CANNOT) == 1, "the ERROR line is rate-limited"
