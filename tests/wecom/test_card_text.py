"""What an action card says, in the conversation's language, through every state of its action."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from xihe.agent.cards import RunSeen, render, state_text
from xihe.agent.pending import PendingAction

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
ACTION = PendingAction(
    id=7,
    task_id=3,
    step_key="s1",
    user_id="alice",
    conversation="wecom:app:1000002:alice",
    tool="start_workflow",
    args_json="{}",
    args_digest="ab12cd34ef56ab78" * 4,
    environment="prod",
    reason="production write",
    needs_approval=True,
    status="pending",
    confirmed_at=None,
    approved_by=None,
    approved_at=None,
    expires_at=T0.replace(hour=10),
    created_at=T0,
)


def at(value: datetime) -> str:
    return value.strftime("%H:%M")


def _texts(lang: str, role: str, action: PendingAction = ACTION) -> tuple[str, tuple[str, ...], str]:
    card = render(action, role, "start order_sync on prod", ("bob",), at, lang)  # type: ignore[arg-type]
    return (
        card.title,
        tuple(b.text for b in card.buttons),
        dict(card.rows)["状态" if lang == "zh" else "State"],
    )


def test_the_requester_and_approver_cards_speak_chinese_in_a_chinese_conversation() -> None:
    assert _texts("zh", "confirm") == (
        "确认操作 7",
        ("确认执行", "取消"),
        "等待 alice 确认；然后等待 bob 审批",
    )
    confirmed = replace(ACTION, status="confirmed", confirmed_at=T0)
    assert _texts("zh", "approve", confirmed) == (
        "审批操作 7（prod）",
        ("批准", "拒绝"),
        "alice 已确认（09:00）；等待 bob 审批",
    )
    card = render(confirmed, "confirm", "", ("bob",), at, "zh")
    assert card.closed == "已确认" and [k for k, _ in card.rows] == ["发起人", "过期时间", "状态"]


def test_english_states_from_waiting_to_each_end() -> None:
    assert _texts("en", "confirm")[1:] == (
        ("Confirm", "Cancel"),
        "waiting for alice's confirmation; then waiting for approval by bob",
    )
    confirmed = replace(ACTION, status="confirmed", confirmed_at=T0)
    assert state_text(confirmed, ("bob",), at) == "confirmed by alice at 09:00; waiting for approval by bob"
    assert state_text(replace(ACTION, status="expired"), (), at) == "expired at 10:00; nothing was run"
    rejected = replace(ACTION, status="rejected", closed_by="bob")
    assert state_text(rejected, (), at) == "rejected by bob; nothing was run"
    because = replace(rejected, close_note="wrong business date")
    assert state_text(because, (), at) == "rejected by bob: wrong business date; nothing was run"
    assert state_text(because, (), at, "zh") == "bob 已拒绝：wrong business date；未执行任何操作"
    assert state_text(replace(ACTION, status="cancelled"), (), at) == "cancelled by alice; nothing was run"
    assert state_text(replace(ACTION, status="cancelled"), (), at, "zh") == "alice 已取消，未执行任何操作"


def test_an_executed_card_follows_the_run_it_started() -> None:
    done = replace(ACTION, status="executed", confirmed_at=T0, approved_by="bob", approved_at=T0)
    assert state_text(done, ("bob",), at) == "confirmed by alice at 09:00; approved by bob at 09:00; executed"
    started = state_text(done, ("bob",), at, run=RunSeen(102))
    assert started.endswith("; executed; run 102 started")
    assert state_text(done, ("bob",), at, run=RunSeen(102, "SUCCESS")).endswith("; run 102 ended SUCCESS")
    assert state_text(done, ("bob",), at, "zh", RunSeen(102, "FAILURE")).endswith(
        "已执行；运行 102 已结束：FAILURE"
    )
    assert render(done, "approve", "", ("bob",), at, "en", RunSeen(102)).closed == "executed"
