"""Golden output of Claude Code's sessions: every recorded scenario replayed through the one loop, as it reaches a
real OTLP receiver (the harness of ``tests/test_golden.py``: same dump, same canonical JSON).

``tests/golden/claude-code/<mode>/<scenario>.json`` holds each dump, ``tests/golden/claude-code/SHA256SUMS`` their
hashes (a file of its own: Copilot CLI's goldens and their sums stay as they are). Regenerate with::

    GOLDEN_UPDATE=1 .venv/bin/python -m pytest -q tests/test_golden_claude_code.py

Each scenario is replayed by its CLI home (the folder holding ``projects/``), as a user points ``replay`` at
``~/.claude``; each sub-agent's file is folded alone, rooted under its parent's ``Agent`` call (loop rule A,
docs/other-agents.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import FIXTURES, replay_into
from tests.otlp_receiver import OtlpReceiver
from tests.test_golden import MODES, _read_sums, check_golden

GOLDEN = Path(__file__).resolve().parent / "golden" / "claude-code"
OTHER = FIXTURES / "other-agents"

# Every Claude Code scenario: the shared set and those tests/otheragents/record.py recorded (2.1.197, and 2.1.332's
# set named v2.1.332-<scenario>).
SCENARIOS: dict[str, Path] = {
    **{p.name: p for p in sorted((OTHER / "claude-code").iterdir()) if (p / "projects").is_dir()},
    **{
        f"recorded-{p.name}": p
        for p in sorted((OTHER / "recorded" / "claude-code").iterdir())
        if (p / "projects").is_dir()
    },
    **{
        f"v2.1.332-{p.name}": p
        for p in sorted((OTHER / "claude-code-2.1.332").iterdir())
        if (p / "projects").is_dir()
    },
}
GOLDEN_MODES = ("default", "full")


@pytest.mark.parametrize("mode", GOLDEN_MODES)
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_golden_output(
    scenario: str, mode: str, receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name, value in MODES[mode].items():
        monkeypatch.setenv(name, value)
    assert replay_into(receiver, SCENARIOS[scenario]) == 0
    check_golden(receiver, f"{mode}/{scenario}.json", tmp_path, GOLDEN)


def test_every_golden_file_has_a_scenario() -> None:
    assert set(_read_sums(GOLDEN)) == {f"{mode}/{s}.json" for mode in GOLDEN_MODES for s in SCENARIOS}
