"""Interrupt the Copilot CLI that owns a runaway session, the way a user pressing Ctrl-C would.

Which process: the session folder's ``inuse.<pid>.lock`` names it. It is signalled only when every check
passes, and each refusal says why (:class:`Refusal`):

* a process with that pid runs (``dead``);
* it runs as the same user as copilot-otel (``other_user``, or ``unknown_user`` where that cannot be read);
* it is the Copilot CLI: the native binary is named ``copilot`` (``copilot.exe``), the npm launcher is a node
  process running ``@github/copilot`` (``not_copilot``);
* it was created no later than the lock file was written (plus a clock-tick slack): a process created after is
  another program that got a dead CLI's pid (``started_after_lock``);
* it is *this session's* CLI on *this machine*: it holds the session's ``inuse.<pid>.hold`` open, as the real CLI
  does while it runs (``not_this_session``; ``unproven`` where the open files cannot be read, and ``no_hold`` when
  there is no hold file). Without this, a live CLI of another session passed the checks above whenever a lock
  named its pid: on a home folder shared between hosts the pid is a process on another machine, and restored or
  synced folders carry stale locks. Any doubt: notify, never signal.

What stops the loop while losing the least, measured with the real CLI 1.0.102 (``tests/test_interrupt_realcli.py``,
README "Acting on a runaway"):

* ``copilot -p`` (one prompt, then exit): SIGINT, SIGTERM and SIGHUP all end the prompt at once (~0.15 s)
  with an ``abort`` (``user_initiated``) and a ``session.shutdown`` in ``events.jsonl``, exit code 0; a
  running tool call is cut short. There is nothing to return to, so SIGINT (Ctrl-C's signal) it is.
* an interactive session: the Ctrl-C *key* (the terminal sends the byte 0x03 to a CLI in raw mode) aborts
  the prompt (``abort`` in the log) and the session returns to its input prompt and takes the next one. A
  SIGINT *signal* from outside makes the CLI exit (``session.shutdown``, no ``abort``; resumable with
  ``copilot --resume=<id>``); SIGQUIT and SIGUSR2 end it too and SIGUSR1 opens Node's debugger. So in a tmux
  pane (``TMUX``/``TMUX_PANE`` in the CLI's environment, the pane's tty verified to be the CLI's terminal) the
  key is sent (``tmux send-keys C-c``); elsewhere the signal is, and the log says the session ended.
* Windows: a console program in another console cannot be sent Ctrl+C (:attr:`Platform.can_interrupt
  <copilot_otel._platform.Platform.can_interrupt>` is false): copilot-otel notifies instead.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .._platform import Platform, ProcessFacts, current

__all__ = ["Candidate", "Outcome", "Refusal", "find_owners", "interrupt_session", "unprovable", "verify"]

logger = logging.getLogger(__name__)

_LOCK = re.compile(r"^inuse\.(\d+)\.lock$")
_NATIVE_NAMES = frozenset({"copilot", "copilot.exe"})
_LAUNCHER_MARK = "@github/copilot"
# The prompt flag of a non-interactive run (`copilot -p "..."`, `--prompt=...`).
_PROMPT_FLAGS = ("-p", "--prompt")
# tmux answers in milliseconds; a wedged server must not hold up the daemon's loop.
_TMUX_TIMEOUT_S = 3.0

Method = Literal["sigint", "tmux_ctrl_c"]
Run = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


@dataclass(frozen=True, slots=True)
class Candidate:
    """A process an ``inuse.<pid>.lock`` names, and when that lock was written (Unix seconds)."""

    pid: int
    lock: Path
    written: float


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a candidate is not signalled: ``code`` for counters and tests, ``detail`` for the log line."""

    code: str
    detail: str


@dataclass(frozen=True, slots=True)
class Outcome:
    """What :func:`interrupt_session` did.

    Attributes:
        result: ``interrupted``, ``dry_run`` (would have), ``refused`` (no candidate passed the checks),
            ``no_lock`` (no ``inuse`` lock: the CLI is not running), ``unsupported`` (this OS cannot),
            ``failed`` (the signal or keystroke could not be delivered), ``unprovable`` (another agent's session:
            no process can be proven to be its CLI, :func:`unprovable`).
        pid: The process acted on (or the last one refused), 0 when none.
        method: ``sigint`` or ``tmux_ctrl_c`` when one was chosen.
        detail: One line for the log: what was done, or why not.
        refusals: Every refused candidate with its reason.
    """

    result: Literal["interrupted", "dry_run", "refused", "no_lock", "unsupported", "failed", "unprovable"]
    pid: int = 0
    method: Method | None = None
    detail: str = ""
    refusals: tuple[tuple[int, Refusal], ...] = ()


def find_owners(folder: Path) -> list[Candidate]:
    """The processes a session folder's ``inuse.<pid>.lock`` files name (none when the folder is unreadable)."""
    found = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    for entry in entries:
        match = _LOCK.match(entry.name)
        if match is None:
            continue
        try:
            written = entry.stat().st_mtime
        except OSError:
            continue
        found.append(Candidate(int(match.group(1)), Path(entry.path), written))
    return sorted(found, key=lambda c: c.written)


def verify(candidate: Candidate, platform: Platform = current) -> ProcessFacts | Refusal:
    """The candidate's process if it is verifiably the session's Copilot CLI, else why not."""
    facts = platform.process_facts(candidate.pid)
    if facts is None:
        return Refusal("dead", f"no process has pid {candidate.pid} (the CLI exited; its lock stayed)")
    if facts.same_user is None:
        return Refusal("unknown_user", f"pid {candidate.pid} ({facts.name}): its user cannot be read")
    if not facts.same_user:
        return Refusal("other_user", f"pid {candidate.pid} ({facts.name}) belongs to another user")
    if not _looks_like_copilot(facts):
        shown = facts.exe or facts.name
        return Refusal("not_copilot", f"pid {candidate.pid} is {shown!r}, not the Copilot CLI")
    if facts.create_time > candidate.written + platform.start_slack_s:
        return Refusal(
            "started_after_lock",
            f"pid {candidate.pid} started {facts.create_time - candidate.written:.1f}s after {candidate.lock.name} "
            "was written: the CLI that wrote it is gone and another process got its pid",
        )
    hold = candidate.lock.with_name(f"inuse.{candidate.pid}.hold")
    if not hold.exists():
        return Refusal(
            "no_hold",
            f"no {hold.name} beside {candidate.lock.name}: cannot prove pid {candidate.pid} holds this session",
        )
    holds = platform.process_holds_open(candidate.pid, hold)
    if holds is None:
        return Refusal("unproven", f"cannot read which files pid {candidate.pid} holds open: not signalled")
    if not holds:
        return Refusal(
            "not_this_session",
            f"pid {candidate.pid} is a Copilot CLI but does not hold {hold.name} open: another session's, or a process "
            "on another machine (a home folder shared between hosts, a restored or synced folder)",
        )
    return facts


def _looks_like_copilot(facts: ProcessFacts) -> bool:
    names = {facts.name.lower(), os.path.basename(facts.exe).lower()}
    if names & _NATIVE_NAMES:
        return True
    return any(_LAUNCHER_MARK in arg for arg in facts.cmdline[:3])


def choose_method(facts: ProcessFacts) -> Method:
    """``tmux_ctrl_c`` for an interactive session in a tmux pane (it survives), else ``sigint``."""
    interactive = not any(arg in _PROMPT_FLAGS or arg.startswith("--prompt=") for arg in facts.cmdline[1:])
    if interactive and facts.environ.get("TMUX") and facts.environ.get("TMUX_PANE"):
        return "tmux_ctrl_c"
    return "sigint"


def _run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(argv),
        capture_output=True,
        text=True,
        timeout=_TMUX_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def _tmux_ctrl_c(facts: ProcessFacts, run: Run) -> str | None:
    """Type Ctrl-C into the CLI's tmux pane once the pane's tty is verified to be the CLI's terminal; returns
    why not, or ``None`` when sent."""
    tmux = shutil.which("tmux")
    if tmux is None:
        return "tmux is not on PATH"
    socket = facts.environ["TMUX"].split(",", 1)[0]
    pane = facts.environ["TMUX_PANE"]
    try:
        shown = run([tmux, "-S", socket, "display-message", "-p", "-t", pane, "#{pane_tty}"])
        if shown.returncode != 0 or shown.stdout.strip() != (facts.terminal or ""):
            return f"tmux pane {pane} is on {shown.stdout.strip() or '?'}, the CLI on {facts.terminal or 'no terminal'}"
        sent = run([tmux, "-S", socket, "send-keys", "-t", pane, "C-c"])
    except (OSError, subprocess.SubprocessError) as exc:
        return f"tmux failed: {exc}"
    if sent.returncode != 0:
        return f"tmux send-keys failed: {sent.stderr.strip()[:200]}"
    return None


def unprovable(agent: str) -> Outcome:
    """Another agent's session (Claude Code, Codex CLI, Gemini CLI): nothing is signalled, the runaway is only notified.

    None of them leaves an ``inuse.<pid>.lock`` (``docs/other-agents.md``, "Interrupting a runaway"), so no process
    can be proven to be that session's CLI: a process whose arguments name the session (``--resume <id>``, ``exec
    resume <id>``) would be one only for a resumed session, and a pid found by its name could be any other session's
    CLI. Until that proof exists, the interrupt degrades to the notice, and the outcome says so.
    """
    return Outcome(
        "unprovable",
        detail=(
            f"not interrupted: {agent} leaves no lock naming its process, so none can be proven to be this "
            "session's CLI (notified instead)"
        ),
    )


def interrupt_session(
    folder: Path | None, *, dry_run: bool = False, platform: Platform = current, run: Run = _run
) -> Outcome:
    """Interrupt the verified Copilot CLI of one session folder (each one its locks name; normally one).

    Never raises for a process that cannot be acted on: the :class:`Outcome` says what happened and why.
    """
    if folder is None:
        return Outcome("no_lock", detail="a legacy flat session log has no lock naming its CLI")
    candidates = find_owners(folder)
    if not candidates:
        return Outcome("no_lock", detail=f"no inuse.<pid>.lock in {folder}: the CLI is not running")
    refusals: list[tuple[int, Refusal]] = []
    for candidate in candidates:
        checked = verify(candidate, platform)
        if isinstance(checked, Refusal):
            refusals.append((candidate.pid, checked))
            continue
        return _act(checked, dry_run, platform, run, tuple(refusals))
    pid = refusals[-1][0]
    detail = "; ".join(r.detail for _, r in refusals)
    return Outcome("refused", pid, detail=f"nothing signalled: {detail}", refusals=tuple(refusals))


def _act(
    facts: ProcessFacts,
    dry_run: bool,
    platform: Platform,
    run: Run,
    refusals: tuple[tuple[int, Refusal], ...],
) -> Outcome:
    if not platform.can_interrupt:
        return Outcome(
            "unsupported",
            facts.pid,
            detail=f"{platform.name} cannot interrupt a CLI in another console",
            refusals=refusals,
        )
    method = choose_method(facts)
    what = (
        f"type Ctrl-C into tmux pane {facts.environ.get('TMUX_PANE')} of pid {facts.pid} (the prompt is aborted, "
        "the session stays open)"
        if method == "tmux_ctrl_c"
        else f"send SIGINT to pid {facts.pid}"
        + (
            " (an interactive session outside tmux: the CLI exits; resume it with copilot --resume)"
            if not any(a in _PROMPT_FLAGS or a.startswith("--prompt=") for a in facts.cmdline[1:])
            else " (the prompt is aborted and the CLI exits)"
        )
    )
    if dry_run:
        return Outcome("dry_run", facts.pid, method, f"dry run, would {what}", refusals)
    if method == "tmux_ctrl_c":
        why_not = _tmux_ctrl_c(facts, run)
        if why_not is None:
            return Outcome("interrupted", facts.pid, method, what, refusals)
        logger.info("cannot type Ctrl-C into the CLI's tmux pane (%s); sending SIGINT instead", why_not)
        method = "sigint"
        what = f"send SIGINT to pid {facts.pid} ({why_not})"
    try:
        platform.send_interrupt(facts.pid)
    except OSError as exc:
        return Outcome("failed", facts.pid, method, f"could not {what}: {exc}", refusals)
    return Outcome("interrupted", facts.pid, method, what, refusals)
