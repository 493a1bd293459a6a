"""Migration 8 adds the task's outcome and runs to a store created before them, and is a no-op on a new one."""

from __future__ import annotations

from sqlalchemy import create_engine, inspect, text

from xihe.agent.core_tables import task
from xihe.agent.db import make_engine, migrate
from xihe.agent.migrations import _add_columns


def test_old_task_table_gains_the_columns_once(db_url: str) -> None:
    engine = create_engine(db_url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE task (id INTEGER PRIMARY KEY, status VARCHAR(30))"))
        conn.execute(text("INSERT INTO task (id, status) VALUES (1, 'done')"))
    add = _add_columns(task, "outcome", "runs")
    for _ in range(2):  # the second run finds them present
        with engine.begin() as conn:
            add(conn)
    columns = {c["name"] for c in inspect(engine).get_columns("task")}
    assert {"outcome", "runs"} <= columns
    with engine.connect() as conn:
        assert conn.execute(text("SELECT status, outcome, runs FROM task")).one() == ("done", None, None)
    engine.dispose()


def test_a_new_store_has_them_after_every_migration(db_url: str) -> None:
    engine = make_engine(db_url)
    assert 8 in migrate(engine)
    assert {"outcome", "runs"} <= {c["name"] for c in inspect(engine).get_columns("task")}
    engine.dispose()
