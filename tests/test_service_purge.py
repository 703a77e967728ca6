"""``service uninstall --purge``: the service, then copilot-otel's state and config folders, named first.

On the test's own HOME (conftest): the state is made by a real ``replay`` (checkpoints, the embedded default's
``otlp.jsonl``); ``systemctl`` is absent (the "print the commands" path), as in a container.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from copilot_otel._platform import current
from copilot_otel.cli import main
from tests.conftest import CLI_GENERATED


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("COPILOT_OTEL_SERVICE_PLATFORM", "linux")
    monkeypatch.setenv("COPILOT_OTEL_SYSTEMCTL", str(tmp_path / "no" / "systemctl"))
    return Path(os.environ["HOME"])


def _replay() -> None:
    assert main(["replay", "--no-progress", str(CLI_GENERATED / "multi-tool" / "events.jsonl")]) == 0


def test_purge_lists_then_removes_the_state_and_config_folders(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = home / ".local" / "state" / "copilot-otel"
    config = home / ".config" / "copilot-otel"
    unit = home / ".config" / "systemd" / "user" / "copilot-otel.service"
    config.mkdir(parents=True)
    (config / "config.toml").write_text('session_state = "~/.copilot/session-state"\n')
    _replay()
    assert (state / "otlp.jsonl").is_file()
    assert main(["service", "install"]) == 0
    capsys.readouterr()

    assert main(["service", "uninstall", "--purge"]) == 0
    out = capsys.readouterr().out
    assert f"Removed {unit}" in out
    listed = out.index("Removing (--purge):")
    assert out.index(f"  {state}  (state: ") > listed and out.index(f"  {config}  (config: ") > listed
    assert out.index(f"Removed {state}") > out.index(f"  {config}  (config: "), "every path is named first"
    assert not state.exists() and not config.exists() and not unit.exists()
    assert home.is_dir() and (home / ".config" / "systemd").is_dir(), "only copilot-otel's own folders go"

    assert main(["service", "uninstall", "--purge"]) == 0
    assert "Nothing else to remove" in capsys.readouterr().out


def test_purge_refuses_a_state_dir_that_is_not_copilot_otels(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = home / "Documents"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work\n")
    monkeypatch.setenv("COPILOT_OTEL_STATE_DIR", str(mine))
    _replay()
    capsys.readouterr()
    assert main(["service", "uninstall", "--purge"]) == 4
    out = capsys.readouterr().out
    assert f"  {mine}  (NOT removed: not copilot-otel's own folder: it holds thesis.tex, which" in out
    assert (mine / "thesis.tex").read_text() == "years of work\n" and (mine / "otlp.jsonl").is_file()


def test_purge_removes_a_state_dir_of_its_own_set_elsewhere(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    state = home / "telemetry-state"
    monkeypatch.setenv("COPILOT_OTEL_STATE_DIR", str(state))
    _replay()
    assert sorted(p.name for p in state.iterdir()) == [".otlp.jsonl.lock", "otlp.jsonl"]
    capsys.readouterr()
    assert main(["service", "uninstall", "--purge"]) == 0
    assert f"  {state}  (state: " in capsys.readouterr().out
    assert not state.exists()


def test_purge_leaves_a_state_dir_a_running_daemon_holds(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _replay()
    state = home / ".local" / "state" / "copilot-otel"
    held = current.lock_exclusive(
        state / "lock"
    )  # what a running daemon holds (the service manager was not reached)
    try:
        assert main(["service", "uninstall", "--purge"]) == 4
    finally:
        held.release()
    out = capsys.readouterr().out
    assert f"(NOT removed: a copilot-otel daemon (pid {os.getpid()}) still runs with it" in out
    assert (state / "otlp.jsonl").is_file()


def test_purge_goes_with_uninstall_only(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["service", "install", "--purge"]) == 2
    assert "--purge goes with 'service uninstall'" in capsys.readouterr().err
