"""The one time grammar (:mod:`copilot_otel.settings.moments`): each form, in a table, and every flag that reads it.

Issue 24: ``replay --since today`` was refused (any text with a ``t`` was taken for a datetime), ``report``
refused the datetimes ``replay`` took, and ``run --backfill`` refused ``7d`` and ``yesterday``.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from copilot_otel.cli import main
from copilot_otel.common.errors import ConfigError
from copilot_otel.settings.config import load_config
from copilot_otel.settings.moments import FORMS, parse_moment, parse_span
from tests.conftest import CLI_GENERATED

UTC = timezone.utc
NOW = int(datetime(2026, 12, 10, 15, 0, tzinfo=UTC).timestamp()) * 10**9  # a Thursday


def _iso(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, UTC).isoformat()


@pytest.mark.parametrize(
    ("text", "first", "after"),
    [
        ("2026-11-01", "2026-11-01T00:00:00+00:00", "2026-11-02T00:00:00+00:00"),
        ("20261101", "2026-11-01T00:00:00+00:00", "2026-11-02T00:00:00+00:00"),  # ccusage's form
        ("2026-11", "2026-11-01T00:00:00+00:00", "2026-12-01T00:00:00+00:00"),
        ("2026-02", "2026-02-01T00:00:00+00:00", "2026-03-01T00:00:00+00:00"),
        ("2026-11-01T09:30", "2026-11-01T09:30:00+00:00", "2026-11-01T09:30:00+00:00"),  # in the zone
        ("2026-11-01 09:30", "2026-11-01T09:30:00+00:00", "2026-11-01T09:30:00+00:00"),
        ("2026-11-01t09:30", "2026-11-01T09:30:00+00:00", "2026-11-01T09:30:00+00:00"),
        ("2026-11-01T09:30:00+01:00", "2026-11-01T08:30:00+00:00", "2026-11-01T08:30:00+00:00"),
        ("2026-11-01T09:30:00Z", "2026-11-01T09:30:00+00:00", "2026-11-01T09:30:00+00:00"),
        ("30m", "2026-12-10T14:30:00+00:00", "2026-12-10T14:30:00+00:00"),
        ("12h", "2026-12-10T03:00:00+00:00", "2026-12-10T03:00:00+00:00"),
        ("7d", "2026-12-03T15:00:00+00:00", "2026-12-03T15:00:00+00:00"),
        ("2w", "2026-11-26T15:00:00+00:00", "2026-11-26T15:00:00+00:00"),
        (" 7D ", "2026-12-03T15:00:00+00:00", "2026-12-03T15:00:00+00:00"),
        ("today", "2026-12-10T00:00:00+00:00", "2026-12-11T00:00:00+00:00"),
        ("TODAY", "2026-12-10T00:00:00+00:00", "2026-12-11T00:00:00+00:00"),
        ("yesterday", "2026-12-09T00:00:00+00:00", "2026-12-10T00:00:00+00:00"),
        ("this-week", "2026-12-07T00:00:00+00:00", "2026-12-11T00:00:00+00:00"),
        ("this-month", "2026-12-01T00:00:00+00:00", "2027-01-01T00:00:00+00:00"),
        ("last-month", "2026-11-01T00:00:00+00:00", "2026-12-01T00:00:00+00:00"),
    ],
)
def test_each_form(text: str, first: str, after: str) -> None:
    span = parse_span(text, now_ns=NOW, zone=UTC)
    assert (_iso(span[0]), _iso(span[1])) == (first, after)
    assert parse_moment(text, now_ns=NOW, zone=UTC) == span[0]
    assert parse_moment(text, now_ns=NOW, zone=UTC, end=True) == span[1]


def test_days_and_naive_datetimes_are_read_in_the_zone_given() -> None:
    local_day = datetime.fromtimestamp(NOW / 1e9).date()  # whatever zone the machine is in
    start = int(datetime(local_day.year, local_day.month, local_day.day).astimezone().timestamp()) * 10**9
    assert parse_moment("today", now_ns=NOW) == start
    naive = int(datetime(2026, 11, 1, 9, 30).astimezone().timestamp()) * 10**9
    assert parse_moment("2026-11-01T09:30", now_ns=NOW) == naive
    plus9 = timezone(timedelta(hours=9))
    assert _iso(parse_moment("2026-11-01", now_ns=NOW, zone=plus9)) == "2026-10-31T15:00:00+00:00"
    assert _iso(parse_moment("2026-11-01T09:30", now_ns=NOW, zone=plus9)) == "2026-11-01T00:30:00+00:00"


@pytest.mark.parametrize(
    "text",
    ["soon", "last tuesday", "", "7", "7y", "2026-13-01", "2026-02-30", "20261301", "2026-11-01T25:00", "d7"],
)
def test_bad_forms_name_the_accepted_ones(text: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_moment(text, now_ns=NOW, name="--since")
    assert str(caught.value) == f"Expected --since to be {FORMS}, got {text!r}"
    assert "\n" not in str(caught.value)


# ----------------------------------------------------------------------------------- the commands reading it
def _replayed(capsys: pytest.CaptureFixture[str], tmp_path: Path, *window: str) -> tuple[int, str, str]:
    code = main(
        ["replay", str(CLI_GENERATED), "--no-progress", "--output-file", str(tmp_path / "out.jsonl"), *window]
    )
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "window", [("--since", "today"), ("--since", "yesterday"), ("--until", "today"), ("--since", "20200101")]
)
def test_replay_takes_the_day_words(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, window: tuple[str, str]
) -> None:
    code, out, err = _replayed(capsys, tmp_path, *window)
    assert code == 0, err
    assert out.startswith("copilot-otel: exported ") and "error" not in err


def test_replay_refuses_a_bad_moment_in_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = _replayed(capsys, tmp_path, "--until", "tomorrow")
    assert code == 2 and out == ""
    assert err == f"copilot-otel: error: Expected --until to be {FORMS}, got 'tomorrow'\n"


def test_report_takes_the_datetimes_replay_takes(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["report", "daily", str(CLI_GENERATED), "--json", "--tz", "UTC", "--since", "2026-11-29T17:00Z"])
        == 0
    )
    doc = json.loads(capsys.readouterr().out)
    assert doc["report"]["since"] == "2026-11-29T17:00:00+00:00"
    assert (
        main(["report", "daily", str(CLI_GENERATED), "--json", "--since", "20261129", "--until", "7d"]) == 0
    )


def test_report_refuses_a_bad_moment_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(CLI_GENERATED), "--since", "last-tuesday"]) == 2
    assert (
        capsys.readouterr().err
        == f"copilot-otel: error: Expected --since to be {FORMS}, got 'last-tuesday'\n"
    )


def test_an_inverted_window_is_refused_by_report_and_replay(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # on main both answered as if the logs held nothing: "no sessions", exit 0
    said = "copilot-otel: error: --since '2026-12-05' is not before --until '2026-12-01': nothing lies between them"
    assert main(["report", str(CLI_GENERATED), "--since", "2026-12-05", "--until", "2026-12-01"]) == 2
    assert capsys.readouterr().err.startswith(said)
    code, out, err = _replayed(capsys, tmp_path, "--since", "2026-12-05", "--until", "2026-12-01")
    assert (code, out) == (2, "") and err.startswith(said)
    # a day is a whole day: --since and --until the same day is that day, not an empty window
    assert main(["report", str(CLI_GENERATED), "--since", "2026-11-29", "--until", "2026-11-29"]) == 0


@pytest.mark.parametrize("text", ["7d", "yesterday", "today", "20261101", "2026-11-01T09:00Z"])
def test_backfill_takes_every_form(tmp_path: Path, text: str) -> None:
    env = {"HOME": str(tmp_path), "COPILOT_OTEL_BACKFILL": text}
    backfill = load_config(None, env).backfill
    assert backfill.mode == "since" and backfill.since_ns is not None
    assert backfill == load_config({"backfill": text}, {"HOME": str(tmp_path)}).backfill or text == "7d"


def test_backfill_bad_form_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--backfill", "sometime", "--state-dir", "/nonexistent/never"]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == f"copilot-otel: error: Expected --backfill to be all, none or a moment: {FORMS}, got 'sometime'\n"
    )


def test_every_moment_flag_points_to_the_grammar(capsys: pytest.CaptureFixture[str]) -> None:
    for command, flags in (
        ("replay", ("--since", "--until")),
        ("report", ("--since", "--until")),
        ("run", ("--backfill",)),
    ):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        for flag in flags:
            assert f"{flag} " in text
        assert text.count("README: Moments") >= len(flags), command
