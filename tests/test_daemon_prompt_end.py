"""Issue 31.1: a finished prompt finishes in the daemon where its log says, not when the idle timeout closes it.

A real ``copilot-otel run`` (the default idle timeout of 30 minutes) over a temp HOME that holds finished history,
as a newcomer's home folder does: Claude Code sessions (one a recorded runaway) and Gemini CLI sessions, last
written days ago. Each prompt's root span reaches a real OTLP receiver while the history is read (a test that had
to wait for the idle timeout would time out long before it), complete, as replay exports it; ``status`` lists no
open prompt, and the runaway of the history is summed up on the backfill line, never a live warning.
"""

from __future__ import annotations

import io
import os
import shutil
import time
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import orjson

from copilot_otel.cli import main
from tests.conftest import FIXTURES, SERIAL
from tests.daemon_process import DaemonProcess
from tests.otlp_receiver import OtlpReceiver
from tests.test_daemon import _status as _status_file
from tests.test_daemon_other_agents import _write_with_subagents
from tests.webhook_receiver import WebhookReceiver

OTHER = FIXTURES / "other-agents"
CLAUDE_CODE = [OTHER / "claude-code" / n for n in ("plain-question", "multi-tool", "subagent", "compaction")]
CLAUDE_RUNAWAY = OTHER / "recorded" / "claude-code" / "runaway"
GEMINI = [OTHER / "gemini" / n for n in ("plain-question", "multi-tool", "resumed", "subagent")]
FOUR_DAYS_S = 4 * 24 * 3600.0
OUTCOME = "copilot_otel.prompt.outcome"


def _copy_history(home: Path) -> list[Path]:
    """The scenarios' logs under ``home`` as their CLIs left them, last written four days ago."""
    copied = []
    for scenario in [*CLAUDE_CODE, CLAUDE_RUNAWAY]:
        for source in (scenario / "projects").rglob("*"):
            if source.is_file():
                dest = home / ".claude" / "projects" / source.relative_to(scenario / "projects")
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, dest)
                copied.append(dest)
    for scenario in GEMINI:
        for source in (scenario / "tmp").rglob("*.jsonl"):
            dest = home / ".gemini" / "tmp" / source.relative_to(scenario / "tmp")
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, dest)
            copied.append(dest)
    then = time.time() - FOUR_DAYS_S
    for path in copied:
        os.utime(path, (then, then))
    return [p for p in copied if p.suffix == ".jsonl"]


def _replayed_roots(home: Path, tmp: Path, *folders: str) -> dict[str, dict[str, Any]]:
    """The root span of every prompt, as ``copilot-otel replay`` of the agents' folders exports it, by span id."""
    with OtlpReceiver() as other:
        paths = [str(home / folder) for folder in folders or (".claude", ".gemini")]
        args = ["replay", *paths, "--endpoint", other.http_endpoint]
        assert main([*args, "--no-progress", "--state-dir", str(tmp / "replay-state")]) == 0
        return {s["span_id"]: s for s in other.spans() if s["parent_span_id"] is None}


def _status(state: Path, *args: str) -> str:
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["status", *args, "--state-dir", str(state)]) == 0
    return out.getvalue()


@SERIAL
def test_finished_history_is_exported_at_once_and_lists_no_open_prompt(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    home = Path(os.environ["HOME"])
    logs = _copy_history(home)
    want = _replayed_roots(home, tmp_path)
    agents = {s["attributes"].get("copilot_otel.agent") for s in want.values()}
    assert agents == {"claude-code", "gemini"}
    assert all(s["attributes"][OUTCOME] == "completed" for s in want.values()), (
        "replay: every prompt completed"
    )
    state = tmp_path / "state"
    with WebhookReceiver() as hook:
        env = {"COPILOT_OTEL_NOTIFY_DESKTOP": "false", "COPILOT_OTEL_NOTIFY_WEBHOOK": hook.url,
               "COPILOT_OTEL_RUNAWAY_ACTION": "notify"}  # fmt: skip
        daemon = DaemonProcess(
            tmp_path / "no-copilot" / "session-state", state, receiver.http_endpoint, tmp_path / "daemon.log",
            env=env,
        ).start()  # fmt: skip
        try:
            # The default idle timeout (30 minutes) closes nothing here: each root comes from its log.
            receiver.wait_for(lambda r: {s["span_id"] for s in r.spans()} >= set(want), 60)
            lines = sum(len(p.read_bytes().splitlines()) for p in logs)
            daemon.until(
                "every line written to be read", lambda: _status_file(state).get("lines_read", 0) >= lines, 30
            )
            status = orjson.loads(_status(state, "--json"))
            said = _status(state)
        finally:
            assert daemon.terminate() == 0
    assert hook.bodies == [], "no notice for a runaway that ended days ago"
    got = {s["span_id"]: s for s in receiver.spans() if s["span_id"] in want}
    for span_id, span in got.items():
        assert span["attributes"][OUTCOME] == "completed", span["name"]
        assert span["end_ns"] == want[span_id]["end_ns"], "ended where replay ends it"
    assert status["sessions_open_prompts"] == 0 and status["open_prompts"] == [], status.get("open_prompts")
    assert "open prompts" in said and "running for" not in said, said
    out = daemon.output()
    assert "runaway agent in" not in out, "the history's runaway is no live warning"
    assert "runaway detections in the history: identical_tool_calls 1" in out, out[-3000:]
    # Claude Code's log says where each prompt ended; a Gemini log's last answer is known as the last only once
    # the log is over: its quiet history gives it up as soon as it is read.
    claude_sessions = {p.stem for p in logs if ".claude" in p.parts and "subagents" not in p.parts}
    closed = [line for line in out.splitlines() if "closed an unfinished prompt" in line]
    assert not [line for line in closed if any(s in line for s in claude_sessions)], closed
    assert "Traceback" not in out and " ERROR " not in out


@SERIAL
def test_a_claude_code_prompt_written_live_is_exported_at_its_own_end(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    """Sessions written line by line while the daemon follows them (the default idle timeout): each prompt's root
    arrives once the records after its final answer are written, complete, as replay exports it; a sub-agent's
    parent among them."""
    home = Path(os.environ["HOME"]) / ".claude"
    (home / "projects").mkdir(parents=True)
    daemon = DaemonProcess(
        tmp_path / "no-copilot" / "session-state", tmp_path / "state", receiver.http_endpoint,
        tmp_path / "daemon.log", env={"COPILOT_OTEL_NOTIFY_DESKTOP": "false"},
    ).start()  # fmt: skip
    try:
        written = [
            p
            for scenario in (
                OTHER / "claude-code" / "subagent",
                OTHER / "recorded" / "claude-code" / "resumed",
            )
            for p in _write_with_subagents(scenario, home)
        ]
        want = _replayed_roots(home.parent, tmp_path, ".claude")
        receiver.wait_for(lambda r: {s["span_id"] for s in r.spans()} >= set(want), 60)
        lines = sum(len(p.read_bytes().splitlines()) for p in written)
        daemon.until(
            "every line written to be read",
            lambda: _status_file(tmp_path / "state").get("lines_read", 0) >= lines,
            30,
        )
        status = orjson.loads(_status(tmp_path / "state", "--json"))
    finally:
        assert daemon.terminate() == 0
    assert len(want) == 3
    for span in receiver.spans():
        if span["span_id"] in want:
            assert span == {**want[span["span_id"]], "resource": span["resource"]}
    assert status["open_prompts"] == []
