"""The pages' promises: the metric catalog of docs/signals.md is the code's and covers what is exported, the
settings of docs/configuration.md exist, the commands the README names exist, the README stays a page a user reads
(with the commands CI runs from it), and every link between the pages leads somewhere."""

from __future__ import annotations

import re

import pytest

from copilot_otel.cli import main
from copilot_otel.projections import catalog as sc
from copilot_otel.settings.config import SETTINGS
from tests.conftest import CLI_GENERATED
from tests.doc_pages import METRICS_END, METRICS_START, ROOT, documented_metrics, metrics_markdown, page
from tests.otlp_receiver import OtlpReceiver

README = page("README.md")


def test_metric_table_matches_the_instrument_definitions() -> None:
    """The catalog on the page is the one made from the instruments, the live gauges and the health metrics."""
    assert page("docs/signals.md").count(METRICS_START) == 1
    block = page("docs/signals.md").split(METRICS_START, 1)[1].split(METRICS_END, 1)[0]
    assert block.strip("\n") + "\n" == metrics_markdown(), "regenerate it: python -m tests.doc_pages"
    expected = {m.name: (m.unit, m.instrument.value, set(m.attributes)) for m in sc.METRICS}
    expected.update({name: (unit, "gauge", set()) for name, unit, _ in sc.LIVE_GAUGES})
    for name, unit, _desc, kind in sc.HEALTH_METRICS:
        expected[name] = (unit, kind.value if kind else "gauge", set())
    expected[sc.LINES_DROPPED][2].add("copilot_otel.drop.reason")
    expected[sc.VALUES_DROPPED][2].add("copilot_otel.drop.reason")
    expected[sc.EXPORT_SPANS][2].add("copilot_otel.export.outcome")
    expected[sc.RUNAWAY_INTERRUPTED][2].update(
        {
            "copilot_otel.runaway.reason",
            "copilot_otel.interrupt.result",
            "copilot_otel.interrupt.method",
            "copilot_otel.interrupt.dry_run",
        }
    )
    expected[sc.NOTIFICATIONS][2].update({"copilot_otel.notify.channel", "copilot_otel.notify.outcome"})
    table = {name: (r.unit, r.kind, set(r.attributes)) for name, r in documented_metrics().items()}
    assert table == expected


def test_everything_exported_is_in_the_table(receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_METRIC_EXPORT_INTERVAL", "600000")
    assert main(["replay", str(CLI_GENERATED), "--endpoint", receiver.http_endpoint, "--no-progress"]) == 0
    table = documented_metrics()
    points = receiver.metrics()
    assert points, "replay exports metrics"
    for point in points:
        assert point["name"] in table, point["name"]
        row = table[point["name"]]
        assert point["unit"] == row.unit, point["name"]
        assert set(point["attributes"]) <= set(row.attributes), (point["name"], point["attributes"])
        if row.kind == "counter":
            assert point["type"] == "sum" and point["is_monotonic"]
        else:
            assert point["type"] == row.kind


def test_documented_settings_exist() -> None:
    """docs/configuration.md names every setting's variables and flags."""
    text = page("docs/configuration.md")
    for setting in SETTINGS:
        for env in setting.env_vars:
            assert env.split("_TRACES_")[0] in text or env in text, env
        for flag in setting.flags:
            assert flag in text, flag


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
    ci = (ROOT / ".ci" / "run").read_text()
    assert _first_sh_block("Run the tests") == ".venv/bin/python -m pytest -q -n 2 --dist loadgroup"
    assert _first_sh_block("Quick start") == (
        "python3 -m venv .venv && .venv/bin/pip install -q . && .venv/bin/copilot-otel run"
    )
    assert 'readme_command "Run the tests"' in ci and 'readme_command "Quick start"' in ci
    assert 'git clone -q "$root" "$clone"' in ci and 'cd "$clone"' in ci
    assert 'bash -c "$test_command"' in ci and "rc == 5" in ci
    assert 'setsid bash -c "$quick_start"' in ci and 'kill -INT -- "-$pid"' in ci


# The README is what a user reads first, in this order; the reference is in docs/ and CONTRIBUTING.md.
README_SECTIONS = [
    "## Quick start",
    "### Moments",
    "## What you get",
    "## Claude Code, Codex CLI and Gemini CLI",
    "## Privacy",
    "## Configuration",
    "### Platforms",
    "## Service and teams: many machines, one collector",
    "## Run the tests",
    "## Documentation",
]
PAGES = ["README.md", "CONTRIBUTING.md", *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))]


def test_the_readme_is_a_page_a_user_reads() -> None:
    """Under 350 lines, its sections in the order a user needs them, and a link to every page of the reference."""
    assert len(README.splitlines()) < 350
    headings = [line for line in README.splitlines() if line.startswith("#") and not line.startswith("# ")]
    assert headings == README_SECTIONS
    for target in (
        "docs/signals.md",
        "docs/configuration.md",
        "docs/reports-and-live.md",
        "docs/operations.md",
    ):
        assert f"]({target})" in README, target
    assert "](CONTRIBUTING.md)" in README
    assert "Nothing is captured by default" in README and "copilot-otel doctor" in README


def _anchors(text: str) -> set[str]:
    """The anchors GitHub gives a page's headings (lower case, punctuation dropped, spaces to hyphens)."""
    headings = [line.lstrip("#").strip() for line in text.splitlines() if re.match(r"#{1,6} ", line)]
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("name", PAGES)
def test_the_links_between_pages_lead_somewhere(name: str) -> None:
    """Every relative link of a page names a file that exists and, with a ``#``, a heading of that page."""
    text = page(name)
    text = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)  # code is not links
    here = (ROOT / name).parent
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        file = (here / path).resolve() if path else ROOT / name
        assert file.exists(), f"{name}: {target}"
        if anchor and file.suffix == ".md":
            assert anchor in _anchors(file.read_text(encoding="utf-8")), f"{name}: {target}"
