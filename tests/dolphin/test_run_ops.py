"""Pause, resume, force-success, task logs, recent and failed runs: in chat, through the gate, on 3.1-3.3.

Each test drives the bot with commands (→ gate → /confirm → simulator over HTTP → poll job →
messages). The simulator answers as each DolphinScheduler version does (integrations/
dolphinscheduler/CONTRACT.md): a state an executeType does not allow is 50006 (3.1), 50015 (3.2) or
10000 (3.3); force-success of a task that did not fail is 10166; a log read past its end is empty.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from tests.dolphin.support import Bot
from xihe.agent.dolphin.feature import poll_watches
from xihe.integrations.dolphinscheduler import DolphinClient
from xihe.integrations.dolphinscheduler.errors import DolphinError
from xihe.integrations.dolphinscheduler.sim import DolphinSimulator


def _started(bot: Bot, workflow: str) -> int:
    bot.say("alice", f"/run {workflow}")
    bot.say("alice", "/confirm")
    for _ in range(10):
        if bot.sim.instances_of(workflow):
            break
        bot.sim.advance(1)
    return bot.sim.instances_of(workflow)[-1].id


def _watch_key(bot: Bot) -> str:
    (watch,) = bot.app.deps.dolphin.watches.active()
    return str(watch.key)


def test_pause_then_resume_ends_success(bot_for: Callable[..., Bot], version: str) -> None:
    bot = bot_for(version, with_llm=False)
    run = _started(bot, "daily_backfill")
    bot.sim.advance(5)  # the first task runs
    ask = bot.say("alice", f"/pause {run}")
    assert "pause daily_backfill instance" in ask and "/confirm" in ask
    assert "Pausing **daily_backfill**" in bot.say("alice", "/confirm")
    bot.poll_until_done(_watch_key(bot))
    inst = bot.sim.instances[run]
    assert inst.state == "PAUSE"
    assert [t.name for t in inst.tasks] == ["extract"]  # the running task finished, no other started
    (paused,) = bot.messages("cli:alice", "⏸️")
    assert f"daily_backfill instance {run}" in paused and "PAUSE" in paused

    bot.say("alice", f"/resume {run}")
    assert "Resuming **daily_backfill**" in bot.say("alice", "/confirm")
    bot.poll_until_done(_watch_key(bot))
    assert inst.state == "SUCCESS" and inst.run_times == 2
    assert [t.name for t in inst.tasks] == ["extract", "transform", "load"]
    (done,) = bot.messages("cli:alice", "✅")
    assert f"daily_backfill instance {run}" in done and "SUCCESS" in done


def test_a_state_ds_would_refuse_is_refused_at_once_and_sends_nothing(
    bot_for: Callable[..., Bot], version: str
) -> None:
    bot = bot_for(version, with_llm=False)
    run = _started(bot, "daily_backfill")
    bot.poll_until_done(_watch_key(bot))  # SUCCESS
    bot.sim.reset_counts()
    refused = bot.say("alice", f"/pause {run}")
    assert f"instance {run} is SUCCESS" in refused and "pauses only a RUNNING_EXECUTION run" in refused
    assert "nothing was sent" in refused and "/confirm" not in refused
    refused = bot.say("alice", f"/resume {run}")
    assert "resumes only a PAUSE or STOP run" in refused
    assert not [k for k in bot.sim.counts if k.startswith("POST")]


def test_the_simulator_refuses_a_state_as_each_version_does(
    sim: DolphinSimulator, client: DolphinClient
) -> None:
    inst = sim.run_directly("daily_backfill")
    sim.advance(500)
    assert inst.state == "SUCCESS"
    with pytest.raises(DolphinError) as err:
        client.execute(inst.project.code, inst.id, "PAUSE")
    assert err.value.code == {"3.1": 50006, "3.2": 50015, "3.3": 10000}[sim.version]
    with pytest.raises(DolphinError) as err:
        client.execute(inst.project.code, inst.id, "RECOVER_SUSPENDED_PROCESS")
    assert err.value.code == {"3.1": 50006, "3.2": 50015, "3.3": 10000}[sim.version]
    task = inst.tasks[0]
    with pytest.raises(DolphinError) as err:
        client.force_success(inst.project.code, task.id)
    assert err.value.code == 10166


def test_force_success_of_the_last_failed_task_ends_the_run(
    bot_for: Callable[..., Bot], version: str
) -> None:
    bot = bot_for(version, with_llm=False)
    run = _started(bot, "broken_sync")
    bot.poll_until_done(_watch_key(bot))
    assert bot.sim.instances[run].state == "FAILURE"
    ask = bot.say("alice", f"/force-success {run} load")
    assert "mark task load of broken_sync instance" in ask and "Downstream" not in ask
    reply = bot.say("alice", "/confirm")
    assert "is now FORCED_SUCCESS; the run is SUCCESS" in reply, reply
    assert bot.sim.instances[run].state == "SUCCESS"


def test_force_success_of_a_middle_task_warns_and_the_run_goes_on(
    bot_for: Callable[..., Bot], version: str
) -> None:
    bot = bot_for(version, with_llm=False)
    d = bot.sim.definition("broken_sync")
    d.scenario = replace(d.scenario, fail_task=1)  # transform fails; load never runs
    d.tasks = ("extract", "transform", "load", "report")
    d.outputs, d.reads = (
        {"transform": ("row_count",)},
        {"report": ("row_count",)},
    )  # report reads ${row_count}
    run = _started(bot, "broken_sync")
    bot.poll_until_done(_watch_key(bot))
    refused = bot.say("alice", f"/force-success {run} extract")
    assert "is SUCCESS" in refused and "nothing was sent" in refused
    ask = bot.say("alice", f"/force-success {run} transform")
    assert (
        "Downstream tasks depend on transform's output, which it did not produce: load, "
        "report (reads ${row_count}, which transform never set)" in ask
    ), ask
    assert "goes on with load" in bot.say("alice", "/confirm")
    bot.poll_until_done(_watch_key(bot))
    inst = bot.sim.instances[run]
    assert inst.state == "SUCCESS"
    states = {t.name: t.state for t in inst.tasks if t.flag == "YES"}
    assert states == {
        "extract": "SUCCESS",
        "transform": "FORCED_SUCCESS",
        "load": "SUCCESS",
        "report": "SUCCESS",
    }


def test_log_pages_to_the_end(bot_for: Callable[..., Bot], version: str) -> None:
    bot = bot_for(version, with_llm=False)
    run = _started(bot, "broken_sync")
    bot.poll_until_done(_watch_key(bot))
    task = next(t for t in bot.sim.instances[run].tasks if t.flag == "YES" and t.name == "load")
    task.log += [f"[INFO] line {i} <@all> [x](http://evil)" for i in range(100)]
    total = len(task.log)
    last = bot.say("alice", f"/log {run}")
    assert f"Log of **load** (FAILURE) in **broken_sync** #{run}: last 40 of {total} lines" in last
    assert "saved as artifact" in last
    assert "<@all>" not in last and "](http" not in last  # log text is encoded, never markup
    first = bot.say("alice", f"/log {run} load --from 0")
    assert "lines 0–49" in first and f"/log {run} load --from 50" in first
    skip = 50
    while skip < total:
        page = bot.say("alice", f"/log {run} load --from {skip}")
        skip += 50
    assert "(end of the log)" in page
    past = bot.say("alice", f"/log {run} load --from {total + 10}")
    assert "has no lines from line" in past


def test_runs_and_failed_last_night(bot_for: Callable[..., Bot], version: str) -> None:
    bot = bot_for(version, with_llm=False)
    for name in ("daily_backfill", "broken_sync", "daily_backfill", "broken_sync"):
        bot.sim.run_directly(name)
        bot.sim.advance(600)
    runs = bot.say("alice", "/runs daily_backfill 5")
    assert "Last 2 runs of **daily_backfill**" in runs and runs.count("SUCCESS") == 2
    failed = bot.say("alice", "/failed")
    assert "2 run(s) in 1 workflow(s)" in failed and "**broken_sync**" in failed
    assert failed.count("load: ") == 2 and "SQLException" in failed
    poll_watches(bot.app)
