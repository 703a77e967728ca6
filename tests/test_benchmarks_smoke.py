"""The benchmark command keeps working: a tiny run of every figure (no timing is asserted, only delivery)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import SERIAL

ROOT = Path(__file__).resolve().parent.parent
pytestmark = SERIAL  # a core for a minute: never beside the tests that race the clock


@pytest.mark.timeout(300)
def test_quick_benchmark_run_delivers_everything(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    table = result.stdout
    for figure in (
        "parse-only orjson",
        "replay vs naive",
        "spans delivered, replay N",
        "live latency p50 / p99",
        "idle CPU",
        "restart with",
        "burst",
        "replay claude-code: CPU µs per event vs Copilot's",
        "replay gemini: events/s vs parse-only",
    ):
        assert figure in table, figure
    assert "n/a (daemon not available)" not in table
