"""The truth after a model failure: a run that started stands, is followed to its end, and is said.

The issue's story: a backfill is confirmed, DolphinScheduler starts the run, then the model request
fails. Before, the user read only "the model endpoint failed … `xihe task resume 1`": nothing said
the run was going, the resume repeated the same refused request, and a chat user was given a server
command. Now the reply names the run and that its end will be reported, offers a resume only where
one can work (in chat as `/resume N`), and the task shows both its failure and the run's end.
"""

from __future__ import annotations

from collections.abc import Callable

from tests.dolphin.support import Bot
from xihe.agent.inbound import Inbound
from xihe.integrations.fakes.llm_server import ScriptedLLM, call, fail, say

ASK = "把 daily_backfill 补跑一下 2026-11-28"


def started(bot: Bot, llm: ScriptedLLM, conversation: str, channel: str) -> str:
    """Ask for the backfill and confirm it; the model fails on the request after the run started."""
    ask = bot.app.session.handle(Inbound("alice", conversation, ASK, channel))
    assert "/confirm 1" in ask and bot.sim.starts == []
    return bot.app.session.handle(Inbound("alice", conversation, "/confirm 1", channel))


def test_a_refused_request_after_the_run_started_says_the_run_goes_on_and_offers_no_resume(
    bot_for: Callable[..., Bot], llm: ScriptedLLM
) -> None:
    llm.add(
        call("trigger_dolphinscheduler", workflow="daily_backfill", dates="2026-11-28"),
        fail(400, code="invalid_request_error"),
    )
    bot = bot_for("3.3")
    reply = started(bot, llm, "cli:alice", "cli")
    assert len(bot.sim.starts) == 1
    run_id = bot.app.deps.tasks.get(1).runs[0]
    assert "模型在回答中途出错了" in reply and "已经发生的" in reply
    assert "daily_backfill" in reply and str(run_id) in reply  # the run, in the tool's own words
    assert "结束后我会在这里告诉你" in reply  # and it is still followed
    assert "原样重发也会同样失败" in reply and "resume" not in reply  # a retry would meet the same 400
    task = bot.app.deps.tasks.get(1)
    assert task.status == "failed" and "writes had already gone through" in (task.error or "")

    bot.poll_until_done("1:tool:1:0")  # still followed to its end and reported
    assert bot.messages("cli:alice", "✅")
    assert bot.app.deps.tasks.get(1).shown_status == "failed · run SUCCESS"
    assert len(bot.sim.starts) == 1
    llm.assert_consumed()


def test_a_model_outage_in_chat_offers_resume_as_a_chat_command_that_does_not_start_it_again(
    bot_for: Callable[..., Bot], llm: ScriptedLLM
) -> None:
    llm.add(
        call("trigger_dolphinscheduler", workflow="daily_backfill", dates="2026-11-28"),
        *[fail(503)] * 4,
    )
    bot = bot_for("3.3")
    reply = started(bot, llm, "wecom:room1", "wecom")
    assert "发送 `/resume 1`，我会接着做" in reply and "xihe task resume" not in reply
    assert "结束后我会在这里告诉你" in reply
    llm.add(say("daily_backfill 2026-11-28 的补数已经启动，结束时会通知你。"))
    again = bot.app.session.handle(Inbound("alice", "wecom:room1", "/resume 1", "wecom"))
    assert again == "daily_backfill 2026-11-28 的补数已经启动，结束时会通知你。"
    assert len(bot.sim.starts) == 1 and bot.app.deps.tasks.get(1).status == "done"
    assert "只有停下的任务才能继续" in bot.app.session.handle(
        Inbound("alice", "wecom:room1", "/resume 1", "wecom")
    )
    assert "属于别人" in bot.app.session.handle(Inbound("bob", "wecom:room1", "/resume 1", "wecom"))
    llm.assert_consumed()


def test_without_any_write_the_failure_is_short_and_at_the_terminal_names_the_command(
    bot_for: Callable[..., Bot], llm: ScriptedLLM
) -> None:
    llm.add(*[fail(503)] * 4)
    bot = bot_for("3.3")
    reply = bot.say("alice", "daily_backfill 最近怎么样")
    assert reply.startswith("模型接口出错") and "`xihe task resume 1`" in reply and "已经发生" not in reply
    llm.add(fail(401))
    assert "需要由维护 xihe 的人修正" in bot.say("alice", "再试一次")
