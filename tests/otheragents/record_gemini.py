"""Record real Gemini CLI sessions offline, with scripted model replies and no network.

Nothing here is a test: it runs the real CLI (installed from the npm registry, e.g.
``npm install --prefix /tmp/gemini-cli @google/gemini-cli@0.61.0``) headless (``-p``, ``--approval-mode yolo``)
with a fresh ``$GEMINI_CLI_HOME`` per scenario, under ``unshare -rn`` (a user and network namespace: no network
at all), and with the CLI's own hidden flag ``--fake-responses-non-strict FILE``: its model client is then a
fake that answers each ``generateContentStream`` request with the next scripted reply (a JSON line
``{"method": "generateContentStream", "response": [<stream chunks>]}``), in the order the CLI asks, a
sub-agent's requests included. The API key is a dummy; the CLI never opens a socket.

A :class:`Reply` is one model call: its thoughts, text, function calls and usage (``usageMetadata``, the Gemini
API's meaning: ``promptTokenCount`` includes ``cachedContentTokenCount``; ``candidatesTokenCount`` excludes
``thoughtsTokenCount``). Each scenario's folder gets the CLI's files as written, their path below the CLI's home
kept (``tmp/<project>/chats/…``, and ``tmp/<project>/.project_root``), ``_capture/`` (each run's fake replies, stdout, stderr) and ``checks.json``:
what the scripts told the model to do and how the runs ended, facts known without reading the CLI's files.
Usage::

    python -m tests.otheragents.record_gemini --cli-prefix /tmp/gemini-cli --out /tmp/gemini-rec [--scenario …]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CLI_VERSION = "0.61.0"
MODEL = "gemini-2.5-pro"
FIXED_WORK = "/home/dev/gemini"  # what the random work folder reads as in the captures
PROJECT = "project"  # the project folder's name, which is the CLI's slug for it under tmp/
PROJECT_FILES = {
    "README.md": "# greeter\n\nA tiny greeter: `python3 src/app.py NAME`.\n",
    "src/greet.py": 'def greet(name):\n    return f"Hello, {name}."\n',
    "VERSION": "0.3.1\n",
}
SETTINGS = {
    "privacy": {"usageStatisticsEnabled": False},
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
    "telemetry": {"enabled": False},
    "security": {"auth": {"selectedType": "gemini-api-key"}},
}


@dataclass(frozen=True)
class Call:
    """One function call a scripted reply asks for; ``expect``: how the tool ends, ``ok`` or ``failed``, or
    ``unwritten`` (cut by the scenario's SIGINT before it ended: the CLI writes no record of it)."""

    name: str
    args: dict[str, Any]
    expect: str = "ok"


@dataclass(frozen=True)
class Reply:
    """One scripted model call: thoughts, text and function calls, with its usage (tokens)."""

    text: str | None = None
    calls: tuple[Call, ...] = ()
    thought: str | None = None
    prompt_tokens: int = 1000
    output_tokens: int = 10
    cached_tokens: int = 0
    thoughts_tokens: int = 0
    agent: str = "main"  # which agent's request it answers: main, or a sub-agent's name

    def chunks(self, step: str) -> list[dict[str, Any]]:
        """The stream: the thought alone first (as a thinking model streams it), then the rest with the usage."""
        out: list[dict[str, Any]] = []
        if self.thought:
            part = {"text": self.thought, "thought": True}
            out.append(
                {"candidates": [{"content": {"role": "model", "parts": [part]}}], "modelVersion": MODEL}
            )
        parts: list[dict[str, Any]] = []
        if self.text:
            parts.append({"text": self.text})
        for i, call in enumerate(self.calls):
            parts.append({"functionCall": {"id": f"{step}_{i}", "name": call.name, "args": call.args}})
        usage = {
            "promptTokenCount": self.prompt_tokens,
            "candidatesTokenCount": self.output_tokens,
            "cachedContentTokenCount": self.cached_tokens,
            "thoughtsTokenCount": self.thoughts_tokens,
            "totalTokenCount": self.prompt_tokens + self.output_tokens + self.thoughts_tokens,
        }
        candidate = {"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}
        out.append({"candidates": [candidate], "usageMetadata": usage, "modelVersion": MODEL})
        return out


@dataclass(frozen=True)
class Run:
    """One CLI process: a prompt (``-p``), the replies it gets, whether it resumes the last session."""

    prompt: str
    replies: tuple[Reply, ...]
    resume: bool = False
    approval: str = "yolo"  # --approval-mode: yolo runs every tool; default asks, which -p cannot
    interrupt_after_s: float | None = None  # SIGINT to the CLI's process group this long after it started


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    runs: tuple[Run, ...]
    subagents: tuple[str, ...] = ()  # the sub-agents' names, in the order they are invoked
    notes: tuple[str, ...] = field(default=())
    # The CLI's own loop detection (TOOL_CALL_LOOP_THRESHOLD = 5 in the bundle) stops a prompt when the model asks
    # for the same call (name and arguments) a 5th time in a row: that reply is taken but never written, nor its
    # call run. The number of the reply it stops at (1-based), or None.
    loop_stop: int | None = None
    # How many replies of a run are taken and written, when not all are (the CLI stopped or was stopped).
    written: int | None = None


def _read(path: str) -> Call:
    return Call("read_file", {"file_path": path})


def _scenarios(project: Path) -> dict[str, Scenario]:
    p = str(project)
    runaway = tuple(Reply(calls=(_read(f"{p}/VERSION"),), prompt_tokens=1000 + 50 * i) for i in range(25))
    distinct = tuple(
        Reply(calls=(Call("run_shell_command", {"command": f"cat VERSION  # try {i}", "description": "poll"}),),
              prompt_tokens=1000 + 50 * i, cached_tokens=50 * i)
        for i in range(25)
    )  # fmt: skip
    out = [
        Scenario(
            "plain-question", "One prompt, one model call, a text answer, no tools.",
            (Run("What is the capital of France?", (Reply(text="Paris.", prompt_tokens=900, output_tokens=3),)),),
        ),
        Scenario(
            "multi-tool", "Three tools one after another (list, read, shell), four model calls.",
            (Run("What does greet return, and which version is this?", (
                Reply(calls=(Call("list_directory", {"dir_path": p}),), thought="**Looking** at the files.",
                      thoughts_tokens=12, cached_tokens=200),
                Reply(calls=(_read(f"{p}/src/greet.py"),), prompt_tokens=1200, cached_tokens=900),
                Reply(calls=(Call("run_shell_command", {"command": "cat VERSION", "description": "version"}),),
                      prompt_tokens=1300, cached_tokens=1100),
                Reply(text="greet returns 'Hello, NAME.'; version 0.3.1.", prompt_tokens=1400, cached_tokens=1250,
                      output_tokens=15),
            )),),
        ),
        Scenario(
            "failing-tool", "A read of a missing file and a shell command that exits 3, then an answer.",
            (Run("Read notes.txt and run the check.", (
                Reply(calls=(_read(f"{p}/notes.txt"),)),
                Reply(calls=(Call("run_shell_command", {"command": "exit 3", "description": "check"}),),
                      prompt_tokens=1100),
                Reply(text="notes.txt is missing and the check exits 3.", prompt_tokens=1200),
            )),),
            notes=("A shell command's non-zero exit is recorded as the CLI says it (see the README).",),
        ),
        Scenario(
            "parallel-tools", "Three reads in one model reply (one of them fails), then an answer.",
            (Run("Read README.md, VERSION and missing.txt at once.", (
                Reply(calls=(_read(f"{p}/README.md"), _read(f"{p}/VERSION"),
                             Call("read_file", {"file_path": f"{p}/missing.txt"}, "failed")),
                      thought="**Reading** three files.", thoughts_tokens=7, cached_tokens=300),
                Reply(text="A greeter, version 0.3.1; missing.txt does not exist.", prompt_tokens=1500,
                      cached_tokens=1000),
            )),),
        ),
        Scenario(
            "subagent", "The main agent invokes the generalist sub-agent, which reads a file and completes.",
            (Run("Use the generalist agent to read VERSION.", (
                Reply(calls=(Call("invoke_agent", {"agent_name": "generalist", "prompt": "Read VERSION"}),)),
                Reply(calls=(_read(f"{p}/VERSION"),), prompt_tokens=500, cached_tokens=100, agent="generalist"),
                Reply(calls=(Call("complete_task", {"result": {"response": "0.3.1"}}),), prompt_tokens=600,
                      cached_tokens=400, agent="generalist"),
                Reply(text="The version is 0.3.1.", prompt_tokens=1100, cached_tokens=900),
            )),),
            subagents=("generalist",),
        ),
        Scenario(
            "resumed", "Two CLI processes on one session (then --resume latest): two prompts in one log.",
            (
                Run("Which version is this?", (
                    Reply(calls=(_read(f"{p}/VERSION"),)),
                    Reply(text="0.3.1.", prompt_tokens=1100, cached_tokens=800),
                )),
                Run("And what does greet return?", (
                    Reply(calls=(_read(f"{p}/src/greet.py"),), prompt_tokens=1300, cached_tokens=1000),
                    Reply(text="'Hello, NAME.'", prompt_tokens=1400, cached_tokens=1200),
                ), resume=True),
            ),
        ),
        Scenario(
            "runaway", "The same read_file call 25 times in a row (what the CLI's own loop detection does is "
            "recorded as it happens), then an answer.",
            (Run("Check VERSION until it changes.", (*runaway, Reply(text="It never changed."))),),
            loop_stop=5,
            written=4,
            notes=("The CLI's loop detection stops it at the 5th identical request: 4 calls run and written, "
                   "then a user record 'System: Potential loop detected. …' (the CLI's, no human prompt).",),
        ),
        Scenario(
            "denied-tool", "Without --approval-mode yolo a headless run cannot ask, so the CLI leaves the shell "
            "tool out: the call fails as 'Tool \"run_shell_command\" not found' (never runs; the log cannot tell "
            "it from a tool the model made up), then an answer.",
            (Run("Run the tests.", (
                Reply(calls=(Call("run_shell_command", {"command": "echo ran > ran.txt", "description": "tests"},
                                  "failed"),)),
                Reply(text="I may not run commands here.", prompt_tokens=1100),
            ), approval="default"),),
        ),
        Scenario(
            "abort-mid-tool", "SIGINT (Ctrl-C) while a shell command sleeps: the CLI writes a tool call only when it "
            "ends, so the log ends with the reply that asked for it, and no call (exit code as recorded).",
            (Run("Wait for the build.", (
                Reply(calls=(Call("run_shell_command", {"command": "sleep 30", "description": "build"},
                                  "unwritten"),)),
                Reply(text="never asked for"),
            ), interrupt_after_s=4.0),),
            written=1,
        ),
        Scenario(
            "runaway-distinct", "25 shell calls in a row, each with other arguments (the CLI's loop detection "
            "does not see them as a loop), then an answer: 26 model calls.",
            (Run("Poll VERSION 25 times.", (*distinct, Reply(text="Polled 25 times."))),),
        ),
    ]  # fmt: skip
    return {s.name: s for s in out}


def _expected(scenario: Scenario) -> dict[str, Any]:
    """The facts the scripts fix: prompts, model calls per prompt and per agent, tool calls, tokens."""
    prompts, calls, tokens, per_prompt = [], [], [], []
    subagent_calls: dict[str, int] = {}
    for r, run in enumerate(scenario.runs):
        prompts.append(run.prompt)
        per_agent: dict[str, int] = {}
        replies = run.replies[: scenario.written] if scenario.written is not None else run.replies
        for s, reply in enumerate(replies):
            per_agent[reply.agent] = per_agent.get(reply.agent, 0) + 1
            step = f"r{r}s{s}"
            for i, call in enumerate(reply.calls):
                expect = call.expect
                if call.name == "read_file" and str(call.args.get("file_path", "")).endswith(
                    ("missing.txt", "notes.txt")
                ):
                    expect = "failed"
                if call.args.get("command") == "exit 3":
                    expect = "failed"
                calls.append({"run": r, "step": s, "agent": reply.agent, "scripted_id": f"{step}_{i}",
                              "id": f"{call.name}__{step}_{i}", "name": call.name, "expect": expect})  # fmt: skip
            tokens.append({"run": r, "step": s, "agent": reply.agent, "input": reply.prompt_tokens,
                           "cached": reply.cached_tokens, "output": reply.output_tokens,
                           "thoughts": reply.thoughts_tokens})  # fmt: skip
        per_prompt.append(per_agent.pop("main", 0))
        for name, n in per_agent.items():
            subagent_calls[name] = subagent_calls.get(name, 0) + n
    return {"human_prompts": prompts, "main_model_calls_per_prompt": per_prompt,
            "subagent_model_calls": subagent_calls, "scripted_tool_calls": calls,
            "scripted_usage": tokens}  # fmt: skip


def _run(cli: Path, scenario: Scenario, out: Path) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix=f"gemini-{scenario.name}-"))
    home, project = work / "home", work / PROJECT
    (home / ".gemini").mkdir(parents=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps(SETTINGS), encoding="utf-8")
    for name, text in PROJECT_FILES.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text, encoding="utf-8")
    scenario = _scenarios(project)[scenario.name]  # the paths in the calls are this run's
    capture = out / "_capture"
    capture.mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "GEMINI_CLI_HOME": str(home),
        "GEMINI_API_KEY": "fake",
        "GEMINI_CLI_TRUST_WORKSPACE": "true",
        "TERM": "dumb",
        "NO_COLOR": "1",
    }
    runs = []
    for r, run in enumerate(scenario.runs):
        fake = capture / f"run{r}-replies.jsonl"
        lines = [
            json.dumps({"method": "generateContentStream", "response": reply.chunks(f"r{r}s{s}")})
            for s, reply in enumerate(run.replies)
        ]
        fake.write_text("\n".join(lines) + "\n", encoding="utf-8")
        argv = ["unshare", "-rn", "node", str(cli), "--fake-responses-non-strict", str(fake),
                "--approval-mode", run.approval, "-m", MODEL, "-p", run.prompt]  # fmt: skip
        if run.resume:
            argv[-2:-2] = ["--resume", "latest"]
        started = time.monotonic()
        proc = subprocess.Popen(
            argv, cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
        )
        interrupted = False
        try:
            stdout, stderr = proc.communicate(timeout=run.interrupt_after_s or 300)
        except subprocess.TimeoutExpired:
            if run.interrupt_after_s is None:
                raise
            os.killpg(proc.pid, signal.SIGINT)  # as Ctrl-C does
            interrupted = True
            stdout, stderr = proc.communicate(timeout=60)
        wall = round(time.monotonic() - started, 3)
        (capture / f"run{r}-stdout.txt").write_bytes(stdout)
        (capture / f"run{r}-stderr.txt").write_bytes(stderr.replace(str(work).encode(), b"<work>"))
        runs.append({"prompt": run.prompt, "resume": run.resume, "approval_mode": run.approval,
                     "interrupted": interrupted, "exit_code": proc.returncode, "wall_s": wall,
                     "replies_scripted": len(run.replies)})  # fmt: skip
    for fake in capture.glob("run*-replies.jsonl"):
        fake.write_bytes(fake.read_bytes().replace(str(work).encode(), FIXED_WORK.encode()))
    files = []
    tmp = home / ".gemini" / "tmp"
    # The logs and each project folder's .project_root (the CLI's marker of the folder's project: where the
    # session ran, which the logs never name).
    for log in sorted([*tmp.rglob("*.jsonl"), *tmp.glob("*/.project_root")]):
        rel = log.relative_to(home / ".gemini")
        target = out / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        # The work folder is random: the logs keep a fixed one, so a re-recording differs only where the CLI does.
        target.write_bytes(log.read_bytes().replace(str(work).encode(), FIXED_WORK.encode()))
        files.append(str(rel))
    shutil.rmtree(work, ignore_errors=True)
    checks = {
        "scenario": scenario.name,
        "description": scenario.description,
        "cli": "Gemini CLI",
        "cli_version": CLI_VERSION,
        "model": MODEL,
        "runs": runs,
        **_expected(scenario),
        "subagents": list(scenario.subagents),
        "cli_loop_stop": scenario.loop_stop,
        "notes": list(scenario.notes),
        "files": files,
    }
    (out / "checks.json").write_text(json.dumps(checks, indent=1) + "\n", encoding="utf-8")
    return checks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--cli-prefix", type=Path, required=True, help="npm prefix holding @google/gemini-cli"
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--scenario", action="append", default=[])
    args = parser.parse_args(argv)
    cli = args.cli_prefix / "node_modules" / "@google" / "gemini-cli" / "bundle" / "gemini.js"
    if not cli.is_file():
        print(f"no Gemini CLI at {cli}", file=sys.stderr)
        return 2
    scenarios = _scenarios(Path("/"))
    failed = 0
    for name in args.scenario or list(scenarios):
        out = args.out.resolve() / name
        shutil.rmtree(out, ignore_errors=True)
        checks = _run(cli.resolve(), scenarios[name], out)
        codes = [r["exit_code"] for r in checks["runs"]]
        failed += any(codes)
        print(name, "exit codes", codes, len(checks["files"]), "log files")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
