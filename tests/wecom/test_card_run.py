"""An executed action's card follows the DolphinScheduler run it started, through the same refresh and
within WeCom's single-use update codes (one per send, one per click)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from tenacity import wait_none

from tests.conftest import REPO, write_config
from tests.wecom.conftest import AES_KEY, AGENT_ID, CORP_ID, TOKEN
from xihe.agent.app import build_app
from xihe.agent.clock import FakeClock
from xihe.agent.scheduler import expire_confirmations
from xihe.agent.tasks import TaskStatus
from xihe.agent.wecom.cards import ActionCards
from xihe.agent.wecom.feature import CHANNEL
from xihe.integrations.fakes.llm_server import ScriptedLLM, call, say
from xihe.integrations.wecom.app_client import AppClient, TokenCache
from xihe.integrations.wecom.callback import parse_app_message
from xihe.integrations.wecom.fake import CallbackSender, FakeWeCom
from xihe.integrations.wecom.inbound import InboundMessage

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


def test_an_expired_actions_card_says_so_in_the_sweep_that_expires_it(
    tmp_path: Path,
    sqlite_url: str,
    llm: ScriptedLLM,
    fake_wecom: FakeWeCom,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The wired bot (the WeCom feature's hooks): no refresh job runs, the expiry sweep alone updates
    the card."""
    for name, value in {"XIHE_WECOM_CORP_ID": CORP_ID, "XIHE_WECOM_TOKEN": TOKEN,
                        "XIHE_WECOM_AES_KEY": AES_KEY, "XIHE_WECOM_APP_SECRET": "app-secret-value"}.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    llm.add(call("write_note", note="x", environment="test"), say("Not written."))
    cfg = write_config(tmp_path / "cfg", llm_url=llm.base_url)
    wecom = yaml.safe_load((REPO / "config" / "wecom.yaml").read_text())
    wecom.update(api_base=fake_wecom.url, agent_id=AGENT_ID, progress_interval_seconds=0)
    wecom["aibot"]["enabled"] = False
    (cfg / "wecom.yaml").write_text(yaml.safe_dump(wecom))
    app = build_app(cfg, clock=clock, database_url=sqlite_url, holder="t")
    try:
        channel = app.get(CHANNEL)
        assert channel is not None
        sender = CallbackSender(fake_wecom.url, TOKEN, AES_KEY, CORP_ID, clock)
        message = parse_app_message(sender.app_text_xml("alice", "note x", 1, AGENT_ID).encode())
        assert isinstance(message, InboundMessage)
        channel.gateway.handle(message)
        (sent,) = fake_wecom.cards.of_user("alice")
        assert _state(sent.copies["alice"]) == "waiting for alice's confirmation"
        clock.advance(minutes=app.deps.settings.core.confirm.ttl_minutes + 1)
        expire_confirmations(app)  # the sweep, and nothing else
        assert _state(sent.copies["alice"]).startswith("expired at ")
        assert sent.copies["alice"]["replace_text"] == "expired"
    finally:
        app.deps.engine.dispose()
