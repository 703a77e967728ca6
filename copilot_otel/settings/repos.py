"""``--repo``: one repository's sessions, named as a user names it, matched against what each agent records.

Each agent records where it ran differently: Copilot CLI the repository (``owner/name``), its git root and the
working folder; Claude Code, Codex and Gemini CLI the working folder (and Codex the git origin). So a repository is
matched by name (``owner/name``, or only ``name``: the repository's, or the last part of its git root or working
folder) or by path (the working folder or git root at or under it). A path is text that starts like one (``/``,
``~``, ``.``, a drive letter) or names a folder that exists here; anything else is a name.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

__all__ = ["RepoFilter"]

_DRIVE = re.compile(r"^[A-Za-z]:[\\/]")


def _norm(path: str) -> str:
    """A path compared as text: forward slashes, no trailing one (logs of Windows and POSIX agents alike)."""
    return path.replace("\\", "/").rstrip("/") or "/"


def _last_part(path: str | None) -> str | None:
    return _norm(path).rsplit("/", 1)[-1].lower() if path else None


@dataclass(frozen=True, slots=True)
class RepoFilter:
    """A ``--repo`` value, read once: by ``name`` (lower case) or by ``path`` (absolute, normalised).

    Attributes:
        given: The text as the user gave it (for titles and messages).
    """

    given: str
    name: str | None = None
    path: str | None = None

    @classmethod
    def parse(cls, text: str) -> RepoFilter:
        """The filter ``text`` names (a path is made absolute against the current folder, ``~`` expanded)."""
        value = text.strip()
        if _DRIVE.match(value):  # a Windows agent's folder: absolute already, wherever this runs
            return cls(text, path=_norm(value))
        if value.startswith(("/", "~", ".", "\\")) or os.path.isdir(value):
            return cls(text, path=_norm(os.path.abspath(os.path.expanduser(value))))
        return cls(text, name=value.strip("/").lower())

    def matches(self, repository: str | None, git_root: str | None, cwd: str | None) -> bool:
        """Whether a session with these facts (any may be unknown) is of this repository."""
        if self.path is not None:
            inside = self.path.rstrip("/") + "/"
            return any(
                where is not None and (_norm(where) == self.path or _norm(where).startswith(inside))
                for where in (git_root, cwd)
            )
        name = self.name
        if repository and (repository.lower() == name or repository.lower().endswith("/" + (name or ""))):
            return True
        return "/" not in (name or "") and name in (_last_part(git_root), _last_part(cwd))
