"""The runaway action settings: the policy's grammar (flag, environment, config file), where it applies, and what
``config`` and ``doctor`` say about it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from copilot_otel.commands.doctor import run_checks
from copilot_otel.common.errors import ConfigError
from copilot_otel.daemon.act import RunawayActions, SessionView
from copilot_otel.daemon.interrupt import Outcome
from copilot_otel.model.activity import Detection
from copilot_otel.settings.config import describe, load_config
from copilot_otel.settings.policy import parse_policy


def test_policy_per_reason_reads_as_written() -> None:
    policy = parse_policy("interrupt:identical,errors;notify:turns")
    assert [policy.action_for(r) for r in ("identical_tool_calls", "tool_errors", "turns", "burn_rate")] == [
        "interrupt",
        "interrupt",
        "notify",
        "none",
    ]
    assert str(policy) == "interrupt:identical,errors;notify:turns"
    mixed = parse_policy("notify;interrupt:identical")
    assert mixed.action_for("turns") == "notify" and mixed.action_for("identical_tool_calls") == "interrupt"
    assert str(mixed) == "interrupt:identical;notify"
    assert str(parse_policy("none")) == "none" and not parse_policy("none").active


@pytest.mark.parametrize(
    ("raw", "message"),
    [("kill", "an action is one of"), ("interrupt:loops", "unknown reason 'loops'"), ("", "none, notify")],
)
def test_bad_policies_say_what_is_wrong(raw: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config({}, {"HOME": "/nonexistent", "COPILOT_OTEL_RUNAWAY_ACTION": raw or " x:"})


def test_config_file_table_and_repositories(tmp_path: Path) -> None:
    config_file = tmp_path / "config.toml"
    config_file.write_text(
        'runaway_action = {identical = "interrupt", default = "notify"}\n'
        'runaway_action_repositories = ["octo/app", "/work/app"]\n'
        'notify_webhook = "https://hooks.example.com/services/T000/B000/secret"\n'
        'webhook_format = "slack"\n'
    )
    config = load_config({"config_file": str(config_file)}, {"HOME": str(tmp_path)})
    assert str(config.runaway_action) == "interrupt:identical;notify"
    assert config.runaway_action_repositories == ("octo/app", "/work/app")
    rows = {name: value for name, value, _ in describe(config)}
    assert rows["notify_webhook"] == "https://hooks.example.com/***"  # the path is the credential
    assert rows["runaway_action"] == "interrupt:identical;notify"
    doctor = next(c for c in run_checks(config) if c.what == "runaway action")
    assert "interrupt:identical;notify (interrupts the CLI); only in octo/app, /work/app" in doctor.found
    assert "webhook hooks.example.com (slack)" in doctor.found


def test_actions_apply_only_to_the_listed_repositories() -> None:
    calls: list[Path | None] = []

    def interrupt(folder: Path | None, *, dry_run: bool) -> Outcome:
        calls.append(folder)
        return Outcome("interrupted", 1, "sigint", "sent")

    actions = RunawayActions(
        parse_policy("interrupt"), repositories=["octo/app", "/work/app"], interrupt=interrupt
    )
    det = Detection("turns", time.time_ns(), 25, session_id="s", trace_id=1, span_id=2)
    assert (
        actions.on_detection(det, SessionView("s", Path("/a"), repository="other/repo", cwd="/elsewhere"))
        == []
    )
    assert actions.on_detection(det, SessionView("s", Path("/b"), repository="Octo/App")) != []
    det2 = Detection("turns", time.time_ns(), 25, session_id="t", trace_id=3, span_id=4)
    assert actions.on_detection(det2, SessionView("t", Path("/c"), cwd="/work/app/sub")) != []
    assert calls == [Path("/b"), Path("/c")]


def test_default_config_acts_on_nothing() -> None:
    config = load_config({}, {"HOME": "/nonexistent"})
    assert RunawayActions.from_config(config) is None
    assert next(c for c in run_checks(config) if c.what == "runaway action").found.startswith("none")


def test_history_is_reported_but_never_acted_on() -> None:
    """A backfilled detection (its line written long ago) neither notifies nor interrupts."""
    calls: list[Path | None] = []

    def interrupt(folder: Path | None, *, dry_run: bool) -> Outcome:
        calls.append(folder)
        return Outcome("interrupted", 1, "sigint", "sent")

    actions = RunawayActions(parse_policy("interrupt"), interrupt=interrupt)
    old = Detection("turns", time.time_ns() - 3600 * 10**9, 25, session_id="s", trace_id=1, span_id=2)
    assert actions.on_detection(old, SessionView("s", Path("/a"))) == []
    assert calls == [] and actions.stats.notified == 0


def test_a_prompt_that_ends_in_error_notifies_once_when_asked() -> None:
    """The real CLI's model-error session (HTTP 500 until the CLI gives up) as the pipeline reads it."""
    from copilot_otel.model.activity import PromptRun
    from copilot_otel.pipeline import Pipeline, split_lines

    log = Path(__file__).parent / "fixtures" / "cli-generated" / "model-error" / "events.jsonl"
    pipeline = Pipeline("s", project=False)
    runs = [r for item in split_lines(log.read_bytes()) for r in pipeline.feed(item).records]
    run = next(r for r in runs if isinstance(r, PromptRun))
    assert run.outcome == "error"
    at_end = run.end_ns + 10**9  # "now" is just after the prompt ended: a live prompt
    for asked, expected in ((False, 0), (True, 1)):
        actions = RunawayActions(parse_policy("none"), notify_prompt_errors=asked, clock=lambda: at_end)
        actions.on_prompt_end(run, SessionView("s", None))
        actions.on_prompt_end(run, SessionView("s", None))
        assert actions.stats.notified == expected
