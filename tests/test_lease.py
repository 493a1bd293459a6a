"""The lease contract (`xihe.agent.lease`), run over every leased table on SQLite and PostgreSQL.

A claim by A keeps B out until it lapses, then B takes it; only the owner renews, and only while it
holds the row; release frees the row at once; of two engines claiming at once exactly one wins, and
batch claims never hand one row to both.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, Table, and_, insert, select, true

from xihe.agent import lease
from xihe.agent.alert_tables import alert_outbox, alert_state
from xihe.agent.core_tables import task
from xihe.agent.db import make_engine, migrate
from xihe.agent.dolphin_tables import ds_watch
from xihe.agent.plan_tables import plan_item
from xihe.agent.tables import metadata
from xihe.agent.wecom_tables import wecom_inbox, wecom_ws_lease

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
TTL = timedelta(seconds=60)


def _task(_i: int) -> dict[str, Any]:
    return {
        "kind": "chat",
        "status": "running",
        "owner": "alice",
        "conversation": "c",
        "created_at": T0,
        "updated_at": T0,
    }


# One free row `i` of each leased table (plan items hang off task 1, which setup inserts).
ROWS: dict[str, tuple[Table, Callable[[int], dict[str, Any]]]] = {
    "task": (task, _task),
    "plan_item": (
        plan_item,
        lambda i: (
            {"task_id": 1, "seq": i, "description": f"item {i}", "depends_on": [], "status": "pending"}
            | {"created_at": T0, "updated_at": T0}
        ),
    ),
    "alert_outbox": (
        alert_outbox,
        lambda i: (
            {"key": f"inst:{i}", "kind": "instance", "tier": "P1", "channel": "default", "subject": "s"}
            | {"text": "t", "created_at": T0, "due_at": T0, "status": "pending"}
        ),
    ),
    "wecom_inbox": (wecom_inbox, lambda i: {"key": f"wecom_app:{i}", "seen_at": T0, "status": "queued"}),
    "wecom_ws_lease": (wecom_ws_lease, lambda i: {"name": f"aibot:bot{i}", "acquired_at": T0}),
    "ds_watch": (
        ds_watch,
        lambda i: (
            {"key": f"{i}:tool:1:0", "task_id": str(i), "conversation": "c", "project": "etl"}
            | {"project_code": 1, "workflow": "w", "definition_code": 2, "started_at": T0, "next_poll_at": T0}
            | {"state": {}, "created_at": T0, "updated_at": T0}
        ),
    ),
    "alert_state": (
        alert_state,
        lambda i: {
            "ns": "seen",
            "key": f"scan:{i}:1",
            "payload": '"open"',
            "token": f"t{i}",
            "updated_at": T0,
        },
    ),
}


def test_every_table_with_a_lease_is_under_the_contract() -> None:
    leased = {t.name for t in metadata.tables.values() if {"lease_owner", "lease_until"} <= set(t.c.keys())}
    assert leased == set(ROWS)


class Leased:
    """One leased table on a migrated store, with rows 1..n inserted free."""

    def __init__(self, engine: Engine, name: str, n: int) -> None:
        self.engine = engine
        self.table, make = ROWS[name]
        with engine.begin() as conn:
            if name == "plan_item":
                conn.execute(insert(task).values(_task(0)))
            conn.execute(insert(self.table), [make(i) for i in range(1, n + 1)])

    def where(self, i: int) -> Any:
        """Row `i`."""
        row = ROWS[self.table.name][1](i)
        pk = [c.name for c in self.table.primary_key.columns]
        return and_(*(self.table.c[c] == row.get(c, i) for c in pk))  # autoincrement ids: 1..n

    def run(self, stmt: Any, engine: Engine | None = None) -> int:
        with (engine or self.engine).begin() as conn:
            return int(conn.execute(stmt).rowcount)

    def lease_of(self, i: int) -> tuple[str | None, datetime | None]:
        c = self.table.c
        with self.engine.connect() as conn:
            row = conn.execute(select(c.lease_owner, c.lease_until).where(self.where(i))).one()
        return row[0], row[1]


@pytest.fixture(params=sorted(ROWS))
def leased(request: pytest.FixtureRequest, db_url: str) -> Iterator[Leased]:
    engine = make_engine(db_url)
    migrate(engine)
    yield Leased(engine, request.param, 12)
    engine.dispose()


def test_a_claim_keeps_others_out_until_it_lapses(leased: Leased) -> None:
    t, row = leased.table, leased.where(1)
    assert leased.run(lease.claim(t, row, "A", T0, TTL)) == 1
    assert leased.lease_of(1) == ("A", T0 + TTL)
    assert leased.run(lease.claim(t, row, "B", T0 + TTL, TTL)) == 0  # held up to and including lease_until
    assert leased.run(lease.claim(t, row, "A", T0 + TTL / 2, TTL)) == 1  # the holder's claim extends it
    lapsed = T0 + TTL / 2 + TTL + timedelta(seconds=1)
    assert leased.run(lease.claim(t, row, "B", lapsed, TTL)) == 1
    assert leased.lease_of(1) == ("B", lapsed + TTL)
    assert leased.run(lease.release(t, row, "A")) == 0  # A lost it: its release leaves B's lease alone
    assert leased.lease_of(1) == ("B", lapsed + TTL)


def test_only_the_owner_renews_and_only_while_it_holds_the_row(leased: Leased) -> None:
    t, row = leased.table, leased.where(1)
    leased.run(lease.claim(t, row, "A", T0, TTL))
    assert leased.run(lease.renew(t, row, "B", T0 + TTL / 2, TTL)) == 0
    assert leased.run(lease.renew(t, row, "A", T0 + TTL / 2, TTL)) == 1
    assert leased.lease_of(1) == ("A", T0 + TTL / 2 + TTL)
    assert leased.run(lease.renew(t, row, "A", T0 + 3 * TTL, TTL)) == 0  # lapsed: claim it again instead
    assert leased.run(lease.renew(t, leased.where(2), "A", T0, TTL)) == 0  # never taken


def test_release_frees_the_row_at_once(leased: Leased) -> None:
    t, row = leased.table, leased.where(1)
    leased.run(lease.claim(t, row, "A", T0, TTL))
    assert leased.run(lease.release(t, row, "B")) == 0
    assert leased.run(lease.release(t, row, "A")) == 1
    assert leased.lease_of(1) == (None, None)
    with leased.engine.connect() as conn:
        assert conn.execute(select(t.c.lease_owner).where(row, lease.free(t, T0))).all() == [(None,)]
    assert leased.run(lease.claim(t, row, "B", T0, TTL)) == 1


def test_a_take_over_wins_only_from_the_lease_it_read(leased: Leased) -> None:
    t, row = leased.table, leased.where(1)
    leased.run(lease.claim(t, row, "A", T0, TTL))
    seen = leased.lease_of(1)
    assert (
        leased.run(lease.take_over(t, row, seen, "B", T0, TTL)) == 1
    )  # A is dead, although its lease is live
    assert leased.run(lease.take_over(t, row, seen, "C", T0, TTL)) == 0  # C read the same, B was first
    assert leased.lease_of(1) == ("B", T0 + TTL)


def test_is_held_agrees_with_the_sql() -> None:
    assert lease.is_held(T0, T0) and not lease.is_held(T0, T0 + timedelta(microseconds=1))
    assert not lease.is_held(None, T0)


def _race(leased: Leased, work: Callable[[Engine, str], Any]) -> dict[str, Any]:
    """Run `work(engine, name)` for A and B at once, each on its own engine (its own connections)."""
    url = leased.engine.url.render_as_string(hide_password=False)
    engines = {name: make_engine(url) for name in ("A", "B")}
    start = threading.Barrier(2)
    out: dict[str, Any] = {}

    def run(name: str) -> None:
        start.wait()
        out[name] = work(engines[name], name)

    threads = [threading.Thread(target=run, args=(name,)) for name in engines]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for engine in engines.values():
        engine.dispose()
    return out


def test_two_engines_claiming_one_row_at_once_exactly_one_wins(leased: Leased) -> None:
    t = leased.table

    def claim_each(engine: Engine, name: str) -> list[int]:
        return [leased.run(lease.claim(t, leased.where(i), name, T0, TTL), engine) for i in range(1, 13)]

    won = _race(leased, claim_each)
    assert [a + b for a, b in zip(won["A"], won["B"], strict=True)] == [1] * 12
    assert [leased.lease_of(i)[0] for i in range(1, 13)] == ["A" if a else "B" for a in won["A"]]


def test_two_engines_claiming_batches_never_share_a_row(leased: Leased) -> None:
    t = leased.table
    if len(t.primary_key.columns) != 1:
        pytest.skip(f"{t.name} rows are claimed one by one (a two-column key)")

    def drain(engine: Engine, name: str) -> list[Any]:
        mine: list[Any] = []
        while True:
            with engine.begin() as conn:
                got = lease.claim_batch(conn, t, name, T0, TTL, where=true(), order_by=(), limit=3)
            if not got:
                return mine
            mine.extend(r._mapping[next(iter(t.primary_key.columns)).name] for r in got)

    got = _race(leased, drain)
    assert not set(got["A"]) & set(got["B"]) and len(got["A"]) + len(got["B"]) == 12
    with leased.engine.begin() as conn:  # everything is held now: a batch finds nothing, not even for A
        assert lease.claim_batch(conn, t, "A", T0, TTL, where=true(), order_by=(), limit=50) == []
        again = lease.claim_batch(conn, t, "A", T0, TTL, where=true(), order_by=(), limit=50, own=True)
    assert len(again) == len(got["A"])  # with `own`, A's come back to A
