"""AI-bot action cards over the long connection: the confirmation card in the group, approval cards
in the approvers' 1:1 chats (`aibot_send_msg`), clicks pushed as `aibot_event_callback`, each answered
by one `aibot_respond_update_msg` that the fake applies only within 5 s."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlalchemy import select

from tests.wecom.conftest import Start
from xihe.agent.clock import FakeClock
from xihe.agent.core_tables import audit_event
from xihe.agent.scheduler import expire_confirmations
from xihe.integrations.fakes.llm_server import ScriptedLLM, call, say
from xihe.integrations.wecom.fake_bot_cards import BotCard
from xihe.integrations.wecom.fake_ws import FakeWeComWS


def _click(fake: FakeWeComWS, user: str, card: BotCard, text: str) -> dict[str, Any]:
    """`user` clicks the button saying `text`; WeCom's answer to our card update."""
    req_id = fake.push_card_click(user, card.task_id, card.key(user, text))
    answer: dict[str, Any] = fake.wait_for(lambda: fake.update_answer(req_id), what=f"{user}'s update")
    return answer


def _effects(tmp_path: Path) -> list[Any]:
    path = tmp_path / "effects.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_production_write_confirmed_in_the_group_and_approved_by_a_second_users_click(
    start_bot: Start, fake_ws: FakeWeComWS, llm: ScriptedLLM, tmp_path: Path
) -> None:
    llm.add(call("write_note", note="prod window", environment="prod"), say("Note written on prod."))
    app = start_bot()
    fake_ws.wait_connected()
    fake_ws.push_text("bob", "@xihe note the prod window", "m-1", chatid="ops")
    (mine,) = fake_ws.wait_for(lambda: fake_ws.bot_cards.of_chat("ops"), what="the card in the group")
    assert _click(fake_ws, "bob", mine, "Confirm")["errcode"] == 0
    assert "waiting for approval by carol, dave" in mine.row("bob", "State")  # everyone in the group sees it
    carol, dave = (
        fake_ws.wait_for(lambda u=u: fake_ws.bot_cards.of_chat(u), what=f"{u}'s card")[0]
        for u in ("carol", "dave")
    )
    assert carol.card["main_title"]["title"] == "Approve action 1 (prod)" and _effects(tmp_path) == []

    assert _click(fake_ws, "carol", carol, "Approve")["errcode"] == 0
    fake_ws.wait_for(lambda: _effects(tmp_path), what="the prod note written")
    assert "approved by carol" in carol.row("carol", "State")
    assert _click(fake_ws, "dave", dave, "Approve")["errcode"] == 0  # too late: the card says why
    assert "approved by carol" in dave.row("dave", "State") and "executed" in dave.row("dave", "State")
    # the group's card changes only when clicked (WeCom has no other update for bot cards): its closed
    # button still says what it last showed, and a click on it brings the card up to date
    assert _click(fake_ws, "bob", mine, "confirmed")["errcode"] == 0
    assert "executed" in mine.row("bob", "State")
    with app.deps.engine.connect() as conn:
        clicks = list(conn.execute(select(audit_event).where(audit_event.c.kind == "card_click")))
    assert sorted((c.actor, c.outcome) for c in clicks) == [
        ("bob", "accepted"),
        ("bob", "refused"),
        ("carol", "accepted"),
        ("dave", "refused"),
    ]
    assert len(_effects(tmp_path)) == 1
    assert fake_ws.bot_cards.refused == []


def test_a_repeated_click_event_runs_nothing_and_an_expired_card_says_so(
    start_bot: Start, fake_ws: FakeWeComWS, llm: ScriptedLLM, tmp_path: Path, clock: FakeClock
) -> None:
    llm.add(call("write_note", note="a", environment="test"), say("Nothing was written."))
    app = start_bot()
    fake_ws.wait_connected()
    fake_ws.push_text("alice", "@xihe note a", "m-1", chatid="ops")
    (card,) = fake_ws.wait_for(lambda: fake_ws.bot_cards.of_chat("ops"), what="the card")
    clock.advance(minutes=app.deps.settings.core.confirm.ttl_minutes + 1)
    expire_confirmations(app)  # the scheduled sweep
    req_id = fake_ws.push_card_click("alice", card.task_id, card.key("alice", "Confirm"))
    assert fake_ws.wait_for(lambda: fake_ws.update_answer(req_id), what="update")["errcode"] == 0
    assert card.row("alice", "State").startswith("expired at ")
    assert card.card["button_list"][0]["text"] == "expired"
    again = fake_ws.push_click_again(req_id)  # the same msgid: not handled again
    assert fake_ws.wait_for(lambda: fake_ws.update_answer(again), what="update")["errcode"] == 0
    with app.deps.engine.connect() as conn:
        clicks = list(conn.execute(select(audit_event).where(audit_event.c.kind == "card_click")))
    assert [(c.actor, c.outcome, c.state_after) for c in clicks] == [("alice", "refused", "expired")]
    assert _effects(tmp_path) == []
