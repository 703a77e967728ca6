"""Golden output of Codex CLI's rollouts: every recorded scenario replayed through the one loop, as it reaches a
real OTLP receiver (the harness of ``tests/test_golden.py``: same dump, same canonical JSON).

``tests/golden/codex/<mode>/<scenario>.json`` holds each dump, ``tests/golden/codex/SHA256SUMS`` their hashes (a
file of its own: Copilot CLI's and Claude Code's goldens and their sums stay as they are). Regenerate with::

    GOLDEN_UPDATE=1 .venv/bin/python -m pytest -q tests/test_golden_codex.py

Each scenario is replayed by its rollout files (a sub-agent's too, in one replay: its spans join the parent's
trace under the ``spawn_agent`` call), as ``replay ~/.codex`` lists them (tests/test_agents_discovery.py replays the
Codex folders themselves).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import FIXTURES, replay_into
from tests.otlp_receiver import OtlpReceiver
from tests.test_golden import MODES, _read_sums, check_golden

GOLDEN = Path(__file__).resolve().parent / "golden" / "codex"
OTHER = FIXTURES / "other-agents"

# Every Codex scenario: the shared set and those tests/otheragents/record.py recorded.
SCENARIOS: dict[str, Path] = {
    **{p.name: p for p in sorted((OTHER / "codex").iterdir()) if (p / "sessions").is_dir()},
    **{
        f"recorded-{p.name}": p
        for p in sorted((OTHER / "recorded" / "codex").iterdir())
        if (p / "sessions").is_dir()
    },
}
GOLDEN_MODES = ("default", "full")


def rollouts(root: Path) -> list[Path]:
    """A scenario's rollout files, in path order (the parent's thread started first, so its file sorts first)."""
    return sorted((root / "sessions").rglob("rollout-*.jsonl"))


@pytest.mark.parametrize("mode", GOLDEN_MODES)
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_golden_output(
    scenario: str, mode: str, receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name, value in MODES[mode].items():
        monkeypatch.setenv(name, value)
    assert replay_into(receiver, *rollouts(SCENARIOS[scenario])) == 0
    check_golden(receiver, f"{mode}/{scenario}.json", tmp_path, GOLDEN)


def test_every_golden_file_has_a_scenario() -> None:
    assert len(SCENARIOS) == 14
    assert set(_read_sums(GOLDEN)) == {f"{mode}/{s}.json" for mode in GOLDEN_MODES for s in SCENARIOS}
