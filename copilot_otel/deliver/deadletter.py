"""Dead letters: records a working collector permanently rejected, kept so they can be sent again exactly.

A record is dead-lettered when the collector refuses *it* (HTTP 400, a ``partial_success`` rejection, gRPC
``INVALID_ARGUMENT``) after the sender bisected its batch down to it, or when the encoder cannot write one of its
values. Each becomes one JSON line in ``<state_dir>/dead-letter.jsonl``::

    {"id": "3f0c...", "at_ns": 1764600000000000000, "signal": "traces", "reason": "HTTP 400 ...",
     "destination": "OTLP/HTTP http://collector:4318/v1/traces",              # who refused it (no credentials)
     "record": {"trace_id": "...", "span_id": "...", "name": "...", ...},      # what it was, for people
     "request": "CpYBCh..."}                                                   # base64 OTLP request, or null

``request`` is the serialized ``Export{Trace,Logs}ServiceRequest`` holding that one record with the resource it
was sent with: ``copilot-otel dead-letters resend`` (:mod:`copilot_otel.commands.dead_letters`) posts these bytes as they are, so a re-sent span is
byte-for-byte the span the collector refused (same ids, so a backend that took it meanwhile keeps one copy). The
bytes are kept rather than the source file and offset because a record is folded from many lines (a prompt's span
needs the lines since the prompt began), the CLI may have deleted or rewritten the log since, and the request is
self-contained. A record the encoder could not write has ``request: null``: it is listed, never re-sent.

``destination`` is where the record was going, with any credentials in the URL hidden: ``resend`` sends it there
again and refuses (one line, nothing removed) when the configured destination is another one, such as the local
``otlp.jsonl`` a shell without ``OTEL_EXPORTER_OTLP_ENDPOINT`` writes to, unless told ``--to-current``. Entries
written before destinations were kept have none and go to the configured destination.

The file is bounded: past :data:`MAX_BYTES` it is rotated to ``dead-letter.jsonl.1`` (listed and re-sent like the
current one) by the :class:`~copilot_otel.deliver.sink.RotatingFile` that also rotates ``otlp.jsonl``; the
generation that falls off is counted in ``dead-letter.discarded`` (a number, added to, never reset but by
``clear``). So the dead letters never hold more than about twice :data:`MAX_BYTES` on disk.

``resend`` first renames the file to ``dead-letter.jsonl.resending`` (a daemon appending meanwhile starts a new
file), sends each record once, and appends what was not accepted back to ``dead-letter.jsonl``; an interrupted
resend leaves ``.resending`` behind, and the next ``list``/``resend`` includes it. A lock makes two resends wait for
each other's end.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from .._platform import current
from ..common import display
from ..common.files import write_new_file
from ..common.jsonobject import json_object
from .sink import RotatingFile

__all__ = [
    "DEAD_LETTER_FILE",
    "MAX_BYTES",
    "DeadLetter",
    "DeadLetters",
    "dead_letter_path",
    "describe",
    "redacted_destination",
]

logger = logging.getLogger(__name__)

DEAD_LETTER_FILE = "dead-letter.jsonl"
# One generation's size; with the rotated one, the dead letters hold at most about twice this on disk.
MAX_BYTES = 32 * 1024 * 1024
_RESENDING_SUFFIX = ".resending"
_DISCARDED_SUFFIX = ".discarded"  # replaces ".jsonl": dead-letter.discarded
_LOCK_SUFFIX = ".lock"


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """One dead-lettered record as read back from the file.

    Attributes:
        id: Stable id of the entry (a digest of the request bytes, or of the record when there are none).
        signal: ``traces`` or ``logs``.
        reason: Why it was dead-lettered (the collector's answer, or why it could not be encoded).
        record: A readable summary of the record (ids, name, times, attributes).
        request: The OTLP request holding just this record, exactly as sent; ``None`` if it cannot be encoded.
        line: The entry's JSON line as stored (written back unchanged when it is kept).
        destination: Where it was refused (:func:`redacted_destination`); "" in entries older than the field.
    """

    id: str
    signal: str
    reason: str
    record: dict[str, Any]
    request: bytes | None
    line: bytes
    destination: str = ""

    @property
    def name(self) -> str:
        """The span's name or the log event's name."""
        return str(self.record.get("name") or self.record.get("event_name") or "?")

    @property
    def session(self) -> str:
        from ..projections.genai import (
            CONVERSATION,  # start-up: status reads this file without the projections
        )

        attributes = self.record.get("attributes")
        return str(attributes.get(CONVERSATION, "?")) if isinstance(attributes, dict) else "?"


class DeadLetters:
    """The dead-letter file of one state directory (or any path): append, count, read, rewrite.

    Args:
        path: ``<state_dir>/dead-letter.jsonl``.
        max_bytes: Size at which the file is rotated (see the module docstring).
    """

    def __init__(self, path: str | os.PathLike[str], max_bytes: int = MAX_BYTES) -> None:
        self.path = Path(path)
        self.max_bytes = max_bytes
        # One rotated generation; each entry on disk before append returns (the caller counts it as kept); one
        # writer at a time per process (resends take their own lock), so no lock file of the writers.
        self._file = RotatingFile(
            self.path, max_bytes, keep=1, shared=False, sync=True, on_drop=self._discard
        )
        self._count_cache: tuple[tuple[tuple[int, int] | None, ...], int] | None = None

    # -- files -------------------------------------------------------------------------------------------------
    @property
    def rotated(self) -> Path:
        return self._file.rotated(1)

    @property
    def resending(self) -> Path:
        return self.path.with_name(self.path.name + _RESENDING_SUFFIX)

    @property
    def discarded_file(self) -> Path:
        return self.path.with_name(self.path.stem + _DISCARDED_SUFFIX)

    def _files(self) -> list[Path]:
        """Oldest first: an interrupted resend, the rotated generation, the current one."""
        return [self.resending, self.rotated, self.path]

    # -- writing -----------------------------------------------------------------------------------------------
    def append(
        self, signal: str, reason: str, record: dict[str, Any], request: bytes | None, destination: str = ""
    ) -> None:
        """Add one entry (one ``write`` in append mode, so concurrent writers never interleave a line).

        ``destination`` is the transport's description; it is stored without the credentials a URL may hold.

        Raises:
            OSError: The file cannot be written (the caller logs it).
        """
        digest = hashlib.blake2b(request or repr(record).encode(), digest_size=8).hexdigest()
        entry = {
            "id": digest,
            "at_ns": time.time_ns(),
            "signal": signal,
            "reason": reason,
            "record": record,
            "request": base64.b64encode(request).decode() if request is not None else None,
            "destination": redacted_destination(destination),
        }
        try:
            line = orjson.dumps(entry, default=str)
        except TypeError:  # orjson refuses integers beyond 64 bits; the json module writes them
            line = json.dumps(entry, default=str).encode()
        self._file.append(line + b"\n")

    def _discard(self, rotated: Path) -> None:
        """The generation before the current one is about to go: count it as discarded, and say so."""
        lost = _count_lines(rotated)
        if lost:
            self._add_discarded(lost)
            logger.warning(
                "the dead-letter file %s reached %d bytes: %d older dead letters were discarded "
                "(re-send or clear them with 'copilot-otel dead-letters')",
                self.path,
                self.max_bytes,
                lost,
            )

    def _add_discarded(self, n: int) -> None:
        total = self.discarded() + n
        tmp = self.discarded_file.with_name(self.discarded_file.name + ".tmp")
        write_new_file(tmp, f"{total}\n".encode())
        current.replace(tmp, self.discarded_file)

    # -- reading -----------------------------------------------------------------------------------------------
    def count(self) -> int:
        """How many entries the files hold now (cached while no file changed: the daemon asks every few seconds)."""
        files = self._files()
        key = tuple(_stat_key(p) for p in files)
        if self._count_cache is not None and self._count_cache[0] == key:
            return self._count_cache[1]
        try:
            n = sum(_count_lines(p) for p, k in zip(files, key, strict=True) if k is not None)
        except OSError:  # (out of descriptors, say): the last count, until the files can be read again
            return self._count_cache[1] if self._count_cache is not None else 0
        self._count_cache = (key, n)
        return n

    def discarded(self) -> int:
        """Entries dropped by rotation since the last ``clear``."""
        try:
            return int(self.discarded_file.read_text().strip() or 0)
        except (OSError, ValueError):
            return 0

    def entries(self) -> Iterator[DeadLetter]:
        """Every entry, oldest first; lines that cannot be read back are skipped (and logged)."""
        for path in self._files():
            yield from _read(path)

    # -- resend and clear --------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def claimed(self) -> Iterator[list[DeadLetter]]:
        """Take every entry out of the files for a resend; what the caller leaves in the list is written back.

        Yields the entries (oldest first); on exit the ones still in the list are appended to the current file and
        the claimed copies are removed. Raises :class:`~._platform.LockHeld` when another resend is running.
        """
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        lock = current.lock_exclusive(self.path.with_name(self.path.name + _LOCK_SUFFIX))
        try:
            if not self.resending.exists():
                # The rotated generation first, then the current file: both go into the claim, in order.
                with contextlib.suppress(FileNotFoundError):
                    current.replace(self.path, self.resending)
                if self.rotated.exists():
                    rest = self.resending.read_bytes() if self.resending.exists() else b""
                    tmp = self.resending.with_name(self.resending.name + ".tmp")
                    write_new_file(tmp, self.rotated.read_bytes() + rest)
                    current.replace(tmp, self.resending)
                    self.rotated.unlink()
            claimed = list(_read(self.resending))
            kept = claimed  # the caller removes what it delivered
            yield kept
            if kept:
                self._file.append(b"".join(entry.line for entry in kept))
            with contextlib.suppress(FileNotFoundError):
                self.resending.unlink()
            self._count_cache = None
        finally:
            lock.release()

    def clear(self) -> int:
        """Delete every dead letter and the discarded count; returns how many entries there were."""
        n = self.count()
        for path in (*self._files(), self.discarded_file):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        self._count_cache = None
        return n


def _stat_key(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns)


def _count_lines(path: Path) -> int:
    try:
        with open(path, "rb") as fh:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))
    except (FileNotFoundError, NotADirectoryError):
        return 0


def _read(path: Path) -> Iterator[DeadLetter]:
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed below; a generator must not hold it past the end
    except (FileNotFoundError, NotADirectoryError):
        return
    with fh:
        for number, line in enumerate(fh, 1):
            try:
                doc = json_object(line)
                request, record = doc.get("request"), doc.get("record")
                yield DeadLetter(
                    str(doc.get("id") or hashlib.blake2b(line, digest_size=8).hexdigest()),
                    str(doc["signal"]),
                    str(doc.get("reason", "")),
                    record if isinstance(record, dict) else {},
                    base64.b64decode(request) if isinstance(request, str) else None,
                    line if line.endswith(b"\n") else line + b"\n",
                    str(doc.get("destination") or ""),
                )
            except (ValueError, KeyError, TypeError):  # NotAJsonObject, no signal, a bad base64
                logger.warning("%s line %d is not a dead-letter entry; kept as it is", path, number)
                yield DeadLetter(
                    "?", "?", "unreadable", {}, None, line if line.endswith(b"\n") else line + b"\n"
                )


def redacted_destination(description: str) -> str:
    """A transport's description (``OTLP/HTTP https://user:token@host/v1/traces?key=…``) with the credentials
    a URL may carry (userinfo, query string) hidden: it is written to disk and printed."""
    return " ".join(display.url(word) if "://" in word else word for word in description.split(" "))


# ------------------------------------------------------------------------ where they are, what status says
def dead_letter_path(state_dir: Path) -> Path:
    """Where the daemon and ``replay`` write the dead letters of ``state_dir``."""
    return state_dir / DEAD_LETTER_FILE


def describe(state_dir: Path) -> str | None:
    """``"N dead letters in PATH"`` (with the discarded count), or ``None`` when there are none."""
    letters = DeadLetters(dead_letter_path(state_dir))
    try:
        n, lost = letters.count(), letters.discarded()
    except OSError:  # unreadable: the state dir check says so
        return None
    if not n and not lost:
        return None
    text = f"{n:,} dead letter{'s' if n != 1 else ''} in {letters.path}"
    if lost:
        text += f" ({lost:,} older ones discarded when the file reached its size cap)"
    return text
