"""The ``copilot-otel`` console script: the ``statusline`` hook answered on a short path, everything else by
:func:`copilot_otel.cli.main`.

Claude Code runs its statusLine command after every message and waits for its line. Through the CLI, that command
paid for the whole command line's start-up (the settings table, the parser, the platform's threads and locks):
about 70 ms on top of the interpreter's own 25. Here ``copilot-otel statusline`` with at most ``--state-dir`` and
``--config`` finds the state directory by the settings' own rule (:mod:`copilot_otel.settings.locate`) and prints
the line (:func:`copilot_otel.commands.statusline.answer`, the function the CLI's ``statusline`` calls too). Any
other word, flag or a state directory the quick reading cannot settle goes to the CLI, which says what is wrong.
"""

from __future__ import annotations

import sys

from .common.errors import interrupted

__all__ = ["hook_flags", "main"]

# The flags the hook's short path takes (each with a value): anything else is the CLI's to parse.
_HOOK_FLAGS = ("--state-dir", "--config")


def hook_flags(args: list[str]) -> dict[str, str] | None:
    """The flags after ``statusline`` as ``{flag: value}`` when they are only :data:`_HOOK_FLAGS` (``--flag v``
    or ``--flag=v``), else ``None``."""
    flags: dict[str, str] = {}
    words = iter(args)
    for word in words:
        flag, equals, value = word.partition("=")
        if flag not in _HOOK_FLAGS or flag in flags:
            return None
        if not equals:
            value = next(words, "")
        if not value.strip() or value.startswith("-"):  # a value argparse would refuse or take otherwise
            return None
        flags[flag] = value
    return flags


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        if args[:1] == ["statusline"]:
            flags = hook_flags(args[1:])
            if flags is not None:
                from .commands.statusline import hook

                code = hook(flags)
                if code is not None:
                    return code
        from .cli import main as cli_main
    except KeyboardInterrupt:
        return interrupted(args)
    return cli_main(args)
