"""DolphinClient against the loopback simulator over real HTTP, for the 3.1, 3.2 and 3.3 profiles."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import date

import pytest

from tests.dolphin.conftest import (
    BACKFILL,
    BAD_HOST,
    BROKEN,
    DW,
    DW_BROKEN,
    ETL,
    FLAKY,
    OFFLINE,
    ORDER_SYNC,
    client_for,
)
from xihe.agent.errors import DolphinError
from xihe.integrations.dolphinscheduler import DefinitionOffline, DolphinAuthError, StartOutcomeUnknown
from xihe.integrations.dolphinscheduler.client import DolphinClient
from xihe.integrations.dolphinscheduler.errors import is_offline_error
from xihe.integrations.dolphinscheduler.runs import find_started, start_backfill, start_workflow
from xihe.integrations.dolphinscheduler.sim import DolphinSimulator, Scenario, SimDefinition, SimProject
from xihe.tools.dolphin.names import CatalogEntry


def ref(code: int, name: str = "wf", project_code: int = ETL) -> CatalogEntry:
    return CatalogEntry("etl", name, code, "ONLINE", project_code)


def total(sim: DolphinSimulator, fragment: str) -> int:
    return sum(n for key, n in sim.counts.items() if fragment in key)


def test_auto_probe_picks_the_profile(sim: DolphinSimulator) -> None:
    client = client_for(sim)  # version=auto
    expected = "3.3" if sim.version == "3.3" else "3.2"  # pre-3.3 is driven with the 3.2 profile
    assert client.profile.version == expected
    client.list_definitions(ETL)
    assert total(sim, "simple-list") == 1  # probed once, not per call


def test_projects_and_definitions_with_release_state(client: DolphinClient) -> None:
    assert client.project_code("etl") == ETL
    defs = {d.name: d for d in client.list_definitions(ETL)}
    assert defs["order_sync"].code == ORDER_SYNC and defs["order_sync"].release_state == "ONLINE"
    assert defs["legacy_export"].release_state == "OFFLINE"
    with pytest.raises(DolphinError) as err:
        client.project_code("nope")
    assert err.value.code == 10018


def test_requests_are_form_encoded_with_token_header(sim: DolphinSimulator, client: DolphinClient) -> None:
    start_workflow(client, ref(ORDER_SYNC), "t1:s1", sim.clock())
    post = next(r for r in sim.server.requests if r.method == "POST")
    assert post.headers["content-type"] == "application/x-www-form-urlencoded"
    assert post.headers["token"] == sim.token
    form = post.form()
    assert json.loads(form["startParams"]) == {"xihe_run": "t1:s1"}
    assert form["execType"] == "START_PROCESS"
    code_param = "workflowDefinitionCode" if sim.version == "3.3" else "processDefinitionCode"
    assert form[code_param] == str(ORDER_SYNC)


def test_start_returns_per_version_and_marker_finds_the_instance(
    sim: DolphinSimulator, client: DolphinClient
) -> None:
    t0 = sim.clock()
    out = start_workflow(client, ref(ORDER_SYNC), "t1:s1", t0)
    if sim.version == "3.1":
        assert out.trigger_code is None and out.instance_ids == ()
    elif sim.version == "3.2":
        assert out.trigger_code is not None and out.instance_ids == ()
    else:
        assert len(out.instance_ids) == 1
    sim.run_directly("order_sync", marker="other:step")  # a run by someone else, same definition
    sim.advance(5)
    found = find_started(client, ref(ORDER_SYNC), "t1:s1", t0, trigger_code=out.trigger_code)
    assert len(found) == 1
    assert found[0].marker == "t1:s1" or sim.version == "3.1"
    assert sim.instances[found[0].id].start_params == {"xihe_run": "t1:s1"}


def test_list_rows_carry_params_as_3_1_writes_them_and_the_marker_is_read_either_way(
    sim: DolphinSimulator, client: DolphinClient
) -> None:
    inst = sim.run_directly("order_sync", marker="t7:s1")
    sim.run_directly("order_sync")  # a cron run: no marker
    (row, *_) = [r for r in client.list_instances(ETL, definition_code=ORDER_SYNC).items if r.id == inst.id]
    if sim.version == "3.1":  # the list SQL does not select them; Jackson writes the fields as null
        assert (
            "commandParam" in row.raw and row.raw["commandParam"] is None and row.raw["globalParams"] is None
        )
        assert row.marker is None  # "look in the detail", not "no marker"
    else:
        assert row.marker == "t7:s1"
    assert client.get_instance(ETL, inst.id).marker == "t7:s1"
    found = find_started(client, ref(ORDER_SYNC), "t7:s1", sim.clock())
    assert [i.id for i in found] == [inst.id]


def test_find_survives_stop_changing_command_type(sim: DolphinSimulator, client: DolphinClient) -> None:
    t0 = sim.clock()
    start_workflow(client, ref(ORDER_SYNC), "t9:s1", t0)
    sim.advance(5)
    (inst,) = find_started(client, ref(ORDER_SYNC), "t9:s1", t0)
    client.stop(ETL, inst.id)
    sim.advance(10)
    (again,) = find_started(client, ref(ORDER_SYNC), "t9:s1", t0)
    assert again.id == inst.id and again.state == "STOP" and again.command_type == "STOP"


def test_resume_reuses_the_started_instance(sim: DolphinSimulator, client: DolphinClient) -> None:
    t0 = sim.clock()
    start_workflow(client, ref(ORDER_SYNC), "t2:s1", t0)
    sim.advance(5)  # the bot "crashed" before recording; on resume it looks first
    again = start_workflow(client, ref(ORDER_SYNC), "t2:s1", sim.clock(), resume_since=t0)
    assert again.reused and len(again.instance_ids) == 1
    assert len(sim.starts) == 1 and len(sim.instances_of("order_sync")) == 1


def test_serial_backfill_runs_ascending_and_stops_at_first_failed_date(
    sim: DolphinSimulator, client: DolphinClient
) -> None:
    dates = [date(2026, 11, 28), date(2026, 11, 29), date(2026, 11, 30)]
    start_backfill(client, ref(BACKFILL), dates, "t3:s1", sim.clock())
    form = sim.starts[-1]
    assert form["execType"] == "COMPLEMENT_DATA" and form["runMode"] == "RUN_MODE_SERIAL"
    assert json.loads(form["scheduleTime"]) == {
        "complementStartDate": "2026-11-28 00:00:00",
        "complementEndDate": "2026-11-30 00:00:00",
    }
    if sim.version != "3.1":
        assert form["executionOrder"] == "ASC_ORDER"
    sim.advance(3600)
    runs = sim.instances_of("daily_backfill")
    assert [(r.schedule_time.day if r.schedule_time else 0, r.state) for r in runs] == [
        (28, "SUCCESS"),
        (29, "FAILURE"),
    ]  # 11-30 never started
    assert all(r.command_type == "COMPLEMENT_DATA" for r in runs)


def test_backfill_date_list_for_gaps(sim: DolphinSimulator, client: DolphinClient) -> None:
    start_backfill(client, ref(ORDER_SYNC), [date(2026, 11, 20), date(2026, 11, 22)], "t4:s1", sim.clock())
    assert json.loads(sim.starts[-1]["scheduleTime"]) == {
        "complementScheduleDateList": "2026-11-20 00:00:00,2026-11-22 00:00:00"
    }
    sim.advance(3600)
    assert [r.schedule_time.day for r in sim.instances_of("order_sync") if r.schedule_time] == [20, 22]


def test_more_than_100_list_dates_is_refused_by_ds(make_sim: Callable[..., DolphinSimulator]) -> None:
    sim = make_sim("3.2")
    client = client_for(sim)
    days = ",".join(f"2026-0{1 + i // 28}-{1 + i % 28:02d} 00:00:00" for i in range(101))
    with pytest.raises(DolphinError) as err:
        client.start(
            ETL, ORDER_SYNC, marker="m", schedule_time=json.dumps({"complementScheduleDateList": days})
        )
    assert err.value.code == 1400003 and not err.value.retryable


def test_offline_definition_is_refused(sim: DolphinSimulator, client: DolphinClient) -> None:
    with pytest.raises(DefinitionOffline) as err:
        start_workflow(client, ref(OFFLINE), "t5:s1", sim.clock())
    assert err.value.code == (50014 if sim.version == "3.3" else 50004)
    assert not err.value.retryable
    assert total(sim, "start-") == 1  # a business error is not retried


@pytest.mark.parametrize(
    ("code", "msg", "offline"),
    [
        (50004, "process definition 1 process version 1 not online", True),
        (50014, "start workflow instance error: The workflowDefinition should be online", True),
        (10000, "Internal Server Error: workflow definition is not online", True),
        (50014, "start process instance error", False),
        (10000, "Internal Server Error: NullPointerException", False),
    ],
)
def test_offline_detection_across_versions(code: int, msg: str, offline: bool) -> None:
    assert is_offline_error(code, msg) is offline


def test_unknown_definition_is_a_business_error(sim: DolphinSimulator, client: DolphinClient) -> None:
    with pytest.raises(DolphinError) as err:
        client.start(ETL, 2999999999999, marker="m")
    assert err.value.code == (10000 if sim.version == "3.3" else 50014)
    assert total(sim, "start-") == 1


def test_unknown_instance_is_50001(client: DolphinClient) -> None:
    with pytest.raises(DolphinError) as err:
        client.get_instance(ETL, 999999)
    assert err.value.code == 50001 and not err.value.retryable


def test_unknown_project_is_10190(client: DolphinClient) -> None:
    with pytest.raises(DolphinError) as err:
        client.list_instances(1234567890123)
    assert err.value.code == 10190


def test_missing_token_gives_401_empty_body(sim: DolphinSimulator) -> None:
    client = client_for(sim, token="wrong-token", version=sim.version)
    with pytest.raises(DolphinAuthError) as err:
        client.list_projects()
    assert "401" in str(err.value) and "wrong-token" not in str(err.value)
    assert total(sim, "projects/list") == 1  # auth errors are not retried


def test_expired_token_gives_401(sim: DolphinSimulator, client: DolphinClient) -> None:
    assert client.list_projects()
    sim.expire_token()
    with pytest.raises(DolphinAuthError):
        client.list_projects()


def test_session_login_and_relogin_after_expiry(sim: DolphinSimulator) -> None:
    client = DolphinClient(sim.url, user="admin", password="dolphinscheduler123", version=sim.version)
    assert [p.name for p in client.list_projects()] == ["etl", "dw"]
    assert "sessionid" in sim.server.requests[-1].headers
    sim.expire_sessions()  # next call: 401, then one re-login, then success
    assert client.list_projects()
    assert total(sim, "/login") == 2


def test_bad_credentials_are_10013(sim: DolphinSimulator) -> None:
    client = DolphinClient(sim.url, user="admin", password="nope", version=sim.version)
    with pytest.raises(DolphinAuthError) as err:
        client.list_projects()
    assert err.value.code == 10013
    assert "nope" not in str(err.value) and "nope" not in repr(client)


def test_a_request_counter_given_at_construction_counts_every_response(sim: DolphinSimulator) -> None:
    counted: list[int] = []
    client = client_for(sim, version=sim.version, count_request=lambda: counted.append(1))
    sim.fail("/projects/list", status=502, times=1)
    assert client.list_projects()  # a 502 then a success: two responses
    client.list_definitions(client.project_code("etl"))
    assert len(counted) == len(sim.server.requests) == 4


def test_5xx_is_retried_then_succeeds(sim: DolphinSimulator, client: DolphinClient) -> None:
    sim.fail("/projects/list", status=502, times=2)
    assert client.list_projects()
    assert total(sim, "projects/list") == 3


def test_5xx_exhausted_raises_retryable(sim: DolphinSimulator) -> None:
    client = client_for(sim, retries=2, version=sim.version)
    sim.fail("/projects/list", status=503, times=10)
    with pytest.raises(DolphinError) as err:
        client.list_projects()
    assert err.value.retryable and "503" in str(err.value)
    assert total(sim, "projects/list") == 3


def test_slow_response_times_out_and_is_retried(sim: DolphinSimulator) -> None:
    client = client_for(sim, timeout=0.2, retries=1, version=sim.version)
    sim.slow("/projects/list", seconds=0.6, times=1)
    assert client.list_projects()  # first attempt timed out, the retry answered
    assert total(sim, "projects/list") == 2
    sim.slow("/projects/list", seconds=0.6, times=2)
    with pytest.raises(DolphinError) as err:
        client.list_projects()
    assert err.value.retryable and "timed out" in str(err.value)


def test_slow_start_is_never_resent(sim: DolphinSimulator) -> None:
    client = client_for(sim, timeout=0.2, retries=3, version=sim.version)
    sim.slow("executors/start", seconds=0.6)
    with pytest.raises(StartOutcomeUnknown):
        client.start(ETL, ORDER_SYNC, marker="t6:s1")
    assert total(sim, "executors/start") == 1 and len(sim.starts) == 1  # DS did start it, once


def test_start_with_unknown_outcome_is_reported_uncertain(sim: DolphinSimulator) -> None:
    client = client_for(sim, version=sim.version)
    sim.fail("executors/start", status=502)
    out = start_workflow(client, ref(ORDER_SYNC), "t8:s1", sim.clock())
    assert out.uncertain and out.instance_ids == ()
    assert total(sim, "executors/start") == 1


def test_tasks_retry_history_and_host_filter(sim: DolphinSimulator, client: DolphinClient) -> None:
    client.start(ETL, FLAKY, marker="a")
    broken = client.start(ETL, BROKEN, marker="b")
    client.start(DW, DW_BROKEN, marker="c")
    sim.advance(3600)
    (f,) = [i for i in client.list_instances(ETL, definition_code=FLAKY).items]
    assert f.state == "SUCCESS"
    state, current = client.current_tasks(ETL, f.id)
    assert state == "SUCCESS" and all(t.state == "SUCCESS" for t in current)
    assert [t.retry_times for t in current if t.name == "load"] == [1]
    history = client.task_runs(ETL, instance_id=f.id)
    loads = sorted((t for t in history if t.name == "load"), key=lambda t: t.id)
    assert [(t.state, t.current, t.retry_times) for t in loads] == [
        ("FAILURE", False, 0),
        ("SUCCESS", True, 1),
    ]
    assert loads[0].id != loads[1].id
    on_bad_host = client.task_runs(ETL, host=BAD_HOST, state="FAILURE") + client.task_runs(
        DW, host=BAD_HOST, state="FAILURE"
    )
    assert {t.host for t in on_bad_host} == {BAD_HOST} and len({t.instance_id for t in on_bad_host}) == 2
    assert broken.trigger_code is not None or sim.version != "3.2"


def test_log_tail_pages_until_empty(make_sim: Callable[..., DolphinSimulator], version: str) -> None:
    sim = make_sim(
        version,
        [
            SimProject(
                "etl",
                ETL,
                [
                    SimDefinition(
                        "chatty",
                        2000000000099,
                        tasks=("only",),
                        scenario=Scenario(kind="fail", max_retry_times=0, log_lines=2500),
                    )
                ],
            )
        ],
    )
    client = client_for(sim, version=version)
    client.start(ETL, 2000000000099, marker="m")
    sim.advance(600)
    (inst,) = client.list_instances(ETL).items
    _, (task,) = client.current_tasks(ETL, inst.id)
    tail = client.log_tail(task.id, lines=5, page_lines=1000)
    assert len(tail) == 5 and "failed" in tail[-2] and tail[-1].endswith("exit code 1")
    assert not any(line.startswith("[LOG-PATH]") for line in tail)
    assert total(sim, "/log/detail") == 4  # 3 pages of lines, then the empty page


def test_log_of_undispatched_task_is_10191(sim: DolphinSimulator, client: DolphinClient) -> None:
    client.start(ETL, ORDER_SYNC, marker="m")
    # instance created (3.3 at once, else after the command delay), first task not dispatched yet
    sim.advance(0 if sim.version == "3.3" else sim.command_delay)
    (inst,) = client.list_instances(ETL).items
    _, (task,) = client.current_tasks(ETL, inst.id)
    assert task.host == ""
    with pytest.raises(DolphinError) as err:
        client.log_tail(task.id)
    assert err.value.code == 10191
    with pytest.raises(DolphinError) as err:
        client.log_tail(987654)
    assert err.value.code == 10008


def test_rerun_failed_keeps_the_id_and_bumps_run_times(sim: DolphinSimulator, client: DolphinClient) -> None:
    client.start(ETL, BROKEN, marker="m")
    sim.advance(3600)
    (inst,) = client.list_instances(ETL, definition_code=BROKEN).items
    assert inst.state == "FAILURE" and inst.run_times == 1
    client.rerun_failed(ETL, inst.id)
    assert client.get_instance(ETL, inst.id).state == "FAILURE"  # asynchronous: not consumed yet
    sim.advance(3600)
    again = client.get_instance(ETL, inst.id)
    assert (again.state, again.run_times, again.command_type) == ("SUCCESS", 2, "START_FAILURE_TASK_PROCESS")
    with pytest.raises(DolphinError) as err:  # not allowed from SUCCESS
        client.rerun_failed(ETL, inst.id)
    assert err.value.code == {"3.1": 50006, "3.2": 50015, "3.3": 10000}[sim.version]


def test_stop_goes_through_ready_stop(sim: DolphinSimulator, client: DolphinClient) -> None:
    client.start(ETL, ORDER_SYNC, marker="m")
    sim.advance(10)
    (inst,) = client.list_instances(ETL).items
    client.stop(ETL, inst.id)
    assert client.get_instance(ETL, inst.id).state == "READY_STOP"
    sim.advance(10)
    assert client.get_instance(ETL, inst.id).state == "STOP"
    _, tasks = client.current_tasks(ETL, inst.id)
    assert any(t.state == "KILL" for t in tasks)


def test_paged_instance_list_filters_by_state(sim: DolphinSimulator, client: DolphinClient) -> None:
    for i in range(5):
        sim.run_directly("order_sync", marker=f"m{i}")
    sim.run_directly("long_sync")
    sim.advance(600)
    page = client.list_instances(ETL, state="SUCCESS", page_size=2)
    assert page.total == 5 and page.total_page == 3 and len(page.items) == 2
    running = client.list_instances(ETL, state="RUNNING_EXECUTION").items
    assert [i.definition_code for i in running] == [2000000000004]
