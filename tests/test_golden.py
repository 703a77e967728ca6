"""Golden output: every fixture replayed in every capture mode, exactly as it reaches a real OTLP receiver.

The pipeline's middle is being re-founded (issue "Core v2"); this harness pins what leaves the process so each
move can be proven byte-identical on the wire, and every deliberate behaviour change shows up as a reviewed diff
of ``tests/golden/``. A change is accepted by regenerating the files in its own commit::

    GOLDEN_UPDATE=1 .venv/bin/python -m pytest -q tests/test_golden.py

Each (fixture, mode) pair is replayed on its own, over OTLP/HTTP, into the real receiver; what arrived is turned
into canonical JSON (sorted keys, records in a stable order). Wall-clock values are removed: the resource (host,
process) and the receiver's observed time, and metric timestamps, which replay takes from the clock (cumulative
points have no event time). Everything else, ids and event timestamps included, must come from the log alone.

``tests/golden/<mode>/<fixture>.json`` holds the full dump for reviewable diffs; ``tests/golden/SHA256SUMS`` holds
one hash per dump so a change anywhere is one line in a short file.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

from tests.conftest import FIXTURES, all_fixture_logs, replay_into
from tests.otlp_receiver import OtlpReceiver

GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE = os.environ.get("GOLDEN_UPDATE") == "1"

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


# Every fixture: the original captures and the session shapes captured for the re-founded core.
FIXTURE_LOGS = {
    _fixture_name(log): log
    for log in [*all_fixture_logs(), *sorted((FIXTURES / "cli-shapes").glob("*/events.jsonl"))]
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


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("fixture", sorted(FIXTURE_LOGS))
def test_golden_output(
    fixture: str, mode: str, receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name, value in MODES[mode].items():
        monkeypatch.setenv(name, value)
    assert replay_into(receiver, FIXTURE_LOGS[fixture]) == 0
    check_golden(receiver, f"{mode}/{fixture}.json", tmp_path)


def test_every_golden_file_has_a_fixture() -> None:
    """A fixture removed or renamed leaves no stale golden output behind."""
    expected = {f"{mode}/{fixture}.json" for mode in MODES for fixture in FIXTURE_LOGS}
    assert set(_read_sums()) == expected
