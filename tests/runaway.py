"""Synthetic runaway sessions built from real Copilot CLI 1.0.102 log lines.

Nothing here invents an event shape: every line is a line of a real fixture written by the CLI
(``fixtures/cli-generated/multi-tool`` and ``failing-tool``, see their README), decoded, and re-emitted with
only what must change for a longer session rewritten:

* event ``id`` / ``parentId`` (fresh, deterministic uuid5 values chained line to line, as the CLI chains
  them),
* ``timestamp`` (each copied turn keeps its real intra-turn spacing; turns start ``seconds_per_turn`` apart),
* per-turn ids: ``turnId`` ("0", "1", … as the CLI numbers them), ``toolCallId``, ``apiCallId``/``usageId``,
  ``messageId``, ``accounting.sequence`` (and ``initiator`` "user" → "agent" after the first call, as in the
  CLI's own later turns),
* the session id (``session.start.sessionId``, ``accounting.sourceSessionId``, watermarks),
* ``session.shutdown`` totals (model requests, tokens, API duration) recomputed for the emitted calls, and its
  ``codeChanges`` zeroed (the copied turns create no file).

Runaway log (:func:`iter_runaway_lines`, :func:`build_runaway_log`): the multi-tool session's
``session.start``, ``user.message`` and ``system.message``; then ``turns`` copies of its turn 0
(``assistant.turn_start``, ``session.usage_record``, ``assistant.message``, ``tool.execution_start``,
``tool.execution_complete``, ``assistant.turn_end``) in which the agent runs ``bash`` with the identical
arguments ``{"command": "ls -la", "description": "List project files"}``; then its final answer turn
(turn 3) and ``session.shutdown``. The real turn 0 ran ``view`` in parallel with ``bash``: the ``view``
start/complete lines and its entry in ``toolRequests``/``toolCounts`` are left out, so each copied turn runs
that single ``bash`` call.

Tool-error log (:func:`iter_tool_error_lines`, :func:`build_tool_error_log`): the failing-tool session's
opening lines, then ``failures`` single-tool turns that fail, cycling through its real failing turns
(``view`` of a missing file, the non-existent ``run_tests`` tool, an ``edit`` whose ``old_str`` is absent, all
``success: false``), then its final answer turn and ``session.shutdown``.

Each generator yields complete lines (``str`` ending in ``"\\n"``) one by one, so a live test can append them
to a tailed file; the ``build_*`` functions write ``<path>/<session_id>/events.jsonl`` (the CLI's layout).
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

CLI_GENERATED = Path(__file__).resolve().parent / "fixtures" / "cli-generated"
MULTI_TOOL = CLI_GENERATED / "multi-tool" / "events.jsonl"
FAILING_TOOL = CLI_GENERATED / "failing-tool" / "events.jsonl"

DEFAULT_SESSION_ID = "0a0000f1-0000-4000-8000-0000000000f1"
DEFAULT_ERROR_SESSION_ID = "0a0000f2-0000-4000-8000-0000000000f2"

# The command every runaway turn repeats (the real arguments of multi-tool's first bash call).
RUNAWAY_TOOL = "bash"
RUNAWAY_ARGUMENTS = {"command": "ls -la", "description": "List project files"}
# The fake model server's usage per call in these fixtures (README: "1200 in / 40 out per call").
TOKENS_IN_PER_CALL = 1200
TOKENS_OUT_PER_CALL = 40

_OPENING = ("session.start", "user.message", "system.message")
_NS = uuid.UUID("5b0f3c52-6f1e-4c1b-9d7a-2c6f2f1a0e01")


def _load(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _parse_ts(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _format_ts(value: datetime) -> str:
    return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


def _turns(events: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The main agent's turns: ``turnId`` → its lines from ``assistant.turn_start`` to ``turn_end``."""
    out: dict[str, list[dict[str, Any]]] = {}
    current: list[dict[str, Any]] | None = None
    for event in events:
        if event["type"] == "assistant.turn_start":
            current = []
            out[event["data"]["turnId"]] = current
        if current is not None:
            current.append(event)
        if event["type"] == "assistant.turn_end":
            current = None
    return out


def _only_tool(turn: list[dict[str, Any]], call_id: str) -> list[dict[str, Any]]:
    """A copy of ``turn`` reduced to the single tool call ``call_id`` (other parallel calls left out)."""
    kept: list[dict[str, Any]] = []
    for event in copy.deepcopy(turn):
        data = event["data"]
        if event["type"].startswith("tool.execution_") and data.get("toolCallId") != call_id:
            continue
        if event["type"] == "assistant.message":
            data["toolRequests"] = [r for r in data.get("toolRequests", []) if r.get("toolCallId") == call_id]
        if event["type"] == "session.usage_record":
            names = [
                e["data"]["toolName"]
                for e in turn
                if e["type"] == "tool.execution_start" and e["data"]["toolCallId"] == call_id
            ]
            data["usage"]["numToolCalls"] = len(names)
            data["usage"]["toolCounts"] = {name: names.count(name) for name in names}
        kept.append(event)
    return kept


class _Writer:
    """Re-emits real events with fresh ids, chained parents and moved timestamps."""

    def __init__(self, session_id: str, old_session_id: str, seed: str) -> None:
        self.session_id = session_id
        self.old_session_id = old_session_id
        self.seed = seed
        self.count = 0
        self.parent: str | None = None
        # usage totals of the emitted model calls, for session.shutdown
        self.calls = 0
        self.input = 0
        self.output = 0
        self.api_ms = 0

    def new_id(self, *parts: object) -> str:
        return str(uuid.uuid5(_NS, "/".join(map(str, (self.seed, self.session_id, *parts)))))

    def emit(self, event: dict[str, Any], when: datetime) -> str:
        event = _replace_strings(event, self.old_session_id, self.session_id)
        event["id"] = self.new_id("event", self.count)
        event["parentId"] = self.parent
        event["timestamp"] = _format_ts(when)
        self.parent = event["id"]
        self.count += 1
        return json.dumps(event, separators=(",", ":"), ensure_ascii=False) + "\n"

    def turn(self, template: list[dict[str, Any]], index: int, start: datetime) -> Iterator[str]:
        """One copy of a real turn as turn ``index``, starting at ``start`` with its real inner spacing."""
        t0 = _parse_ts(template[0]["timestamp"])
        call_ids = {
            old: f"call_{self.seed}_{index}_{n}"
            for n, old in enumerate(
                e["data"]["toolCallId"] for e in template if e["type"] == "tool.execution_start"
            )
        }
        api_call = f"chatcmpl-{uuid.uuid5(_NS, f'{self.seed}/{self.session_id}/api/{index}').hex[:24]}"
        for event in copy.deepcopy(template):
            data = event["data"]
            if "turnId" in data:
                data["turnId"] = str(index)
            if data.get("toolCallId") in call_ids:
                data["toolCallId"] = call_ids[data["toolCallId"]]
            if event["type"] == "session.usage_record":
                usage = data["usage"]
                usage["apiCallId"] = api_call
                usage["accounting"]["sequence"] = self.calls + 1
                usage["accounting"]["usageId"] = api_call
                if index > 0 and usage.get("initiator") == "user":
                    usage["initiator"] = "agent"  # as the CLI marks every call after the prompt's first
                self.calls += 1
                self.input += usage["inputTokens"]
                self.output += usage["outputTokens"]
                self.api_ms += usage.get("duration", 0)
            if event["type"] == "assistant.message":
                data["apiCallId"] = api_call
                data["messageId"] = self.new_id("message", index)
                for request in data.get("toolRequests", []):
                    request["toolCallId"] = call_ids.get(request["toolCallId"], request["toolCallId"])
            yield self.emit(event, start + (_parse_ts(event["timestamp"]) - t0))

    def shutdown(self, template: dict[str, Any], when: datetime) -> str:
        event = copy.deepcopy(template)
        _retotal(event["data"], self.calls, self.input, self.output, self.api_ms)
        event["data"]["usageAccountingWatermarks"] = {self.old_session_id: self.calls}
        return self.emit(event, when)


def _replace_strings(value: Any, old: str, new: str) -> Any:
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, list):
        return [_replace_strings(v, old, new) for v in value]
    if isinstance(value, dict):
        return {_replace_strings(k, old, new): _replace_strings(v, old, new) for k, v in value.items()}
    return value


def _retotal(node: Any, calls: int, tokens_in: int, tokens_out: int, api_ms: int) -> None:
    """Rewrite every per-model total block and code-change block of a real ``session.shutdown`` payload."""
    if isinstance(node, list):
        for item in node:
            _retotal(item, calls, tokens_in, tokens_out, api_ms)
        return
    if not isinstance(node, dict):
        return
    if isinstance(node.get("requests"), dict) and isinstance(node.get("usage"), dict):
        node["requests"]["count"] = calls
        node["usage"].update(
            inputTokens=tokens_in, outputTokens=tokens_out, cacheReadTokens=0, cacheWriteTokens=0
        )
    if "totalApiDurationMs" in node:
        node["totalApiDurationMs"] = api_ms
    if isinstance(node.get("codeChanges"), dict):
        changes = node["codeChanges"]
        changes.update(linesAdded=0, linesRemoved=0, filesModified=[])
        if "filesModifiedCount" in changes:
            changes["filesModifiedCount"] = 0
    for key, value in node.items():
        if key != "codeChanges":
            _retotal(value, calls, tokens_in, tokens_out, api_ms)


def _session(
    source: Path,
    session_id: str,
    seed: str,
    loop_turns: Sequence[list[dict[str, Any]]],
    repeats: int,
    final_turn: list[dict[str, Any]],
    seconds_per_turn: float,
) -> Iterator[str]:
    events = _load(source)
    old_session_id = events[0]["data"]["sessionId"]
    writer = _Writer(session_id, old_session_id, seed)
    opening = [e for e in events if e["type"] in _OPENING][: len(_OPENING)]
    assert [e["type"] for e in opening] == list(_OPENING), f"{source}: unexpected opening lines"
    for event in opening:
        yield writer.emit(copy.deepcopy(event), _parse_ts(event["timestamp"]))
    first_turn = _parse_ts(loop_turns[0][0]["timestamp"])
    step = timedelta(seconds=seconds_per_turn)
    for index in range(repeats):
        yield from writer.turn(loop_turns[index % len(loop_turns)], index, first_turn + index * step)
    end_of_loop = first_turn + repeats * step
    yield from writer.turn(final_turn, repeats, end_of_loop)
    shutdown = events[-1]
    assert shutdown["type"] == "session.shutdown", f"{source}: last line is not session.shutdown"
    gap = _parse_ts(shutdown["timestamp"]) - _parse_ts(final_turn[-1]["timestamp"])
    last_turn_length = _parse_ts(final_turn[-1]["timestamp"]) - _parse_ts(final_turn[0]["timestamp"])
    yield writer.shutdown(shutdown, end_of_loop + last_turn_length + gap)


def iter_runaway_lines(
    turns: int = 40,
    session_id: str = DEFAULT_SESSION_ID,
    *,
    seconds_per_turn: float = 2.0,
) -> Iterator[str]:
    """The lines of a runaway session, one complete JSON line (ending in ``"\\n"``) at a time.

    One human prompt whose main agent takes ``turns`` turns, each running ``bash`` with the same arguments
    (:data:`RUNAWAY_ARGUMENTS`), then one final answer turn: ``turns + 1`` main-agent turns and model calls,
    ``turns`` tool calls, all successful. Built from real multi-tool lines (see the module docstring).

    Args:
        turns: How many identical bash turns to emit before the final answer.
        session_id: The session id written into ``session.start`` (and the folder name of the build).
        seconds_per_turn: Time between two turn starts.
    """
    events = _load(MULTI_TOOL)
    by_turn = _turns(events)
    bash_call = next(
        e["data"]["toolCallId"]
        for e in by_turn["0"]
        if e["type"] == "tool.execution_start" and e["data"]["toolName"] == RUNAWAY_TOOL
    )
    bash_turn = _only_tool(by_turn["0"], bash_call)
    start = next(e for e in bash_turn if e["type"] == "tool.execution_start")
    assert start["data"]["arguments"] == RUNAWAY_ARGUMENTS, "the multi-tool fixture changed"
    final = by_turn[max(by_turn, key=int)]
    assert not any(e["type"] == "tool.execution_start" for e in final)
    yield from _session(MULTI_TOOL, session_id, "runaway", [bash_turn], turns, final, seconds_per_turn)


def iter_tool_error_lines(
    failures: int = 8,
    session_id: str = DEFAULT_ERROR_SESSION_ID,
    *,
    seconds_per_turn: float = 2.0,
) -> Iterator[str]:
    """The lines of a session whose agent fails ``failures`` tool calls in a row, then answers.

    Each failing turn is a copy of one of failing-tool's real single-tool turns whose call failed
    (``success: false``), cycling view → run_tests → edit, so the calls are never identical.

    Args:
        failures: How many failing single-tool turns to emit before the final answer.
        session_id: The session id written into ``session.start`` (and the folder name of the build).
        seconds_per_turn: Time between two turn starts.
    """
    events = _load(FAILING_TOOL)
    by_turn = _turns(events)
    failing = [
        turn
        for turn in by_turn.values()
        if [e["data"].get("success") for e in turn if e["type"] == "tool.execution_complete"] == [False]
    ]
    assert len(failing) == 3, "the failing-tool fixture changed"
    final = by_turn[max(by_turn, key=int)]
    yield from _session(FAILING_TOOL, session_id, "toolerror", failing, failures, final, seconds_per_turn)


def _write(path: Path, session_id: str, lines: Iterator[str]) -> Path:
    folder = path / session_id
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "events.jsonl"
    with target.open("w", encoding="utf-8", newline="\n") as out:
        out.writelines(lines)
    return target


def build_runaway_log(
    path: Path,
    turns: int = 40,
    session_id: str = DEFAULT_SESSION_ID,
    *,
    seconds_per_turn: float = 2.0,
) -> Path:
    """Write :func:`iter_runaway_lines` to ``<path>/<session_id>/events.jsonl`` and return that file."""
    return _write(path, session_id, iter_runaway_lines(turns, session_id, seconds_per_turn=seconds_per_turn))


def build_tool_error_log(
    path: Path,
    failures: int = 8,
    session_id: str = DEFAULT_ERROR_SESSION_ID,
    *,
    seconds_per_turn: float = 2.0,
) -> Path:
    """Write :func:`iter_tool_error_lines` to ``<path>/<session_id>/events.jsonl`` and return that file."""
    return _write(
        path, session_id, iter_tool_error_lines(failures, session_id, seconds_per_turn=seconds_per_turn)
    )
