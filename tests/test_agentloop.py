"""The agent loop as split by entity (issue 25, points 2 and 7): its shape, its purity, its closed sets of words,
the checkpointed context's version, and the values it drops returned with the step.

Real fixture logs through the real pipeline; nothing of ours is faked.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import get_args

import orjson
import pytest

import copilot_otel
from copilot_otel.loop.agentloop import AgentLoop, RunawayThresholds
from copilot_otel.loop.foldstate import CONTEXT_VERSION, SessionContext
from copilot_otel.model.activity import (
    AgentRun,
    CloseReason,
    Detection,
    HookRun,
    IncompleteReason,
    PermissionWait,
    PromptOutcome,
    PromptRun,
    RunawayRule,
    ToolCall,
    Turn,
)
from copilot_otel.model.records import DropReason
from copilot_otel.pipeline import FoldSettings, Pipeline, split_lines
from copilot_otel.sources.copilot.translator import COPILOT
from tests.conftest import FIXTURES, all_fixture_logs

PACKAGE = Path(copilot_otel.__file__).parent
LOOP_MODULES = sorted((PACKAGE / "loop").glob("*.py"))


# ---------------------------------------------------------------------------------------------- shape and purity
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("module", LOOP_MODULES, ids=lambda p: p.name)
def test_no_loop_module_over_450_lines_nor_class_over_400(module: Path) -> None:
    lines = module.read_text(encoding="utf-8").count("\n")
    assert lines <= 450, f"{module.name}: {lines} lines"
    for node in ast.walk(_tree(module)):
        if isinstance(node, ast.ClassDef):
            size = (node.end_lineno or node.lineno) - node.lineno + 1
            assert size <= 400, f"{module.name}: class {node.name} is {size} lines"


# What a pure fold may import besides the package's own modules: no I/O, no clock, no randomness, no threads.
_PURE_STDLIB = {"__future__", "collections", "collections.abc", "dataclasses", "typing", "enum"}
# The modules of the package a fold may use: none that names an attribute, exports, reads files or keeps state.
_NOT_FOR_THE_FOLD = {"project", "semconv", "export", "sink", "state", "statedb", "tail", "discover", "config"}


@pytest.mark.parametrize("module", LOOP_MODULES, ids=lambda p: p.name)
def test_the_loop_is_pure_and_names_no_attribute(module: Path) -> None:
    """The loop imports nothing that does I/O or reads a clock, no projection, and writes no attribute name (the
    projections alone decide what a backend sees)."""
    tree = _tree(module)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
            assert set(names) <= _PURE_STDLIB, f"{module.name} imports {names}"
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                assert node.module in _PURE_STDLIB, f"{module.name} imports from {node.module}"
            else:
                first = (node.module or "").split(".")[0]
                assert first not in _NOT_FOR_THE_FOLD, f"{module.name} imports from {node.module}"
                if not node.module:
                    assert not {a.name for a in node.names} & _NOT_FOR_THE_FOLD
        elif isinstance(node, ast.Name):
            assert node.id not in {"open", "print", "input"}, f"{module.name} calls {node.id}"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            for prefix in (
                "gen_ai.",
                "copilot_otel.",
                "github.copilot.",
                "openinference.",
                "langfuse.",
                "llm.",
            ):
                assert not node.value.startswith(prefix), f"{module.name} names {node.value!r}"


# ---------------------------------------------------------------------------------------------- closed sets
def _fold_all() -> list[object]:
    settings = FoldSettings(runaway=RunawayThresholds(turns=3, identical_tool_calls=2, tool_errors=2))
    logs = [*all_fixture_logs(), *sorted((FIXTURES / "cli-shapes").glob("*/events.jsonl"))]
    records: list[object] = []
    for log in logs:
        pipeline = Pipeline(log.parent.name, settings, project=False)
        for step in pipeline.feed_blob(log.read_bytes()):
            records += step.records
        records += pipeline.close("file_ended").records
    return records


def test_every_outcome_and_reason_the_loop_writes_is_in_its_closed_set() -> None:
    """Over every fixture (runaway limits low so each rule fires): each prompt outcome, incomplete reason and
    runaway rule the loop hands on is a word of its set, and the sets are what the fixtures show (a word no
    fixture reaches is listed here, so a new one is a reviewed change)."""
    records = _fold_all()
    outcomes = {r.outcome for r in records if isinstance(r, PromptRun)}
    rules = {r.reason for r in records if isinstance(r, Detection)}
    reasons = {
        r.incomplete_reason
        for r in records
        if isinstance(r, PromptRun | AgentRun | ToolCall | Turn | HookRun | PermissionWait)
        and r.incomplete_reason is not None
    }
    assert outcomes == set(get_args(PromptOutcome))
    assert rules <= set(get_args(RunawayRule))
    assert {"turns", "identical_tool_calls", "tool_errors"} <= rules
    words = {w for arg in get_args(IncompleteReason) for w in get_args(arg) or (arg,)}
    assert set(get_args(CloseReason)) <= words
    assert reasons <= words
    assert {"file_ended", "aborted", "session_resumed"} <= reasons


# ---------------------------------------------------------------------------------------------- the context
STORED = FIXTURES / "contexts" / "model-change-resume.json"


def test_an_unversioned_context_as_stored_today_restores() -> None:
    """A context as checkpoints hold it before this change (captured from the tree before, between the two prompts
    of a real session; it has no ``version``) restores: the loop resumed from it folds the rest of the log into the
    same records as one resumed from the context this version writes, and what it checkpoints next is versioned."""
    stored = json.loads(STORED.read_text(encoding="utf-8"))
    old = stored["context"]
    assert "version" not in old
    blob = (FIXTURES / stored["log"]).read_bytes()
    offset = stored["offset"]

    first = Pipeline("hint")
    for item in split_lines(blob[:offset]):
        first.feed(item)
    assert not first.has_open_prompt
    new = first.context_snapshot()
    assert new["version"] == CONTEXT_VERSION
    assert {k: v for k, v in new.items() if k != "version"} == old  # the fixture is this log's context there

    def rest(context: dict[str, object]) -> tuple[list[object], dict[str, object]]:
        pipeline = Pipeline("hint", context=context)
        records: list[object] = []
        for item in split_lines(blob[offset:], offset):
            records += pipeline.feed(item).records
        records += pipeline.close("file_ended").records
        return records, pipeline.context_snapshot()

    from_old, old_next = rest(old)
    from_new, new_next = rest(orjson.loads(orjson.dumps(new)))
    assert any(isinstance(r, PromptRun) for r in from_old)
    assert from_old == from_new
    assert old_next == new_next and old_next["version"] == CONTEXT_VERSION
    assert SessionContext.from_dict(old) == SessionContext.from_dict(new)


def test_a_context_of_a_newer_version_gives_the_fields_this_one_knows() -> None:
    """A downgrade: a checkpoint written by a later version (a field this one lacks) still restores what it knows."""
    new = SessionContext(session_id="s", model="m", prompts_started=3).to_dict()
    newer = {**new, "version": CONTEXT_VERSION + 1, "a_later_field": 1}
    assert SessionContext.from_dict(newer) == SessionContext(session_id="s", model="m", prompts_started=3)


# ---------------------------------------------------------------------------------------------- dropped values
def _clock_stepped_log() -> bytes:
    """The real multi-tool capture with its first tool's completion dated a minute before its start."""
    lines = (FIXTURES / "cli-generated" / "multi-tool" / "events.jsonl").read_bytes().splitlines()
    out = []
    stepped = False
    for line in lines:
        obj = orjson.loads(line)
        if not stepped and obj["type"] == "tool.execution_complete":
            obj["timestamp"] = "2020-01-01T00:00:00.000Z"
            stepped = True
        out.append(orjson.dumps(obj))
    assert stepped
    return b"\n".join(out) + b"\n"


def test_an_end_the_loop_clamps_is_returned_with_the_step_of_its_line() -> None:
    """The loop's own dropped value (an end before its start, clamped) is on the step of the line that completed
    the span, once, and on no other pipeline's step, even one fed on the same thread in between."""
    blob = _clock_stepped_log()
    stepped = Pipeline("a")
    other = Pipeline("b")
    plain = (FIXTURES / "cli-generated" / "plain-question" / "events.jsonl").read_bytes()
    others = list(split_lines(plain))
    dropped = []
    for i, item in enumerate(split_lines(blob)):
        step = stepped.feed(item)
        dropped += [(v.reason, v.line_number) for v in step.values_dropped]
        if i < len(others):
            assert other.feed(others[i]).values_dropped == ()
    line = next(n for n, raw in enumerate(blob.splitlines(), 1) if b"2020-01-01" in raw)
    assert dropped == [(DropReason.END_BEFORE_START, line)]
    assert AgentLoop("c", COPILOT).take_dropped() == []


def test_a_value_another_reader_dropped_is_no_drop_of_this_log() -> None:
    """A value dropped by another reader on the same thread (here a Claude Code line with a bad timestamp) stays
    with that reader's event: the next clean line of a Copilot log drops nothing. Before, drops went to one
    process-wide list keyed by thread, and this log's next step took the other reader's as its own."""
    from copilot_otel.sources.claude_code import reader as cc
    from copilot_otel.sources.tail import Line

    pipeline = Pipeline("s")
    other = cc.read_line(b'{"type": "brand-new", "uuid": "u1", "timestamp": "not a time"}', 0, 9, 1)
    # (a kind the reader has no view of: noted as not read too)
    assert [reason for reason, _ in other.dropped] == [DropReason.NOT_READ, DropReason.BAD_TIMESTAMP]  # type: ignore[union-attr]
    first = (FIXTURES / "cli-generated" / "plain-question" / "events.jsonl").read_bytes().split(b"\n", 1)[0]
    step = pipeline.feed(Line(0, len(first) + 1, first))
    assert step.values_dropped == ()
