"""Alert times come from DolphinScheduler's own timestamps, not from when xihe noticed (issue 27, item 2).

The simulator's clock is the injected clock: the run fails, the watcher notices minutes later
(backoff), and the alert's `失败时间` is still the failed task's end time from `/tasks`, shown in
the team's zone; the log tail's timestamps carry the server's zone.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.dolphin.conftest import BROKEN, client_for
from tests.dolphin.test_watch import begin
from xihe.agent.alerts.outbox import InMemoryOutbox
from xihe.agent.alerts.pipeline import Pipeline
from xihe.agent.alerts.state import InMemoryAlertStateStore
from xihe.agent.timefmt import show
from xihe.config.alerts import AlertsConfig
from xihe.config.workflows import WorkflowsConfig
from xihe.integrations.dolphinscheduler.sim import DolphinSimulator
from xihe.tools.dolphin.poll import poll_once
from xihe.tools.dolphin.watch import InMemoryWatchStore, PollPolicy


@pytest.fixture
def store() -> InMemoryWatchStore:
    return InMemoryWatchStore()


def test_failed_at_is_the_task_end_time_from_dolphinscheduler(
    sim: DolphinSimulator, store: InMemoryWatchStore
) -> None:
    client = client_for(sim, version=sim.version)
    begin(sim, client, store, BROKEN, "broken_sync", "t1:s1")
    sim.advance(3600)  # the run has long failed; nobody polled yet
    (inst,) = sim.instances_of("broken_sync")
    failed = next(t for t in inst.tasks if t.state == "FAILURE" and t.flag == "YES")
    noticed = sim.clock()
    assert noticed - failed.end_time > timedelta(minutes=30)

    watch = store.get("t1:s1")
    assert watch is not None
    result = poll_once([watch], client, noticed, PollPolicy())
    (event,) = result.events
    assert event.at == noticed and event.end_time == failed.end_time

    pipeline = Pipeline(
        AlertsConfig.model_validate({"instance_wait_seconds": 0, "timezone": "Asia/Shanghai"}),
        WorkflowsConfig.model_validate(
            {"workflows": [{"name": "broken_sync", "project": "etl", "code": BROKEN, "tier": "P0"}]}
        ),
        InMemoryAlertStateStore(),
        InMemoryOutbox(),
        production=frozenset({"prod"}),
    )
    (note,) = pipeline.feed(event, noticed).notifications
    assert f"失败时间：{show(failed.end_time, 'Asia/Shanghai')}" in note.text
    assert show(noticed, "Asia/Shanghai") not in note.text


def test_log_tail_times_are_labelled_with_the_server_zone(
    sim: DolphinSimulator, store: InMemoryWatchStore
) -> None:
    client = client_for(sim, version=sim.version, server_timezone="UTC")
    begin(sim, client, store, BROKEN, "broken_sync", "t2:s1")
    sim.advance(3600)
    watch = store.get("t2:s1")
    assert watch is not None
    (event,) = poll_once([watch], client, sim.clock(), PollPolicy()).events
    (inst,) = sim.instances_of("broken_sync")
    failed = next(t for t in inst.tasks if t.state == "FAILURE" and t.flag == "YES")
    stamp = failed.end_time.strftime("%Y-%m-%d %H:%M:%S")
    last_error = [ln for ln in event.log_tail.splitlines() if "[ERROR]" in ln][-1]
    assert f"{stamp} +00:00 - " in last_error  # the worker's UTC, now said to be UTC
    assert all("+00:00" in ln for ln in event.log_tail.splitlines() if ln.startswith("[INFO] 20"))
