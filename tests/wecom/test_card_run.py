"""An executed action's card follows the DolphinScheduler run it started, through the same refresh and
within WeCom's single-use update codes (one per send, one per click)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tenacity import wait_none

from tests.wecom.conftest import AGENT_ID, CORP_ID
from xihe.agent.clock import FakeClock
from xihe.agent.scheduler import expire_confirmations
from xihe.agent.tasks import TaskStatus
from xihe.agent.wecom.cards import ActionCards
from xihe.integrations.wecom.app_client import AppClient, TokenCache
from xihe.integrations.wecom.fake import FakeWeCom

CONVERSATION = f"wecom:app:{AGENT_ID}:alice"


def _state(copy: dict[str, Any]) -> str:
    return {r["keyname"]: r["value"] for r in copy["horizontal_content_list"]}["State"]


def _waiting_card(
    make_app: Any, fake_wecom: FakeWeCom, clock: FakeClock
) -> tuple[Any, ActionCards, Any, Any]:
    """An app with its action cards, and a task waiting on action 1 whose card went out."""
    app = make_app()
    deps = app.deps
    client = AppClient(
        CORP_ID,
        "app-secret-value",
        AGENT_ID,
        api_base=fake_wecom.url,
        tokens=TokenCache(clock),
        wait=wait_none(),
    )
    cards = ActionCards(deps, client, lambda: app.session.agent.registry)
    now = clock()
    task = deps.tasks.create(
        kind="chat", owner="alice", conversation=CONVERSATION, goal="backfill order_sync", now=now
    )
    action = deps.pending.create(
        task_id=task.id,
        step_key="s1",
        user_id="alice",
        conversation=CONVERSATION,
        tool="write_note",
        args_json='{"note": "x", "environment": "test"}',
        args_digest="ab12cd34ef56ab78" * 4,
        environment="test",
        reason="a write",
        needs_approval=False,
        now=now,
        expires_at=now + timedelta(minutes=30),
    )
    cards.on_pause(task, action.id)
    return app, cards, task, action


def test_the_card_says_run_started_then_how_it_ended(
    make_app: Any, fake_wecom: FakeWeCom, clock: FakeClock
) -> None:
    app, cards, task, action = _waiting_card(make_app, fake_wecom, clock)
    deps, now = app.deps, clock()
    (sent,) = fake_wecom.cards.of_user("alice")
    assert _state(sent.copies["alice"]) == "waiting for alice's confirmation"
    cards.store.fresh_code(sent.task_id, fake_wecom.cards.click_code(sent.task_id), now)  # a click's code

    assert deps.pending.confirm(action.id, "alice", CONVERSATION, now)
    assert deps.pending.consume(action.id, action.args_digest, now)
    deps.tasks.add_runs(task.id, [102], now)  # the step started run 102
    assert cards.refresh() == 1
    assert _state(sent.copies["alice"]).endswith("; executed; run 102 started")
    assert sent.copies["alice"]["replace_text"] == "executed"

    deps.tasks.update(task.id, now, status=TaskStatus.DONE)
    assert cards.refresh() == 0  # nothing new to say: the last code waits for the run's end
    deps.tasks.set_outcome(task.id, "run SUCCESS", now)  # what the watcher records when it ends
    assert cards.refresh() == 1
    assert _state(sent.copies["alice"]).endswith("; executed; run 102 ended SUCCESS")
    assert cards.refresh() == 0 and cards.store.by_task(sent.task_id).state == "executed"  # settled


def test_an_expired_actions_card_says_so_after_the_next_sweep(
    make_app: Any, fake_wecom: FakeWeCom, clock: FakeClock
) -> None:
    app, cards, _, action = _waiting_card(make_app, fake_wecom, clock)
    (sent,) = fake_wecom.cards.of_user("alice")
    clock.advance(minutes=31)
    expire_confirmations(app)  # the scheduler's sweep, then the channel's refresh job
    assert cards.refresh() == 1
    assert _state(sent.copies["alice"]).startswith("expired at ")
    assert sent.copies["alice"]["replace_text"] == "expired"
    assert app.deps.pending.get(action.id).status == "expired"
