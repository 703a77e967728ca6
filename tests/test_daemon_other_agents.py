"""The daemon follows Claude Code's, Codex CLI's and Gemini CLI's logs as it follows Copilot CLI's (issue 26).

First the resume model at the pipeline's level: a fold stopped after any line of a real Claude Code or Gemini CLI log
and rebuilt from the checkpoint the daemon keeps (the start of the oldest open prompt with the context saved there,
the framer's state included) gives, after that line, exactly what one uninterrupted read gives. Then a real daemon over a temp
HOME whose logs are written line by line as the CLIs write them, exporting to a real OTLP receiver.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import orjson
import pytest

from copilot_otel.cli import main
from copilot_otel.daemon.state import read_checkpoints
from copilot_otel.model.records import Emission
from copilot_otel.pipeline import FoldSettings, Pipeline, fold_settings, split_lines
from copilot_otel.settings.config import load_config
from copilot_otel.sources.sessions import SessionFile
from tests.conftest import FIXTURES, SERIAL
from tests.daemon_process import DaemonProcess
from tests.otlp_receiver import OtlpReceiver
from tests.test_golden import MODES
from tests.waiting import until
from tests.webhook_receiver import WebhookReceiver

OTHER = FIXTURES / "other-agents"


def _other_logs(agent: str) -> list[Path]:
    """Every session log and sub-agent file of one agent's fixtures (the shared and the recorded scenarios, and
    Claude Code 2.1.332's)."""
    newer = [OTHER / "claude-code-2.1.332"] if agent == "claude-code" else []
    return [
        p
        for base in (OTHER / agent, OTHER / "recorded" / agent, *newer)
        for p in sorted(base.rglob("*.jsonl"))
        if "_capture" not in p.parts
    ]


def _line_ends(blob: bytes) -> list[int]:
    return [i + 1 for i, byte in enumerate(blob) if byte == 0x0A]


def _settings(mode: str) -> FoldSettings:
    """The fold's settings of a capture mode of the goldens (``full``: prompts, answers and tool content kept)."""
    return fold_settings(load_config({}, {"HOME": "/nonexistent", **MODES[mode]}))


def _fold_whole(session: SessionFile, settings: FoldSettings) -> list[Emission]:
    fold = Pipeline.for_session(session, settings)
    out = [e for step in fold.feed_file(session.path) for e in step.emissions]
    return out + list(fold.close("file_ended").emissions)


def _fold_restarted(session: SessionFile, settings: FoldSettings, blob: bytes, cut: int) -> list[Emission]:
    """Fold up to byte ``cut`` and stop there keeping only what the daemon checkpoints (the resume point, or the
    context between prompts, as JSON), then rebuild the fold from it and read on to the end, suppressing what the
    first run delivered (lines ending at or before ``cut``), as :class:`~copilot_otel.daemon.followed.FollowedFile`
    does after a restart."""
    first = Pipeline.for_session(session, settings)
    out = [e for step in first.feed_blob(blob[:cut]) for e in step.emissions]
    resume = first.resume_point()
    safe, context = resume if resume is not None else (cut, first.context_snapshot())
    second = Pipeline.for_session(session, settings, context=orjson.loads(orjson.dumps(context)))
    for item in split_lines(blob[safe:], base_offset=safe):
        out.extend(e for e in second.feed(item).emissions if e.source_offset > cut)
    return out + list(second.close("file_ended").emissions)  # a closing is never suppressed (force)


@pytest.mark.parametrize(
    "path",
    [*_other_logs("claude-code"), *_other_logs("gemini")],
    ids=lambda p: "/".join(p.relative_to(OTHER).parts[:2]) + f"/{p.name[:12]}",
)
@pytest.mark.parametrize("mode", ["default", "full"])
def test_a_restart_after_any_line_gives_one_uninterrupted_read(path: Path, mode: str) -> None:
    """In both capture modes: with content kept, the prompt's text (read by the framer a line before the prompt
    opens) must come back after a restart too. Claude Code's logs and Gemini CLI's (whose framer holds what each
    reply's earlier copies said, for the replace-by-id rule, in the checkpoint's context)."""
    settings = _settings(mode)
    session = SessionFile.from_path(path)
    whole = _fold_whole(session, settings)
    blob = path.read_bytes()
    restarted_inside_a_prompt = 0
    for cut in _line_ends(blob):
        first = Pipeline.for_session(session, settings)
        list(first.feed_blob(blob[:cut]))
        restarted_inside_a_prompt += first.resume_point() is not None
        assert _fold_restarted(session, settings, blob, cut) == whole, f"stopped after byte {cut}"
    assert restarted_inside_a_prompt, "some cut falls inside an open prompt"


# ---------------------------------------------------------------------------------------------- a real daemon
CLAUDE_CODE = OTHER / "claude-code"
RECORDED = OTHER / "recorded"
# Short enough that a prompt its log leaves open (cut mid-tool; a Gemini log's last answer) is closed within the test;
# long enough that a restart (about a second) closes nothing early.
IDLE_TIMEOUT_S = "6"
# The restart test waits up to a status period (5 s) before stopping: its prompts must not idle out meanwhile.
RESTART_IDLE_TIMEOUT_S = "15"
INCOMPLETE_REASON = "copilot_otel.incomplete.reason"
# A root's part of its cost its sub-agents' own logs made (read live when each ended, as replay reads them).
_SUBAGENT_COST = "copilot_otel.prompt.subagent_cost_usd"


def _claude_home() -> Path:
    return Path(os.environ["HOME"]) / ".claude"


def _written(scenario: Path, home: Path) -> tuple[Path, list[tuple[Path, Path]]]:
    """Where a scenario's session log goes under ``home``, and each sub-agent file (source, destination)."""
    projects = scenario / "projects"
    (main,) = [p for p in projects.glob("*/*.jsonl")]
    subs = [
        (p, home / "projects" / p.relative_to(projects))
        for p in sorted(projects.glob("*/*/subagents/*.jsonl"))
    ]
    return main, subs


class _Cli:
    """Writes a fixture log the way its CLI does: appended a line at a time, flushed after each."""

    def __init__(self, source: Path, dest: Path, shift_s: float = 0.0) -> None:
        self.lines = source.read_bytes().splitlines(keepends=True)
        self.dest = dest
        self.shift_s = shift_s
        self.at = 0
        dest.parent.mkdir(parents=True, exist_ok=True)

    def write(self, upto: int | None = None, pause_s: float = 0.003) -> None:
        """Write the lines up to line ``upto`` (every line left: ``None``)."""
        end = len(self.lines) if upto is None else upto
        with open(self.dest, "ab") as fh:
            for line in self.lines[self.at : end]:
                fh.write(_shifted(line, self.shift_s) if self.shift_s else line)
                fh.flush()
                time.sleep(pause_s)  # not a wait: paces the writer as the CLI writes, a line at a time
        self.at = max(self.at, end)

    def index_of(self, needle: bytes) -> int:
        """The number of lines up to and including the first that holds ``needle``."""
        return next(i for i, line in enumerate(self.lines) if needle in line) + 1


_TIMESTAMP = re.compile(rb'"timestamp":"([0-9T:.\-]+)Z"')


def _shifted(line: bytes, shift_s: float) -> bytes:
    """A line with its timestamp moved by ``shift_s`` (a recording made yesterday, written as if now)."""

    def move(match: re.Match[bytes]) -> bytes:
        when = datetime.fromisoformat(match.group(1).decode()).replace(tzinfo=timezone.utc)
        moved = when + timedelta(seconds=shift_s)
        return b'"timestamp":"' + moved.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3].encode() + b'Z"'

    return _TIMESTAMP.sub(move, line)


def _write_with_subagents(
    scenario: Path, home: Path, between: Callable[[], None] | None = None
) -> list[Path]:
    """A Claude Code session as the CLI writes it: the parent's log up to its ``Agent`` call, then each sub-agent's
    ``.meta.json`` and file (``between`` runs halfway through the first one), then the rest of the parent's."""
    main, subs = _written(scenario, home)
    parent = _Cli(main, home / "projects" / main.relative_to(scenario / "projects"))
    written = [parent.dest]
    if subs:
        parent.write(parent.index_of(b'"name":"Agent"'))
    for n, (source, dest) in enumerate(subs):
        meta = source.with_suffix(".meta.json")
        sub = _Cli(source, dest)
        shutil.copyfile(meta, dest.with_suffix(".meta.json"))
        if n == 0 and between is not None:
            sub.write(len(sub.lines) // 2)
            between()
        sub.write()
        written.append(dest)
    parent.write()
    return written


def _daemon(
    tmp: Path, receiver: OtlpReceiver, name: str = "daemon", idle_timeout: str = IDLE_TIMEOUT_S, **env: str
) -> DaemonProcess:
    """``copilot-otel run`` with Copilot CLI not installed (its session-state missing) under the test's HOME."""
    return DaemonProcess(
        tmp / "no-copilot" / "session-state",
        tmp / "state",
        receiver.http_endpoint,
        tmp / f"{name}.log",
        "--idle-timeout",
        idle_timeout,
        env={"COPILOT_OTEL_NOTIFY_DESKTOP": "false", **env},
    )


def _status(tmp: Path) -> dict[str, Any]:
    path = tmp / "state" / "status.json"
    try:
        doc: dict[str, Any] = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    return doc


def _replayed(logs: list[Path], tmp: Path) -> dict[str, dict[str, Any]]:
    """What ``copilot-otel replay`` exports of these paths (``~/.claude``: each session and sub-agent file), by
    span id."""
    with OtlpReceiver() as other:
        args = ["replay", *map(str, logs), "--endpoint", other.http_endpoint, "--no-progress"]
        assert main([*args, "--state-dir", str(tmp / "replay-state")]) == 0
        return {s["span_id"]: _strip(s) for s in other.spans()}


def _strip(span: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in span.items() if k != "resource"}


def _as_replay_closes(span: dict[str, Any]) -> dict[str, Any]:
    """A live span as replay gives it: replay closes the last prompt of a log at the log's end (``file_ended``),
    the daemon once it idled out (``idle_timeout``); nothing else may differ."""
    attrs = span["attributes"]
    if attrs.get(INCOMPLETE_REASON) == "idle_timeout":
        return {**span, "attributes": {**attrs, INCOMPLETE_REASON: "file_ended"}}
    return span


def _assert_live_is_replay(
    receiver: OtlpReceiver, logs: list[Path], tmp: Path, once: bool = True
) -> dict[str, dict[str, Any]]:
    """Every span replay gives arrived with the same content, nothing lost; ``once``: none twice (after a kill,
    what was delivered but not yet checkpointed is sent again: byte-identical, so a backend keeps one)."""
    want = _replayed(logs, tmp)
    assert want, "the scenario gives spans"
    receiver.wait_for(lambda r: {s["span_id"] for s in r.spans()} >= set(want), 30)
    got: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for span in receiver.spans():
        got[span["span_id"]].append(_as_replay_closes(_strip(span)))
    assert set(got) == set(want), "exactly the spans replay produces"
    twice = sorted({copies[0]["name"] for copies in got.values() if len(copies) > 1})
    assert not (once and twice), f"delivered twice: {twice}"
    for span_id, copies in got.items():
        for copy in copies:
            assert copy == want[span_id], f"span {copy['name']} was exported with different content"
    return want


@SERIAL
def test_claude_code_logs_written_live_are_exported_as_replay_exports_them(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    """Only Claude Code is installed: ``run`` starts, follows ``~/.claude/projects`` (found by its default), and what
    it exports of sessions written line by line, a sub-agent's file appearing while its parent runs, is replay's."""
    home = _claude_home()
    (home / "projects").mkdir(parents=True)  # the CLI has run before, its logs come now
    daemon = _daemon(tmp_path, receiver).start()
    try:
        for name in ("subagent", "compaction", "failing-tool"):
            _write_with_subagents(CLAUDE_CODE / name, home)
        _write_with_subagents(RECORDED / "claude-code" / "subagent-tools-fail", home)
        want = _assert_live_is_replay(receiver, [home], tmp_path)
    finally:
        assert daemon.terminate() == 0
    agents = [s for s in want.values() if s["attributes"].get("gen_ai.operation.name") == "invoke_agent"]
    assert any(s["parent_span_id"] is not None for s in agents), "a sub-agent, under its parent's tool call"
    assert any(_SUBAGENT_COST in s["attributes"] for s in want.values()), (
        "a root costs its sub-agents' logs too"
    )
    out = daemon.output()
    assert f"following {home / 'projects'} (copilot, codex, gemini not installed" in out, out[:2000]
    assert "Traceback" not in out and " ERROR " not in out


@SERIAL
@pytest.mark.parametrize("stop", ["terminate", "kill"])
def test_a_daemon_stopped_inside_a_prompt_resumes_it_without_loss_or_duplicates(
    tmp_path: Path, receiver: OtlpReceiver, stop: str
) -> None:
    """Stopped while a sub-agent's file is half written (its parent's prompt open too), restarted, the rest written:
    the output is one uninterrupted replay's, each span once after a stop (SIGTERM), and nothing lost after a kill
    (SIGKILL: what was delivered since the last checkpoint may come twice, identical). The restart re-folds both
    open prompts from their first lines with the framer's state there (the sub-agent's seed among it)."""
    home = _claude_home()
    (home / "projects").mkdir(parents=True)
    daemon = _daemon(tmp_path, receiver, idle_timeout=RESTART_IDLE_TIMEOUT_S).start()
    restarted: list[DaemonProcess] = []

    def restart() -> None:
        # Stopped once it has read all that was written (its status says so, every 5 s): a framer may hold a
        # record back until the next one, so how many spans arrived says nothing of how far it read.
        written = sum(len(p.read_bytes().splitlines()) for p in (home / "projects").rglob("*.jsonl"))
        until(lambda: _status(tmp_path).get("lines_read", 0) >= written, 20, "every line written to be read")
        if stop == "kill":
            logs = {str(p) for p in (home / "projects").rglob("*.jsonl")}
            # a checkpoint of every file written is flushed (each second): the kill lands inside a prompt
            until(lambda: logs <= set(read_checkpoints(tmp_path / "state")), 20, "a checkpoint of every log")
            daemon.kill()
        else:
            assert daemon.terminate() == 0
        restarted.append(
            _daemon(tmp_path, receiver, "restarted", idle_timeout=RESTART_IDLE_TIMEOUT_S).start()
        )

    try:
        _write_with_subagents(RECORDED / "claude-code" / "subagent-tools-fail", home, between=restart)
        _assert_live_is_replay(receiver, [home], tmp_path, once=stop == "terminate")
    finally:
        for d in (daemon, *restarted):
            if d.proc is not None and d.proc.poll() is None:
                assert d.terminate() == 0
    assert restarted, "the daemon was restarted mid-prompt"
    assert "resumed 2 checkpointed session logs" in restarted[0].output()  # the parent's and the sub-agent's


# ---------------------------------------------------------------------------------------------- acting on a runaway
_DECOY = """
import pathlib, signal, sys, time
marker = pathlib.Path(sys.argv[1])
for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
    signal.signal(sig, lambda number, frame: marker.write_text(str(number)))
marker.with_suffix(".ready").write_text("ready")
time.sleep(120)  # not a wait: the decoy lives (and records any signal) until the test kills it
"""


@SERIAL
def test_a_claude_code_runaway_is_detected_once_and_notified_never_signalled(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    """The recorded runaway (the same tool call 25 times) written line by line into a followed root, with
    ``runaway_action = interrupt``: the detection fires once, the webhook gets its notice, and nothing is signalled:
    Claude Code leaves no lock naming its process, so the interrupt degrades to the notice and says so. A process
    whose arguments name the session (as ``claude --resume <id>`` would) is running all along, and gets no signal."""
    scenario = RECORDED / "claude-code" / "runaway"
    main_log, _ = _written(scenario, _claude_home())
    session_id = main_log.stem
    marker = tmp_path / "decoy.signal"
    decoy = subprocess.Popen([sys.executable, "-c", _DECOY, str(marker), "claude", "--resume", session_id])
    try:
        until(
            lambda: marker.with_suffix(".ready").exists() or decoy.poll() is not None,
            20,
            "the decoy's ready file",
        )
        assert decoy.poll() is None, "the decoy exited"
        with WebhookReceiver() as hook:
            home = _claude_home()
            dest = home / "projects" / main_log.relative_to(scenario / "projects")
            first = datetime.fromisoformat(_TIMESTAMP.search(main_log.read_bytes()).group(1).decode())  # type: ignore[union-attr]
            shift_s = time.time() - first.replace(tzinfo=timezone.utc).timestamp()
            daemon = _daemon(
                tmp_path,
                receiver,
                COPILOT_OTEL_RUNAWAY_ACTION="interrupt",
                COPILOT_OTEL_NOTIFY_WEBHOOK=hook.url,
                COPILOT_OTEL_RUNAWAY_TURNS="1000",  # only the identical calls' rule: one detection to count
            ).start()
            try:
                _Cli(main_log, dest, shift_s).write(pause_s=0.01)
                hook.wait_for(1, 30)
                receiver.wait_for(lambda r: any(s["parent_span_id"] is None for s in r.spans()), 30)
            finally:
                assert daemon.terminate() == 0
            bodies = list(hook.bodies)
        detections = [r for r in receiver.logs() if r["event_name"] == "copilot_otel.runaway.detected"]
        assert [d["attributes"]["copilot_otel.runaway.reason"] for d in detections] == [
            "identical_tool_calls"
        ]
        assert len(bodies) == 1, bodies
        assert session_id in orjson.dumps(bodies[0]).decode()
        out = daemon.output()
        said = [line for line in out.splitlines() if "unprovable" in line]
        assert len(said) == 1 and "claude-code leaves no lock naming its process" in said[0], out[-3000:]
        assert "notified instead" in said[0]
        status = orjson.loads((tmp_path / "state" / "status.json").read_bytes())
        assert status["runaway_interrupts"] == {"unprovable": 1}
        assert decoy.poll() is None and not marker.exists(), "no process was signalled"
    finally:
        decoy.kill()
        decoy.wait(10)


# ---------------------------------------------------------------------------------------------- Codex CLI
def _codex_home() -> Path:
    return Path(os.environ["HOME"]) / ".codex"


def _write_codex(scenario: Path, home: Path) -> list[Path]:
    """A Codex scenario's rollouts, each written line by line into its date folder under ``home``."""
    written = []
    for source in sorted((scenario / "sessions").rglob("rollout-*.jsonl")):
        cli = _Cli(source, home / "sessions" / source.relative_to(scenario / "sessions"))
        cli.write()
        written.append(cli.dest)
    return written


@SERIAL
def test_codex_rollouts_are_discovered_and_followed_in_their_date_folders(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    """Codex is installed alone, its ``sessions`` folder created after the daemon started (an agent installed
    later): each rollout, in a date folder made while it is watched, is found and read to its end, no line dropped,
    no error."""
    home = _codex_home()
    daemon = _daemon(tmp_path, receiver).start()
    try:
        written = _write_codex(OTHER / "codex" / "subagent", home)
        lines = sum(len(p.read_bytes().splitlines()) for p in written)
        until(lambda: _status(tmp_path).get("lines_read", 0) >= lines, 30, "every line written to be read")
    finally:
        assert daemon.terminate() == 0
    doc = _status(tmp_path)
    assert doc["files_tracked"] == len(written) == 2
    assert doc["lines_dropped"] == {}
    out = daemon.output()
    assert f"{home / 'sessions'} appeared: following its sessions" in out
    assert "Traceback" not in out and " ERROR " not in out and "WARNING" not in out, out[-3000:]


@SERIAL
def test_codex_rollouts_written_live_are_exported_as_replay_exports_them(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    home = _codex_home()
    (home / "sessions").mkdir(parents=True)
    daemon = _daemon(tmp_path, receiver).start()
    try:
        written = [
            p
            for name in ("subagent", "compaction", "failing-tool")
            for p in _write_codex(OTHER / "codex" / name, home)
        ]
        want = _assert_live_is_replay(receiver, written, tmp_path)
    finally:
        assert daemon.terminate() == 0
    assert any(_SUBAGENT_COST in s["attributes"] for s in want.values()), (
        "a root costs its sub-agents' logs too"
    )


# ---------------------------------------------------------------------------------------------- Gemini CLI
GEMINI = OTHER / "gemini"


def _gemini_home() -> Path:
    return Path(os.environ["HOME"]) / ".gemini"


def _write_gemini(
    scenario: Path, home: Path, *, spawn_ended: bool = True, between: Callable[[], None] | None = None
) -> list[Path]:
    """A Gemini scenario's logs written line by line under ``home/tmp`` as the CLI writes them: the session's log,
    and a sub-agent's (in a ``chats/<session id>`` folder made then) while its parent's ``invoke_agent`` call runs.
    ``spawn_ended``: the sub-agent's log is written only once the parent's log has said the call ended (which
    agent it ran): what a fold started then finds, as replay does (the live limit of ``docs/other-agents.md``).
    ``between`` runs once a sub-agent's log is written, before the rest of the parent's."""
    tmp = scenario / "tmp"
    (main,) = sorted(tmp.glob("*/chats/session-*.jsonl"))
    parent = _Cli(main, home / "tmp" / main.relative_to(tmp))
    written = [parent.dest]
    for source in sorted(tmp.glob("*/chats/*/*.jsonl")):
        upto = parent.index_of(b'"agentId"') if spawn_ended else parent.index_of(b'"invoke_agent"') - 1
        parent.write(upto)
        sub = _Cli(source, home / "tmp" / source.relative_to(tmp))
        sub.write()
        written.append(sub.dest)
        if between is not None:
            between()
    parent.write()
    return written


@SERIAL
def test_gemini_logs_written_live_are_exported_as_replay_exports_them(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    """Only Gemini CLI is installed, its ``tmp`` folder made after the daemon started: each session's log (a
    project's ``chats`` folder made while watched), written line by line with the CLI's rewrites of a reply (the
    replace-by-id rule), and a sub-agent's log in a session folder that appears meanwhile, are exported as replay
    exports them."""
    home = _gemini_home()
    daemon = _daemon(tmp_path, receiver).start()
    try:
        written = [
            p
            for name in ("subagent", "parallel-tools", "failing-tool", "resumed", "abort-mid-tool")
            for p in _write_gemini(GEMINI / name, home)
        ]
        assert any(p.parent.parent.name == "chats" for p in written), "a sub-agent's log among them"
        want = _assert_live_is_replay(receiver, [home], tmp_path)
    finally:
        assert daemon.terminate() == 0
    agents = [s for s in want.values() if s["name"] == "invoke_agent generalist"]
    assert len(agents) == 1 and agents[0]["parent_span_id"] is not None, (
        "the sub-agent under its parent's call"
    )
    assert any(_SUBAGENT_COST in s["attributes"] for s in want.values()), (
        "a root costs its sub-agents' logs too"
    )
    out = daemon.output()
    assert f"{home / 'tmp'} appeared: following its sessions" in out, out[:3000]
    assert "Traceback" not in out and " ERROR " not in out and "WARNING" not in out, out[-3000:]
    status = _status(tmp_path)
    assert status["files_tracked"] == len(written) and status["lines_dropped"] == {}


@SERIAL
def test_a_gemini_sub_agent_followed_before_its_spawn_ended_stays_in_its_parents_trace(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    """The live limit: a sub-agent's log written while the parent's ``invoke_agent`` call runs (as the CLI writes
    it) is folded before the parent's log names it, so it roots in the trace of the prompt the parent runs, under
    no span; everything of the parent's is replay's, and the sub-agent's own spans keep their content."""
    home = _gemini_home()
    (home / "tmp").mkdir(parents=True)
    daemon = _daemon(tmp_path, receiver).start()
    try:

        def read_so_far() -> None:  # the sub-agent's fold has started before its parent's call ends
            lines = sum(len(p.read_bytes().splitlines()) for p in (home / "tmp").rglob("*.jsonl"))
            until(
                lambda: _status(tmp_path).get("lines_read", 0) >= lines, 20, "every line written to be read"
            )

        written = _write_gemini(GEMINI / "subagent", home, spawn_ended=False, between=read_so_far)
        want = _replayed([home], tmp_path)
        receiver.wait_for(lambda r: len({s["span_id"] for s in r.spans()}) >= len(want), 30)
    finally:
        assert daemon.terminate() == 0
    got = {s["span_id"]: _as_replay_closes(_strip(s)) for s in receiver.spans()}
    assert len(written) == 2 and set(got) == set(want)
    (agent_id,) = [i for i, s in want.items() if s["name"] == "invoke_agent generalist"]
    (root_id,) = [i for i, s in want.items() if s["parent_span_id"] is None]
    name = "gen_ai.agent.name"
    theirs = {i for i, s in want.items() if s["attributes"].get(name) == "generalist"}
    assert agent_id in theirs and len(theirs) == 7  # the sub-agent's own span, its 2 turns, 2 calls, 2 tools
    assert all(got[i] == want[i] for i in set(want) - theirs), "the parent's spans are replay's"
    for i in theirs - {
        agent_id
    }:  # the sub-agent's work: only its name, which the parent's call gives, is unknown
        assert got[i] == {
            **want[i],
            "attributes": {k: v for k, v in want[i]["attributes"].items() if k != name},
        }
    live, replayed = got[agent_id], want[agent_id]
    assert live["trace_id"] == replayed["trace_id"] == want[root_id]["trace_id"]
    assert want[replayed["parent_span_id"]]["name"] == "execute_tool invoke_agent"
    assert live["parent_span_id"] == root_id, "live: under the prompt's root, not the call not yet ended"
    assert (live["name"], replayed["name"]) == ("invoke_agent agent", "invoke_agent generalist")
    out = daemon.output()
    assert "Traceback" not in out and " ERROR " not in out, out[-3000:]


@SERIAL
def test_a_gemini_runaway_is_detected_once_and_notified_never_signalled(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    """[runaway-distinct] (25 shell calls with different arguments: no loop for the CLI's own detection) written
    line by line as if now, with ``runaway_action = interrupt``: the loop's turns rule fires once, the webhook gets
    its notice, and nothing is signalled: Gemini CLI leaves no lock naming its process."""
    scenario = GEMINI / "runaway-distinct" / "tmp"
    (main_log,) = sorted(scenario.glob("*/chats/session-*.jsonl"))
    session_id = orjson.loads(main_log.read_bytes().split(b"\n")[0])["sessionId"]
    first = datetime.fromisoformat(_TIMESTAMP.search(main_log.read_bytes()).group(1).decode())  # type: ignore[union-attr]
    shift_s = time.time() - first.replace(tzinfo=timezone.utc).timestamp()
    with WebhookReceiver() as hook:
        daemon = _daemon(
            tmp_path,
            receiver,
            COPILOT_OTEL_RUNAWAY_ACTION="interrupt",
            COPILOT_OTEL_NOTIFY_WEBHOOK=hook.url,
        ).start()
        try:
            _Cli(main_log, _gemini_home() / "tmp" / main_log.relative_to(scenario), shift_s).write(
                pause_s=0.01
            )
            hook.wait_for(1, 30)
            receiver.wait_for(lambda r: any(s["parent_span_id"] is None for s in r.spans()), 30)
        finally:
            assert daemon.terminate() == 0
        bodies = list(hook.bodies)
    detections = [r for r in receiver.logs() if r["event_name"] == "copilot_otel.runaway.detected"]
    assert [d["attributes"]["copilot_otel.runaway.reason"] for d in detections] == ["turns"]
    assert len(bodies) == 1 and session_id in orjson.dumps(bodies[0]).decode()
    out = daemon.output()
    said = [line for line in out.splitlines() if "unprovable" in line]
    assert len(said) == 1 and "gemini leaves no lock naming its process" in said[0], out[-3000:]
    status = orjson.loads((tmp_path / "state" / "status.json").read_bytes())
    assert status["runaway_interrupts"] == {"unprovable": 1}
