"""``copilot-otel live``: what is burning now, over real CLI sessions re-timed to today.

The sessions are the real CLI's (``tests/fixtures/cli-generated``), every timestamp shifted by the same amount
so that they happened minutes ago (``report`` and the view cut by the events' own times); a "live" log is one
written in two steps, its first lines then the rest, as the CLI appends them. The view's figures are checked
against ``report``'s over the same logs, its refresh against what it re-reads, and the command in a real
terminal (tmux): it redraws in place (one screen, no scrolled copies), follows a resize, and exits 0 on q and
on Ctrl-C with one line.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import pytest

from copilot_otel.cli import main
from copilot_otel.commands.live import BurnWatch, burn_json
from copilot_otel.commands.report import build_report, report_sessions
from tests.conftest import CLI_GENERATED
from tests.waiting import until

_ISO = re.compile(rb"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})")
# 2026-12-02T10:00:00Z: "now" of the in-process tests (the clock is injected).
NOW_NS = 1_796_205_600 * 10**9
MINUTE_NS = 60 * 10**9
# The capi-* captures bill one premium request per prompt (the user's call; the agent's follow-ups cost none).
SESSIONS = ("capi-multi-tool", "capi-failing-tool", "multi-tool")
needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


def _parse(text: bytes) -> datetime:
    return datetime.fromisoformat(text.decode().replace("Z", "+00:00"))


def _folder(root: Path, fixture: str) -> Path:
    """Where the CLI keeps the fixture's session: ``<session-state>/<session id>/``."""
    first = (CLI_GENERATED / fixture / "events.jsonl").read_bytes().split(b"\n", 1)[0]
    return root / str(json.loads(first)["data"]["sessionId"])


def _retime(fixture: str, end_ns: int) -> list[bytes]:
    """The fixture's log lines with every timestamp shifted by the same amount, so its last event is at
    ``end_ns``."""
    blob = (CLI_GENERATED / fixture / "events.jsonl").read_bytes()
    last = max(_parse(m.group()) for m in _ISO.finditer(blob))
    shift = datetime.fromtimestamp(end_ns / 1e9, timezone.utc) - last

    def moved(match: re.Match[bytes]) -> bytes:
        when = (_parse(match.group()) + shift).astimezone(timezone.utc)
        return when.isoformat(timespec="milliseconds").replace("+00:00", "Z").encode()

    return _ISO.sub(moved, blob).splitlines(keepends=True)


def _retimed(fixture: str, root: Path, end_ns: int) -> list[bytes]:
    """The fixture's folder (without the capture) copied under ``root`` with an empty log, and its log's lines
    re-timed (:func:`_retime`) to be written there."""
    folder = _folder(root, fixture)
    shutil.copytree(CLI_GENERATED / fixture, folder, ignore=shutil.ignore_patterns("_capture", "inuse.*"))
    (folder / "events.jsonl").write_bytes(b"")
    return _retime(fixture, end_ns)


def _write(root: Path, fixture: str, lines: list[bytes], mtime_ns: int | None = None) -> Path:
    log = _folder(root, fixture) / "events.jsonl"
    with log.open("ab") as out:
        out.write(b"".join(lines))
    if mtime_ns is not None:
        os.utime(log, ns=(mtime_ns, mtime_ns))
    return log


def _history(root: Path, now_ns: int = NOW_NS, step_ns: int = MINUTE_NS) -> dict[str, list[bytes]]:
    """The three sessions, finished ``10``, ``9`` and ``8`` steps before ``now_ns``, their logs written then."""
    root.mkdir(parents=True, exist_ok=True)
    out = {}
    for index, fixture in enumerate(SESSIONS):
        end = now_ns - (10 - index) * step_ns
        out[fixture] = _retimed(fixture, root, end)
        _write(root, fixture, out[fixture], end)
    return out


# ================================================================================== the library
def test_the_figures_are_reports_over_the_same_logs(tmp_path: Path) -> None:
    root = tmp_path / "session-state"
    _history(root)
    burn = BurnWatch(root, quota=300).refresh(NOW_NS)
    day = build_report(
        report_sessions([root]), "daily", zone=timezone.utc, now_ns=NOW_NS, quota=300
    )  # the report's row for today, and its quota figure
    (row,) = day.rows
    assert row.key == burn.day == "2026-12-02"
    for name in ("sessions", "prompts", "turns", "tool_calls", "failed_tool_calls", "input_tokens"):
        assert burn.today.value(name, 0.04) == row.value(name, 0.04) > 0, name
    assert burn.premium_used == day.quota_used == 2.0  # capi-multi-tool and capi-failing-tool, one each
    document = burn_json(burn, timezone.utc)
    assert document["quota"] == {"month": "2026-12", "allowance": 300, "used": 2.0, "left": 298.0}
    assert [s["session_id"] for s in document["sessions"]] == [
        "0a000002-0000-4000-8000-000000000002",  # multi-tool, the most recent
        "0c000003-0000-4000-8000-000000000003",  # capi-failing-tool
        "0c000002-0000-4000-8000-000000000002",  # capi-multi-tool
    ]
    assert document["today"]["tool_calls"] == row.value("tool_calls", 0.04)
    assert document["logs"] == {"known": 3, "read": 3, "skipped": []}


def test_a_refresh_rereads_only_the_logs_that_changed(tmp_path: Path) -> None:
    root = tmp_path / "session-state"
    lines = _history(root)
    live = _retimed("capi-subagent", root, NOW_NS)
    _write(root, "capi-subagent", live[:12], NOW_NS - MINUTE_NS)
    # Last month's session: its log was last written before the window, so it is never read.
    old = _retimed("subagent", root, NOW_NS - 40 * 24 * 60 * MINUTE_NS)
    _write(root, "subagent", old, NOW_NS - 40 * 24 * 60 * MINUTE_NS)
    watch = BurnWatch(root)
    first = watch.refresh(NOW_NS)
    assert (first.logs_known, first.logs_read) == (5, 4)
    again = watch.refresh(NOW_NS + 10**9)
    assert again.logs_read == 0, "nothing changed: nothing is read"
    assert again.today.value("turns", 0) == first.today.value("turns", 0)
    _write(root, "capi-subagent", live[12:])
    grown = watch.refresh(NOW_NS + 2 * 10**9)
    assert grown.logs_read == 1, "only the log that grew"
    assert grown.today.value("turns", 0) > first.today.value("turns", 0)
    assert grown.today.value("tool_calls", 0) > first.today.value("tool_calls", 0)
    # the prompt's own call was in its first lines; its sub-agent's calls are not the user's: no premium more
    assert grown.premium_used == first.premium_used == 3.0
    # What the refreshes add up to is what one read of the whole history gives.
    fresh = BurnWatch(root).refresh(NOW_NS + 2 * 10**9)
    assert fresh.today.figures == grown.today.figures and fresh.premium_used == grown.premium_used
    assert len(lines) == 3


def test_a_resumed_old_session_shows_at_the_sweep_and_a_new_one_at_once(tmp_path: Path) -> None:
    root = tmp_path / "session-state"
    _history(root)
    old = _retimed("subagent", root, NOW_NS - 40 * 24 * 60 * MINUTE_NS)
    log = _write(root, "subagent", old, NOW_NS - 40 * 24 * 60 * MINUTE_NS)
    watch = BurnWatch(root)
    assert watch.refresh(NOW_NS).logs_read == 3
    listed = os.stat(root).st_mtime_ns
    # The old session is resumed: its log now holds today's events (written now).
    log.write_bytes(b"".join(_retime("subagent", NOW_NS)))
    soon = watch.refresh(NOW_NS + 10**9)
    assert soon.logs_read == 0 and soon.today.value("sessions", 0) == 3, "a cold log waits for the sweep"
    swept = watch.refresh(NOW_NS + int(31e9))
    assert swept.logs_read == 1 and swept.today.value("sessions", 0) == 4
    # A new session folder changes the folder's mtime: it is listed and read at the next refresh.
    new = _retimed("capi-subagent", root, NOW_NS + int(32e9))
    _write(root, "capi-subagent", new)
    if os.stat(root).st_mtime_ns == listed:  # a coarse file-system clock: what its next tick would do
        os.utime(root, ns=(listed + 1, listed + 1))
    at_once = watch.refresh(NOW_NS + int(33e9))
    assert at_once.logs_read == 1 and at_once.today.value("sessions", 0) == 5


def test_the_running_session_shows_its_open_prompt(tmp_path: Path) -> None:
    root = tmp_path / "session-state"
    _history(root)
    folder = _folder(root, "capi-multi-tool")
    shutil.rmtree(folder)
    live = _retimed("capi-multi-tool", root, NOW_NS)
    # The prompt is open after the second turn's tool calls (line 18 of 30); this process holds the session, as
    # the CLI holds its own with an inuse.<pid>.lock.
    _write(root, "capi-multi-tool", live[:18])
    (folder / f"inuse.{os.getpid()}.lock").write_text(str(os.getpid()))
    watch = BurnWatch(root)
    burn = watch.refresh(NOW_NS)
    (running,) = burn.running
    assert running.session_id == "0c000002-0000-4000-8000-000000000002"
    assert burn.sessions[0] is running, "the running session comes first"
    assert running.prompt is not None and running.prompt.outcome == "incomplete"
    assert running.prompt_figures is not None
    assert running.prompt_figures.value("turns", 0) == 2
    assert running.prompt_figures.value("tool_calls", 0) == 4
    assert running.prompt_figures.value("premium_requests", 0) == 1.0
    _write(root, "capi-multi-tool", live[18:25])
    later = watch.refresh(NOW_NS + 10**9)
    (running,) = later.running
    assert running.prompt_figures is not None and running.prompt_figures.value("tool_calls", 0) == 5
    _write(root, "capi-multi-tool", live[25:])
    (folder / f"inuse.{os.getpid()}.lock").unlink()
    done = watch.refresh(NOW_NS + 2 * 10**9)
    assert not done.running
    assert done.sessions[0].prompt is not None and done.sessions[0].prompt.outcome == "completed"


@pytest.mark.parametrize("fixture", ["capi-multi-tool", "capi-subagent", "resumed", "failing-tool"])
def test_a_running_log_read_as_it_grows_adds_up_as_read_whole(tmp_path: Path, fixture: str) -> None:
    """A log a CLI holds is followed (only what was appended is read); after every line the CLI appends, and
    with a line half written, its figures are ``report``'s over the whole log as it is."""
    root = tmp_path / "session-state"
    root.mkdir()
    lines = _retimed(fixture, root, NOW_NS)
    (_folder(root, fixture) / f"inuse.{os.getpid()}.lock").write_text(str(os.getpid()))
    watch = BurnWatch(root, zone=timezone.utc)
    log = _folder(root, fixture) / "events.jsonl"
    for number, line in enumerate(lines, 1):
        half = len(line) // 2
        for piece in (line[:half], line[half:]):
            _write(root, fixture, [piece])
            now = NOW_NS + number * 10**9
            burn = watch.refresh(now)
            whole = list(report_sessions([root]))
            day = build_report(whole, "daily", zone=timezone.utc, now_ns=now, quota=300)
            assert burn.premium_used == day.quota_used
            today = [row for row in day.rows if row.key == burn.day]
            if not today:  # nothing dated yet (a log of one session.start): no row of today
                assert not burn.sessions and not burn.today.figures
                continue
            (row,) = today
            assert burn.today.figures == row.figures, (number, piece)
            (session,) = burn.sessions
            assert session.total.figures == day.totals.figures
            assert session.prompt == max(whole[0].prompts, key=lambda p: p.start_ns, default=None)
    assert watch._logs[log].follow is not None, "the log was followed, not read whole each time"


def test_a_new_day_reads_the_window_again(tmp_path: Path) -> None:
    root = tmp_path / "session-state"
    _history(root)
    watch = BurnWatch(root, zone=timezone.utc)
    assert watch.refresh(NOW_NS).today.value("sessions", 0) == 3
    tomorrow = watch.refresh(NOW_NS + 24 * 60 * MINUTE_NS)
    assert tomorrow.day == "2026-12-03" and tomorrow.logs_read == 3
    assert tomorrow.today.value("sessions", 0) == 0 and not tomorrow.sessions
    assert tomorrow.premium_used == 2.0, "the month still counts them"
    next_month = watch.refresh(NOW_NS + 31 * 24 * 60 * MINUTE_NS)
    assert next_month.month == "2027-01" and next_month.premium_used == 0
    assert next_month.logs_read == 0, "written last month: not read"


def test_an_unreadable_log_is_left_out_and_named(tmp_path: Path) -> None:
    root = tmp_path / "session-state"
    _history(root)
    log = _folder(root, "multi-tool") / "events.jsonl"
    log.unlink()
    log.mkdir()  # no longer a file: it cannot be read
    burn = BurnWatch(root).refresh(NOW_NS)
    assert burn.today.value("sessions", 0) == 2
    assert burn.logs_known == 2  # the listing only names the logs it can read
    locked = _folder(root, "capi-multi-tool") / "events.jsonl"
    locked.chmod(0)
    if os.access(locked, os.R_OK):
        return  # root reads everything: nothing more to see here
    burn = BurnWatch(root).refresh(NOW_NS)
    assert len(burn.skipped) == 1 and str(locked) in burn.skipped[0]


# ================================================================================== the command
@pytest.fixture
def home(midday_home: Path) -> Path:
    return midday_home


def _now_history(home: Path) -> tuple[Path, dict[str, list[bytes]]]:
    """The three sessions minutes ago, in today's local day (``midday_home``) and in this UTC month (the quota's).

    In the first minutes of a UTC month the steps shrink so the sessions (each under a second long) still start
    in it; in its first seconds the test waits until they fit."""
    root = home / ".copilot" / "session-state"
    until(lambda: _since_month_start() > 30 * 10**9, 40, "a UTC month old enough to hold three sessions")
    step = min(MINUTE_NS, (_since_month_start() - 5 * 10**9) // 10)
    return root, _history(root, time.time_ns(), step)


def _since_month_start() -> int:
    now = datetime.now(timezone.utc)
    return (
        time.time_ns()
        - int(now.replace(day=1, hour=0, minute=0, second=0, microsecond=0).timestamp()) * 10**9
    )


def test_json_once_is_one_object(home: Path, capfd: pytest.CaptureFixture[str]) -> None:
    _now_history(home)
    assert main(["live", "--json", "--once", "--quota", "300"]) == 0
    out, err = capfd.readouterr()
    (line,) = out.splitlines()
    document = json.loads(line)
    assert document["quota"]["allowance"] == 300 and document["quota"]["used"] == 2.0
    assert document["today"]["sessions"] == 3 and len(document["sessions"]) == 3
    assert document["daemon"]["running"] is False
    assert err == ""


def test_it_shows_what_a_running_daemon_says(home: Path, tmp_path: Path) -> None:
    """The real daemon (embedded file output, nothing sent anywhere) writes its status; the view reads it."""
    root, _ = _now_history(home)
    state = tmp_path / "state"
    env = {**_env(home), "COPILOT_OTEL_METRICS": "false"}
    daemon = subprocess.Popen(
        [*_console_script(), "run", "--state-dir", str(state), "--session-state", str(root)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        until(
            lambda: (state / "status.json").exists() or daemon.poll() is not None, 60, "the daemon's status"
        )
        assert daemon.poll() is None, "the daemon exited"
        argv = [*_console_script(), "live", "--json", "--once", "--state-dir", str(state)]
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=True)
        seen = json.loads(done.stdout)["daemon"]
        assert seen["running"] is True and seen["pid"] == daemon.pid and seen["problem"] == ""
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
    gone = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(gone.stdout)["daemon"]["running"] is False


def _console_script() -> list[str]:
    script = Path(sys.executable).parent / "copilot-otel"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "copilot_otel"]


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "HOME": str(home), "COLUMNS": "100"}


def test_off_a_terminal_it_prints_one_snapshot(home: Path) -> None:
    _now_history(home)
    done = subprocess.run(
        [*_console_script(), "live", "--quota", "300"],
        env=_env(home),
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("copilot-otel live") == 1
    assert "\x1b" not in done.stdout, "no cursor movement, no colour in a pipe"
    assert "Premium requests in " in done.stdout and "2.00 of 300" in done.stdout
    assert "Today (" in done.stdout and "3 sessions" in done.stdout
    assert "q to quit" not in done.stdout


def test_a_folder_name_from_a_log_cannot_drive_the_terminal(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = home / ".copilot" / "session-state"
    root.mkdir(parents=True)
    lines = _retimed("multi-tool", root, time.time_ns())
    lines = [line.replace(b"/projects/multi-tool", b"/x\\u001b]0;pwned\\u0007\\u001b[2J") for line in lines]
    _write(root, "multi-tool", lines)
    assert main(["live", "--once"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "pwned␇␛[2J" in out  # shown, not obeyed


def test_json_lines_follow_a_growing_log(home: Path) -> None:
    root, _ = _now_history(home)
    live = _retimed("capi-subagent", root, time.time_ns())
    _write(root, "capi-subagent", live[:12])
    proc = subprocess.Popen(
        [*_console_script(), "live", "--json", "--interval", "0.2"],
        env=_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    try:
        assert proc.stdout is not None
        first = json.loads(proc.stdout.readline())
        _write(root, "capi-subagent", live[12:])
        deadline = time.monotonic() + 60
        while True:
            line = json.loads(proc.stdout.readline())
            if line["today"]["turns"] > first["today"]["turns"]:
                break
            assert time.monotonic() < deadline, "the view never showed the new turns"
        assert line["logs"]["read"] == 1 and line["today"]["sessions"] == 4
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_bad_arguments_are_one_line(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["live", "--once"]) == 3  # no session-state folder yet
    err = capsys.readouterr().err
    assert err.startswith("copilot-otel: error: no Copilot CLI sessions:") and err.count("\n") == 1
    _now_history(home)
    assert main(["live", "--interval", "0"]) == 2
    assert capsys.readouterr().err == (
        "copilot-otel: error: Expected --interval to be a number of seconds > 0, got 0.0\n"
    )


def test_without_a_terminal_no_key_is_read() -> None:
    import io

    from copilot_otel._platform import single_keys

    with single_keys(io.StringIO("q")) as wait:
        assert wait(0) == "", "a pipe's q is no key press"


def test_live_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["live", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "copilot-otel live" in out and "--quota" in out and "--json" in out


# ================================================================================== a real terminal
_EXITED = re.compile(r"copilot-otel exited with status (\d+)")
_TODAY = re.compile(r"Today \(\S+\): (\d+) sessions?, (\d+) prompts?, (\d+) turns?, (\d+) tool calls?")


class _Pane:
    """A detached tmux session running one command (the shell around it prints its exit status: tmux 3.3a
    does not always reap a child that exits right away, see tests/test_ctrl_c.py)."""

    def __init__(self, tmp_path: Path, home: Path, argv: list[str], width: int, height: int) -> None:
        conf = tmp_path / "tmux.conf"
        conf.write_text("set -g remain-on-exit on\nset -g status off\n")
        self.base = ["tmux", "-L", f"copilot-otel-live-{os.getpid()}-{tmp_path.name}", "-f", str(conf)]
        script = 'trap : INT; "$@"; echo "copilot-otel exited with status $?"; sleep 30'
        command = ["sh", "-c", script, "sh", *argv]
        env = [
            "-e",
            f"HOME={home}",
            "-e",
            f"TZ={os.environ.get('TZ', 'UTC')}",
            "-e",
            "COLUMNS=",
            "-e",
            "LINES=",
        ]
        shell = " ".join("'" + p.replace("'", "'\\''") + "'" for p in command)
        subprocess.run(
            [*self.base, "new-session", "-d", "-x", str(width), "-y", str(height), *env, shell],
            check=True,
            timeout=30,
        )

    def tmux(self, *args: str) -> str:
        return subprocess.run(
            [*self.base, *args], capture_output=True, text=True, check=True, timeout=30
        ).stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-J")  # -J: a line the terminal wrapped is one line

    def history(self) -> str:
        return self.tmux("capture-pane", "-p", "-S", "-")

    def wait_for(self, predicate: Callable[[str], object], what: str, timeout_s: float = 60) -> str:
        """The screen once ``predicate`` holds for it; fails naming ``what`` and showing the last screen."""

        def shown() -> str | None:
            screen = self.screen()
            return screen if predicate(screen) else None

        return until(shown, timeout_s, what, detail=self.screen, poll_s=0.1)

    def close(self) -> None:
        subprocess.run([*self.base, "kill-server"], capture_output=True, timeout=30)


def _today(screen: str) -> tuple[int, ...] | None:
    match = _TODAY.search(screen)
    return tuple(int(g) for g in match.groups()) if match else None


@needs_tmux
@pytest.mark.parametrize("key", ["q", "C-c"])
def test_in_a_terminal_it_redraws_in_place_and_quits_cleanly(home: Path, tmp_path: Path, key: str) -> None:
    root, _ = _now_history(home)
    live = _retimed("capi-subagent", root, time.time_ns())
    _write(root, "capi-subagent", live[:12])
    argv = [*_console_script(), "live", "--interval", "0.3", "--quota", "300"]
    pane = _Pane(tmp_path, home, argv, width=100, height=40)
    try:
        before = pane.wait_for(_today, "today's figures")
        counts = _today(before)
        assert counts is not None and counts[0] == 4  # four sessions today
        assert "Running now" not in before  # no CLI holds these sessions
        _write(root, "capi-subagent", live[12:])
        after = pane.wait_for(lambda s: (_today(s) or counts) > counts, "an update")
        grown = _today(after)
        assert grown is not None and grown[2] > counts[2] and grown[3] > counts[3]  # turns, tool calls
        for screen in (after, pane.history()):
            # one screen, redrawn in place: nothing scrolled, no second copy of any part of it
            assert screen.count("copilot-otel live") == 1, screen
            assert screen.count("Premium requests in ") == 1 and screen.count("Today (") == 1, screen
        assert "3.00 of 300" in after and "q to quit" in after
        # docs/reports-and-live.md's capture is this screen (the same sessions at 100 columns): the same heading.
        docs = Path(__file__).resolve().parent.parent / "docs" / "reports-and-live.md"
        capture = (
            docs.read_text(encoding="utf-8")
            .split("$ copilot-otel live --quota 300\n", 1)[1]
            .split("```", 1)[0]
        )
        heading = next(line for line in capture.splitlines() if line.startswith("session "))
        assert heading in [line.rstrip() for line in after.splitlines()], after
        pane.tmux("resize-window", "-x", "64")
        narrow = pane.wait_for(
            lambda s: max(len(line) for line in s.splitlines()) <= 64 and "copilot-otel live" in s,
            "the view to follow the resize",
        )
        assert narrow.count("Today (") == 1
        pane.tmux("send-keys", key)
        closed = pane.wait_for(_EXITED.search, "the view's exit")
    finally:
        pane.close()
    match = _EXITED.search(closed)
    assert match is not None and match.group(1) == "0", closed
    assert "Traceback" not in closed and "KeyboardInterrupt" not in closed
    lines = [line for line in closed.splitlines() if line.strip()]
    # the terminal's own screen is back: one line from the view, then the shell's
    assert lines[-2].startswith("copilot-otel: live view closed; premium requests in ")
    assert lines[-2].endswith(": 3.00 of 300"), lines
    assert "Today (" not in closed


@needs_tmux
def test_in_a_terminal_a_folder_name_is_shown_not_obeyed(home: Path, tmp_path: Path) -> None:
    root = home / ".copilot" / "session-state"
    root.mkdir(parents=True)
    lines = _retimed("multi-tool", root, time.time_ns())
    lines = [line.replace(b"/projects/multi-tool", b"/x\\u001b]2;pwned\\u0007\\u001b[2J") for line in lines]
    _write(root, "multi-tool", lines)
    pane = _Pane(tmp_path, home, [*_console_script(), "live", "--interval", "0.3"], width=120, height=30)
    try:
        screen = pane.wait_for(lambda s: "pwned" in s, "the session")
        title = pane.tmux("display-message", "-p", "#{pane_title}")
    finally:
        pane.close()
    assert "x␛]2;pwned" in screen and "␛[2J" in screen
    assert "pwned" not in title
    assert screen.count("copilot-otel live") == 1


@pytest.mark.parametrize(
    ("backlog", "said"), [(1, "backlog 1 span"), (0, "backlog 0 spans"), (2048, "2,048 spans")]
)
def test_the_daemon_line_says_its_backlog_in_good_english(backlog: int, said: str) -> None:
    from copilot_otel.commands.live import DaemonState, _daemon_line

    line = _daemon_line(DaemonState(True, pid=4242, open_prompts=1, backlog_spans=backlog)).plain
    assert said in line and "1 open prompt," in line, line  # on main: "backlog 1 spans"
