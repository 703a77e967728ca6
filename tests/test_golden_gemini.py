"""Golden output of Gemini CLI's sessions: every recorded scenario replayed through the one loop, as it reaches a
real OTLP receiver (the harness of ``tests/test_golden.py``: same dump, same canonical JSON).

``tests/golden/gemini/<mode>/<scenario>.json`` holds each dump, ``tests/golden/gemini/SHA256SUMS`` their hashes (a
file of its own: the other goldens and their sums stay as they are). Regenerate with::

    GOLDEN_UPDATE=1 .venv/bin/python -m pytest -q tests/test_golden_gemini.py

Each scenario is replayed by its log files (the session's, then its sub-agents'), through ``copilot-otel replay``.
Until ``sniff`` knows Gemini's header line (a shared edit, not made here), ``replay`` would read such a file as
Copilot's and export nothing; :func:`_gemini_known` gives ``pipeline.source_for`` the one answer that edit will
add (a Gemini log → :data:`~copilot_otel.sources.gemini_loop.GEMINI`), every other log answered as before. Remove
it with that edit: the dumps must not change.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from copilot_otel import pipeline
from copilot_otel.sessions import SessionFile
from copilot_otel.sources import LoopSource
from copilot_otel.sources import gemini as gm
from copilot_otel.sources.gemini_loop import GEMINI
from tests.conftest import FIXTURES, replay_into
from tests.otlp_receiver import OtlpReceiver
from tests.test_golden import MODES, _read_sums, check_golden

GOLDEN = Path(__file__).resolve().parent / "golden" / "gemini"
ROOT = FIXTURES / "other-agents" / "gemini"
SCENARIOS = sorted(p.name for p in ROOT.iterdir() if (p / "checks.json").is_file())
GOLDEN_MODES = ("default", "full")


def _is_gemini(path: Path) -> bool:
    """Whether a log opens with Gemini CLI's header line (``sessionId``, ``projectHash``, no ``type``)."""
    try:
        with open(path, "rb") as f:
            first = f.readline()
        obj = orjson.loads(first)
    except (OSError, orjson.JSONDecodeError):
        return False
    return isinstance(obj, dict) and "type" not in obj and "projectHash" in obj


@pytest.fixture
def _gemini_known(monkeypatch: pytest.MonkeyPatch) -> None:
    before = pipeline.source_for

    def source_for(session: SessionFile) -> LoopSource | None:
        return GEMINI if session.path.suffix == ".jsonl" and _is_gemini(session.path) else before(session)

    monkeypatch.setattr(pipeline, "source_for", source_for)


def _logs(name: str) -> list[Path]:
    logs = gm.scan(ROOT / name)
    return [log.path for log in sorted(logs, key=lambda log: (log.kind.value != "session", str(log.path)))]


@pytest.mark.usefixtures("_gemini_known")
@pytest.mark.parametrize("mode", GOLDEN_MODES)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_golden_output(
    scenario: str, mode: str, receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name, value in MODES[mode].items():
        monkeypatch.setenv(name, value)
    assert replay_into(receiver, *_logs(scenario)) == 0
    check_golden(receiver, f"{mode}/{scenario}.json", tmp_path, GOLDEN)


@pytest.mark.usefixtures("_gemini_known")
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
