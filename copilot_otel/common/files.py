"""Private files written whole: the state directory's files (checkpoints' status, dead letters' count and rotation,
the service's environment file) are written as a new 0600 file and renamed into place, never through a link.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from .._platform import current

logger = logging.getLogger(__name__)


def write_new_file(path: Path, payload: bytes, *, sync: bool = False) -> None:
    """Write ``payload`` to a new file at ``path`` (mode 0600), a temporary about to be renamed into place.

    The file is created exclusively and never through a link: whatever has the name already (a temporary a crash
    left, a link someone planted) is removed first, with a warning when it was a link, whose target stays
    untouched.

    Raises:
        OSError: It cannot be created or written.
    """
    try:
        fd = current.open_private(path, os.O_WRONLY, exclusive=True)
    except FileExistsError:
        if path.is_symlink():
            logger.warning(
                "removed the symbolic link %s (to %s): copilot-otel never writes through links in its state "
                "directory",
                path,
                os.readlink(path),
            )
        path.unlink()
        fd = current.open_private(path, os.O_WRONLY, exclusive=True)
    try:
        view = memoryview(payload)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
