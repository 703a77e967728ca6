"""Session logs on disk: finding them from what the user typed, naming them, reading their metadata.

Layouts (see copilot-events.md §1): ``<root>/<sessionId>/events.jsonl`` (current) and the legacy flat file
``<root>/<sessionId>.jsonl``. A user may point at a session folder, an ``events.jsonl``, a flat file, a whole
``session-state`` root, or give a session id (or a unique prefix of one) to look up under the root.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from .._platform import current
from ..common.errors import SourceError, UnreadableError
from .sidefiles import read_text

EVENTS_FILE = "events.jsonl"
_YAML_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*):\s*(.*?)\s*$")


@dataclass(frozen=True, slots=True)
class SessionFile:
    """One session log.

    Attributes:
        session_id: From the folder or file name (the log's ``session.start`` may refine it).
        path: The JSONL file.
        folder: The session folder (current layout) or ``None`` for a legacy flat file.
        agent: Which coding agent wrote it, when discovery knows it from the folder it found the log in
            (``copilot``, ``claude-code``, ``codex``, ``gemini``); ``None``: told by the log itself
            (:func:`copilot_otel.library.agent_of`).
        subagents: Its sub-agents' logs, read with it, when discovery grouped them (a Codex session's child
            threads, which only their content links to it); ``None``: those found beside it
            (:func:`copilot_otel.library.subagent_logs`).
    """

    session_id: str
    path: Path
    folder: Path | None
    agent: str | None = None
    subagents: tuple[Path, ...] | None = None

    @classmethod
    def from_path(cls, path: Path) -> SessionFile:
        """The session a log file belongs to, named by its folder (current) or file stem (legacy)."""
        if path.name == EVENTS_FILE:
            return cls(path.parent.name, path, path.parent)
        return cls(path.stem, path, None)


def scan_root(root: Path) -> list[SessionFile]:
    """Every session log directly under a ``session-state`` root, sorted by path (cheap: no file content)."""
    found: list[SessionFile] = []
    try:
        entries = list(os.scandir(root))
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise SourceError(f"cannot read session folder {root}: {exc.strerror}") from exc
    real_root: str | None = None
    for entry in entries:
        try:
            if entry.is_dir():
                events = Path(entry.path, EVENTS_FILE)
                session = SessionFile(entry.name, events, Path(entry.path))
                linked = entry.is_symlink() or events.is_symlink()
            elif entry.name.endswith(".jsonl"):
                events = Path(entry.path)
                session = SessionFile(entry.name[: -len(".jsonl")], events, None)
                linked = entry.is_symlink()
            else:
                continue
            if linked:
                real_root = real_root or os.path.realpath(root)
                if not stays_inside(events, real_root):
                    continue  # a link out of the folder: unreadable_sessions names it
            if events.is_file():
                found.append(session)
        except OSError:
            continue
    return sorted(found, key=lambda s: str(s.path))


def stays_inside(path: str | os.PathLike[str], real_root: str) -> bool:
    """Whether a log reached through a link stays inside the folder whose resolved path is ``real_root``: links
    within it are the user's own layout; one out of it would make copilot-otel read and export any file
    (``/etc/shadow`` too). The one rule of discovery, ``replay``/``show``/``report`` and the other agents' logs."""
    return os.path.realpath(path).startswith(real_root + os.sep)


def require_session_folder(root: Path) -> None:
    """Refuse a session-state root that is a plain file (``--session-state ~/.bashrc``); a missing one is fine
    (the Copilot CLI may not have run yet).

    Raises:
        SourceError: ``root`` exists and is not a folder.
    """
    if root.exists() and not root.is_dir():
        raise SourceError(
            f"the session-state folder {root} is a file, not a folder: set --session-state or "
            "COPILOT_OTEL_SESSION_STATE to the Copilot CLI's session-state folder (~/.copilot/session-state)"
        )


def unreadable_sessions(root: Path) -> list[tuple[SessionFile, str]]:
    """Session folders under ``root`` whose log exists but cannot be read, with the reason.

    :func:`scan_root` lists only the logs it can read; these would otherwise vanish from every listing, and
    their ids would read as unknown.
    """
    found: list[tuple[SessionFile, str]] = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return found
    for entry in entries:
        try:
            if not entry.is_dir():
                continue
        except OSError:
            continue
        events = os.path.join(entry.path, EVENTS_FILE)  # a Path only for the few that cannot be read
        if entry.is_symlink() and not stays_inside(Path(events), os.path.realpath(root)):
            reason = "its folder is a link that leads out of the session-state folder"
        else:
            reason = unreadable_reason(events)
        if reason:
            found.append((SessionFile(entry.name, Path(events), Path(entry.path)), reason))
    return sorted(found, key=lambda item: str(item[0].path))


def unreadable_reason(events: str | Path) -> str:
    """Why an ``events.jsonl`` that is there cannot be read ("" when it can, or is not there at all)."""
    try:
        st = os.lstat(events)
    except FileNotFoundError:
        return ""
    except OSError as exc:  # the folder cannot be searched
        return f"cannot read its folder: {(exc.strerror or str(exc)).lower()}"
    if stat.S_ISREG(st.st_mode):  # the common case, answered from the one lstat (asked of every session)
        return "" if os.access(events, os.R_OK) else "permission denied"
    path = Path(events)
    if stat.S_ISLNK(st.st_mode) and not path.exists():
        return f"{EVENTS_FILE} is a broken link"
    if stat.S_ISLNK(st.st_mode) and not stays_inside(path, os.path.realpath(path.parent.parent)):
        return f"{EVENTS_FILE} is a link that leads out of the session-state folder"
    if path.is_dir():
        return f"{EVENTS_FILE} is a folder, not a file"
    if not path.is_file():
        return f"{EVENTS_FILE} is not a regular file"
    if not os.access(path, os.R_OK):
        return "permission denied"
    return ""


def resolve(
    targets: Iterable[str | Path], root: Path | None = None, skipped: list[UnreadableError] | None = None
) -> list[SessionFile]:
    """Turn what the user typed into session logs.

    Args:
        targets: Paths (folder, events.jsonl, flat file, session-state root) or session ids / id prefixes.
        root: The session-state root used to look up ids.
        skipped: When given, a session that is there but cannot be read is added to it (a target naming one,
            or one found in a session-state root) instead of being raised or left out without a word.

    Raises:
        SourceError: A target is neither a readable path nor a known session id (or is unreadable and
            ``skipped`` is ``None``).
    """
    out: list[SessionFile] = []
    seen: set[Path] = set()
    for target in targets:
        try:
            found = _resolve_one(Path(target), str(target), root)
        except UnreadableError as exc:
            if skipped is None:
                raise
            skipped.append(exc)
            continue
        if skipped is not None and Path(target).is_dir() and not (Path(target) / EVENTS_FILE).exists():
            bad = unreadable_sessions(Path(target))
            skipped.extend(unreadable_error(session, reason) for session, reason in bad)
            known = {session.path for session, _ in bad}
            found = [session for session in found if session.path not in known]
        for session in found:
            if session.path not in seen:
                seen.add(session.path)
                out.append(session)
    return out


def _resolve_one(path: Path, text: str, root: Path | None) -> list[SessionFile]:
    if path.is_file():
        if not os.access(path, os.R_OK):
            raise UnreadableError(f"cannot read {path}: permission denied")
        return [SessionFile.from_path(path)]
    if path.is_dir():
        if not os.access(path, os.R_OK | os.X_OK):
            raise UnreadableError(f"cannot read {path}: permission denied")
        events = path / EVENTS_FILE
        if events.is_file():
            return [SessionFile(path.name, events, path)]
        if reason := unreadable_reason(events):
            raise UnreadableError(f"cannot read the session log {events}: {reason}")
        sessions = scan_root(path)
        if not sessions:
            raise SourceError(
                f"no Copilot CLI session logs in {path} (expected <id>/events.jsonl or <id>.jsonl)"
            )
        return sessions
    if root is not None and "/" not in text and text:
        matches = [s for s in scan_root(root) if s.session_id.startswith(text)]
        if len(matches) == 1:
            return matches
        if len(matches) > 1:
            names = ", ".join(s.session_id for s in matches[:5])
            raise SourceError(
                f"session id prefix {text!r} is ambiguous: {names}{'…' if len(matches) > 5 else ''}"
            )
        for bad, reason in unreadable_sessions(root):
            if bad.session_id.startswith(text):  # there, but unreadable: say so, not "no such id"
                raise unreadable_error(bad, reason)
        raise SourceError(f"no such file, folder or session id: {text!r} (looked in {root})")
    raise SourceError(f"no such file or folder: {text}")


def unreadable_error(session: SessionFile, reason: str) -> UnreadableError:
    """What a command says of a session that is there but cannot be read (skipped among others)."""
    return UnreadableError(f"cannot read session {session.session_id} ({session.path}): {reason}")


def session_title(workspace: Mapping[str, str]) -> str | None:
    """The session's title from its ``workspace.yaml``: ``summary`` in older CLIs, ``name`` since 1.0.x."""
    return workspace.get("summary") or workspace.get("name") or None


# A workspace.yaml is a few hundred bytes (the session's id, folder, branch, title).
WORKSPACE_MAX_BYTES = 1024 * 1024


def read_workspace(folder: Path | None) -> dict[str, str]:
    """The flat ``key: value`` pairs of a session's ``workspace.yaml`` (see :func:`session_title`); {} if absent,
    or when it is no regular file of at most :data:`WORKSPACE_MAX_BYTES` (said once, see
    :mod:`copilot_otel.sources.sidefiles`)."""
    if folder is None:
        return {}
    text = read_text(folder / "workspace.yaml", "a session's workspace.yaml", WORKSPACE_MAX_BYTES)
    if text is None:
        return {}
    out: dict[str, str] = {}
    for line in text.splitlines():
        match = _YAML_LINE.match(line)
        if match:
            value = match.group(2)
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            out[match.group(1)] = value
    return out


def owner_pids(folder: Path | None) -> list[int]:
    """Process ids named by ``inuse.<pid>.lock`` files: the CLI processes holding the session.

    A pid whose process was created after its lock file was written is left out: the CLI that wrote the lock is
    gone and the system gave its pid to another program (which must not keep the session's prompt open).
    """
    if folder is None:
        return []
    pids = []
    try:
        for entry in os.scandir(folder):
            name = entry.name
            if name.startswith("inuse.") and name.endswith(".lock"):
                try:
                    pid = int(name[len("inuse.") : -len(".lock")])
                    written = entry.stat().st_mtime
                except (ValueError, OSError):
                    continue
                if current.process_alive(pid) and not current.process_alive(pid, started_before=written):
                    continue  # alive, but started after the lock was written: a recycled pid
                pids.append(pid)
    except OSError:
        return []
    return pids


def running_pid(folder: Path | None) -> int | None:
    """The pid of a Copilot CLI that has this session open now, or ``None``.

    Its ``inuse.<pid>.lock`` must name a live process that was not given a dead writer's pid (:func:`owner_pids`),
    and when the CLI's ``inuse.<pid>.hold`` is there, that process must not be one that provably does not hold it
    open (a lock on a home folder shared between machines names a process of another machine; the same proof the
    runaway interrupt asks for, :mod:`copilot_otel.daemon.interrupt`). Where the open files cannot be read, the lock is
    believed.
    """
    if folder is None:
        return None
    for pid in owner_pids(folder):
        if not current.process_alive(pid):
            continue
        hold = folder / f"inuse.{pid}.hold"
        if hold.exists() and current.process_holds_open(pid, hold) is False:
            continue
        return pid
    return None


def pid_alive(pid: int, started_before: float | None = None) -> bool:
    """Whether a process exists (a stale ``inuse`` lock after SIGINT names a dead one); with ``started_before``
    (Unix seconds), also that it is not a newer process that was given a dead one's pid. Never signals it."""
    return current.process_alive(pid, started_before)
