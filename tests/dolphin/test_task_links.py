"""One story from message to run: a task knows the runs it started (also 3.1/3.2's late ones) and says
truthfully how they ended, in chat, the CLI and the web; refused and failed actions say so too."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.dolphin.support import Bot
from xihe.agent.report import task_data, task_report
from xihe.integrations.fakes.llm_server import ScriptedLLM, call, say


@pytest.mark.parametrize("version", ["3.1", "3.2", "3.3"])
def test_a_failed_run_shows_on_its_task_everywhere(
    bot_for: Callable[..., Bot], llm: ScriptedLLM, version: str
) -> None:
    llm.add(call("trigger_dolphinscheduler", workflow="坏任务", dates="2026-11-30"), say("started"))
    bot = bot_for(version)
    bot.say("alice", "backfill 坏任务 for 2026-11-30")
    bot.say("alice", "/confirm")
    bot.poll_until_done("1:tool:1:0")
    (inst,) = bot.sim.instances_of("broken_sync")
    task = bot.app.deps.tasks.get(1)
    assert task.runs == (inst.id,)  # recorded as soon as seen, whatever the version
    started = bot.messages("cli:alice", "▶️")
    if version == "3.3":  # the start answered with the instance: the reply named it already
        assert started == []
    else:  # 3.1/3.2 create it later: the conversation hears its id once, when it appears
        assert started == [f"▶️ broken_sync run {inst.id} started (task #1) — /status {inst.id}"]
    assert task.status == "done" and task.shown_status == "done · run FAILURE"
    assert f" done · run FAILURE chat: backfill 坏任务 for 2026-11-30 · runs {inst.id}" in bot.say(
        "alice", "/tasks"
    )
    report = task_report(bot.app.deps, 1)
    assert (
        report.startswith("Task #1 [done · run FAILURE]") and f"runs: {inst.id} (/status {inst.id})" in report
    )
    data = task_data(bot.app.deps, 1)["task"]
    assert data["runs"] == [inst.id] and data["outcome"] == "run FAILURE"
    assert "- #1 2026-12-02 17:00 完成 · 运行失败 对话" in bot.say(
        "alice", "/tasks 看看"
    )  # the run's state in Chinese too


def test_a_rerun_to_success_clears_the_failure(bot_for: Callable[..., Bot], llm: ScriptedLLM) -> None:
    llm.add(call("trigger_dolphinscheduler", workflow="坏任务", dates="2026-11-30"), say("started"))
    bot = bot_for("3.3")
    bot.say("alice", "backfill 坏任务 for 2026-11-30")
    bot.say("alice", "/confirm")
    bot.poll_until_done("1:tool:1:0")
    (inst,) = bot.sim.instances_of("broken_sync")
    bot.say("alice", f"/rerun {inst.id}")
    bot.say("alice", "/confirm")
    rerun_task = max(t.id for t in bot.app.deps.tasks.recent(owner="alice"))
    (key,) = [w.key for w in bot.app.deps.dolphin.watches.active()]
    bot.poll_until_done(key)
    rerun = bot.app.deps.tasks.get(rerun_task)
    assert rerun.runs == (inst.id,) and rerun.shown_status == "done"  # "run SUCCESS" needs no warning


def test_refused_and_failed_actions_are_not_green(make_app, llm: ScriptedLLM) -> None:  # type: ignore[no-untyped-def]
    from xihe.agent.inbound import Inbound
    from xihe.agent.web.ui.data import TaskFilter, list_tasks

    app = make_app()
    llm.add(call("always_fail", reason="disk full"), say("it failed"))
    app.session.handle(Inbound("alice", "c", "please fail"))
    llm.add(call("write_note", note="x", environment="prod"), say("no"))
    app.session.handle(Inbound("carol", "c2", "write a note on prod"))  # carol may not write: denied
    failed, refused = app.deps.tasks.get(1), app.deps.tasks.get(2)
    assert failed.shown_status == "done · failed" and refused.shown_status == "done · refused"
    engine = app.deps.engine
    assert [t.id for t in list_tasks(engine, TaskFilter(status="failed"), limit=10)] == [1]
    assert [t.id for t in list_tasks(engine, TaskFilter(status="refused"), limit=10)] == [2]
    llm.add(call("echo", text="ok"), say("fine"))
    app.session.handle(Inbound("alice", "c3", "echo"))
    assert app.deps.tasks.get(3).shown_status == "done"


@pytest.mark.parametrize("version", ["3.1", "3.3"])
def test_rerun_or_stop_of_an_ended_run_says_so_without_asking(
    bot_for: Callable[..., Bot], version: str
) -> None:
    bot = bot_for(version, with_llm=False)
    bot.say("alice", "/run 坏任务 2026-11-30")
    bot.say("alice", "/confirm")
    bot.poll_until_done("1:tool:1:0")
    (inst,) = bot.sim.instances_of("broken_sync")
    stop = bot.say("alice", f"/stop {inst.id}")
    assert stop == f"Not run: instance {inst.id} already ended FAILURE; there is nothing to stop"
    assert "/confirm" not in stop and bot.app.deps.pending.open_for(user_id="alice") == []
    assert "/confirm" in bot.say("alice", f"/rerun {inst.id}")  # a FAILURE run can be rerun: asks as usual
    bot.say("alice", "/confirm")
    (key,) = [w.key for w in bot.app.deps.dolphin.watches.active()]
    bot.poll_until_done(key)
    again = bot.say("alice", f"/rerun {inst.id}")
    assert again == f"Not run: instance {inst.id} already ended SUCCESS; only a FAILURE run can be rerun"
    latest = max(t.id for t in bot.app.deps.tasks.recent(owner="alice"))
    assert bot.app.deps.tasks.get(latest).shown_status == "done · refused"
