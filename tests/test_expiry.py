"""One expiry rule for confirmations: `pending.expired`, and the SQL that expires rows agrees with it."""

from __future__ import annotations

from datetime import timedelta

import pytest

from xihe.agent.clock import FakeClock
from xihe.agent.db import make_engine, migrate
from xihe.agent.pending import PendingAction, PendingStore, expired
from xihe.agent.task_store import TaskStore

T0 = FakeClock()()
TTL = timedelta(minutes=15)


def action(status: str, *, needs_approval: bool = False, approved_by: str | None = None) -> PendingAction:
    return PendingAction(
        id=1,
        task_id=1,
        step_key="tool:1:0",
        user_id="alice",
        conversation="c1",
        tool="write_note",
        args_json="{}",
        args_digest="D",
        environment="prod",
        reason="write",
        needs_approval=needs_approval,
        status=status,
        confirmed_at=None,
        approved_by=approved_by,
        approved_at=None,
        expires_at=T0 + TTL,
        created_at=T0,
    )


# (the action, minutes after it was asked, expired?)
CASES = [
    (action("pending"), 14, False),
    (action("pending"), 15, True),  # at the expiry instant the time is up
    (action("pending"), 16, True),
    (action("confirmed", needs_approval=True), 16, True),  # still waiting for an approver
    (action("pending", needs_approval=True, approved_by="carol"), 16, True),  # still waiting for the yes
    (action("confirmed"), 16, False),  # released: it runs when its task resumes
    (action("confirmed", needs_approval=True, approved_by="carol"), 16, False),  # released
    (action("executed"), 16, False),
    (action("cancelled"), 16, False),
    (action("rejected"), 16, False),
    (action("expired"), 16, False),  # already closed
]


@pytest.mark.parametrize(("pending", "minutes", "want"), CASES)
def test_expired_is_a_waiting_action_whose_time_is_up(
    pending: PendingAction, minutes: int, want: bool
) -> None:
    assert expired(pending, T0 + timedelta(minutes=minutes)) is want


def test_the_sql_expires_exactly_the_rows_the_rule_calls_expired(db_url: str) -> None:
    engine = make_engine(db_url)
    migrate(engine)
    store, tasks = PendingStore(engine), TaskStore(engine)
    made = []
    for shape, _, _ in CASES:
        task = tasks.create(kind="chat", owner="alice", conversation="c1", goal="write", now=T0)
        row = store.create(
            task_id=task.id,
            step_key="tool:1:0",
            user_id="alice",
            conversation="c1",
            tool="write_note",
            args_json="{}",
            args_digest="D",
            environment="prod",
            reason="write",
            needs_approval=shape.needs_approval,
            now=T0,
            expires_at=T0 + TTL,
        )
        if shape.approved_by:
            assert store.approve(row.id, shape.approved_by, T0)
        if shape.status in ("confirmed", "executed"):
            assert store.confirm(row.id, "alice", "c1", T0)
        if shape.status == "executed":
            assert store.consume(row.id, "D", T0)
        if shape.status in ("cancelled", "rejected"):
            assert store.close(row.id, shape.status, T0)
        if shape.status == "expired":
            assert store.expire(row.id, T0 + TTL)
        made.append(store.get(row.id))
    for row, (shape, _, _) in zip(made, CASES, strict=True):
        assert row is not None and row.status == shape.status
    at = T0 + timedelta(minutes=16)
    assert store.expire_due(T0 + timedelta(minutes=14)) == []
    want = sorted(r.id for r in made if r is not None and expired(r, at))
    assert sorted(p.id for p in store.expire_due(at)) == want and len(want) == 5
    assert store.expire_due(at) == []  # each once, and then none of them is waiting any more
    assert not any(expired(row, at) for row in map(store.get, want) if row is not None)
    engine.dispose()
