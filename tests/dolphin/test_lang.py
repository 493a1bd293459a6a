"""DolphinScheduler in the conversation's language (issue 16 item 3): a Chinese conversation hears the
start, progress, the end of a run (failed tasks, a stopped run, a backfill chain that stopped at a
date), /status and an expired token in Chinese; an English one in English. The real loop, the
scripted LLM for the small talk, the DolphinScheduler simulator over loopback HTTP."""

from __future__ import annotations

from collections.abc import Callable

from tests.dolphin.conftest import BAD_HOST
from tests.dolphin.support import Bot
from xihe.agent.dolphin.feature import poll_watches
from xihe.integrations.fakes.llm_server import ScriptedLLM, say


def _talk(bot: Bot, llm: ScriptedLLM, conv: str, text: str, answer: str) -> None:
    """A free-text message: it sets the conversation's language for the commands after it."""
    llm.add(say(answer))
    bot.say("alice", text, conv)


def _key(bot: Bot) -> str:
    (key,) = [w.key for w in bot.app.deps.dolphin.watches.active()]
    return key


def test_a_failed_run_and_its_status_in_chinese(bot_for: Callable[..., Bot], llm: ScriptedLLM) -> None:
    bot = bot_for("3.3")
    _talk(bot, llm, "zh", "你好，我要补一下坏任务的数据", "好的")
    assert "/confirm" in bot.say("alice", "/run 坏任务 2026-11-30", "zh")
    started = bot.say("alice", "/confirm", "zh")
    assert (
        started.startswith("已启动 **broken_sync**（项目 etl，test）") and "结束后我会在这里告诉你" in started
    )
    bot.poll_until_done(_key(bot))
    (inst,) = bot.sim.instances_of("broken_sync")
    (failure,) = bot.messages("zh", "❌")
    assert failure.startswith(f"❌ broken_sync 实例 {inst.id}（业务日期 2026-11-30），已结束：失败")
    assert f"- 任务 **load** 失败，节点 {BAD_HOST}（重试 1/1）" in failure
    assert f"发送 `/rerun {inst.id}` 重跑失败的任务。" in failure
    assert "ended" not in failure and "reruns the failed" not in failure
    status = bot.say("alice", f"/status {inst.id}", "zh")
    assert status.startswith(f"**broken_sync** #{inst.id}（业务日期 2026-11-30）：失败，任务 ")
    assert "失败：load" in status and "开始于 " in status and "结束于 " in status and "tasks" not in status


def test_a_failed_run_and_its_status_in_english(bot_for: Callable[..., Bot], llm: ScriptedLLM) -> None:
    bot = bot_for("3.3")
    _talk(bot, llm, "en", "hello, I need to backfill something", "sure")
    bot.say("alice", "/run broken_sync 2026-11-30", "en")
    assert bot.say("alice", "/confirm", "en").startswith("Started **broken_sync** (project etl, test)")
    bot.poll_until_done(_key(bot))
    (inst,) = bot.sim.instances_of("broken_sync")
    (failure,) = bot.messages("en", "❌")
    assert failure.startswith(f"❌ broken_sync instance {inst.id} for 2026-11-30 ended FAILURE")
    assert f"- task **load** FAILURE on {BAD_HOST} (retries 1/1)" in failure
    assert f"`/rerun {inst.id}` reruns the failed tasks." in failure
    status = bot.say("alice", f"/status {inst.id}", "en")
    assert (
        status.startswith(f"**broken_sync** #{inst.id} for 2026-11-30: FAILURE ")
        and ", failed load" in status
    )


def test_progress_and_a_stopped_run_in_each_language(bot_for: Callable[..., Bot], llm: ScriptedLLM) -> None:
    bot = bot_for("3.3")
    _talk(bot, llm, "zh", "帮我跑一下长任务", "好的")
    bot.say("alice", "/run long_sync", "zh")
    bot.say("alice", "/confirm", "zh")
    (inst,) = bot.sim.instances_of("long_sync")
    bot.sim.advance(60)
    poll_watches(bot.app)
    (progress,) = bot.messages("zh", "⏳")
    assert progress == f"⏳ long_sync 实例 {inst.id}：运行中，已完成 0/3 个任务，运行中：extract"
    bot.say("alice", f"/stop {inst.id}", "zh")
    assert bot.say("alice", "/confirm", "zh") == f"正在停止 **long_sync** #{inst.id}（之前是 运行中）。"
    bot.poll_until_done(_key(bot))
    (stopped,) = bot.messages("zh", "⏹️")
    assert stopped.startswith(f"⏹️ long_sync 实例 {inst.id}，已结束：已停止")

    _talk(bot, llm, "en", "please run the long one", "ok")
    bot.say("alice", "/run long_sync", "en")
    bot.say("alice", "/confirm", "en")
    second = max(i.id for i in bot.sim.instances_of("long_sync"))
    bot.sim.advance(60)
    poll_watches(bot.app)
    (progress,) = bot.messages("en", "⏳")
    assert progress == f"⏳ long_sync instance {second} RUNNING, 0/3 tasks done, running extract"
    bot.say("alice", f"/stop {second}", "en")
    assert bot.say("alice", "/confirm", "en") == f"Stopping **long_sync** #{second} (was RUNNING)."


def test_a_backfill_chain_that_stopped_at_a_date(bot_for: Callable[..., Bot], llm: ScriptedLLM) -> None:
    bot = bot_for("3.3")
    _talk(bot, llm, "zh", "补一下这三天的数据", "好的")
    bot.say("alice", "/run daily_backfill 2026-11-28..2026-11-30", "zh")
    bot.say("alice", "/confirm", "zh")
    bot.poll_until_done(_key(bot))
    (failure,) = bot.messages("zh", "❌")
    assert "（业务日期 2026-11-29），已结束：失败" in failure
    assert "补数在这里停止了：2026-11-30（1 个日期）没有运行。" in failure
    assert "重跑失败的任务，然后继续跑没有运行的日期。" in failure

    _talk(bot, llm, "en", "backfill these three days", "ok")
    bot.say("alice", "/run daily_backfill 2026-11-27..2026-11-29", "en")
    bot.say("alice", "/confirm", "en")
    bot.poll_until_done(_key(bot))
    (failure,) = bot.messages("en", "❌")
    assert "for 2026-11-29 ended FAILURE" in failure and "The backfill stopped here" not in failure
    assert "reruns the failed tasks." in failure


def test_an_expired_token_is_explained_in_the_conversations_language(
    bot_for: Callable[..., Bot], llm: ScriptedLLM
) -> None:
    bot = bot_for("3.3")
    _talk(bot, llm, "zh", "跑一下长任务", "好的")
    bot.say("alice", "/run long_sync", "zh")
    bot.say("alice", "/confirm", "zh")
    _talk(bot, llm, "en", "and the long one here too", "ok")
    bot.say("alice", "/run long_sync", "en")
    bot.say("alice", "/confirm", "en")
    bot.sim.expire_token()
    bot.sim.advance(60)
    poll_watches(bot.app)
    (zh,) = bot.messages("zh", "⚠️")
    assert "DolphinScheduler 拒绝了机器人的凭据" in zh and "写入 XIHE_DS_TOKEN 后重启 xihe" in zh
    assert "rejects" not in zh and bot.sim.token not in zh
    (en,) = bot.messages("en", "⚠️")
    assert "DolphinScheduler rejects the bot's credentials" in en and "put it in XIHE_DS_TOKEN" in en
