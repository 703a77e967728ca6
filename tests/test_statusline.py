"""``copilot-otel statusline``: Claude Code's statusLine hook, driven as Claude Code drives it (issue 34, point 4).

The real command (the console script, a process of its own) gets the hook's JSON on stdin and prints one line at
once from the figures its background refresh keeps; the refresh (a real detached process) reads the logs as
``report`` does. The hook's JSON is what real Claude Code 2.1.332 passed its statusLine command in an interactive
session (``claude-code-2.1.332/statusline``), and the session is that one's log, re-timed to have ended minutes
ago (so it is today's, in an open 5-hour window); its figures are checked against ``report``'s and against the
CLI's own cost of the session; a real daemon for the "delivering" part.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from copilot_otel.cli import main
from copilot_otel.model.timestamps import parse_timestamp
from tests.conftest import FIXTURES, lock_held_elsewhere
from tests.daemon_process import DaemonProcess
from tests.otlp_receiver import OtlpReceiver
from tests.test_cli_commands import _console_script
from tests.waiting import until

# A real interactive Claude Code 2.1.332 session with a statusLine command that kept what the CLI passed it.
RECORDING = FIXTURES / "other-agents" / "claude-code-2.1.332" / "statusline"
SCENARIO = RECORDING / "projects"
HOOK_INPUTS = RECORDING / "_capture" / "statusline-input.jsonl"
_STAMP = re.compile(rb'"timestamp":"([0-9T:.\-]+Z)"')


def _retimed_claude(home: Path, end: datetime) -> tuple[str, Path]:
    """The capture copied into ``home``'s ``~/.claude/projects``, every timestamp moved so its last is ``end``
    (the rest of each line as the CLI wrote it). Returns its session id and log."""
    (source,) = SCENARIO.glob("*/*.jsonl")
    data = source.read_bytes()
    last = max(parse_timestamp(m.decode()) for m in _STAMP.findall(data))
    shift = int(end.timestamp() * 1e9) - last

    def moved(match: re.Match[bytes]) -> bytes:
        ns = parse_timestamp(match[1].decode()) + shift
        stamp = datetime.fromtimestamp(ns / 1e9, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        return b'"timestamp":"' + stamp.encode() + b'"'

    log = home / ".claude" / "projects" / source.parent.name / source.name
    log.parent.mkdir(parents=True)
    log.write_bytes(_STAMP.sub(moved, data))
    return source.stem, log


def _hook(session_id: str, log: Path, which: int = -1) -> bytes:
    """What the CLI passed its statusLine command (``which``: the first, before any prompt, or the last), as it
    passed it but for the transcript's path, which is where this test's home has the log."""
    hook = json.loads(HOOK_INPUTS.read_bytes().splitlines()[which])
    assert hook["session_id"] == session_id
    hook["transcript_path"] = str(log)
    return json.dumps(hook).encode()


def _statusline(home: Path, state: Path, stdin: bytes, **env: str) -> str:
    """The line the console script prints for ``stdin`` (exit 0, nothing on stderr), ``env`` added to the
    environment."""
    done = subprocess.run(
        [*_console_script(), "statusline", "--state-dir", str(state)],
        input=stdin,
        capture_output=True,
        timeout=60,
        env={**_env(home), **env},
        check=False,
    )
    assert done.returncode == 0 and done.stderr == b"", done.stderr
    (line,) = done.stdout.decode().splitlines()
    return line


def _env(home: Path) -> dict[str, str]:
    import os

    return {**os.environ, "HOME": str(home)}


def _report(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["report", *argv, "--json"]) == 0  # "today" in the local zone, as the line's
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


def test_the_line_shows_the_sessions_and_todays_cost_and_the_open_window_as_report_does(
    midday_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    now = datetime.now(timezone.utc)
    session_id, log = _retimed_claude(midday_home, now - timedelta(minutes=10))
    state = tmp_path / "state"
    stdin = _hook(session_id, log)

    # first message: nothing worked out yet; the line comes at once and a refresh starts in the background
    first = _statusline(midday_home, state, _hook(session_id, log, which=0))
    assert first.startswith("Opus 5.5 · $… session · $… today") and first.endswith("otel not running"), first
    until(lambda: (state / "statusline.json").is_file(), 60, "the background refresh wrote its figures")

    line = _statusline(midday_home, state, stdin)
    session_cost = _report(capsys, "session", str(log))["totals"]["cost_usd"]
    today = _report(capsys, "daily", "--since", "today")["totals"]["cost_usd"]
    (window,) = [b for b in _blocks(capsys) if b["active"]]
    assert session_cost > 0 and today >= session_cost
    # priced from the log's tokens at the table's prices, it is the CLI's own figure for the session
    assert session_cost == pytest.approx(json.loads(stdin)["cost"]["total_cost_usd"], abs=1e-6)
    assert f"${session_cost:.2f} session" in line and f"${today:.2f} today" in line, line
    left = re.search(r"(\d+)h(\d\d)m left in 5h window", line)
    assert left is not None, line
    assert abs(int(left[1]) * 3600 + int(left[2]) * 60 - window["seconds_left"]) <= 120


def _blocks(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    assert main(["report", "blocks", "--json", "--agent", "claude-code"]) == 0
    blocks: list[dict[str, Any]] = json.loads(capsys.readouterr().out)["blocks"]
    return blocks


def test_a_grown_transcript_is_priced_again(midday_home: Path, tmp_path: Path) -> None:
    session_id, log = _retimed_claude(midday_home, datetime.now(timezone.utc) - timedelta(minutes=10))
    state = tmp_path / "state"
    stdin = _hook(session_id, log)
    _statusline(midday_home, state, stdin)
    until(lambda: (state / "statusline.json").is_file(), 60, "the first refresh")
    before = json.loads((state / "statusline.json").read_bytes())["sessions"][session_id]
    # the CLI appends the next call (a copy of the last assistant record, as a next reply would be written)
    last = [line for line in log.read_bytes().splitlines() if b'"type":"assistant"' in line][-1]
    with log.open("ab") as out:
        out.write(last.replace(b'"id":"msg_', b'"id":"msg_next') + b"\n")
    _statusline(midday_home, state, stdin)

    def priced_again() -> bool:
        after = json.loads((state / "statusline.json").read_bytes())["sessions"][session_id]
        return bool(after["signature"] != before["signature"] and after["cost_usd"] > before["cost_usd"])

    until(priced_again, 60, "the grown transcript priced again")


def test_it_says_a_running_daemon_is_delivering(midday_home: Path, tmp_path: Path) -> None:
    session_id, log = _retimed_claude(midday_home, datetime.now(timezone.utc) - timedelta(minutes=10))
    state = tmp_path / "state"
    root = tmp_path / "session-state"
    root.mkdir()
    with OtlpReceiver() as receiver:
        daemon = DaemonProcess(root, state, receiver.http_endpoint, tmp_path / "daemon.log").start()
        try:
            daemon.until(
                "a span exported and the status written",
                lambda: bool(receiver.spans()) and (state / "status.json").is_file(),
            )
            line = _statusline(midday_home, state, _hook(session_id, log))
            assert line.endswith("otel delivering"), line
        finally:
            assert daemon.terminate() == 0
    line = _statusline(midday_home, state, _hook(session_id, log))
    assert line.endswith("otel not running"), line


@pytest.mark.parametrize("stdin", [b"", b"not json", b"[1, 2]", b'{"model": 3, "session_id": null}'])
def test_whatever_the_hook_sends_the_line_is_printed_and_the_exit_is_0(
    midday_home: Path, tmp_path: Path, stdin: bytes
) -> None:
    (midday_home / ".claude" / "projects").mkdir(parents=True)
    line = _statusline(midday_home, tmp_path / "state", stdin)
    assert line.startswith("? · $… session · $… today") and line.endswith("otel not running"), line


def test_the_hook_configuration_in_the_docs_is_the_command() -> None:
    text = (Path(__file__).resolve().parent.parent / "docs" / "reports-and-live.md").read_text()
    assert '{"statusLine": {"type": "command", "command": "copilot-otel statusline"}}' in text


# ============================================================ the hook's short path finds the state directory
def _file(path: Path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


# (flags, environment, files to write (relative to the home) -> the state directory the settings table resolves)
_WHERE_CASES: dict[str, tuple[dict[str, str], dict[str, str], dict[str, str]]] = {
    "default": ({}, {}, {}),
    "xdg state home": ({}, {"XDG_STATE_HOME": "/xdg/state"}, {}),
    "relative xdg ignored": ({}, {"XDG_STATE_HOME": "rel/state"}, {}),
    "env": ({}, {"COPILOT_OTEL_STATE_DIR": "~/from-env"}, {}),
    "blank env ignored": ({}, {"COPILOT_OTEL_STATE_DIR": "  "}, {}),
    "flag over env": ({"--state-dir": " /flag/state "}, {"COPILOT_OTEL_STATE_DIR": "/env/state"}, {}),
    "default config file": ({}, {}, {".config/copilot-otel/config.toml": 'state_dir = "~/from-file"\n'}),
    "config file without the key": ({}, {}, {".config/copilot-otel/config.toml": "log_level = 'debug'\n"}),
    "xdg config home": (
        {},
        {"XDG_CONFIG_HOME": "{home}/xdg"},
        {"xdg/copilot-otel/config.toml": 'state_dir = "/from/xdg/file"\n'},
    ),
    "env over file": (
        {},
        {"COPILOT_OTEL_STATE_DIR": "/env/state"},
        {".config/copilot-otel/config.toml": 'state_dir = "/file/state"\n'},
    ),
    "config flag": ({"--config": "{home}/c.toml"}, {}, {"c.toml": "state_dir = 'relative/state'\n"}),
    "config env": ({}, {"COPILOT_OTEL_CONFIG": "~/c.toml"}, {"c.toml": "state_dir = '~'\n"}),
}


@pytest.mark.parametrize("case", list(_WHERE_CASES))
def test_the_hooks_short_path_finds_the_state_directory_the_settings_find(tmp_path: Path, case: str) -> None:
    """:func:`copilot_otel.settings.locate.state_dir` (what the console script's hook path reads instead of the
    whole settings table) against :func:`load_config` on the same flags, environment and files."""
    from copilot_otel.settings import locate
    from copilot_otel.settings.config import load_config

    home = tmp_path / "home"
    home.mkdir()
    flags, env, files = (
        {k: v.replace("{home}", str(home)) for k, v in part.items()} for part in _WHERE_CASES[case]
    )
    for name, text in files.items():
        _file(home / name, text)
    env = {"HOME": str(home), **env}
    cli = {"state_dir": flags.get("--state-dir"), "config_file": flags.get("--config")}
    assert locate.state_dir(flags, env) == load_config(cli, env).state_dir


@pytest.mark.parametrize(
    ("flags", "config"),
    [
        ({"--config": "{home}/missing.toml"}, None),
        ({}, "state_dir = [\n"),  # not TOML
        ({}, "state_dir = 3\n"),  # not a path
    ],
    ids=["missing given file", "not toml", "not a path"],
)
def test_what_the_short_path_cannot_settle_the_cli_says(
    tmp_path: Path, flags: dict[str, str], config: str | None
) -> None:
    """The quick reading gives up (``Unsettled``) where the table raises, and the command, through the console
    script, then says the table's one-line error and its exit code, as before there was a short path."""
    from copilot_otel.common.errors import ConfigError
    from copilot_otel.settings import locate
    from copilot_otel.settings.config import load_config

    home = tmp_path / "home"
    home.mkdir()
    flags = {k: v.replace("{home}", str(home)) for k, v in flags.items()}
    if config is not None:
        _file(home / ".config" / "copilot-otel" / "config.toml", config)
    env = {"HOME": str(home)}
    with pytest.raises(locate.Unsettled):
        locate.state_dir(flags, env)
    with pytest.raises(ConfigError):
        load_config({"config_file": flags.get("--config")}, env)
    argv = [f"{flag}={value}" for flag, value in flags.items()]
    done = subprocess.run(
        [*_console_script(), "statusline", *argv],
        input=b"{}",
        capture_output=True,
        timeout=60,
        env={**_env(home), "HOME": str(home)},
        check=False,
    )
    (said,) = done.stderr.decode().splitlines()
    assert done.returncode == 2 and said.startswith("copilot-otel: ") and "config file" in said.lower(), said


@pytest.mark.parametrize(
    ("argv", "short"),
    [
        ([], {}),
        (["--state-dir", "s"], {"--state-dir": "s"}),
        (["--state-dir=s", "--config", "c.toml"], {"--state-dir": "s", "--config": "c.toml"}),
        (["--config="], None),  # an empty value: the CLI says what is wrong with it
        (["--config"], None),
        (["--state-dir", "a", "--state-dir", "b"], None),
        (["--refresh"], None),
        (["--help"], None),
        (["--state-dir", "--config"], None),
    ],
)
def test_what_the_console_script_answers_on_the_hooks_short_path(
    argv: list[str], short: dict[str, str] | None
) -> None:
    """``statusline`` with only ``--state-dir``/``--config`` (each once, with a value) takes the short path; any
    other word goes to the CLI, which parses it (``--help``, ``--refresh``, a mistake)."""
    from copilot_otel.entry import hook_flags

    assert hook_flags(argv) == short


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("COPILOT_OTEL_LOG_LEVEL", "chatty"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://alice:s3cret@collector.example:99999"),  # a password in it
    ],
)
def test_a_wrong_setting_is_said_on_the_line(
    midday_home: Path, tmp_path: Path, variable: str, value: str
) -> None:
    """A setting the short path does not read is wrong: the hook still answers at once, its background refresh
    (the whole settings table) refuses to run, and the next line says what to fix instead of showing ``$…`` for
    ever; a URL's password is masked there and in the file it is read from."""
    (midday_home / ".claude" / "projects").mkdir(parents=True)
    state = tmp_path / "state"
    hook = b'{"session_id": "s1", "model": {"display_name": "Opus"}}'
    assert _statusline(midday_home, state, hook, **{variable: value}) == (
        "Opus · $… session · $… today · otel not running"
    )
    until(lambda: (state / "statusline.json").is_file(), 60, "the refresh's word")
    said = _statusline(midday_home, state, hook, **{variable: value})
    assert said.startswith("Opus · copilot-otel settings: ") and variable in said, said
    assert said.endswith("(copilot-otel config)"), said
    assert "s3cret" not in said and b"s3cret" not in (state / "statusline.json").read_bytes()


def test_a_hook_while_a_refresh_runs_leaves_its_session_to_it(midday_home: Path, tmp_path: Path) -> None:
    """The lock held by another process (as a running refresh holds it): the hook starts no second refresh but
    leaves its session as a request; the refresh started once the lock is free takes the request with it."""
    session_id, log = _retimed_claude(midday_home, datetime.now(timezone.utc) - timedelta(minutes=10))
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    with lock_held_elsewhere(state / "statusline.lock"):
        _statusline(midday_home, state, _hook(session_id, log))
        (request,) = state.glob("statusline.request.*.json")
        assert json.loads(request.read_bytes()) == {"session_id": session_id, "transcript": str(log)}
        assert not (state / "statusline.json").exists(), "no refresh ran beside the holder"
    # the lock free: another session's hook starts a refresh, which takes the request left for this one
    _statusline(midday_home, state, json.dumps({"session_id": "another", "model": {"id": "opus"}}).encode())

    def priced() -> bool:
        figures = (
            json.loads((state / "statusline.json").read_bytes())
            if (state / "statusline.json").exists()
            else {}
        )
        return session_id in figures.get("sessions", {})

    until(priced, 60, "the request priced by the next refresh")
    assert not list(state.glob("statusline.request.*.json")), "taken"


@pytest.mark.parametrize("pid", [4294967296, 99999999999999999999, -3, "ended, as text", True])
def test_a_damaged_status_or_lock_is_no_running_process(
    midday_home: Path, tmp_path: Path, pid: object
) -> None:
    """A pid no OS gives (a damaged ``status.json`` or lock file) is no process: the line says the daemon is not
    running and no refresh runs, never a traceback that blanks the line (``os.kill`` raises OverflowError). A pid
    written as text is that of a process that has ended (this test's own child, waited for): a small fixed one
    such as 12 is a kernel thread on some machines (CI's, on 2026-12-07)."""
    from copilot_otel._platform import _quick

    if pid == "ended, as text":
        child = subprocess.Popen([sys.executable, "-c", ""])
        child.wait()
        pid = str(child.pid)
    (midday_home / ".claude" / "projects").mkdir(parents=True)
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / "status.json").write_text(json.dumps({"pid": pid}))
    (state / "statusline.lock").write_text(f"\n{pid}\n")
    assert not _quick.recently_locked(state / "statusline.lock", 0)
    line = _statusline(midday_home, state, b"{}")
    assert line.endswith("otel not running"), line
