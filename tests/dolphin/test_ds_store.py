"""SQL watch and catalog stores: the same contract as the in-memory ones, plus leases across replicas."""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine

from tests.conftest import PG_URL, reset_postgres
from tests.dolphin.conftest import client_for
from xihe.agent.db import open_store_engine
from xihe.integrations.dolphinscheduler.sim import DolphinSimulator, Scenario, SimDefinition, SimProject
from xihe.tools.dolphin.names import CatalogEntry, InMemoryCatalogStore
from xihe.tools.dolphin.poll import run_poll_cycle
from xihe.tools.dolphin.store import SqlCatalogStore, SqlWatchStore
from xihe.tools.dolphin.watch import Finished, InMemoryWatchStore, PollPolicy, Watch

T0 = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
BACKENDS = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def engine_for(kind: str, tmp_path: Path) -> Engine:
    if kind == "sqlite":
        return open_store_engine(f"sqlite:///{tmp_path / 'ds.db'}")
    reset_postgres(PG_URL)
    return open_store_engine(PG_URL)


@pytest.fixture(params=BACKENDS)
def watch_store(request: pytest.FixtureRequest, tmp_path: Path) -> InMemoryWatchStore | SqlWatchStore:
    if request.param == "memory":
        return InMemoryWatchStore()
    return SqlWatchStore(engine_for(request.param, tmp_path), holder="r1")


@pytest.fixture(params=BACKENDS)
def catalog_store(request: pytest.FixtureRequest, tmp_path: Path) -> InMemoryCatalogStore | SqlCatalogStore:
    if request.param == "memory":
        return InMemoryCatalogStore()
    return SqlCatalogStore(engine_for(request.param, tmp_path))


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Engine:
    return engine_for(request.param, tmp_path)


def make_watch(key: str, due_in: float = 0, **kw: object) -> Watch:
    base = Watch(
        key=key,
        task_id=key.split(":")[0],
        conversation="cli:alice",
        project="etl",
        project_code=1000000000001,
        workflow="order_sync",
        definition_code=2000000000001,
        started_at=T0,
        next_poll_at=T0 + timedelta(seconds=due_in),
    )
    return replace(base, **kw)  # type: ignore[arg-type]


# ---- WatchStore contract -----------------------------------------------------------------------


def test_add_is_idempotent_and_get_round_trips(watch_store: InMemoryWatchStore | SqlWatchStore) -> None:
    w = make_watch(
        "7:tool:1:0",
        expected_runs=3,
        instance_ids=(101, 102),
        states=((101, "SUCCESS"), (102, "RUNNING_EXECUTION")),
        reported=(101,),
        foreign_ids=(99,),
        interval=60.0,
        last_change_at=T0,
        environment="prod",
        progress_tasks=True,
    )
    watch_store.add(w)
    watch_store.add(replace(w, conversation="elsewhere"))  # a second add leaves the row alone
    assert watch_store.get("7:tool:1:0") == w
    assert watch_store.get("missing") is None


def test_due_is_soonest_first_and_skips_done_and_future(
    watch_store: InMemoryWatchStore | SqlWatchStore,
) -> None:
    watch_store.add(make_watch("1:a", due_in=10))
    watch_store.add(make_watch("2:a", due_in=0))
    watch_store.add(make_watch("3:a", due_in=100))
    watch_store.add(make_watch("4:a", due_in=0, done=True))
    assert [w.key for w in watch_store.due(T0 + timedelta(seconds=10))] == ["2:a", "1:a"]
    assert [w.key for w in watch_store.due(T0 + timedelta(seconds=10), limit=1)] == ["2:a"]


def test_save_replaces_and_active_lists_unfinished(watch_store: InMemoryWatchStore | SqlWatchStore) -> None:
    watch_store.add(make_watch("1:a"))
    watch_store.add(make_watch("2:a"))
    (first, _) = watch_store.due(T0)
    watch_store.save(replace(first, done=True, states=((101, "SUCCESS"),), instance_ids=(101,)))
    saved = watch_store.get("1:a")
    assert saved is not None and saved.done and saved.states == ((101, "SUCCESS"),)
    assert [w.key for w in watch_store.active()] == ["2:a"]
    watch_store.save(make_watch("9:new"))  # saving an unknown key stores it
    assert watch_store.get("9:new") is not None


# ---- CatalogStore contract ---------------------------------------------------------------------


def test_catalog_replace_is_per_project(catalog_store: InMemoryCatalogStore | SqlCatalogStore) -> None:
    assert catalog_store.entries() == [] and catalog_store.synced_at() is None
    etl = [CatalogEntry("etl", "order_sync", 1, "ONLINE", 10), CatalogEntry("etl", "old", 2, "OFFLINE", 10)]
    dw = [CatalogEntry("dw", "dw_sales", 3, "ONLINE", 20)]
    catalog_store.replace(etl + dw, T0)
    assert [e.name for e in catalog_store.entries()] == ["dw_sales", "old", "order_sync"]
    later = T0 + timedelta(minutes=10)
    catalog_store.replace([CatalogEntry("etl", "order_sync", 1, "OFFLINE", 10)], later)
    assert catalog_store.entries() == [dw[0], CatalogEntry("etl", "order_sync", 1, "OFFLINE", 10)]
    assert catalog_store.synced_at() == later


# ---- leases (SQL only) -------------------------------------------------------------------------


def test_two_replicas_never_claim_the_same_watch(engine: Engine) -> None:
    a, b = SqlWatchStore(engine, holder="a"), SqlWatchStore(engine, holder="b")
    for i in range(10):
        a.add(make_watch(f"{i}:w"))
    got_a = {w.key for w in a.due(T0, limit=6)}
    got_b = {w.key for w in b.due(T0)}
    assert len(got_a) == 6 and len(got_b) == 4 and not got_a & got_b
    assert {w.key for w in b.due(T0)} == got_b  # b may claim its own rows again, never a's
    # a's lease lapses (its replica died): b takes the rows over; a's late save is dropped
    stale = a.get(sorted(got_a)[0])
    assert stale is not None
    later = T0 + timedelta(seconds=121)
    taken = {w.key for w in b.due(later)}
    assert got_a <= taken
    a.save(replace(stale, done=True))
    assert not (a.get(stale.key) or stale).done
    b.save(replace(stale, done=True))
    assert (b.get(stale.key) or stale).done


def test_progress_note_throttles_per_watch(engine: Engine) -> None:
    store = SqlWatchStore(engine, holder="a")
    store.add(make_watch("1:w"))
    every = timedelta(minutes=5)
    assert store.progress_note("1:w", "RUNNING 1/3", T0, every)
    assert not store.progress_note("1:w", "RUNNING 2/3", T0 + timedelta(minutes=1), every)
    assert not store.progress_note("1:w", "RUNNING 1/3", T0 + timedelta(minutes=6), every)  # nothing new
    assert store.progress_note("1:w", "RUNNING 2/3", T0 + timedelta(minutes=6), every)


def _sim_with_runs(n: int) -> tuple[DolphinSimulator, list[Watch]]:
    projects = [
        SimProject(
            "etl",
            1000000000001,
            [
                SimDefinition(f"wf_{d}", 2000000000000 + d, scenario=Scenario(task_seconds=20))
                for d in range(4)
            ],
        )
    ]
    sim = DolphinSimulator(projects, version="3.3").start()
    now = sim.clock()
    watches = []
    for i in range(n):
        d = projects[0].definitions[i % 4]
        inst = sim.run_directly(d.name, marker=f"{i}:run")
        w = make_watch(f"{i}:run", workflow=d.name, definition_code=d.code, started_at=now, next_poll_at=now)
        watches.append(replace(w, instance_ids=(inst.id,)))
    return sim, watches


class Replica:
    """One bot replica's view of the watch table: records what each poll cycle claimed."""

    def __init__(self, engine: Engine, name: str, sim: DolphinSimulator) -> None:
        self.store = SqlWatchStore(engine, holder=name)
        self.client = client_for(sim, version="3.3")
        self.claimed: list[str] = []
        self.reported: list[int] = []
        self.polled = 0

    def due(self, now: datetime, limit: int = 1000) -> list[Watch]:
        got = self.store.due(now, 5)  # small batches, so the two replicas interleave
        self.claimed.extend(w.key for w in got)
        self.polled += len(got)
        return got

    def save(self, watch: Watch) -> None:
        self.store.save(watch)

    def cycle(self, barrier: threading.Barrier, now: datetime, policy: PollPolicy) -> None:
        self.claimed = []
        barrier.wait()  # both replicas start the job at the same moment
        while True:  # drain: claim a batch, poll it, save it, until nothing is left to claim
            result = run_poll_cycle(self, self.client, now, policy)  # type: ignore[arg-type]
            self.reported.extend(o.instance.id for o in result.outcomes if isinstance(o, Finished))
            if not result.watches:
                return


@pytest.mark.postgres
def test_two_replicas_polling_postgres_at_once_poll_each_run_once_per_cycle(tmp_path: Path) -> None:
    """Two replicas run the poll job in parallel threads on one PostgreSQL; no run is polled twice."""
    engine = engine_for("postgres", tmp_path)
    sim, watches = _sim_with_runs(40)
    try:
        seed = SqlWatchStore(engine, holder="seed")
        for w in watches:
            seed.add(w)
        policy = PollPolicy(interval=15, max_interval=15, backoff=1.0)
        a, b = Replica(engine, "a", sim), Replica(engine, "b", sim)
        for _ in range(8):
            now = sim.advance(15)
            barrier = threading.Barrier(2)
            threads = [threading.Thread(target=r.cycle, args=(barrier, now, policy)) for r in (a, b)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert not set(a.claimed) & set(b.claimed), "a run was claimed by both replicas"
            assert [w for w in seed.active() if w.next_poll_at <= now] == [], "every due run was polled"
        # each run's end was reported exactly once, by one replica or the other
        assert sorted(a.reported + b.reported) == sorted(i for w in watches for i in w.instance_ids)
        assert a.polled and b.polled and seed.active() == []  # both did share the work
    finally:
        threading.Thread(target=sim.stop, daemon=True).start()


def test_save_all_writes_ours_skips_rows_another_replica_took_and_inserts_new(engine: Engine) -> None:
    a, b = SqlWatchStore(engine, holder="a"), SqlWatchStore(engine, holder="b")
    for key in ("1:w", "2:w"):
        a.add(make_watch(key))
    mine = a.due(T0)
    later = T0 + timedelta(seconds=121)
    (taken,) = b.due(later, limit=1)  # a's lease lapsed; b took the first row
    a.save_all([replace(w, done=True) for w in mine] + [make_watch("3:w")])
    saved = {k: a.get(k) for k in ("1:w", "2:w", "3:w")}
    assert not saved[taken.key].done  # type: ignore[union-attr]
    other = ({"1:w", "2:w"} - {taken.key}).pop()
    assert saved[other].done and saved["3:w"] is not None  # type: ignore[union-attr]


def test_with_instance_finds_the_newest_watch_of_an_instance_however_many_watches_there_are(
    engine: Engine,
) -> None:
    store = SqlWatchStore(engine, holder="r1")
    old = make_watch("1:old", instance_ids=(7,))
    store.add(old)
    newer = [make_watch(f"{i}:x", last_change_at=T0 + timedelta(seconds=i)) for i in range(2, 2103)]
    store.save_all(newer)  # 2,101 newer watches that followed other runs (the old read saw only 2,000)
    found = store.with_instance(7)
    assert found is not None and found.key == "1:old"
    # an instance learned by a later poll is found too, and the newest of two watches wins
    store.save_all([replace(newer[0], instance_ids=(8,)), replace(newer[5], instance_ids=(8,))])
    found = store.with_instance(8)
    assert found is not None and found.key == newer[5].key
    assert store.with_instance(9) is None
