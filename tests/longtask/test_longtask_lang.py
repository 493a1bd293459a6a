"""/plan, /memory and the plan notes added to a reply answer in the conversation's language (issue 16
item 3), with the same ids, goals, reasons and times (team zone, with offset); the model keeps English."""

from __future__ import annotations

from collections.abc import Callable

from xihe.agent.app import App
from xihe.agent.inbound import Inbound
from xihe.integrations.fakes.llm_server import ScriptedLLM, call, say


def ask(app: App, text: str, conv: str, user: str = "alice") -> str:
    return app.session.handle(Inbound(user, conv, text))


def plan_script(first: str, second: str, reason: str, key: str, value: str, done: str) -> list[object]:
    return [
        call("plan_add", description=first),
        call("plan_add", description=second, depends_on=[1]),
        call("plan_claim", item=1),
        call("plan_fail", item=1, reason=reason),
        call("remember", key=key, value=value, source="user"),
        say(done),
    ]


def test_plan_and_memory_in_a_chinese_conversation(make_lt: Callable[..., App], llm: ScriptedLLM) -> None:
    app = make_lt(
        plan_script("核对订单", "汇总记录", "订单系统不可用", "A3003:原因", "尺寸不合适", "第一项失败了。")
    )
    ask(app, "A3003 尺寸不合适，帮我核对退货", "zh")
    assert ask(app, "/plan", "zh") == (
        "**任务 1 的计划** — A3003 尺寸不合适，帮我核对退货\n"
        "2 项中有 1 项未完成\n\n"
        "- #1 [失败] 核对订单 — 订单系统不可用\n"
        "- #2 [待办] 汇总记录（在 #1 之后）\n\n"
        "变更：\n"
        "- #1 于 2026-12-02 17:00 +08:00 由 task:1 失败：订单系统不可用"
    )
    assert ask(app, "/plan 99", "zh") == "没有任务 99。"
    assert ask(app, "/plan 1 看看", "zh-bob", user="bob") == "任务 1 属于别人。"
    assert ask(app, "/plan 看看", "zh-bob", user="bob") == "这个对话里还没有计划。"
    fact = "A3003:原因 = 尺寸不合适（来源：user: task 1；2026-12-02 17:00 +08:00）"
    assert ask(app, "/memory", "zh") == f"- {fact}"
    assert ask(app, "/memory A3003:原因", "zh") == f"- （当前）{fact}"
    assert ask(app, "/memory 尺码", "zh") == "没有记住 '尺码' 下的内容。"
    assert ask(app, "/memory 看看", "zh-bob", user="bob") == "没有记住 '看看' 下的内容。"
    # the model read the same plan in English
    tool_texts = [m["content"] for m in llm.messages[-1] if m["role"] == "tool"]
    assert "#2 [pending] 汇总记录 (after #1)" in tool_texts[3]


def test_plan_and_memory_in_an_english_conversation(make_lt: Callable[..., App], llm: ScriptedLLM) -> None:
    script = plan_script(
        "check the order", "summarise", "order system down", "A3003:reason", "too small", "Item 1 failed."
    )
    app = make_lt(script)
    ask(app, "A3003 is too small, please check the return", "en")
    assert ask(app, "/plan", "en") == (
        "**Plan of task 1** — A3003 is too small, please check the return\n"
        "1 of 2 item(s) open\n\n"
        "- #1 [failed] check the order — order system down\n"
        "- #2 [pending] summarise (after #1)\n\n"
        "Changes:\n"
        "- #1 failed by task:1 at 2026-12-02 17:00 +08:00: order system down"
    )
    assert ask(app, "/plan 99", "en") == "There is no task 99."
    fact = "A3003:reason = too small  (source: user: task 1; 2026-12-02 17:00 +08:00)"
    assert ask(app, "/memory", "en") == f"- {fact}"
    assert ask(app, "/memory A3003:reason", "en") == f"- (current) {fact}"
    assert ask(app, "/memory size", "en") == "Nothing remembered under 'size'."
    assert ask(app, "/memory", "en-bob", user="bob") == "I remember nothing about you yet."


def test_the_plan_note_of_a_stopped_task_follows_the_language(
    make_lt: Callable[..., App], llm: ScriptedLLM
) -> None:
    app = make_lt(
        [call("plan_add", description="检查"), call("echo", text="a"), call("echo", text="b")],
        core={"loop": {"max_turns": 3, "max_tool_calls": 30}},
    )
    zh = ask(app, "帮我检查一下", "zh")
    assert zh.startswith("模型回合达到 3 次仍未完成") and zh.endswith(
        "\n\n计划（任务 1）还有 1 项未完成：\n#1 [待办] 检查"
    )
    llm.add(call("plan_add", description="check"), call("echo", text="a"), call("echo", text="b"))
    en = ask(app, "please check it", "en")
    assert en.endswith("\n\nPlan (task 2), 1 item(s) open:\n#1 [pending] check")


def test_the_note_on_an_unbacked_claim_follows_the_language(
    make_lt: Callable[..., App], llm: ScriptedLLM
) -> None:
    app = make_lt(
        [
            call("plan_add", description="核对订单"),
            call("plan_add", description="汇总", depends_on=[1]),
            say("全部完成：#1 已完成，#2 已完成。"),
            say("都已完成。"),
        ]
    )
    reply = ask(app, "帮我准备 A3003 的核对", "zh")
    assert reply.startswith(
        "都已完成。\n\n_注意：这个回答说完成的比计划显示的多。计划（任务 1）还有 2 项未完成："
    )
    assert "#1 [待办] 核对订单\n#2 [待办] 汇总（在 #1 之后）_" in reply and "claims more" not in reply
    llm.assert_consumed()
