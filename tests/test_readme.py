"""The README's promises: its metric table matches what is exported, its commands exist, its settings exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from copilot_otel.cli import main
from copilot_otel.projections import catalog as sc
from copilot_otel.settings.config import SETTINGS
from tests.conftest import CLI_GENERATED
from tests.otlp_receiver import OtlpReceiver

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def _metric_table() -> dict[str, tuple[str, str, set[str]]]:
    block = README.split("<!-- metrics-table:start -->")[1].split("<!-- metrics-table:end -->")[0]
    rows = {}
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`"):
            attrs = set(re.findall(r"`([^`]+)`", cells[3]))
            rows[cells[0].strip("`")] = (cells[1], cells[2], attrs)
    return rows


def test_metric_table_matches_the_instrument_definitions() -> None:
    table = _metric_table()
    expected = {m.name: (m.unit, m.instrument.value, set(m.attributes)) for m in sc.METRICS}
    expected.update({name: (unit, "gauge", set()) for name, unit, _ in sc.LIVE_GAUGES})
    for name, unit, _desc, kind in sc.HEALTH_METRICS:
        attrs = {"copilot_otel.drop.reason"} if name.endswith(".dropped") else set()
        if name == "copilot_otel.export.spans":
            attrs = {"copilot_otel.export.outcome"}
        if name == "copilot_otel.runaway.interrupted":
            attrs = {
                "copilot_otel.runaway.reason",
                "copilot_otel.interrupt.result",
                "copilot_otel.interrupt.method",
                "copilot_otel.interrupt.dry_run",
            }
        if name == "copilot_otel.notifications":
            attrs = {"copilot_otel.notify.channel", "copilot_otel.notify.outcome"}
        expected[name] = (unit, kind.value if kind else "gauge", attrs)
    assert table == expected


def test_everything_exported_is_in_the_table(receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_METRIC_EXPORT_INTERVAL", "600000")
    assert main(["replay", str(CLI_GENERATED), "--endpoint", receiver.http_endpoint, "--no-progress"]) == 0
    table = _metric_table()
    points = receiver.metrics()
    assert points, "replay exports metrics"
    for point in points:
        assert point["name"] in table, point["name"]
        unit, kind, attrs = table[point["name"]]
        assert point["unit"] == unit, point["name"]
        assert set(point["attributes"]) <= attrs, (point["name"], point["attributes"])
        if kind == "counter":
            assert point["type"] == "sum" and point["is_monotonic"]
        else:
            assert point["type"] == kind


def test_documented_settings_exist() -> None:
    for setting in SETTINGS:
        for env in setting.env_vars:
            assert env.split("_TRACES_")[0] in README or env in README, env
        for flag in setting.flags:
            assert flag in README, flag


@pytest.mark.parametrize("command", ["replay", "run", "show", "doctor", "status", "config", "service"])
def test_every_subcommand_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    assert f"copilot-otel {command}" in capsys.readouterr().out
    assert f"copilot-otel {command}" in README


def _first_sh_block(section: str) -> str:
    """The first line of the first ```sh block under ``## section`` (as ``.ci/run`` reads it)."""
    body = README.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return body.split("```sh\n", 1)[1].split("\n", 1)[0]


def test_ci_runs_the_readme_commands_as_written_in_a_fresh_clone() -> None:
    """``.ci/run`` takes both commands from the README itself and runs them in a clone with nothing beside it
    (no shared fixtures folder beside the repository), the quick start against the embedded default until a clean Ctrl-C."""
    ci = (Path(__file__).resolve().parent.parent / ".ci" / "run").read_text()
    assert _first_sh_block("Run the tests") == ".venv/bin/python -m pytest -q -n 2 --dist loadgroup"
    assert _first_sh_block("Quick start") == (
        "python3 -m venv .venv && .venv/bin/pip install -q . && .venv/bin/copilot-otel run"
    )
    assert 'readme_command "Run the tests"' in ci and 'readme_command "Quick start"' in ci
    assert 'git clone -q "$root" "$clone"' in ci and 'cd "$clone"' in ci
    assert 'bash -c "$test_command"' in ci and "rc == 5" in ci
    assert 'setsid bash -c "$quick_start"' in ci and 'kill -INT -- "-$pid"' in ci
