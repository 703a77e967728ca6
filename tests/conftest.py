"""Shared test setup: a clean environment, real fixtures, a real OTLP receiver over a socket.

Nothing of ours is mocked. The environment is scrubbed at import so a developer's OTEL_*/COPILOT_OTEL_* settings
(or a real ~/.copilot) can never leak into a test (as logfire clears LOGFIRE_*).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

for _name in list(os.environ):
    if _name.startswith(("OTEL_", "COPILOT_OTEL_")):
        del os.environ[_name]

from copilot_otel.cli import main  # noqa: E402
from tests.otlp_receiver import OtlpReceiver  # noqa: E402

# The fixtures are the project's own: real CLI captures committed under tests/fixtures, so the test command passes
# in any clone (nothing outside the repository is read).
FIXTURES = ROOT / "tests" / "fixtures"
CLI_GENERATED = FIXTURES / "cli-generated"
if not CLI_GENERATED.is_dir():
    # Loud, not an empty parametrisation that would silently test nothing.
    raise pytest.UsageError(f"fixtures not found at {CLI_GENERATED}")


def all_fixture_logs() -> list[Path]:
    """Every real (and third-party synthetic) events log we ship tests against."""
    logs = sorted(CLI_GENERATED.glob("*/events.jsonl"))
    logs += sorted((FIXTURES / "public").glob("*.jsonl"))
    logs += sorted((FIXTURES / "public" / "synthetic-by-others").glob("*.jsonl"))
    return logs


def read_events(path: Path) -> list[dict[str, Any]]:
    """A log's events decoded with plain ``json`` (independent of our parser); undecodable lines skipped."""
    out = []
    for line in path.read_bytes().splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


# The serial lane of `pytest -n 2 --dist loadgroup` (the README's command): tests that load the machine (the
# benchmark's quick run, a core for a minute) or measure or race it (a daemon's CPU share, a real CLI interrupted
# within two tool calls, a detection that must arrive while the runaway still runs, a Ctrl-C right as the daemon
# starts) run one after another in one worker, never beside each other. Everything else shares the machine: its
# own tmp home, state, ports.
SERIAL = pytest.mark.xdist_group("serial")


# Looks like a GitHub token to the scrubber (built from parts so that secret scanners leave the repository alone).
TOKEN_LIKE = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


def fixture_copy(tmp_path: Path, name: str, old: str, new: str) -> Path:
    """A copy of the cli-generated fixture ``name`` whose log has ``old`` (which must occur) replaced by ``new``."""
    folder = tmp_path / f"{name}-edited"
    shutil.copytree(CLI_GENERATED / name, folder)
    log = folder / "events.jsonl"
    text = log.read_text()
    assert old in text, f"{old!r} is not in {name}/events.jsonl"
    log.write_text(text.replace(old, new))
    return folder


def replay_into(
    receiver: OtlpReceiver, *paths: Path | str, protocol: str = "http/protobuf", extra: tuple[str, ...] = ()
) -> int:
    """Run ``copilot-otel replay`` in-process on ``paths``, exporting to ``receiver``; returns the exit code."""
    endpoint = receiver.grpc_endpoint if protocol == "grpc" else receiver.http_endpoint
    return main(
        [
            "replay",
            *map(str, paths),
            "--endpoint",
            endpoint,
            "--protocol",
            protocol,
            "--max-retry-time",
            "20",
            "--no-progress",
            *extra,
        ]
    )


# Inputs the property-based tests tried, by test (tests/test_fuzz_input.py); shown in the terminal summary so CI's
# normal output says how much was fuzzed.
FUZZ_INPUTS: Counter[str] = Counter()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """In a ``pytest -n`` worker: hand the counts to the main process (which prints the summary)."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["fuzz_inputs"] = dict(FUZZ_INPUTS)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """In the main process of ``pytest -n``: add up each worker's counts (an xdist hook, called per worker)."""
    FUZZ_INPUTS.update(getattr(node, "workeroutput", {}).get("fuzz_inputs", {}))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if FUZZ_INPUTS:
        tried = ", ".join(f"{name}: {n:,}" for name, n in sorted(FUZZ_INPUTS.items()))
        terminalreporter.write_line(f"fuzzed inputs tried: {tried}")


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test gets its own HOME (state dir, session-state, config file all live under it)."""
    home = tmp_path / "user-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.delenv("COPILOT_HOME", raising=False)
    return home


def midday_zone() -> str:
    """A POSIX ``TZ`` with a whole-hour offset in which it is now about noon.

    The commands that say what happened "today" (``live``, ``statusline``) cut the day in the local zone; a test
    that writes a session "ten minutes ago" and expects it today fails in the first minutes after midnight in a
    fixed zone (it did, on CI at 00:07 UTC). In this zone midnight is about twelve hours away, whenever the test
    runs. The offset is -11..+12 hours; POSIX writes it with the sign inverted."""
    shift = 12 - datetime.now(timezone.utc).hour
    return f"NOON{-shift:+d}"


@pytest.fixture
def midday_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A HOME of the test's own (not made: the test lays it out) and a local zone in which it is now about noon
    (:func:`midday_zone`), set for this process too (``time.tzset``) and for the commands it starts."""
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    before = os.environ.get("TZ")
    os.environ["TZ"] = midday_zone()
    _tzset()
    try:
        yield home
    finally:
        if before is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = before
        _tzset()


def _tzset() -> None:
    """The C library's zone read again from ``TZ`` (POSIX only: Windows has no ``time.tzset``)."""
    if hasattr(time, "tzset"):
        time.tzset()


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    """A real OTLP receiver (gRPC and HTTP) on 127.0.0.1."""
    with OtlpReceiver() as r:
        yield r


@contextlib.contextmanager
def lock_held_elsewhere(path: Path) -> Iterator[int]:
    """The real lock of ours (``current.lock_exclusive``) on ``path``, held by another process (as a running
    daemon or statusline refresh holds it) until the block ends, when that process is killed; yields its pid."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from copilot_otel._platform import current; "
            f"held = current.lock_exclusive({str(path)!r}); print('held', flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        yield holder.pid
    finally:
        holder.kill()
        holder.wait(timeout=30)
