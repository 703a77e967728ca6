"""``service install`` keeps every secret out of the service's world-readable file (issue 32, point 9).

The unit (systemd), the plist (launchd) and the task's XML (Task Scheduler) are readable by every user of the
machine unless said otherwise; ``service install`` wrote the endpoint URL's password into the unit (mode 0644,
``Environment="OTEL_EXPORTER_OTLP_ENDPOINT=http://alice:…@…"``). Secrets are what the messages mask: the OTLP
headers, an endpoint (or any URL) with a user and password or a query string, and the webhook URL, whose path is
its credential. They go into the service's 0600 file only (systemd's ``EnvironmentFile=``, the Windows task's
settings file, or, launchd having no environment file, the plist made 0600), and the service still gets them.
"""

from __future__ import annotations

import json
import os
import plistlib
import stat
from pathlib import Path

import pytest

from copilot_otel.cli import main
from copilot_otel.commands.service import _TaskScheduler, is_secret
from copilot_otel.daemon.servicefiles import systemd_env_file, unit_environment
from copilot_otel.settings.config import load_config

PASSWORD = "PASSw0rdInUrl"
QUERY_TOKEN = "QueryT0ken"
HEADER_TOKEN = "HeaderT0kenValue"
HOOK_SECRET = "HookS3cretPath"
SECRETS = (PASSWORD, QUERY_TOKEN, HEADER_TOKEN, HOOK_SECRET)
ENDPOINT = f"http://alice:{PASSWORD}@collector.example:4318"
SECRET_ENV = {
    "OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT,
    "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": f"https://collector.example/v1/logs?token={QUERY_TOKEN}",
    "OTEL_EXPORTER_OTLP_HEADERS": f"authorization=Bearer%20{HEADER_TOKEN}",
    "COPILOT_OTEL_NOTIFY_WEBHOOK": f"https://hooks.example.invalid/services/{HOOK_SECRET}",
}
PUBLIC_ENV = {"OTEL_SERVICE_NAME": "copilot-otel-test", "COPILOT_OTEL_NOTIFY_WEBHOOK_FORMAT": "slack"}


@pytest.fixture
def secret_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    env = {**SECRET_ENV, **PUBLIC_ENV, "COPILOT_OTEL_STATE_DIR": str(tmp_path / "state")}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _leaks(text: str) -> list[str]:
    return [secret for secret in SECRETS if secret in text]


def test_what_is_a_secret() -> None:
    """What the messages mask is what the unit must not show; paths, names and plain URLs are settings."""
    for name, value in SECRET_ENV.items():
        assert is_secret(name, value), name
    assert is_secret("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"alice:{PASSWORD}@collector.example:4317")  # gRPC
    assert not is_secret("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector.example:4318")
    assert not is_secret("COPILOT_OTEL_STATE_DIR", "/home/alice@corp/state")
    for name, value in PUBLIC_ENV.items():
        assert not is_secret(name, value), name


def test_systemd_unit_holds_no_secret_and_the_service_still_gets_them(
    secret_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("COPILOT_OTEL_SERVICE_PLATFORM", "linux")
    monkeypatch.setenv("COPILOT_OTEL_SYSTEMCTL", str(tmp_path / "no" / "systemctl"))
    assert main(["service", "install", "--no-enable"]) == 0
    out = capsys.readouterr().out
    assert not _leaks(out), out
    home = Path(os.environ["HOME"])
    unit = home / ".config" / "systemd" / "user" / "copilot-otel.service"
    env_file = systemd_env_file(os.environ, "")
    assert _mode(unit) == 0o644 and _mode(env_file) == 0o600
    assert not _leaks(unit.read_text()), unit.read_text()
    assert sorted(_leaks(env_file.read_text())) == sorted(SECRETS)
    assert f"EnvironmentFile=-{env_file}" in unit.read_text()
    # The unit and its file together give the service every variable, each value intact.
    assert unit_environment(unit, env_file) == secret_env
    for name in PUBLIC_ENV:
        assert f'Environment="{name}=' in unit.read_text()


def test_systemd_reinstall_keeps_the_endpoint_password_in_the_private_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Installed with ``--endpoint`` (a flag, not a variable), then installed again from a shell that sets no
    endpoint: the endpoint kept from the installed service stays a secret."""
    monkeypatch.setenv("COPILOT_OTEL_SERVICE_PLATFORM", "linux")
    monkeypatch.setenv("COPILOT_OTEL_SYSTEMCTL", str(tmp_path / "no" / "systemctl"))
    state = str(tmp_path / "state")
    unit = Path(os.environ["HOME"]) / ".config" / "systemd" / "user" / "copilot-otel.service"
    env_file = systemd_env_file(os.environ, "")
    for argv in (["--endpoint", ENDPOINT], []):
        assert main(["service", "install", "--no-enable", "--state-dir", state, *argv]) == 0
        assert PASSWORD not in unit.read_text() and PASSWORD in env_file.read_text()
        assert unit_environment(unit, env_file)["OTEL_EXPORTER_OTLP_ENDPOINT"] == ENDPOINT
    assert "Kept from the installed service" in capsys.readouterr().out


def test_launchd_plist_with_a_secret_is_private(
    secret_env: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """launchd reads no environment file: the plist carrying the endpoint's password is 0600, one without any
    secret stays 0644."""
    monkeypatch.setenv("COPILOT_OTEL_SERVICE_PLATFORM", "darwin")
    plist = Path(os.environ["HOME"]) / "Library" / "LaunchAgents" / "io.github.copilot-otel.plist"
    for name in SECRET_ENV:
        monkeypatch.delenv(name)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", ENDPOINT)
    assert main(["service", "install", "--no-enable"]) == 0
    assert _mode(plist) == 0o600, "the endpoint's password is readable by every user"
    assert (
        plistlib.loads(plist.read_bytes())["EnvironmentVariables"]["OTEL_EXPORTER_OTLP_ENDPOINT"] == ENDPOINT
    )
    assert "mode 0600: it holds secrets" in capsys.readouterr().out
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector.example:4318")
    assert main(["service", "install", "--no-enable"]) == 0
    assert _mode(plist) == 0o644


def test_windows_task_names_no_secret(
    secret_env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The task's XML names the launcher and its settings file; the secrets are only in that file."""
    manager = _TaskScheduler(load_config({"state_dir": tmp_path / "state"}), os.environ)
    assert manager.install(enable=False) == 0
    assert not _leaks(capsys.readouterr().out)
    assert not _leaks(manager.xml_file.read_bytes().decode("utf-16"))
    assert _mode(manager.env_file) == 0o600
    assert json.loads(manager.env_file.read_text(encoding="utf-8")) == secret_env
