"""Watching started runs: final states only, AlertEvents for failures, backoff, restart safety."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date

import pytest

from tests.dolphin.conftest import (
    BACKFILL,
    BAD_HOST,
    BROKEN,
    ETL,
    FLAKY,
    LONG,
    ORDER_SYNC,
    WAITING,
    client_for,
)
from xihe.integrations.dolphinscheduler import DolphinClient
from xihe.integrations.dolphinscheduler.runs import start_workflow
from xihe.integrations.dolphinscheduler.sim import DolphinSimulator
from xihe.tools.dolphin.names import CatalogEntry
from xihe.tools.dolphin.poll import poll_once, run_poll_cycle
from xihe.tools.dolphin.watch import (
    Finished,
    InMemoryWatchStore,
    NotFound,
    PollPolicy,
    PollResult,
    Progress,
    Watch,
    watch_from_start,
)

POLICY = PollPolicy(interval=15, max_interval=120, backoff=2.0, discovery_timeout=1800)


def begin(
    sim: DolphinSimulator,
    client: DolphinClient,
    store: InMemoryWatchStore,
    code: int,
    name: str,
    key: str,
    dates: tuple[date, ...] = (),
) -> Watch:
    wf = CatalogEntry("etl", name, code, "ONLINE", ETL)
    now = sim.clock()
    out = start_workflow(client, wf, key, now, dates)
    watch = watch_from_start(
        out,
        task_id=key.split(":")[0],
        conversation="conv-1",
        project="etl",
        project_code=ETL,
        workflow=name,
        definition_code=code,
        now=now,
        environment="prod",
        policy=POLICY,
    )
    store.add(watch)
    return watch


def drive(
    sim: DolphinSimulator,
    client: DolphinClient,
    store: InMemoryWatchStore,
    key: str,
    seconds: float = 3600,
    step: float = 15,
) -> list[PollResult]:
    results = []
    elapsed = 0.0
    while elapsed < seconds and not store.get(key).done:  # type: ignore[union-attr]
        sim.advance(step)
        elapsed += step
        results.append(run_poll_cycle(store, client, sim.clock(), POLICY))
    return results


def finished(results: list[PollResult]) -> list[Finished]:
    return [o for r in results for o in r.outcomes if isinstance(o, Finished)]


@pytest.fixture
def store() -> InMemoryWatchStore:
    return InMemoryWatchStore()


def test_success_reports_once_and_ends_the_watch(sim: DolphinSimulator, store: InMemoryWatchStore) -> None:
    client = client_for(sim, version=sim.version)
    begin(sim, client, store, ORDER_SYNC, "order_sync", "t1:s1")
    results = drive(sim, client, store, "t1:s1")
    (fin,) = finished(results)
    assert fin.state == "SUCCESS" and fin.watch_done and fin.watch.conversation == "conv-1"
    assert "order_sync" in fin.summary and "SUCCESS" in fin.summary
    # no failure to alert on: one SUCCESS event, which resolves an alert of this run (issue 29)
    assert [(e.state, e.instance_id, e.task) for r in results for e in r.events] == [
        ("SUCCESS", fin.instance.id, "")
    ]
    assert store.get("t1:s1").done and store.due(sim.advance(3600)) == []  # type: ignore[union-attr]


def test_retry_then_success_is_not_a_failure(sim: DolphinSimulator, store: InMemoryWatchStore) -> None:
    client = client_for(sim, version=sim.version)
    begin(sim, client, store, FLAKY, "flaky_sync", "t2:s1")
    results = drive(sim, client, store, "t2:s1", step=10)
    states = [o.state for r in results for o in r.outcomes]
    assert "FAILURE" not in states and states[-1] == "SUCCESS"
    assert [e.state for r in results for e in r.events] == ["SUCCESS"]  # nothing to alert on
    inst = sim.instances_of("flaky_sync")[0]
    assert sum(1 for t in inst.tasks if t.state == "FAILURE") == 1  # a task did fail on the way


def test_failure_emits_failure_event_with_host_retries_and_log_tail(
    sim: DolphinSimulator, store: InMemoryWatchStore
) -> None:
    client = client_for(sim, version=sim.version)
    begin(sim, client, store, BROKEN, "broken_sync", "t3:s1")
    results = drive(sim, client, store, "t3:s1")
    (fin,) = finished(results)
    assert fin.state == "FAILURE" and fin.watch_done
    (event,) = [e for r in results for e in r.events]
    inst = sim.instances_of("broken_sync")[0]
    assert (event.workflow, event.workflow_code, event.instance_id) == ("broken_sync", BROKEN, inst.id)
    assert (event.state, event.failed_task, event.host, event.failed_task_state) == (
        "FAILURE",
        "load",
        BAD_HOST,
        "FAILURE",
    )
    assert not event.is_task  # the workflow's FAILURE, naming the task that failed it
    assert (event.retry_times, event.max_retry_times) == (1, 1)
    assert "SQLException" in event.error and "SQLException" in event.log_tail
    assert event.log_tail.splitlines()[-1].endswith("exit code 1")
    assert event.environment == "prod" and event.start_time and event.end_time and event.source == "poller"


def test_stop_finishes_without_failure_event(sim: DolphinSimulator, store: InMemoryWatchStore) -> None:
    client = client_for(sim, version=sim.version)
    begin(sim, client, store, ORDER_SYNC, "order_sync", "t4:s1")
    first = drive(sim, client, store, "t4:s1", seconds=30)
    inst_id = store.get("t4:s1").instance_ids[0]  # type: ignore[union-attr]
    client.stop(ETL, inst_id)
    rest = drive(sim, client, store, "t4:s1")
    (fin,) = finished(first + rest)
    assert fin.state == "STOP" and [e for r in first + rest for e in r.events] == []


def test_waiting_and_long_running_states_are_not_final(
    sim: DolphinSimulator, store: InMemoryWatchStore
) -> None:
    client = client_for(sim, version=sim.version)
    begin(sim, client, store, WAITING, "queued_sync", "t5:s1")
    begin(sim, client, store, LONG, "long_sync", "t6:s1")
    results = drive(sim, client, store, "t5:s1", seconds=500)
    progress = [o for r in results for o in r.outcomes if isinstance(o, Progress)]
    assert {"SERIAL_WAIT"} <= {o.state for o in progress}
    assert finished(results) == []
    assert not store.get("t5:s1").done and not store.get("t6:s1").done  # type: ignore[union-attr]
    (inst,) = sim.instances_of("queued_sync")
    client_state = client.get_instance(ETL, inst.id).state
    assert client_state == "SERIAL_WAIT"


def test_ready_stop_is_not_final(sim: DolphinSimulator, store: InMemoryWatchStore) -> None:
    client = client_for(sim, version=sim.version)
    begin(sim, client, store, ORDER_SYNC, "order_sync", "t7:s1")
    drive(sim, client, store, "t7:s1", seconds=30)
    client.stop(ETL, store.get("t7:s1").instance_ids[0])  # type: ignore[union-attr]
    watch = store.get("t7:s1")
    assert watch is not None
    result = poll_once([watch], client, watch.next_poll_at, POLICY)
    assert [o.state for o in result.outcomes] == ["READY_STOP"] and not result.watches[0].done


def test_restart_continues_from_the_store(
    make_sim: Callable[..., DolphinSimulator], store: InMemoryWatchStore
) -> None:
    sim = make_sim("3.1")  # the hardest case: no id from start, marker only in the detail
    first = client_for(sim)
    begin(sim, first, store, BROKEN, "broken_sync", "t8:s1")
    drive(sim, first, store, "t8:s1", seconds=60)
    assert store.get("t8:s1").instance_ids  # type: ignore[union-attr]
    second = client_for(sim)  # the bot restarted: new client, same store
    results = drive(sim, second, store, "t8:s1")
    (fin,) = finished(results)
    assert fin.state == "FAILURE" and len([e for r in results for e in r.events]) == 1


def test_serial_backfill_watch_follows_each_date_and_stops_with_the_chain(
    sim: DolphinSimulator, store: InMemoryWatchStore
) -> None:
    client = client_for(sim, version=sim.version)
    dates = (date(2026, 11, 28), date(2026, 11, 29), date(2026, 11, 30))
    begin(sim, client, store, BACKFILL, "daily_backfill", "t9:s1", dates)
    results = drive(sim, client, store, "t9:s1", seconds=7200)
    fins = finished(results)
    assert [(f.instance.schedule_time.day, f.state) for f in fins if f.instance.schedule_time] == [
        (28, "SUCCESS"),
        (29, "FAILURE"),
    ]
    assert fins[-1].watch_done and not fins[0].watch_done
    # the business dates asked for: 11-28 succeeded, 11-29 failed
    assert [(e.state, e.business_date) for r in results for e in r.events] == [
        ("SUCCESS", "2026-11-28"),
        ("FAILURE", "2026-11-29"),
    ]


def test_backs_off_while_nothing_changes(
    make_sim: Callable[..., DolphinSimulator], store: InMemoryWatchStore
) -> None:
    sim = make_sim("3.3")
    client = client_for(sim)
    begin(sim, client, store, LONG, "long_sync", "t10:s1")
    intervals = []
    for _ in range(30):
        sim.advance(15)
        run_poll_cycle(store, client, sim.clock(), POLICY)
        intervals.append(store.get("t10:s1").interval)  # type: ignore[union-attr]
    assert max(intervals) == POLICY.max_interval
    polls = sum(n for k, n in sim.counts.items() if k.endswith("workflow-instances"))
    assert polls < 10  # 30 cycles, but the watch was due far less often


def test_run_that_never_appears_is_reported_not_found(
    make_sim: Callable[..., DolphinSimulator], store: InMemoryWatchStore
) -> None:
    sim = make_sim("3.1")
    client = client_for(sim)
    sim.fail("executors/start", status=502)  # DS never got the start
    wf = CatalogEntry("etl", "order_sync", ORDER_SYNC, "ONLINE", ETL)
    out = start_workflow(client, wf, "t11:s1", sim.clock())
    assert out.uncertain
    store.add(
        watch_from_start(
            out,
            task_id="t11",
            conversation="c",
            project="etl",
            project_code=ETL,
            workflow="order_sync",
            definition_code=ORDER_SYNC,
            now=sim.clock(),
            policy=POLICY,
        )
    )
    results = drive(sim, client, store, "t11:s1", seconds=4000, step=60)
    assert [type(o) for r in results for o in r.outcomes] == [NotFound]


def test_errors_back_off_instead_of_crashing(
    make_sim: Callable[..., DolphinSimulator], store: InMemoryWatchStore
) -> None:
    sim = make_sim("3.2")
    client = client_for(sim, retries=0)
    begin(sim, client, store, ORDER_SYNC, "order_sync", "t12:s1")
    sim.fail("process-instances", status=503, times=1)
    sim.advance(15)
    result = run_poll_cycle(store, client, sim.clock(), POLICY)
    assert result.errors and result.watches[0].interval == 30 and not result.watches[0].done
    rest = drive(sim, client, store, "t12:s1")
    assert finished(rest)[0].state == "SUCCESS"


def test_progress_with_task_counts(
    make_sim: Callable[..., DolphinSimulator], store: InMemoryWatchStore
) -> None:
    sim = make_sim("3.2")
    client = client_for(sim)
    w = begin(sim, client, store, ORDER_SYNC, "order_sync", "t13:s1")
    store.save(w.__class__(**{**w.__dict__, "progress_tasks": True}))
    results = drive(sim, client, store, "t13:s1", seconds=100, step=70)
    summaries = [o.summary for r in results for o in r.outcomes if isinstance(o, Progress)]
    assert any("1/3 tasks done, running transform" in s for s in summaries), summaries
