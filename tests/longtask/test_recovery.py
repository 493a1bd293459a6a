"""Recovery by error class against the task's stored retry budget; a restart mid-plan resumes the same state."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.longtask.tools import drafts, set_countdown
from xihe.agent.app import App
from xihe.agent.inbound import Inbound
from xihe.integrations.fakes.llm_server import ScriptedLLM, call, fail, say
from xihe.tools.longtask.plan_store import PlanStore


def _calls(tmp_path: Path) -> int:
    return int((tmp_path / "order-calls").read_text())


def test_read_timeouts_are_retried_within_the_per_call_limit(
    make_lt: Callable[..., App], llm: ScriptedLLM, tmp_path: Path
) -> None:
    app = make_lt([call("order_query", order_id="A3003"), say("the lookup kept timing out")])
    set_countdown("order-timeouts", 5)
    app.session.handle(Inbound("alice", "c1", "look A3003 up"))
    shown = next(m["content"] for m in llm.messages[-1] if m["role"] == "tool")
    assert "gave up after 3 attempt(s)" in shown and "ERROR" in shown
    assert _calls(tmp_path) == 3 and make_lt.waits == [1, 2]  # type: ignore[attr-defined]
    assert app.deps.tasks.get(1).retry_budget == 4  # two retries spent, stored with the task
    llm.assert_consumed()


def test_when_the_retry_budget_runs_out_the_task_stops_with_the_reason(
    make_lt: Callable[..., App], llm: ScriptedLLM, tmp_path: Path
) -> None:
    app = make_lt(
        [call("plan_add", description="check A3003"), call("order_query", order_id="A3003")],
        longtask={"recovery": {"retry_budget": 1, "attempts": 5}},
    )
    set_countdown("order-timeouts", 5)
    reply = app.session.handle(Inbound("alice", "c1", "look A3003 up"))
    assert reply.startswith("I stopped: the retry budget of task 1 is used up")
    assert "#1 [pending] check A3003" in reply  # the remaining work is named, not forgotten
    task = app.deps.tasks.get(1)
    assert task.status == "failed" and task.retry_budget == 0 and "retry budget" in (task.error or "")
    assert _calls(tmp_path) == 2
    llm.assert_consumed()


def test_a_chinese_request_that_runs_out_of_retries_is_told_why_in_chinese(
    make_lt: Callable[..., App], llm: ScriptedLLM, tmp_path: Path
) -> None:
    app = make_lt(
        [call("order_query", order_id="A3003")], longtask={"recovery": {"retry_budget": 1, "attempts": 5}}
    )
    set_countdown("order-timeouts", 5)
    reply = app.session.handle(Inbound("alice", "c1", "帮我查一下订单 A3003"))
    assert reply.startswith("我停下了：任务 1 的重试额度已用完（最后一次：order_query 尝试 2 次后超时）。")
    assert reply.endswith("任务 1 保留了目前做完的部分。") and "stopped" not in reply
    (event,) = [e for e in app.deps.audit.search(kind="tool_call") if e["tool"] == "order_query"]
    assert event["reason"].endswith(
        "; not retried: the retry budget of task 1 is used up (last: order_query "
        "timed out after 2 attempt(s))."
    )  # the audit and the model read English
    assert "retry budget of task 1 is used up" in (app.deps.tasks.get(1).error or "")


def test_a_timed_out_write_is_looked_up_before_any_retry(
    make_lt: Callable[..., App], llm: ScriptedLLM
) -> None:
    app = make_lt([call("submit_draft", order_id="A3003"), say("draft D-A3003 exists")])
    set_countdown("draft-timeouts", 1)  # the draft is created, then the answer times out
    paused = app.session.handle(Inbound("alice", "c1", "create the draft"))
    assert "/confirm" in paused
    assert app.session.handle(Inbound("alice", "c1", "/confirm")) == "draft D-A3003 exists"
    assert len(drafts()) == 1  # found by lookup, never written twice
    assert '"found_by_lookup": true' in next(m["content"] for m in llm.messages[-1] if m["role"] == "tool")
    assert app.deps.tasks.get(1).retry_budget == 6  # a lookup is not a retry
    llm.assert_consumed()


def test_truncated_arguments_never_execute(
    make_lt: Callable[..., App], llm: ScriptedLLM, tmp_path: Path
) -> None:
    from xihe.integrations.fakes.llm_server import truncated

    app = make_lt(
        [truncated("order_query", '{"order_id": "A30'), say("I will retry with complete arguments")]
    )
    app.session.handle(Inbound("alice", "c1", "look A3003 up"))
    assert not (tmp_path / "order-calls").exists()
    llm.assert_consumed()


def test_a_task_interrupted_mid_plan_resumes_with_the_same_plan_leases_and_budget(
    make_lt: Callable[..., App], llm: ScriptedLLM, tmp_path: Path, db_url: str
) -> None:
    first = make_lt(
        [
            call("plan_add", description="check A3003"),
            call("plan_add", description="summarise", depends_on=[1]),
            call("plan_claim", item=1),
            call("order_query", order_id="A3003"),
            fail(400),  # the model endpoint breaks: the process gives up mid-plan
        ],
        db=db_url,
    )
    set_countdown("order-timeouts", 1)
    broken = first.session.handle(Inbound("alice", "c1", "prepare the A3003 record"))
    assert "model endpoint failed" in broken
    plans = PlanStore(first.deps.engine)
    before = plans.items(1)
    assert [(i.status, i.lease_owner) for i in before] == [("in_progress", "task:1"), ("pending", None)]
    assert first.deps.tasks.get(1).retry_budget == 5

    # a new process over the same database (another holder name) resumes the task
    restarted = make_lt(
        [
            call("run_check", order_id="A3003"),
            call("plan_complete", item=1, evidence={"kind": "command", "tool_call_id": "call_6_0"}),
            say("#1 completed (check exit 0); #2 still pending"),
        ],
        db=db_url,
    )
    after_restart = PlanStore(restarted.deps.engine).items(1)
    assert [(i.status, i.lease_owner, i.lease_until) for i in after_restart] == [
        (i.status, i.lease_owner, i.lease_until) for i in before
    ]
    assert restarted.deps.tasks.get(1).retry_budget == 5
    outcome = restarted.agent.resume(1)
    assert outcome.status == "done" and outcome.reply.startswith("#1 completed")
    assert _calls(tmp_path) == 2  # the finished lookup was reused, not repeated
    items = PlanStore(restarted.deps.engine).items(1)
    assert [i.status for i in items] == ["completed", "pending"]
    assert restarted.deps.tasks.get(1).retry_budget == 5
    resumed_request = llm.messages[5]
    assert any("#2 [pending] summarise" in (m["content"] or "") for m in resumed_request)
    llm.assert_consumed()
