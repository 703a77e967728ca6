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
import time
from pathlib import Path

import pytest

from tests.conftest import CLI_GENERATED, ROOT

# What sending needs: our exporter and telemetry, the OpenTelemetry SDK and its OTLP exporters, gRPC.
SENDING = (
    "copilot_otel.deliver.export",
    "copilot_otel.deliver.telemetry",
    "copilot_otel.deliver.metrics",
    "opentelemetry.sdk",
)
SENDING_PREFIXES = ("opentelemetry.sdk.", "opentelemetry.exporter", "grpc")
# What folding a log needs (the light commands read no log).
FOLDING = (
    "copilot_otel.pipeline",
    "copilot_otel.loop.agentloop",
    "copilot_otel.projections",
    "copilot_otel.library",
)

# Runs ``main`` of the module it is formatted with (the CLI's, or the console script's ``entry``) and lists the
# modules loaded.
PROBE = """
import contextlib, io, json, sys
from copilot_otel.{module} import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        code = main(sys.argv[1:])
    except SystemExit as exc:  # --help
        code = exc.code
print(json.dumps({{"code": code, "modules": sorted(sys.modules), "out": out.getvalue()}}))
"""


def _run(
    home: Path, *argv: str, code: int = 0, module: str = "cli", stdin: str | None = None
) -> tuple[set[str], str]:
    """The modules loaded by running ``copilot-otel ARGV`` in a fresh interpreter (exit code ``code``; through
    ``module``'s ``main``: the CLI's, or the console script's ``entry``), and what it printed (to a pipe: not a
    terminal)."""
    proc = subprocess.run(
        [sys.executable, "-c", PROBE.format(module=module), *argv],
        env=_probe_env(home),
        cwd=home,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.splitlines()[-1])
    assert (result["code"] or 0) == code, (argv, result["code"], proc.stderr)
    return set(result["modules"]), result["out"]


def _probe_env(home: Path) -> dict[str, str]:
    return {"HOME": str(home), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}


def _modules_after(home: Path, *argv: str, code: int = 0) -> set[str]:
    """The modules loaded by running ``copilot-otel ARGV`` in a fresh interpreter (exit code ``code``)."""
    return _run(home, *argv, code=code)[0]


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
    assert "copilot_otel.common.display" in modules  # the error and log wording is loaded...
    assert _loaded(modules, (), ("rich",)) == []  # ...without the terminal library


# What ``status`` reads no more of than it needs: the checkpoint store (SQLite, filelock) and the dead letters'
# module that loads it, the service installer, the log readers (``sources`` loads orjson's event views, the parser).
STATE = (
    "copilot_otel.daemon.state",
    "copilot_otel.daemon.statedb",
    "copilot_otel.deliver.deadletter",
    "sqlite3",
    "filelock",
)
READERS = (
    "copilot_otel.sources",
    "copilot_otel.sources.copilot.events",
    "copilot_otel.sources.copilot.parse",
    "copilot_otel.sources.sessions",
)
STATUS_NEVER = (*STATE, "copilot_otel.commands.service", *READERS)


def test_status_without_a_daemon_loads_neither_the_store_nor_the_installer_nor_the_terminal_library(
    _isolated_home: Path,
) -> None:
    """No daemon, no status, no dead letter, output to a pipe: one line and the agents' folders, printed without
    ``rich`` (~30 ms), the checkpoint store (~40 ms) or the service installer (~20 ms): only the services' files
    are looked at (no daemon runs where configured)."""
    modules, out = _run(_isolated_home, "status", code=1)
    assert "copilot_otel.daemon.servicefiles" in modules  # it did look for an installed service's state dir
    assert _loaded(modules, STATUS_NEVER, ("rich", "filelock.")) == []
    assert out.startswith("No copilot-otel daemon is running (no status in ")
    assert "agent logs" in out and "claude-code" in out


def test_status_draws_its_table_without_the_store(_isolated_home: Path) -> None:
    """A last status to show: ``rich`` draws the table, still without the store (``status.json`` is read by
    ``statusfile``); a dead-letter file in the state dir loads the dead letters' module, which says how many."""
    state = _isolated_home / "state"
    state.mkdir()
    (state / "status.json").write_text(
        json.dumps({"pid": 0, "destination": "OTLP/HTTP http://collector:4318"})
    )
    modules, out = _run(_isolated_home, "status", "--state-dir", str(state), code=1)
    assert "Last status it wrote:" in out and "OTLP/HTTP http://collector:4318" in out
    assert "rich.table" in modules
    assert _loaded(modules, STATUS_NEVER, ("filelock.",)) == []
    (state / "dead-letter.jsonl").write_text(json.dumps({"id": "1", "signal": "traces", "record": {}}) + "\n")
    modules, out = _run(_isolated_home, "status", "--state-dir", str(state), code=1)
    assert "copilot_otel.deliver.deadletter" in modules
    assert "1 dead letter in " in out  # (the path wraps in the table's 80 columns)


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


def test_the_statusline_answers_without_the_fold_the_prices_or_the_terminal_library(
    _isolated_home: Path,
) -> None:
    """Claude Code waits for its statusLine command after every message: it prints from its cached figures (fresh
    here, so no refresh starts) and loads no log reader, no price table (pydantic, ~0.5 s), no report, no rich."""
    from datetime import datetime

    state = _isolated_home / "state"
    state.mkdir()
    today = datetime.now().astimezone().date().isoformat()
    (state / "statusline.json").write_text(
        json.dumps({"day": today, "refreshed_at": time.time(), "today_cost_usd": 1.5, "sessions": {}})
    )
    modules, out = _run(_isolated_home, "statusline", "--state-dir", str(state))
    assert "$1.50 today" in out
    assert _loaded(modules, SENDING, SENDING_PREFIXES) == []
    assert (
        _loaded(modules, (*FOLDING, *READERS, "copilot_otel.commands.report"), ("genai_prices", "rich")) == []
    )


# What the hook's short path does without: the CLI and its settings table, the platform's classes (threads, sockets,
# ctypes), the lock and process libraries, and the standard modules the rest of the package pays for first.
HOOK_NEVER = (
    "copilot_otel.cli",
    "copilot_otel.settings.config",
    "copilot_otel._platform._portable",
    "orjson",
    "filelock",
    "psutil",
    "dataclasses",
    "logging",
    "argparse",
    "tomllib",
)


def test_the_statusline_hook_takes_the_short_path(_isolated_home: Path) -> None:
    """``copilot-otel statusline`` as Claude Code runs it (the console script's ``entry``, fresh figures, the
    hook's JSON on stdin): the line, from a handful of our modules. Each module it must not load is first shown
    not loaded by a bare interpreter, so the assertion can fail. A flag the short path does not take goes to the
    CLI."""
    from datetime import datetime

    state = _isolated_home / "state"
    state.mkdir()
    today = datetime.now().astimezone().date().isoformat()
    (state / "statusline.json").write_text(
        json.dumps({"day": today, "refreshed_at": time.time(), "today_cost_usd": 1.5, "sessions": {}})
    )
    env = _probe_env(_isolated_home)
    bare = subprocess.run(
        [sys.executable, "-c", "import json, sys; print(json.dumps(sorted(sys.modules)))"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert _loaded(set(json.loads(bare.stdout)), HOOK_NEVER) == []
    hook = json.dumps({"model": {"id": "opus"}})
    modules, out = _run(_isolated_home, "statusline", "--state-dir", str(state), module="entry", stdin=hook)
    assert out.startswith("opus · $… session · $1.50 today"), out
    assert "copilot_otel.commands.statusline" in modules
    assert _loaded(modules, HOOK_NEVER) == []
    through_cli = ("statusline", f"--state-dir={state}", "--log-level", "debug")
    modules, _ = _run(_isolated_home, *through_cli, module="entry", stdin=hook)
    assert "copilot_otel.cli" in modules
    # Both paths write the line as UTF-8 for Claude Code, even into a pipe whose code page lacks "·" and "…"
    # (a Windows console's cp1252, as PYTHONIOENCODING makes it here; the CLI's text layer would spell them -, ...).
    for argv in (["--state-dir", str(state)], [f"--state-dir={state}", "--log-level", "debug"]):
        proc = subprocess.run(
            [sys.executable, "-m", "copilot_otel", "statusline", *argv],
            env={**env, "PYTHONIOENCODING": "cp1252"},
            input=b"{}",
            capture_output=True,
            timeout=60,
        )
        assert (proc.returncode, proc.stdout.decode()) == (
            0,
            "? · $… session · $1.50 today · otel not running\n",
        )
