"""Seed 002's walkthrough with the scripted model: a plan survives two timeouts and finishes on checked evidence."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from tests.longtask.tools import set_countdown
from xihe.agent.app import App
from xihe.agent.canonical import sha256_text
from xihe.agent.inbound import Inbound
from xihe.integrations.fakes.llm_server import ScriptedLLM, call, say
from xihe.tools.longtask.plan_store import PlanStore

GOAL = "A3003 尺寸不合适，帮我准备退货申请的核对记录"
RECORD = (
    "A3003: member, delivered 10 days ago, not custom; reason 尺寸不合适; no draft or application created"
)


def _artifact_id(text: str, task_id: int, step_key: str) -> tuple[str, str]:
    digest = hashlib.sha256(text.encode()).hexdigest()
    return sha256_text(f"{digest}:{task_id}:{step_key}")[:16], digest


def test_plan_keeps_the_goal_through_timeouts_and_completes_only_on_checked_evidence(
    make_lt: Callable[..., App], llm: ScriptedLLM, db_url: str
) -> None:
    art_id, digest = _artifact_id(RECORD, 1, "tool:11:0")
    app = make_lt(
        [
            call("plan_add", description="核对A3003订单事实"),  # 1
            call("plan_add", description="汇总核对记录", depends_on=[1]),  # 2
            call("plan_claim", item=2),  # 3: blocked by #1
            call("plan_claim", item=1),  # 4
            call("order_query", order_id="A3003"),  # 5: times out twice, then answers
            call("plan_complete", item=1, evidence={"kind": "text", "note": "checked, looks fine"}),  # 6
            call("run_check", order_id="A3003"),  # 7
            call("plan_complete", item=1, evidence={"kind": "command", "tool_call_id": "call_7_0"}),  # 8
            call("remember", key="A3003:reason", value="尺寸不合适", source="user"),  # 9
            call("plan_claim", item=2),  # 10
            call("save_record", text=RECORD),  # 11
            call(
                "plan_complete",
                item=2,
                evidence={"kind": "artifact", "artifact_id": art_id, "sha256": digest},
            ),
            say("核对记录已保存并汇总（#1 命令核对 exit 0，#2 产物 sha256 已核对）；尚未创建草稿或申请。"),
        ],
        db=db_url,
    )
    set_countdown("order-timeouts", 2)
    reply = app.session.handle(Inbound("alice", "c1", GOAL))

    assert reply.startswith("核对记录已保存并汇总")
    llm.assert_consumed()
    task = app.deps.tasks.get(1)
    assert task.status == "done"
    # the lookup timed out twice inside one call: backed off 1 s then 2 s, paid from the stored budget
    assert make_lt.waits == [1, 2]  # type: ignore[attr-defined]
    assert task.retry_budget == 6 - 2
    order_step = app.deps.tasks.latest(1)["tool:5:0"]
    assert order_step.status == "done" and '"days_since_delivery": 10' in (order_step.output_text or "")

    tool_texts = [m["content"] for m in llm.messages[-1] if m["role"] == "tool"]
    assert "cannot start yet: #1 is pending" in tool_texts[2]
    assert "Free text is not evidence" in tool_texts[5]  # the bot's own word is refused
    # after the timeouts the plan (goal + remaining work) is still in front of the model
    after_timeouts = llm.messages[5]
    plan_text = next(
        m["content"] for m in after_timeouts if m["content"] and m["content"].startswith("Plan (")
    )
    assert GOAL[:20] in plan_text and "#1 [in_progress] 核对A3003订单事实" in plan_text
    assert "#2 [pending] 汇总核对记录 (after #1)" in plan_text

    items = PlanStore(app.deps.engine).items(1)
    assert [i.status for i in items] == ["completed", "completed"]
    assert items[0].evidence["kind"] == "command" and items[0].evidence["checked"]["exit_code"] == 0
    assert items[1].evidence["sha256"] == digest
    changes = [c.change for c in PlanStore(app.deps.engine).history(1)]
    assert changes == ["added", "added", "claimed", "completed", "claimed", "completed"]

    shown = app.session.handle(Inbound("alice", "c1", "/plan"))
    assert (
        "2 项中有 0 项未完成" in shown and "- #1 [已完成] 核对A3003订单事实 — 证据：run_check exit 0" in shown
    )
    assert "A3003:reason" in app.session.handle(Inbound("alice", "c1", "/memory"))


def test_an_unbacked_claim_of_completion_is_sent_back_then_marked(
    make_lt: Callable[..., App], llm: ScriptedLLM
) -> None:
    app = make_lt(
        [
            call("plan_add", description="check the order"),
            call("plan_add", description="summarise", depends_on=[1]),
            say("All items are done: #1 completed and #2 completed."),
            say("Still the same: everything is done."),
        ]
    )
    reply = app.session.handle(Inbound("alice", "c1", "prepare the A3003 check"))
    complaint = [
        m for m in llm.messages[3] if m["role"] == "user" and m["content"].startswith("[Answer check]")
    ]
    assert complaint and "#1 is pending" in complaint[0]["content"]
    assert "claims more than the plan shows" in reply and "2 item(s) open" in reply
    llm.assert_consumed()


def test_the_loop_reminds_the_model_of_open_items_after_n_quiet_turns(
    make_lt: Callable[..., App], llm: ScriptedLLM
) -> None:
    app = make_lt(
        [
            call("plan_add", description="check A3003"),
            call("echo", text="a"),
            call("echo", text="b"),
            say("still working on #1"),
        ],
        longtask={"plan": {"remind_after_turns": 2}},
    )
    app.session.handle(Inbound("alice", "c1", "prepare the A3003 record"))
    last = [m for m in llm.messages[2] if m["role"] == "user"]
    assert not last[-1]["content"].startswith("[Plan reminder]")  # one quiet turn: no reminder yet
    note = llm.messages[3][-1]
    assert note["role"] == "user" and note["content"].startswith(
        "[Plan reminder] The plan has not been updated for 2"
    )
    assert "#1 [pending] check A3003" in note["content"]
    assert PlanStore(app.deps.engine).items(1)[0].status == "pending"  # a reminder completes nothing
    llm.assert_consumed()


def test_reminders_are_off_by_default(make_lt: Callable[..., App], llm: ScriptedLLM) -> None:
    app = make_lt(
        [call("plan_add", description="x"), *(call("echo", text=str(i)) for i in range(4)), say("ok")]
    )
    app.session.handle(Inbound("alice", "c1", "go"))
    assert not any("[Plan reminder]" in (m["content"] or "") for req in llm.messages for m in req)
