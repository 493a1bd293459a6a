"""The model gets the DS-ops tools as the commands use them: reads run at once for a role that has
them, writes wait for the requester's /confirm, and a role without a write is refused."""

from __future__ import annotations

import json
from collections.abc import Callable

from tests.dolphin.support import Bot
from xihe.integrations.fakes.llm_server import ScriptedLLM, call, say


def test_what_failed_last_night_is_a_read_and_a_pause_waits_for_confirm(
    bot_for: Callable[..., Bot], llm: ScriptedLLM
) -> None:
    bot = bot_for("3.2")
    failed = bot.sim.run_directly("broken_sync")
    bot.sim.advance(600)
    running = bot.sim.run_directly("daily_backfill")
    bot.sim.advance(5)
    assert failed.state == "FAILURE" and running.state == "RUNNING_EXECUTION"

    llm.add(call("ds_failed_runs", since="昨晚"), say("broken_sync 失败了一次：load 连不上数据库。"))
    assert bot.say("carol", "昨晚有什么失败了？") == "broken_sync 失败了一次：load 连不上数据库。"
    shown = llm.requests[-1]["messages"][-1]["content"]
    assert shown.startswith("[Tool Result: ds_failed_runs]") and f'"instance_id": {failed.id}' in shown
    assert "SQLException" in shown  # the first error line of the failed task

    llm.add(call("pause_run", instance_id=running.id), say("已暂停。"))
    ask = bot.say("alice", f"把 {running.id} 暂停一下")
    assert "pause_run" in ask and "/confirm" in ask and running.state == "RUNNING_EXECUTION"
    assert not [p for p, _ in bot.sim.writes if "/executors/execute" in p]  # nothing sent before the yes
    assert bot.say("alice", "/confirm") == "已暂停。"
    assert [t for p, t in bot.sim.writes if "/executors/execute" in p] == [bot.sim.token]  # one, bot token
    assert running.state in ("READY_PAUSE", "PAUSE")
    result = json.loads(llm.requests[-1]["messages"][-1]["content"].split("\n", 1)[1])
    assert result["requested_by"] == "alice"

    refused = bot.say("carol", f"/pause {running.id}")  # a viewer and approver: no pause_run
    assert "carol（角色：approver, viewer）没有哪个角色允许使用工具 pause_run" in refused  # she wrote Chinese
    assert "/confirm" not in refused
    assert len([p for p, _ in bot.sim.writes if "/executors/execute" in p]) == 1
    llm.assert_consumed()
