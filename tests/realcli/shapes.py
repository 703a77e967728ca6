"""Capture session shapes from the real Copilot CLI into fixture folders (rerunnable).

Usage::

    python -m tests.realcli.shapes OUT_DIR [--only NAME ...] [--lab DIR]

For every shape (see :data:`SHAPES`) this starts the scripted fake model
(:mod:`tests.realcli.fake_model`, the only fake), runs the real CLI one or more times
(BYOK offline, clean environment, throw-away ``$HOME``, a prepared working folder,
``--output-format json``, the CLI's own OTel file export with message content) and
writes ``OUT_DIR/<name>/`` laid out like ``tests/fixtures/cli-generated/<name>/``:

* the session folder's files verbatim (``events.jsonl``, ``workspace.yaml``, …);
* ``_capture/``: ``otel.jsonl`` (every run's CLI OTel export, concatenated),
  ``stdout.jsonl``, ``stderr.txt`` (concatenated per run), ``process-*.log``,
  ``model-requests.jsonl``, ``meta.json`` and, for the MCP shape, ``mcp-requests.jsonl``
  (every JSON-RPC message the CLI sent to :mod:`tests.realcli.mcp_server`).

Mechanical reductions keep fixtures small, all recorded in ``meta.json``:
``model-requests.jsonl`` shows the system prompt as length+hash and tools by name (as the
``cli-generated`` fixtures do) and folds a history prefix it already logged into a
reference to that request; in ``otel.jsonl`` a long attribute value that repeats one
already written earlier in the file (the system prompt and tool definitions on every
``chat`` span) is replaced by ``<repeat: N chars, sha256 …>`` (the first occurrence is
kept verbatim); the session folder's ``session.db`` is left out. ``events.jsonl``,
``stdout.jsonl``, ``stderr.txt`` and the process logs are the CLI's bytes, unchanged.

The CLI's ``$HOME`` is ``<lab>/<name>/home`` and the working folder
``<lab>/<name>/projects/<name>`` (``--lab`` defaults to :data:`DEFAULT_LAB`); session ids are
fixed, so reruns give the same ids and paths (timestamps, event ids and durations differ).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.realcli.fake_model import (
    FakeModelServer,
    RecordedRequest,
    Script,
    Step,
    ToolCall,
    marker,
    prompt_for,
)
from tests.realcli.harness import (
    CLI_VERSION,
    MODEL,
    build_env,
    find_copilot_binary,
    read_events,
    run_copilot,
    session_dir,
)

__all__ = ["SHAPES", "Run", "Shape", "capture", "main"]

DEFAULT_LAB = Path("/tmp/copilot-otel-shapes")
# Attribute values at least this long are replaced in otel.jsonl when they repeat verbatim.
OTEL_REPEAT_MIN_CHARS = 2_000
# How long to wait for a tool.execution_start before giving up on an interrupt (seconds).
INTERRUPT_DEADLINE_S = 60.0
POLL_S = 0.05
# The TUI's footer hint once its input box takes keys, and a little more time for it to settle.
TUI_READY = "/ commands"
TUI_SETTLE_S = 1.0
MCP_SERVER = Path(__file__).resolve().with_name("mcp_server.py")
# Left out of the copied session folder: the per-session SQLite database (written once the
# session compacts; ~190 KB of empty workflow tables, nothing the event log lacks).
LEFT_OUT = "session.db*"
# Placeholders in Run.args, replaced when the shape runs.
SESSION_ID_TOKEN = "<session-id>"
MCP_CONFIG_TOKEN = "<mcp-config>"
# Headers that only say which client library / connection sent a request (noise in a diff).
_DROPPED_HEADERS = ("host", "content-length", "accept-encoding", "connection")


@dataclass(frozen=True, slots=True)
class Run:
    """One CLI process of a shape.

    Args:
        prompt: the ``-p`` prompt.
        args: extra CLI arguments (``<session-id>`` and ``<mcp-config>`` are substituted);
            the first run always gets ``--session-id=<id>``.
        interrupt_on: a tool-call id: SIGINT the CLI once that call's ``tool.execution_start``
            is in ``events.jsonl`` (plus ``interrupt_delay_s``).
        timeout_s: kill the run (and fail the capture) after this long.
        env: added to the run's clean environment (e.g. ``COPILOT_MODEL``).
        interrupt_after_requests: SIGINT the CLI once the fake model got this many chat
            requests in this run (plus ``interrupt_delay_s``): Ctrl-C during a model reply.
        tui: run the interactive CLI in a tmux pane instead of ``-p``, type ``prompt`` there
            (``/<skill> args`` invokes a skill: only the TUI has user-invoked skills), wait for
            ``tui_turns`` turn ends, then type ``/exit``.
        import_transcript: instead of a ``-p`` prompt, run ``copilot sessions import`` on this
            transcript (JSON lines; ``prompt`` is unused); the imported session's id, which
            the CLI chooses, replaces ``<session-id>`` in later runs.
    """

    prompt: str
    args: tuple[str, ...] = ()
    interrupt_on: str | None = None
    interrupt_delay_s: float = 1.0
    timeout_s: float = 180.0
    env: Mapping[str, str] = field(default_factory=dict)
    interrupt_after_requests: int | None = None
    import_transcript: tuple[Mapping[str, Any], ...] = ()
    tui: bool = False
    tui_turns: int = 1


@dataclass(frozen=True, slots=True)
class Shape:
    """A session shape: scripts for the fake model, the CLI runs, the working folder's files."""

    name: str
    description: str
    session_id: str
    scripts: tuple[Script, ...]
    runs: tuple[Run, ...]
    files: Mapping[str, str] = field(default_factory=dict)
    # Trust the working folder (``trustedFolders`` in the CLI's config.json): repository hooks,
    # skills and agents load only there (``--trust-folder`` refuses ``--session-id``).
    trusted: bool = False
    # The CLI's user settings (``$HOME/.copilot/settings.json``), e.g. feature flags; None: no file.
    settings: Mapping[str, Any] | None = None


def _bash(command: str, description: str, **extra: Any) -> ToolCall:
    return ToolCall("bash", {"command": command, "description": description, **extra})


def _task_complete(summary: str) -> ToolCall:
    return ToolCall("task_complete", {"summary": summary})


def _sid(n: int) -> str:
    return f"0e{n:06x}-0000-4000-8000-{n:012x}"


def _loop_steps(blocks: int, calls: int) -> tuple[Step, ...]:
    """``blocks`` times: ``calls`` steps of the identical ``bash echo loop``, then a text answer."""
    loop = Step(tool_calls=(_bash("echo loop", "Loop again"),))
    block = (loop,) * calls + (Step(content="Still not done; looping again."),)
    return block * blocks


_PROJECT = {
    "README.md": "# Shapes demo\n\nA tiny project the real Copilot CLI works on.\n",
    "src/app.py": "def add(a, b):\n    return a + b\n",
}

# A project extension (.github/extensions/<name>/extension.mjs): a Node process the CLI forks,
# joined over JSON-RPC on stdio through the SDK the CLI bundles. It offers one tool, which fails
# (the handler throws) when asked to greet "boom". In 1.0.102 extensions load only with the
# EXTENSIONS feature flag in settings.json (an object, not a list: a list is ignored with a
# warning), and in -p mode project extensions only with GITHUB_COPILOT_PROMPT_MODE_EXTENSIONS=true
# (folder trust is not consulted in -p mode; without it the tool "does not exist").
_EXTENSION_NAME = "shapes-greeter"
_EXTENSION = """\
import { joinSession } from "@github/copilot-sdk/extension";

await joinSession({
    tools: [
        {
            name: "shapes_greet",
            description: "Greets someone by name.",
            parameters: {
                type: "object",
                properties: { name: { type: "string", description: "Who to greet" } },
                required: ["name"],
            },
            handler: async ({ name }) => {
                if (name === "boom") throw new Error("scripted failure for boom");
                return `hello, ${name}`;
            },
        },
    ],
});
"""

# Repository hooks (.github/hooks/*.json, loaded with --trust-folder): every hook type the
# CLI runs in -p mode; the preToolUse hook denies any call whose input mentions "rm -f"; of the
# two postToolUse hooks one outlives its 1 s timeout, the other exits 2.
_DENY_RM = (
    'input=$(cat); case "$input" in *"rm -f"*) echo \'{"permissionDecision": "deny", '
    '"permissionDecisionReason": "rm is blocked by the project policy"}\';; esac'
)
_HOOKS = {
    "version": 1,
    "hooks": {
        "sessionStart": [{"type": "command", "bash": "cat > /dev/null; echo session started"}],
        "userPromptSubmitted": [{"type": "command", "bash": "cat > /dev/null"}],
        "preToolUse": [{"type": "command", "bash": _DENY_RM}],
        "postToolUse": [
            {"type": "command", "bash": "cat > /dev/null; sleep 5", "timeoutSec": 1},
            {"type": "command", "bash": "cat > /dev/null; echo post hook crashed >&2; exit 2"},
        ],
        "agentStop": [{"type": "command", "bash": "cat > /dev/null"}],
        "sessionEnd": [{"type": "command", "bash": "cat > /dev/null"}],
    },
}
_SKILL = (
    "---\nname: release-notes\ndescription: Write release notes for this project.\n---\n\n"
    "Write the release notes as a short bullet list of user-visible changes.\n"
)
_AGENT = (
    "---\nname: reviewer\ndescription: Reviews the project and reports problems.\n---\n\n"
    "You are a careful code reviewer. Read the sources and report problems briefly.\n"
)
# A transcript in the CLI's session interchange format (version 1), dated 2026-11-20: a
# question, an answer with one tool call and its result, a follow-up and its answer.
_IMPORT_TRANSCRIPT: tuple[Mapping[str, Any], ...] = (
    {
        "type": "session",
        "version": 1,
        "externalId": "shapes-import-1",
        "createdAt": "2026-11-20T09:00:00.000Z",
        "updatedAt": "2026-11-20T09:05:00.000Z",
        "title": "Imported shapes conversation",
        "source": {"application": "copilot-otel-shapes", "version": "1"},
    },
    {
        "type": "message",
        "id": "m1",
        "timestamp": "2026-11-20T09:00:00.000Z",
        "role": "user",
        "content": [{"type": "text", "text": "What does src/app.py define?"}],
    },
    {
        "type": "message",
        "id": "m2",
        "timestamp": "2026-11-20T09:01:00.000Z",
        "role": "assistant",
        "turnId": "t1",
        "model": "gpt-4.1",
        "content": [{"type": "text", "text": "Let me read it."}],
    },
    {
        "type": "tool-call",
        "id": "c1",
        "timestamp": "2026-11-20T09:01:01.000Z",
        "turnId": "t1",
        "name": "view",
        "arguments": {"path": "src/app.py"},
    },
    {
        "type": "tool-result",
        "id": "r1",
        "timestamp": "2026-11-20T09:01:02.000Z",
        "turnId": "t1",
        "toolCallId": "c1",
        "success": True,
        "content": "def add(a, b):\n    return a + b\n",
    },
    {
        "type": "message",
        "id": "m3",
        "timestamp": "2026-11-20T09:02:00.000Z",
        "role": "assistant",
        "turnId": "t1",
        "model": "gpt-4.1",
        "content": [{"type": "text", "text": "It defines add(a, b)."}],
    },
    {
        "type": "message",
        "id": "m4",
        "timestamp": "2026-11-20T09:04:00.000Z",
        "role": "user",
        "content": [{"type": "text", "text": "Thanks."}],
    },
    {
        "type": "message",
        "id": "m5",
        "timestamp": "2026-11-20T09:05:00.000Z",
        "role": "assistant",
        "turnId": "t2",
        "model": "gpt-4.1",
        "content": [{"type": "text", "text": "You are welcome."}],
    },
)

SHAPES: tuple[Shape, ...] = (
    Shape(
        "autopilot-cap",
        "--autopilot --max-autopilot-continues 3; the model only ever answers text and never calls "
        "task_complete, so the CLI sends 3 autopilot continuations and stops at its cap "
        "(stdout: session.autopilot_stopped reason cap_reached).",
        _sid(1),
        (
            Script(
                "apcap",
                (Step(content="I looked at the project and will keep going."),),
                final="Still thinking about the task.",
            ),
        ),
        (
            Run(
                prompt_for("apcap", "Review the project and report."),
                ("--autopilot", "--max-autopilot-continues", "3"),
            ),
        ),
        _PROJECT,
    ),
    Shape(
        "autopilot-complete",
        "--autopilot; the model answers text (one continuation follows), runs bash in the continuation, "
        "then calls task_complete {summary}: session.task_complete, no model call after it.",
        _sid(2),
        (
            Script(
                "apdone",
                (
                    Step(content="Let me plan the work first."),
                    Step(
                        content="Writing the result.",
                        tool_calls=(_bash("echo 42 > result.txt && cat result.txt", "Write the result"),),
                    ),
                    Step(
                        content="The result is written.",
                        tool_calls=(_task_complete("Wrote 42 to result.txt."),),
                    ),
                ),
                final="Done.",
            ),
        ),
        (Run(prompt_for("apdone", "Write the answer to result.txt."), ("--autopilot",)),),
        _PROJECT,
    ),
    Shape(
        "autopilot-loop",
        "A runaway: --autopilot --max-autopilot-continues 3; each of the 4 segments (prompt + 3 "
        "continuations) has 8 model turns of the identical bash 'echo loop', then a text answer: "
        "32 identical bash calls, then the CLI stops at its cap.",
        _sid(3),
        (Script("aploop", _loop_steps(4, 8), final="Still not done; looping again."),),
        (
            Run(
                prompt_for("aploop", "Keep checking until the loop ends."),
                ("--autopilot", "--max-autopilot-continues", "3"),
            ),
        ),
        _PROJECT,
    ),
    Shape(
        "fleet",
        "--fleet; the model starts two explore sub-agents with task mode=background (each prompt has its "
        "own marker), says it waits; each sub-agent runs one tool and answers; the CLI then injects "
        "system.notification agent_idle and writes read_agent calls itself; a final model turn answers.",
        _sid(4),
        (
            Script(
                "fleet",
                (
                    Step(
                        content="I'll start two helpers in the background.",
                        tool_calls=(
                            ToolCall(
                                "task",
                                {
                                    "name": "alpha",
                                    "agent_type": "explore",
                                    "description": "Survey the sources",
                                    "prompt": prompt_for("fleeta", "List the Python files in {cwd}."),
                                    "mode": "background",
                                },
                            ),
                            ToolCall(
                                "task",
                                {
                                    "name": "beta",
                                    "agent_type": "explore",
                                    "description": "Read the README",
                                    "prompt": prompt_for("fleetb", "Summarise {cwd}/README.md."),
                                    "mode": "background",
                                },
                            ),
                        ),
                    ),
                    Step(content="Both helpers are running; I will wait for their results."),
                ),
                final="Both helpers reported back: one Python file and a short README.",
            ),
            Script(
                "fleeta",
                (
                    Step(
                        tool_calls=(ToolCall("glob", {"pattern": "**/*.py", "paths": "{cwd}"}),), delay_s=1.0
                    ),
                    Step(content="There is one Python file: src/app.py.", delay_s=1.0),
                ),
            ),
            Script(
                "fleetb",
                (
                    Step(tool_calls=(ToolCall("view", {"path": "{cwd}/README.md"}),), delay_s=1.5),
                    Step(content="The README describes a tiny demo project.", delay_s=1.5),
                ),
            ),
        ),
        (Run(prompt_for("fleet", "Survey this project with helpers in parallel."), ("--fleet",)),),
        _PROJECT,
    ),
    Shape(
        "background-shell",
        "bash with mode=async (the tool schema's background mode) runs 'sleep 2'; meanwhile the agent "
        "runs a 4 s foreground bash; the background command finishes first: system.notification "
        "shell_completed, then a CLI-written assistant.message calling read_bash, then a final answer.",
        _sid(5),
        (
            Script(
                "bgshell",
                (
                    Step(
                        content="Starting the build in the background.",
                        tool_calls=(
                            _bash(
                                "sleep 2; echo background build finished",
                                "Build in the background",
                                mode="async",
                                shellId="build",
                            ),
                        ),
                    ),
                    Step(
                        content="While it builds, I check the sources.",
                        tool_calls=(_bash("sleep 4; wc -l src/app.py", "Check the sources"),),
                    ),
                    Step(content="The sources are fine; waiting for the build."),
                ),
                final="The background build finished.",
            ),
        ),
        (Run(prompt_for("bgshell", "Build the project in the background and check the sources.")),),
        _PROJECT,
    ),
    Shape(
        "compaction-threshold",
        "The first reply reports usage.prompt_tokens=70000 (over BYOK gpt-4.1's 64000 limit) with a bash "
        "call: the CLI compacts by threshold (session.compaction_start trigger threshold, a "
        "conversation-compaction model call, session.compaction_complete), then the script continues.",
        _sid(6),
        (
            Script(
                "compact",
                (
                    Step(
                        content="Reading a lot of files.",
                        tool_calls=(_bash("cat README.md src/app.py", "Read the files"),),
                        prompt_tokens=70_000,
                    ),
                    Step(
                        content="One more check.",
                        tool_calls=(_bash("wc -c README.md", "Count bytes"),),
                    ),
                ),
                final="The project has a README and one module.",
            ),
        ),
        (Run(prompt_for("compact", "Read everything in the project.")),),
        _PROJECT,
    ),
    Shape(
        "compaction-manual",
        "Run 1: a prompt with two bash turns and an answer; run 2: --resume with -p /compact: a manual "
        "compaction (no user.message, no turn) with model.* events.",
        _sid(7),
        (
            Script(
                "manual",
                (
                    Step(content="Listing files.", tool_calls=(_bash("ls", "List files"),)),
                    Step(content="Reading the module.", tool_calls=(_bash("cat src/app.py", "Read"),)),
                ),
                final="src/app.py defines add(a, b).",
            ),
        ),
        (
            Run(prompt_for("manual", "What does this project define?")),
            Run("/compact", (f"--resume={SESSION_ID_TOKEN}",)),
        ),
        _PROJECT,
    ),
    Shape(
        "plan-to-autopilot",
        "Run 1: --plan; the model answers with a plan. Run 2: --resume --plan --mode autopilot; the model "
        "calls exit_plan_mode (approved automatically: session.mode_changed plan -> autopilot inside the "
        "prompt), runs bash, then task_complete.",
        _sid(8),
        (
            Script(
                "plan",
                (Step(content="Plan:\n1. Add a subtract function to src/app.py.\n2. Check it with python."),),
                final="The plan is ready.",
            ),
            Script(
                "planrun",
                (
                    Step(
                        content="The plan is ready; leaving plan mode.",
                        tool_calls=(
                            ToolCall(
                                "exit_plan_mode",
                                {"summary": "1. Add subtract to src/app.py. 2. Check it with python."},
                            ),
                        ),
                    ),
                    Step(
                        content="Implementing the plan.",
                        tool_calls=(
                            _bash(
                                "printf 'def sub(a, b):\\n    return a - b\\n' >> src/app.py && "
                                "python3 -c 'import sys; sys.path.insert(0, \"src\"); import app; print(app.sub(5, 3))'",
                                "Add and check sub",
                            ),
                        ),
                    ),
                    Step(
                        content="sub works.",
                        tool_calls=(_task_complete("Added sub(a, b) to src/app.py; sub(5, 3) == 2."),),
                    ),
                ),
                final="Done.",
            ),
        ),
        (
            Run(prompt_for("plan", "Plan adding a subtract function."), ("--plan",)),
            Run(
                prompt_for("planrun", "Implement the plan."),
                (f"--resume={SESSION_ID_TOKEN}", "--plan", "--mode", "autopilot"),
            ),
        ),
        _PROJECT,
    ),
    Shape(
        "model-change-resume",
        "Run 1 on gpt-4.1 (one bash turn); run 2: --resume --model gpt-5-mini: session.model_change "
        "{source: startup} before the second prompt, whose model calls name gpt-5-mini.",
        _sid(9),
        (
            Script(
                "modela",
                (Step(content="Counting lines.", tool_calls=(_bash("wc -l src/app.py", "Count lines"),)),),
                final="src/app.py has 2 lines.",
            ),
            Script("modelb", (Step(content="The README has three lines."),)),
        ),
        (
            Run(prompt_for("modela", "How long is src/app.py?")),
            Run(
                prompt_for("modelb", "And the README?"),
                (f"--resume={SESSION_ID_TOKEN}", "--model", "gpt-5-mini"),
            ),
        ),
        _PROJECT,
    ),
    Shape(
        "mcp-tools",
        "A stdio MCP server of our own (tests/realcli/mcp_server.py) via --additional-mcp-config: "
        "shapes-echo and shapes-add succeed (parallel), shapes-fail returns isError, shapes-boom answers "
        "a JSON-RPC error; then a final answer.",
        _sid(10),
        (
            Script(
                "mcp",
                (
                    Step(
                        content="Calling the MCP tools.",
                        tool_calls=(
                            ToolCall("shapes-echo", {"text": "hello from mcp"}),
                            ToolCall("shapes-add", {"a": 2, "b": 3}),
                        ),
                    ),
                    Step(tool_calls=(ToolCall("shapes-fail", {"reason": "scripted"}),)),
                    Step(tool_calls=(ToolCall("shapes-boom", {}),)),
                ),
                final="echo and add worked; fail and boom failed as expected.",
            ),
        ),
        (
            Run(
                prompt_for("mcp", "Try the shapes MCP tools."),
                (f"--additional-mcp-config={MCP_CONFIG_TOKEN}",),
            ),
        ),
        _PROJECT,
    ),
    Shape(
        "denied-tools",
        "--deny-tool=shell(rm) --deny-tool=write --excluded-tools=glob: bash rm is denied while a parallel "
        "bash echo runs, create is denied (write), glob is not offered and fails as an unknown tool.",
        _sid(11),
        (
            Script(
                "denied",
                (
                    Step(
                        content="Cleaning up and checking.",
                        tool_calls=(
                            _bash("rm -f scratch.txt", "Remove the scratch file"),
                            _bash("echo still here", "Say hello"),
                        ),
                    ),
                    Step(
                        content="Writing notes.",
                        tool_calls=(ToolCall("create", {"path": "{cwd}/NOTES.md", "file_text": "notes\n"}),),
                    ),
                    Step(tool_calls=(ToolCall("glob", {"pattern": "**/*"}),)),
                ),
                final="rm and create were denied and glob is not available.",
            ),
        ),
        (
            Run(
                prompt_for("denied", "Clean up scratch.txt and write notes."),
                ("--deny-tool=shell(rm)", "--deny-tool=write", "--excluded-tools=glob"),
            ),
        ),
        {**_PROJECT, "scratch.txt": "scratch\n"},
    ),
    Shape(
        "sigint-autopilot",
        "--autopilot; the first answer is text, so an autopilot continuation follows; in it the model "
        "runs 'sleep 30' and the CLI gets SIGINT 1.5 s after that tool.execution_start is on disk.",
        _sid(12),
        (
            Script(
                "apint",
                (
                    Step(content="Let me think about the migration."),
                    Step(
                        content="Running the migration.",
                        tool_calls=(
                            _bash("echo migrating; sleep 30; echo migrated", "Migrate", initial_wait=60),
                        ),
                    ),
                ),
                final="Migrated.",
            ),
        ),
        (
            Run(
                prompt_for("apint", "Run the migration."),
                ("--autopilot",),
                interrupt_on="call_apint_1_0",
                interrupt_delay_s=1.5,
            ),
        ),
        _PROJECT,
    ),
    Shape(
        "hooks",
        "Repository hooks (.github/hooks/policy.json) in a trusted folder (trustedFolders in config.json): sessionStart, "
        "userPromptSubmitted, agentStop, sessionEnd run; a preToolUse hook denies 'rm -f scratch.txt'; "
        "after the next bash call one postToolUse hook times out (timeoutSec 1, sleeps 5) and another "
        "exits 2 (hook.end success false, session.warning).",
        _sid(13),
        (
            Script(
                "hooks",
                (
                    Step(
                        content="Removing the scratch file.",
                        tool_calls=(_bash("rm -f scratch.txt", "Remove the scratch file"),),
                    ),
                    Step(content="That was blocked; listing instead.", tool_calls=(_bash("ls", "List"),)),
                ),
                final="rm is blocked here; the folder holds README.md, scratch.txt and src.",
            ),
        ),
        (Run(prompt_for("hooks", "Remove scratch.txt.")),),
        {**_PROJECT, "scratch.txt": "scratch\n", ".github/hooks/policy.json": json.dumps(_HOOKS, indent=2)},
        trusted=True,
    ),
    Shape(
        "skill-agent",
        "A project skill (.github/skills/release-notes/SKILL.md) in a trusted folder; the model calls "
        "the skill tool (skill.invoked, agent-invoked), then answers.",
        _sid(14),
        (
            Script(
                "skill",
                (
                    Step(
                        content="Loading the skill.",
                        tool_calls=(ToolCall("skill", {"skill": "release-notes"}),),
                    ),
                ),
                final="- Added add(a, b).",
            ),
        ),
        (Run(prompt_for("skill", "Write the release notes.")),),
        {**_PROJECT, ".github/skills/release-notes/SKILL.md": _SKILL},
        trusted=True,
    ),
    Shape(
        "skill-plugin",
        "A local plugin (--plugin-dir plugins/shapes-tools: plugin.json and skills/plugin-notes/SKILL.md); "
        "the model calls the skill tool for the plugin's skill: skill.invoked with the plugin's name.",
        _sid(23),
        (
            Script(
                "pskill",
                (
                    Step(
                        content="Loading the plugin skill.",
                        tool_calls=(ToolCall("skill", {"skill": "plugin-notes"}),),
                    ),
                ),
                final="- Added add(a, b).",
            ),
        ),
        (
            Run(
                prompt_for("pskill", "Write the notes with the plugin."),
                ("--plugin-dir", "plugins/shapes-tools"),
            ),
        ),
        {
            **_PROJECT,
            "plugins/shapes-tools/plugin.json": json.dumps(
                {
                    "name": "shapes-tools",
                    "description": "Skills for the shapes demo.",
                    "version": "1.0.0",
                    "skills": ["skills/"],
                }
            ),
            "plugins/shapes-tools/skills/plugin-notes/SKILL.md": _SKILL.replace(
                "release-notes", "plugin-notes"
            ),
        },
        trusted=True,
    ),
    Shape(
        "skill-user",
        "The interactive CLI in a tmux pane (trusted folder): the user types '/notes-writer for version 2': "
        "skill.invoked (user-invoked) is written before the user.message it belongs to; one text answer.",
        _sid(21),
        (Script("uskill", (Step(content="- Version 2 adds add(a, b)."),)),),
        (Run(f"/notes-writer for version 2 {marker('uskill')}", tui=True, timeout_s=40.0),),
        {**_PROJECT, ".github/skills/notes-writer/SKILL.md": _SKILL.replace("release-notes", "notes-writer")},
        trusted=True,
    ),
    Shape(
        "custom-agent",
        "--agent reviewer with .github/agents/reviewer.agent.md in a trusted folder: the main agent is "
        "custom (subagent.selected before the prompt); one bash turn, then an answer.",
        _sid(15),
        (
            Script(
                "review",
                (
                    Step(
                        content="Reading the module.",
                        tool_calls=(_bash("cat src/app.py", "Read the module"),),
                    ),
                ),
                final="No problems: add(a, b) is correct.",
            ),
        ),
        (Run(prompt_for("review", "Review the project."), ("--agent", "reviewer")),),
        {**_PROJECT, ".github/agents/reviewer.agent.md": _AGENT},
        trusted=True,
    ),
    Shape(
        "reasoning",
        "COPILOT_MODEL=gpt-5-mini --reasoning-effort high; each reply streams reasoning_content and "
        "reports completion_tokens_details.reasoning_tokens and prompt_tokens_details.cached_tokens; "
        "run 2 resumes with --reasoning-effort low (session.model_change).",
        _sid(16),
        (
            Script(
                "reason",
                (
                    Step(
                        content="Counting the lines.",
                        tool_calls=(_bash("wc -l src/app.py", "Count lines"),),
                        reasoning="The user wants a line count; wc -l answers it.",
                        reasoning_tokens=25,
                        cached_tokens=1_000,
                        completion_tokens=60,
                    ),
                    Step(
                        content="src/app.py has 2 lines.",
                        reasoning="wc printed 2.",
                        reasoning_tokens=10,
                        cached_tokens=1_100,
                    ),
                ),
            ),
            Script(
                "reasonb",
                (Step(content="The README has three lines.", reasoning="Short.", reasoning_tokens=5),),
            ),
        ),
        (
            Run(
                prompt_for("reason", "How long is src/app.py?"),
                ("--reasoning-effort", "high"),
                env={"COPILOT_MODEL": "gpt-5-mini"},
            ),
            Run(
                prompt_for("reasonb", "And the README?"),
                (f"--resume={SESSION_ID_TOKEN}", "--reasoning-effort", "low"),
                env={"COPILOT_MODEL": "gpt-5-mini"},
            ),
        ),
        _PROJECT,
    ),
    Shape(
        "error-context",
        "The model answers HTTP 400 context_length_exceeded (terminal, no retry): no usage record, then "
        "session.error with statusCode 400 and the provider's message; exit 1.",
        _sid(17),
        (
            Script(
                "ctxlen",
                (
                    Step(
                        status=400,
                        error_code="context_length_exceeded",
                        error_message="This model's maximum context length is 64000 tokens. However, your "
                        "messages resulted in 70000 tokens.",
                    ),
                ),
            ),
        ),
        (Run(prompt_for("ctxlen", "Summarise the whole history.")),),
        _PROJECT,
    ),
    Shape(
        "error-ratelimit",
        "The model answers every request HTTP 429 (Retry-After 1): the CLI retries, then gives up with "
        "session.error statusCode 429; exit 1.",
        _sid(18),
        (
            Script(
                "ratelimit",
                (
                    Step(
                        status=429,
                        error_code="rate_limit_exceeded",
                        error_message="Rate limit reached for requests. Please try again later.",
                        retry_after_s=1,
                    ),
                ),
            ),
        ),
        (Run(prompt_for("ratelimit", "Say hello."), timeout_s=240.0),),
        _PROJECT,
    ),
    Shape(
        "ctrlc-stream",
        "The second model reply streams its first text deltas and stalls; the CLI gets SIGINT 2 s after "
        "that request arrived (Ctrl-C during a streamed reply): abort, no assistant.message or usage "
        "record for the cut call.",
        _sid(19),
        (
            Script(
                "cut",
                (
                    Step(content="Listing first.", tool_calls=(_bash("ls", "List"),)),
                    Step(content="Here is a long explanation that never finishes", stall=True),
                ),
            ),
        ),
        (
            Run(
                prompt_for("cut", "Explain the project at length."),
                interrupt_after_requests=2,
                interrupt_delay_s=2.0,
            ),
        ),
        _PROJECT,
    ),
    Shape(
        "sandbox",
        "--sandbox on a machine without bubblewrap: the bash call is recorded as run (success, exit code 1, "
        "a 'Sandboxing is enabled but not supported' result) and tool.execution_complete says sandboxed.",
        _sid(24),
        (
            Script(
                "sandbox",
                (Step(content="Listing.", tool_calls=(_bash("ls", "List"),)),),
                final="The sandbox is not available here.",
            ),
        ),
        (Run(prompt_for("sandbox", "List the files."), ("--sandbox",)),),
        _PROJECT,
    ),
    Shape(
        "usage-out-of-range",
        "The first reply reports usage.completion_tokens = 2**60 (beyond the 2**53 a JSON number holds "
        "exactly): the CLI writes it as is in the usage record and the shutdown totals, then fails the next "
        "call on its prompt budget (a compaction, then session.error without a status); exit 1.",
        _sid(22),
        (
            Script(
                "huge",
                (
                    Step(
                        content="Counting.",
                        tool_calls=(_bash("wc -l src/app.py", "Count"),),
                        completion_tokens=2**60,
                    ),
                ),
                final="src/app.py has 2 lines.",
            ),
        ),
        (Run(prompt_for("huge", "How long is src/app.py?")),),
        _PROJECT,
    ),
    Shape(
        "imported",
        "copilot sessions import of a transcript dated 2026-11-20 (two user messages, three assistant "
        "messages, one view call and its result), then --resume with a real prompt and one bash turn.",
        _sid(20),
        (
            Script(
                "afterimport",
                (Step(content="Counting lines.", tool_calls=(_bash("wc -l src/app.py", "Count lines"),)),),
                final="src/app.py has 2 lines.",
            ),
        ),
        (
            Run("", import_transcript=_IMPORT_TRANSCRIPT),
            Run(prompt_for("afterimport", "How long is src/app.py?"), (f"--resume={SESSION_ID_TOKEN}",)),
        ),
        _PROJECT,
    ),
    Shape(
        "extension-tools",
        f"A project extension (.github/extensions/{_EXTENSION_NAME}/extension.mjs, EXTENSIONS feature flag in "
        "settings.json, GITHUB_COPILOT_PROMPT_MODE_EXTENSIONS=true) offering the tool shapes_greet; the model "
        "calls it twice in parallel, once succeeding and once failing (the handler throws), then answers.",
        _sid(25),
        (
            Script(
                "ext",
                (
                    Step(
                        content="Greeting through the extension.",
                        tool_calls=(
                            ToolCall("shapes_greet", {"name": "otel"}),
                            ToolCall("shapes_greet", {"name": "boom"}),
                        ),
                    ),
                ),
                final="Greeted otel; greeting boom failed as expected.",
            ),
        ),
        (
            Run(
                prompt_for("ext", "Greet otel and boom with the extension tool."),
                env={"GITHUB_COPILOT_PROMPT_MODE_EXTENSIONS": "true"},
            ),
        ),
        {**_PROJECT, f".github/extensions/{_EXTENSION_NAME}/extension.mjs": _EXTENSION},
        settings={"enabledFeatureFlags": {"EXTENSIONS": True}},
    ),
)


def _reduce_requests(records: Sequence[RecordedRequest], scripts: Mapping[str, Script]) -> Iterator[str]:
    """The model-requests.jsonl lines, each request's history prefix shared with an earlier one folded.

    Every request resends the whole history; when its ``messages`` start with all messages of
    an earlier request, that prefix becomes ``{"role": "<history>", "same_as_seq": k,
    "messages": n}`` (the latest such request), so the log grows linearly, not quadratically.
    """
    earlier: list[tuple[int, list[Any]]] = []
    for record in records:
        out = _reduce_request(record, scripts)
        body = out["body"]
        if isinstance(body, dict) and isinstance(body.get("messages"), list):
            messages: list[Any] = body["messages"]
            for seq, previous in reversed(earlier):
                if 1 < len(previous) <= len(messages) and messages[: len(previous)] == previous:
                    prefix = {"role": "<history>", "same_as_seq": seq, "messages": len(previous)}
                    body["messages"] = [prefix, *messages[len(previous) :]]
                    break
            earlier.append((record.seq, messages))
        yield json.dumps(out)


def _reduce_request(record: RecordedRequest, scripts: Mapping[str, Script]) -> dict[str, Any]:
    """One model-requests.jsonl line: credentials already redacted; system prompt and tools reduced."""
    out = record.as_dict()
    out["headers"] = {
        k: v
        for k, v in record.headers.items()
        if k not in _DROPPED_HEADERS and not k.startswith("x-stainless-")
    }
    body = record.body
    if isinstance(body, dict):
        body = dict(body)
        messages = []
        for m in body.get("messages", []):
            if isinstance(m, dict) and m.get("role") == "system" and isinstance(m.get("content"), str):
                text = m["content"]
                digest = hashlib.sha256(text.encode()).hexdigest()[:16]
                m = {**m, "content": f"<system prompt: {len(text)} chars, sha256 {digest}>"}
            messages.append(m)
        body["messages"] = messages
        if isinstance(body.get("tools"), list):
            body["tools"] = [t.get("function", {}).get("name") for t in body["tools"] if isinstance(t, dict)]
        out["body"] = body
    script = scripts.get(record.script or "")
    if script is not None and record.step_index is not None:
        out["step"] = _step_dict(script.step(record.step_index))
    return out


def _step_dict(step: Step) -> dict[str, Any]:
    out: dict[str, Any] = {
        "content": step.content,
        "tool_calls": [{"name": c.name, "arguments": dict(c.arguments)} for c in step.tool_calls],
    }
    defaults = Step()
    for name in (
        "delay_s",
        "hang",
        "status",
        "prompt_tokens",
        "completion_tokens",
        "reasoning",
        "reasoning_tokens",
        "cached_tokens",
        "error_code",
        "error_message",
        "retry_after_s",
        "stall",
    ):
        if getattr(step, name) != getattr(defaults, name):
            out[name] = getattr(step, name)
    return out


def _reduce_otel_lines(lines: Iterator[str]) -> Iterator[str]:
    """The CLI's OTel JSON lines, long attribute values that repeat an earlier one replaced."""
    seen: set[str] = set()

    def reduce(value: Any) -> Any:
        if isinstance(value, str) and len(value) >= OTEL_REPEAT_MIN_CHARS:
            digest = hashlib.sha256(value.encode()).hexdigest()[:16]
            if digest in seen:
                return f"<repeat: {len(value)} chars, sha256 {digest}>"
            seen.add(digest)
        return value

    for line in lines:
        if not line.strip():
            continue
        obj = json.loads(line)
        attributes = obj.get("attributes")
        if isinstance(attributes, dict):
            obj["attributes"] = {k: reduce(v) for k, v in attributes.items()}
        yield json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _wait_for_tool_start(folder: Path, call_id: str, proc: subprocess.Popen[bytes]) -> bool:
    end = time.monotonic() + INTERRUPT_DEADLINE_S
    while time.monotonic() < end and proc.poll() is None:
        for event in read_events(folder):
            if event["type"] == "tool.execution_start" and event["data"].get("toolCallId") == call_id:
                return True
        time.sleep(POLL_S)
    return False


def _cli_version(binary: Path) -> str:
    out = subprocess.run(
        [str(binary), "--version"],
        env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/nonexistent", "COPILOT_AUTO_UPDATE": "false"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return out.stdout.strip().splitlines()[0]


def _mcp_config(lab: Path) -> str:
    server = lab / "mcp" / MCP_SERVER.name
    server.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(MCP_SERVER, server)
    config = {
        "mcpServers": {
            "shapes": {
                "type": "local",
                "command": "python3",
                "args": [str(server)],
                "env": {"SHAPES_MCP_LOG": str(lab / "mcp" / "requests.jsonl")},
                "tools": ["*"],
            }
        }
    }
    return json.dumps(config)


def capture(shape: Shape, out_dir: Path, binary: Path, lab_root: Path, log: Callable[[str], None]) -> Path:
    """Run ``shape`` with the real CLI and write its fixture folder ``out_dir/<name>``; returns it."""
    lab = lab_root / shape.name
    shutil.rmtree(lab, ignore_errors=True)
    home, workdir = lab / "home", lab / "projects" / shape.name
    workdir.mkdir(parents=True)
    for rel, text in shape.files.items():
        (workdir / rel).parent.mkdir(parents=True, exist_ok=True)
        (workdir / rel).write_text(text)
    if shape.trusted:
        (home / ".copilot").mkdir(parents=True)
        (home / ".copilot" / "config.json").write_text(json.dumps({"trustedFolders": [str(workdir)]}))
    if shape.settings is not None:
        (home / ".copilot").mkdir(parents=True, exist_ok=True)
        (home / ".copilot" / "settings.json").write_text(json.dumps(shape.settings))
    scripts = {s.name: s for s in shape.scripts}
    tokens = {SESSION_ID_TOKEN: shape.session_id}
    if any(MCP_CONFIG_TOKEN in a for run in shape.runs for a in run.args):
        tokens[MCP_CONFIG_TOKEN] = _mcp_config(lab)
    folder = session_dir(home, shape.session_id)
    runs_meta: list[dict[str, Any]] = []
    stdout_parts: list[str] = []
    stderr_parts: list[str] = []
    otel_files: list[Path] = []
    with FakeModelServer(scripts=scripts) as server:
        for i, run in enumerate(shape.runs):
            if run.import_transcript:
                session_id, result = _import(binary, home, workdir, lab, run, server.base_url)
                tokens[SESSION_ID_TOKEN] = session_id
                folder = session_dir(home, session_id)
                log(f"{shape.name} run {i + 1}: import exit {result.returncode}, session {session_id}")
                stdout_parts.append(result.stdout)
                stderr_parts.append(result.stderr)
                runs_meta.append(
                    {
                        "import": "transcript.jsonl (see import_transcript)",
                        "args": ["sessions", "import", "<transcript.jsonl>", "--output", "json"],
                        "exit_code": result.returncode,
                    }
                )
                continue
            args = [_substitute(a, tokens) for a in run.args]
            if i == 0:
                args.insert(0, f"--session-id={shape.session_id}")
            if run.tui:
                started = time.monotonic()
                first_request = len(server.requests)
                code = _run_tui(binary, home, workdir, run, args, server.base_url, folder)
                log(f"{shape.name} run {i + 1}: tui exit {code} in {time.monotonic() - started:.1f} s")
                runs_meta.append(
                    {
                        "tui": "tmux pane; typed the prompt, then /exit",
                        "prompt": run.prompt,
                        "args": ["--no-auto-update", "--allow-all-tools", *args],
                        "exit_code": code,
                        "request_seqs": [r.seq for r in server.requests[first_request:]],
                    }
                )
                continue
            args += ["--output-format", "json"]
            otel = lab / f"otel-{i + 1}.jsonl"
            otel_files.append(otel)
            first_request = len(server.requests)
            first_chat = len(server.chat_requests())
            started = time.monotonic()
            proc = run_copilot(
                binary,
                home,
                workdir,
                run.prompt,
                server.base_url,
                extra_args=args,
                env_extra={
                    "COPILOT_OTEL_FILE_EXPORTER_PATH": str(otel),
                    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true",
                    **run.env,
                },
                background=True,
            )
            interrupted = False
            try:
                if run.interrupt_on is not None:
                    if not _wait_for_tool_start(folder, run.interrupt_on, proc):
                        raise RuntimeError(f"{shape.name}: no tool.execution_start for {run.interrupt_on}")
                    time.sleep(run.interrupt_delay_s)
                    proc.interrupt()
                    interrupted = True
                elif run.interrupt_after_requests is not None:
                    wanted = first_chat + run.interrupt_after_requests
                    if not server.wait_for_requests(wanted, timeout_s=INTERRUPT_DEADLINE_S):
                        raise RuntimeError(f"{shape.name}: fewer than {wanted} model requests")
                    time.sleep(run.interrupt_delay_s)
                    proc.interrupt()
                    interrupted = True
                result = proc.result(timeout=run.timeout_s)
            finally:
                proc.kill_group()
            log(f"{shape.name} run {i + 1}: exit {result.returncode} in {time.monotonic() - started:.1f} s")
            stdout_parts.append(result.stdout)
            stderr_parts.append(result.stderr)
            runs_meta.append(
                {
                    "prompt": run.prompt,
                    "args": build_args(run.prompt, args),
                    "env": dict(run.env),
                    "interrupt": (
                        {
                            "on_tool_call": run.interrupt_on,
                            "after_requests": run.interrupt_after_requests,
                            "delay_s": run.interrupt_delay_s,
                        }
                        if interrupted
                        else None
                    ),
                    "exit_code": result.returncode,
                    "pid": proc.pid,
                    "request_seqs": [r.seq for r in server.requests[first_request:]],
                }
            )
        requests = list(server.requests)

    if not folder.is_dir():
        raise RuntimeError(
            f"{shape.name}: the CLI wrote no session folder: {''.join(stdout_parts + stderr_parts)}"
        )
    target = out_dir / shape.name
    shutil.rmtree(target, ignore_errors=True)
    left_out = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.match(LEFT_OUT))
    shutil.copytree(folder, target, ignore=shutil.ignore_patterns(LEFT_OUT))
    cap = target / "_capture"
    cap.mkdir()
    (cap / "stdout.jsonl").write_text("".join(stdout_parts))
    (cap / "stderr.txt").write_text("".join(stderr_parts))
    otel_lines = (line for path in otel_files if path.exists() for line in path.read_text().splitlines())
    (cap / "otel.jsonl").write_text("".join(line + "\n" for line in _reduce_otel_lines(otel_lines)))
    mcp_log = lab / "mcp" / "requests.jsonl"
    if mcp_log.exists():
        shutil.copyfile(mcp_log, cap / "mcp-requests.jsonl")
    for process_log in sorted((home / ".copilot" / "logs").glob("process-*.log")):
        shutil.copyfile(process_log, cap / process_log.name)
    with open(cap / "model-requests.jsonl", "w", encoding="utf-8") as f:
        for line in _reduce_requests(requests, scripts):
            f.write(line + "\n")
    meta = {
        "scenario": shape.name,
        "description": shape.description,
        "session_id": tokens[SESSION_ID_TOKEN],
        **_import_meta(shape),
        "cli_version": _cli_version(binary),
        "cli_package": f"@github/copilot@{CLI_VERSION} (native binary @github/copilot-linux-x64)",
        "mode": (
            "BYOK offline: COPILOT_OFFLINE=true, COPILOT_PROVIDER_BASE_URL=http://127.0.0.1:<port>/v1, "
            f"COPILOT_PROVIDER_TYPE=openai, COPILOT_MODEL={MODEL}"
        ),
        "model_backend": (
            "scripted fake model server on 127.0.0.1 (tests/realcli/fake_model.py: OpenAI chat-completions, "
            "streamed); only the model is fake: the CLI, its tools and the files are real"
        ),
        "capture_script": "python -m tests.realcli.shapes OUT_DIR --only " + shape.name,
        "reductions": [
            "model-requests.jsonl: system prompt as length+sha256, tools by name, "
            "x-stainless-*/host/content-length/accept-encoding headers dropped, credentials redacted; "
            "a history prefix equal to an earlier request's messages is folded into "
            "{role: '<history>', same_as_seq, messages}",
            f"otel.jsonl: attribute values of >= {OTEL_REPEAT_MIN_CHARS} chars that repeat an earlier value "
            "in the file replaced by '<repeat: N chars, sha256 X>' (first occurrence verbatim)",
        ],
        "left_out_of_session_folder": left_out,
        "working_directory": str(workdir),
        "home": str(home),
        "runs": runs_meta,
    }
    (cap / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return target


def _run_tui(
    binary: Path, home: Path, workdir: Path, run: Run, args: Sequence[str], base_url: str, folder: Path
) -> int:
    """The interactive CLI in a detached tmux pane: type ``run.prompt``, wait for its turns, ``/exit``."""
    pane = f"copilot-otel-shapes-{os.getpid()}"
    env = build_env(home, base_url, {"TERM": "xterm-256color", **run.env})
    command = shlex.join(
        [
            "env",
            "-i",
            *(f"{k}={v}" for k, v in env.items()),
            str(binary),
            "--no-auto-update",
            "--allow-all-tools",
            *args,
        ]
    )
    status = home.parent / "tui-exit-code"
    subprocess.run(
        [
            "tmux",
            "new-session",
            "-d",
            "-s",
            pane,
            "-x",
            "200",
            "-y",
            "50",
            "-c",
            str(workdir),
            f"{command}; echo $? > {shlex.quote(str(status))}",
        ],
        check=True,
    )
    try:
        # The session folder appears with the first message; the input box is ready once its hints are drawn.
        _wait_for(lambda: TUI_READY in _screen(pane), run.timeout_s, pane)
        time.sleep(TUI_SETTLE_S)
        subprocess.run(["tmux", "send-keys", "-t", pane, "-l", run.prompt], check=True)
        subprocess.run(["tmux", "send-keys", "-t", pane, "Enter"], check=True)
        _wait_for(
            lambda: sum(e["type"] == "assistant.turn_end" for e in read_events(folder)) >= run.tui_turns,
            run.timeout_s,
            pane,
        )
        subprocess.run(["tmux", "send-keys", "-t", pane, "-l", "/exit"], check=True)
        subprocess.run(["tmux", "send-keys", "-t", pane, "Enter"], check=True)
        _wait_for(status.exists, run.timeout_s, pane)
        return int(status.read_text().strip() or "-1")
    finally:
        subprocess.run(["tmux", "kill-session", "-t", pane], capture_output=True, check=False)


def _wait_for(condition: Callable[[], bool], timeout_s: float, pane: str) -> None:
    end = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > end:
            raise RuntimeError(f"the interactive CLI did not get there in time; its screen:\n{_screen(pane)}")
        time.sleep(POLL_S)


def _screen(pane: str) -> str:
    return subprocess.run(
        ["tmux", "capture-pane", "-p", "-t", pane], capture_output=True, text=True, check=False
    ).stdout


def _import(
    binary: Path, home: Path, workdir: Path, lab: Path, run: Run, base_url: str
) -> tuple[str, subprocess.CompletedProcess[str]]:
    """``copilot sessions import`` of ``run.import_transcript``; returns the new session's id."""
    transcript = lab / "transcript.jsonl"
    transcript.write_text("".join(json.dumps(record) + "\n" for record in run.import_transcript))
    home.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        [str(binary), "--no-auto-update", "sessions", "import", str(transcript), "--output", "json"],
        cwd=workdir,
        env=build_env(home, base_url, run.env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=run.timeout_s,
        check=False,
    )
    folders = sorted((home / ".copilot" / "session-state").glob("*/events.jsonl"))
    if result.returncode != 0 or len(folders) != 1:
        raise RuntimeError(f"import failed (exit {result.returncode}): {result.stdout}{result.stderr}")
    return folders[0].parent.name, result


def _import_meta(shape: Shape) -> dict[str, Any]:
    """``import_transcript``: the records of the transcript a shape imported (none for the others)."""
    for run in shape.runs:
        if run.import_transcript:
            return {"import_transcript": list(run.import_transcript)}
    return {}


def build_args(prompt: str, args: Sequence[str]) -> list[str]:
    """The CLI argv of a run without the binary (what meta.json records)."""
    return ["--no-auto-update", "-p", prompt, "--allow-all-tools", *args]


def _substitute(arg: str, tokens: Mapping[str, str]) -> str:
    for token, value in tokens.items():
        arg = arg.replace(token, value)
    return arg


def main(argv: Sequence[str] | None = None) -> int:
    """Capture session shapes from the real Copilot CLI into OUT_DIR/<name>/."""
    names = [s.name for s in SHAPES]
    parser = argparse.ArgumentParser(prog="python -m tests.realcli.shapes", description=main.__doc__)
    parser.add_argument("out_dir", type=Path, help="folder to write one fixture folder per shape into")
    parser.add_argument(
        "--only", nargs="+", choices=names, metavar="NAME", help=f"shapes: {', '.join(names)}"
    )
    parser.add_argument("--lab", type=Path, default=DEFAULT_LAB, help="where the CLI's $HOME and folders go")
    args = parser.parse_args(argv)
    binary = find_copilot_binary()
    if binary is None:
        print(
            "Copilot CLI not installed: run .ci/install-copilot-cli.sh (or set COPILOT_CLI_BIN)",
            file=sys.stderr,
        )
        return 2
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for shape in SHAPES:
        if args.only and shape.name not in args.only:
            continue
        target = capture(shape, args.out_dir, binary, args.lab, lambda line: print(line, file=sys.stderr))
        size = sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
        print(f"{target}: {size // 1024} KB", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
