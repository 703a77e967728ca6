"""Run the real GitHub Copilot CLI offline (BYOK mode) against a local fake model.

The CLI is the native binary installed by ``.ci/install-copilot-cli.sh`` (npm
``@github/copilot``); it runs with a clean environment (``env -i`` style, see
``shared/reference/real-cli.md`` §2), so nothing from the developer's shell leaks in, and
writes a genuine session folder under ``<home>/.copilot/session-state/<session-id>/``.

One deliberate addition to the clean environment: ``XDG_CACHE_HOME`` points at a shared
folder (:data:`SHARED_CACHE_DIR`). On its first start with a given cache the binary
unpacks its ~235 MB package there (~1.3 s); sharing it keeps every run after the first
fast and keeps that copy out of each throw-away ``$HOME``. The session folder is
unaffected (it follows ``$HOME``). Override with ``env_extra={"XDG_CACHE_HOME": ...}``.

Typical use::

    binary = find_copilot_binary()
    with FakeModelServer() as server:
        proc = run_copilot(binary, home, workdir, prompt_for("tools"), server.base_url,
                           session_id=SESSION_ID)
    events = read_events(session_dir(home, SESSION_ID))
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import signal
import subprocess
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Literal, overload

from filelock import FileLock

__all__ = [
    "CLI_VERSION",
    "FAKE_API_KEY",
    "CopilotProcess",
    "build_command",
    "build_env",
    "default_binary_path",
    "find_copilot_binary",
    "read_events",
    "run_copilot",
    "session_dir",
]

CLI_VERSION = "1.0.102"
# Where .ci/install-copilot-cli.sh puts the npm package by default (relative to the repo root).
DEFAULT_CLI_DIR = Path(__file__).resolve().parents[2] / ".cache" / "copilot-cli"
# Shared XDG_CACHE_HOME for all runs (gitignored, like the install folder).
SHARED_CACHE_DIR = Path(__file__).resolve().parents[2] / ".cache" / "copilot-xdg-cache"
MODEL = "gpt-4.1"
# Sent as "Authorization: Bearer …" (the fake model ignores it). Not a short word: the CLI masks
# this value wherever it appears in its stdout and process log, so a one-letter key like "x"
# turned every x there into "******" ("e******itCode").
FAKE_API_KEY = "fake-copilot-otel-api-key"
# Upper bound for the one-off unpacking run that warms the shared cache.
WARM_TIMEOUT_S = 60.0
# Grace period between SIGINT/SIGTERM and SIGKILL when a run must be stopped.
KILL_GRACE_S = 5.0


def _platform_package() -> str:
    system = {"Linux": "linux", "Darwin": "darwin"}.get(platform.system(), platform.system().lower())
    machine = platform.machine().lower()
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(machine, machine)
    return f"copilot-{system}-{arch}"


def default_binary_path(cli_dir: Path | None = None) -> Path:
    """Where the native binary lives inside a cache folder made by ``.ci/install-copilot-cli.sh``.

    ``cli_dir`` defaults to ``$COPILOT_CLI_DIR`` or ``<repo>/.cache/copilot-cli``.
    """
    if cli_dir is None:
        env_dir = os.environ.get("COPILOT_CLI_DIR")
        cli_dir = Path(env_dir) if env_dir else DEFAULT_CLI_DIR
    return cli_dir / "node_modules" / "@github" / _platform_package() / "copilot"


def find_copilot_binary() -> Path | None:
    """The native Copilot CLI binary, or None if it is not installed.

    Looked up in ``$COPILOT_CLI_BIN`` first, then in the default install location
    (:func:`default_binary_path`). A path that is not an executable file counts as missing.
    """
    env_bin = os.environ.get("COPILOT_CLI_BIN")
    candidate = Path(env_bin) if env_bin else default_binary_path()
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return candidate
    return None


def session_dir(home: Path, session_id: str) -> Path:
    """The CLI's session folder for ``session_id`` under the throw-away ``home``."""
    return home / ".copilot" / "session-state" / session_id


def read_events(folder: Path) -> list[dict[str, Any]]:
    """The complete JSON lines of ``<folder>/events.jsonl`` (a partial last line is skipped)."""
    path = folder / "events.jsonl"
    if not path.exists():
        return []
    lines = path.read_bytes().split(b"\n")
    # The last element is b"" after a final newline, or an incomplete line still being written.
    return [json.loads(line) for line in lines[:-1] if line.strip()]


def build_env(home: Path, base_url: str, env_extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The complete, clean environment for a BYOK-offline run (nothing inherited)."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "TERM": "dumb",
        "LANG": "C.UTF-8",
        "NO_COLOR": "1",
        "COPILOT_AUTO_UPDATE": "false",
        "COPILOT_OFFLINE": "true",
        "COPILOT_PROVIDER_BASE_URL": base_url,
        "COPILOT_PROVIDER_TYPE": "openai",
        "COPILOT_PROVIDER_API_KEY": FAKE_API_KEY,
        "COPILOT_MODEL": MODEL,
        "XDG_CACHE_HOME": str(SHARED_CACHE_DIR),
    }
    env.update(env_extra or {})
    return env


def build_command(
    binary: Path, prompt: str, session_id: str | None = None, extra_args: Sequence[str] = ()
) -> list[str]:
    """The argv of a non-interactive run: ``--no-auto-update -p <prompt> --allow-all-tools``."""
    argv = [str(binary), "--no-auto-update", "-p", prompt, "--allow-all-tools"]
    if session_id is not None:
        argv.append(f"--session-id={session_id}")
    argv.extend(extra_args)
    return argv


class CopilotProcess(subprocess.Popen[bytes]):
    """A CLI run in the background: a ``Popen`` whose stdout/stderr go to anonymous temp files.

    Files instead of pipes, so a chatty CLI can never block on a full pipe while the test
    watches the session folder. Collect the output with :meth:`result`.
    """

    def __init__(self, argv: list[str], *, cwd: Path, env: dict[str, str]) -> None:
        # Closed in result(); they must outlive this call, so no context manager.
        self._out: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115
        self._err: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115
        super().__init__(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._out,
            stderr=self._err,
            # Own process group, so a stuck run's tool children (bash, sleep) can be cleaned up.
            start_new_session=True,
        )

    def interrupt(self) -> None:
        """Send SIGINT to the native binary (what Ctrl-C does); the CLI then aborts cleanly."""
        if self.poll() is None:
            self.send_signal(signal.SIGINT)

    def kill_group(self) -> None:
        """SIGKILL the CLI and everything it started (its own process group)."""
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):  # exited meanwhile
                os.killpg(self.pid, signal.SIGKILL)
        self.wait(KILL_GRACE_S)

    def result(self, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Wait for the exit (killing the run on timeout, then re-raising) and collect the output."""
        try:
            self.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill_group()
            raise
        outputs: list[str] = []
        for f in (self._out, self._err):
            f.seek(0)
            outputs.append(f.read().decode("utf-8", "replace"))
            f.close()
        return subprocess.CompletedProcess(self.args, self.returncode, outputs[0], outputs[1])


_warm_lock = threading.Lock()
_warmed: set[tuple[str, str]] = set()


def _warm_cache(binary: Path, cache_dir: str) -> None:
    """Let the binary unpack itself into ``cache_dir`` once (``--version``), serialised per process and, with
    a lock file beside the folder, between processes (the test workers of ``pytest -n``).

    Without this, two concurrent first runs would both unpack into the same folder.
    """
    key = (str(binary), cache_dir)
    with _warm_lock:
        if key in _warmed:
            return
        Path(cache_dir).parent.mkdir(parents=True, exist_ok=True)
        with FileLock(f"{cache_dir}.lock", timeout=WARM_TIMEOUT_S * 2):
            _unpack(binary, cache_dir)
        _warmed.add(key)


def _unpack(binary: Path, cache_dir: str) -> None:
    """Run ``binary --version`` once with ``cache_dir`` as its cache: it unpacks itself there."""
    with tempfile.TemporaryDirectory(prefix="copilot-warm-") as home:
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": home,
            "XDG_CACHE_HOME": cache_dir,
            "COPILOT_AUTO_UPDATE": "false",
        }
        subprocess.run(
            [str(binary), "--version"],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=WARM_TIMEOUT_S,
            check=True,
        )


@overload
def run_copilot(
    binary: Path,
    home: Path,
    workdir: Path,
    prompt: str,
    base_url: str,
    session_id: str | None = ...,
    timeout: float = ...,
    extra_args: Sequence[str] = ...,
    env_extra: Mapping[str, str] | None = ...,
    background: Literal[False] = ...,
) -> subprocess.CompletedProcess[str]: ...


@overload
def run_copilot(
    binary: Path,
    home: Path,
    workdir: Path,
    prompt: str,
    base_url: str,
    session_id: str | None = ...,
    timeout: float = ...,
    extra_args: Sequence[str] = ...,
    env_extra: Mapping[str, str] | None = ...,
    *,
    background: Literal[True],
) -> CopilotProcess: ...


def run_copilot(
    binary: Path,
    home: Path,
    workdir: Path,
    prompt: str,
    base_url: str,
    session_id: str | None = None,
    timeout: float = 120,
    extra_args: Sequence[str] = (),
    env_extra: Mapping[str, str] | None = None,
    background: bool = False,
) -> subprocess.CompletedProcess[str] | CopilotProcess:
    """Run the native Copilot CLI non-interactively in ``workdir`` against ``base_url``.

    Args:
        binary: the native binary (see :func:`find_copilot_binary`).
        home: throw-away ``$HOME``; the session lands in :func:`session_dir` ``(home, id)``.
        workdir: the working folder (``session.start`` ``context.cwd``); tools act here.
        prompt: the ``-p`` prompt (use ``fake_model.prompt_for`` to select a script).
        base_url: the fake model's ``/v1`` URL (``FakeModelServer.base_url``).
        session_id: passed as ``--session-id=<id>`` when given (a new session's id).
        timeout: seconds before a foreground run is killed (``subprocess.TimeoutExpired``).
        extra_args: appended to the argv, e.g. ``("--resume=<id>",)``, ``("--output-format", "json")``.
        env_extra: added to / overriding the clean environment.
        background: return at once with a running :class:`CopilotProcess` (a ``Popen``).

    Returns:
        ``subprocess.CompletedProcess[str]`` with ``stdout``/``stderr`` text, or a
        :class:`CopilotProcess` when ``background`` is true (call ``.result(timeout)``).
    """
    home.mkdir(parents=True, exist_ok=True)
    workdir.mkdir(parents=True, exist_ok=True)
    env = build_env(home, base_url, env_extra)
    _warm_cache(binary, env["XDG_CACHE_HOME"])
    proc = CopilotProcess(build_command(binary, prompt, session_id, extra_args), cwd=workdir, env=env)
    if background:
        return proc
    return proc.result(timeout)
