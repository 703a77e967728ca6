"""``report``'s figures per session, kept on disk so that a report reads again only the logs that changed.

A report folds every session log it counts (the whole agent loop: ~85 % of its time) into a
:class:`~copilot_otel.commands.report.SessionPart`: what the session adds to any report, before the cut (period,
zone, window, agent, repository) is applied. A part depends only on the log's bytes (and its sub-agents' files),
the fold settings and this package's code, so it can be kept: here, one row per log in ``report-cache.db`` in the
state directory (SQLite, as the daemon's ``state.db``), with the log's *signature* (size, mtime and inode of the
log and of every file read with it: Claude Code's and Gemini's sub-agent files, Codex's child threads). The next
report ``stat`` s each log, and a log whose signature is the one stored costs that ``stat`` and its row; only the
others are read again (by worker processes as before when they are many, each storing its share). As ``live``
keeps its logs' figures in memory between refreshes, but across runs.

The whole cache is one *fingerprint* of what could change a part without changing a log (:func:`fingerprint`):
this package's version and its source files' sizes and mtimes (a development checkout edited in place), the row
format, the fold settings, and the fields of the part's classes. A different fingerprint empties the cache (the
next report reads everything, then fills it again).

A cache never makes a report fail: a row that does not decode is a miss; a file that is not a database, or damaged,
is renamed ``report-cache.db.corrupt-<UTC time>`` (as ``state.db`` is) and a new one started; one that cannot be
opened or written (a read-only state directory, a full disk, another program holding a lock past
:data:`_BUSY_TIMEOUT_S`) is said once at debug level and the report reads the logs as if there were none. Concurrent
reports share it: SQLite's WAL lets readers read while one writes, and each writer's rows go in one transaction
that first checks the fingerprint (a report of other settings never stores its parts under this one's). Rows are
JSON (never pickle: a state directory another user could write is refused anyway, but a file we decode must not
be able to run code). Rows of logs no longer on disk are deleted at most once every :data:`PRUNE_EVERY_S`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import hashlib
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Generic, TypeVar

import orjson

from .._platform import current
from .._version import __version__
from ..library import sub_logs
from ..loop.agentloop import FoldSettings
from ..sources.sessions import SessionFile

__all__ = ["CACHE_FILE", "FORMAT", "PRUNE_EVERY_S", "PartCache", "Recalled", "fingerprint", "signature"]

logger = logging.getLogger(__name__)

CACHE_FILE = "report-cache.db"
# The rows' layout: a change of how a part is written (not of its fields, which the fingerprint has) bumps it.
FORMAT = 1
# Rows of logs that are gone are looked for this seldom (a stat per row not in the report: cheap, not free).
PRUNE_EVERY_S = 24 * 3600.0
# A report waits this long for another one's write before going on without the cache (it never waits longer).
_BUSY_TIMEOUT_S = 2.0
# Integers past 64 bits (a prompt's 128-bit trace id) are written as their decimal text (:func:`_big`).
_INT64_MAX = 2**63 - 1
_PACKAGE = Path(__file__).resolve().parent.parent

PartT = TypeVar("PartT")


def fingerprint(settings: FoldSettings, *classes: type, package: Path = _PACKAGE) -> str:
    """What a part was computed under: this package (version, and the sizes and mtimes of the source files under
    ``package``, so an edit of a development checkout counts), :data:`FORMAT`, ``settings``, the price table's
    version and the fields of ``classes`` (the part's and its items'), as a short hex digest."""
    hasher = hashlib.sha256()
    hasher.update(f"{FORMAT}\0{__version__}\0{_stable(settings)}\0{_price_table()}\0".encode())
    for cls in classes:
        fields = [(f.name, str(f.type)) for f in dataclasses.fields(cls)]
        hasher.update(f"{cls.__qualname__}{fields}\0".encode())
    for folder, _, names in sorted(os.walk(package)):
        for name in sorted(names):
            if name.endswith(".py"):
                with contextlib.suppress(OSError):
                    st = os.stat(os.path.join(folder, name))
                    hasher.update(f"{folder}/{name}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    return hasher.hexdigest()[:32]


def _price_table() -> str:
    """The installed price table's version: a part's per-token cost is priced with it, so another release of the
    table (new prices, a model it did not know) makes every cached part stale. Read from the package's metadata,
    not by importing it (pydantic: the most part of a second)."""
    from importlib import metadata

    try:
        return f"genai-prices {metadata.version('genai-prices')}"
    except metadata.PackageNotFoundError:
        return "no price table"


def _stable(value: object) -> str:
    """``value`` as text that is the same in every process (a set's ``repr`` follows string hashing, which is
    salted per process)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        inner = ",".join(f"{f.name}={_stable(getattr(value, f.name))}" for f in dataclasses.fields(value))
        return f"{type(value).__name__}({inner})"
    if isinstance(value, (set, frozenset)):
        return "{" + ",".join(sorted(_stable(v) for v in value)) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_stable(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(sorted(f"{_stable(k)}:{_stable(v)}" for k, v in value.items())) + "}"
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    return repr(value)


def signature(session: SessionFile) -> str | None:
    """The log's size, mtime and inode, and those of every file read with it (:func:`copilot_otel.library.sub_logs`),
    as one line of text; ``None`` when one cannot be ``stat`` ed (the read that follows says why)."""
    out = []
    try:
        for path in (session.path, *sub_logs(session)):
            st = os.stat(path)
            out.append(f"{path}\t{st.st_size}\t{st.st_mtime_ns}\t{st.st_ino}")
    except OSError:
        return None
    return "\n".join(out)


def _identity(session: SessionFile) -> str:
    """How the log was found (its id and agent as discovery named them): the same file found another way (by
    path rather than by folder) may be another session's part."""
    return f"{session.session_id}\t{session.agent or ''}"


@dataclasses.dataclass(slots=True)
class Recalled(Generic[PartT]):
    """What the cache had for a report's logs.

    Attributes:
        kept: How many logs did not change (their parts were given to ``add``).
        todo: The logs to read (changed, new, or not in the cache).
        signatures: Each of those logs' signature, taken before it is read (a log that grows while it is read is
            then read again next time, never kept with figures older than its signature says).
    """

    kept: int = 0
    todo: list[SessionFile] = dataclasses.field(default_factory=list)
    signatures: dict[Path, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True, slots=True)
class PartCache(Generic[PartT]):
    """The cache file, the fingerprint its rows must have been written under, and the part's classes (picklable:
    worker processes store the parts of the logs they read).

    Attributes:
        path: ``report-cache.db`` in the state directory.
        fingerprint: :func:`fingerprint` of the running code and settings.
        part_type, item_type: The part's dataclass, and its items' (the part's one list field holds them).
        records: The dataclasses a field may hold (an item's cost: :class:`~copilot_otel.projections.prices.Cost`
            or ``Unpriced``): written as JSON objects, each read back as the one whose field names it has.
    """

    path: Path
    fingerprint: str
    part_type: type[PartT]
    item_type: type[Any]
    records: tuple[type[Any], ...] = ()

    def recall(self, found: Sequence[SessionFile], add: Callable[[PartT, int], None]) -> Recalled[PartT]:
        """Give ``add`` each log's part (and its lines with data) when its signature is the one stored, as it is
        decoded (a report adds it up and drops it: 100,000 events' parts held at once make Python's collector
        walk a million objects again and again); the other logs go to :attr:`Recalled.todo`. Never raises: a
        cache that cannot be read is empty."""
        rows, pruned_at = self._load()
        out: Recalled[PartT] = Recalled()
        for session in found:
            sig = signature(session)
            row = rows.get(str(session.path)) if sig is not None else None
            part = None
            if row is not None and row[0] == _identity(session) and row[1] == sig:
                part = self._decode(row[3])
            if part is not None and row is not None:
                add(part, row[2])
                out.kept += 1
                continue
            out.todo.append(session)
            if sig is not None:
                out.signatures[session.path] = sig
        if rows and time.time() - pruned_at >= PRUNE_EVERY_S:
            wanted = {str(s.path) for s in found}
            self._prune([p for p in rows if p not in wanted and not os.path.lexists(p)])
        logger.debug(
            "report cache %s: %d of %d sessions kept, %d to read",
            self.path,
            out.kept,
            len(found),
            len(out.todo),
        )
        return out

    def keep(self, read: Iterable[tuple[SessionFile, str, PartT, int]]) -> None:
        """Store the parts of logs just read, each with the signature taken before reading it and its lines, in one
        transaction (none when the file's fingerprint is another report's now). Never raises."""
        rows = []
        for session, sig, part, lines in read:
            blob = self._encode(part)
            if blob is not None:
                rows.append((str(session.path), _identity(session), sig, lines, blob))
        if not rows:
            return

        def store(conn: sqlite3.Connection) -> None:
            if self._stored_fingerprint(conn) == self.fingerprint:
                conn.executemany(
                    "INSERT OR REPLACE INTO parts (path, ident, signature, lines, part) VALUES (?, ?, ?, ?, ?)",
                    rows,
                )

        self._write("store", store)

    # -- rows ------------------------------------------------------------------------------------------------
    def _encode(self, part: PartT) -> bytes | None:
        """The part's fields in order, its items by column: for each of the items' fields, its distinct values
        and, per item, the index of its value (a session's items share a few models, trace ids and figures; small
        integers are what JSON decodes fastest). ``None`` for a value JSON cannot hold (that part is not kept)."""
        items_at = _readers(self.part_type, self.item_type, self.records)[1]
        values: list[Any] = [_wide(getattr(part, f.name)) for f in dataclasses.fields(part)]  # type: ignore[arg-type]
        items = values[items_at]
        columns = []
        item_from = _readers(self.part_type, self.item_type, self.records)[2]
        for field, read in zip(dataclasses.fields(self.item_type), item_from, strict=True):
            table: dict[bytes, int] = {}
            distinct: list[Any] = []
            indexes = []
            try:
                for item in items:
                    value = _wide(getattr(item, field.name))
                    key = orjson.dumps(value)  # not the value: 1 == 1.0 == True, and their JSON differs
                    at = table.get(key)
                    if at is None:
                        at = table[key] = len(distinct)
                        distinct.append(_as_object(value) if read is _pairs else value)
                    indexes.append(at)
            except orjson.JSONEncodeError:
                return None
            columns.append([distinct, indexes])
        values[items_at] = [len(items), columns]
        try:
            return orjson.dumps(values)
        except orjson.JSONEncodeError:
            return None

    def _decode(self, blob: object) -> PartT | None:
        """A row's part, ``None`` when it is not one (a miss: the log is read again)."""
        try:
            values = orjson.loads(blob)  # type: ignore[arg-type]
            part_from, items_at, item_from = _readers(self.part_type, self.item_type, self.records)
            if not isinstance(values, list) or len(values) != len(part_from):
                return None
            args = [read(value) for read, value in zip(part_from, values, strict=True)]
            count, columns = values[items_at]
            if len(columns) != len(item_from):
                return None
            full = []
            for read, (distinct, indexes) in zip(item_from, columns, strict=True):
                if len(indexes) != count:
                    return None
                table = [read(value) for value in distinct]
                full.append(list(map(table.__getitem__, indexes)))
            args[items_at] = list(map(self.item_type, *full)) if count else []
            return self.part_type(*args)
        except (orjson.JSONDecodeError, TypeError, ValueError, IndexError, KeyError):
            return None

    # -- the file --------------------------------------------------------------------------------------------
    def _load(self) -> tuple[dict[str, tuple[str, str, int, bytes]], float]:
        """Every row by log path, and when rows of logs gone were last deleted; no rows (and the file emptied)
        when written under another fingerprint."""
        conn = self._connect()
        if conn is None:
            return {}, 0.0
        try:
            if self._stored_fingerprint(conn) != self.fingerprint:
                with conn:
                    conn.execute("BEGIN IMMEDIATE")
                    conn.execute("DELETE FROM parts")
                    conn.execute(
                        "INSERT OR REPLACE INTO meta (key, value) VALUES ('fingerprint', ?)",
                        (self.fingerprint,),
                    )
                return {}, 0.0
            rows = conn.execute("SELECT path, ident, signature, lines, part FROM parts").fetchall()
            pruned = conn.execute("SELECT value FROM meta WHERE key = 'pruned'").fetchone()
        except sqlite3.Error as exc:
            conn.close()
            if _is_damage(exc):
                self._set_aside(exc)
            else:
                self._failed("read", exc)
            return {}, 0.0
        finally:
            conn.close()  # (again: closing twice is allowed)
        try:
            pruned_at = float(pruned[0]) if pruned is not None else 0.0
        except (TypeError, ValueError):
            pruned_at = 0.0
        return {
            str(path): (ident, sig, lines if isinstance(lines, int) else 0, part)
            for path, ident, sig, lines, part in rows
        }, pruned_at

    def _connect(self) -> sqlite3.Connection | None:
        """The database, created 0600 (never through a link) with its tables; ``None`` when it cannot be (said
        once), or when a damaged file was set aside and a new one cannot be made either."""
        for attempt in range(2):
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                problem = current.private_dir_problem(self.path.parent)
                if problem is not None:
                    _say_once(f"report cache not used: {problem}")
                    return None
                os.close(current.open_private(self.path, os.O_RDWR))
                conn = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_S, isolation_level=None)
            except (OSError, sqlite3.Error) as exc:
                self._failed("open", exc)
                return None
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute(
                    "PRAGMA synchronous=NORMAL"
                )  # a cache: a crash may lose the last rows, never mix them
                conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS parts (path TEXT PRIMARY KEY, ident TEXT NOT NULL, "
                    "signature TEXT NOT NULL, lines INTEGER NOT NULL, part BLOB NOT NULL)"
                )
                return conn
            except sqlite3.Error as exc:
                conn.close()
                if attempt or not _is_damage(exc):
                    self._failed("open", exc)
                    return None
                self._set_aside(exc)
        return None

    def _stored_fingerprint(self, conn: sqlite3.Connection) -> str | None:
        row = conn.execute("SELECT value FROM meta WHERE key = 'fingerprint'").fetchone()
        return row[0] if row is not None and isinstance(row[0], str) else None

    def _prune(self, gone: Sequence[str]) -> None:
        """Delete the rows of logs no longer on disk, and note when."""

        def delete(conn: sqlite3.Connection) -> None:
            conn.executemany("DELETE FROM parts WHERE path = ?", [(p,) for p in gone])
            conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('pruned', ?)", (str(time.time()),))

        self._write("prune", delete)

    def _write(self, what: str, change: Callable[[sqlite3.Connection], None]) -> None:
        """Make ``change`` in one transaction (a report's rows all or none); never raises."""
        conn = self._connect()
        if conn is None:
            return
        try:
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                change(conn)
        except sqlite3.Error as exc:
            self._failed(what, exc)
        finally:
            conn.close()

    def _set_aside(self, exc: sqlite3.Error) -> None:
        """Rename a damaged file (and its WAL files) out of the way, as ``state.db``'s corruption handling does."""
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        target = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
        n = 1
        while target.exists():
            n += 1
            target = self.path.with_name(f"{self.path.name}.corrupt-{stamp}-{n}")
        try:
            current.replace(self.path, target)
            for suffix in ("-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    current.replace(self.path.with_name(self.path.name + suffix), f"{target}{suffix}")
        except OSError as err:
            _say_once(f"report cache {self.path} is damaged ({exc}) and cannot be set aside: {err}")
            return
        logger.warning("report cache %s was damaged (%s): kept as %s, rebuilt", self.path, exc, target.name)

    def _failed(self, what: str, exc: Exception) -> None:
        _say_once(f"report cache {self.path}: cannot {what} it ({exc}); reading the logs")


_said: set[str] = set()


def _say_once(message: str) -> None:
    """A cache that cannot be used is no error of the report's: said once per process, at debug level."""
    if message not in _said:
        _said.add(message)
        logger.debug("%s", message)


def _is_damage(exc: sqlite3.Error) -> bool:
    """A file that is not a database, or a damaged one (SQLITE_CORRUPT, SQLITE_NOTADB), or tables not ours."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and code & 0xFF in (11, 26):  # SQLITE_CORRUPT, SQLITE_NOTADB
        return True
    text = str(exc)
    return "not a database" in text or "malformed" in text or "no such column" in text


def _wide(value: Any) -> Any:
    """An integer past 64 bits as its decimal text (orjson's numbers stop there); tuples become arrays."""
    if type(value) is int and not -_INT64_MAX - 1 <= value <= _INT64_MAX:
        return str(value)
    return value


Reader = Callable[[Any], Any]


_READERS: dict[tuple[type, type, tuple[type, ...]], tuple[list[Reader], int, list[Reader]]] = {}


def _readers(
    part_type: type, item_type: type, records: tuple[type, ...] = ()
) -> tuple[list[Reader], int, list[Reader]]:
    """How each field of a part, and of an item, comes back from JSON (by its annotation: a tuple of pairs, a
    tuple, an integer that may be past 64 bits, one of ``records``, else as JSON gave it; :func:`_narrow` for any
    other container), and which of the part's fields is its items' list."""
    known = _READERS.get((part_type, item_type, records))
    if known is None:
        part_fields = dataclasses.fields(part_type)
        items_at = next(i for i, f in enumerate(part_fields) if str(f.type).startswith("list["))
        item_fields = dataclasses.fields(item_type)
        part_from = [_reader(str(f.type), records) for f in part_fields]
        part_from[items_at] = _same  # read item by item
        known = (
            part_from,
            items_at,
            [_reader(str(f.type), records) for f in item_fields],
        )
        _READERS[(part_type, item_type, records)] = known
    return known


def _reader(annotation: str, records: tuple[type, ...] = ()) -> Reader:
    named = [cls for cls in records if cls.__name__ in annotation.replace("|", " ").split()]
    if named:
        by_fields = {frozenset(f.name for f in dataclasses.fields(cls)): cls for cls in named}

        def record(value: Any) -> Any:
            """A record written as a JSON object (orjson writes a dataclass so): the one with its field names."""
            if type(value) is dict:
                return by_fields[frozenset(value)](**value)  # a KeyError for any other shape: a miss
            return value

        return record
    if annotation.startswith("tuple[tuple[") and annotation.count("[") == 2:
        return _pairs
    if annotation.startswith("tuple[") and annotation.count("[") == 1:
        return _tuple
    if annotation == "int | None":
        return _big
    if annotation in ("int", "float", "float | None", "str", "str | None", "bool", "bool | None"):
        return _same  # a plain int is a time or a count, never past 64 bits
    return _narrow


def _as_object(pairs: Any) -> Any:
    """Named figures as a JSON object when their names are distinct: orjson keeps the keys it has seen, where it
    makes a new string of every name in an array (a tenth of the time to decode 50,000 of them). Order is kept."""
    names = [pair[0] for pair in pairs] if isinstance(pairs, tuple) else []
    if names and all(type(n) is str for n in names) and len(set(names)) == len(names):
        return dict(pairs)
    return pairs


def _pairs(value: Any) -> tuple[tuple[Any, ...], ...]:
    if type(value) is dict:
        return tuple(value.items())
    return tuple(map(tuple, value))


def _tuple(value: list[Any]) -> tuple[Any, ...]:
    return tuple(value)


def _same(value: Any) -> Any:
    return value


def _big(value: Any) -> Any:
    """An ``int | None`` field: written as text when past 64 bits (a prompt's 128-bit trace id)."""
    return int(value) if type(value) is str else value


def _narrow(value: Any) -> Any:
    """Back from JSON: arrays are tuples again (a part's fields are scalars and tuples, its items' too)."""
    if isinstance(value, list):
        return tuple(_narrow(v) for v in value)
    return value
