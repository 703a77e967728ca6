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
CLI's files (and when each of the CLI's files appeared, changed and vanished while the scenario ran: a CLI that
deletes a file leaves no trace of it otherwise; the last bytes read of a vanished file go to ``_capture/vanished/``).

Claude Code has two scenario sets (``--set``): those first recorded with 2.1.197 (``recorded/``) and those of
2.1.332 (background and parallel sub-agents, plan-mode and hook refusals, a fork, prompts queued on stdin, HTTP 429
and 500 retried, a titled session, an interactive session driven in tmux, what a status line command is
given), for which a run can fork
(``--resume <id> --fork-session``), set the permission mode or more arguments, feed stream-json on stdin while the
prompt runs, or run the CLI interactively (no ``-p``: in a detached ``tmux`` session, its first-start questions
answered in advance in ``~/.claude.json``, the prompt typed, ``/exit`` typed once the model server has been quiet
for a while). Usage::

    python -m tests.otheragents.record --cli-prefix /tmp/cli --out /tmp/recordings [--scenario resumed ...]
    python -m tests.otheragents.record --cli-prefix /tmp/cli332 --cli claude-code --set 2.1.332 \
        --into tests/fixtures/other-agents/claude-code-2.1.332 [--scenario fork ...]
"""

from __future__ import annotations

import argparse
import contextlib
import http.server
import json
import os
import pwd
import shlex
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


@dataclass(frozen=True)
class Queued:
    """A user message sent on the CLI's stdin (``--input-format stream-json``) once the step ``after`` (a script
    name and step index) was answered, ``after_s`` seconds after that or after the message sent before it, whichever
    is later: while the prompt before it still runs."""

    text: str
    after: tuple[str, int]
    after_s: float = 0.5


@dataclass
class Run:
    """One CLI process of a scenario: its prompt, and a SIGINT sent ``interrupt_after_s`` after the step
    ``interrupt_at`` (a script name and step index) was answered.

    ``fork``: ``--resume <the first run's session> --fork-session`` (the CLI picks the new session's id);
    ``permission_mode``: Claude Code's ``--permission-mode``; ``args``: more arguments (``-n NAME``);
    ``queued``: prompts sent on stdin while this one runs (the run then reads stream-json from stdin);
    ``interactive``: the CLI without ``-p``, in a detached tmux session, the prompt typed in, ``/exit`` typed
    ``linger_s`` seconds after the last model reply."""

    prompt: str
    resume: bool = False
    interrupt_at: tuple[str, int] | None = None
    interrupt_after_s: float = 2.0
    fork: bool = False
    permission_mode: str = "bypassPermissions"
    args: tuple[str, ...] = ()
    queued: tuple[Queued, ...] = ()
    interactive: bool = False
    linger_s: float = 8.0


@dataclass
class Scenario:
    """``settings``: written to the project's ``.claude/settings.json`` (a hook) before the first run;
    ``status_line``: the user's ``~/.claude/settings.json`` names a ``statusLine`` command that keeps what the CLI
    writes on its stdin, one line per invocation, and when (``_capture/statusline-input.jsonl``, ``checks.json``
    ``status_line_runs``): what Claude Code passes to a status line, as written, not as documented; ``origin``: the
    project's git remote ``origin`` (never fetched; the CLI names the repository it points to)."""

    name: str
    description: str
    scripts: tuple[Script, ...]
    runs: tuple[Run, ...]
    settings: dict[str, Any] | None = None
    status_line: bool = False
    origin: str | None = None


def _bash(command: str, expect: str = "ok") -> Tool:
    return Tool("Bash", {"command": command, "description": command}, expect=expect)


def _exec(command: str, expect: str = "ok") -> Tool:
    return Tool("exec_command", {"cmd": command, "workdir": "{cwd}"}, expect=expect)


def _two_prompts(first: str, second: str, then: Run) -> tuple[tuple[Script, ...], tuple[Run, ...]]:
    """Two runs on one session: which version this is (a Bash call), then what the app prints for Ada (another),
    the second run as ``then`` says (resumed, forked) with its prompt filled in."""
    scripts = (
        Script(first, (Step("Reading the version.", (_bash("cat VERSION"),)),), "It is 0.3.1."),
        Script(second, (Step(None, (_bash("python3 src/app.py Ada"),)),), "It prints Hello, Ada."),
    )
    then.prompt = f"And what does the app print for Ada? {marker(second)}"
    return scripts, (Run(f"Which version is this? {marker(first)}"), then)


def claude_scenarios() -> list[Scenario]:
    return [
        Scenario(
            "resumed",
            "Two CLI processes on one session (--session-id, then --resume): two prompts in one log.",
            *_two_prompts("resume1", "resume2", Run("", resume=True)),
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


def _agent(description: str, script: str) -> Tool:
    return Tool(
        "Agent",
        {
            "description": description,
            "subagent_type": "general-purpose",
            "prompt": f"{description}. {marker(script)}",
        },
    )


HOOK_DENY = {
    "hookSpecificOutput": {
        "hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": "Bash is blocked by this project's hook.",
    }
}


def _background_agent(main: str, sub: str, run: Run) -> tuple[tuple[Script, ...], tuple[Run, ...]]:
    """One prompt whose Agent call (in the background) finds the greeting with one Bash call; the main agent says
    it waits, then answers the notification; ``run`` with its prompt filled in."""
    scripts = (
        Script(
            main,
            (Step("Delegating.", (_agent("Find where the greeting is defined", sub),)), Step("Waiting.")),
            "The greeting is defined in src/greet.py.",
        ),
        Script(sub, (Step(None, (_bash("grep -rn Hello src"),)),), "src/greet.py, line 2."),
    )
    run.prompt = f"Use a sub-agent to find where the greeting is defined. {marker(main)}"
    return scripts, (run,)


def claude_scenarios_2_1_332() -> list[Scenario]:
    """Scenarios for what Claude Code 2.1.332 does that 2.1.197's recordings do not show (background sub-agents,
    refusals marked as such, forks, queued prompts, failed attempts in the log, titles, interactive mode), and
    the two baselines re-recorded."""
    return [
        Scenario(
            "plain-question",
            "One prompt, one model call, a text answer, no tools.",
            (Script("plain", (), "Paris."),),
            (Run(f"What is the capital of France? {marker('plain')}"),),
        ),
        Scenario(
            "multi-tool",
            "One prompt, four model calls: Read src/greet.py, Bash python3 src/app.py Ada, Edit src/greet.py, answer.",
            (
                Script(
                    "multi",
                    (
                        Step("Reading the greeter.", (Tool("Read", {"file_path": "{cwd}/src/greet.py"}),)),
                        Step(None, (_bash("python3 src/app.py Ada"),)),
                        Step(
                            None,
                            (
                                Tool(
                                    "Edit",
                                    {
                                        "file_path": "{cwd}/src/greet.py",
                                        "old_string": 'f"Hello, {name}."',
                                        "new_string": 'f"Hello, {name}!"',
                                    },
                                ),
                            ),
                        ),
                    ),
                    "The greeting now ends with an exclamation mark.",
                ),
            ),
            (Run(f"Make the greeting end with an exclamation mark. {marker('multi')}"),),
        ),
        Scenario(
            "background-subagent",
            "An Agent call (run in the background by default): the main agent answers at once, the sub-agent's "
            "Bash and answer follow, then the CLI's <task-notification> and one more main-agent call.",
            *_background_agent("bgmain", "bgsub", Run("")),
        ),
        Scenario(
            "parallel-subagents",
            "Two Agent calls in one reply (both in the background), each sub-agent one Bash call and an answer.",
            (
                Script(
                    "parmain",
                    (
                        Step(
                            "Two sub-agents.",
                            (
                                _agent("Count the lines of src", "parsub1"),
                                _agent("Read the version", "parsub2"),
                            ),
                        ),
                        Step("Waiting for both."),
                    ),
                    "Both sub-agents reported.",
                ),
                Script("parsub1", (Step(None, (_bash("wc -l src/*.py"),)),), "7 lines."),
                Script("parsub2", (Step(None, (_bash("cat VERSION"),)),), "0.3.1."),
            ),
            (Run(f"Use two sub-agents: line counts and version. {marker('parmain')}"),),
        ),
        Scenario(
            "plan-mode-refusal",
            "--permission-mode plan: the model asks for Write and for Bash touch; both are refused; it answers.",
            (
                Script(
                    "plan",
                    (
                        Step(
                            "Writing notes.",
                            (
                                Tool(
                                    "Write",
                                    {"file_path": "{cwd}/NOTES.md", "content": "notes\n"},
                                    expect="denied",
                                ),
                            ),
                        ),
                        Step(None, (_bash("touch NOTES.md", "denied"),)),
                    ),
                    "Plan mode: I would create NOTES.md.",
                ),
            ),
            (Run(f"Create NOTES.md. {marker('plan')}", permission_mode="plan"),),
        ),
        Scenario(
            "hook-refusal",
            "A PreToolUse hook (the project's .claude/settings.json) denies every Bash call; the model's Bash cat "
            "VERSION is refused, its Read of VERSION runs; it answers.",
            (
                Script(
                    "hook",
                    (
                        Step(None, (_bash("cat VERSION", "denied"),)),
                        Step(None, (Tool("Read", {"file_path": "{cwd}/VERSION"}),)),
                    ),
                    "It is 0.3.1.",
                ),
            ),
            (Run(f"Which version is this? {marker('hook')}"),),
            settings={
                "hooks": {
                    "PreToolUse": [
                        {
                            "matcher": "Bash",
                            "hooks": [
                                {"type": "command", "command": f"echo {shlex.quote(json.dumps(HOOK_DENY))}"}
                            ],
                        }
                    ]
                }
            },
        ),
        Scenario(
            "fork",
            "A session (--session-id), then --resume <it> --fork-session with a new prompt: a second session file "
            "that starts with the first one's history.",
            *_two_prompts("fork1", "fork2", Run("", fork=True)),
        ),
        Scenario(
            "queued-prompts",
            "stream-json on stdin: a prompt whose Bash sleeps 4 s, and two more user messages sent while it runs, "
            "0.5 s after that call was answered and 1 s after that.",
            (
                Script(
                    "queue1", (Step("Waiting for the build.", (_bash("sleep 4"),)),), "The build finished."
                ),
                Script("queue2", (Step(None, (_bash("cat VERSION"),)),), "It is 0.3.1."),
                Script("queue3", (), "Hello, Ada."),
            ),
            (
                Run(
                    f"Wait for the build. {marker('queue1')}",
                    queued=(
                        Queued(f"Also tell me the version. {marker('queue2')}", ("queue1", 0), 0.5),
                        Queued(f"And what the app prints for Ada. {marker('queue3')}", ("queue1", 0), 1.0),
                    ),
                ),
            ),
        ),
        Scenario(
            "api-errors-retried",
            "The first model call gets HTTP 429 once, the second HTTP 500 once (retry-after 0); each retried "
            "attempt succeeds.",
            (
                Script(
                    "retry",
                    (
                        Step(None, (_bash("cat VERSION"),), error=429, error_times=1),
                        Step("It is 0.3.1.", error=500, error_times=1),
                    ),
                    "It is 0.3.1.",
                ),
            ),
            (Run(f"Which version is this? {marker('retry')}"),),
        ),
        Scenario(
            "titled-session",
            "-n greeter-check: a session with a name of its own; one Bash call, an answer.",
            (Script("titled", (Step(None, (_bash("cat VERSION"),)),), "It is 0.3.1."),),
            (Run(f"Which version is this? {marker('titled')}", args=("-n", "greeter-check")),),
        ),
        Scenario(
            "interactive-subagent",
            "Interactive (no -p) in tmux: one prompt whose Agent call runs in the background; the sub-agent's Bash "
            "and answer, the notification's extra main-agent call; /exit typed 20 s after the last model reply.",
            *_background_agent("imain", "isub", Run("", interactive=True, linger_s=20.0)),
        ),
        Scenario(
            "statusline",
            "Interactive (no -p) in tmux with a statusLine command in the user's settings that keeps its stdin: "
            "one prompt, Read src/greet.py, Bash sleep 2 and python3 src/app.py Ada, an answer (the sleep lets the "
            "CLI run its status line while the prompt runs); /exit typed 8 s after the last model reply.",
            (
                Script(
                    "status",
                    (
                        Step("Reading the greeter.", (Tool("Read", {"file_path": "{cwd}/src/greet.py"}),)),
                        Step(None, (_bash("sleep 2 && python3 src/app.py Ada"),)),
                    ),
                    "It prints Hello, Ada.",
                ),
            ),
            (Run(f"What does the app print for Ada? {marker('status')}", interactive=True),),
            status_line=True,
            origin="https://github.com/example/greeter.git",
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
    errors_sent: dict[tuple[str, int], int] = field(default_factory=dict)
    answered_at: dict[tuple[str, int], float] = field(default_factory=dict)
    changed: threading.Condition = field(default_factory=threading.Condition)
    httpd: http.server.ThreadingHTTPServer | None = None

    def wait_answered(self, key: tuple[str, int], timeout: float) -> bool:
        """Wait until the step ``key`` (a script name and step index) was answered (not with an error)."""
        with self.changed:
            return self.changed.wait_for(lambda: key in self.answered_at, timeout)

    def wait_idle(self, quiet_s: float, timeout: float) -> None:
        """Wait until no request came for ``quiet_s`` seconds (the CLI is done asking), at most ``timeout``."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            last = self.log[-1]["time"] if self.log else 0.0
            if self.log and time.time() - last >= quiet_s:
                return
            time.sleep(0.2)

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
                "stop_reason": None if failing else "tool_use" if step.tools else "end_turn",
            }
        )
        if failing and step.error is not None:
            self.errors_sent[key] = self.errors_sent.get(key, 0) + 1
            anthropic = "messages" in body
            kind = "rate_limit_error" if step.error == 429 else "api_error"
            raise HttpError(
                step.error,
                {
                    "type": "error",
                    "error": {"type": kind, "message": f"Scripted HTTP {step.error}."},
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
        with self.changed:
            self.answered_at.setdefault(key, time.time())
            self.changed.notify_all()
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


def _project(folder: Path, origin: str | None = None) -> None:
    for rel, text in PROJECT_FILES.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    git = ["git", "-c", "user.name=rec", "-c", "user.email=rec@example.invalid"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=folder, check=True)
    subprocess.run([*git, "add", "."], cwd=folder, check=True)
    subprocess.run([*git, "commit", "-qm", "init"], cwd=folder, check=True)
    if origin is not None:
        subprocess.run([*git, "remote", "add", "origin", origin], cwd=folder, check=True)


class FileWatch:
    """Polls the CLI's files while a scenario runs: when each appeared, last changed and (if ever) vanished, and
    the last bytes read of a file that vanished (kept in ``_capture/vanished/``): whether a CLI deletes its
    files is a fact of the run, not of the files left behind."""

    def __init__(self, root: Path, every_s: float = 0.05) -> None:
        self.root = root
        self.every_s = every_s
        self.started = time.time()
        self.files: dict[str, dict[str, Any]] = {}
        self.kept: dict[str, bytes] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> FileWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._look()

    def _poll(self) -> None:
        while not self._stop.wait(self.every_s):
            self._look()

    def _look(self) -> None:
        now = round(time.time() - self.started, 3)
        seen = set()
        for path in self.root.rglob("*") if self.root.is_dir() else ():
            try:
                if not path.is_file():
                    continue
                size = path.stat().st_size
            except OSError:
                continue
            rel = str(path.relative_to(self.root))
            seen.add(rel)
            entry = self.files.setdefault(
                rel, {"appeared_s": now, "changed_s": now, "size": -1, "gone_s": None}
            )
            entry["gone_s"] = None
            if size != entry["size"]:
                entry["size"], entry["changed_s"] = size, now
                with contextlib.suppress(OSError):
                    self.kept[rel] = path.read_bytes()
        for rel, entry in self.files.items():
            if rel not in seen and entry["gone_s"] is None:
                entry["gone_s"] = now


def _status_line_runs(folder: Path, started: float) -> list[dict[str, Any]]:
    """When each statusLine invocation ran (seconds from ``started``, as ``file_watch``, and the epoch time) and
    whether its line is a JSON object."""
    lines = (
        (folder / STATUS_LINE_INPUT).read_text().splitlines() if (folder / STATUS_LINE_INPUT).exists() else []
    )
    times = (folder / STATUS_LINE_TIMES).read_text().split() if (folder / STATUS_LINE_TIMES).exists() else []
    runs = []
    for n, line in enumerate(lines):
        try:
            is_object = isinstance(json.loads(line), dict)
        except ValueError:
            is_object = False
        at = float(times[n]) if n < len(times) else None  # epoch, as model-requests.jsonl's "time"
        at_s = round(at - started, 3) if at is not None else None
        runs.append({"at_s": at_s, "time": at, "json_object": is_object, "bytes": len(line.encode())})
    return runs


def _claude_json(session_id: str, stdout: str) -> tuple[str, list[dict[str, Any]]]:
    """The session id Claude Code's stream-json stdout names (``system``/``init``), and its ``result`` and
    ``system``/``api_retry`` lines in brief."""
    found: str | None = None
    events: list[dict[str, Any]] = []
    for line in stdout.splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        if obj.get("type") == "system" and obj.get("subtype") == "init" and found is None:
            found = str(obj.get("session_id"))
        elif obj.get("type") == "result":
            events.append(
                {
                    "type": "result",
                    **{
                        k: obj.get(k)
                        for k in ("subtype", "is_error", "num_turns", "stop_reason", "terminal_reason")
                    },
                    "permission_denials": [d.get("tool_use_id") for d in obj.get("permission_denials") or []],
                }
            )
        elif obj.get("type") == "system" and obj.get("subtype") == "api_retry":
            events.append(
                {"type": "api_retry", **{k: obj.get(k) for k in ("attempt", "max_retries", "error_status")}}
            )
    return found or session_id, events


def _user_message(text: str) -> bytes:
    message = {"type": "user", "message": {"role": "user", "content": text}, "parent_tool_use_id": None}
    return (json.dumps(message) + "\n").encode()


def _interactive_config(
    home: Path, project: Path, api_key: str, version: str, settings: Mapping[str, Any] | None = None
) -> None:
    """What an interactive first start would ask (theme, trust of the folder, the API key, bypass mode),
    answered in advance as the CLI itself stores the answers; ``settings``: more of the user's settings (the
    status line runs only in a folder whose trust was accepted)."""
    (home / ".claude.json").write_text(
        json.dumps(
            {
                "hasCompletedOnboarding": True,
                "lastOnboardingVersion": version,
                "theme": "dark",
                "bypassPermissionsModeAccepted": True,
                "customApiKeyResponses": {"approved": [api_key[-20:]], "rejected": []},
                "projects": {
                    str(project): {"hasTrustDialogAccepted": True, "hasCompletedProjectOnboarding": True}
                },
            }
        )
    )
    (home / ".claude").mkdir(exist_ok=True)
    user_settings = {"skipDangerousModePermissionPrompt": True, **(settings or {})}
    (home / ".claude" / "settings.json").write_text(json.dumps(user_settings, indent=1) + "\n")


STATUS_LINE_INPUT = "statusline-input.jsonl"
STATUS_LINE_TIMES = "statusline-times.txt"


def _status_line_settings(folder: Path) -> dict[str, Any]:
    """A ``statusLine`` command that appends its stdin to ``folder/statusline-input.jsonl`` as it came (the CLI
    writes one JSON object and a newline; ``sed '$a\\'`` adds one only where it is missing), the epoch time to
    ``statusline-times.txt``, and prints how many it kept (seen on the screen)."""
    kept, times = shlex.quote(str(folder / STATUS_LINE_INPUT)), shlex.quote(str(folder / STATUS_LINE_TIMES))
    command = (
        f"sed -e '$a\\' >> {kept}; date +%s.%N >> {times}; echo \"statusline inputs kept: $(wc -l < {kept})\""
    )
    return {"statusLine": {"type": "command", "command": command}}


def _tmux(user: pwd.struct_passwd, env: dict[str, str], socket: str, *args: str) -> str:
    done = subprocess.run(
        ["tmux", "-L", socket, *args],
        env=env,
        user=user.pw_uid,
        group=user.pw_gid,
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout


def _run_interactive(
    run: Run,
    argv: list[str],
    bin_dir: Path,
    project: Path,
    env: dict[str, str],
    user: pwd.struct_passwd,
    server: Server,
    socket: str,
) -> tuple[str, str, int | None, str | None]:
    """``argv`` in a detached tmux session as ``user``: wait for the input box, type the prompt, wait until the
    model server has been quiet for ``run.linger_s`` seconds, type ``/exit``. Returns the last screen, the
    screen log and how it ended."""
    command = " ".join(
        ["env", "-i", *(f"{k}={shlex.quote(v)}" for k, v in env.items()), shlex.quote(str(bin_dir / argv[0])),
         *map(shlex.quote, argv[1:])]
    )  # fmt: skip
    _tmux(user, env, socket, "new-session", "-d", "-x", "150", "-y", "45", "-c", str(project), command)
    screens: list[str] = []

    def screen() -> str:
        text = _tmux(user, env, socket, "capture-pane", "-p")
        screens.append(f"--- {time.strftime('%H:%M:%S')}\n{text}")
        return text

    deadline = time.time() + 60
    while time.time() < deadline and "? for shortcuts" not in screen() and "\u276f" not in screens[-1]:
        time.sleep(0.5)
    time.sleep(1.0)
    before = len(server.log)
    _tmux(user, env, socket, "send-keys", "-l", run.prompt)
    time.sleep(0.5)
    _tmux(user, env, socket, "send-keys", "Enter")
    deadline = time.time() + 120
    while time.time() < deadline and len(server.log) == before:
        time.sleep(0.2)
    server.wait_idle(run.linger_s, 240)
    last = screen()
    _tmux(user, env, socket, "send-keys", "-l", "/exit")
    time.sleep(0.5)
    _tmux(user, env, socket, "send-keys", "Enter")
    deadline = time.time() + 30
    ended = None
    while time.time() < deadline:
        if subprocess.run(["tmux", "-L", socket, "has-session"], env=env, user=user.pw_uid,
                          capture_output=True, check=False).returncode != 0:  # fmt: skip
            ended = "/exit"
            break
        screen()
        time.sleep(0.5)
    if ended is None:
        _tmux(user, env, socket, "kill-server")
        ended = "tmux kill-server"
    return last, "\n".join(screens), None, ended


def record(
    cli: str, scenario: Scenario, prefix: Path, out: Path, work: Path, into: Path | None = None
) -> dict[str, Any]:
    """Run one scenario's CLI processes; copy the CLI's files and the capture to ``out/<cli>/<scenario>`` (or
    ``into/<scenario>``)."""
    user = ensure_user() if os.geteuid() == 0 else pwd.getpwuid(os.geteuid())
    base = work / cli / scenario.name
    shutil.rmtree(base, ignore_errors=True)
    home, project, status_dir = base / "home", base / "project", base / "statusline"
    home.mkdir(parents=True)
    project.mkdir(parents=True)
    if scenario.status_line:
        status_dir.mkdir()
    _project(project, scenario.origin)
    if scenario.settings is not None:
        (project / ".claude").mkdir()
        (project / ".claude" / "settings.json").write_text(json.dumps(scenario.settings, indent=1) + "\n")
    scripts = {s.name: s for s in scenario.scripts}
    bin_dir = prefix / "node_modules" / ".bin"
    runs: list[dict[str, Any]] = []
    stdout_all: list[str] = []
    stderr_all: list[str] = []
    screens: list[str] = []
    session_id = str(uuid.uuid4())
    first_session = session_id
    api_key = "sk-ant-fake-" + "x" * 40
    version = subprocess.run(
        [str(bin_dir / ("claude" if cli == "claude-code" else "codex")), "--version"],
        capture_output=True,
        text=True,
        env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
        check=False,
    ).stdout.strip()
    tree = home / (".claude/projects" if cli == "claude-code" else ".codex/sessions")
    with Server(scripts, str(project)) as server, FileWatch(tree) as watch:
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
                    "ANTHROPIC_API_KEY": api_key,
                    "DISABLE_TELEMETRY": "1",
                    "DISABLE_AUTOUPDATER": "1",
                    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                }
            )
            if any(run.interactive for run in scenario.runs):
                user_settings = _status_line_settings(status_dir) if scenario.status_line else None
                _interactive_config(home, project, api_key, version.split()[0], user_settings)
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
                if run.fork:
                    session = ["--resume", first_session, "--fork-session"]
                else:
                    session = ["--resume", session_id] if run.resume else ["--session-id", session_id]
                argv = [
                    "claude",
                    *([] if run.interactive else ["-p"]),
                    *([] if run.queued or run.interactive else [run.prompt]),
                    *([] if run.interactive else ["--output-format", "stream-json", "--verbose"]),
                    *(["--input-format", "stream-json"] if run.queued else []),
                    "--permission-mode",
                    run.permission_mode,
                    *session,
                    *run.args,
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
            started = time.time()
            signalled = None
            sent: list[dict[str, Any]] = []
            if run.interactive:
                env_tmux = {**env, "TERM": "xterm-256color"}
                last, log, exit_code, ended = _run_interactive(
                    run, argv, bin_dir, project, env_tmux, user, server, f"rec-{scenario.name}"
                )
                screens.append(log)
                stdout_all.append(last)
                stderr_all.append("")
                runs.append(
                    {
                        "prompt": run.prompt,
                        "argv": argv,
                        "interactive": "tmux",
                        "ended_by": ended,
                        "exit_code": exit_code,
                        "signal": None,
                        "wall_s": round(time.time() - started, 3),
                        "session_id": session_id,
                    }
                )
                continue
            proc = subprocess.Popen(
                [str(bin_dir / argv[0]), *argv[1:]],
                cwd=project,
                env=env,
                user=user.pw_uid,
                group=user.pw_gid,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                stdin=subprocess.PIPE if run.queued else subprocess.DEVNULL,
                start_new_session=True,
            )
            if run.queued:
                assert proc.stdin is not None
                proc.stdin.write(_user_message(run.prompt))
                proc.stdin.flush()
                sent.append({"text": run.prompt, "sent_s": round(time.time() - started, 3)})
                for queued in run.queued:
                    if server.wait_answered(queued.after, 60):
                        time.sleep(queued.after_s)
                    proc.stdin.write(_user_message(queued.text))
                    proc.stdin.flush()
                    sent.append({"text": queued.text, "sent_s": round(time.time() - started, 3)})
                proc.stdin.close()
                proc.stdin = None  # communicate() below must not flush it
            if run.interrupt_at is not None and server.wait_answered(run.interrupt_at, 60):
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
            this_session = session_id
            stdout_facts: list[dict[str, Any]] = []
            if cli == "codex" and not run.resume:
                for line in text.splitlines():
                    try:
                        event = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(event, dict) and event.get("type") == "thread.started":
                        session_id = this_session = str(event.get("thread_id"))
            elif cli == "claude-code":
                this_session, stdout_facts = _claude_json(session_id, text)
            stdout_all.append(text)
            stderr_all.append(stderr.decode("utf-8", "replace"))
            runs.append(
                {
                    "prompt": run.prompt,
                    "argv": argv,
                    "exit_code": proc.returncode,
                    "signal": signalled,
                    "wall_s": round(time.time() - started, 3),
                    **({"session_id": this_session, "stdout": stdout_facts} if cli == "claude-code" else {}),
                    **({"stdin_messages": sent} if sent else {}),
                }
            )
        requests = list(server.log)
    dest = (into / scenario.name) if into is not None else (out / cli / scenario.name)
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(tree, dest / tree.name)
    capture = dest / "_capture"
    capture.mkdir()
    (capture / "stdout.jsonl" if not screens else capture / "screen.txt").write_text("".join(stdout_all))
    if screens:
        (capture / "screens.txt").write_text("\n".join(screens))
    (capture / "stderr.txt").write_text("".join(stderr_all))
    (capture / "model-requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in requests))
    status_line_runs = _status_line_runs(status_dir, watch.started) if scenario.status_line else None
    if scenario.status_line:  # empty when the CLI never ran the command
        kept = status_dir / STATUS_LINE_INPUT
        (capture / STATUS_LINE_INPUT).write_bytes(kept.read_bytes() if kept.exists() else b"")
    vanished = {rel: e for rel, e in watch.files.items() if e["gone_s"] is not None}
    for rel in vanished:
        kept = capture / "vanished" / rel
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_bytes(watch.kept.get(rel, b""))
    id_prefix = "toolu" if cli == "claude-code" else "call"
    checks = {
        "scenario": scenario.name,
        "description": scenario.description,
        "cli_version": version,
        "session_id": first_session,
        "runs": runs,
        "human_prompts": [r.prompt for r in scenario.runs],
        "queued_prompts": [q.text for r in scenario.runs for q in r.queued],
        "project_settings": scenario.settings,
        **({"git_origin": scenario.origin} if scenario.origin is not None else {}),
        **({"user_settings": _status_line_settings(status_dir)} if scenario.status_line else {}),
        # each statusLine invocation: seconds from the start, and whether what it was given is one JSON object
        **({"status_line_runs": status_line_runs} if status_line_runs is not None else {}),
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
        # each request in order: which script and step it was, and the HTTP error or the stop reason sent
        "requests": [
            {k: r.get(k) for k in ("seq", "script", "step_index", "http_error", "stop_reason")}
            for r in requests
        ],
        "files": sorted(
            str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file() and "_capture" not in p.parts
        ),
        # every file under the CLI's folder while the scenario ran: seconds from the start when it appeared,
        # last changed, vanished (null: still there at the end)
        "file_watch": watch.files,
    }
    (dest / "checks.json").write_text(json.dumps(checks, indent=1) + "\n")
    return checks


SCENARIO_SETS = {"2.1.197": claude_scenarios(), "2.1.332": claude_scenarios_2_1_332()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--cli-prefix", type=Path, required=True, help="npm --prefix the CLIs are installed in"
    )
    parser.add_argument("--out", type=Path, default=Path("."))
    parser.add_argument(
        "--work",
        type=Path,
        help="where the homes and projects are made (default: ~USER/agents; Codex refuses to "
        "create its helper binaries under /tmp)",
    )
    parser.add_argument("--cli", choices=["claude-code", "codex"], action="append")
    parser.add_argument("--scenario", action="append")
    parser.add_argument(
        "--set",
        choices=sorted(SCENARIO_SETS),
        default="2.1.197",
        help="Claude Code's scenarios: those recorded with 2.1.197 (recorded/) or with 2.1.332",
    )
    parser.add_argument(
        "--into", type=Path, help="put each scenario in INTO/<scenario> (one --cli), not OUT/<cli>/<scenario>"
    )
    args = parser.parse_args(argv)
    if args.into is not None and len(args.cli or []) != 1:
        parser.error("--into needs exactly one --cli")
    user = ensure_user() if os.geteuid() == 0 else pwd.getpwuid(os.geteuid())
    work: Path = args.work or Path(user.pw_dir) / "agents"
    work.mkdir(parents=True, exist_ok=True)
    for cli in args.cli or ["claude-code", "codex"]:
        for scenario in SCENARIO_SETS[args.set] if cli == "claude-code" else codex_scenarios():
            if args.scenario and scenario.name not in args.scenario:
                continue
            checks = record(cli, scenario, args.cli_prefix, args.out, work, args.into)
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
