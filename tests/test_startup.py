"""Each command imports only what it runs: the light ones never load the pipeline, ``show`` never the exporter.

Every ``copilot_otel.<module>`` import runs the package's ``__init__`` first, so an ``__init__`` that imported the
library made every command pay for the whole pipeline; ``show`` folded sessions through ``replay``, which imports
the exporter and the OpenTelemetry SDK although ``show`` sends nothing. Each case runs the real command in a fresh
interpreter (``main([...])`` from ``copilot_otel.cli``, in a throw-away home) and then lists ``sys.modules``: a
module-level import that drags a heavy module back in fails here. (The import *time* is a speed goal and lives in
the benchmark, not in an assertion.)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CLI_GENERATED, ROOT

# What sending needs: our exporter and telemetry, the OpenTelemetry SDK and its OTLP exporters, gRPC.
SENDING = ("copilot_otel.export", "copilot_otel.telemetry", "copilot_otel.metrics", "opentelemetry.sdk")
SENDING_PREFIXES = ("opentelemetry.sdk.", "opentelemetry.exporter", "grpc")
# What folding a log needs (the light commands read no log).
FOLDING = ("copilot_otel.pipeline", "copilot_otel.agentloop", "copilot_otel.project", "copilot_otel.library")

PROBE = """
import contextlib, io, json, sys
from copilot_otel.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        code = main(sys.argv[1:])
    except SystemExit as exc:  # --help
        code = exc.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def _modules_after(home: Path, *argv: str, code: int = 0) -> set[str]:
    """The modules loaded by running ``copilot-otel ARGV`` in a fresh interpreter (exit code ``code``)."""
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *argv], env=env, cwd=home, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.splitlines()[-1])
    assert (result["code"] or 0) == code, (argv, result["code"], proc.stderr)
    return set(result["modules"])


def _loaded(modules: set[str], names: tuple[str, ...], prefixes: tuple[str, ...] = ()) -> list[str]:
    return sorted(m for m in modules if m in names or m.startswith(prefixes))


# `status` exits 1: no daemon runs in the throw-away home.
@pytest.mark.parametrize(("command", "code"), [("--help", 0), ("status", 1), ("config", 0)])
def test_light_commands_load_neither_the_pipeline_nor_the_exporter(
    _isolated_home: Path, command: str, code: int
) -> None:
    modules = _modules_after(_isolated_home, command, code=code)
    assert "copilot_otel.cli" in modules  # the probe ran the command
    assert _loaded(modules, SENDING, SENDING_PREFIXES) == []
    assert _loaded(modules, FOLDING) == []


@pytest.mark.parametrize("command", ["--help", "config"])
def test_commands_that_draw_nothing_do_not_load_the_terminal_library(
    _isolated_home: Path, command: str
) -> None:
    """``rich`` (about 40 ms of import) is for the commands that draw tables and trees; ``display``'s neutralising
    render hook builds on it only when one asks for it."""
    modules = _modules_after(_isolated_home, command)
    assert "copilot_otel.display" in modules  # the error and log wording is loaded...
    assert _loaded(modules, (), ("rich",)) == []  # ...without the terminal library


FAILING = str(CLI_GENERATED / "failing-tool" / "events.jsonl")


@pytest.mark.parametrize(
    "argv",
    [[FAILING], [FAILING, "--json"], ["--session-state", str(CLI_GENERATED)]],
    ids=["tree", "json", "list"],
)
def test_show_folds_without_loading_the_exporter(_isolated_home: Path, argv: list[str]) -> None:
    modules = _modules_after(_isolated_home, "show", *argv)
    assert "copilot_otel.pipeline" in modules  # it did fold the session
    assert _loaded(modules, SENDING, SENDING_PREFIXES) == []


def test_the_public_api_still_loads_on_first_use(_isolated_home: Path) -> None:
    probe = "import copilot_otel, sys; assert 'copilot_otel.library' not in sys.modules; print(copilot_otel.read_session.__module__)"
    proc = subprocess.run(
        [sys.executable, "-c", probe],
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (proc.returncode, proc.stdout.strip()) == (0, "copilot_otel.library"), proc.stderr
