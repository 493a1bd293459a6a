"""Why a DolphinScheduler command could not run, in the conversation's language (issue 16 item 3):
an unknown workflow with the closest name, several matches, a date in the future, a run that already
ended or is still running, an expired token and an error code of the DolphinScheduler API. The real
loop and gate, the DolphinScheduler simulator over loopback HTTP, the scripted LLM for the small talk.
The model keeps reading the English text."""

from __future__ import annotations

from collections.abc import Callable

from tests.dolphin.support import WORKFLOWS, Bot
from xihe.agent.dolphin.feature import poll_watches
from xihe.integrations.fakes.llm_server import ScriptedLLM, call, say


def _talk(bot: Bot, llm: ScriptedLLM, conv: str, text: str) -> None:
    """A free-text message: it sets the conversation's language for the commands after it."""
    llm.add(say("好的" if conv == "zh" else "ok"))
    bot.say("alice", text, conv)


def test_names_and_dates_that_cannot_run(bot_for: Callable[..., Bot], llm: ScriptedLLM) -> None:
    bot = bot_for("3.3")
    _talk(bot, llm, "zh", "你好，我要补一下数据")
    _talk(bot, llm, "en", "hello, I need to backfill something")
    unknown = bot.say("alice", "/run brand_new 昨天", "zh")
    assert (
        unknown
        == "失败：DolphinScheduler 里没有叫“brand_new”的工作流。最接近的名字：broken_sync（项目 etl）。"
    )
    unknown = bot.say("alice", "/run brand_new", "en")
    assert unknown == (
        "Failed: no workflow called 'brand_new' in DolphinScheduler. Closest names: broken_sync (project etl)."
    )
    several = bot.say("alice", "/run sync 昨天", "zh")
    assert several.startswith("失败：“sync”匹配了多个工作流：broken_sync（项目 etl）；")
    assert "order_sync（项目 etl）" in several and several.endswith("你指的是哪一个？")
    assert "Ask the user" not in several
    several = bot.say("alice", "/run sync", "en")
    assert several.startswith("Failed: 'sync' matches several workflows: broken_sync (project etl); ")
    assert several.endswith("Which one do you mean?") and "Ask the user" not in several
    offline = bot.say("alice", "/run legacy_export 昨天", "zh")
    assert (
        "工作流 legacy_export（项目 etl，" in offline
        and "已下线" in offline
        and "请先在 DolphinScheduler 里上线" in offline
    )
    future = bot.say("alice", "/run broken_sync 2030-01-01", "zh")
    assert (
        future.startswith("失败：“2030-01-01”包含 2030-01-01，这是将来的日期")
        and "只能补过去的日期" in future
    )
    future = bot.say("alice", "/run broken_sync 2030-01-01", "en")
    assert "'2030-01-01' includes 2030-01-01, which is in the future" in future
    assert bot.say("alice", "/status 999999", "zh") == "失败：机器人能看到的任何项目里没有工作流实例 999999"
    assert bot.say("alice", "/status 999999", "en") == (
        "Failed: there is no workflow instance 999999 in any project the bot can see"
    )
    assert bot.say("alice", "/status 0", "zh") == (
        "query_ds_task_status 的参数无效：`instance_id`: Input should be greater than 0。"
    )
    assert bot.say("alice", "/status 0", "en") == (
        "Invalid arguments for query_ds_task_status: `instance_id`: Input should be greater than 0."
    )
    assert bot.say("alice", "/status 101 nosuch", "zh").startswith(
        "失败：DolphinScheduler 里没有叫“nosuch”的项目（"
    )
    assert bot.sim.starts == []


def test_a_run_that_ended_or_still_runs_is_refused_before_asking(
    bot_for: Callable[..., Bot], llm: ScriptedLLM
) -> None:
    bot = bot_for("3.3")
    _talk(bot, llm, "zh", "帮我跑一下长任务")
    _talk(bot, llm, "en", "please run the long one")
    bot.say("alice", "/run long_sync", "zh")
    bot.say("alice", "/confirm", "zh")
    (inst,) = bot.sim.instances_of("long_sync")
    assert (
        bot.say("alice", f"/rerun {inst.id}", "zh")
        == f"没有执行：实例 {inst.id} 仍是 运行中；失败之后才能重跑"
    )
    running = bot.say("alice", f"/rerun {inst.id}", "en")
    assert (
        running.startswith(f"Not run: instance {inst.id} is still RUNNING")
        and "once it has failed" in running
    )
    bot.say("alice", f"/stop {inst.id}", "zh")
    bot.say("alice", "/confirm", "zh")
    (key,) = [w.key for w in bot.app.deps.dolphin.watches.active()]  # type: ignore[union-attr]
    bot.poll_until_done(key)
    assert bot.say("alice", f"/stop {inst.id}", "zh") == (
        f"没有执行：实例 {inst.id} 已经结束，状态是 已停止；没有什么可停止的"
    )
    assert bot.say("alice", f"/stop {inst.id}", "en") == (
        f"Not run: instance {inst.id} already ended STOP; there is nothing to stop"
    )
    assert bot.app.deps.pending.open_for(user_id="alice", conversation="zh") == []


def test_an_expired_token_on_a_command_says_what_to_do(bot_for: Callable[..., Bot], llm: ScriptedLLM) -> None:
    bot = bot_for("3.3")
    _talk(bot, llm, "zh", "帮我跑一下长任务")
    _talk(bot, llm, "en", "please run the long one")
    bot.say("alice", "/run long_sync", "zh")
    bot.say("alice", "/confirm", "zh")
    (inst,) = bot.sim.instances_of("long_sync")
    bot.sim.expire_token()
    zh = bot.say("alice", f"/status {inst.id}", "zh")
    assert (
        zh.startswith("失败：DolphinScheduler 拒绝了机器人的凭据（HTTP 401")
        and "写入 XIHE_DS_TOKEN 后重启 xihe" in zh
    )
    assert bot.sim.token not in zh
    en = bot.say("alice", f"/status {inst.id}", "en")
    assert en.startswith("Failed: DolphinScheduler rejects the bot's credentials (HTTP 401")
    assert "put it in XIHE_DS_TOKEN and restart xihe" in en
    stop = bot.say("alice", f"/stop {inst.id}", "zh")  # where the run acts cannot be read either
    assert stop.startswith(
        f"失败：无法从 DolphinScheduler 读取实例 {inst.id}：DolphinScheduler 拒绝了机器人的凭据"
    )


QUEUED = {
    **WORKFLOWS,
    "workflows": [*WORKFLOWS["workflows"], {"name": "queued_sync", "project": "etl", "environment": "test"}],
}


def test_an_error_code_of_the_api_is_shown_with_the_argument(
    bot_for: Callable[..., Bot], llm: ScriptedLLM
) -> None:
    # DolphinScheduler 3.1 refuses to stop a run that waits in its serial queue (50006)
    bot = bot_for("3.1", extra={"workflows.yaml": QUEUED})
    _talk(bot, llm, "zh", "帮我停一下排队的任务")
    _talk(bot, llm, "en", "stop the queued one please")
    bot.say("alice", "/run queued_sync", "zh")
    bot.say("alice", "/confirm", "zh")
    bot.sim.advance(5)
    poll_watches(bot.app)
    (inst,) = bot.sim.instances_of("queued_sync")
    bot.say("alice", f"/stop {inst.id}", "zh")
    zh = bot.say("alice", "/confirm", "zh")
    assert zh.startswith(f"失败：DolphinScheduler 返回错误 50006（instance_id {inst.id}）：")
    assert f"the status of process instance {inst.id} is" in zh and "Cannot perform STOP" in zh
    bot.say("alice", f"/stop {inst.id}", "en")
    en = bot.say("alice", "/confirm", "en")
    assert en.startswith(f"Failed: DolphinScheduler answered error 50006 (instance_id {inst.id}): ")


def test_the_model_still_reads_the_english_failure(bot_for: Callable[..., Bot], llm: ScriptedLLM) -> None:
    bot = bot_for("3.3")
    llm.add(call("trigger_dolphinscheduler", workflow="brand_new", dates="昨天"), say("没有这个工作流。"))
    assert bot.say("alice", "帮我补跑 brand_new 昨天的数据", "zh") == "没有这个工作流。"
    tool_message = llm.messages[-1][-1]
    assert tool_message["role"] == "tool"
    assert (
        "ERROR: no workflow called 'brand_new' in DolphinScheduler. Closest names: broken_sync (project etl)."
        in tool_message["content"]
    )
    (event,) = [
        e for e in bot.app.deps.audit.search(kind="tool_call") if e["tool"] == "trigger_dolphinscheduler"
    ]
    assert event["reason"] == (
        "ERROR: no workflow called 'brand_new' in DolphinScheduler. Closest names: broken_sync (project etl)."
    )


def test_a_rejected_run_tells_the_requester_in_their_language(
    bot_for: Callable[..., Bot], llm: ScriptedLLM
) -> None:
    bot = bot_for("3.3")
    llm.add(say("好的"))
    bot.say("bob", "你好，我要跑一下订单同步", "zh")
    bot.say("bob", "/run order_sync 昨天", "zh")
    bot.say("bob", "/confirm", "zh")
    assert bot.say("carol", "/reject 1", "ops") == "Rejected action 1; nothing was run."
    told = bot.messages("zh")[-1]
    assert told == "carol 驳回了操作 1。没有执行：确认被驳回，什么都没有执行。"
    assert bot.sim.starts == []
    step = bot.app.deps.tasks.latest(2)["tool:1:0"]  # the model-facing record stays English
    assert step.error == "NOT EXECUTED: the confirmation was rejected; tell the user nothing was done."
