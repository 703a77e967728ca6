"""The exceptions copilot-otel raises, drawn in one place.

The library raises these; only the CLI turns them into one line of text and an exit code::

    CopilotOtelError            anything the user can act on (never a bug)
    ├── ConfigError             a setting has a bad value (names the setting and the value)
    ├── SourceError             a session path is missing, unreadable or unknown
    │   └── UnreadableError     a session log is there but cannot be read (others can go on without it)
    ├── PartialError            what could be read was delivered, but some sessions could not be read
    ├── StateError              the state directory is unusable or locked by another daemon
    └── ExportError             the collector did not accept everything (says what was not delivered)
        ├── EndpointError       the endpoint refused us (credentials, path), not the data
        └── RejectedError       some records were dead-lettered, could not be encoded or were rejected in a
                                partial success; the rest arrived

A Ctrl-C that comes before a command can handle it is no exception of ours: :func:`interrupted` is what it means.
"""

from __future__ import annotations

import sys


def interrupted(argv: list[str]) -> int:
    """A Ctrl-C that came before the command could handle it: one line, and the exit code the README promises.

    ``run`` stops on Ctrl-C and exits 0 (README, "Guarantees"): stopping it that early is no failure, nothing was
    read yet. Every other command exits 130 (128 + SIGINT, what a shell reports for a Ctrl-C): it did not finish.
    """
    print("copilot-otel: interrupted", file=sys.stderr)
    command = next((word for word in argv if not word.startswith("-")), None)
    return 0 if command == "run" else 130


class CopilotOtelError(Exception):
    """Base class: a problem the user can fix; its message is shown as is."""

    exit_code = 1


class ConfigError(CopilotOtelError):
    """A setting has a value we cannot use."""

    exit_code = 2


class SourceError(CopilotOtelError):
    """A session log path given by the user cannot be read or found."""

    exit_code = 3


class UnreadableError(SourceError):
    """A session log exists but cannot be read (permissions, a folder named ``events.jsonl``, an I/O error).

    Alone, it is a :class:`SourceError`; among other sessions, the command skips it, says so and goes on.
    """


class PartialError(CopilotOtelError):
    """Some sessions could not be read and were skipped; everything else was read (and delivered).

    Its own code, so that a script tells "part of it" (8) from "nothing" (3, :class:`SourceError`).
    """

    exit_code = 8


class StateError(CopilotOtelError):
    """The state directory cannot be used (unwritable, corrupt beyond repair, or locked)."""

    exit_code = 4


class ExportError(CopilotOtelError):
    """The collector did not accept all the telemetry within the allowed time."""

    exit_code = 5


class EndpointError(ExportError):
    """The endpoint refused us, not the data (credentials, a wrong path): nothing was dead-lettered."""

    exit_code = 6


class RejectedError(ExportError):
    """Everything was sent, but some records were permanently rejected (dead-lettered, or counted from a partial
    success) or could not be encoded: the rest was delivered."""

    exit_code = 7
