"""Pause/resume, force-success, task logs, schedules, recent and failed runs, and whose token a write
uses: end to end through `xihe serve` + `xihe chat` on 3.1, 3.2 and 3.3 (the Stack of test_e2e.py:
a simulator whose clock a pump moves 200x faster than real time)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from tests.child_env import pythonpath
from tests.dolphin.conftest import ETL, seed
from tests.dolphin.support import WORKFLOWS
from tests.dolphin.test_e2e import Chat, Stack
from tests.serve.harness import wait_until
from xihe.agent.clock import utc_now
from xihe.integrations.dolphinscheduler.sim import Scenario, SimDefinition, SimInstance

ALICE_TOKEN = "alice-own-ds-token-5e1d"
PAUSABLE, MIDDLE = 2000000000021, 2000000000022


def _projects() -> list:
    projects = seed()
    etl = next(p for p in projects if p.code == ETL)
    etl.definitions += [
        SimDefinition("pausable_sync", PAUSABLE, scenario=Scenario(task_seconds=600)),
        SimDefinition(
            "middle_broken",
            MIDDLE,
            scenario=Scenario(kind="fail", fail_task=1, max_retry_times=0),
            outputs={"transform": ("row_count",)},  # load's script reads ${row_count}
            reads={"load": ("row_count",)},
        ),
    ]
    return projects


@pytest.fixture(scope="module", params=["3.1", "3.2", "3.3"])
def ops(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    for var in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "all_proxy"):
        os.environ.pop(var, None)
    extra = [{"name": n, "project": "etl", "environment": "test"} for n in ("pausable_sync", "middle_broken")]
    s = Stack(
        str(request.param),
        tmp_path_factory.mktemp(f"ops{request.param}"),
        projects=_projects(),
        config={
            "dolphin.yaml": {"user_tokens": {"env_pattern": "XIHE_DS_TOKEN_{user}"}},
            "workflows.yaml": {"workflows": [*WORKFLOWS["workflows"], *extra]},
        },
        env={"XIHE_DS_TOKEN_ALICE": ALICE_TOKEN},
    )
    s.sim.tokens[ALICE_TOKEN] = s.sim.tokens[s.sim.token]
    try:
        yield s
    finally:
        s.close()


def _started(stack: Stack, workflow: str) -> SimInstance:
    """`/run WORKFLOW` and its /confirm; the run DolphinScheduler made of it (3.1/3.2 make it later)."""
    before = len(stack.sim.instances_of(workflow))
    assert "Started" in stack.run(f"/run {workflow}")
    wait_until(lambda: len(stack.sim.instances_of(workflow)) > before, 30, f"a {workflow} run")
    return stack.sim.instances_of(workflow)[-1]


def test_pause_then_resume_ends_success(ops: Stack) -> None:
    run = _started(ops, "pausable_sync")
    wait_until(lambda: run.tasks and run.tasks[0].state == "RUNNING_EXECUTION", 30, "the first task running")
    assert "Pausing **pausable_sync**" in ops.run(f"/pause {run.id}")
    ops.wait_posted(rf"^⏸️ pausable_sync instance {run.id} ended PAUSE")
    assert [t.name for t in run.tasks] == ["extract"]
    assert "Resuming **pausable_sync**" in ops.run(f"/resume {run.id}")
    ops.wait_posted(rf"^✅ pausable_sync instance {run.id} ended SUCCESS")
    assert run.run_times == 2


def test_a_refused_state_change_says_why_and_sends_nothing(ops: Stack) -> None:
    run = _started(ops, "daily_backfill")
    ops.wait_posted(rf"^✅ daily_backfill instance {run.id} ended SUCCESS")
    writes = len(ops.sim.writes)
    refused = ops.chat.say(f"/pause {run.id}")
    assert f"instance {run.id} is SUCCESS" in refused and "nothing was sent" in refused
    assert "/confirm" not in refused
    assert "resumes only a PAUSE or STOP run" in ops.chat.say(f"/resume run {run.id}")
    assert len(ops.sim.writes) == writes


def test_force_success_of_a_failed_task_lets_the_run_finish(ops: Stack) -> None:
    run = _started(ops, "middle_broken")
    ops.wait_posted(rf"^❌ middle_broken instance {run.id} ended FAILURE")
    ask = ops.chat.say(f"/force-success {run.id} transform")
    assert (
        "Downstream tasks depend on transform's output, which it did not produce: "
        "load (reads ${row_count}, which transform never set)" in ask
    ), ask
    assert "goes on with load" in ops.chat.say("/confirm")
    ops.wait_posted(rf"^✅ middle_broken instance {run.id} ended SUCCESS")
    assert {t.name: t.state for t in run.tasks if t.flag == "YES"}["transform"] == "FORCED_SUCCESS"


def test_log_pages_to_the_end(ops: Stack) -> None:
    run = _started(ops, "broken_sync")
    ops.wait_posted(rf"^❌ broken_sync instance {run.id} ended FAILURE")
    lines = len(next(t for t in run.tasks if t.flag == "YES" and t.name == "load").log)
    last = ops.chat.say(f"/log {run.id}")
    assert f"Log of **load** (FAILURE) in **broken_sync** #{run.id}: last {lines} of {lines} lines" in last
    assert "SQLException" in last
    page, start = "", 0
    while "(end of the log)" not in page:
        page = ops.chat.say(f"/log {run.id} load --from {start}")
        start += 50
        assert start < 1000
    assert "has no lines from line" in ops.chat.say(f"/log {run.id} load --from {lines}")


def test_schedule_off_then_on(ops: Stack) -> None:
    schedule = ops.sim.add_schedule("daily_backfill", "0 30 2 * * ? *")
    shown = ops.chat.say("/schedule daily_backfill")  # cron, zone, state, DolphinScheduler's next five
    assert "`0 30 2 ＊ ＊ ? ＊` (Asia/Shanghai), ONLINE" in shown and shown.count(" 02:30:00") == 5, shown
    assert "is now OFFLINE" in ops.run("/schedule daily_backfill off")
    assert schedule.online is False
    assert "is ONLINE again" in ops.run("/schedule daily_backfill on")
    assert schedule.online is True


def _backdate(stack: Stack, inst: SimInstance, start: datetime) -> None:
    """Move a finished run (and its task rows) back to `start`: a run of last night."""
    with stack.sim._lock:
        delta = inst.start_time - start
        inst.start_time -= delta
        inst.end_time = inst.end_time - delta if inst.end_time else None
        for t in inst.tasks:
            t.start_time = t.start_time - delta if t.start_time else None
            t.end_time = t.end_time - delta if t.end_time else None
            t.submit_time -= delta


def test_runs_and_failed_last_night(ops: Stack) -> None:
    zone = ZoneInfo("Asia/Shanghai")  # workflows.yaml timezone: 昨晚 starts yesterday 18:00 there
    now = utc_now().astimezone(zone)  # the bot's clock (the simulator's runs ahead)
    evening = datetime.combine(now.date() - timedelta(days=1), time(18), zone)
    night: list[SimInstance] = []
    for name, hours in (("dw_broken", 1), ("order_sync", 2), ("dw_broken", 4), ("legacy_export", 5)):
        with ops.sim._lock:
            inst = ops.sim.run_directly(name)
        night.append(inst)
        wait_until(lambda i=inst: i.state in ("SUCCESS", "FAILURE"), 30, f"{name} to end")
        _backdate(ops, inst, evening + timedelta(hours=hours))
    with ops.sim._lock:
        older = ops.sim.run_directly("dw_broken")
    wait_until(lambda: older.state == "FAILURE", 30, "the older failure")
    _backdate(ops, older, evening - timedelta(hours=3))  # before 昨晚: not listed

    failed = ops.chat.say("/failed 昨晚")
    assert "**dw_broken**（项目 dw）：" in failed  # asked in Chinese (昨晚), told in Chinese
    for inst in (night[0], night[2]):
        assert f"#{inst.id} " in failed
    assert f"#{older.id} " not in failed and f"#{night[1].id} " not in failed
    assert "SQLException" in failed
    runs = ops.chat.say("/runs order_sync 3")
    assert "runs of **order_sync**" in runs and f"#{night[1].id} " in runs and "SUCCESS" in runs


def test_alices_start_uses_her_token_and_bobs_the_bot_token(ops: Stack) -> None:
    ops.run("/run daily_backfill")
    bob = Chat(ops.cfg, {"XIHE_DATABASE_URL": ops.db, **ops.env}, ops.cfg.parent, user="bob")
    try:
        ask = bob.say("/run daily_backfill")
        assert "/confirm" in ask
        assert "Started" in bob.say("/confirm")
    finally:
        bob.close()
    starts = [token for path, token in ops.sim.writes if "/executors/start-" in path]
    assert starts[-2:] == [ALICE_TOKEN, ops.sim.token]
    assert ALICE_TOKEN not in ops.serve.log()
    check = subprocess.run(  # what the admin runs: who has a token of their own (never the token)
        [sys.executable, "-m", "xihe.agent.cli.main", "config", "check", "--offline", str(ops.cfg)],
        capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": pythonpath(), **ops.env},
    )  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr
    assert "users with their own DolphinScheduler token: alice" in check.stdout
    assert "use the bot's credentials: bob" in check.stdout and ALICE_TOKEN not in check.stdout + check.stderr
