"""Engine creation (SQLite by default, PostgreSQL via XIHE_DATABASE_URL) and migrations."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, select, text

from xihe.agent.clock import utc_now
from xihe.agent.migrations import MIGRATIONS, schema_migrations
from xihe.agent.sqlite_writers import QueuedConnection, file_lock
from xihe.agent.tables import metadata

DEFAULT_SQLITE = "var/xihe.db"
BUSY_SECONDS = 10  # how long a SQLite writer waits for another (the lock in this process, then SQLite's)
ENV_URL = "XIHE_DATABASE_URL"


def database_url(configured: str | None = None) -> str:
    """XIHE_DATABASE_URL wins, then the configured URL, then a SQLite file under var/."""
    url = os.environ.get(ENV_URL) or configured or f"sqlite:///{DEFAULT_SQLITE}"
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        url = "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable across process crashes
    cur.execute(f"PRAGMA busy_timeout={int(BUSY_SECONDS * 1000)}")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


def sqlite_path(url: str) -> Path | None:
    """The file behind a SQLite URL; None for other databases and in-memory SQLite."""
    if not url.startswith("sqlite") or "///" not in url:
        return None
    path = url.split("///", 1)[1].split("?", 1)[0]
    return Path(path) if path and path != ":memory:" else None


def make_engine(url: str | None = None) -> Engine:
    """An engine for `url` (see database_url); SQLite files get WAL and their folder created."""
    url = database_url(url)
    if url.startswith("sqlite"):
        path = sqlite_path(url)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        connect = {"check_same_thread": False, "timeout": BUSY_SECONDS, "factory": QueuedConnection}
        engine = create_engine(url, connect_args=connect)
        event.listen(engine, "connect", _sqlite_pragmas)
        if path is not None:  # writers of this process queue on the file's lock (agent/sqlite_writers.py)
            lock = file_lock(str(path.resolve()))
            event.listen(engine, "connect", lambda conn, _record: conn.bind(lock, BUSY_SECONDS))
        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=5)


@contextmanager
def _migration_lock(engine: Engine) -> Iterator[None]:
    """Across processes on one SQLite file: an exclusive lock on `<file>.migrate.lock` next to it.

    SQLite runs DDL outside the transaction, so two processes migrating a new file at once would
    both create tables; the lock makes the second one wait and then find everything applied.
    PostgreSQL takes its advisory lock inside `migrate`; in-memory SQLite has one connection.
    """
    path = sqlite_path(engine.url.render_as_string(hide_password=False))
    if path is None:
        yield
        return
    with open(f"{path}.migrate.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def migrate(engine: Engine) -> list[int]:
    """Apply missing migrations in order, under a lock; return the versions applied."""
    applied: list[int] = []
    with _migration_lock(engine), engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(74261)"))  # two replicas starting at once
        metadata.create_all(conn, tables=[schema_migrations])
        done = set(conn.execute(select(schema_migrations.c.version)).scalars())
        for version, description, run in sorted(MIGRATIONS, key=lambda m: m[0]):
            if version in done:
                continue
            run(conn)
            conn.execute(
                schema_migrations.insert().values(
                    version=version, description=description, applied_at=utc_now()
                )
            )
            applied.append(version)
    return applied


def open_store_engine(url: str | None = None) -> Engine:
    """make_engine + migrate: what every entry point calls."""
    engine = make_engine(url)
    migrate(engine)
    return engine
