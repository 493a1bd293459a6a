"""The engine the SQL alert stores share, and the unit of work that serialises pipeline work.

On SQLite every writing transaction starts with a write, so it holds the database's write lock
before it reads (a read-then-write transaction would fail with SQLITE_BUSY under concurrency).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Engine, text
from sqlalchemy.dialects import postgresql, sqlite

PIPELINE_LOCK = 74_262  # pg_advisory_xact_lock key of the pipeline unit of work


class SqlAlertStores:
    """The engine the alert stores share, and the unit of work they join when one is open."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.postgres = engine.dialect.name == "postgresql"
        self._local = threading.local()
        self._lock = threading.RLock()

    @contextmanager
    def unit(self) -> Iterator[Connection]:
        """One transaction for a whole feed or tick, exclusive across threads and replicas.

        State, outbox rows and records commit together, and two replicas fed the same event (say a
        webhook retried to the other one) decide one after the other, so the second sees a duplicate.
        """
        current: Connection | None = getattr(self._local, "conn", None)
        if current is not None:
            yield current
            return
        with self._lock, self.engine.begin() as conn:
            if self.postgres:
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": PIPELINE_LOCK})
            else:
                conn.exec_driver_sql("DELETE FROM alert_state WHERE 1 = 0")  # takes the write lock now
            self._local.conn = conn
            try:
                yield conn
            finally:
                self._local.conn = None

    @contextmanager
    def tx(self) -> Iterator[Connection]:
        """The open unit's connection, or a transaction of its own."""
        current: Connection | None = getattr(self._local, "conn", None)
        if current is not None:
            yield current
            return
        with self.engine.begin() as conn:
            yield conn

    def insert(self, table: Any) -> Any:
        """A dialect insert (for ON CONFLICT clauses)."""
        return postgresql.insert(table) if self.postgres else sqlite.insert(table)
