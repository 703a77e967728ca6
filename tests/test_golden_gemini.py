"""Golden output of Gemini CLI's sessions: every recorded scenario replayed through the one loop, as it reaches a
real OTLP receiver (the harness of ``tests/test_golden.py``: same dump, same canonical JSON).

``tests/golden/gemini/<mode>/<scenario>.json`` holds each dump, ``tests/golden/gemini/SHA256SUMS`` their hashes (a
file of its own: the other goldens and their sums stay as they are). Regenerate with::

    GOLDEN_UPDATE=1 .venv/bin/python -m pytest -q tests/test_golden_gemini.py

Each scenario is replayed by its log files (the session's, then its sub-agents'), through ``copilot-otel replay``,
which tells a Gemini log by its header line (:func:`~copilot_otel.sources.sniff`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from copilot_otel.sources.gemini import reader as gm
from tests.conftest import FIXTURES, replay_into
from tests.otlp_receiver import OtlpReceiver
from tests.test_golden import MODES, _read_sums, check_golden

GOLDEN = Path(__file__).resolve().parent / "golden" / "gemini"
ROOT = FIXTURES / "other-agents" / "gemini"
SCENARIOS = sorted(p.name for p in ROOT.iterdir() if (p / "checks.json").is_file())
GOLDEN_MODES = ("default", "full")


def _logs(name: str) -> list[Path]:
    logs = gm.scan(ROOT / name)
    return [log.path for log in sorted(logs, key=lambda log: (log.kind.value != "session", str(log.path)))]


@pytest.mark.parametrize("mode", GOLDEN_MODES)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_golden_output(
    scenario: str, mode: str, receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name, value in MODES[mode].items():
        monkeypatch.setenv(name, value)
    assert replay_into(receiver, *_logs(scenario)) == 0
    check_golden(receiver, f"{mode}/{scenario}.json", tmp_path, GOLDEN)


def test_the_spans_of_a_subagent_scenario(receiver: OtlpReceiver) -> None:
    """[subagent]: both files' spans, the sub-agent's under the main agent's ``invoke_agent`` tool span."""
    assert replay_into(receiver, *_logs("subagent")) == 0
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


def test_every_golden_file_has_a_scenario() -> None:
    assert set(_read_sums(GOLDEN)) == {f"{mode}/{s}.json" for mode in GOLDEN_MODES for s in SCENARIOS}
