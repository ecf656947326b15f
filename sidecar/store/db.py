"""Open the database with our pragmas, migrate it, and serialise writes.

Every aiosqlite await is a thread hand-off (50-250 µs), so callers batch: one ``write()`` block
per unit of work, ``executemany`` for rows, never a write per streamed token.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sqlite3
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite
import anyio
import anyio.to_thread

from ..errors import StorageError

log = logging.getLogger("sidecar.store")

T = TypeVar("T")
# Statements run in a transaction on the database's thread (``Database.write_whole``).
Work = Callable[[sqlite3.Connection], None]

# The cache name of the tool catalog: toolsets, tools, tool_overrides and toolset_mcp_servers.
# Every write to those tables is a ``write(changes=CATALOG)``.
CATALOG = "catalog"

PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=NORMAL",
    "PRAGMA foreign_keys=ON",
    "PRAGMA busy_timeout=5000",
    "PRAGMA temp_store=MEMORY",
)

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
_MIGRATION_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


def migrations() -> list[tuple[int, str, str]]:
    """(version, file name, sql) for every file in ``migrations/``, in order; gaps are a bug."""
    found: list[tuple[int, str, str]] = []
    for entry in MIGRATIONS_DIR.iterdir():  # a plain path: importlib.resources costs ~5 ms at start
        m = _MIGRATION_NAME.match(entry.name)
        if m:
            found.append((int(m.group(1)), entry.name, entry.read_text(encoding="utf-8")))
    found.sort()
    for expected, (version, name, _) in enumerate(found, start=1):
        if version != expected:
            raise RuntimeError(f"migration {name} is out of sequence (expected {expected:04d})")
    return found


def create_if_missing(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        create(path)


def create(path: Path) -> None:
    """Make a new database at ``path`` with every migration applied, built aside and moved in place.

    Through WAL, the schema of a new database costs about 30 ms of the first start's budget of 40;
    written straight to a file nobody else sees yet, with neither journal nor syncs, about 6 ms. A
    crash leaves only the aside file, which the next start replaces.
    """
    steps = migrations()
    aside = path.with_name(path.name + ".new")
    aside.unlink(missing_ok=True)
    try:
        conn = sqlite3.connect(aside, isolation_level=None)
        try:
            conn.execute("PRAGMA synchronous=OFF")
            conn.execute("PRAGMA journal_mode=OFF")
            body = "\n".join(sql for _, _, sql in steps)
            conn.executescript(f"BEGIN;\n{body}\nPRAGMA user_version={steps[-1][0] if steps else 0};\nCOMMIT;")
            conn.execute("PRAGMA journal_mode=WAL")  # recorded in the file: every later open is in WAL
        finally:
            conn.close()
        fd = os.open(aside, os.O_RDONLY)
        try:
            os.fsync(fd)  # its pages are on disk before its name is: a power cut never leaves half a file
        finally:
            os.close(fd)
        os.replace(aside, path)
    except BaseException:
        aside.unlink(missing_ok=True)
        raise


def _transaction(aconn: aiosqlite.Connection, work: Callable[[sqlite3.Connection], T]) -> T:
    """``Database.write_whole`` on the database's thread."""
    # The sqlite3 connection (this runs on its thread): aiosqlite keeps it private.
    conn = aconn._conn  # pyright: ignore[reportPrivateUsage]
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.Error as exc:
        raise StorageError(f"cannot start a database transaction: {exc}") from exc
    try:
        result = work(conn)
        conn.execute("COMMIT")
    except BaseException as exc:
        if conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):  # the first error is the one to report
                conn.execute("ROLLBACK")
        if isinstance(exc, sqlite3.Error) and not isinstance(exc, sqlite3.IntegrityError):
            raise StorageError(f"database write failed: {exc}") from exc
        raise
    return result


_SETTLE_SECONDS = 10.0  # the longest a cached read waits for writes of its data to end


class Database:
    def __init__(self, conn: aiosqlite.Connection, path: Path) -> None:
        self._conn = conn
        self.path = path
        self._write_lock = anyio.Lock()
        # Read-through caches of data that changes rarely (the tool catalog), by name. A write
        # that says it changes a name empties that cache when it begins and when it ends.
        self._memo: dict[str, dict[Any, Any]] = {}
        self._versions: dict[str, int] = {}
        self._changing: dict[str, int] = {}
        self._writers: dict[str, set[int]] = {}  # tasks with a write(changes=name) queued or open
        self._settled: dict[str, anyio.Event] = {}  # set when no write(changes=name) is left
        self.transactions = 0  # committed write transactions, for debug/info

    @classmethod
    async def open(cls, path: Path) -> Database:
        try:
            await anyio.to_thread.run_sync(create_if_missing, path)
            conn = await aiosqlite.connect(path, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise StorageError(f"cannot open the database {path}: {exc}") from exc
        db = cls(conn, path)
        try:
            conn.row_factory = aiosqlite.Row
            for pragma in PRAGMAS:
                await conn.execute(pragma)
            await db._migrate()
        except BaseException as exc:
            await conn.close()
            if isinstance(exc, sqlite3.DatabaseError):
                raise StorageError(
                    f"the database {path} cannot be used: {exc}. Move it aside to start fresh."
                ) from exc
            raise
        return db

    @property
    def schema_version(self) -> int:
        return self._version

    async def _migrate(self) -> None:
        row = await (await self._conn.execute("PRAGMA user_version")).fetchone()
        version: int = row[0] if row is not None else 0  # (PRAGMA user_version always has its one row)
        steps = migrations()
        latest = steps[-1][0] if steps else 0
        if version > latest:
            raise StorageError(
                f"the database {self.path} has schema version {version}, newer than this "
                f"sidecar knows ({latest}); update the app or use another --data-dir"
            )
        for number, name, sql in steps:
            if number <= version:
                continue
            log.info("applying migration %s", name)
            # executescript commits anything pending first; BEGIN..COMMIT makes each step atomic.
            try:
                await self._conn.executescript(
                    f"BEGIN IMMEDIATE;\n{sql}\nPRAGMA user_version={number};\nCOMMIT;"
                )
            except sqlite3.Error:
                await self._conn.execute("ROLLBACK")
                raise
        self._version = max(version, latest)

    async def close(self) -> None:
        try:
            await self._conn.execute("PRAGMA optimize")
        except sqlite3.Error as exc:
            log.warning("PRAGMA optimize failed: %s", exc)
        await self._conn.close()

    # -- reads -------------------------------------------------------------------------------

    async def fetchall(self, sql: str, params: Iterable[Any] = ()) -> list[aiosqlite.Row]:
        try:
            return list(await self._conn.execute_fetchall(sql, tuple(params)))
        except sqlite3.Error as exc:
            raise StorageError(f"database read failed: {exc}") from exc

    async def fetchone(self, sql: str, params: Iterable[Any] = ()) -> aiosqlite.Row | None:
        rows = await self.fetchall(sql, params)
        return rows[0] if rows else None

    async def cached(self, name: str, key: Any, load: Callable[[], Awaitable[T]]) -> T:
        """``load()``'s value, kept until a ``write(changes=name)``. A value read while such a
        write is open (this connection sees its uncommitted rows) or ends is not kept."""
        memo = self._memo.setdefault(name, {})
        if key in memo:
            return memo[key]
        await self._settle(name)
        version = self._versions.get(name, 0)
        value = await load()
        if self._versions.get(name, 0) == version and not self._changing.get(name):
            memo[key] = value
        return value

    def version(self, name: str) -> int | None:
        """A number that moves on every ``write(changes=name)``; None while one is open (what is read
        then may still roll back). Lets a copy kept outside ``cached`` (an index) tell it is stale."""
        return None if self._changing.get(name) else self._versions.get(name, 0)

    def changes(self) -> int:
        """Rows inserted, updated or deleted through this connection since it opened, triggers'
        writes included (the only connection to the file: whatever did not move this wrote
        nothing). Lets a reader skip a look at a table nothing can have written since."""
        return self._conn.total_changes

    async def _settle(self, name: str) -> None:
        """Wait for the writes of ``name`` that are queued or open to end: this connection would
        show another task their rows half written (an upgrade deletes a toolset's tools before it
        inserts the new ones, and a tool read in between is "no such tool"). A task reads its own
        writes at once, and a wait is bounded, so a reader can never hang on a writer."""
        if not self._changing.get(name) or anyio.get_current_task().id in self._writers.get(name, ()):
            return
        settled = self._settled.get(name)
        if settled is None:
            settled = self._settled[name] = anyio.Event()
        with anyio.move_on_after(_SETTLE_SECONDS):
            await settled.wait()

    def _changed(self, name: str, delta: int) -> None:
        self._changing[name] = self._changing.get(name, 0) + delta
        self._versions[name] = self._versions.get(name, 0) + 1
        self._memo.pop(name, None)
        writers = self._writers.setdefault(name, set())
        task = anyio.get_current_task().id
        if delta > 0:
            writers.add(task)
        else:
            writers.discard(task)
        if not self._changing[name] and (settled := self._settled.pop(name, None)) is not None:
            settled.set()

    # -- writes ------------------------------------------------------------------------------

    async def checkpoint(self) -> None:
        """Copy the WAL into the database file and empty it: after a write that overwrote a secret,
        no copy of the old page is left in the WAL."""
        async with self._write_lock:
            try:
                await self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error as exc:
                raise StorageError(f"database checkpoint failed: {exc}") from exc

    async def write_whole(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """One transaction run whole on the database's thread: ``work`` gets the plain sqlite3
        connection between BEGIN and COMMIT, all in a single hand-off. ``write`` costs one
        hand-off per statement, each waking the thread and then the event loop; a batch written in
        the background (tool call records) would take those wake-ups from the calls being served.
        Errors as ``write`` raises them."""
        async with self._write_lock:
            conn = self._conn
            # aiosqlite has no public way to run a function on its thread; ``_execute`` is what
            # each of its own methods calls (pinned in the lock file; tests/store covers it). It is
            # private and untyped (it returns what ``_transaction`` does: a T).
            result: T = await conn._execute(_transaction, conn, work)  # pyright: ignore[reportPrivateUsage, reportUnknownMemberType]
            self.transactions += 1
            return result

    @asynccontextmanager
    async def write(self, changes: str | None = None) -> AsyncGenerator[aiosqlite.Connection, None]:
        """One transaction; writers queue here so exactly one is open at a time. ``changes``
        names the cache (see ``cached``) this write makes stale."""
        if changes is None:
            async with self._transaction() as conn:
                yield conn
            return
        self._changed(changes, 1)
        try:
            async with self._transaction() as conn:
                yield conn
        finally:
            self._changed(changes, -1)

    @asynccontextmanager
    async def _transaction(self) -> AsyncGenerator[aiosqlite.Connection, None]:
        async with self._write_lock:
            conn = self._conn
            try:
                await conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StorageError(f"cannot start a database transaction: {exc}") from exc
            try:
                yield conn
            except BaseException as exc:
                with anyio.CancelScope(shield=True):
                    await conn.execute("ROLLBACK")
                # Constraint violations are for the caller to interpret (a duplicate id is a
                # Conflict); any other SQLite failure is a StorageError.
                if isinstance(exc, sqlite3.Error) and not isinstance(exc, sqlite3.IntegrityError):
                    raise StorageError(f"database write failed: {exc}") from exc
                raise
            try:
                with anyio.CancelScope(shield=True):
                    await conn.execute("COMMIT")
                    self.transactions += 1
            except sqlite3.Error as exc:
                with anyio.CancelScope(shield=True):
                    await conn.execute("ROLLBACK")
                raise StorageError(f"database write failed: {exc}") from exc
