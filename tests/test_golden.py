"""Golden output: every recorded session of the four sources replayed in each capture mode, exactly as it reaches a
real OTLP receiver.

This harness pins what leaves the process so each move of the code can be proven byte-identical on the wire, and
every deliberate behaviour change shows up as a reviewed diff of ``tests/golden/``. One suite for the four agents
(Copilot CLI, Claude Code, Codex CLI, Gemini CLI): the same dump, the same canonical JSON, the same check; what
differs by source is only which files make one replay and where its goldens live (``SOURCES``). Each test's id says
the agent, the capture mode and the scenario, e.g. ``test_golden_output[codex:full:recorded-subagent]``.

A change is accepted by regenerating the files in its own commit (``GOLDEN_UPDATE=1`` writes what arrived instead
of comparing it), for every source or for one::

    GOLDEN_UPDATE=1 .venv/bin/python -m pytest -q tests/test_golden.py
    GOLDEN_UPDATE=1 .venv/bin/python -m pytest -q tests/test_golden.py -k "test_golden_output and gemini"

Each (scenario, mode) pair is replayed on its own, over OTLP/HTTP, into the real receiver; what arrived is turned
into canonical JSON (sorted keys, records in a stable order). Wall-clock values are removed: the resource (host,
process) and the receiver's observed time, and metric timestamps, which replay takes from the clock (cumulative
points have no event time). Everything else, ids and event timestamps included, must come from the log alone.

Where the goldens live, one folder per source, each with its own ``SHA256SUMS`` (one hash per dump, so a change
anywhere is one line in a short file) beside the full dumps for reviewable diffs:

- Copilot CLI: ``tests/golden/<mode>/<fixture>.json`` in the four modes; each fixture log replayed alone.
- Claude Code: ``tests/golden/claude-code/<mode>/<scenario>.json``; each scenario replayed by its CLI home (the
  folder holding ``projects/``), as a user points ``replay`` at ``~/.claude``; each sub-agent's file is folded
  alone, rooted under its parent's ``Agent`` call (loop rule A, docs/other-agents.md).
- Codex CLI: ``tests/golden/codex/<mode>/<scenario>.json``; each scenario replayed by its rollout files (a
  sub-agent's too, in one replay: its spans join the parent's trace under the ``spawn_agent`` call), as
  ``replay ~/.codex`` lists them (tests/test_agents_discovery.py replays the Codex folders themselves).
- Gemini CLI: ``tests/golden/gemini/<mode>/<scenario>.json``; each scenario replayed by its log files (the
  session's, then its sub-agents'), which ``replay`` tells by their header line (:func:`~copilot_otel.sources.sniff`).

The other agents' goldens are in the default and full modes only: their content gates are the same code as
Copilot's, which the four modes already pin.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

from copilot_otel.sources.gemini import reader as gm
from tests.conftest import FIXTURES, all_fixture_logs, replay_into
from tests.otlp_receiver import OtlpReceiver

GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE = os.environ.get("GOLDEN_UPDATE") == "1"
OTHER = FIXTURES / "other-agents"

# The capture modes: what a user can switch, each as its environment. "full" turns on every content kind,
# the system prompt and reasoning included, on spans and on events.
MODES: dict[str, dict[str, str]] = {
    "default": {},
    "spans": {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY"},
    "events": {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "EVENT_ONLY"},
    "full": {
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_AND_EVENT",
        "COPILOT_OTEL_CAPTURE_SYSTEM_PROMPT": "true",
        "COPILOT_OTEL_CAPTURE_REASONING": "true",
    },
}


def _fixture_name(log: Path) -> str:
    """A stable, file-system-safe name for a fixture log (its folder for CLI sessions, its stem otherwise)."""
    return log.parent.name if log.name == "events.jsonl" else log.stem


# Every Copilot CLI fixture: the original captures and the session shapes captured for the re-founded core.
FIXTURE_LOGS = {
    _fixture_name(log): log
    for log in [*all_fixture_logs(), *sorted((FIXTURES / "cli-shapes").glob("*/events.jsonl"))]
}


def _homes(folder: Path, marker: str, prefix: str = "") -> dict[str, Path]:
    """The scenarios under ``folder``: each sub-folder holding ``marker`` (a CLI home), named ``prefix`` + its name."""
    return {f"{prefix}{p.name}": p for p in sorted(folder.iterdir()) if (p / marker).is_dir()}


# Every Claude Code scenario: the shared set and those tests/otheragents/record.py recorded (2.1.197, and 2.1.332's
# set named v2.1.332-<scenario>).
CLAUDE_CODE_SCENARIOS: dict[str, Path] = {
    **_homes(OTHER / "claude-code", "projects"),
    **_homes(OTHER / "recorded" / "claude-code", "projects", "recorded-"),
    **_homes(OTHER / "claude-code-2.1.332", "projects", "v2.1.332-"),
}

# Every Codex scenario: the shared set and those tests/otheragents/record.py recorded.
CODEX_SCENARIOS: dict[str, Path] = {
    **_homes(OTHER / "codex", "sessions"),
    **_homes(OTHER / "recorded" / "codex", "sessions", "recorded-"),
}

GEMINI = OTHER / "gemini"
GEMINI_SCENARIOS = sorted(p.name for p in GEMINI.iterdir() if (p / "checks.json").is_file())


def rollouts(root: Path) -> list[Path]:
    """A Codex scenario's rollout files, in path order (the parent's thread started first, so its file sorts
    first)."""
    return sorted((root / "sessions").rglob("rollout-*.jsonl"))


def gemini_logs(name: str) -> list[Path]:
    """A Gemini scenario's log files: the session's first, then its sub-agents', by path."""
    logs = gm.scan(GEMINI / name)
    return [log.path for log in sorted(logs, key=lambda log: (log.kind.value != "session", str(log.path)))]


@dataclass(frozen=True, slots=True)
class Source:
    """One agent's goldens: the folder they live in, the modes they are pinned in, and per scenario the paths one
    ``replay`` is given."""

    golden: Path
    modes: tuple[str, ...]
    replays: dict[str, list[Path]]


OTHER_MODES = ("default", "full")
SOURCES: dict[str, Source] = {
    "copilot": Source(GOLDEN, tuple(sorted(MODES)), {name: [log] for name, log in FIXTURE_LOGS.items()}),
    "claude-code": Source(
        GOLDEN / "claude-code", OTHER_MODES, {name: [home] for name, home in CLAUDE_CODE_SCENARIOS.items()}
    ),
    "codex": Source(
        GOLDEN / "codex", OTHER_MODES, {name: rollouts(home) for name, home in CODEX_SCENARIOS.items()}
    ),
    "gemini": Source(GOLDEN / "gemini", OTHER_MODES, {name: gemini_logs(name) for name in GEMINI_SCENARIOS}),
}


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def dump(receiver: OtlpReceiver) -> dict[str, Any]:
    """What the receiver holds, minus wall-clock values, in an order that does not depend on batching."""
    spans = [{k: v for k, v in span.items() if k != "resource"} for span in receiver.spans()]
    logs = [
        {k: v for k, v in log.items() if k not in ("resource", "observed_time_ns")} for log in receiver.logs()
    ]
    metrics = [
        {k: v for k, v in point.items() if k not in ("resource", "start_time_ns", "time_ns")}
        for point in receiver.metrics()
    ]
    return {
        "spans": sorted(spans, key=lambda s: (s["trace_id"], s["start_ns"], s["span_id"])),
        "logs": sorted(logs, key=lambda r: (r["time_ns"], _canonical(r))),
        "metrics": sorted(metrics, key=lambda p: (p["name"], _canonical(p["attributes"]), _canonical(p))),
    }


def _golden_text(receiver: OtlpReceiver) -> str:
    return json.dumps(dump(receiver), sort_keys=True, ensure_ascii=False, indent=1) + "\n"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _read_sums(golden: Path = GOLDEN) -> dict[str, str]:
    path = golden / "SHA256SUMS"
    if not path.exists():
        return {}
    pairs = (line.split("  ", 1) for line in path.read_text().splitlines() if line.strip())
    return {name: digest for digest, name in pairs}


def _write_sum(key: str, digest: str, golden: Path = GOLDEN) -> None:
    """Set one hash in ``SHA256SUMS``. The read and the write are one step under a lock: the suite's worker
    processes regenerate side by side, and a write between another's read and write lost that one's hash."""
    with FileLock(golden / ".SHA256SUMS.lock"):
        sums = _read_sums(golden)
        sums[key] = digest
        lines = [f"{sums[name]}  {name}\n" for name in sorted(sums)]
        (golden / "SHA256SUMS").write_text("".join(lines))


def check_golden(receiver: OtlpReceiver, key: str, tmp_path: Path, golden: Path = GOLDEN) -> None:
    """What ``receiver`` holds is the golden dump ``golden/key`` (its hash in ``golden/SHA256SUMS``); with
    ``GOLDEN_UPDATE=1``, becomes it."""
    text = _golden_text(receiver)
    assert receiver.spans(), "a golden dump without spans would pin nothing"
    path = golden / key
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        _write_sum(key, _sha(text), golden)
        return
    expected_sum = _read_sums(golden).get(key)
    assert expected_sum is not None, (
        f"no golden output for {key}: run with GOLDEN_UPDATE=1 and review the diff"
    )
    if _sha(text) != expected_sum:
        actual = tmp_path / "actual.json"
        actual.write_text(text)
        pytest.fail(f"{key} differs from the golden output: diff -u {path} {actual}")
    # The stored dump is what the hash says (a hand-edited dump cannot pass silently).
    assert _sha(path.read_text()) == expected_sum


CASES = [
    pytest.param(agent, mode, scenario, id=f"{agent}:{mode}:{scenario}")
    for agent, source in SOURCES.items()
    for scenario in sorted(source.replays)
    for mode in source.modes
]


@pytest.mark.parametrize(("agent", "mode", "scenario"), CASES)
def test_golden_output(
    agent: str,
    mode: str,
    scenario: str,
    receiver: OtlpReceiver,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    source = SOURCES[agent]
    for name, value in MODES[mode].items():
        monkeypatch.setenv(name, value)
    assert replay_into(receiver, *source.replays[scenario]) == 0
    check_golden(receiver, f"{mode}/{scenario}.json", tmp_path, source.golden)


@pytest.mark.parametrize("agent", sorted(SOURCES))
def test_every_golden_file_has_a_scenario(agent: str) -> None:
    """A scenario removed or renamed leaves no stale golden output behind, and none is left without one."""
    source = SOURCES[agent]
    expected = {f"{mode}/{scenario}.json" for mode in source.modes for scenario in source.replays}
    assert set(_read_sums(source.golden)) == expected


def test_every_codex_scenario_is_found() -> None:
    """The Codex scenarios are the 14 recorded ones (a folder that lost its ``sessions/`` would drop silently)."""
    assert len(CODEX_SCENARIOS) == 14


def test_the_spans_of_a_gemini_subagent_scenario(receiver: OtlpReceiver) -> None:
    """[subagent]: both files' spans, the sub-agent's under the main agent's ``invoke_agent`` tool span."""
    assert replay_into(receiver, *gemini_logs("subagent")) == 0
    spans = receiver.spans()
    names = sorted(span["name"] for span in spans)
    assert names.count("execute_tool invoke_agent") == 1
    assert "invoke_agent generalist" in names
    by_name = {span["name"]: span for span in spans}
    assert (
        by_name["invoke_agent generalist"]["parent_span_id"]
        == by_name["execute_tool invoke_agent"]["span_id"]
    )
    assert len({span["trace_id"] for span in spans}) == 1
