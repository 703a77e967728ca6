"""The recorded scenarios of the four sources, read once into the terms they share: what ``test_loop_facts.py``
checks of every one, and what the agents' own loop tests look up.

Each source's scenarios state what happened, written by whoever recorded them from the scripted model server and
the CLI's own output, never from the session log: ``checks.json`` beside the Claude Code, Codex CLI and Gemini CLI
scenarios (the shared set's form and the recorder's; Claude Code 2.1.332's is the recorder's with every request in
order and each run's session, read as a scenario per session), and for GitHub Copilot CLI, which has no
``checks.json``, ``_capture/meta.json`` with the facts ``tests/fixtures/cli-generated/README.md`` states, in
:data:`COPILOT_FACTS`.
A new agent's scenarios are one more reader of its form into :class:`Scenario`.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from copilot_otel.model.activity import (
    AgentRun,
    ModelCall,
    PromptOutcome,
    PromptRun,
    Record,
    ToolCall,
    Turn,
)
from copilot_otel.pipeline import FoldSettings, Pipeline
from copilot_otel.sources import LogKind, SourceLog
from copilot_otel.sources.claude_code import reader as cc
from copilot_otel.sources.codex import reader as cx
from copilot_otel.sources.codex.framer import PROVIDER as CODEX_PROVIDER
from copilot_otel.sources.gemini import reader as gm
from copilot_otel.sources.sessions import SessionFile
from tests.conftest import CLI_GENERATED, FIXTURES

OTHER = FIXTURES / "other-agents"
Agent = Literal["copilot", "claude-code", "codex", "gemini"]
NOT_COMPLETED = frozenset(get_args(PromptOutcome)) - {"completed"}
ANY = "any"  # an incomplete reason the facts say nothing of


@dataclass(frozen=True)
class End:
    """How one prompt ended, as far as the facts tell: its outcome among ``outcomes``, its incomplete reason
    (:data:`ANY`: not known), and whether it was handed on while the log was read or only by the log's end."""

    outcomes: frozenset[str]
    reason: str | None = ANY
    by: Literal["read", "closed"] | None = None


COMPLETED = End(frozenset({"completed"}), None)


@dataclass
class Sub:
    """A sub-agent: its own log (None: it writes into its parent's), the parent's call that started it, its model
    calls, its tools by id with their outcomes (or by outcome, counted), its input/output tokens (None: unknown),
    its agent id as the facts name it (None: unknown)."""

    path: Path | None
    spawned_by: str
    calls: int
    tools: dict[str, str] | None
    usage: tuple[int, int] | None = None
    agent_id: str | None = None
    tool_counts: Counter[str] | None = None
    log_id: str | None = None  # the agent id its log's name or first line gives


@dataclass
class Scenario:
    """One recorded scenario's facts, in the terms every source shares."""

    agent: Agent
    name: str
    main: Path  # the main agent's log
    logs: list[Path]  # every log of the scenario (its sub-agents' too)
    prompts: int
    calls_per_prompt: list[int] | None  # the main agent's model calls (chat spans) per prompt
    main_calls: int
    tools: dict[str, str] | None  # main-agent call id → ok / failed / denied / interrupted
    usage: tuple[int, int] | None  # main agent's input (cache included), output tokens
    provider: str
    subagents: list[Sub] = field(default_factory=list)
    answered_per_prompt: list[int] | None = None  # the calls a prompt counts (default: calls_per_prompt)
    call_outcomes: Counter[str] | None = None  # default: every call ok
    tool_counts: Counter[str] | None = None  # the tools by outcome, where the facts give no ids
    cache_read: int | None = None
    per_call_usage: list[tuple[int, int, int]] | None = None  # (input, cache read, reasoning) in order
    compactions: list[str] | None = None  # the compactions' triggers
    compaction_count: int | None = None
    errors: list[str] | None = None  # the messages of the errors that ended a prompt
    error_type: str | None = None  # the type of the error that ended a prompt (None: no error, or not known)
    ended_by_error: bool = False
    ends: list[End | None] | None = None  # per prompt, in order (None: the facts say nothing)
    final_answer: bool | None = None  # the main agent's last reply was sent as its final answer

    @property
    def id(self) -> str:
        return f"{self.agent}/{self.name}"


# ---------------------------------------------------------------------------------------------- Copilot CLI
@dataclass(frozen=True)
class CopilotFacts:
    """What ``tests/fixtures/cli-generated/README.md`` says of a scenario that its ``meta.json`` does not: the main
    agent's model calls per prompt (chat spans), the ones answered where fewer (the fake server answers 1200 input
    and 40 output tokens per call), the calls by outcome where not all ok, the tools by outcome (a sub-agent's
    among them: it writes into the same log), a sub-agent's calls and tools by outcome, the error's status."""

    calls: list[int]
    tools: dict[str, int]
    answered: list[int] | None = None
    call_outcomes: dict[str, int] | None = None
    sub: tuple[int, dict[str, int]] | None = None
    error: str | None = None


COPILOT_FACTS = {
    "aborted": CopilotFacts([2], {"ok": 1}, answered=[1], call_outcomes={"ok": 1, "cancelled": 1}),
    "aborted-tool": CopilotFacts([1], {"interrupted": 1}),
    "capi-failing-tool": CopilotFacts([5], {"failed": 3, "ok": 1}),
    "capi-multi-tool": CopilotFacts([4], {"ok": 5}),
    "capi-subagent": CopilotFacts([2], {"ok": 2}, sub=(2, {"ok": 1})),
    "failing-tool": CopilotFacts([5], {"failed": 3, "ok": 1}),
    "model-error": CopilotFacts([1], {}, answered=[0], call_outcomes={"error": 1}, error="500"),
    "multi-tool": CopilotFacts([4], {"ok": 5}),
    "plain-question": CopilotFacts([1], {}),
    "resumed": CopilotFacts([2, 2], {"ok": 2}),
    "subagent": CopilotFacts([2], {"ok": 2}, sub=(2, {"ok": 1})),
}


def _copilot_spawns(log: Path) -> list[str]:
    """The calls that started a sub-agent, as the CLI's own ``subagent.started`` names them."""
    events = map(json.loads, log.read_bytes().splitlines())
    return [e["data"]["toolCallId"] for e in events if e["type"] == "subagent.started"]


def _copilot_end(run: dict[str, Any]) -> End:
    """A run interrupted by the recorder aborted; one the CLI exited 1 from ended in its error; the others
    completed: each at the CLI's own lines (``abort``, ``session.error``, the turn's end)."""
    if run["abort_after_s"]:
        return End(frozenset({"aborted"}), "aborted", "read")
    if run["exit_code"]:
        return End(frozenset({"error"}), None, "read")
    return End(frozenset({"completed"}), None, "read")


def _copilot() -> list[Scenario]:
    out = []
    for name, facts in COPILOT_FACTS.items():
        root = CLI_GENERATED / name
        meta = json.loads((root / "_capture" / "meta.json").read_text(encoding="utf-8"))
        log = root / "events.jsonl"
        answered = facts.answered or facts.calls
        spawns = _copilot_spawns(log)
        assert bool(spawns) == (facts.sub is not None), name
        subagents = [
            Sub(None, call_id, facts.sub[0], None, tool_counts=Counter(facts.sub[1]))
            for call_id in spawns
            if facts.sub is not None
        ]
        out.append(
            Scenario(
                "copilot", name, log, [log], len(meta["runs"]), facts.calls, sum(facts.calls), None,
                (1200 * sum(answered), 40 * sum(answered)),
                "github" if meta["mode"].startswith("CAPI") else "openai", subagents, answered_per_prompt=answered,
                call_outcomes=Counter(facts.call_outcomes or {"ok": sum(facts.calls)}),
                tool_counts=Counter(facts.tools), error_type=facts.error, ended_by_error=facts.error is not None,
                ends=[_copilot_end(run) for run in meta["runs"]],
            )
        )  # fmt: skip
    return out


# ---------------------------------------------------------------------------------------------- Claude Code
def _cc_logs(root: Path, kind: LogKind = LogKind.SESSION) -> list[Path]:
    return [log.path for log in cc.scan(root) if log.kind is kind]


def _cc_completed(result: dict[str, Any]) -> bool:
    return result.get("terminal_reason") == "completed" and result.get("is_error") is False


def _cc_ends(results: list[dict[str, Any]]) -> list[End | None]:
    """Each prompt's end by the CLI's own ``result`` (its stdout): completed ones are handed on while the log is
    read, at their own records; the others only by the log's end. ``/compact`` has no result of its own."""
    return [
        None
        if "terminal_reason" not in result
        else End(frozenset({"completed"}), None, "read")
        if _cc_completed(result)
        else End(NOT_COMPLETED, ANY, "closed")
        for result in results
    ]


def _claude_code_shared() -> list[Scenario]:
    checks = json.loads((OTHER / "claude-code" / "checks.json").read_text(encoding="utf-8"))
    out = []
    for name, c in checks["scenarios"].items():
        root = OTHER / "claude-code" / name
        denied = {d["tool_use_id"] for d in c["stdout"]["permission_denials"]}
        tools = {
            t["id"]: "ok" if t["outcome"] == "ok" else "denied" if t["id"] in denied else "failed"
            for t in c["tool_calls"]
            if t["agent"] == "main"
        }
        transcript = c["model_calls_transcript"]
        usage = c["usage_main"]
        files = [log for log in cc.scan(root) if log.kind is LogKind.SUBAGENT]
        subagents = [
            Sub(
                log.path, a["parent_tool_use_id"], a["model_calls"],
                {t["id"]: "ok" if t["outcome"] == "ok" else "failed" for t in c["tool_calls"] if t["agent"] == a["agent_id"]},
                (a["usage"]["input_tokens"], a["usage"]["output_tokens"]), a["agent_id"], log_id=log.agent_id,
            )
            for log, a in zip(files, c["subagents"], strict=True)
        ]  # fmt: skip
        out.append(
            Scenario(
                "claude-code", name, *_cc_main(root), len(c["human_prompts"]), transcript["per_prompt"],
                transcript["main"], tools, (usage["input_tokens"], usage["output_tokens"]), "anthropic", subagents,
                compactions=c["compactions"], ends=_cc_ends(c["stdout"]["results"]),
            )
        )  # fmt: skip
    return out


def _cc_main(root: Path) -> tuple[Path, list[Path]]:
    (main,) = _cc_logs(root)
    return main, [log.path for log in cc.scan(root)]


def _claude_code_recorded() -> list[Scenario]:
    out = []
    for path in sorted((OTHER / "recorded" / "claude-code").glob("*/checks.json")):
        root = path.parent
        children = [(log.path, log.agent_id) for log in cc.scan(root) if log.kind is LogKind.SUBAGENT]
        stdout = (root / "_capture" / "stdout.jsonl").read_bytes().splitlines()
        results = [obj for obj in map(json.loads, stdout) if obj.get("type") == "result"]
        recorded = _recorded("claude-code", path, *_cc_main(root), children, "anthropic")
        recorded.ends = _cc_ends(results)
        out.append(recorded)
    return out


def _recorded(
    agent: Agent,
    checks: Path,
    main: Path,
    logs: list[Path],
    children: list[tuple[Path, str | None]],
    provider: str,
) -> Scenario:
    """The recorder's form, the same for every agent it records: the requests it answered per script (an agent's
    each), the tools it scripted with the outcome each should have, the HTTP errors it sent (429s)."""
    c = json.loads(checks.read_text(encoding="utf-8"))
    sub_scripts = {s["script"] for s in c["subagents"]}
    tools = {t["id"]: t["expect"] for t in c["scripted_tool_calls"] if t["script"] not in sub_scripts}
    main_calls = sum(n for script, n in c["requests_answered"].items() if script not in sub_scripts)
    subagents = [
        Sub(
            child, a["spawned_by"], c["requests_answered"][a["script"]],
            {t["id"]: t["expect"] for t in c["scripted_tool_calls"] if t["script"] == a["script"]}, log_id=log_id,
        )
        for (child, log_id), a in zip(children, c["subagents"], strict=True)
    ]  # fmt: skip
    errors = bool(c.get("http_errors_sent"))
    return Scenario(
        agent, f"recorded-{c['scenario']}", main, logs, len(c["human_prompts"]), None, main_calls, tools, None,
        provider, subagents, errors=None if errors else [], error_type="429" if errors else None,
        ended_by_error=errors,
    )  # fmt: skip


CC_332 = OTHER / "claude-code-2.1.332"
_SCRIPT = re.compile(r"\[\[script:([\w-]+)\]\]")


def _run_scripts(run: dict[str, Any]) -> set[str]:
    """The scripts a run's prompt names (and the messages it was sent on its stdin: the queued prompts)."""
    texts = [run["prompt"], *(m["text"] for m in run.get("stdin_messages", []))]
    return {script for text in texts for script in _SCRIPT.findall(text)}


def _claude_code_332() -> list[Scenario]:
    """Claude Code 2.1.332's recordings: the recorder's form with what it writes anew, every request in order (its
    script, the HTTP error or the stop reason sent), each run's session (a fork writes a new one: a scenario per
    session, ``-run<n>`` for the run that wrote it) and its stdout's ``result`` lines. A failed attempt the CLI
    retried is a model call of its own (an error), not its prompt's end; a prompt ends as its run's last ``result``
    says (a background sub-agent's report has one of its own); a sub-agent's file is paired with the call that
    started it by its ``.meta.json``."""
    out = []
    for path in sorted(CC_332.glob("*/checks.json")):
        c = json.loads(path.read_text(encoding="utf-8"))
        logs = cc.scan(path.parent)
        mains = {log.session_id: log.path for log in logs if log.kind is LogKind.SESSION}
        spawned = {a["spawned_by"]: a["script"] for a in c["subagents"]}
        sessions = list(dict.fromkeys(run["session_id"] for run in c["runs"]))
        for session in sessions:
            runs = [run for run in c["runs"] if run["session_id"] == session]
            scripts = set().union(*map(_run_scripts, runs))
            requests = [r for r in c["requests"] if r["script"] in scripts]
            per_run = [[r for r in requests if r["script"] in _run_scripts(run)] for run in runs]
            children = [log for log in logs if log.kind is LogKind.SUBAGENT and log.session_id == session]
            subagents = [_cc_332_sub(c, log, spawned) for log in children]
            results = [[o for o in run.get("stdout", []) if o["type"] == "result"] for run in runs]
            failed = any(rs and rs[-1]["is_error"] for rs in results)
            name = (
                c["scenario"] if len(sessions) == 1 else f"{c['scenario']}-run{c['runs'].index(runs[0]) + 1}"
            )
            out.append(
                Scenario(
                    "claude-code", f"2.1.332-{name}", mains[session], [mains[session], *(log.path for log in children)],
                    len(runs), [len(rs) for rs in per_run], len(requests),
                    {t["id"]: t["expect"] for t in c["scripted_tool_calls"] if t["script"] in scripts and t["answered"]},
                    None, "anthropic", subagents,
                    answered_per_prompt=[sum(r["http_error"] is None for r in rs) for rs in per_run],
                    call_outcomes=Counter("ok" if r["http_error"] is None else "error" for r in requests),
                    errors=None if failed else [], ended_by_error=failed,
                    ends=[_cc_ends(rs[-1:])[0] if rs else None for rs in results],
                    final_answer=requests[-1]["stop_reason"] == "end_turn",
                )
            )  # fmt: skip
    return out


def _cc_332_sub(c: dict[str, Any], log: SourceLog, spawned: dict[str, str]) -> Sub:
    """A sub-agent's file, the call that started it by its ``.meta.json``, its script's answered requests and tools."""
    meta = cc.read_meta(log.path)
    assert meta is not None and meta.tool_use_id is not None, log.path
    script = spawned[meta.tool_use_id]
    tools = {
        t["id"]: t["expect"] for t in c["scripted_tool_calls"] if t["script"] == script and t["answered"]
    }
    return Sub(log.path, meta.tool_use_id, c["requests_answered"][script], tools, log_id=log.agent_id)


# ---------------------------------------------------------------------------------------------- Codex CLI
def codex_first(path: Path) -> cx.SessionMeta:
    """A rollout's ``session_meta`` (its thread, and its parent's for a sub-agent's)."""
    line = path.read_bytes().split(b"\n", 1)[0]
    meta = cx.read_line(line, 0, len(line) + 1, 1)
    assert isinstance(meta, cx.SessionMeta)
    return meta


def codex_rollouts(root: Path) -> list[Path]:
    return sorted((root / "sessions").rglob("rollout-*.jsonl"))


def codex_main(root: Path) -> Path:
    (main,) = [p for p in codex_rollouts(root) if codex_first(p).parent_thread_id is None]
    return main


def codex_children(root: Path) -> list[Path]:
    return [p for p in codex_rollouts(root) if codex_first(p).parent_thread_id is not None]


def _codex_outcome(tool: dict[str, object]) -> str:
    if not tool["is_error"]:
        return "ok"
    return "denied" if "Rejected(" in str(tool["outcome"]) else "failed"


def _codex_ends(tools: dict[str, str], prompts: int) -> list[End | None]:
    """An interrupted tool: its task aborted; otherwise every task ended, its prompt closed there, complete or
    failed (no incomplete reason)."""
    if "interrupted" in tools.values():
        return [End(frozenset({"aborted"}), ANY, "read")] * prompts
    return [End(frozenset(get_args(PromptOutcome)), None)] * prompts


def _codex_shared() -> list[Scenario]:
    checks = json.loads((OTHER / "codex" / "checks.json").read_text(encoding="utf-8"))
    out = []
    for name, c in checks["scenarios"].items():
        root = OTHER / "codex" / name
        rollout = c["model_calls_rollout"]
        subagents = [
            Sub(
                path, a["parent_call_id"], a["model_calls"],
                {t["id"]: _codex_outcome(t) for t in c["tool_calls"] if t["agent"] == a["thread_id"]},
                (a["usage"]["input_tokens"], a["usage"]["output_tokens"]), a["thread_id"],
                log_id=codex_first(path).thread_id,
            )
            for path, a in zip(codex_children(root), c["subagents"], strict=True)
        ]  # fmt: skip
        tools = {t["id"]: _codex_outcome(t) for t in c["tool_calls"] if t["agent"] == "main"}
        out.append(
            Scenario(
                "codex", name, codex_main(root), codex_rollouts(root), len(c["human_prompts"]), rollout["per_turn"],
                rollout["main"], tools, (c["usage_main"]["input_tokens"], c["usage_main"]["output_tokens"]),
                CODEX_PROVIDER, subagents, compaction_count=c["compactions"], errors=c["errors"],
                ended_by_error=bool(c["errors"]), ends=_codex_ends(tools, len(c["human_prompts"])),
            )
        )  # fmt: skip
    return out


def _codex_recorded() -> list[Scenario]:
    out = []
    for path in sorted((OTHER / "recorded" / "codex").glob("*/checks.json")):
        root = path.parent
        children = [(child, codex_first(child).thread_id) for child in codex_children(root)]
        recorded = _recorded("codex", path, codex_main(root), codex_rollouts(root), children, CODEX_PROVIDER)
        recorded.ends = _codex_ends(recorded.tools or {}, recorded.prompts)
        out.append(recorded)
    return out


# ---------------------------------------------------------------------------------------------- Gemini CLI
GEMINI = OTHER / "gemini"


def gemini_checks(name: str) -> dict[str, Any]:
    checks: dict[str, Any] = json.loads((GEMINI / name / "checks.json").read_text(encoding="utf-8"))
    return checks


def _gemini_ends(checks: dict[str, Any]) -> list[End | None]:
    """A prompt whose loop ran to its answer (a run not interrupted, not stopped by the CLI's own loop detection)
    is complete, also the last one of a log (its end, held at the answer, given up by the log's end); one cut while
    its tool ran, or stopped by the loop detection, stays incomplete, closed by the log's end."""
    return [
        COMPLETED
        if not run["interrupted"] and checks["cli_loop_stop"] is None
        else End(frozenset({"incomplete"}), "file_ended", "closed")
        for run in checks["runs"]
    ]


def _gemini() -> list[Scenario]:
    out = []
    for root in sorted(p for p in GEMINI.iterdir() if (p / "checks.json").is_file()):
        c = gemini_checks(root.name)
        logs = gm.scan(root)
        (main,) = [log for log in logs if log.kind is LogKind.SESSION]
        usage = sorted(
            (u for u in c["scripted_usage"] if u["agent"] == "main"), key=lambda u: (u["run"], u["step"])
        )
        tools = {
            t["id"]: t["expect"]
            for t in c["scripted_tool_calls"]
            if t["agent"] == "main" and t["expect"] != "unwritten"
        }
        spawns = {t["id"] for t in c["scripted_tool_calls"] if t["name"] == "invoke_agent"}
        subagents = []
        for log in (log for log in logs if log.kind is LogKind.SUBAGENT):
            name = next(iter(c["subagent_model_calls"]))
            sub_usage = [u for u in c["scripted_usage"] if u["agent"] == name]
            (spawn,) = spawns
            subagents.append(
                Sub(
                    log.path, spawn, c["subagent_model_calls"][name],
                    {t["id"]: t["expect"] for t in c["scripted_tool_calls"] if t["agent"] == name},
                    (sum(u["input"] for u in sub_usage), sum(u["output"] + u["thoughts"] for u in sub_usage)),
                    log_id=log.agent_id,
                )
            )  # fmt: skip
        out.append(
            Scenario(
                "gemini", root.name, main.path, [log.path for log in logs], len(c["human_prompts"]),
                c["main_model_calls_per_prompt"], sum(c["main_model_calls_per_prompt"]), tools,
                (sum(u["input"] for u in usage), sum(u["output"] + u["thoughts"] for u in usage)), "gcp.gemini",
                subagents, cache_read=sum(u["cached"] for u in usage),
                per_call_usage=[(u["input"], u["cached"], u["thoughts"]) for u in usage], ends=_gemini_ends(c),
            )
        )  # fmt: skip
    return out


ALL = [
    *_copilot(),
    *_claude_code_shared(),
    *_claude_code_recorded(),
    *_claude_code_332(),
    *_codex_shared(),
    *_codex_recorded(),
    *_gemini(),
]
SCENARIOS = {s.id: s for s in ALL}
IDS = sorted(SCENARIOS)
WITH_SUBAGENTS = sorted(i for i in IDS if SCENARIOS[i].subagents)


def scenario(agent: Agent, name: str) -> Scenario:
    """One scenario's facts, for the agents' own files."""
    return SCENARIOS[f"{agent}/{name}"]


# ---------------------------------------------------------------------------------------------- folding
@dataclass
class Folded:
    """A log folded whole: the records handed on while it was read, and those its end closed."""

    read: list[Record]
    closed: list[Record]

    @property
    def records(self) -> list[Record]:
        return [*self.read, *self.closed]

    def of(self, kind: type[Any]) -> list[Any]:
        return [r for r in self.records if isinstance(r, kind)]

    def runs(self) -> list[PromptRun]:
        return sorted(self.of(PromptRun), key=lambda r: r.start_ns)

    def sub_spans(self) -> set[str]:
        """The spans under a sub-agent's run in this log (Copilot's sub-agents write into their parent's log)."""
        agents = {a.span_id for a in self.of(AgentRun)}
        return {t.span_id for t in self.of(Turn) if t.parent_span_id in agents} | agents

    def main_calls(self) -> list[ModelCall]:
        inside = self.sub_spans()
        return [c for c in self.of(ModelCall) if c.parent_span_id not in inside]

    def main_tools(self) -> list[ToolCall]:
        inside = self.sub_spans()
        return [t for t in self.of(ToolCall) if t.parent_span_id not in inside]


def fold(path: Path, settings: FoldSettings | None = None) -> Folded:
    pipeline = Pipeline.for_session(SessionFile.from_path(path), settings or FoldSettings(), project=False)
    read = [r for step in pipeline.feed_file(path) for r in step.records]
    return Folded(read, list(pipeline.close("file_ended").records))


def outcomes(tools: list[ToolCall]) -> dict[str, str]:
    """Each tool call's outcome in the facts' words: denied apart from failed, an interrupted one cancelled."""
    return {
        t.call_id: "ok" if t.success else {"denied": "denied", "cancelled": "interrupted"}.get(t.error_type or "", "failed")
        for t in tools
    }  # fmt: skip
