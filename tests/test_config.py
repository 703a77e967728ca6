"""The settings table: precedence, parsing, error messages, config file handling and ``describe``."""

from __future__ import annotations

import argparse
import dataclasses
from datetime import datetime, timezone
from pathlib import Path

import pytest

from copilot_otel.common.errors import ConfigError
from copilot_otel.settings import config as config_module
from copilot_otel.settings.config import SETTINGS, Backfill, Config, add_arguments, describe, load_config
from copilot_otel.settings.moments import FORMS


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def env(home: Path) -> dict[str, str]:
    """A clean environment: only HOME, so nothing from the developer's machine leaks in."""
    return {"HOME": str(home)}


def write_config(home: Path, text: str) -> Path:
    path = home / ".config" / "copilot-otel" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def error(cli: dict[str, object] | None = None, env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(cli, env)
    return str(info.value)


# --- the table ----------------------------------------------------------------------------------------------


def test_every_setting_is_a_config_field_in_table_order() -> None:
    names = [f.name for f in dataclasses.fields(Config)]
    assert names == [s.name for s in SETTINGS] + ["sources"]


def test_settings_declared_once() -> None:
    names = [s.name for s in SETTINGS]
    flags = [flag for s in SETTINGS for flag in s.flags]
    # `endpoint` is where traces go: it reads otlp_endpoint's traces variables, in the same order, and no other.
    by_name = {s.name: s for s in SETTINGS}
    assert by_name["endpoint"].env_vars == by_name["otlp_endpoint"].env_for("traces")
    env_vars = [var for s in SETTINGS if s.name != "endpoint" for var in s.all_env_vars]
    assert len(set(names)) == len(names)
    assert len(set(flags)) == len(flags)
    assert len(set(env_vars)) == len(env_vars)


def test_defaults(env: dict[str, str], home: Path) -> None:
    config = load_config(None, env)
    assert config.config_file == home / ".config/copilot-otel/config.toml"
    assert config.session_state == home / ".copilot/session-state"
    assert config.state_dir == home / ".local/state/copilot-otel"
    assert config.endpoint is None
    assert config.protocol == "http/protobuf"
    assert config.output_file is None
    assert config.embedded_output == home / ".local/state/copilot-otel/otlp.jsonl"
    assert config.service_name == "copilot-otel"
    assert config.max_retry_time == 60.0
    assert config.export_delay == 1.0
    assert config.metric_interval == 15.0
    assert config.backfill == Backfill("all")
    assert config.idle_timeout == 1800.0
    assert config.rescan_interval == 5.0
    assert config.backlog_cap == 20_000
    assert (config.runaway_turns, config.runaway_identical_calls, config.runaway_tool_errors) == (25, 5, 5)
    assert config.runaway_tokens_per_minute == 2_000_000
    assert (config.prometheus_port, config.prometheus_host) == (None, "127.0.0.1")
    assert config.metrics_enabled is True
    assert config.logs_enabled is True
    assert config.log_level == "info"
    assert config.otlp_headers_set is False
    assert config.sources["config_file"] == "default (not found)"
    assert all(config.sources[s.name] == "default" for s in SETTINGS if s.name != "config_file")


def test_env_dependent_defaults(env: dict[str, str], tmp_path: Path) -> None:
    env.update(
        COPILOT_HOME=str(tmp_path / "copilot"),
        XDG_STATE_HOME=str(tmp_path / "state"),
        XDG_CONFIG_HOME=str(tmp_path / "cfg"),
    )
    config = load_config(None, env)
    assert config.session_state == tmp_path / "copilot/session-state"
    assert config.state_dir == tmp_path / "state/copilot-otel"
    assert config.config_file == tmp_path / "cfg/copilot-otel/config.toml"


def test_relative_xdg_dirs_are_ignored(env: dict[str, str], home: Path) -> None:
    env.update(XDG_STATE_HOME="relative/state", XDG_CONFIG_HOME="relative/cfg")
    config = load_config(None, env)
    assert config.state_dir == home / ".local/state/copilot-otel"
    assert config.config_file == home / ".config/copilot-otel/config.toml"


def test_copilot_home_tilde_is_expanded(env: dict[str, str], home: Path) -> None:
    env["COPILOT_HOME"] = "~/elsewhere"
    assert load_config(None, env).session_state == home / "elsewhere/session-state"


def test_os_environ_is_the_default_env(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("COPILOT_OTEL_BACKLOG_CAP", "7")
    assert load_config().backlog_cap == 7


# --- precedence ---------------------------------------------------------------------------------------------


def test_precedence_flag_over_env_over_file_over_default(env: dict[str, str], home: Path) -> None:
    path = write_config(home, 'idle_timeout = 30\nrescan_interval = 2.5\nlog_level = "warning"\n')
    env.update(COPILOT_OTEL_IDLE_TIMEOUT="40", COPILOT_OTEL_LOG_LEVEL="debug")
    config = load_config({"log_level": "error"}, env)
    # log_level: flag beats env and file; idle_timeout: env beats file; rescan_interval: file beats default.
    assert config.log_level == "error"
    assert config.idle_timeout == 40.0
    assert config.rescan_interval == 2.5
    assert config.max_retry_time == 60.0
    assert config.sources["log_level"] == "flag --log-level"
    assert config.sources["idle_timeout"] == "env COPILOT_OTEL_IDLE_TIMEOUT"
    assert config.sources["rescan_interval"] == f"file {path}"
    assert config.sources["max_retry_time"] == "default"
    assert config.sources["config_file"] == "default"


def test_none_and_unknown_cli_keys_mean_not_given(env: dict[str, str]) -> None:
    env["COPILOT_OTEL_IDLE_TIMEOUT"] = "40"
    config = load_config({"idle_timeout": None, "command": "run", "paths": ["x"]}, env)
    assert config.idle_timeout == 40.0


def test_empty_env_value_counts_as_unset(env: dict[str, str]) -> None:
    env.update(COPILOT_OTEL_IDLE_TIMEOUT="", OTEL_EXPORTER_OTLP_ENDPOINT="  ")
    config = load_config(None, env)
    assert config.idle_timeout == 1800.0
    assert config.endpoint is None


def test_cli_accepts_typed_values(env: dict[str, str], tmp_path: Path) -> None:
    config = load_config({"state_dir": tmp_path / "s", "max_retry_time": 3, "prometheus_port": 9464}, env)
    assert config.state_dir == tmp_path / "s"
    assert config.max_retry_time == 3.0
    assert config.prometheus_port == 9464


def test_flagless_setting_given_programmatically(env: dict[str, str]) -> None:
    config = load_config({"service_name": "mine"}, env)
    assert config.service_name == "mine"
    assert config.sources["service_name"] == "argument service_name"


# --- config file --------------------------------------------------------------------------------------------


def test_file_values_of_every_toml_type(env: dict[str, str], home: Path) -> None:
    write_config(
        home,
        """
session_state = "~/sessions"
endpoint = "https://collector.example:4318"
protocol = "grpc"
service_name = "team-a"
export_delay = 0.5
backlog_cap = 100
metrics_enabled = false
prometheus_port = 9464
backfill = 2026-01-02T03:04:05Z
""",
    )
    config = load_config(None, env)
    assert config.session_state == home / "sessions"
    assert config.endpoint == "https://collector.example:4318"
    assert config.protocol == "grpc"
    assert config.service_name == "team-a"
    assert config.export_delay == 0.5  # seconds in the file, unlike OTEL_BSP_SCHEDULE_DELAY
    assert config.backlog_cap == 100
    assert config.metrics_enabled is False
    assert config.prometheus_port == 9464
    assert config.backfill == Backfill(
        "since", int(datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc).timestamp()) * 10**9
    )


def test_explicit_config_file_by_flag_and_env(env: dict[str, str], tmp_path: Path) -> None:
    by_flag = tmp_path / "flag.toml"
    by_flag.write_text("backlog_cap = 1\n")
    by_env = tmp_path / "env.toml"
    by_env.write_text("backlog_cap = 2\n")
    env["COPILOT_OTEL_CONFIG"] = str(by_env)
    config = load_config({"config_file": str(by_flag)}, env)
    assert config.backlog_cap == 1
    assert config.sources["config_file"] == "flag --config"
    assert config.sources["backlog_cap"] == f"file {by_flag}"
    config = load_config(None, env)
    assert config.backlog_cap == 2
    assert config.sources["config_file"] == "env COPILOT_OTEL_CONFIG"


def test_missing_explicit_config_file_is_an_error(env: dict[str, str], tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    assert (
        error({"config_file": str(missing)}, env)
        == f"Config file {missing} (from flag --config) does not exist"
    )
    env["COPILOT_OTEL_CONFIG"] = str(missing)
    assert "(from env COPILOT_OTEL_CONFIG) does not exist" in error(None, env)


def test_unknown_file_key(env: dict[str, str], home: Path) -> None:
    path = write_config(home, "idle_timout = 5\n")
    message = error(None, env)
    assert message.startswith(
        f"Unknown key 'idle_timout' in config file {path}; did you mean 'idle_timeout'? "
        "(allowed keys: session_state, "
    )
    assert "idle_timeout" in message
    assert "config_file" not in message


def test_config_file_key_is_not_allowed_in_the_file(env: dict[str, str], home: Path) -> None:
    path = write_config(home, 'config_file = "/x.toml"\n')
    assert (
        error(None, env)
        == f"Key 'config_file' cannot be set in config file {path}; use --config or COPILOT_OTEL_CONFIG"
    )


def test_toml_syntax_error(env: dict[str, str], home: Path) -> None:
    path = write_config(home, "idle_timeout = = 5\n")
    message = error(None, env)
    assert message.startswith(f"Cannot parse config file {path}: ")
    assert "line 1" in message


def test_unreadable_config_file(env: dict[str, str], tmp_path: Path) -> None:
    assert error({"config_file": str(tmp_path)}, env).startswith(f"Cannot read config file {tmp_path}: ")


def test_bad_file_value_names_the_key_and_file(env: dict[str, str], home: Path) -> None:
    path = write_config(home, 'protocol = "udp"\nbacklog_cap = true\n')
    assert error(None, env) == (
        f"Expected config file key protocol in {path} to be one of grpc, http/protobuf, got 'udp'"
    )
    write_config(home, "backlog_cap = true\n")
    assert (
        error(None, env) == f"Expected config file key backlog_cap in {path} to be an integer >= 1, got True"
    )


def test_non_utf8_config_file(env: dict[str, str], home: Path) -> None:
    path = write_config(home, "")
    path.write_bytes(b'service_name = "caf\xe9"\n')
    assert error(None, env).startswith(f"Cannot parse config file {path}: not UTF-8")


def test_file_bool_is_not_a_number(env: dict[str, str], home: Path) -> None:
    path = write_config(home, "max_retry_time = true\n")
    assert error(None, env) == (
        f"Expected config file key max_retry_time in {path} to be a number of seconds >= 0, got True"
    )


def test_no_toml_parser_means_no_config_file(
    env: dict[str, str], home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(config_module, "_toml", None)
    assert load_config(None, env).backlog_cap == 20_000  # no file: fine
    path = write_config(home, "backlog_cap = 1\n")
    assert error(None, env).startswith(f"Cannot read config file {path}: TOML config files need Python 3.11+")


# --- types and error messages -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cli", "env_update", "message"),
    [
        (
            None,
            {"OTEL_EXPORTER_OTLP_PROTOCOL": "udp"},
            "Expected OTEL_EXPORTER_OTLP_PROTOCOL to be one of grpc, http/protobuf, got 'udp'",
        ),
        (
            {"protocol": "udp"},
            {},
            "Expected --protocol to be one of grpc, http/protobuf, got 'udp'",
        ),
        (
            None,
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "localhost:4317"},
            "Expected OTEL_EXPORTER_OTLP_ENDPOINT to be an http:// or https:// URL, got 'localhost:4317'",
        ),
        (
            {"endpoint": "ftp://collector"},
            {},
            "Expected --endpoint to be an http:// or https:// URL, got 'ftp://collector'",
        ),
        (
            {"endpoint": "http://collector:99999"},
            {},
            "Expected --endpoint to be an http:// or https:// URL, got 'http://collector:99999'",
        ),
        (
            {"max_retry_time": "-1"},
            {},
            "Expected --max-retry-time to be a number of seconds >= 0, got '-1'",
        ),
        (
            {"max_retry_time": "soon"},
            {},
            "Expected --max-retry-time to be a number of seconds >= 0, got 'soon'",
        ),
        (
            {"idle_timeout": "nan"},
            {},
            "Expected --idle-timeout to be a number of seconds > 0, got 'nan'",
        ),
        (
            {"rescan_interval": "0"},
            {},
            "Expected --rescan-interval to be a number of seconds > 0, got '0'",
        ),
        (
            None,
            {"OTEL_BSP_SCHEDULE_DELAY": "1s"},
            "Expected OTEL_BSP_SCHEDULE_DELAY to be a number of milliseconds >= 0, got '1s'",
        ),
        (
            None,
            {"OTEL_METRIC_EXPORT_INTERVAL": "0"},
            "Expected OTEL_METRIC_EXPORT_INTERVAL to be a number of milliseconds > 0, got '0'",
        ),
        (
            None,
            {"COPILOT_OTEL_BACKLOG_CAP": "lots"},
            "Expected COPILOT_OTEL_BACKLOG_CAP to be an integer >= 1, got 'lots'",
        ),
        (
            None,
            {"COPILOT_OTEL_RUNAWAY_TOKENS_PER_MINUTE": "-5"},
            "Expected COPILOT_OTEL_RUNAWAY_TOKENS_PER_MINUTE to be an integer >= 0, got '-5'",
        ),
        (
            {"runaway_turns": "2.5"},
            {},
            "Expected --runaway-turns to be an integer >= 1, got '2.5'",
        ),
        (
            {"prometheus_port": "70000"},
            {},
            "Expected --prometheus-port to be an integer from 0 to 65535, got '70000'",
        ),
        (
            None,
            {"COPILOT_OTEL_METRICS": "maybe"},
            "Expected COPILOT_OTEL_METRICS to be true or false, got 'maybe'",
        ),
        (
            {"log_level": "trace"},
            {},
            "Expected --log-level to be one of debug, info, warning, error, got 'trace'",
        ),
        (
            {"backfill": "sometime"},
            {},
            f"Expected --backfill to be all, none or a moment: {FORMS}, got 'sometime'",
        ),
        (
            {"state_dir": ""},
            {},
            "Expected --state-dir to be a path, got ''",
        ),
        (
            {"prometheus_host": " "},
            {},
            "Expected --prometheus-host to be a non-empty string, got ' '",
        ),
    ],
)
def test_bad_values_name_the_source_and_quote_the_value(
    env: dict[str, str], cli: dict[str, object] | None, env_update: dict[str, str], message: str
) -> None:
    env.update(env_update)
    assert error(cli, env) == message


def test_bad_value_from_a_lower_priority_source_is_not_reported_when_overridden(env: dict[str, str]) -> None:
    env["OTEL_EXPORTER_OTLP_PROTOCOL"] = "udp"
    assert load_config({"protocol": "grpc"}, env).protocol == "grpc"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        *[(text, True) for text in ("true", "TRUE", "1", "yes", "on")],
        *[(text, False) for text in ("false", "False", "0", "no", "off")],
    ],
)
def test_booleans(env: dict[str, str], text: str, expected: bool) -> None:
    env.update(COPILOT_OTEL_METRICS=text, COPILOT_OTEL_LOGS=text)
    config = load_config(None, env)
    assert (config.metrics_enabled, config.logs_enabled) == (expected, expected)


def test_choices_are_case_insensitive_and_trimmed(env: dict[str, str]) -> None:
    env.update(OTEL_EXPORTER_OTLP_PROTOCOL=" GRPC ", COPILOT_OTEL_LOG_LEVEL="Debug")
    config = load_config(None, env)
    assert (config.protocol, config.log_level) == ("grpc", "debug")


def test_numbers(env: dict[str, str]) -> None:
    env.update(
        COPILOT_OTEL_MAX_RETRY_TIME="0",
        COPILOT_OTEL_BACKLOG_CAP="2_000",
        COPILOT_OTEL_RUNAWAY_TOKENS_PER_MINUTE="0",
        COPILOT_OTEL_RUNAWAY_IDENTICAL_CALLS="3",
        COPILOT_OTEL_RUNAWAY_TOOL_ERRORS="4",
        COPILOT_OTEL_PROMETHEUS_PORT="0",
    )
    config = load_config({"idle_timeout": "0.25", "runaway_turns": "9"}, env)
    assert config.max_retry_time == 0.0
    assert config.backlog_cap == 2_000
    assert config.runaway_tokens_per_minute == 0
    assert (config.runaway_turns, config.runaway_identical_calls, config.runaway_tool_errors) == (9, 3, 4)
    assert config.prometheus_port == 0
    assert config.idle_timeout == 0.25


def test_millisecond_env_vars_become_seconds(env: dict[str, str]) -> None:
    env.update(OTEL_BSP_SCHEDULE_DELAY="250", OTEL_METRIC_EXPORT_INTERVAL="60000")
    config = load_config(None, env)
    assert config.export_delay == 0.25
    assert config.metric_interval == 60.0
    assert config.sources["export_delay"] == "env OTEL_BSP_SCHEDULE_DELAY"


def test_export_delay_flag_is_seconds(env: dict[str, str]) -> None:
    env["OTEL_BSP_SCHEDULE_DELAY"] = "250"
    assert load_config({"export_delay": "2"}, env).export_delay == 2.0


def test_paths_expand_tilde(env: dict[str, str], home: Path) -> None:
    env["COPILOT_OTEL_STATE_DIR"] = "~/st"
    config = load_config({"output_file": "~/out.jsonl"}, env)
    assert config.state_dir == home / "st"
    assert config.output_file == home / "out.jsonl"


# --- backfill -----------------------------------------------------------------------------------------------


def _local_ns(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> int:
    """A naive (local) wall-clock time in Unix ns: the machine's time zone must not matter to the tests."""
    return int(datetime(year, month, day, hour, minute).astimezone().timestamp()) * 10**9


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("all", Backfill("all")),
        ("ALL", Backfill("all")),
        ("none", Backfill("none")),
        ("2026-01-01", Backfill("since", _local_ns(2026, 1, 1))),
        ("2026-01-01T09:30:00", Backfill("since", _local_ns(2026, 1, 1, 9, 30))),
        ("2026-01-01T09:30:00+01:00", Backfill("since", 1_767_256_200 * 10**9)),
        ("2026-01-01T08:30:00Z", Backfill("since", 1_767_256_200 * 10**9)),
        ("2026-01-01T08:30:00.000001+00:00", Backfill("since", 1_767_256_200 * 10**9 + 1_000)),
    ],
)
def test_backfill_forms(env: dict[str, str], text: str, expected: Backfill) -> None:
    env["COPILOT_OTEL_BACKFILL"] = text
    assert load_config(None, env).backfill == expected


def test_backfill_toml_local_date(env: dict[str, str], home: Path) -> None:
    write_config(home, "backfill = 2026-01-01\n")
    assert load_config(None, env).backfill == Backfill("since", _local_ns(2026, 1, 1))


def test_backfill_str() -> None:
    since = Backfill("since", 1_767_256_200 * 10**9)
    assert str(since) == "2026-01-01T08:30:00+00:00"
    assert str(Backfill("none")) == "none"


# --- endpoint, protocol, embedded output --------------------------------------------------------------------


def test_per_signal_endpoint_wins_over_generic(env: dict[str, str]) -> None:
    env.update(
        OTEL_EXPORTER_OTLP_ENDPOINT="http://generic:4318",
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="http://traces:4318/v1/traces",
    )
    config = load_config(None, env)
    assert config.endpoint == "http://traces:4318/v1/traces"
    assert config.sources["endpoint"] == "env OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
    assert config.embedded_output is None


def test_per_signal_endpoint_alone_counts_as_configured(env: dict[str, str]) -> None:
    env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = "https://traces.example/v1/traces"
    config = load_config(None, env)
    assert config.endpoint == "https://traces.example/v1/traces"
    assert config.embedded_output is None


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        pytest.param(
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://all:4318/",
                "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "http://l/in",
            },
            {
                "traces": ("http://all:4318/v1/traces", "env OTEL_EXPORTER_OTLP_ENDPOINT"),
                "logs": ("http://l/in", "env OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"),
                "metrics": ("http://all:4318/v1/metrics", "env OTEL_EXPORTER_OTLP_ENDPOINT"),
            },
            id="general-and-logs",
        ),
        pytest.param(
            {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:4318/v1/traces"},
            {
                "traces": ("http://t:4318/v1/traces", "env OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
                "logs": ("http://t:4318/v1/logs", "env OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
                "metrics": ("http://t:4318/v1/metrics", "env OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
            },
            id="traces-alone-names-the-collector",
        ),
        pytest.param(
            {
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:4318/v1/traces",
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://all:4318",
            },
            {
                "traces": ("http://t:4318/v1/traces", "env OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
                "logs": ("http://all:4318/v1/logs", "env OTEL_EXPORTER_OTLP_ENDPOINT"),
                "metrics": ("http://all:4318/v1/metrics", "env OTEL_EXPORTER_OTLP_ENDPOINT"),
            },
            id="traces-and-general",
        ),
    ],
)
def test_each_signal_endpoint_is_resolved_once_with_its_source(
    env: dict[str, str], given: dict[str, str], expected: dict[str, tuple[str, str]]
) -> None:
    env.update(given)
    config = load_config(None, env)
    assert config_module.signal_endpoints(config) == expected
    assert config.signal_endpoints() == {signal: url for signal, (url, _) in expected.items()}
    rows = {name: (value, source) for name, value, source in describe(config)}
    for signal, target in expected.items():
        assert (
            rows[f"otlp_endpoint.{signal}"] == target
        )  # `copilot-otel config` shows where each goes, and why


def test_the_endpoint_flag_beats_the_traces_variable_not_the_others(env: dict[str, str]) -> None:
    env.update(
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="http://t:4318/v1/traces",
        OTEL_EXPORTER_OTLP_METRICS_ENDPOINT="http://vm:8428/opentelemetry/v1/metrics",
    )
    config = load_config({"endpoint": "http://flag:4318"}, env)
    assert config_module.signal_endpoints(config) == {
        "traces": ("http://flag:4318/v1/traces", "flag --endpoint"),
        "logs": ("http://flag:4318/v1/logs", "flag --endpoint"),
        "metrics": ("http://vm:8428/opentelemetry/v1/metrics", "env OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"),
    }


def test_grpc_sends_every_signal_to_the_endpoint(env: dict[str, str]) -> None:
    env.update(OTEL_EXPORTER_OTLP_PROTOCOL="grpc", OTEL_EXPORTER_OTLP_ENDPOINT="http://c:4317")
    env["OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"] = "http://elsewhere:4317"
    config = load_config(None, env)
    assert config.signal_endpoints() == dict.fromkeys(("traces", "logs", "metrics"), "http://c:4317")
    assert ("otlp_endpoint", "http://c:4317", "env OTEL_EXPORTER_OTLP_ENDPOINT") in describe(config)


def test_no_endpoint_means_the_file_for_every_signal(env: dict[str, str]) -> None:
    env["OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"] = "http://l:4318/v1/logs"  # alone it sends nothing anywhere
    config = load_config(None, env)
    assert config.signal_endpoints() is None and config.embedded_output is not None
    assert ("otlp_endpoint", "none (embedded file exporter)", "derived") in describe(config)


def test_a_bad_signal_endpoint_fails_at_load_naming_its_variable(env: dict[str, str]) -> None:
    """It was read raw by the exporter; now the table parses it, as every other OTLP variable."""
    env.update(OTEL_EXPORTER_OTLP_ENDPOINT="http://c:4318", OTEL_EXPORTER_OTLP_METRICS_ENDPOINT="c:4318")
    assert error(None, env) == (
        "Expected OTEL_EXPORTER_OTLP_METRICS_ENDPOINT to be an http:// or https:// URL, got 'c:4318'"
    )


def test_the_folds_content_policy_is_the_resolved_configs(env: dict[str, str]) -> None:
    """Replay, run and show fold with the content policy of the config they were given, not one parsed again
    from this process's environment (which here captures nothing)."""
    from copilot_otel.pipeline import fold_settings
    from copilot_otel.settings.content import ContentKind

    env["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "true"
    config = load_config(None, env)
    assert ContentKind.PROMPTS in config.content.enabled
    assert fold_settings(config).content == config.content


def test_the_endpoint_from_a_flag_or_the_file_is_a_base_url(env: dict[str, str], home: Path) -> None:
    """A flag or config file value has ``OTEL_EXPORTER_OTLP_ENDPOINT`` semantics: each signal's path is appended."""
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://env:4318"
    assert load_config(None, env).signal_endpoints() == {
        s: f"http://env:4318/v1/{s}" for s in ("traces", "logs", "metrics")
    }
    flag = load_config({"endpoint": "http://flag:4318"}, env)
    assert flag.signal_endpoints() == {s: f"http://flag:4318/v1/{s}" for s in ("traces", "logs", "metrics")}
    del env["OTEL_EXPORTER_OTLP_ENDPOINT"]
    write_config(home, 'endpoint = "http://file:4318"\n')
    assert load_config(None, env).signal_endpoints() == {
        s: f"http://file:4318/v1/{s}" for s in ("traces", "logs", "metrics")
    }


def test_per_signal_protocol_wins_over_generic(env: dict[str, str]) -> None:
    env.update(OTEL_EXPORTER_OTLP_PROTOCOL="grpc", OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="http/protobuf")
    config = load_config(None, env)
    assert config.protocol == "http/protobuf"
    assert config.sources["protocol"] == "env OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"


def test_embedded_output(env: dict[str, str], home: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    assert load_config({"output_file": str(out)}, env).embedded_output == out
    with_endpoint = load_config({"output_file": str(out), "endpoint": "http://c:4318"}, env)
    assert with_endpoint.embedded_output == out
    assert load_config({"state_dir": str(tmp_path)}, env).embedded_output == tmp_path / "otlp.jsonl"


# --- describe -----------------------------------------------------------------------------------------------


def test_describe_rows(env: dict[str, str]) -> None:
    env["OTEL_BSP_SCHEDULE_DELAY"] = "500"
    rows = describe(load_config({"protocol": "grpc"}, env))
    assert [row[0] for row in rows] == [s.name for s in SETTINGS] + ["embedded_output", "content_capture"]
    by_name = {name: (value, source) for name, value, source in rows}
    assert by_name["protocol"] == ("grpc", "flag --protocol")
    assert by_name["export_delay"] == ("0.5", "env OTEL_BSP_SCHEDULE_DELAY")
    assert by_name["endpoint"] == ("none", "default")
    assert by_name["metrics_enabled"] == ("true", "default")
    assert by_name["embedded_output"][1] == "derived"
    assert by_name["otlp_headers"] == ("not set", "default")


@pytest.mark.parametrize("var", ["OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"])
def test_describe_never_shows_header_values(env: dict[str, str], var: str) -> None:
    secret = "Authorization=Bearer sk-very-secret"
    env[var] = secret
    config = load_config(None, env)
    rows = describe(config)
    if var == "OTEL_EXPORTER_OTLP_HEADERS":
        assert ("otlp_headers", "set", f"env {var}") in rows
    else:  # the traces' own headers: logs and metrics send none
        assert ("otlp_headers.traces", "set", f"env {var}") in rows
        assert ("otlp_headers.logs", "not set", "default") in rows
    assert "sk-very-secret" not in repr(rows)
    assert "sk-very-secret" not in repr(config)


def test_describe_shows_a_plain_endpoint_as_is(env: dict[str, str]) -> None:
    rows = describe(load_config({"endpoint": "http://collector:4318"}, env))
    assert ("endpoint", "http://collector:4318", "flag --endpoint") in rows
    assert ("embedded_output", "none", "derived") in rows


def test_describe_masks_endpoint_credentials(env: dict[str, str]) -> None:
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "https://user:hunter2@collector.example:4318/otlp?token=abc"
    rows = describe(load_config(None, env))
    assert (
        "endpoint",
        "https://***@collector.example:4318/otlp?***",
        "env OTEL_EXPORTER_OTLP_ENDPOINT",
    ) in rows
    assert "hunter2" not in repr(rows)
    assert "abc" not in repr(rows)


# --- argparse -----------------------------------------------------------------------------------------------


def test_add_arguments_and_round_trip(env: dict[str, str]) -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser, ["endpoint", "protocol", "export_delay", "config_file"])
    args = parser.parse_args(["--endpoint", "http://c:4318", "--export-delay", "3"])
    assert vars(args) == {
        "endpoint": "http://c:4318",
        "protocol": None,
        "export_delay": "3",
        "config_file": None,
    }
    config = load_config(vars(args), env)
    assert (config.endpoint, config.export_delay, config.protocol) == ("http://c:4318", 3.0, "http/protobuf")


def test_add_arguments_help_comes_from_the_table() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser, None)
    help_text = " ".join(parser.format_help().split())
    for setting in SETTINGS:
        for flag in setting.flags:
            assert flag in help_text
    assert "OTLP collector base URL" in help_text
    assert "env: OTEL_BSP_SCHEDULE_DELAY (milliseconds)" in help_text
    assert "default: 60]" in help_text
    assert "--service-name" not in help_text  # env/file only


def test_bad_flag_value_is_a_config_error_not_a_usage_error(env: dict[str, str]) -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser, ["max_retry_time"])
    args = parser.parse_args(["--max-retry-time", "forever"])
    assert error(vars(args), env) == "Expected --max-retry-time to be a number of seconds >= 0, got 'forever'"


def test_add_arguments_rejects_unknown_or_flagless_names() -> None:
    with pytest.raises(ValueError, match="Unknown setting 'nope'"):
        add_arguments(argparse.ArgumentParser(), ["nope"])
    with pytest.raises(ValueError, match="has no command-line flag"):
        add_arguments(argparse.ArgumentParser(), ["service_name"])


def test_the_settings_page_table_is_made_from_the_table() -> None:
    """docs/configuration.md's settings table is settings_markdown()'s, byte for byte."""
    text = (Path(__file__).resolve().parent.parent / "docs" / "configuration.md").read_text(encoding="utf-8")
    block = (
        text.split("<!-- settings-table:start")[1].split("-->", 1)[1].split("<!-- settings-table:end -->")[0]
    )
    assert block.strip("\n") + "\n" == config_module.settings_markdown(), (
        "regenerate it with settings_markdown()"
    )


# --- per-signal OTLP settings -------------------------------------------------------------------------------


def test_otlp_settings_per_signal_beat_the_general_ones_which_beat_the_file(
    env: dict[str, str], home: Path
) -> None:
    write_config(home, 'otlp_timeout = 2.5\notlp_compression = "gzip"\n')
    env["OTEL_EXPORTER_OTLP_TIMEOUT"] = "4000"
    env["OTEL_EXPORTER_OTLP_LOGS_TIMEOUT"] = "500"
    config = load_config(None, env)
    assert (config.otlp_timeout.traces, config.otlp_timeout.logs, config.otlp_timeout.metrics) == (
        4.0,
        0.5,
        4.0,
    )
    assert config.otlp("logs").timeout == 0.5 and config.otlp("metrics").compression == "gzip"
    rows = {name: (value, source) for name, value, source in describe(config)}
    assert rows["otlp_timeout.logs"] == ("0.5", "env OTEL_EXPORTER_OTLP_LOGS_TIMEOUT")
    assert rows["otlp_timeout.traces"] == ("4", "env OTEL_EXPORTER_OTLP_TIMEOUT")
    assert "otlp_timeout" not in rows, "the signals differ: one row each"
    assert rows["otlp_compression"] == ("gzip", f"file {home / '.config/copilot-otel/config.toml'}")


def test_a_bad_header_value_is_never_quoted(env: dict[str, str]) -> None:
    env["OTEL_EXPORTER_OTLP_METRICS_HEADERS"] = " "  # blank: as if unset
    assert load_config(None, env).otlp_headers_set is False
    assert config_module._parse(
        config_module._headers, "authorization=Bearer%20sk-1", "OTEL_EXPORTER_OTLP_HEADERS", env, secret=True
    ).as_dict() == {"authorization": "Bearer sk-1"}
    with pytest.raises(ConfigError) as info:
        config_module._parse(config_module._boolean, "sk-secret", "X", env, secret=True)
    assert "sk-secret" not in str(info.value) and "not shown" in str(info.value)


def test_headers_cannot_go_in_the_config_file(env: dict[str, str], home: Path) -> None:
    write_config(home, 'otlp_headers = "authorization=Bearer x"\n')
    assert "Key 'otlp_headers' cannot be set in config file" in error(None, env)
    assert "OTEL_EXPORTER_OTLP_TRACES_HEADERS" in error(None, env) or "OTEL_EXPORTER_OTLP_HEADERS" in error(
        None, env
    )


@pytest.mark.parametrize(
    ("var", "value", "message"),
    [
        ("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "0", "a positive number of milliseconds"),
        ("OTEL_EXPORTER_OTLP_COMPRESSION", "deflate", "one of gzip, none"),
        ("OTEL_EXPORTER_OTLP_LOGS_INSECURE", "maybe", "true or false"),
        ("COPILOT_OTEL_TLS_TRUST", "keychain", "one of system, certifi"),
    ],
)
def test_bad_otlp_values_name_their_variable(env: dict[str, str], var: str, value: str, message: str) -> None:
    env[var] = value
    assert error(None, env) == f"Expected {var} to be {message}, got {value!r}"


def test_misspelt_otlp_key_gets_a_did_you_mean(env: dict[str, str], home: Path) -> None:
    write_config(home, "otlp_timeuot = 3\n")
    assert "did you mean 'otlp_timeout'?" in error(None, env)


def test_agents_setting_names_whose_logs_are_read_and_where() -> None:
    """Every agent by default, each home where its own CLI looks (its variable, else ~/.name); a typo is a
    config error naming the choices, ``none`` reads only given paths."""
    from copilot_otel.sources import agent_roots

    env = {"HOME": "/h", "CODEX_HOME": "~/cx", "CLAUDE_CONFIG_DIR": "/etc/claude"}
    config = load_config(env=env)
    assert config.agents == ("copilot", "claude-code", "codex", "gemini")
    roots = {root.agent: root for root in agent_roots(config)}
    assert roots["claude-code"].logs == Path("/etc/claude/projects")
    assert roots["codex"].logs == Path("/h/cx/sessions")
    assert roots["gemini"].logs == Path("/h/.gemini/tmp")
    assert roots["copilot"].logs == config.session_state
    assert load_config(env={**env, "COPILOT_OTEL_AGENTS": "Codex, copilot"}).agents == ("copilot", "codex")
    assert load_config(cli={"agents": "none"}, env=env).agents == ()
    off = {root.agent: root.enabled for root in agent_roots(load_config(cli={"agents": "codex"}, env=env))}
    assert off == {"copilot": False, "claude-code": False, "codex": True, "gemini": False}
    with pytest.raises(ConfigError, match="unknown: cladue"):
        load_config(env={**env, "COPILOT_OTEL_AGENTS": "cladue"})


def test_gemini_home_is_where_gemini_cli_finds_its_folder() -> None:
    """``GEMINI_CLI_HOME`` names the user's home for Gemini CLI, not its folder: the folder is ``.gemini`` under
    it (``~/.gemini`` without it); ``--gemini-home`` / ``COPILOT_OTEL_GEMINI_HOME`` name the folder itself."""
    from copilot_otel.sources import agent_roots

    def logs(env: dict[str, str], cli: dict[str, str] | None = None) -> Path:
        roots = {root.agent: root for root in agent_roots(load_config(cli=cli, env={"HOME": "/h", **env}))}
        return roots["gemini"].logs

    assert logs({}) == Path("/h/.gemini/tmp")
    assert logs({"GEMINI_CLI_HOME": "/srv/me"}) == Path("/srv/me/.gemini/tmp")
    assert logs({"GEMINI_CLI_HOME": "~/other"}) == Path("/h/other/.gemini/tmp")
    assert logs({"GEMINI_CLI_HOME": "/srv/me", "COPILOT_OTEL_GEMINI_HOME": "/g"}) == Path("/g/tmp")
    assert logs({"COPILOT_OTEL_GEMINI_HOME": "/g"}, cli={"gemini_home": "/flag"}) == Path("/flag/tmp")
    assert load_config(env={"HOME": "/h", "COPILOT_OTEL_AGENTS": "gemini"}).agents == ("gemini",)
