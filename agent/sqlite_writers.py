"""One writer at a time per SQLite file in this process, queued on a lock instead of in SQLite.

SQLite lets one connection write at a time. When a writer finds the file locked, SQLite's busy
handler sleeps and tries again: 1, 2, 5, 10, 15, 20, 25 … 50 and then 100 ms between tries. That
is fine for a few writers. In a burst it is not. Two hundred model turns start writing their tasks
while a `/status` wants to claim its inbox row. The claim sleeps, and each time it wakes another
writer has the file, so it sleeps up to 100 ms again. A command that needs 5 ms of work waited most
of a second this way.

`QueuedConnection` is the `sqlite3.Connection` that `agent.db.make_engine` gives SQLite engines.
Its cursors take the file's lock in this process before the first statement that writes. They
keep it until the transaction ends (commit, rollback or close). Writers in one process then queue on
a lock that wakes the next one at once, and SQLite's own busy handler is left for writers in other
processes. Reads take no lock: under WAL they never wait for a writer.

A writer that cannot get the lock within the busy timeout goes on without it and meets SQLite's
busy handler, as before. That covers code that opens a second write transaction on the same file
while it holds one. The lock is re-entrant, so in one thread this fails in SQLite as it did before,
and does not hang.
"""

from __future__ import annotations

import sqlite3
import threading
from typing import Any

_WRITES = frozenset({"INSERT", "UPDATE", "DELETE", "REPLACE", "CREATE", "DROP", "ALTER"})
_locks: dict[str, threading.RLock] = {}
_locks_lock = threading.Lock()


def file_lock(path: str) -> threading.RLock:
    """The process's writer lock of the SQLite file at `path` (one per resolved path)."""
    with _locks_lock:
        lock = _locks.get(path)
        if lock is None:
            lock = _locks[path] = threading.RLock()
        return lock


def writes(sql: str) -> bool:
    """True for a statement that writes (its first word: INSERT, UPDATE, DELETE, DDL …)."""
    head = sql.lstrip()[:8].split(None, 1)
    return bool(head) and head[0].upper() in _WRITES


class QueuedConnection(sqlite3.Connection):
    """A connection whose write transactions hold the file's writer lock (`bind` names the file)."""

    _lock: threading.RLock | None = None
    _wait_seconds = 10.0
    _holding = False

    def bind(self, lock: threading.RLock, wait_seconds: float) -> None:
        """Queue this connection's writes on `lock`, waiting at most `wait_seconds` for it."""
        self._lock, self._wait_seconds = lock, wait_seconds

    def before(self, sql: str) -> None:
        """Take the writer lock before the transaction's first write."""
        lock = self._lock
        if lock is not None and not self._holding and writes(sql):
            self._holding = lock.acquire(timeout=self._wait_seconds)

    def _let_go(self) -> None:
        if self._holding:
            self._holding = False
            assert self._lock is not None
            self._lock.release()

    def cursor(self, factory: Any = None) -> Any:
        return super().cursor(factory or QueuedCursor)

    def execute(self, sql: str, parameters: Any = (), /) -> Any:
        self.before(sql)
        return super().execute(sql, parameters)

    def executemany(self, sql: str, parameters: Any, /) -> Any:
        self.before(sql)
        return super().executemany(sql, parameters)

    def commit(self) -> None:
        try:
            super().commit()
        finally:
            self._let_go()

    def rollback(self) -> None:
        try:
            super().rollback()
        finally:
            self._let_go()

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._let_go()


class QueuedCursor(sqlite3.Cursor):
    """A cursor of a `QueuedConnection`: its writes wait for the connection's writer lock."""

    def execute(self, sql: str, parameters: Any = (), /) -> Any:
        conn = self.connection
        if isinstance(conn, QueuedConnection):
            conn.before(sql)
        return super().execute(sql, parameters)

    def executemany(self, sql: str, parameters: Any, /) -> Any:
        conn = self.connection
        if isinstance(conn, QueuedConnection):
            conn.before(sql)
        return super().executemany(sql, parameters)
