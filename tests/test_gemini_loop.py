"""Gemini CLI's own loop rules, with its session file's own words: what no other source does.

The facts every source shares (a trace per human prompt, the main agent's model calls per prompt, the tools by id
with their outcomes, the tokens in the fold's meaning, how each prompt ended, the sub-agent under its
``invoke_agent`` call, live == replay) are checked over Gemini's scenarios with the other sources' in
``tests/test_loop_facts.py``. Here: the replace-by-id rule (a reply the CLI rewrote is one call), rule C (a trace
per prompt message), the CLI's loop note, a cut tool call, a sub-agent whose spawn is not written yet, the framer's
state (a snapshot taken after any line, restored, goes on as if never stopped), the reader on wrong shapes, the
header sniff, and a reply with text that then asks for tools.

The pipelines here are built with ``source=GEMINI`` and the framer's seed, as ``Pipeline.for_session`` builds them
for a log :func:`~copilot_otel.sources.sniff` tells is Gemini's (the sniff test holds the two the same).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from copilot_otel.model import ids
from copilot_otel.model.activity import AgentRun, ModelCall, PromptRun, Record, ToolCall
from copilot_otel.model.inputs import Event
from copilot_otel.model.records import BadLine
from copilot_otel.pipeline import FRAME_KEY, FoldSettings, Pipeline
from copilot_otel.pipeline.subagents import SubagentLogs
from copilot_otel.settings.content import ContentKind, ContentPolicy
from copilot_otel.sources import LogKind, Source, SourceLog, read_blob, sniff
from copilot_otel.sources.gemini import reader as gm
from copilot_otel.sources.gemini.framer import GEMINI, GeminiFramer, seed
from copilot_otel.sources.sessions import SessionFile
from tests.conftest import FIXTURES

ROOT = FIXTURES / "other-agents" / "gemini"
SCENARIOS = sorted(p.name for p in ROOT.iterdir() if (p / "checks.json").is_file())


def _checks(name: str) -> dict[str, Any]:
    checks: dict[str, Any] = json.loads((ROOT / name / "checks.json").read_text(encoding="utf-8"))
    return checks


def _logs(name: str, kind: LogKind) -> list[SourceLog]:
    return [log for log in gm.scan(ROOT / name) if log.kind is kind]


def _pipeline(path: Path, settings: FoldSettings | None = None) -> Pipeline:
    first = seed(path)
    return Pipeline(
        path.stem, settings or FoldSettings(), project=False, source=GEMINI,
        first_frame={"seed": first} if first else None, subagents=SubagentLogs(path, 0, None),
    )  # fmt: skip


def _fold(path: Path, settings: FoldSettings | None = None) -> list[Record]:
    fold = _pipeline(path, settings)
    records = [r for step in fold.feed_file(path) for r in step.records]
    return [*records, *fold.close("file_ended").records]


@pytest.mark.parametrize("name", SCENARIOS)
def test_a_rewritten_reply_is_one_model_call(name: str) -> None:
    """The replace-by-id rule: the CLI writes a reply that asks for tools twice (at its stream's end, then with
    its tool calls); the fold gives one model call per reply id, each with all of its tool requests."""
    (main,) = _logs(name, LogKind.SESSION)
    lines = [orjson.loads(line) for line in main.path.read_bytes().splitlines()]
    replies = [obj for obj in lines if obj.get("type") == "gemini"]
    ids_written = [obj["id"] for obj in replies]
    arguments = FoldSettings(content=ContentPolicy(enabled=frozenset({ContentKind.TOOL_ARGUMENTS})))
    calls = [r for r in _fold(main.path, arguments) if isinstance(r, ModelCall)]
    assert len(calls) == len(set(ids_written))
    assert len({call.span_id for call in calls}) == len(calls)
    if name not in ("plain-question", "abort-mid-tool"):  # a reply with no tool call ended is written once
        assert len(ids_written) > len(set(ids_written))  # the rule was needed
    requested = {t["id"] for obj in replies for t in obj.get("toolCalls", ())}
    assert {r.call_id for call in calls for r in call.tool_requests} == requested


def test_rule_c_a_trace_per_prompt_message() -> None:
    """[resumed]: two CLI processes, one file (a second header, the history restated in ``$set.messages``): each
    prompt's trace is ``trace_id(sessionId, <its user message id>)``, and the restated history is no new work."""
    (main,) = _logs("resumed", LogKind.SESSION)
    lines = [orjson.loads(line) for line in main.path.read_bytes().splitlines()]
    (session,) = {obj["sessionId"] for obj in lines if "sessionId" in obj and "type" not in obj}
    assert sum(1 for obj in lines if "sessionId" in obj and "type" not in obj) == 2
    prompts = [
        obj["id"]
        for obj in lines
        if obj.get("type") == "user" and all("text" in part for part in obj["content"])
    ]
    runs = [r for r in _fold(main.path) if isinstance(r, PromptRun)]
    assert sorted(r.trace_id for r in runs) == sorted(ids.trace_id(session, p) for p in prompts)


def test_the_cli_loop_note_is_no_prompt() -> None:
    """[runaway]: the CLI's loop detection stops the prompt after 4 identical calls and writes its own user record;
    it is no human prompt (one trace), and ends the last turn."""
    (main,) = _logs("runaway", LogKind.SESSION)
    notes = [
        obj
        for obj in map(orjson.loads, main.path.read_bytes().splitlines())
        if obj.get("type") == "user" and "Potential loop detected" in json.dumps(obj.get("content"))
    ]
    assert len(notes) == 1
    records = _fold(main.path)
    (run,) = [r for r in records if isinstance(r, PromptRun)]
    assert run.usage.calls == 4 and _checks("runaway")["cli_loop_stop"] == 5


def test_the_generalist_sub_agents_log_names_its_parent_and_its_run_the_agent() -> None:
    """The sub-agent's log is found as its parent session's, and the run it hands on (under the ``invoke_agent``
    call, checked with every source's in ``tests/test_loop_facts.py``) is named by the agent the CLI ran."""
    (main,) = _logs("subagent", LogKind.SESSION)
    (sub,) = _logs("subagent", LogKind.SUBAGENT)
    assert sub.parent == main.path
    (agent,) = [r for r in _fold(sub.path) if isinstance(r, AgentRun)]
    assert (agent.name, agent.agent_id) == ("generalist", sub.agent_id)


def test_a_cut_tool_call_is_in_no_record() -> None:
    """[abort-mid-tool]: the CLI writes a tool call only when it ends; SIGINT while it runs leaves the reply that
    asked for it (one model call, its prompt left open: incomplete at the log's end) and no tool span."""
    (main,) = _logs("abort-mid-tool", LogKind.SESSION)
    assert _checks("abort-mid-tool")["runs"][0]["interrupted"]
    assert b"toolCalls" not in main.path.read_bytes()
    records = _fold(main.path)
    (run,) = [r for r in records if isinstance(r, PromptRun)]
    assert run.usage.calls == 1 and run.outcome == "incomplete"
    assert not any(isinstance(r, ToolCall) for r in records)


@pytest.mark.parametrize("parent_lines", [0, 6])
def test_a_subagent_whose_spawn_is_not_written_yet_is_still_read(tmp_path: Path, parent_lines: int) -> None:
    """Live, the sub-agent's log is followed before the parent's call has ended (the CLI writes ``agentId`` then):
    no call to root under, but its work is still folded, in the trace of the prompt the parent runs and under its
    root span (when the parent's log is there, cut before the call's end), else in a trace of its own."""
    (main,) = _logs("subagent", LogKind.SESSION)
    (sub,) = _logs("subagent", LogKind.SUBAGENT)
    chats = tmp_path / "tmp" / "project" / "chats"
    alone = chats / sub.path.parent.name / sub.path.name
    alone.parent.mkdir(parents=True)
    alone.write_bytes(sub.path.read_bytes())
    head = main.path.read_bytes().splitlines(keepends=True)[:parent_lines]
    assert b"agentId" not in b"".join(head)
    if head:
        (chats / main.path.name).write_bytes(b"".join(head))
    first = seed(alone)
    assert first is not None and first["call_id"] is None
    (agent,) = [r for r in _fold(alone) if isinstance(r, AgentRun)]
    assert agent.usage.calls == 2
    (run,) = [r for r in _fold(main.path) if isinstance(r, PromptRun)]
    assert (agent.trace_id == run.trace_id) is bool(head)
    # under the parent's prompt's root span when that prompt is known; a root of its own otherwise
    assert agent.parent_span_id == (run.span_id if head else None)


def _all_logs() -> list[Path]:
    return [log.path for name in SCENARIOS for log in gm.scan(ROOT / name)]


def _views(path: Path) -> list[Event]:
    views = list(read_blob(path.read_bytes(), gm.read_line))
    assert not any(isinstance(v, BadLine) for v in views)
    return views  # type: ignore[return-value]


def _events(framer: GeminiFramer, views: list[Event]) -> list[tuple[type, str, int]]:
    return [(e.__class__, e.id, e.time_ns) for v in views for e in framer.frame(v)]


@pytest.mark.parametrize("name", ["multi-tool", "resumed", "subagent"])
def test_framer_resumes_from_any_snapshot(name: str) -> None:
    """The framer's state after any line survives a checkpoint (JSON) and goes on as if never stopped: the events
    before the cut and those after the restored state are the uninterrupted run's."""
    for log in gm.scan(ROOT / name):
        views = _views(log.path)
        first = seed(log.path)
        start = {"seed": first} if first else None
        whole = _events(GeminiFramer(json.loads(json.dumps(start))), views)
        for cut in range(len(views) + 1):
            views = _views(log.path)  # fresh views: a framer may not rely on the earlier ones
            framer = GeminiFramer(json.loads(json.dumps(start)))
            before = _events(framer, views[:cut])
            state = json.loads(json.dumps(framer.snapshot()))
            assert GeminiFramer(state).snapshot() == state
            assert before + _events(GeminiFramer(state), views[cut:]) == whole, (log.path.name, cut)


def test_the_framer_state_rides_in_the_context() -> None:
    (main,) = _logs("multi-tool", LogKind.SESSION)
    fold = _pipeline(main.path)
    assert fold.context_snapshot()[FRAME_KEY] == GeminiFramer().snapshot()
    list(fold.feed_file(main.path))
    assert fold.context_snapshot()[FRAME_KEY]["done"]


def test_scan_and_root(tmp_path: Path) -> None:
    """Names only: session logs in ``tmp/<project>/chats``, sub-agents one folder down; nothing else."""
    logs = gm.scan(ROOT / "subagent")
    assert [log.kind for log in logs] == [LogKind.SUBAGENT, LogKind.SESSION]
    assert logs[1].session_id == logs[0].session_id[:8]
    chats = tmp_path / "tmp" / "p" / "chats"
    chats.mkdir(parents=True)
    (chats / "notes.jsonl").write_text("{}\n")
    (tmp_path / "tmp" / "p" / "logs.jsonl").write_text("{}\n")
    assert gm.scan(tmp_path) == [] and gm.scan(tmp_path / "missing") == []
    home = str(tmp_path)
    assert gm.default_root({"GEMINI_CLI_HOME": home}) == tmp_path / ".gemini"
    assert gm.default_root({"HOME": home, "USERPROFILE": home}) == tmp_path / ".gemini"


def _wrong(value: Any) -> list[Any]:
    return [None, 7, "x", [], {}, [1, "a", None], {"a": 1}] if value is not None else [1]


def _read_everything(view: Event | BadLine) -> None:
    if isinstance(view, BadLine):
        return
    for name in dir(type(view)):
        if not name.startswith("_"):
            value = getattr(view, name)
            if isinstance(value, tuple):
                for item in value:
                    for attr in dir(type(item)):
                        if not attr.startswith("_"):
                            getattr(item, attr)


def test_the_reader_never_raises_on_wrong_shapes() -> None:
    """Every top-level field of every real line, and every field of each tool call, replaced by values of other
    types: each view reads as absent or empty where the type is wrong, and nothing raises."""
    seen = 0
    for path in _all_logs():
        for line in path.read_bytes().splitlines():
            obj = orjson.loads(line)
            variants: list[Any] = []
            for key, value in obj.items():
                variants += [{**obj, key: w} for w in _wrong(value)]
            for i, call in enumerate(obj.get("toolCalls") or ()):
                for key in call:
                    for w in _wrong(call[key]):
                        calls = list(obj["toolCalls"])
                        calls[i] = {**call, key: w}
                        variants.append({**obj, "toolCalls": calls})
            for variant in variants:
                _read_everything(gm.read_line(orjson.dumps(variant), 0, 1, 1))
                seen += 1
    assert seen > 1000
    for bad in (b"[1]", b"{", b'{"neither": 1}'):
        assert isinstance(gm.read_line(bad, 0, 1, 1), BadLine)


def test_sniff_tells_a_gemini_log_by_its_header_and_the_pipeline_folds_it_as_here(tmp_path: Path) -> None:
    """Every recorded log (a session's and a sub-agent's) opens with the header line (``sessionId``,
    ``projectHash``, no ``type``), sniffed as Gemini's (with every source's, in ``tests/test_loop_facts.py``) and
    folded by :data:`GEMINI` with its seed, as here."""
    logs = [log.path for name in SCENARIOS for log in gm.scan(ROOT / name)]
    assert any(gm.parent_session_of(path) for path in logs)  # a sub-agent's log among them
    for path in logs:
        fold = Pipeline.for_session(SessionFile.from_path(path), FoldSettings(), project=False)
        records = [r for step in fold.feed_file(path) for r in step.records]
        assert [*records, *fold.close("file_ended").records] == _fold(path), path
    # a header longer than the sniffed start (a sub-agent's lists its directories) is told by its first keys; a
    # header-like line that has a type is another agent's
    header = (ROOT / "plain-question").rglob("session-*.jsonl").__next__().read_bytes().split(b"\n")[0]
    long = tmp_path / "long.jsonl"
    long.write_bytes(header[:-1] + b',"directories":["/' + b"x" * 9000 + b'"]}\n')
    assert sniff(long) is Source.GEMINI
    partial = tmp_path / "partial.jsonl"
    partial.write_bytes(header[:40])
    assert sniff(partial) is None  # not yet to the project hash: says nothing
    typed = tmp_path / "typed.jsonl"
    typed.write_bytes(header[:-1] + b',"type":"user"}\n')
    assert sniff(typed) is Source.CLAUDE_CODE


def test_a_reply_with_text_that_then_asks_for_tools_ends_nothing(tmp_path: Path) -> None:
    """A reply's first copy never lists its tool calls (they are written when they end): a reply with text whose
    later copy brings tool calls is no final answer. [multi-tool] with each reply's text said before its calls
    (as models often do), fed line by line: one prompt, its four calls, complete only at the answer."""
    source = ROOT / "multi-tool"
    (log,) = _logs("multi-tool", LogKind.SESSION)
    lines = []
    for line in log.path.read_bytes().splitlines():
        obj = orjson.loads(line)
        if obj.get("type") == "gemini" and not obj.get("content"):
            obj["content"] = "Let me look."
        lines.append(orjson.dumps(obj))
    path = tmp_path / log.path.relative_to(source)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\n".join(lines) + b"\n")
    fold = _pipeline(path)
    read = [r for line in lines for step in fold.feed_blob(line + b"\n") for r in step.records]
    assert not [r for r in read if isinstance(r, PromptRun)], "no prompt ended before the log did"
    (run,) = [r for r in fold.close("file_ended").records if isinstance(r, PromptRun)]
    assert (run.outcome, run.incomplete_reason, run.turns_total, run.tool_calls) == ("completed", None, 4, 3)


@pytest.mark.parametrize(
    ("written", "read"),
    [
        (b"/home/dev/gemini/project", "/home/dev/gemini/project"),  # as the CLI writes it, no newline
        (b"/srv/app\n", "/srv/app"),
        (b"c:/users/dev/app", "c:/users/dev/app"),  # Windows, as the CLI normalises it
        (b"project", None),  # not absolute: no folder of any machine
        (b"/a\n/b", None),  # two lines: not a marker the CLI wrote
        (b"/" + b"x" * gm.PROJECT_ROOT_MAX_BYTES, None),  # over its cap
        (b"", None),
    ],
)
def test_a_sessions_folder_is_its_projects_marker_and_only_an_absolute_path(
    tmp_path: Path, written: bytes, read: str | None
) -> None:
    """Where a Gemini session ran: its project folder's ``.project_root`` (the log names no folder), on the
    session's first span; a sub-agent's log takes none (its session's root has it)."""
    chats = tmp_path / "tmp" / "project" / "chats"
    chats.mkdir(parents=True)
    (chats.parent / ".project_root").write_bytes(written)
    (main,) = _logs("plain-question", LogKind.SESSION)
    log = chats / main.path.name
    log.write_bytes(main.path.read_bytes())
    assert gm.project_root(log) == read
    prompts = [r for r in _fold(log) if isinstance(r, PromptRun)]
    assert [p.facts.cwd for p in prompts] == [read]
    sub = chats / "6b4f93a2-dc6b-407d-ba74-03d8f2e5f5ab" / "f418ac7a.jsonl"
    sub.parent.mkdir()
    assert gm.project_root(sub) is None
