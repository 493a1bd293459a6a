"""The plan store on SQLite and PostgreSQL: dependencies, atomic claims, leases, owners, changes with reasons."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine

from xihe.agent.db import open_store_engine
from xihe.agent.task_store import TaskStore
from xihe.tools.longtask.plan_store import PlanStore
from xihe.tools.longtask.plans import PlanError

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
LEASE = timedelta(minutes=15)
CHECKED = {"kind": "artifact", "checked": {"size": 1}, "summary": "artifact x"}


@pytest.fixture
def engine(db_url: str) -> Engine:
    return open_store_engine(db_url)


@pytest.fixture
def plan(engine: Engine) -> tuple[PlanStore, int]:
    task = TaskStore(engine).create(kind="chat", owner="alice", conversation="c", goal="g", now=T0)
    return PlanStore(engine), task.id


def test_items_depend_only_on_items_that_already_exist(plan: tuple[PlanStore, int]) -> None:
    plans, t = plan
    plans.add(t, "check facts", T0, actor="task:1")
    with pytest.raises(PlanError, match="#2 do not exist"):
        plans.add(t, "summary", T0, actor="task:1", depends_on=[1, 2])  # #2 would be itself: no cycles
    b = plans.add(t, "policy", T0, actor="task:1")
    c = plans.add(t, "basis", T0, actor="task:1", depends_on=[1, b.seq])
    assert c.seq == 3 and c.depends_on == (1, 2)


def test_a_dependent_starts_only_after_all_its_dependencies_completed(plan: tuple[PlanStore, int]) -> None:
    plans, t = plan
    for desc in ("A facts", "B policy"):
        plans.add(t, desc, T0, actor="w")
    plans.add(t, "C basis", T0, actor="w", depends_on=[1, 2])
    with pytest.raises(PlanError, match="#1 is pending, #2 is pending"):
        plans.claim(t, 3, "w", T0, LEASE)
    plans.claim(t, 1, "w", T0, LEASE)
    plans.complete(t, 1, "w", CHECKED, T0)
    plans.claim(t, 2, "w", T0, LEASE)
    plans.fail(t, 2, "w", "policy service down", T0)
    with pytest.raises(PlanError, match="#2 is failed"):  # A succeeded, B failed: C still cannot start
        plans.claim(t, 3, "w", T0, LEASE)


def test_completion_needs_the_owner_and_checked_evidence(plan: tuple[PlanStore, int]) -> None:
    plans, t = plan
    plans.add(t, "A", T0, actor="w")
    with pytest.raises(PlanError, match="claim it before"):
        plans.complete(t, 1, "w", CHECKED, T0)
    plans.claim(t, 1, "w1", T0, LEASE)
    with pytest.raises(PlanError, match="checked"):
        plans.complete(t, 1, "w1", {"done": True}, T0)
    with pytest.raises(PlanError, match="claimed by w1, not by w2"):
        plans.complete(t, 1, "w2", CHECKED, T0)
    done = plans.complete(t, 1, "w1", CHECKED, T0)
    assert done.status == "completed" and done.evidence == CHECKED
    assert plans.complete(t, 1, "w1", CHECKED, T0).status == "completed"  # a replay is a no-op


def test_an_abandoned_claim_is_reclaimable_after_its_lease(plan: tuple[PlanStore, int]) -> None:
    plans, t = plan
    plans.add(t, "A", T0, actor="w")
    plans.claim(t, 1, "w1", T0, LEASE)
    with pytest.raises(PlanError, match="already claimed by w1"):
        plans.claim(t, 1, "w2", T0 + timedelta(minutes=14), LEASE)
    later = T0 + timedelta(minutes=16)
    item = plans.claim(t, 1, "w2", later, LEASE)
    assert item.lease_owner == "w2" and item.lease_until == later + LEASE
    with pytest.raises(PlanError, match="claimed by w2"):
        plans.complete(t, 1, "w1", CHECKED, later)  # the old worker lost it
    assert [c.change for c in plans.history(t)] == ["added", "claimed", "reclaimed"]


def test_replacing_or_dropping_an_item_records_the_reason(plan: tuple[PlanStore, int]) -> None:
    plans, t = plan
    plans.add(t, "prepare the application", T0, actor="w")
    plans.add(t, "wait for confirmation", T0, actor="w", depends_on=[1])
    with pytest.raises(PlanError, match="needs a reason"):
        plans.replace(t, 1, "explain the exception", " ", T0, actor="w")
    item = plans.replace(
        t, 1, "explain the custom-goods exception", "the order is custom-made", T0, actor="w"
    )
    assert item.description == "explain the custom-goods exception" and item.status == "pending"
    dropped = plans.drop(t, 2, "nothing to confirm for an exception", T0, actor="w")
    assert dropped.status == "cancelled" and dropped.reason == "nothing to confirm for an exception"
    history = plans.history(t)
    assert (history[-2].change, history[-2].reason) == ("replaced", "the order is custom-made")
    assert history[-2].detail["before"] == "prepare the application"
    plans.claim(t, 1, "w", T0, LEASE)
    plans.complete(t, 1, "w", CHECKED, T0)
    with pytest.raises(PlanError, match="completed"):
        plans.replace(t, 1, "x", "y", T0, actor="w")  # completed work is history, not rewritten


@pytest.mark.parametrize("workers", [16])
def test_many_workers_racing_for_one_item_exactly_one_wins(engine: Engine, workers: int) -> None:
    tasks = TaskStore(engine)
    t = tasks.create(kind="chat", owner="alice", conversation="c", goal="g", now=T0).id
    PlanStore(engine).add(t, "the contested item", T0, actor="w")
    start = threading.Barrier(workers)
    wins: list[str] = []
    losses: list[str] = []

    def work(n: int) -> None:
        store = PlanStore(engine)
        start.wait()
        try:
            store.claim(t, 1, f"worker-{n}", T0, LEASE)
            wins.append(f"worker-{n}")
        except PlanError as exc:
            losses.append(str(exc))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(workers)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(wins) == 1, wins
    assert len(losses) == workers - 1
    item = PlanStore(engine).get(t, 1)
    assert item.lease_owner == wins[0]
    assert [c.change for c in PlanStore(engine).history(t)].count("claimed") == 1


def _claim_in_process(url: str, task_id: int, name: str, go: object, out: object) -> None:
    from xihe.agent.db import make_engine

    store = PlanStore(make_engine(url))
    go.wait()  # type: ignore[attr-defined]
    try:
        store.claim(task_id, 1, name, T0, LEASE)
        out.put(("won", name))  # type: ignore[attr-defined]
    except PlanError:
        out.put(("lost", name))  # type: ignore[attr-defined]


@pytest.mark.postgres
def test_processes_racing_on_postgres_exactly_one_wins(db_url: str) -> None:
    import multiprocessing as mp

    if not db_url.startswith("postgresql"):
        pytest.skip("the cross-process race is a PostgreSQL property (SQLite serializes writers)")
    engine = open_store_engine(db_url)
    t = TaskStore(engine).create(kind="chat", owner="alice", conversation="c", goal="g", now=T0).id
    PlanStore(engine).add(t, "the contested item", T0, actor="w")
    ctx = mp.get_context("spawn")
    go, out = ctx.Barrier(8), ctx.Queue()
    procs = [ctx.Process(target=_claim_in_process, args=(db_url, t, f"p{n}", go, out)) for n in range(8)]
    for p in procs:
        p.start()
    results = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=30)
    winners = [name for verdict, name in results if verdict == "won"]
    assert len(winners) == 1 and PlanStore(engine).get(t, 1).lease_owner == winners[0]
