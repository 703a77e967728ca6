"""Secrets in settings never reach what the program shows or writes (issue 22, point 1).

A password in the endpoint URL, a token in the OTLP headers and a webhook URL (whose path is its credential) are
set; then every command's output, a real daemon's log and every file the daemon writes in its state directory are
searched for them. The endpoint is a closed port on 127.0.0.1 (nothing answers, so every endpoint message is
printed) and, for gRPC, a host name the resolver must fail on with the target in its message.
"""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest

from copilot_otel.cli import main
from copilot_otel.common import display
from tests.conftest import CLI_GENERATED
from tests.daemon_process import DaemonProcess

PASSWORD = "PASSw0rdInUrl"
HEADER_TOKEN = "HeaderT0kenValue"
HOOK_SECRET = "HookS3cretPath"
SECRETS = (PASSWORD, HEADER_TOKEN, HOOK_SECRET)


def _dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _leaks(text: str) -> list[str]:
    return [secret for secret in SECRETS if secret in text]


@pytest.fixture
def secret_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    endpoint = f"http://alice:{PASSWORD}@127.0.0.1:{_dead_port()}"
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_EXPORTER_OTLP_HEADERS": f"authorization=Bearer%20{HEADER_TOKEN}",
        "COPILOT_OTEL_NOTIFY_WEBHOOK": f"https://hooks.example.invalid/services/{HOOK_SECRET}",
        "COPILOT_OTEL_STATE_DIR": str(tmp_path / "state"),
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


def test_the_url_formatter_masks_userinfo_query_and_webhook_paths() -> None:
    assert display.url(f"http://alice:{PASSWORD}@host:4318/x?token=t") == "http://***@host:4318/x?***"
    assert display.url(f"alice:{PASSWORD}@host:4317") == "***@host:4317"
    assert display.webhook(f"https://hooks.slack.com/services/{HOOK_SECRET}") == "https://hooks.slack.com/***"
    assert PASSWORD not in display.scrub(f"DNS resolution failed for alice:{PASSWORD}@host:4317: timeout")
    assert display.scrub("mail bob@example.com") == "mail bob@example.com"  # no credentials: left alone


def test_no_command_daemon_log_or_state_file_shows_a_secret(
    secret_env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "session-state"
    root.mkdir()
    shutil.copytree(CLI_GENERATED / "failing-tool", root / "failing-tool")
    state = Path(secret_env["COPILOT_OTEL_STATE_DIR"])

    daemon = DaemonProcess(
        root, state, secret_env["OTEL_EXPORTER_OTLP_ENDPOINT"], tmp_path / "daemon.log", env=secret_env
    ).start()
    try:
        daemon.until("the endpoint problem in its log", lambda: "cannot connect" in daemon.output())
        daemon.until("status.json", lambda: (state / "status.json").exists())
    finally:
        daemon.terminate()
    log = daemon.output()
    assert "cannot connect to http://***@127.0.0.1" in log, log  # the endpoint problem is said, masked
    assert " following " in log and "http://***@127.0.0.1" in log.split(" following ", 1)[1].splitlines()[0]

    outputs: dict[str, str] = {"daemon log": log}
    log_file = root / "failing-tool" / "events.jsonl"
    commands = {
        "config": ["config"],
        "doctor": ["doctor"],
        "status": ["status"],
        "status --json": ["status", "--json"],
        "replay": ["replay", str(log_file), "--max-retry-time", "1", "--no-progress"],
        "replay grpc": [
            "replay",
            str(log_file),
            "--protocol",
            "grpc",
            "--endpoint",
            f"http://alice:{PASSWORD}@no-such-host.invalid:4317",
            "--max-retry-time",
            "1",
            "--no-progress",
        ],
        "dead-letters list": ["dead-letters", "list"],
        "dead-letters resend": ["dead-letters", "resend", "--max-retry-time", "1"],
    }
    for name, argv in commands.items():
        main(argv)
        out, err = capsys.readouterr()
        outputs[name] = out + err
    assert "***@" in outputs["replay"] and "***@" in outputs["replay grpc"], outputs
    for path in sorted(p for p in state.rglob("*") if p.is_file()):
        outputs[str(path.relative_to(state))] = path.read_bytes().decode(errors="replace")
    assert "status.json" in outputs
    leaked = {name: _leaks(text) for name, text in outputs.items() if _leaks(text)}
    assert not leaked, leaked
