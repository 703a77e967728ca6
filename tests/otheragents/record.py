"""Record real Claude Code and Codex CLI sessions offline, against scripted model servers on 127.0.0.1.

Nothing here is a test: it runs the real CLIs (installed from the npm registry, e.g.
``npm install --prefix /tmp/cli @anthropic-ai/claude-code@2.1.197 @openai/codex@0.171.0``) as an ordinary user
(Claude Code refuses ``--permission-mode bypassPermissions`` as root; run as root, this script creates the user
``agentrec`` and runs the CLIs as it), with a fresh ``$HOME`` per scenario, against two fakes in this process:

* an Anthropic Messages API (``POST /v1/messages``, server-sent events) for Claude Code (``ANTHROPIC_BASE_URL``);
* an OpenAI Responses API (``POST /v1/responses``, server-sent events) for Codex CLI (a custom model provider in
  ``$CODEX_HOME/config.toml`` with ``wire_api = "responses"``).

A :class:`Script` is chosen by the marker ``[[script:<name>]]`` in the newest user message that has one (a
sub-agent's task carries its own), and the step is the number of model replies after that message, so a retried
request gets the same answer. Each scenario's folder gets the CLI's files as written (their path below the CLI's
home kept: ``projects/…`` or ``sessions/…``), ``_capture/`` (the runs, stdout, stderr, every request answered)
and ``checks.json``: what the scripts told the model to do and how the runs ended, facts known without reading the
CLI's files. Usage::

    python -m tests.otheragents.record --cli-prefix /tmp/cli --out /tmp/recordings [--scenario resumed ...]
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

USER = "agentrec"
PROJECT_FILES = {
    "README.md": "# greeter\n\nA tiny greeter: `python3 src/app.py NAME`.\n",
    "src/app.py": "import sys\n\nfrom greet import greet\n\nprint(greet(sys.argv[1] if len(sys.argv) > 1 else 'world'))\n",
    "src/greet.py": 'def greet(name):\n    return f"Hello, {name}."\n',
    "tests/test_greet.py": (
        "import sys\nimport unittest\n\nsys.path.insert(0, 'src')\nfrom greet import greet\n\n\n"
        "class GreetTest(unittest.TestCase):\n    def test_greet(self):\n"
        "        self.assertEqual(greet('Ada'), 'Hello, Ada!')\n\n\nunittest.main()\n"
    ),
    "VERSION": "0.3.1\n",
}


# ---------------------------------------------------------------------------------------------- scripts
@dataclass(frozen=True)
class Tool:
    """One tool call a scripted reply asks for; ``expect``: how it is meant to end (``ok``, ``failed`` when run,
    ``interrupted`` by the scenario's SIGINT)."""

    name: str
    input: Any  # an object (a JSON function's arguments) or, for a freeform tool (apply_patch), a string
    namespace: str | None = None
    expect: str = "ok"


@dataclass(frozen=True)
class Step:
    """One scripted model reply; with ``error`` (an HTTP status) the server answers that instead, ``error_times``
    times (0: every time, so the CLI's retries run out)."""

    text: str | None = None
    tools: tuple[Tool, ...] = ()
    error: int | None = None
    error_times: int = 0


class HttpError(Exception):
    """A scripted HTTP error: the status, the API's JSON error body, a ``retry-after`` of 0 s."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(status)
        self.status = status
        self.body = body


@dataclass(frozen=True)
class Script:
    name: str
    steps: tuple[Step, ...]
    final: str

    def step(self, index: int) -> Step:
        return self.steps[index] if index < len(self.steps) else Step(self.final)


def marker(name: str) -> str:
    return f"[[script:{name}]]"


@dataclass
class Run:
    """One CLI process of a scenario: its prompt, and a SIGINT sent ``interrupt_after_s`` after the step
    ``interrupt_at`` (a script name and step index) was answered."""

    prompt: str
    resume: bool = False
    interrupt_at: tuple[str, int] | None = None
    interrupt_after_s: float = 2.0


@dataclass
class Scenario:
    name: str
    description: str
    scripts: tuple[Script, ...]
    runs: tuple[Run, ...]


def _bash(command: str, expect: str = "ok") -> Tool:
    return Tool("Bash", {"command": command, "description": command}, expect=expect)


def _exec(command: str, expect: str = "ok") -> Tool:
    return Tool("exec_command", {"cmd": command, "workdir": "{cwd}"}, expect=expect)


def claude_scenarios() -> list[Scenario]:
    return [
        Scenario(
            "resumed",
            "Two CLI processes on one session (--session-id, then --resume): two prompts in one log.",
            (
                Script("resume1", (Step("Reading the version.", (_bash("cat VERSION"),)),), "It is 0.3.1."),
                Script("resume2", (Step(None, (_bash("python3 src/app.py Ada"),)),), "It prints Hello, Ada."),
            ),
            (
                Run(f"Which version is this? {marker('resume1')}"),
                Run(f"And what does the app print for Ada? {marker('resume2')}", resume=True),
            ),
        ),
        Scenario(
            "runaway",
            "The same Bash call 25 times in a row, then an answer.",
            (Script("runaway", tuple(Step(None, (_bash("cat VERSION"),)) for _ in range(25)), "0.3.1."),),
            (Run(f"Check the version until you are sure. {marker('runaway')}"),),
        ),
        Scenario(
            "abort-mid-tool",
            "A Bash sleep 30; SIGINT to the CLI's process group 2 s after the model asked for it.",
            (
                Script(
                    "abort", (Step("Waiting for the build.", (_bash("sleep 30", "interrupted"),)),), "Done."
                ),
            ),
            (Run(f"Wait for the build. {marker('abort')}", interrupt_at=("abort", 0)),),
        ),
        Scenario(
            "retries-exhausted",
            "A Bash call, then every request gets HTTP 429 (retry-after 0) until the CLI gives up.",
            (Script("exhausted", (Step(None, (_bash("cat VERSION"),)), Step(error=429)), "Never sent."),),
            (Run(f"Which version is this? {marker('exhausted')}"),),
        ),
        Scenario(
            "subagent-tools-fail",
            "The Agent tool starts a sub-agent whose Bash (exit 1) and Read (missing file) both fail.",
            (
                Script(
                    "subfailmain",
                    (
                        Step(
                            "Delegating.",
                            (
                                Tool(
                                    "Agent",
                                    {
                                        "description": "Run tests and read config",
                                        "subagent_type": "general-purpose",
                                        "prompt": f"Run the tests and read config.yaml. {marker('subfail')}",
                                    },
                                ),
                            ),
                        ),
                    ),
                    "The sub-agent reports failing tests and no config.yaml.",
                ),
                Script(
                    "subfail",
                    (
                        Step(None, (_bash("python3 tests/test_greet.py", "failed"),)),
                        Step(None, (Tool("Read", {"file_path": "{cwd}/config.yaml"}, expect="failed"),)),
                    ),
                    "The test fails and config.yaml does not exist.",
                ),
            ),
            (Run(f"Use a sub-agent to run the tests and read config.yaml. {marker('subfailmain')}"),),
        ),
    ]


def codex_scenarios() -> list[Scenario]:
    multi = "multi_agent_v1"
    return [
        Scenario(
            "resumed",
            "codex exec, then codex exec resume <thread id>: two turns appended to one rollout.",
            (
                Script("resume1", (Step("Reading the version.", (_exec("cat VERSION"),)),), "It is 0.3.1."),
                Script("resume2", (Step(None, (_exec("python3 src/app.py Ada"),)),), "It prints Hello, Ada."),
            ),
            (
                Run(f"Which version is this? {marker('resume1')}"),
                Run(f"And what does the app print for Ada? {marker('resume2')}", resume=True),
            ),
        ),
        Scenario(
            "runaway",
            "The same exec_command 25 times in a row, then an answer.",
            (Script("runaway", tuple(Step(None, (_exec("cat VERSION"),)) for _ in range(25)), "0.3.1."),),
            (Run(f"Check the version until you are sure. {marker('runaway')}"),),
        ),
        Scenario(
            "abort-mid-tool",
            "An exec_command sleep 30; SIGINT to the CLI's process group 2 s after the model asked for it.",
            (
                Script(
                    "abort", (Step("Waiting for the build.", (_exec("sleep 30", "interrupted"),)),), "Done."
                ),
            ),
            (Run(f"Wait for the build. {marker('abort')}", interrupt_at=("abort", 0)),),
        ),
        Scenario(
            "retries-exhausted",
            "An exec_command, then every request gets HTTP 429 (retry-after 0) until the CLI gives up.",
            (Script("exhausted", (Step(None, (_exec("cat VERSION"),)), Step(error=429)), "Never sent."),),
            (Run(f"Which version is this? {marker('exhausted')}"),),
        ),
        Scenario(
            "subagent-tools-fail",
            "spawn_agent: the sub-agent's two exec_command calls exit 1; the parent waits for it and closes it.",
            (
                Script(
                    "subfailmain",
                    (
                        Step(
                            "Delegating.",
                            (Tool("spawn_agent", {"message": f"Run the tests. {marker('subfail')}"}, multi),),
                        ),
                        Step(
                            None,
                            (Tool("wait_agent", {"targets": ["{agent_id}"], "timeout_ms": 60000}, multi),),
                        ),
                        Step(None, (Tool("close_agent", {"target": "{agent_id}"}, multi),)),
                    ),
                    "The sub-agent reports failing tests and no config.yaml.",
                ),
                Script(
                    "subfail",
                    (
                        Step(None, (_exec("python3 tests/test_greet.py", "failed"),)),
                        Step(None, (_exec("cat config.yaml", "failed"),)),
                    ),
                    "The test fails and config.yaml does not exist.",
                ),
            ),
            (Run(f"Use a sub-agent to run the tests. {marker('subfailmain')}"),),
        ),
    ]


# ---------------------------------------------------------------------------------------------- the fakes
def _texts(content: Any) -> Iterator[str]:
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                yield part["text"]


def _find_script(scripts: Mapping[str, Script], texts: list[str]) -> Script | None:
    for text in texts:
        for name, script in scripts.items():
            if marker(name) in text:
                return script
    return None


@dataclass
class Server:
    """Both fakes on one port (``/v1/messages`` and ``/v1/responses``); every request answered is logged."""

    scripts: dict[str, Script]
    cwd: str
    log: list[dict[str, Any]] = field(default_factory=list)
    answered: threading.Event = field(default_factory=threading.Event)
    errors_sent: dict[tuple[str, int], int] = field(default_factory=dict)
    watch: tuple[str, int] | None = None
    httpd: http.server.ThreadingHTTPServer | None = None

    def __enter__(self) -> Server:
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                if self.path.startswith("/v1/messages/count_tokens"):
                    self._json({"input_tokens": len(json.dumps(body)) // 4})
                elif self.path.startswith(("/v1/messages", "/v1/responses")):
                    try:
                        events = (server.anthropic if "messages" in self.path else server.responses)(body)
                    except HttpError as exc:
                        data = json.dumps(exc.body).encode()
                        self.send_response(exc.status)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("retry-after", "0")
                        self.send_header("Content-Length", str(len(data)))
                        self.end_headers()
                        self.wfile.write(data)
                        return
                    self._sse(events)
                else:
                    self.send_error(404)

            def _json(self, obj: Any) -> None:
                data = json.dumps(obj).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _sse(self, events: list[tuple[str, dict[str, Any]]]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.end_headers()
                for name, data in events:
                    self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                self.wfile.flush()
                self.close_connection = True

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.httpd is not None
        self.httpd.shutdown()
        self.httpd.server_close()

    @property
    def base_url(self) -> str:
        assert self.httpd is not None
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def _pick(
        self, body: Mapping[str, Any], user_texts: list[str], replies_after: int
    ) -> tuple[Script, int, Step]:
        script = _find_script(self.scripts, user_texts) or Script("unscripted", (), "OK.")
        step = script.step(replies_after)
        key = (script.name, replies_after)
        failing = step.error is not None and (
            step.error_times == 0 or self.errors_sent.get(key, 0) < step.error_times
        )
        self.log.append(
            {
                "seq": len(self.log) + 1,
                "time": time.time(),
                "script": script.name,
                "step_index": replies_after,
                "model": body.get("model"),
                "bytes": len(json.dumps(body)),
                "http_error": step.error if failing else None,
            }
        )
        if failing and step.error is not None:
            self.errors_sent[key] = self.errors_sent.get(key, 0) + 1
            anthropic = "messages" in body
            raise HttpError(
                step.error,
                {
                    "type": "error",
                    "error": {"type": "rate_limit_error", "message": "Rate limited (scripted)."},
                }
                if anthropic
                else {
                    "error": {
                        "message": "Rate limit reached (scripted).",
                        "type": "requests",
                        "code": "rate_limit_exceeded",
                    }
                },
            )
        if self.watch == key:
            self.answered.set()
        return script, replies_after, step

    def _fill(self, value: Any, agent_id: str) -> Any:
        if isinstance(value, str):
            return value.replace("{cwd}", self.cwd).replace("{agent_id}", agent_id)
        if isinstance(value, list):
            return [self._fill(v, agent_id) for v in value]
        if isinstance(value, dict):
            return {k: self._fill(v, agent_id) for k, v in value.items()}
        return value

    # Anthropic Messages API --------------------------------------------------------------------------
    def anthropic(self, body: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        # newest user message with a marker; the step: assistant messages after it
        script, index, step = None, 0, Step("OK.")
        for i in range(len(messages) - 1, -1, -1):
            if messages[i].get("role") == "user" and _find_script(
                self.scripts, list(_texts(messages[i].get("content")))
            ):
                replies = sum(1 for m in messages[i + 1 :] if m.get("role") == "assistant")
                script, index, step = self._pick(body, list(_texts(messages[i].get("content"))), replies)
                break
        else:
            self._pick(body, [], 0)
        name = script.name if script else "unscripted"
        message_id = f"msg_{name}_{index}_{uuid.uuid4().hex[:8]}"
        usage = {
            "input_tokens": len(json.dumps(body)) // 4,
            "output_tokens": 1,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        }
        events: list[tuple[str, dict[str, Any]]] = [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": message_id,
                        "type": "message",
                        "role": "assistant",
                        "model": body.get("model"),
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": usage,
                    },
                },
            ),
        ]
        blocks: list[dict[str, Any]] = []
        if step.text:
            blocks.append({"type": "text", "text": step.text})
        for n, tool in enumerate(step.tools):
            blocks.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_{name}_{index}_{n}",
                    "name": tool.name,
                    "input": self._fill(tool.input, ""),
                }
            )
        out_tokens = 0
        for i, block in enumerate(blocks):
            if block["type"] == "text":
                events.append(
                    (
                        "content_block_start",
                        {
                            "type": "content_block_start",
                            "index": i,
                            "content_block": {"type": "text", "text": ""},
                        },
                    )
                )
                events.append(
                    (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": i,
                            "delta": {"type": "text_delta", "text": block["text"]},
                        },
                    )
                )
                out_tokens += len(block["text"]) // 4 + 1
            else:
                start = {**block, "input": {}}
                events.append(
                    (
                        "content_block_start",
                        {"type": "content_block_start", "index": i, "content_block": start},
                    )
                )
                partial = json.dumps(block["input"])
                events.append(
                    (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": i,
                            "delta": {"type": "input_json_delta", "partial_json": partial},
                        },
                    )
                )
                out_tokens += len(partial) // 4 + 1
            events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
        events.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "tool_use" if step.tools else "end_turn", "stop_sequence": None},
                    "usage": {"output_tokens": out_tokens + 10},
                },
            )
        )
        events.append(("message_stop", {"type": "message_stop"}))
        return events

    # OpenAI Responses API ----------------------------------------------------------------------------
    def responses(self, body: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        items = [i for i in body.get("input") or [] if isinstance(i, dict)]
        outputs = {"function_call", "custom_tool_call", "reasoning"}
        script, index, step = None, 0, Step("OK.")
        agent_id = ""
        for item in items:
            if item.get("type") == "function_call_output" and isinstance(item.get("output"), str):
                try:
                    found = json.loads(item["output"])
                except ValueError:
                    continue
                if isinstance(found, dict) and isinstance(found.get("agent_id"), str):
                    agent_id = found["agent_id"]
        for i in range(len(items) - 1, -1, -1):
            item = items[i]
            texts = list(_texts(item.get("content"))) if item.get("role") == "user" else []
            if texts and _find_script(self.scripts, texts):
                replies, previous_output = 0, False
                for later in items[i + 1 :]:
                    is_output = later.get("type") in outputs or (
                        later.get("type") == "message" and later.get("role") == "assistant"
                    )
                    replies += is_output and not previous_output
                    previous_output = is_output
                script, index, step = self._pick(body, texts, replies)
                break
        else:
            self._pick(body, [], 0)
        name = script.name if script else "unscripted"
        response_id = f"resp_{name}_{index}_{uuid.uuid4().hex[:8]}"
        output: list[dict[str, Any]] = []
        if step.text:
            output.append(
                {
                    "type": "message",
                    "id": f"msg_{name}_{index}",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": step.text, "annotations": []}],
                }
            )
        for n, tool in enumerate(step.tools):
            call_id = f"call_{name}_{index}_{n}"
            if isinstance(tool.input, str):
                output.append(
                    {
                        "type": "custom_tool_call",
                        "id": f"ctc_{name}_{index}_{n}",
                        "status": "completed",
                        "call_id": call_id,
                        "name": tool.name,
                        "input": self._fill(tool.input, agent_id),
                    }
                )
            else:
                call: dict[str, Any] = {
                    "type": "function_call",
                    "id": f"fc_{name}_{index}_{n}",
                    "status": "completed",
                    "call_id": call_id,
                    "name": tool.name,
                    "arguments": json.dumps(self._fill(tool.input, agent_id)),
                }
                if tool.namespace:
                    call["namespace"] = tool.namespace
                output.append(call)
        input_tokens = len(json.dumps(body)) // 4
        output_tokens = sum(len(json.dumps(o)) for o in output) // 4 + 10
        response = {
            "id": response_id,
            "object": "response",
            "status": "completed",
            "model": body.get("model"),
            "output": output,
            "usage": {
                "input_tokens": input_tokens,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": output_tokens,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": input_tokens + output_tokens,
            },
        }
        events: list[tuple[str, dict[str, Any]]] = [
            (
                "response.created",
                {"type": "response.created", "response": {**response, "status": "in_progress", "output": []}},
            ),
        ]
        for n, item in enumerate(output):
            events.append(
                (
                    "response.output_item.added",
                    {"type": "response.output_item.added", "output_index": n, "item": item},
                )
            )
            events.append(
                (
                    "response.output_item.done",
                    {"type": "response.output_item.done", "output_index": n, "item": item},
                )
            )
        events.append(("response.completed", {"type": "response.completed", "response": response}))
        return events


# ---------------------------------------------------------------------------------------------- running
def ensure_user(name: str = USER) -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", name], check=True)
        return pwd.getpwnam(name)


def _chown_tree(path: Path, user: pwd.struct_passwd) -> None:
    for root, dirs, files in os.walk(path):
        for entry in [root, *(os.path.join(root, n) for n in dirs + files)]:
            os.chown(entry, user.pw_uid, user.pw_gid)


def _project(folder: Path) -> None:
    for rel, text in PROJECT_FILES.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    git = ["git", "-c", "user.name=rec", "-c", "user.email=rec@example.invalid"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=folder, check=True)
    subprocess.run([*git, "add", "."], cwd=folder, check=True)
    subprocess.run([*git, "commit", "-qm", "init"], cwd=folder, check=True)


def record(cli: str, scenario: Scenario, prefix: Path, out: Path, work: Path) -> dict[str, Any]:
    """Run one scenario's CLI processes; copy the CLI's files and the capture to ``out/<cli>/<scenario>``."""
    user = ensure_user() if os.geteuid() == 0 else pwd.getpwuid(os.geteuid())
    base = work / cli / scenario.name
    shutil.rmtree(base, ignore_errors=True)
    home, project = base / "home", base / "project"
    home.mkdir(parents=True)
    project.mkdir(parents=True)
    _project(project)
    scripts = {s.name: s for s in scenario.scripts}
    bin_dir = prefix / "node_modules" / ".bin"
    runs: list[dict[str, Any]] = []
    stdout_all: list[str] = []
    stderr_all: list[str] = []
    session_id = str(uuid.uuid4())
    with Server(scripts, str(project)) as server:
        env = {
            "HOME": str(home),
            "PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin",
            "USER": user.pw_name,
            "LOGNAME": user.pw_name,
            "SHELL": "/bin/bash",
            "LANG": "C.UTF-8",
            "TERM": "dumb",
        }
        if cli == "claude-code":
            env.update(
                {
                    "ANTHROPIC_BASE_URL": server.base_url,
                    "ANTHROPIC_API_KEY": "sk-ant-fake-" + "x" * 40,
                    "DISABLE_TELEMETRY": "1",
                    "DISABLE_AUTOUPDATER": "1",
                    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                }
            )
        else:
            env["FAKE_OPENAI_API_KEY"] = "sk-fake-" + "x" * 40
            (home / ".codex").mkdir()
            (home / ".codex" / "config.toml").write_text(
                'model = "gpt-5.5"\nmodel_provider = "fakelocal"\ncheck_for_update_on_startup = false\n\n'
                '[model_providers.fakelocal]\nname = "Fake local model server"\n'
                f'base_url = "{server.base_url}/v1"\nenv_key = "FAKE_OPENAI_API_KEY"\nwire_api = "responses"\n'
                "request_max_retries = 4\nstream_max_retries = 2\n\n[analytics]\nenabled = false\n"
            )
        _chown_tree(base, user)
        for run in scenario.runs:
            if cli == "claude-code":
                argv = [
                    "claude",
                    "-p",
                    run.prompt,
                    "--output-format",
                    "stream-json",
                    "--verbose",
                    "--permission-mode",
                    "bypassPermissions",
                    *(["--resume", session_id] if run.resume else ["--session-id", session_id]),
                ]
            else:
                argv = [
                    "codex",
                    "exec",
                    "--json",
                    "--dangerously-bypass-approvals-and-sandbox",
                    *(["resume", session_id] if run.resume else []),
                    run.prompt,
                ]
            server.watch = run.interrupt_at
            server.answered.clear()
            started = time.time()
            proc = subprocess.Popen(
                [str(bin_dir / argv[0]), *argv[1:]],
                cwd=project,
                env=env,
                user=user.pw_uid,
                group=user.pw_gid,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            signalled = None
            if run.interrupt_at is not None and server.answered.wait(60):
                time.sleep(run.interrupt_after_s)
                os.killpg(proc.pid, signal.SIGINT)  # as Ctrl-C does: the whole foreground group
                signalled = "SIGINT"
            try:
                stdout, stderr = proc.communicate(timeout=300)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                stdout, stderr = proc.communicate()
                signalled = (signalled or "") + "+SIGKILL"
            text = stdout.decode("utf-8", "replace")
            if cli == "codex" and not run.resume:
                for line in text.splitlines():
                    try:
                        event = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(event, dict) and event.get("type") == "thread.started":
                        session_id = str(event.get("thread_id"))
            stdout_all.append(text)
            stderr_all.append(stderr.decode("utf-8", "replace"))
            runs.append(
                {
                    "prompt": run.prompt,
                    "argv": argv,
                    "exit_code": proc.returncode,
                    "signal": signalled,
                    "wall_s": round(time.time() - started, 3),
                }
            )
        requests = list(server.log)
    dest = out / cli / scenario.name
    shutil.rmtree(dest, ignore_errors=True)
    tree = home / (".claude/projects" if cli == "claude-code" else ".codex/sessions")
    shutil.copytree(tree, dest / tree.name)
    capture = dest / "_capture"
    capture.mkdir()
    (capture / "stdout.jsonl").write_text("".join(stdout_all))
    (capture / "stderr.txt").write_text("".join(stderr_all))
    (capture / "model-requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in requests))
    version = subprocess.run(
        [str(bin_dir / ("claude" if cli == "claude-code" else "codex")), "--version"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    ).stdout.strip()
    id_prefix = "toolu" if cli == "claude-code" else "call"
    checks = {
        "scenario": scenario.name,
        "description": scenario.description,
        "cli_version": version,
        "session_id": session_id,
        "runs": runs,
        "human_prompts": [r.prompt for r in scenario.runs],
        "scripted_tool_calls": [
            {
                "script": s.name,
                "step": i,
                "id": f"{id_prefix}_{s.name}_{i}_{n}",
                "name": t.name,
                "namespace": t.namespace,
                "expect": t.expect,
                "answered": any(r["script"] == s.name and r["step_index"] == i for r in requests),
            }
            for s in scenario.scripts
            for i, step in enumerate(s.steps)
            for n, t in enumerate(step.tools)
        ],
        # a sub-agent's script, and the call whose input carries its marker
        "subagents": [
            {"script": sub.name, "spawned_by": f"{id_prefix}_{s.name}_{i}_{n}"}
            for sub in scenario.scripts
            for s in scenario.scripts
            for i, step in enumerate(s.steps)
            for n, t in enumerate(step.tools)
            if marker(sub.name) in json.dumps(t.input)
        ],
        "requests_answered": {
            s.name: sum(1 for r in requests if r["script"] == s.name and not r["http_error"])
            for s in scenario.scripts
        },
        "http_errors_sent": {
            s.name: sum(1 for r in requests if r["script"] == s.name and r["http_error"])
            for s in scenario.scripts
        },
        "files": sorted(
            str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file() and "_capture" not in p.parts
        ),
    }
    (dest / "checks.json").write_text(json.dumps(checks, indent=1) + "\n")
    return checks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--cli-prefix", type=Path, required=True, help="npm --prefix the CLIs are installed in"
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--work",
        type=Path,
        help="where the homes and projects are made (default: ~USER/agents; Codex refuses to "
        "create its helper binaries under /tmp)",
    )
    parser.add_argument("--cli", choices=["claude-code", "codex"], action="append")
    parser.add_argument("--scenario", action="append")
    args = parser.parse_args(argv)
    user = ensure_user() if os.geteuid() == 0 else pwd.getpwuid(os.geteuid())
    work: Path = args.work or Path(user.pw_dir) / "agents"
    work.mkdir(parents=True, exist_ok=True)
    for cli in args.cli or ["claude-code", "codex"]:
        for scenario in claude_scenarios() if cli == "claude-code" else codex_scenarios():
            if args.scenario and scenario.name not in args.scenario:
                continue
            checks = record(cli, scenario, args.cli_prefix, args.out, work)
            print(
                cli,
                scenario.name,
                [(r["exit_code"], r["signal"]) for r in checks["runs"]],
                checks["requests_answered"],
                file=sys.stderr,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
