"""Capture session shapes only the Copilot CLI's programmatic modes produce, as test fixtures.

Usage::

    python -m tests.realcli.rpc_shapes OUT_DIR [--only NAME ...] [--base DIR]

Each shape runs the **real** Copilot CLI (the native binary, see ``harness.py``) in a clean
environment with a throw-away ``$HOME``, against the scripted fake model of
``fake_model.py`` on 127.0.0.1, driven over JSON-RPC by the clients of ``rpc.py``:

* ``steering-queued`` -- ``copilot --headless --stdio``: while a prompt's tool runs, a
  ``session.send`` with ``mode: "immediate"`` (steering) and one with ``"enqueue"`` (queued).
* ``steering-late`` -- headless: ``mode: "immediate"`` while the model writes a final, tool-less
  answer (the CLI records it as ``delivery: "queued"``, a new prompt).
* ``permissions`` -- headless: every ``permission.requested`` is answered after a visible
  delay through ``session.permissions.handlePendingPermissionRequest``; one is rejected.
* ``acp-model-change`` -- ``copilot --acp``: a prompt, ``session/set_model``, a second prompt.
* ``acp-cancel`` -- ACP: a prompt cancelled by ``session/cancel`` while the model hangs, then
  a prompt whose tool is running when a second ``session/prompt`` arrives.

``OUT_DIR/<name>/`` gets the session folder's files verbatim (``events.jsonl``,
``workspace.yaml``, …; the rewind snapshot copies are left out, their ``tracking.json`` kept)
and ``_capture/``: ``otel.jsonl`` (the CLI's own file export, when it writes one),
``rpc.jsonl`` (both directions, credentials redacted), ``stderr.txt``,
``model-requests.jsonl``, the process log and ``meta.json``. ``NOTES.md`` is written by
hand after looking at a capture; a rerun never touches it.

The working folders are fixed (``<base>/<name>/home`` and ``<base>/<name>/project``, emptied
before each run) so reruns record the same paths.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from tests.realcli.fake_model import FakeModelServer, RecordedRequest, Script, Step, ToolCall, prompt_for
from tests.realcli.harness import MODEL, _warm_cache, build_env, find_copilot_binary, session_dir
from tests.realcli.rpc import AcpClient, HeadlessClient, JsonRpcPeer, TranscriptEntry

__all__ = ["SHAPES", "Shape", "capture", "main"]

DEFAULT_BASE = Path("/tmp/copilot-otel-cli-shapes")
OTHER_MODEL = "gpt-5"
# Upper bound for one whole shape; a stuck CLI is killed rather than waited for.
EVENT_TIMEOUT_S = 60.0
CLI_FLAGS = {
    "headless": ("--headless", "--no-auto-update", "--stdio"),
    # --acp refuses --session-id ("the argument '--acp' cannot be used with '--session-id <id>'").
    "acp": ("--acp", "--no-auto-update"),
}
APPROVE_ONCE = {"kind": "approve-once"}
# The rewind snapshots hold copies of edited files: bulky and not part of the event shape.
SKIPPED_SNAPSHOT_DIR = "rewind-file-snapshots"
KEPT_SNAPSHOT_FILES = frozenset({"tracking.json"})


@dataclass
class Capture:
    """Everything one shape's run needs and records."""

    name: str
    binary: Path
    home: Path
    workdir: Path
    server: FakeModelServer
    stderr: IO[bytes]
    otel_path: Path
    actions: list[dict[str, Any]] = field(default_factory=list)
    extra_meta: dict[str, Any] = field(default_factory=dict)
    timers: list[threading.Timer] = field(default_factory=list)
    transcript: list[TranscriptEntry] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        """The clean BYOK-offline environment plus the CLI's own OTel file export."""
        return build_env(
            self.home,
            self.server.base_url,
            {
                "COPILOT_OTEL_FILE_EXPORTER_PATH": str(self.otel_path),
                "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true",
            },
        )

    def mark(self, what: str, **details: Any) -> None:
        """Record a driver action (wall clock, to line up with the events' timestamps)."""
        self.actions.append({"time": time.time(), "action": what, **details})

    def later(self, delay_s: float, action: Callable[[], None]) -> None:
        """Run ``action`` after ``delay_s`` on a timer thread (joined before the capture is saved)."""
        timer = threading.Timer(delay_s, action)
        timer.daemon = True
        self.timers.append(timer)
        timer.start()


@dataclass(frozen=True)
class Shape:
    """One session shape: its scripts, how the CLI is started and how it is driven."""

    name: str
    description: str
    protocol: str  # "headless" or "acp"
    scripts: tuple[Script, ...]
    drive: Callable[[Capture], str]  # returns the session id
    session_id: str | None = None  # fixed id (headless only: ACP assigns its own)
    prepare: Callable[[Path], None] = lambda _workdir: None

    @property
    def argv_flags(self) -> list[str]:
        """The CLI flags after the binary."""
        return list(CLI_FLAGS[self.protocol])


# -- shared driving helpers -----------------------------------------------------------------


def _bash(command: str, description: str, **extra: Any) -> ToolCall:
    return ToolCall("bash", {"command": command, "description": description, **extra})


def _tool_script(name: str, call: ToolCall, answer: str, content: str = "") -> Script:
    """Step 0 calls ``call`` (with optional text), step 1 answers ``answer``."""
    return Script(name, (Step(content=content, tool_calls=(call,)), Step(content=answer)))


def _start_headless(cap: Capture) -> HeadlessClient:
    argv = [str(cap.binary), *CLI_FLAGS["headless"]]
    cap.mark("spawn", argv=argv[1:])
    return HeadlessClient(argv, cwd=cap.workdir, env=cap.env(), stderr=cap.stderr)


def _start_acp(cap: Capture) -> AcpClient:
    argv = [str(cap.binary), *CLI_FLAGS["acp"]]
    cap.mark("spawn", argv=argv[1:])
    return AcpClient(argv, cwd=cap.workdir, env=cap.env(), stderr=cap.stderr)


def _create_headless_session(cap: Capture, client: HeadlessClient, session_id: str) -> None:
    # Headless sessions ignore COPILOT_PROVIDER_*: the BYOK provider goes into session.create.
    # streaming=True: without it the CLI asks for a non-streamed reply the fake cannot give.
    result = client.create_session(
        sessionId=session_id,
        model=MODEL,
        clientName="copilot-otel-capture",
        workingDirectory=str(cap.workdir),
        provider={"type": "openai", "baseUrl": cap.server.base_url, "apiKey": "fake-key"},
        streaming=True,
        requestPermission=True,
    )
    cap.mark("session.create", sessionId=result.get("sessionId"))


def _answer_permissions(
    cap: Capture,
    client: HeadlessClient,
    session_id: str,
    decide: Callable[[dict[str, Any]], tuple[float, dict[str, Any]]],
) -> None:
    """Answer each ``permission.requested`` event with ``decide(event) -> (delay_s, result)``."""

    def on_notification(message: dict[str, Any]) -> None:
        params = message.get("params") or {}
        event = params.get("event") or {}
        if message.get("method") != "session.event" or event.get("type") != "permission.requested":
            return
        if params.get("sessionId") != session_id:
            return
        delay_s, result = decide(event)
        request_id = event["data"]["requestId"]
        tool_call = (event["data"].get("permissionRequest") or {}).get("toolCallId")

        def answer() -> None:
            cap.mark("answer permission", requestId=request_id, toolCallId=tool_call, result=result)
            client.answer_permission(session_id, request_id, result)

        cap.later(delay_s, answer)

    client.listeners.append(on_notification)


def _wait_idle_after(client: HeadlessClient, session_id: str, event_type: str, where: Any) -> None:
    """Wait for an event of ``event_type`` matching ``where``, then for the next ``session.idle``."""
    client.wait_for_event(session_id, event_type, where, timeout_s=EVENT_TIMEOUT_S)
    start = next(
        i
        for i, n in enumerate(client.notifications)
        if (n.get("params") or {}).get("event", {}).get("type") == event_type and where(n["params"]["event"])
    )
    client.wait_for_event(session_id, "session.idle", timeout_s=EVENT_TIMEOUT_S, start=start)


def _finish(cap: Capture, client: JsonRpcPeer) -> None:
    for timer in cap.timers:
        timer.join(EVENT_TIMEOUT_S)
    cap.mark("close stdin")
    code = client.close()
    cap.transcript = list(client.transcript)
    cap.extra_meta["exit_code"] = code
    cap.mark("exited", exit_code=code)


def _approve_all(cap: Capture, client: AcpClient) -> None:
    def on_permission(request_id: Any, params: Any) -> Any:
        cap.mark("answer session/request_permission", id=request_id, optionId="allow_once")
        return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}

    client.handlers["session/request_permission"] = on_permission


def _open_acp_session(cap: Capture, client: AcpClient) -> str:
    """``initialize`` + ``session/new`` (the agent picks the id; ``_meta.sessionId`` is ignored)."""
    cap.mark("initialize")
    client.initialize()
    cap.mark("session/new")
    session = client.new_session(cap.workdir)
    # No "models" list comes back (1.0.102): session/set_model takes any id.
    cap.extra_meta["session_new_result_keys"] = sorted(session)
    return str(session["sessionId"])


def _run_acp(cap: Capture, body: Callable[[Capture, AcpClient, str], None]) -> str:
    """One ACP session with every permission approved: ``body(cap, client, session_id)``, then close."""
    client = _start_acp(cap)
    _approve_all(cap, client)
    try:
        session_id = _open_acp_session(cap, client)
        body(cap, client, session_id)
    finally:
        _finish(cap, client)
    return session_id


# -- steering-queued ------------------------------------------------------------------------

STEERING_SESSION = "0d000001-0000-4000-8000-000000000001"
STEERING_TEXT = "Also update the changelog when the build is done."
QUEUED_TEXT = "Afterwards, list the files in the project."


def _run_headless(
    cap: Capture,
    session_id: str,
    prompt: str,
    final_marker: str,
    during: Callable[[HeadlessClient], None] = lambda _client: None,
    decide: Callable[[dict[str, Any]], tuple[float, dict[str, Any]]] = lambda _event: (0.2, APPROVE_ONCE),
) -> str:
    """One headless session: create it, send ``prompt``, run ``during``, wait for the reply
    carrying ``final_marker`` and the ``session.idle`` after it, destroy the session."""
    client = _start_headless(cap)
    try:
        client.request("ping", {"message": "capture"})
        _create_headless_session(cap, client, session_id)
        _answer_permissions(cap, client, session_id, decide)
        cap.mark("session.send (prompt)")
        client.send(session_id, prompt).wait()
        during(client)
        _wait_idle_after(
            client,
            session_id,
            "assistant.message",
            lambda e: final_marker in (e["data"].get("content") or ""),
        )
        cap.mark("session.destroy")
        client.request("session.destroy", {"sessionId": session_id})
    finally:
        _finish(cap, client)
    return session_id


def _drive_steering(cap: Capture) -> str:
    def steer_and_queue(client: HeadlessClient) -> None:
        client.wait_for_event(
            STEERING_SESSION,
            "tool.execution_start",
            lambda e: e["data"].get("toolCallId") == "call_steer_0_0",
            timeout_s=EVENT_TIMEOUT_S,
        )
        time.sleep(1.0)  # the tool (sleep 6) is running now
        cap.mark("session.send mode=immediate (steering)")
        steering = client.send(STEERING_SESSION, prompt_for("steered", STEERING_TEXT), mode="immediate")
        cap.extra_meta["steering_send_result"] = steering.wait()
        time.sleep(0.5)
        cap.mark("session.send mode=enqueue (queued)")
        queued = client.send(STEERING_SESSION, prompt_for("queued", QUEUED_TEXT), mode="enqueue")
        cap.extra_meta["queued_send_result"] = queued.wait()

    return _run_headless(
        cap, STEERING_SESSION, prompt_for("steer", "Run the build."), "[queued]", steer_and_queue
    )


STEERING_SCRIPTS = (
    _tool_script(
        "steer",
        _bash("echo building; sleep 6; echo built", "Run the build", initial_wait=30),
        "[steer] The build finished.",
        "Starting the build.",
    ),
    # Slow (3 s), so the enqueued message arrives while this turn still runs.
    Script(
        "steered",
        (Step(content="[steered] The build is done; I will update the changelog next.", delay_s=3.0),),
    ),
    _tool_script("queued", _bash("ls", "List the project files"), "[queued] The project holds README.md."),
)


# -- steering-late --------------------------------------------------------------------------

LATE_SESSION = "0d000003-0000-4000-8000-000000000003"
LATE_TEXT = "Actually, keep it to one sentence."


def _drive_steering_late(cap: Capture) -> str:
    def steer_during_final_answer(client: HeadlessClient) -> None:
        if not cap.server.wait_for_requests(1, script="explain", timeout_s=EVENT_TIMEOUT_S):
            raise TimeoutError("the model request never arrived")
        time.sleep(1.0)  # the (final, tool-less) answer is 3 s away
        cap.mark("session.send mode=immediate (steering) during the final answer")
        cap.extra_meta["steering_send_result"] = client.send(
            LATE_SESSION, prompt_for("late", LATE_TEXT), mode="immediate"
        ).wait()

    prompt = prompt_for("explain", "Explain what this project does.")
    return _run_headless(cap, LATE_SESSION, prompt, "[late]", steer_during_final_answer)


LATE_SCRIPTS = (
    Script("explain", (Step(content="[explain] It is a small demo project with a README.", delay_s=4.0),)),
    Script("late", (Step(content="[late] A demo project."),)),
)


# -- permissions ----------------------------------------------------------------------------

PERMISSIONS_SESSION = "0d000002-0000-4000-8000-000000000002"
PERMISSION_DELAY_S = {"call_perms_0_0": 1.5, "call_perms_0_1": 1.0, "call_perms_1_0": 2.0}
DENIED_CALL = "call_perms_1_0"


def _decide_permission(event: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    call = (event["data"].get("permissionRequest") or {}).get("toolCallId") or ""
    delay_s = PERMISSION_DELAY_S.get(call, 1.0)
    if call == DENIED_CALL:
        return delay_s, {"kind": "reject", "feedback": "Do not delete the build output."}
    return delay_s, APPROVE_ONCE


def _drive_permissions(cap: Capture) -> str:
    return _run_headless(
        cap,
        PERMISSIONS_SESSION,
        prompt_for("perms", "Tidy up the project."),
        "[perms-final]",
        decide=_decide_permission,
    )


PERMISSIONS_SCRIPTS = (
    Script(
        "perms",
        (
            Step(
                content="Let me look around and write notes.",
                tool_calls=(
                    _bash("ls -la", "List the project"),
                    ToolCall(
                        "create", {"path": "{cwd}/NOTES.md", "file_text": "# Notes\n\nTidy-up in progress.\n"}
                    ),
                ),
            ),
            Step(tool_calls=(_bash("rm -rf build", "Delete the build output"),)),
            Step(content="[perms-final] I listed the files and wrote NOTES.md; deleting build/ was denied."),
        ),
    ),
)


def _prepare_readme(workdir: Path) -> None:
    (workdir / "README.md").write_text("# demo\n\nA small project.\n", encoding="utf-8")


def _prepare_permissions(workdir: Path) -> None:
    _prepare_readme(workdir)
    (workdir / "build").mkdir(exist_ok=True)
    (workdir / "build" / "output.txt").write_text("compiled\n", encoding="utf-8")


# -- acp-model-change -----------------------------------------------------------------------


def _drive_acp_model_change(cap: Capture) -> str:
    return _run_acp(cap, _prompt_set_model_prompt)


def _prompt_set_model_prompt(cap: Capture, client: AcpClient, session_id: str) -> None:
    cap.mark("session/prompt 1")
    cap.extra_meta["prompt_1_result"] = client.prompt(
        session_id, prompt_for("first", "Check the project.")
    ).wait(EVENT_TIMEOUT_S)
    cap.mark("session/set_model", modelId=OTHER_MODEL)
    cap.extra_meta["set_model_result"] = client.set_model(session_id, OTHER_MODEL)
    cap.mark("session/prompt 2")
    cap.extra_meta["prompt_2_result"] = client.prompt(
        session_id, prompt_for("second", "Summarise what you found.")
    ).wait(EVENT_TIMEOUT_S)


MODEL_CHANGE_SCRIPTS = (
    _tool_script(
        "first",
        _bash("ls", "List the project files"),
        "[first] The project holds README.md.",
        "Looking at the files.",
    ),
    Script("second", (Step(content="[second] It is a small demo project with a README."),)),
)


# -- acp-cancel -----------------------------------------------------------------------------


def _drive_acp_cancel(cap: Capture) -> str:
    return _run_acp(cap, _cancel_then_overlap)


def _cancel_then_overlap(cap: Capture, client: AcpClient, session_id: str) -> None:
    cap.mark("session/prompt 1 (model hangs)")
    first = client.prompt(session_id, prompt_for("hang", "Explain the project."))
    if not cap.server.wait_for_requests(1, script="hang", timeout_s=EVENT_TIMEOUT_S):
        raise TimeoutError("the hanging model request never arrived")
    time.sleep(1.5)
    cap.mark("session/cancel")
    client.cancel(session_id)
    cap.extra_meta["prompt_1_result"] = first.wait(EVENT_TIMEOUT_S)
    cap.mark("session/prompt 2 (slow tool)")
    second = client.prompt(session_id, prompt_for("slowtool", "Run the slow job."))
    client.wait_for(
        lambda n: ((n.get("params") or {}).get("update") or {}).get("sessionUpdate") == "tool_call_update",
        EVENT_TIMEOUT_S,
    )
    time.sleep(2.0)  # the tool (sleep 20) is running now
    cap.mark("session/prompt 3 while prompt 2 runs")
    third = client.prompt(session_id, prompt_for("quick", "Never mind, just say hello."))
    cap.extra_meta["prompt_2_result"] = second.wait(EVENT_TIMEOUT_S)
    cap.extra_meta["prompt_3_result"] = third.wait(EVENT_TIMEOUT_S)


CANCEL_SCRIPTS = (
    Script("hang", (Step(hang=True),)),
    _tool_script(
        "slowtool",
        _bash("echo working; sleep 20; echo finished", "Slow job", initial_wait=60),
        "[slowtool] The slow job finished.",
        "Running the slow job.",
    ),
    Script("quick", (Step(content="[quick] Hello!"),)),
)


SHAPES: dict[str, Shape] = {
    s.name: s
    for s in (
        Shape(
            "steering-queued",
            "Headless SDK mode: a prompt whose bash tool sleeps 6 s; while it runs, session.send mode=immediate "
            "(steering) and then mode=enqueue (queued). Every permission is approved after 0.2 s.",
            "headless",
            STEERING_SCRIPTS,
            _drive_steering,
            STEERING_SESSION,
            _prepare_readme,
        ),
        Shape(
            "steering-late",
            "Headless SDK mode: session.send mode=immediate while the model is still producing a final answer "
            "without tools (4 s delay): there is no later turn to steer into.",
            "headless",
            LATE_SCRIPTS,
            _drive_steering_late,
            LATE_SESSION,
            _prepare_readme,
        ),
        Shape(
            "permissions",
            "Headless SDK mode: parallel bash ls + create NOTES.md (approved after 1.5 s and 1.0 s), then bash "
            "rm -rf build (rejected after 2.0 s with feedback), then a final answer.",
            "headless",
            PERMISSIONS_SCRIPTS,
            _drive_permissions,
            PERMISSIONS_SESSION,
            _prepare_permissions,
        ),
        Shape(
            "acp-model-change",
            f"ACP: a prompt (bash ls, approved via session/request_permission), session/set_model to "
            f"{OTHER_MODEL}, a second prompt.",
            "acp",
            MODEL_CHANGE_SCRIPTS,
            _drive_acp_model_change,
            None,
            _prepare_readme,
        ),
        Shape(
            "acp-cancel",
            "ACP: prompt 1 while the model hangs, cancelled by session/cancel after 1.5 s; prompt 2 runs a bash "
            "sleep 20, and 2 s into it prompt 3 arrives (cancelling prompt 2) and completes.",
            "acp",
            CANCEL_SCRIPTS,
            _drive_acp_cancel,
            None,
        ),
    )
}


# -- saving ---------------------------------------------------------------------------------


def _reduce_request(record: RecordedRequest, scripts: Mapping[str, Script]) -> dict[str, Any]:
    """One line of ``model-requests.jsonl``: system prompt as length+hash, tools as names."""
    line = record.as_dict()
    body = line.get("body")
    if isinstance(body, dict):
        body = dict(body)
        messages = []
        for message in body.get("messages") or []:
            if isinstance(message, dict) and message.get("role") == "system":
                text = (
                    message.get("content") if isinstance(message.get("content"), str) else json.dumps(message)
                )
                digest = hashlib.sha256(str(text).encode()).hexdigest()[:16]
                message = {**message, "content": f"<system prompt: {len(str(text))} chars, sha256 {digest}>"}
            messages.append(message)
        if "messages" in body:
            body["messages"] = messages
        if isinstance(body.get("tools"), list):
            body["tools"] = [
                (t.get("function") or {}).get("name", t.get("name")) if isinstance(t, dict) else t
                for t in body["tools"]
            ]
        line["body"] = body
    if record.script is not None and record.step_index is not None:
        step = scripts[record.script].step(record.step_index)
        reply: dict[str, Any] = {}
        if step.content:
            reply["content"] = step.content
        if step.tool_calls:
            reply["tool_calls"] = [{"name": c.name, "arguments": dict(c.arguments)} for c in step.tool_calls]
        if step.delay_s:
            reply["delay_s"] = step.delay_s
        if step.hang:
            reply["hang"] = True
        line["step"] = reply
    return line


def _copy_session_folder(source: Path, dest: Path) -> list[str]:
    copied = []
    for path in sorted(source.rglob("*")):
        rel = path.relative_to(source)
        if rel.parts[0] == SKIPPED_SNAPSHOT_DIR and path.is_file() and path.name not in KEPT_SNAPSHOT_FILES:
            continue
        target = dest / rel
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        elif path.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
            copied.append(str(rel))
    return copied


def _write_jsonl(path: Path, rows: Sequence[Any]) -> None:
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


def _cli_version(binary: Path) -> str:
    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30, check=True)
    return out.stdout.strip().splitlines()[0]


def capture(shape: Shape, out_dir: Path, base: Path, binary: Path) -> Path:
    """Run ``shape`` once and write its fixture folder ``out_dir/<name>``; returns that folder."""
    root = base / shape.name
    if root.exists():
        shutil.rmtree(root)
    home, workdir, scratch = root / "home", root / "project", root / "scratch"
    for folder in (home, workdir, scratch):
        folder.mkdir(parents=True)
    shape.prepare(workdir)
    scripts = {s.name: s for s in shape.scripts}
    with (scratch / "stderr.txt").open("wb") as stderr, FakeModelServer(scripts=scripts) as server:
        cap = Capture(shape.name, binary, home, workdir, server, stderr, scratch / "otel.jsonl")
        _warm_cache(binary, cap.env()["XDG_CACHE_HOME"])
        session_id = shape.drive(cap)
        requests = list(server.requests)
    # Only a finished run replaces the old fixture; its hand-written NOTES.md survives.
    dest = out_dir / shape.name
    notes = dest / "_capture" / "NOTES.md"
    kept = notes.read_bytes() if notes.exists() else None
    if dest.exists():
        shutil.rmtree(dest)
    (dest / "_capture").mkdir(parents=True)
    if kept is not None:
        (dest / "_capture" / "NOTES.md").write_bytes(kept)
    folder = session_dir(home, session_id)
    copied = _copy_session_folder(folder, dest)
    capture_dir = dest / "_capture"
    shutil.copy2(scratch / "stderr.txt", capture_dir / "stderr.txt")
    if cap.otel_path.exists():
        shutil.copy2(cap.otel_path, capture_dir / "otel.jsonl")
    logs = sorted((home / ".copilot" / "logs").glob("process-*.log"))
    for log in logs:
        shutil.copy2(log, capture_dir / log.name)
    _write_jsonl(capture_dir / "model-requests.jsonl", [_reduce_request(r, scripts) for r in requests])
    _write_jsonl(capture_dir / "rpc.jsonl", [e.as_dict() for e in cap.transcript])
    meta = {
        "scenario": shape.name,
        "description": shape.description,
        "session_id": session_id,
        "session_id_fixed": shape.session_id is not None,
        "cli_version": _cli_version(binary),
        "cli_package": "@github/copilot@1.0.102 (native binary @github/copilot-linux-x64)",
        "driven_by": (
            "copilot --headless --stdio: JSON-RPC 2.0 with Content-Length framing (github/copilot-sdk protocol)"
            if shape.protocol == "headless"
            else "copilot --acp: Agent Client Protocol, newline-delimited JSON-RPC 2.0 over stdio"
        ),
        "driver": "tests/realcli/rpc_shapes.py (clients in tests/realcli/rpc.py)",
        "argv": shape.argv_flags,
        "mode": (
            "BYOK offline: COPILOT_OFFLINE=true; provider {type: openai, baseUrl: http://127.0.0.1:<port>/v1} "
            "passed in session.create (the COPILOT_PROVIDER_* variables are set too; headless sessions ignore them)"
            if shape.protocol == "headless"
            else "BYOK offline: COPILOT_OFFLINE=true, COPILOT_PROVIDER_BASE_URL=http://127.0.0.1:<port>/v1, "
            "COPILOT_PROVIDER_TYPE=openai, COPILOT_MODEL=gpt-4.1"
        ),
        "model_backend": (
            "scripted fake model server on 127.0.0.1 (tests/realcli/fake_model.py: OpenAI chat-completions, "
            "streamed); everything else is the real CLI and its real tools"
        ),
        "working_directory": str(workdir),
        "home": str(home),
        "otel_export": (capture_dir / "otel.jsonl").exists(),
        "session_files": copied,
        "process_logs": [log.name for log in logs],
        "actions": cap.actions,
        **cap.extra_meta,
    }
    (capture_dir / "meta.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return dest


def main(argv: Sequence[str] | None = None) -> int:
    """Capture the RPC-only session shapes into OUT_DIR (one fixture folder per shape)."""
    parser = argparse.ArgumentParser(prog="python -m tests.realcli.rpc_shapes", description=main.__doc__)
    parser.add_argument(
        "out_dir", type=Path, help="where the fixture folders go (e.g. tests/fixtures/cli-shapes)"
    )
    parser.add_argument("--only", nargs="+", choices=sorted(SHAPES), help="capture only these shapes")
    parser.add_argument(
        "--base", type=Path, default=DEFAULT_BASE, help=f"run folders (default {DEFAULT_BASE})"
    )
    args = parser.parse_args(argv)
    binary = find_copilot_binary()
    if binary is None:
        print(
            "Copilot CLI not installed: run .ci/install-copilot-cli.sh (or set COPILOT_CLI_BIN)",
            file=sys.stderr,
        )
        return 2
    failed = []
    for name in args.only or list(SHAPES):
        started = time.monotonic()
        try:
            dest = capture(SHAPES[name], args.out_dir, args.base, binary)
        except Exception as exc:  # report it and go on with the next shape
            failed.append(name)
            print(f"{name}: FAILED: {exc!r}", file=sys.stderr)
            continue
        print(f"{name}: {dest} ({time.monotonic() - started:.1f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
