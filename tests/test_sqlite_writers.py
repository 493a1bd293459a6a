"""SQLite writers of one process queue on the file's lock, not in SQLite's sleeping busy handler."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
from sqlalchemy import text

from xihe.agent.db import make_engine
from xihe.agent.sqlite_writers import QueuedConnection, file_lock, writes


def _held_elsewhere(lock: threading.RLock) -> bool:
    """True when another thread holds `lock` (a non-blocking try from a fresh thread)."""
    got: list[bool] = []

    def probe() -> None:
        ok = lock.acquire(blocking=False)
        got.append(not ok)
        if ok:
            lock.release()

    t = threading.Thread(target=probe)
    t.start()
    t.join()
    return got[0]


@pytest.fixture
def conn(tmp_path: Path) -> sqlite3.Connection:
    path = tmp_path / "w.db"
    c = sqlite3.connect(path, factory=QueuedConnection, check_same_thread=False)
    c.execute("CREATE TABLE t (x INTEGER)")
    c.commit()
    c.bind(file_lock(str(path)), 10)
    return c


@pytest.mark.parametrize("ending", ["commit", "rollback", "close"])
def test_a_write_holds_the_file_lock_until_its_transaction_ends(conn: QueuedConnection, ending: str) -> None:
    lock = conn._lock
    assert lock is not None
    conn.execute("SELECT count(*) FROM t").fetchone()
    assert not _held_elsewhere(lock)  # reads never take it
    conn.cursor().execute("INSERT INTO t VALUES (1)")
    assert _held_elsewhere(lock)
    conn.execute("UPDATE t SET x = 2")  # a second write in the same transaction: still held once
    getattr(conn, ending)()
    assert not _held_elsewhere(lock)


def test_a_second_writer_waits_for_the_lock_instead_of_failing_in_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "w.db"
    first, second = (sqlite3.connect(path, factory=QueuedConnection, check_same_thread=False) for _ in "12")
    first.execute("CREATE TABLE t (x INTEGER)")
    first.commit()
    for c in (first, second):
        c.bind(file_lock(str(path)), 10)
    second.execute("PRAGMA busy_timeout=0")  # without the lock, SQLite would refuse at once
    first.execute("INSERT INTO t VALUES (1)")
    outcome: list[object] = []

    def write() -> None:
        try:
            second.execute("INSERT INTO t VALUES (2)")
            second.commit()
            outcome.append("written")
        except sqlite3.OperationalError as exc:
            outcome.append(exc)

    t = threading.Thread(target=write)
    t.start()
    t.join(0.2)
    assert outcome == []  # queued on the lock, not failed with "database is locked"
    first.commit()
    t.join(10)
    assert outcome == ["written"]
    assert sorted(r[0] for r in first.execute("SELECT x FROM t")) == [1, 2]


def test_engines_on_one_file_share_its_lock(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'e.db'}"
    locks = []
    for engine in (make_engine(url), make_engine(url)):
        with engine.connect() as c:
            c.execute(text("SELECT 1"))
            raw = c.connection.dbapi_connection
            assert isinstance(raw, QueuedConnection)
            locks.append(raw._lock)
    assert locks[0] is locks[1] is file_lock(str((tmp_path / "e.db").resolve()))


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("INSERT INTO t VALUES (1)", True),
        ("  update t set x = 1", True),
        ("DELETE FROM t", True),
        ("CREATE TABLE u (x)", True),
        ("SELECT * FROM t", False),
        ("PRAGMA journal_mode=WAL", False),
        ("", False),
    ],
)
def test_which_statements_write(sql: str, expected: bool) -> None:
    assert writes(sql) is expected
