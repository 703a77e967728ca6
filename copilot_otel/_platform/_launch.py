"""``python -m copilot_otel._platform._launch SETTINGS LOG``: what the Windows scheduled task runs.

Task Scheduler can start a program with arguments but cannot give it environment variables, and discards its
output. This loads the settings ``copilot-otel service install`` saved (a JSON object of ``OTEL_*`` and
``COPILOT_OTEL_*`` variables, absent = none), sends the daemon's log to ``LOG`` and runs ``copilot-otel run``.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    settings_file, log_file = argv
    try:
        settings = json.loads(Path(settings_file).read_text(encoding="utf-8"))
    except FileNotFoundError:
        settings = {}
    os.environ.update({str(k): str(v) for k, v in settings.items()})
    Path(log_file).parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "a", encoding="utf-8", buffering=1) as log:
        sys.stdout = sys.stderr = log
        # Run the program as ``python -m copilot_otel run`` would, rather than importing the CLI: this launcher
        # wraps the process (environment, output), it is no layer of the package that calls into the commands.
        sys.argv = ["copilot-otel", "run"]
        try:
            runpy.run_module("copilot_otel", run_name="__main__", alter_sys=True)
        except SystemExit as stop:
            return stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
