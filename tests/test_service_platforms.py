"""``copilot-otel service`` beyond systemd: the Windows Task Scheduler task and launchd's SSH fallback.

The task definition is validated against the Task Scheduler schema types it uses
(``tests/fixtures/task-scheduler/task-subset.xsd``); ``schtasks`` and ``launchctl`` are stand-in shell scripts
at the process edge that record their arguments, as the systemctl tests in test_cli_commands do.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest
import xmlschema

from copilot_otel.cli import main
from copilot_otel.commands.service import TASK_NAME, _TaskScheduler, task_xml
from copilot_otel.settings.config import load_config
from tests.conftest import FIXTURES
from tests.otlp_receiver import OtlpReceiver
from tests.waiting import until

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = xmlschema.XMLSchema(FIXTURES / "task-scheduler" / "task-subset.xsd")


def _stand_in(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, env_var: str, cases: str) -> Path:
    """A shell script named by ``env_var`` that logs its arguments and answers per ``cases`` (a sh case body)."""
    log = tmp_path / f"{env_var}.log"
    script = tmp_path / env_var.lower()
    script.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\ncase "$*" in\n{cases}\nesac\nexit 0\n')
    script.chmod(0o755)
    monkeypatch.setenv(env_var, str(script))
    return log


def _parsed(xml: str) -> dict[str, Any]:
    return cast(dict[str, Any], SCHEMA.to_dict(xml.replace('encoding="UTF-16"', 'encoding="UTF-8"')))


def test_task_definition_is_valid_for_task_scheduler() -> None:
    xml = task_xml(
        r"C:\Python313\pythonw.exe",
        [
            "-m",
            "copilot_otel._platform._launch",
            r"C:\Users\Dev Name\AppData\Roaming\copilot-otel\service-env.json",
        ],
        r"C:\Users\Dev Name\AppData\Local\copilot-otel",
        r"LAPTOP\Dev Name & Co",
    )
    SCHEMA.validate(xml.replace('encoding="UTF-16"', 'encoding="UTF-8"'))  # the text; the file is UTF-16
    doc = _parsed(xml)
    assert doc["Triggers"]["LogonTrigger"][0]["UserId"] == r"LAPTOP\Dev Name & Co"
    assert doc["Settings"]["RestartOnFailure"] == {"Interval": "PT1M", "Count": 255}
    assert doc["Settings"]["ExecutionTimeLimit"] == "PT0S"  # no time limit: it is a daemon
    exec_ = doc["Actions"]["Exec"][0]
    # One Windows command line; the path with a space is quoted.
    assert exec_["Arguments"] == (
        r'-m copilot_otel._platform._launch "C:\Users\Dev Name\AppData\Roaming\copilot-otel\service-env.json"'
    )
    # The schema is enforced: a restart count of 0 is not a task Task Scheduler accepts.
    with pytest.raises(xmlschema.XMLSchemaValidationError):
        SCHEMA.validate(xml.replace("<Count>255</Count>", "<Count>0</Count>").replace("UTF-16", "UTF-8"))


def test_task_scheduler_lifecycle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls = _stand_in(
        monkeypatch,
        tmp_path,
        "COPILOT_OTEL_SCHTASKS",
        '/Query*) printf "Status: Running\\nLast Result: 0\\n";;',
    )
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector.example:4318")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer topsecret")
    monkeypatch.setenv("USERDOMAIN", "LAPTOP")
    monkeypatch.setenv("USERNAME", "dev")
    manager = _TaskScheduler(load_config({"state_dir": tmp_path / "state"}), os.environ)
    assert manager.install(enable=True) == 0
    out = capsys.readouterr().out
    assert "topsecret" not in out and f"Registered and started the scheduled task {TASK_NAME}" in out
    assert calls.read_text().splitlines() == [
        f"/Create /TN {TASK_NAME} /XML {manager.xml_file} /F",
        f"/Run /TN {TASK_NAME}",
    ]
    raw = manager.xml_file.read_bytes()
    assert raw.startswith(b"\xff\xfe")  # UTF-16 with its byte-order mark, as schtasks /XML reads it
    doc = _parsed(raw.decode("utf-16"))
    assert doc["Principals"]["Principal"]["UserId"] == "LAPTOP\\dev"
    assert doc["Actions"]["Exec"][0]["Arguments"].endswith(f"{manager.env_file} {manager.log_file}")
    assert json.loads(manager.env_file.read_text(encoding="utf-8")) == {
        "COPILOT_OTEL_STATE_DIR": str(tmp_path / "state"),
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector.example:4318",
        "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer topsecret",
    }

    assert manager.status() == 0
    out = capsys.readouterr().out
    assert "Status: Running" in out and "Last Result: 0" in out

    calls.unlink()
    assert manager.uninstall() == 0
    assert calls.read_text().splitlines() == [f"/End /TN {TASK_NAME}", f"/Delete /TN {TASK_NAME} /F"]
    assert not manager.xml_file.exists() and not manager.env_file.exists()


def test_the_task_launcher_runs_the_daemon_with_the_saved_settings(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    """What the scheduled task starts: the settings file becomes the environment, the log goes to a file."""
    settings = tmp_path / "service-env.json"
    state = tmp_path / "state from settings"
    settings.write_text(
        json.dumps(
            {
                "COPILOT_OTEL_STATE_DIR": str(state),
                "COPILOT_OTEL_SESSION_STATE": str(tmp_path / "sessions"),
                "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.http_endpoint,
                "COPILOT_OTEL_METRICS": "false",
            }
        ),
        encoding="utf-8",
    )
    log = tmp_path / "logs" / "service.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "copilot_otel._platform._launch", str(settings), str(log)], cwd=ROOT
    )
    try:
        until(lambda: log.exists() and " following " in log.read_text(), 30, "the following line")
        assert (state / "lock").exists()
    finally:
        proc.terminate()
        assert proc.wait(30) == 0
    assert "received SIGTERM" in log.read_text()


def test_launchd_falls_back_to_the_user_domain_over_ssh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    gui_refuses = '"bootstrap gui/"*) echo "Bootstrap failed: 125: Domain does not support specified action" >&2; exit 125;;'
    calls = _stand_in(monkeypatch, tmp_path, "COPILOT_OTEL_LAUNCHCTL", gui_refuses)
    monkeypatch.setenv("COPILOT_OTEL_SERVICE_PLATFORM", "darwin")
    assert main(["service", "install"]) == 0
    assert "Loaded and started io.github.copilot-otel" in capsys.readouterr().out
    plist = Path(os.environ["HOME"]) / "Library" / "LaunchAgents" / "io.github.copilot-otel.plist"
    uid = os.getuid()
    assert calls.read_text().splitlines() == [
        f"bootout gui/{uid}/io.github.copilot-otel",
        f"bootstrap gui/{uid} {plist}",
        f"bootout user/{uid}/io.github.copilot-otel",
        f"bootstrap user/{uid} {plist}",
    ]
