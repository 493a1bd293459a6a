"""Prepared statements (agent/prepared.py) store exactly what `Connection.execute` stores, on both
back ends: the same columns, JSON `null` for None, aware datetimes, RETURNING ids; and a statement
that needs a Python-side column default is refused rather than written without it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import insert, select, text

from xihe.agent.audit import AuditEvent, SqlAuditSink
from xihe.agent.audit import write as write_audit
from xihe.agent.core_tables import task, task_step
from xihe.agent.db import make_engine, migrate
from xihe.agent.prepared import Prepared
from xihe.agent.step_log import _INSERT_STEP, _SET_CURRENT, _attempt_row

NOW = datetime(2026, 12, 5, 8, 0, 0, 123456, tzinfo=UTC)


def _engine(db_url: str):  # type: ignore[no-untyped-def]
    engine = make_engine(db_url)
    migrate(engine)
    return engine


def _task(conn) -> int:  # type: ignore[no-untyped-def]
    values = dict(
        kind="k", status="running", owner="o", conversation="c", goal="g", created_at=NOW, updated_at=NOW
    )
    return int(conn.execute(insert(task).returning(task.c.id), values).scalar_one())


def test_a_prepared_insert_stores_the_row_execute_stores(db_url: str) -> None:
    engine = _engine(db_url)
    with engine.begin() as conn:
        tid = _task(conn)
        row = _attempt_row(tid, "tool:1", 1, "echo", NOW, "d" * 64, '{"text": "你好"}')
        by_execute = conn.execute(_INSERT_STEP, row).scalar_one()
        by_prepared = Prepared(_INSERT_STEP).run(conn, row, insert=True)
        assert by_prepared == by_execute + 1  # the RETURNING id
    with engine.connect() as conn:
        stored = [r._mapping for r in conn.execute(select(task_step).order_by(task_step.c.id))]
        raw = conn.execute(text("SELECT external_ids FROM task_step ORDER BY id")).all()
    assert {k: v for k, v in stored[0].items() if k != "id"} == {
        k: v for k, v in stored[1].items() if k != "id"
    }
    assert stored[1]["started_at"] == NOW and stored[1]["input_preview"] == '{"text": "你好"}'
    assert raw[0] == raw[1]  # None stored the same way (SQLite: the JSON text `null`)
    engine.dispose()


def test_a_prepared_update_binds_its_parameters_and_the_statements_literals(db_url: str) -> None:
    engine = _engine(db_url)
    later = NOW + timedelta(seconds=5)
    with engine.begin() as conn:
        tid = _task(conn)
        assert Prepared(_SET_CURRENT).run(conn, {"t": tid, "k": "tool:7:0", "now": later}) is None
    with engine.connect() as conn:
        found = conn.execute(select(task.c.current_step, task.c.updated_at).where(task.c.id == tid)).one()
    assert (found.current_step, found.updated_at) == ("tool:7:0", later)
    engine.dispose()


def test_an_audit_event_written_in_a_transaction_reads_back_whole(db_url: str) -> None:
    engine = _engine(db_url)
    event = AuditEvent(
        at=NOW,
        kind="tool_call",
        actor="alice",
        outcome="done",
        task_id=3,
        step_key="tool:1:0",
        intent="echo",
        tool="echo",
        args_redacted={"text": "<b>hi</b>", "password": "***"},
        external_ids={"instance_id": 42},
        detail={"note": [1, 2]},
    )
    with engine.begin() as conn:
        write_audit(conn, event)
    (found,) = SqlAuditSink(engine).search()
    assert found["at"] == NOW and found["args_redacted"] == {"text": "<b>hi</b>", "password": "***"}
    assert found["external_ids"] == {"instance_id": 42}
    assert found["detail"] == {"schema_version": 1, "note": [1, 2]}
    assert found["result_digest"] is None and found["reason"] is None
    engine.dispose()


def test_a_statement_that_needs_a_column_default_is_refused(sqlite_url: str) -> None:
    engine = _engine(sqlite_url)
    # task.channel has a Python-side default ("cli"): a prepared insert would store NULL instead
    values = dict(
        kind="k", status="running", owner="o", conversation="c", goal="g", created_at=NOW, updated_at=NOW
    )
    with engine.begin() as conn, pytest.raises(ValueError, match="not preparable"):
        Prepared(insert(task)).run(conn, values, insert=True)
    engine.dispose()


def test_a_driver_error_is_raised_as_sqlalchemys_like_execute_raises_it(db_url: str) -> None:
    from sqlalchemy.exc import IntegrityError

    engine = _engine(db_url)
    row = _attempt_row(10**9, "tool:1", 1, "echo", NOW, None, None)  # no such task: a foreign key
    with pytest.raises(IntegrityError), engine.begin() as conn:
        Prepared(_INSERT_STEP).run(conn, row, insert=True)
    with engine.connect() as conn:
        assert conn.execute(select(task_step.c.id)).first() is None
    engine.dispose()
