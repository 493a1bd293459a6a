"""Contract tests of the alert stores: the in-memory reference and the SQL stores on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from tests.alerts.conftest import PRODUCTION, T0, WORKFLOWS, config, event
from tests.conftest import PG_URL, reset_postgres
from xihe.agent.alerts.deliver import ChannelHealth, InMemoryChannelHealth
from xihe.agent.alerts.maintenance import MaintenanceWindow, MaintScope
from xihe.agent.alerts.model import AlertRecord, Kind, Notification, Reason, Tier
from xihe.agent.alerts.outbox import InMemoryOutbox, OutboxRow
from xihe.agent.alerts.ratelimit import RateLimiter
from xihe.agent.alerts.sql.channel import SqlChannelHealth
from xihe.agent.alerts.sql.maintenance import SqlMaintenanceStore
from xihe.agent.alerts.sql.outbox import SqlOutbox
from xihe.agent.alerts.sql.ratelimit import SqlRateLimiter
from xihe.agent.alerts.sql.records import SqlRecordSink
from xihe.agent.alerts.sql.state import SqlAlertStateStore
from xihe.agent.alerts.sql.stores import SqlAlertStores
from xihe.agent.alerts.state import (
    NS_FP,
    NS_INSTANCE,
    NS_SEEN,
    InMemoryAlertStateStore,
    InstanceState,
    Window,
)
from xihe.agent.db import make_engine, open_store_engine

MIN = timedelta(minutes=1)
LEASE = timedelta(seconds=60)


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    eng = open_store_engine(db_url)
    yield eng
    eng.dispose()


@pytest.fixture
def stores(engine: Engine) -> SqlAlertStores:
    return SqlAlertStores(engine)


# ---- a store per back end: "memory" is the reference, the SQL stores run on SQLite and PostgreSQL --
@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqlAlertStores | None]:
    if request.param == "memory":
        yield None
        return
    url = f"sqlite:///{tmp_path / 'alerts.db'}"
    if request.param == "postgres":
        reset_postgres(PG_URL)
        url = PG_URL
    eng = open_store_engine(url)
    yield SqlAlertStores(eng)
    eng.dispose()


@pytest.fixture
def state(backend: SqlAlertStores | None) -> Any:
    return InMemoryAlertStateStore(serialize=True) if backend is None else SqlAlertStateStore(backend)


@pytest.fixture
def outbox(backend: SqlAlertStores | None) -> Any:
    return InMemoryOutbox() if backend is None else SqlOutbox(backend)


@pytest.fixture
def health(backend: SqlAlertStores | None) -> Any:
    return InMemoryChannelHealth() if backend is None else SqlChannelHealth(backend)


@pytest.fixture
def limiter(backend: SqlAlertStores | None) -> Any:
    return RateLimiter() if backend is None else SqlRateLimiter(backend)


def row(i: int, at=T0, channel: str = "default") -> OutboxRow:
    return OutboxRow.of(
        Notification(f"inst:{i}:P1:{channel}", Kind.INSTANCE, Tier.P1, channel, at, f"text {i}", f"subj {i}")
    )


# ---- AlertStateStore --------------------------------------------------------------------------------
def test_state_round_trips_every_record_kind(state):
    inst = InstanceState(7, "held", Tier.P0, "prod", T0, (event(instance_id=7),), "inst:7:P0:prod", T0 + MIN)
    win = Window("fp", "abc|default", "default", T0, T0 + 10 * MIN, event()).add(event(), Tier.P1, (), False)
    state.put(NS_INSTANCE, "7", inst, T0 + MIN)
    state.put(NS_FP, "abc|default", win, T0 + 10 * MIN)
    state.put(NS_SEEN, "k", "1", None)
    assert state.get(NS_INSTANCE, "7") == inst
    assert state.get(NS_FP, "abc|default") == win
    assert state.get(NS_SEEN, "k") == "1"
    assert state.get(NS_SEEN, "missing") is None
    assert state.next_due() == T0 + MIN
    state.delete(NS_INSTANCE, "7")
    state.delete(NS_INSTANCE, "7")  # missing is fine
    assert state.get(NS_INSTANCE, "7") is None and state.next_due() == T0 + 10 * MIN


def test_state_pop_due_is_ordered_and_drops_untouched_records(state):
    for i, minutes in enumerate([3, 1, 2, 30]):
        state.put(NS_SEEN, f"k{i}", str(i), T0 + minutes * MIN)
    seen = []
    for ns, key, value in state.pop_due(T0 + 5 * MIN):
        seen.append(key)
        if key == "k2":  # replaced by the caller with a later due time: kept
            state.put(ns, key, value, T0 + 60 * MIN)
    assert seen == ["k1", "k2", "k0"]
    assert state.get(NS_SEEN, "k0") is None and state.get(NS_SEEN, "k1") is None
    assert state.get(NS_SEEN, "k2") == "2" and state.get(NS_SEEN, "k3") == "3"
    assert state.next_due() == T0 + 30 * MIN
    assert list(state.pop_due(T0 + 5 * MIN)) == []


def test_state_put_replaces(state):
    state.put(NS_SEEN, "k", "1", T0)
    state.put(NS_SEEN, "k", "2", None)
    assert state.get(NS_SEEN, "k") == "2" and state.next_due() is None


# ---- Outbox --------------------------------------------------------------------------------------
def test_outbox_key_is_unique(outbox):
    assert outbox.add(row(1)) is True
    assert outbox.add(row(1)) is False
    assert [r.key for r in outbox.rows()] == ["inst:1:P1:default"]
    got = outbox.get("inst:1:P1:default")
    assert got.text == "text 1" and got.status == "pending" and got.due_at == T0 and not got.force_email
    assert outbox.get("nope") is None


def test_outbox_claims_are_leased_and_taken_back_after_expiry(outbox):
    outbox.add(row(1))
    a = outbox.claim(T0, "a", LEASE, 10)
    assert [r.key for r in a] == ["inst:1:P1:default"] and a[0].lease_owner == "a"
    assert outbox.claim(T0 + timedelta(seconds=30), "b", LEASE, 10) == []
    b = outbox.claim(T0 + timedelta(seconds=61), "b", LEASE, 10)
    assert [r.key for r in b] == ["inst:1:P1:default"]
    assert not outbox.renew("inst:1:P1:default", "a", T0 + 2 * MIN, LEASE)
    assert not outbox.mark_sent("inst:1:P1:default", "a", T0, "robot")  # a lost the row
    assert outbox.renew("inst:1:P1:default", "b", T0 + 2 * MIN, LEASE)
    assert outbox.mark_sent("inst:1:P1:default", "b", T0 + MIN, "email")
    sent = outbox.get("inst:1:P1:default")
    assert (sent.status, sent.sent_via, sent.attempts, sent.sent_at) == ("sent", "email", 1, T0 + MIN)
    assert outbox.claim(T0 + 10 * MIN, "c", LEASE, 10) == []


def test_outbox_claim_order_limit_failure_and_release(outbox):
    outbox.add(row(1, T0 + 2 * MIN))
    outbox.add(row(2, T0))
    outbox.add(row(3, T0 + MIN))
    outbox.add(row(4, T0 + 60 * MIN))  # not due yet
    got = outbox.claim(T0 + 5 * MIN, "a", LEASE, 2)
    assert [r.key for r in got] == ["inst:2:P1:default", "inst:3:P1:default"]
    assert outbox.mark_failed("inst:2:P1:default", "a", T0 + 5 * MIN, "robot HTTP 500", T0 + 6 * MIN, True)
    outbox.release("inst:3:P1:default", "a", T0 + 7 * MIN)
    failed = outbox.get("inst:2:P1:default")
    assert (failed.attempts, failed.last_error, failed.due_at, failed.force_email) == (
        1,
        "robot HTTP 500",
        T0 + 6 * MIN,
        True,
    )
    assert failed.lease_owner == "" and failed.lease_until is None
    assert outbox.get("inst:3:P1:default").attempts == 0
    keys = [r.key for r in outbox.claim(T0 + 7 * MIN, "b", LEASE, 10)]
    assert keys == ["inst:1:P1:default", "inst:2:P1:default", "inst:3:P1:default"]


def test_outbox_concurrent_claims_never_share_a_row(stores):
    """Eight threads, each its own owner and connection, race for 200 rows: each row goes to one."""
    outbox = SqlOutbox(stores)
    for i in range(200):
        outbox.add(row(i))
    got: dict[str, list[str]] = {}
    barrier = threading.Barrier(8)

    def worker(name: str) -> None:
        barrier.wait()
        mine: list[str] = []
        while batch := outbox.claim(T0, name, LEASE, 7):
            mine.extend(r.key for r in batch)
        got[name] = mine

    threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    keys = [k for ks in got.values() for k in ks]
    assert len(keys) == 200 and len(set(keys)) == 200
    assert sum(1 for ks in got.values() if ks) >= 2  # they really raced


# ---- channel health ------------------------------------------------------------------------------
def test_health_switches_to_mail_at_the_threshold_and_back(health):
    assert health.get("default").mode == "robot"
    assert health.failure("default", T0, 3, True).failures == 1
    assert health.failure("default", T0, 3, True).mode == "robot"
    h = health.failure("default", T0, 3, True)
    assert (h.mode, h.failures, h.last_probe_at) == ("email", 3, T0)
    every = timedelta(seconds=60)
    assert not health.claim_probe("default", T0 + timedelta(seconds=30), every)
    assert health.claim_probe("default", T0 + timedelta(seconds=60), every)
    assert not health.claim_probe("default", T0 + timedelta(seconds=61), every)  # one probe per interval
    health.success("default", T0 + timedelta(seconds=61))
    assert (health["default"].mode, health["default"].failures) == ("robot", 0)
    assert not health.claim_probe("default", T0 + 10 * MIN, every)  # on the robot: nothing to probe


def test_health_without_mail_never_switches(health):
    for _ in range(5):
        h = health.failure("prod", T0, 3, False)
    assert (h.mode, h.failures) == ("robot", 5)


def test_health_survives_a_new_store(stores):
    SqlChannelHealth(stores).failure("default", T0, 1, True)
    fresh = SqlChannelHealth(
        SqlAlertStores(make_engine(stores.engine.url.render_as_string(hide_password=False)))
    )
    assert fresh.get("default").mode == "email"


# ---- rate limit ------------------------------------------------------------------------------------
def test_limiter_acquire_is_a_sliding_minute(limiter):
    for s in range(20):
        assert limiter.acquire("XIHE_ROBOT_KEY", T0 + timedelta(seconds=s), 20)
    assert not limiter.acquire("XIHE_ROBOT_KEY", T0 + timedelta(seconds=30), 20)
    assert limiter.acquire("OTHER", T0 + timedelta(seconds=30), 20)  # per robot
    assert limiter.next_free("XIHE_ROBOT_KEY", T0 + timedelta(seconds=30), 20) == T0 + MIN
    assert not limiter.allowed("XIHE_ROBOT_KEY", T0 + timedelta(seconds=59), 20)
    assert limiter.allowed("XIHE_ROBOT_KEY", T0 + timedelta(seconds=60), 20)


def test_shared_limiter_grants_exactly_the_limit_to_racing_replicas(stores):
    """Two engines (two replicas) and eight threads ask for 60 slots in one minute: 20 are granted."""
    other = SqlAlertStores(make_engine(stores.engine.url.render_as_string(hide_password=False)))
    limiters = [SqlRateLimiter(stores), SqlRateLimiter(other)]
    granted: list[bool] = []
    lock = threading.Lock()
    barrier = threading.Barrier(8)

    def worker(i: int) -> None:
        barrier.wait()
        for _ in range(8):
            ok = limiters[i % 2].acquire("XIHE_ROBOT_KEY", T0 + timedelta(seconds=i), 20)
            with lock:
                granted.append(ok)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert granted.count(True) == 20


# ---- maintenance ---------------------------------------------------------------------------------
def test_maintenance_store_numbers_closes_and_expires_once(stores):
    store = SqlMaintenanceStore(stores)
    a = MaintenanceWindow("chat:dave:1:all", T0, T0 + 30 * MIN, MaintScope(), "chat", "dave")
    b = MaintenanceWindow(
        "chat:dave:2:host", T0, T0 + 60 * MIN, MaintScope("host", "10.0.0.1"), "chat", "dave"
    )
    store.save(a)
    store.save(b)
    store.save(a)  # replace, same number
    numbered = store.numbered(T0)
    assert [w for _n, w in numbered] == [a, b]
    na, nb = numbered[0][0], numbered[1][0]
    assert store.number_of(a.id) == na and na != nb
    assert store.load() == [a, b]
    assert store.expire_due(T0 + 29 * MIN) == []
    expired = store.expire_due(T0 + 31 * MIN)
    assert [(n, w.id) for n, w in expired] == [(na, a.id)]
    assert store.expire_due(T0 + 32 * MIN) == []  # audited once
    assert store.close([b.id], T0 + 40 * MIN, "dave") == [b.id]
    assert store.close([b.id], T0 + 41 * MIN, "dave") == []
    assert store.load(since=T0 + 40 * MIN) == []
    assert store.expire_due(T0 + 90 * MIN) == []  # b was closed, not expired
    store.delete(a.id)
    assert [w.id for w in store.load()] == [b.id]


# ---- records and the unit of work -----------------------------------------------------------------
def test_records_and_unit_rollback(stores):
    sink = SqlRecordSink(stores, "replica-1")
    state = SqlAlertStateStore(stores)
    rec = AlertRecord(T0, "1:t1:FAILURE:0", 1, "wf", "t1", Reason.MAINTENANCE, None, "nightly")
    sink.record(rec)
    with pytest.raises(RuntimeError), stores.unit():
        state.put(NS_SEEN, "inside", "1", None)
        sink.record(rec)
        raise RuntimeError("crash mid-feed")
    assert state.get(NS_SEEN, "inside") is None  # nothing of a failed unit is kept
    rows = sink.rows()
    assert len(rows) == 1
    assert (rows[0]["reason"], rows[0]["detail"], rows[0]["holder"]) == (
        "maintenance",
        "nightly",
        "replica-1",
    )


# ---- what the web pages read --------------------------------------------------------------------
def test_page_reads_come_newest_first_and_filtered(stores):
    sink = SqlRecordSink(stores)
    for i, reason in enumerate((Reason.NEW_INSTANCE, Reason.MAINTENANCE, Reason.NEW_INSTANCE)):
        sink.record(AlertRecord(T0 + i * MIN, f"k{i}", 10 + i, "wf", "t1", reason, None, f"d{i}"))
    assert [r["detail"] for r in sink.recent(2)] == ["d2", "d1"]
    assert [r["detail"] for r in sink.recent(10, reasons=["maintenance"])] == ["d1"]
    assert [r["detail"] for r in sink.recent(10, instance_ids=[10, 12])] == ["d2", "d0"]
    outbox = SqlOutbox(stores)
    for i in range(3):
        outbox.add(row(i))
    assert [r.key for r in outbox.recent(2)] == ["inst:2:P1:default", "inst:1:P1:default"]
    health = SqlChannelHealth(stores)
    health.failure("prod", T0, 3, True)
    health.success("default", T0 + MIN)
    assert list(health.all().items()) == [("default", ChannelHealth()), ("prod", ChannelHealth("robot", 1))]
    maint = SqlMaintenanceStore(stores)
    a = MaintenanceWindow("chat:dave:1:all", T0, T0 + 30 * MIN, MaintScope(), "chat", "dave", "first")
    b = MaintenanceWindow("chat:dave:2:all", T0, T0 + 30 * MIN, MaintScope(), "chat", "dave", "second")
    maint.save(a)
    maint.save(b)
    maint.close([a.id], T0 + MIN, "erin")
    assert [(w.note, at, by) for w, at, by in maint.history(10)] == [
        ("second", None, ""),
        ("first", T0 + MIN, "erin"),
    ]


# ---- the pipeline itself: SQL stores decide exactly like the in-memory reference ------------------
def _storm() -> list:
    out = []
    for i in range(40):
        at = T0 + timedelta(seconds=20 * i)
        out.append(
            event(
                at=at,
                instance_id=100 + i,
                host=f"10.0.{i % 3}.1:1",
                error=f"Connection refused to 10.9.9.{i}:5432" if i % 2 else f"exit code {i}",
                workflow="profile_test" if i % 4 else "order_sync",
                project="sandbox" if i % 4 else "etl",
                environment="test" if i % 4 else "prod",
                retry_times=i % 3,
                max_retry_times=2,
            )
        )
        if i % 5 == 0:
            out.append(event(at=at, instance_id=100 + i, task="t2", host=f"10.0.{i % 3}.1:1"))
        if i % 7 == 0:
            out.append(event(at=at, instance_id=100 + i))  # a re-poll: duplicate
    return out


def _run(make: Callable[[], tuple[Any, Any]]) -> tuple[list[tuple[str, str]], list[tuple[str, str, str]]]:
    from xihe.agent.alerts.pipeline import Pipeline

    state, outbox = make()
    p = Pipeline(config(instance_wait_seconds=10), WORKFLOWS, state, outbox, production=PRODUCTION)
    recs: list[tuple[str, str]] = []
    for e in _storm():
        recs.extend((r.event_key, r.reason.value) for r in p.feed(e, e.at).records)
    p.tick(T0 + 60 * MIN)
    return recs, [(r.key, r.kind, r.text) for r in outbox.rows()]


def test_sql_pipeline_decides_like_the_in_memory_one(stores):
    expected = _run(lambda: (InMemoryAlertStateStore(serialize=True), InMemoryOutbox()))
    got = _run(lambda: (SqlAlertStateStore(stores), SqlOutbox(stores)))
    assert got == expected
    # node storms on its 3 hosts fold most failures
    assert len(expected[1]) >= 5 and {r for _k, r in expected[0]} >= {"new_instance", "duplicate_event"}
