"""``status`` right after a start, with open prompts, and from another shell; ``service install`` run again
and a second service (``--name``).

Real daemon processes and the real receiver; ``systemctl`` is absent (the "print the commands" path), so the
unit files are written and read back as a user's machine would have them.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

from copilot_otel.cli import main
from tests.conftest import CLI_GENERATED
from tests.daemon_process import DaemonProcess
from tests.otlp_receiver import OtlpReceiver
from tests.waiting import until

SESSION = "5e55105e-0000-4000-8000-00000000open"
# The id the log's session.start gives (status names a session by it, not by its folder).
LOG_SESSION = "0a000002-0000-4000-8000-000000000002"


@pytest.fixture
def linux(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("COPILOT_OTEL_SERVICE_PLATFORM", "linux")
    monkeypatch.setenv("COPILOT_OTEL_SYSTEMCTL", str(tmp_path / "no" / "systemctl"))
    return Path(os.environ["HOME"]) / ".config" / "systemd" / "user"


def _environment(unit: Path) -> dict[str, str]:
    env = {}
    for line in unit.read_text().splitlines():
        if line.startswith('Environment="'):
            name, _, value = line[len('Environment="') : -1].partition("=")
            env[name] = value.replace('\\"', '"').replace("\\\\", "\\").replace("%%", "%")
    return env


def _open_prompt_session(root: Path) -> Path:
    """A session whose prompt is still going: its first lines, and the CLI's lock naming a live process."""
    folder = root / SESSION
    folder.mkdir(parents=True)
    lines = (CLI_GENERATED / "multi-tool" / "events.jsonl").read_text().splitlines(keepends=True)
    end = next(i for i, line in enumerate(lines) if '"type":"tool.execution_start"' in line)
    (folder / "events.jsonl").write_text("".join(lines[: end + 1]))
    (folder / f"inuse.{os.getpid()}.lock").write_text("")
    return folder


def test_status_says_starting_then_lists_the_open_prompts(
    tmp_path: Path, receiver: OtlpReceiver, capsys: pytest.CaptureFixture[str]
) -> None:
    root, state = tmp_path / "session-state", tmp_path / "state"
    _open_prompt_session(root)
    daemon = DaemonProcess(root, state, receiver.http_endpoint, tmp_path / "daemon.log").start()
    try:
        # Its first status comes 5 s after it logged that it follows the folder: right now there is none.
        assert main(["status", "--state-dir", str(state)]) == 0
        out = capsys.readouterr().out
        assert out.startswith(f"copilot-otel daemon starting (pid {daemon.proc.pid}"), out  # type: ignore[union-attr]
        assert "No copilot-otel daemon is running" not in out

        def listed() -> dict[str, Any] | None:
            path = state / "status.json"
            doc: dict[str, Any] = orjson.loads(path.read_bytes()) if path.exists() else {}
            return doc if doc.get("open_prompts") else None

        status = until(listed, 20, "open prompts in status.json", detail=lambda: daemon.output()[-2000:])
        assert main(["status", "--state-dir", str(state)]) == 0
        out = capsys.readouterr().out
    finally:
        assert daemon.terminate() == 0
    assert "copilot-otel daemon running" in out
    assert "open prompts" in out and LOG_SESSION in out, out
    row = status["open_prompts"][0]
    assert row["session_id"] == LOG_SESSION and row["turns"] == 1 and row["tool_calls"] >= 1


def test_service_install_again_keeps_the_endpoint_and_headers(
    linux: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "https://otlp.example.com:4318")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", 'authorization=Bearer top"secret%21')
    assert main(["service", "install", "--no-enable"]) == 0
    env_file = Path(os.environ["HOME"]) / ".config" / "copilot-otel" / "service.env"
    secrets = env_file.read_text()
    capsys.readouterr()
    # A new terminal without the variables: the service must not silently fall back to the local file.
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT")
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_HEADERS")
    assert main(["service", "install", "--no-enable"]) == 0
    out = capsys.readouterr().out
    assert _environment(linux / "copilot-otel.service") == {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "https://otlp.example.com:4318"
    }
    assert (
        env_file.read_text() == secrets and "EnvironmentFile=" in (linux / "copilot-otel.service").read_text()
    )
    assert (
        "Kept from the installed service (this shell sets no OTLP endpoint): OTEL_EXPORTER_OTLP_ENDPOINT, "
        in out
    )
    assert "top" not in out
    # A shell that names another endpoint wins, and drops the old headers with the old endpoint.
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318")
    assert main(["service", "install", "--no-enable"]) == 0
    assert _environment(linux / "copilot-otel.service") == {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://localhost:4318"
    }
    assert not env_file.exists()


def test_a_second_service_for_a_second_copilot_home_and_status_finds_it(
    linux: Path,
    tmp_path: Path,
    receiver: OtlpReceiver,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    home = Path(os.environ["HOME"])
    assert main(["service", "install", "--no-enable"]) == 0
    first = (linux / "copilot-otel.service").read_text()
    work_home = tmp_path / "work-copilot"
    shutil.copytree(CLI_GENERATED / "plain-question", work_home / "session-state" / "0a0b0c0d-plain")
    monkeypatch.setenv("COPILOT_HOME", str(work_home))
    assert main(["service", "install", "--no-enable", "--name", "work"]) == 0
    out = capsys.readouterr().out
    assert (linux / "copilot-otel.service").read_text() == first, "the first service is left alone"
    env = _environment(linux / "copilot-otel-work.service")
    default_state = home / ".local" / "state" / "copilot-otel"
    assert env == {
        "COPILOT_OTEL_SESSION_STATE": str(work_home / "session-state"),
        "COPILOT_OTEL_STATE_DIR": str(default_state / "work"),
    }
    assert "systemctl --user enable copilot-otel-work.service" in out
    assert main(["service", "install", "--name", "no/slash"]) == 2

    # The service runs (started here as its unit would), and `status` from a shell without its variables finds it.
    monkeypatch.delenv("COPILOT_HOME")
    out = _status_while_running(
        tmp_path,
        receiver,
        Path(env["COPILOT_OTEL_SESSION_STATE"]),
        Path(env["COPILOT_OTEL_STATE_DIR"]),
        capsys,
    )
    assert f"state in {default_state / 'work'}" in out, out


def _status_while_running(
    tmp_path: Path, receiver: OtlpReceiver, root: Path, state: Path, capsys: pytest.CaptureFixture[str]
) -> str:
    """``status`` with this shell's settings while a daemon (as the service would run it) uses ``state``."""
    daemon = DaemonProcess(root, state, receiver.http_endpoint, tmp_path / "daemon.log").start()
    try:
        assert main(["status"]) == 0
        return capsys.readouterr().out
    finally:
        assert daemon.terminate() == 0


def test_a_lock_left_behind_is_not_a_starting_daemon(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The lock file stays after a daemon exits; a live process that later got its pid is not it."""
    state = tmp_path / "state"
    state.mkdir()
    lock = state / "lock"
    lock.write_bytes(f"\n{os.getpid()}\n".encode())  # a live pid (this test) ...
    os.utime(lock, (1_000_000_000, 1_000_000_000))  # ... written long before that process started
    assert main(["status", "--state-dir", str(state)]) == 1
    assert "No copilot-otel daemon is running" in capsys.readouterr().out
    os.utime(lock)  # written now, by a process that exists: starting
    assert main(["status", "--state-dir", str(state)]) == 0
    assert "copilot-otel daemon starting" in capsys.readouterr().out


def test_status_finds_the_service_whose_unit_names_no_state_dir(
    linux: Path,
    tmp_path: Path,
    receiver: OtlpReceiver,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The service runs with HOME only: its state dir is HOME's default, not this shell's XDG_STATE_HOME one."""
    assert main(["service", "install", "--no-enable"]) == 0
    service_state = Path(os.environ["HOME"]) / ".local" / "state" / "copilot-otel"
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
    out = _status_while_running(tmp_path, receiver, tmp_path / "session-state", service_state, capsys)
    assert f"state in {service_state}" in out, out
