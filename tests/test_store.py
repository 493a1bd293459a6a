"""Store contract tests, run against SQLite and PostgreSQL alike."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import inspect

from xihe.agent.artifacts import ArtifactStore
from xihe.agent.audit import AuditEvent, SqlAuditSink
from xihe.agent.clock import FakeClock
from xihe.agent.db import make_engine, migrate
from xihe.agent.errors import TaskStateError
from xihe.agent.pending import PendingStore
from xihe.agent.task_store import TaskStore


@pytest.fixture
def engine(db_url: str):  # type: ignore[no-untyped-def]
    eng = make_engine(db_url)
    migrate(eng)
    yield eng
    eng.dispose()


def test_migrations_create_every_table_once(engine) -> None:  # type: ignore[no-untyped-def]
    names = set(inspect(engine).get_table_names())
    assert {
        "task",
        "task_step",
        "audit_event",
        "pending_action",
        "artifact",
        "memory",
        "schema_migrations",
    } <= names
    assert migrate(engine) == []  # a second run applies nothing


def test_steps_are_append_only_and_latest_wins(engine) -> None:  # type: ignore[no-untyped-def]
    clock = FakeClock()
    tasks = TaskStore(engine)
    t = tasks.create(kind="chat", owner="alice", conversation="c", goal="g", now=clock())
    first = tasks.begin_step(t.id, "tool:1:0", "echo", clock(), input_digest="d1")
    tasks.finish_step(first, "failed", clock.advance(2), error="boom")
    second = tasks.begin_step(t.id, "tool:1:0", "echo", clock())
    tasks.finish_step(second, "done", clock.advance(1), output_text="ok")
    rows = tasks.steps(t.id)
    assert [(r.attempt, r.status) for r in rows] == [
        (1, "running"),
        (1, "failed"),
        (2, "running"),
        (2, "done"),
    ]
    assert rows[1].error == "boom" and rows[1].duration_ms == 2000  # the failure is still there
    assert tasks.latest(t.id)["tool:1:0"].status == "done"
    assert tasks.get(t.id).current_step == "tool:1:0"
    with pytest.raises(TaskStateError):
        tasks.finish_step(second, "running", clock())


def test_missing_task_names_its_id(engine) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TaskStateError, match="task 999 does not exist"):
        TaskStore(engine).get(999)


def test_lease_is_exclusive_until_it_expires(engine) -> None:  # type: ignore[no-untyped-def]
    clock = FakeClock()
    tasks = TaskStore(engine)
    t = tasks.create(kind="chat", owner="a", conversation="c", goal="g", now=clock())
    ttl = timedelta(seconds=60)
    assert tasks.claim(t.id, "r1", clock(), ttl)
    assert not tasks.claim(t.id, "r2", clock.advance(30), ttl)
    assert tasks.orphans(clock()) == []
    clock.advance(31)
    assert [o.id for o in tasks.orphans(clock())] == [t.id]
    assert tasks.claim(t.id, "r2", clock(), ttl)


def test_a_holder_renews_and_releases_only_its_own_live_leases(engine) -> None:  # type: ignore[no-untyped-def]
    clock = FakeClock()
    tasks = TaskStore(engine)
    ttl = timedelta(seconds=60)
    mine, lapsed, theirs = (
        tasks.create(kind="chat", owner="a", conversation="c", goal="g", now=clock()) for _ in range(3)
    )
    assert tasks.claim(mine.id, "r1", clock(), ttl) and tasks.claim(theirs.id, "r2", clock(), ttl)
    assert tasks.claim(lapsed.id, "r1", clock() - 2 * ttl, ttl)  # lapsed a minute ago: not renewed
    assert tasks.renew_all("r1", clock.advance(50), ttl) == 1
    assert tasks.get(mine.id).lease_until == clock() + ttl
    assert tasks.get(theirs.id).lease_until == clock() - timedelta(seconds=50) + ttl
    assert [o.id for o in tasks.orphans(clock.advance(20))] == [lapsed.id, theirs.id]
    assert tasks.release_all("r1") == 2
    assert tasks.get(mine.id).lease_owner is None and tasks.get(theirs.id).lease_owner == "r2"


def test_retry_budget_is_stored_and_runs_out(engine) -> None:  # type: ignore[no-untyped-def]
    clock = FakeClock()
    tasks = TaskStore(engine)
    t = tasks.create(kind="chat", owner="a", conversation="c", goal="g", now=clock(), retry_budget=2)
    assert tasks.spend_retry(t.id, clock()) == 1
    assert TaskStore(engine).spend_retry(t.id, clock()) == 0  # a fresh store object: the budget is in the DB
    assert tasks.spend_retry(t.id, clock()) is None


def _pending(engine, clock, **kw):  # type: ignore[no-untyped-def]
    tasks, pending = TaskStore(engine), PendingStore(engine)
    t = tasks.create(kind="chat", owner="alice", conversation="c1", goal="g", now=clock())
    values = dict(
        task_id=t.id,
        step_key="tool:1:0",
        user_id="alice",
        conversation="c1",
        tool="write_note",
        args_json='{"note":"x"}',
        args_digest="D1",
        environment="test",
        reason="write",
        needs_approval=False,
        now=clock(),
        expires_at=clock() + timedelta(minutes=15),
    )
    values.update(kw)
    return pending, pending.create(**values)


def test_confirmation_is_bound_to_user_conversation_and_expiry(engine) -> None:  # type: ignore[no-untyped-def]
    clock = FakeClock()
    pending, action = _pending(engine, clock)
    assert not pending.confirm(action.id, "mallory", "c1", clock())
    assert not pending.confirm(action.id, "alice", "other-conversation", clock())
    assert pending.confirm(action.id, "alice", "c1", clock())
    assert not pending.confirm(action.id, "alice", "c1", clock())  # exactly once
    assert not pending.consume(action.id, "D2", clock())  # changed arguments
    assert pending.consume(action.id, "D1", clock())
    assert not pending.consume(action.id, "D1", clock())  # consumed once


def test_expiry_is_visible(engine) -> None:  # type: ignore[no-untyped-def]
    clock = FakeClock()
    pending, action = _pending(engine, clock)
    clock.advance(minutes=16)
    assert not pending.confirm(action.id, "alice", "c1", clock())
    assert [p.id for p in pending.expire_due(clock())] == [action.id]
    assert pending.get(action.id).status == "expired"  # type: ignore[union-attr]


def test_production_write_needs_a_different_approver(engine) -> None:  # type: ignore[no-untyped-def]
    clock = FakeClock()
    pending, action = _pending(engine, clock, needs_approval=True)
    assert pending.confirm(action.id, "alice", "c1", clock())
    assert not pending.consume(action.id, "D1", clock())  # no approver yet
    assert not pending.approve(action.id, "alice", clock())  # not the requester
    assert pending.approve(action.id, "carol", clock())
    assert pending.get(action.id).released  # type: ignore[union-attr]
    assert pending.consume(action.id, "D1", clock())


def test_artifacts_and_audit_round_trip(engine) -> None:  # type: ignore[no-untyped-def]
    clock = FakeClock()
    ref = ArtifactStore(engine).put("x" * 10000, clock(), task_id=None, owner="alice")
    got = ArtifactStore(engine).get(ref.id)
    assert got is not None and got[1] == b"x" * 10000 and got[0].size == 10000 and len(ref.sha256) == 64
    sink = SqlAuditSink(engine)
    sink.record(
        AuditEvent(
            at=clock(),
            kind="tool_call",
            actor="alice",
            outcome="done",
            tool="echo",
            args_redacted={"token": "***"},
        )
    )
    rows = sink.search(actor="alice", tool="echo")
    assert rows[0]["args_redacted"] == {"token": "***"} and rows[0]["at"] == clock()
