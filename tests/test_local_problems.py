"""Problems of this machine are named as such, at once (issue 24): an output file or state folder that cannot be
written is exit 4, not a minute of retries and exit 5 "the collector did not accept the data"; a malformed
endpoint URL is a configuration error when loaded; a ``--prometheus-host`` that is no address here names the host.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from copilot_otel.cli import main
from copilot_otel.common.errors import StateError
from tests.conftest import CLI_GENERATED
from tests.test_cli_commands import _console_script


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "session-state"
    shutil.copytree(CLI_GENERATED / "plain-question", root / "0a0000aa-good")
    return root


def _replay(tmp_path: Path, *extra: str) -> list[str]:
    # --max-retry-time 2: before the fix this retried (2 s here, 60 s by default) and then exited 5
    return [
        "replay",
        "--session-state",
        str(_root(tmp_path)),
        "--no-progress",
        "--max-retry-time",
        "2",
        *extra,
    ]


@pytest.mark.parametrize("where", ["folder", "file-in-the-way"])
def test_an_output_file_that_cannot_be_written_is_exit_4(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    blocker = tmp_path / "blocker"
    if where == "folder":
        blocker.mkdir()
        target, why = blocker, "Is a directory"
    else:
        blocker.write_text("a plain file\n")
        target, why = blocker / "out.jsonl", "a file is in the way of its folder"
    assert main(_replay(tmp_path, "--output-file", str(target))) == StateError.exit_code == 4
    err = capsys.readouterr().err
    assert (
        err
        == f"copilot-otel: error: cannot write the output file {target}: {why}; set --output-file to a file\n"
    )


def test_an_unusable_state_folder_is_exit_4(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "state"
    state.write_text("not a folder\n")
    assert main(_replay(tmp_path, "--state-dir", str(state))) == 4
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "did not accept" not in err
    assert (
        f"cannot write the output file {state / 'otlp.jsonl'} (no endpoint is set; it is in the state " in err
    )


@pytest.mark.parametrize("url", ["http://local host:4318", "http://a,b:4318", "http://host\t:4318"])
def test_a_malformed_endpoint_is_a_config_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], url: str
) -> None:
    assert main(_replay(tmp_path, "--endpoint", url)) == 2
    assert capsys.readouterr().err == (
        f"copilot-otel: error: Expected --endpoint to be an http:// or https:// URL with a valid host name, "
        f"got {url!r}\n"
    )


@pytest.mark.parametrize("url", ["http://[::1]:4318", "http://host_a.example:4318/v1", "https://10.0.0.1"])
def test_valid_endpoints_still_load(tmp_path: Path, capsys: pytest.CaptureFixture[str], url: str) -> None:
    assert main(["config", "--endpoint", url]) == 0
    assert url in capsys.readouterr().out


def test_a_bad_prometheus_host_names_the_host(tmp_path: Path) -> None:
    # 192.0.2.1 (TEST-NET-1, RFC 5737) is no address of this machine: binding to it fails at once, no DNS asked
    argv = [
        *_console_script(),
        "run",
        "--session-state",
        str(_root(tmp_path)),
        "--state-dir",
        str(tmp_path / "state"),
        "--prometheus-port",
        "0",
        "--prometheus-host",
        "192.0.2.1",
    ]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert "Expected --prometheus-host to be a name or address of this machine, got '192.0.2.1'" in last
    assert "--prometheus-port" not in last
