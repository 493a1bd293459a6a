"""The simulator answers the DS-ops endpoints as each version does (integrations/dolphinscheduler/
CONTRACT.md), through the real client: schedules (10022, 10126, 50004, the preview window) and
force-success (10008, 10166, and from 3.2 on a run that has not ended)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.dolphin.conftest import ETL
from xihe.integrations.dolphinscheduler.client import DolphinClient
from xihe.integrations.dolphinscheduler.errors import DolphinError
from xihe.integrations.dolphinscheduler.sim import DolphinSimulator


def _code(call: object) -> int:
    with pytest.raises(DolphinError) as err:
        call()  # type: ignore[operator]
    return err.value.code


def test_schedule_release_errors_as_set_schedule_state_answers(
    sim: DolphinSimulator, client: DolphinClient
) -> None:
    s = sim.add_schedule("daily_backfill", "0 30 2 * * ? *")
    (listed,) = client.schedules(ETL, s.definition_code)
    assert (listed.id, listed.crontab, listed.timezone, listed.release_state) == (
        s.id, "0 30 2 * * ? *", "Asia/Shanghai", "ONLINE",
    )  # fmt: skip
    assert _code(lambda: client.set_schedule_online(ETL, s.id + 99, False)) == 10022  # unknown id
    assert _code(lambda: client.set_schedule_online(ETL, s.id, True)) == 10126  # already ONLINE
    client.set_schedule_online(ETL, s.id, False)
    assert s.online is False
    sim.definition("daily_backfill").online = False
    assert _code(lambda: client.set_schedule_online(ETL, s.id, True)) == 50004  # definition offline
    assert s.online is False


def test_preview_counts_from_the_later_of_now_and_start_and_stops_at_end(
    sim: DolphinSimulator, client: DolphinClient
) -> None:
    s = sim.add_schedule("daily_backfill", "0 0 * * * ? *", zone="UTC")  # hourly
    (listed,) = client.schedules(ETL, s.definition_code)
    now = sim.clock()
    assert len(client.schedule_preview(ETL, listed)) == 5
    start = now + timedelta(days=3)
    later = type(listed)(**{**listed.__dict__, "start_time": f"{start:%Y-%m-%d} 10:00:00"})
    assert client.schedule_preview(ETL, later)[0] == f"{start:%Y-%m-%d} 11:00:00"  # strictly after the start
    end = now + timedelta(hours=2, minutes=30)
    soon = type(listed)(**{**listed.__dict__, "end_time": f"{end:%Y-%m-%d %H:%M:%S}"})
    assert len(client.schedule_preview(ETL, soon)) == 2


def test_force_success_errors_as_force_task_success_answers(
    sim: DolphinSimulator, client: DolphinClient
) -> None:
    assert _code(lambda: client.force_success(ETL, 987654)) == 10008  # unknown task instance
    ok = sim.run_directly("daily_backfill")
    sim.advance(600)
    assert _code(lambda: client.force_success(ETL, ok.tasks[0].id)) == 10166  # a SUCCESS task
    running = sim.run_directly("long_sync")
    sim.advance(5)
    task = running.tasks[0]
    task.state = "FAILURE"  # a failed row in a run that has not ended (a retry may follow)
    if sim.version == "3.1":
        client.force_success(ETL, task.id)  # 3.1 does not look at the workflow's state
        assert task.state == "FORCED_SUCCESS"
    else:
        with pytest.raises(DolphinError) as err:
            client.force_success(ETL, task.id)
        assert err.value.code == 10000 and "The workflow instance is not finished" in str(err.value)
