"""Files read beside a log are regular files only, opened without blocking, read up to a cap (issue 32, point 2).

A Claude Code sub-agent's ``agent-<id>.meta.json`` and a Gemini CLI sub-agent's parent log are read whole when the
sub-agent's fold starts. Replaced by a real FIFO, the daemon's main thread blocked in ``open`` for good (no span
for any agent, no line in its log) and ``show``, ``report`` and ``replay`` never ended; linked to ``/dev/zero``
they were read until ``MemoryError``. Here a real daemon over a HOME holding such a file beside an ordinary
session keeps exporting all of it, says the refusal once and counts it in ``status.json``; the commands end
with exit 0 (every session is read; only what the side file would have told is missing) and the same one line.

The commands and the daemon run as child processes, under a deadline and an address-space limit: what hung or
ate memory before must fail here, not hang the suite or the machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from copilot_otel._platform import NotARegularFile, Platform, current
from copilot_otel.daemon.followed import _first_line, _last_line_boundary
from copilot_otel.sources import read_blob, sidefiles, sniff
from copilot_otel.sources.claude_code.reader import read_meta
from copilot_otel.sources.codex.reader import root_session
from copilot_otel.sources.gemini.reader import project_root, read_line, spawn_of
from copilot_otel.sources.sessions import read_workspace
from tests.conftest import FIXTURES, SERIAL
from tests.daemon_process import DaemonProcess
from tests.otlp_receiver import OtlpReceiver
from tests.test_daemon_other_agents import _status
from tests.waiting import until

ROOT = Path(__file__).resolve().parent.parent
OTHER = FIXTURES / "other-agents"
CLAUDE_SUB = OTHER / "claude-code" / "subagent" / "projects"
CLAUDE_OTHER = OTHER / "claude-code" / "failing-tool" / "projects"
GEMINI_SUB = OTHER / "gemini" / "subagent" / "tmp"
GEMINI_OTHER = OTHER / "gemini" / "plain-question" / "tmp"
# What a command may take under this machine's load (it takes a second or two): past it, it hangs.
COMMAND_DEADLINE_S = 90.0
# The address space a child may use: several times what the daemon or a command needs (~1.1 GiB, most of it
# thread stacks reserved), far below what reading /dev/zero whole reached (1.99 GB of heap, then MemoryError).
ADDRESS_SPACE = str(3 * 1024**3)
LIMITED = ("prlimit", f"--as={ADDRESS_SPACE}", "--")

KINDS = {
    "fifo": "it is a FIFO, not a regular file",
    "dev-zero": "it is a character device, not a regular file",
}
SIDE = {"claude-code": "a sub-agent's .meta.json", "gemini": "a sub-agent's parent log"}


def _copy_tree(source: Path, dest: Path) -> None:
    """A fixture tree copied as the CLI writes it now (fresh mtimes: live, not history)."""
    for path in sorted(source.rglob("*")):
        if path.is_file():
            target = dest / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())


def _replace(path: Path, kind: str) -> None:
    """``path`` made a real FIFO, or a link to ``/dev/zero``."""
    path.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")


def _side_file(agent: str, home: Path) -> Path:
    if agent == "claude-code":
        (meta,) = (home / ".claude" / "projects").rglob("agent-*.meta.json")
        return meta
    (parent,) = (home / ".gemini" / "tmp").rglob("session-*.jsonl")
    return parent


def _lay_out(agent: str, home: Path, kind: str, then: Callable[[], object] | None = None) -> Path:
    """The agent's sub-agent scenario under ``home`` with its side file replaced (before the sub-agent's log is
    there, as a CLI writes it), ``then`` (the daemon's start), then the ordinary session of the same agent.

    The scenario is staged outside the agent's folder first: a daemon already following that folder must never
    see the side file as the regular file the fixture holds (it would read it, and export what replay of the
    final folder does not), nor a log written, deleted and written again."""
    if agent == "claude-code":
        root = home / ".claude" / "projects"
        sub, other = CLAUDE_SUB, CLAUDE_OTHER
    else:
        root = home / ".gemini" / "tmp"
        sub, other = GEMINI_SUB, GEMINI_OTHER
    stage = home / "staging" / agent
    _copy_tree(sub, stage)
    (staged_side,) = stage.rglob("agent-*.meta.json" if agent == "claude-code" else "session-*.jsonl")
    root.mkdir(parents=True)
    if then is not None:
        then()
    side = root / staged_side.relative_to(stage)
    staged = sorted(p for p in stage.rglob("*") if p.is_file() and p != staged_side)
    for path in (p for p in staged if p.suffix != ".jsonl"):  # what a log's folder holds before its log
        target = root / path.relative_to(stage)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
    side.parent.mkdir(parents=True, exist_ok=True)
    _replace(side, kind)
    for path in (p for p in staged if p.suffix == ".jsonl"):
        target = root / path.relative_to(stage)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
    _copy_tree(other, root)
    return side


def _run(home: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """``copilot-otel`` as a child process under the deadline and the memory limit."""
    env = {**os.environ, "HOME": str(home), "COPILOT_OTEL_METRICS": "false", "NO_COLOR": "1"}
    try:
        return subprocess.run(
            [*LIMITED, sys.executable, "-m", "copilot_otel", *argv],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=COMMAND_DEADLINE_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"copilot-otel {' '.join(argv)} did not end within {COMMAND_DEADLINE_S:g} s")


def _said_once(text: str, side: Path, kind: str, agent: str, times: int = 1) -> None:
    line = f"skipped {side} ({SIDE[agent]}): {KINDS[kind]}; it is not read"
    assert text.count(line) == times, text[-3000:]
    assert "Traceback" not in text and "MemoryError" not in text, text[-3000:]


def _replay(home: Path, receiver: OtlpReceiver, state: Path) -> dict[str, dict[str, Any]]:
    done = _run(
        home, "replay", "--endpoint", receiver.http_endpoint, "--no-progress", "--state-dir", str(state)
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return {s["span_id"]: s for s in receiver.spans()}


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("agent", sorted(SIDE))
def test_show_report_and_replay_end_and_say_the_side_file_once(
    tmp_path: Path, _isolated_home: Path, agent: str, kind: str
) -> None:
    """Each command ends with exit 0 (every session is there: the sub-agent's is read without what its side file
    says, exactly as if it were missing) and one warning line naming the file and why. (``show`` and ``report``
    count a Gemini sub-agent's file with its parent's session, which is not there: they never look for its
    spawn, so they say nothing.)"""
    home = _isolated_home
    side = _lay_out(agent, home, kind)
    shown: dict[str, str] = {}
    for argv in (["show", "--json"], ["report", "--json"]):
        done = _run(home, *argv)
        assert done.returncode == 0, done.stdout + done.stderr
        _said_once(done.stderr, side, kind, agent, times=agent == "claude-code")
        shown[argv[0]] = done.stdout
    side.unlink()
    for argv in (["show", "--json"], ["report", "--json"]):
        missing = _run(home, *argv)
        assert orjson.loads(shown[argv[0]]) == orjson.loads(missing.stdout), "read as if it were missing"
    _replace(side, kind)
    with OtlpReceiver() as receiver:
        done = _run(
            home,
            "replay",
            "--endpoint",
            receiver.http_endpoint,
            "--no-progress",
            "--state-dir",
            str(tmp_path / "s"),
        )
        assert done.returncode == 0, done.stdout + done.stderr
        _said_once(done.stderr, side, kind, agent)
        spans = receiver.spans()
    agents = {s["attributes"].get("gen_ai.operation.name") for s in spans}
    assert "invoke_agent" in agents, "the sub-agent's own file is exported"
    assert "execute_tool" in agents


@SERIAL
@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("agent", sorted(SIDE))
def test_the_daemon_keeps_exporting_past_a_side_file_that_is_no_regular_file(
    tmp_path: Path, _isolated_home: Path, receiver: OtlpReceiver, agent: str, kind: str
) -> None:
    """The real daemon follows the agent's folder while the side file is a FIFO (or ``/dev/zero``) and the logs
    come: it exports what replay exports of the same folder (the ordinary session and the sub-agent's), says the
    file once and counts it in ``status.json``, and stops cleanly."""
    home = _isolated_home
    daemon = DaemonProcess(
        tmp_path / "no-copilot" / "session-state",
        tmp_path / "state",
        receiver.http_endpoint,
        tmp_path / "daemon.log",
        "--idle-timeout",
        "6",
        env={"COPILOT_OTEL_NOTIFY_DESKTOP": "false"},
        wrap=LIMITED,
    )
    try:
        side = _lay_out(agent, home, kind, then=daemon.start)
        with OtlpReceiver() as other:
            want = _replay(home, other, tmp_path / "replay-state")
        assert want
        receiver.wait_for(lambda r: {s["span_id"] for s in r.spans()} >= set(want), 60)
        until(
            lambda: _status(tmp_path).get("side_files_refused") == {"not_regular_file": 1},
            30,
            "the refusal counted",
        )
    finally:
        code = _stop(daemon)
    assert code == 0, daemon.output()[-3000:]
    assert {s["span_id"] for s in receiver.spans()} == set(want)
    _said_once(daemon.output(), side, kind, agent)


def _stop(daemon: DaemonProcess) -> int | None:
    """Its exit code after SIGTERM; a daemon that does not stop (one blocked in an ``open``) is killed."""
    if daemon.proc is None or daemon.proc.poll() is not None:
        return None if daemon.proc is None else daemon.proc.returncode
    try:
        return daemon.terminate()
    except subprocess.TimeoutExpired:
        daemon.kill()
        return None


# ---------------------------------------------------------------------------------------------- each reader
@pytest.fixture
def said(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    caplog.set_level("WARNING", logger="copilot_otel.sources.sidefiles")
    yield caplog


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_side_read_refuses_a_fifo_or_device_at_once_and_says_it_once(
    tmp_path: Path, said: pytest.LogCaptureFixture, kind: str
) -> None:
    """Each reader of a file beside a log, on a real FIFO (nobody writes it: an ``open`` without ``O_NONBLOCK``
    would wait for ever) and a link to ``/dev/zero``: nothing read, no exception, one warning per file however
    often it is asked, one count per file."""
    before = sidefiles.refusals().get("not_regular_file", 0)
    meta = tmp_path / "subagents" / "agent-a1.meta.json"
    workspace = tmp_path / "copilot" / "s1" / "workspace.yaml"
    rollout = tmp_path / "rollout-2026-01-01T00-00-00-0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000.jsonl"
    chats = tmp_path / "gemini" / "chats"
    parent = chats / "session-2026-12-02T07-35-6b4f93a2.jsonl"
    sub = chats / "6b4f93a2-dc6b-407d-ba74-03d8f2e5f5ab" / "f418ac7a.jsonl"
    marker = chats.parent / ".project_root"
    for path in (meta, workspace, rollout, parent, sub):
        path.parent.mkdir(parents=True, exist_ok=True)
    for path in (meta, workspace, rollout, parent, marker):
        _replace(path, kind)
    sub.write_bytes(b"")
    for _ in range(2):
        assert read_meta(meta.with_name("agent-a1.jsonl")) is None
        assert read_workspace(workspace.parent) == {}
        assert root_session(rollout) is None
        assert sniff(rollout) is None
        found = spawn_of(sub)
        assert found is not None and found.call_id is None and found.prompt_id is None
        assert project_root(parent) is None
    lines = [r.getMessage() for r in said.records]
    for path in (meta, workspace, rollout, parent, marker):
        assert sum(str(path) in line and KINDS[kind] in line for line in lines) == 1, lines
    # The rollout is read twice over (root_session and sniff), each its own purpose: said once, for the first.
    assert sidefiles.refusals()["not_regular_file"] - before == 5


def test_a_side_file_over_its_cap_is_not_read_and_said_once(
    tmp_path: Path, said: pytest.LogCaptureFixture
) -> None:
    """A sparse 64 GiB ``.meta.json`` (a regular file) is refused by its size before a byte of it is read."""
    meta = tmp_path / "agent-a2.meta.json"
    with open(meta, "wb") as fh:
        fh.truncate(64 * 1024**3)
    before = sidefiles.refusals().get("too_large", 0)
    assert read_meta(meta) is None
    assert read_meta(meta) is None
    assert sidefiles.refusals()["too_large"] - before == 1
    (line,) = [r.getMessage() for r in said.records]
    assert (
        f"skipped {meta} (a sub-agent's .meta.json): it holds 68,719,476,736 bytes, more than the 65,536"
        in line
    )


@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 20])
def test_read_lines_gives_read_blobs_lines_and_offsets_in_any_chunking(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    """The parent's log read a chunk at a time gives each line and offset the whole-file reader gives (a line's
    fallback id is its offset); a line past ``max_line`` is skipped, the lines after it kept."""
    monkeypatch.setattr(sidefiles, "_CHUNK_BYTES", chunk)
    (log,) = GEMINI_SUB.rglob("session-*.jsonl")
    blob = (
        log.read_bytes() + b'{"type":"user","content":"' + b"x" * 300 + b'"}\n\r\n{"type":"info"}\n{"partial'
    )
    path = tmp_path / "parent.jsonl"
    path.write_bytes(blob)
    whole = [(v.offset, v.end_offset) for v in read_blob(blob, read_line)]
    read = list(sidefiles.read_lines(path, "a test log", 1 << 20, 1 << 20))
    assert [(s, e) for _line, s, e in read] == whole
    assert [line for line, s, e in read] == [blob[s:e].rstrip(b"\r\n") for _line, s, e in read]
    short = list(sidefiles.read_lines(path, "a test log", 1 << 20, 300))
    assert short == [(line, s, e) for line, s, e in read if e - s - 1 <= 300]
    assert short[-1][0] == b'{"type":"info"}' and len(short) < len(read)


def test_open_regular_never_waits_on_any_platform_implementation(tmp_path: Path) -> None:
    """This machine's implementation (``O_NONBLOCK``) and the portable one (Windows, the no-POSIX run: checked by
    ``stat`` before the open) both refuse a FIFO at once and open a regular file."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    regular = tmp_path / "file"
    regular.write_bytes(b"x")
    for platform in (current, Platform()):
        with pytest.raises(NotARegularFile) as refused:
            platform.open_regular(fifo)
        assert refused.value.kind == "a FIFO"
        with pytest.raises(NotARegularFile):
            platform.open_regular("/dev/zero")
        fd = platform.open_regular(regular)
        try:
            assert os.read(fd, 10) == b"x"
        finally:
            os.close(fd)


@pytest.mark.timeout(60)
def test_the_daemons_first_look_at_a_history_log_never_waits_on_a_fifo(tmp_path: Path) -> None:
    """A log the scan found regular and that is a FIFO when the daemon skips its history (its first line for the
    session's ids, its last line's end for where to start): nothing read, nothing skipped past, no wait."""
    fifo = tmp_path / "session.jsonl"
    os.mkfifo(fifo)
    assert _first_line(fifo) == b""
    assert _last_line_boundary(fifo, 10) == 10
