"""AI-bot action cards end to end: a real `xihe serve`, the card sent to a 1:1 response_url, clicks
POSTed like WeCom sends them (encrypted JSON `template_card_event`, nested form), and the passive
`update_template_card` answer applied by the fake only when it comes within 5 s, once per event."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests
from sqlalchemy import select

from tests.serve.harness import Replica, serve_config, wait_until
from xihe.agent.core_tables import audit_event
from xihe.agent.db import make_engine
from xihe.integrations.fakes.llm_server import ScriptedLLM, call, say
from xihe.integrations.wecom.fake import CallbackSender, FakeWeCom
from xihe.integrations.wecom.fake_bot_cards import ERR_ANSWERED, ERR_LATE, BotCard, FakeBotCards


def _clicks(db_url: str) -> list[Any]:
    with make_engine(db_url).connect() as conn:
        q = select(audit_event).where(audit_event.c.kind == "card_click").order_by(audit_event.c.id)
        return list(conn.execute(q))


def _effects(tmp_path: Path) -> list[Any]:
    path = tmp_path / "effects.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _click(
    sender: CallbackSender, fake: FakeWeCom, user: str, card: BotCard, key: str, **kw: Any
) -> tuple[str, tuple[int, str]]:
    """One click POSTed at the server; the answer applied to the card as WeCom would: (msgid, outcome)."""
    payload = fake.bot_cards.click(user, card.task_id, key, response_url=fake.new_response_url(user), **kw)
    return payload["msgid"], _post(sender, fake, payload)


def _post(sender: CallbackSender, fake: FakeWeCom, payload: dict[str, Any]) -> tuple[int, str]:
    resp, nonce = sender.post_aibot(payload)
    assert resp.status_code == 200
    answer = sender.open_reply(resp.json(), nonce) if resp.content else None
    return fake.bot_cards.answer(payload["msgid"], answer)


def test_bot_card_confirmed_by_click_and_refused_for_others_stale_repeats(
    tmp_path: Path,
    db_url: str,
    llm: ScriptedLLM,
    fake_wecom: FakeWeCom,
    start_replica: Callable[..., Replica],
) -> None:
    llm.add(call("write_note", note="deploy window moved", environment="test"), say("Note written."))
    bot = start_replica(serve_config(tmp_path / "cfg", fake_wecom, llm_url=llm.base_url), db_url)
    sender = bot.bot_sender()
    text = sender.aibot_text(
        "alice", "note that the deploy window moved", "m-1", response_url=fake_wecom.new_response_url("alice")
    )
    assert sender.post_aibot(text)[0].status_code == 200
    card = wait_until(lambda: fake_wecom.bot_cards.of_chat("alice"), what="the card")[0]
    assert card.row("alice", "State") == "waiting for alice's confirmation"
    confirm = card.key("alice", "Confirm")

    # someone else's click (a forwarded card): refused, the card answered as it stands
    assert _click(sender, fake_wecom, "bob", card, confirm, any_key=True)[1] == (0, "ok")
    stale = confirm.rsplit(":", 1)[0] + ":0000000000000000"  # a card drawn for other arguments
    assert _click(sender, fake_wecom, "alice", card, stale, any_key=True)[1] == (0, "ok")
    assert _effects(tmp_path) == [] and "Confirm" in [b["text"] for b in card.card["button_list"]]

    msgid, outcome = _click(sender, fake_wecom, "alice", card, confirm)
    assert outcome == (0, "ok")  # answered within WeCom's 5 s
    wait_until(lambda: _effects(tmp_path), what="the note written")
    assert card.row("alice", "State").startswith("confirmed by alice at ")
    # the same event delivered again: answered with the card, not run again
    assert _post(sender, fake_wecom, fake_wecom.bot_cards.replay(msgid)) == (0, "ok")
    # a second physical click: its button is greyed-out text now; the card says what happened
    (closed,) = card.card["button_list"]
    assert closed["text"] == "executed" and closed["style"] == 4
    assert _click(sender, fake_wecom, "alice", card, confirm, any_key=True)[1] == (0, "ok")
    clicks = wait_until(lambda: len(_clicks(db_url)) == 4 and _clicks(db_url), what="four clicks audited")
    assert [(c.actor, c.outcome) for c in clicks] == [
        ("bob", "refused"),
        ("alice", "refused"),
        ("alice", "accepted"),
        ("alice", "refused"),
    ]
    assert "no longer has the arguments" in clicks[1].reason
    assert clicks[2].task_id == 1 and clicks[2].detail["pending_id"] == 1
    assert clicks[2].detail["channel"] == "wecom_aibot"
    assert len(_effects(tmp_path)) == 1  # executed exactly once
    assert "executed" in card.row("alice", "State")
    assert fake_wecom.bot_cards.refused == []


def test_a_bot_click_answer_later_than_5_s_is_dropped_by_the_fake() -> None:
    now = [0.0]
    cards = FakeBotCards(lambda: now[0])
    card = {
        "card_type": "button_interaction",
        "main_title": {"title": "t"},
        "task_id": "xihe-confirm-1-1",
        "button_list": [{"text": "OK", "style": 1, "key": "k"}],
    }
    assert cards.send("alice", card) == (0, "ok")
    assert cards.send("alice", card)[0] == 40058  # task_id never repeats
    assert cards.send("bob", {**card, "task_id": "x2", "button_list": [{"text": "u", "type": 1}]})[0] == 40058
    event = cards.click("alice", "xihe-confirm-1-1", "k")
    assert event["event"]["template_card_event"]["event_key"] == "k"
    now[0] = 5.5
    update = {
        "response_type": "update_template_card",
        "template_card": {**card, "main_title": {"title": "n"}},
    }
    assert cards.answer(event["msgid"], update)[0] == ERR_LATE
    assert cards.answer(event["msgid"], update)[0] == ERR_ANSWERED  # one answer per event
    second = cards.click("alice", "xihe-confirm-1-1", "k")
    wrong = {**update, "template_card": {**card, "task_id": "other"}}
    assert cards.answer(second["msgid"], wrong)[0] == 40058  # the event's task_id, as WeCom requires
    third = cards.click("alice", "xihe-confirm-1-1", "k")
    assert cards.answer(third["msgid"], update) == (0, "ok")
    assert cards.cards["xihe-confirm-1-1"].card["main_title"] == {"title": "n"}
    with pytest.raises(ValueError, match="no button"):  # WeCom delivers only keys the card shows
        cards.click("alice", "xihe-confirm-1-1", "not-on-the-card")


def test_a_crash_between_a_bot_click_and_the_execution_resumes_exactly_once(
    tmp_path: Path,
    db_url: str,
    llm: ScriptedLLM,
    fake_wecom: FakeWeCom,
    start_replica: Callable[..., Replica],
) -> None:
    llm.add(call("write_note", note="deploy window moved", environment="test"), say("Note written."))
    cfg = serve_config(tmp_path / "cfg", fake_wecom, llm_url=llm.base_url, lease_seconds=5)
    doomed = start_replica(cfg, db_url, "r1", {"XIHE_TEST_CRASH_AT": "after_confirm_update"})
    sender = doomed.bot_sender()
    text = sender.aibot_text("alice", "note it", "m-1", response_url=fake_wecom.new_response_url("alice"))
    assert sender.post_aibot(text)[0].status_code == 200
    card = wait_until(lambda: fake_wecom.bot_cards.of_chat("alice"), what="the card")[0]
    payload = fake_wecom.bot_cards.click("alice", card.task_id, card.key("alice", "Confirm"))
    with pytest.raises(requests.ConnectionError):  # the replica dies while the click is handled
        sender.post_aibot(payload)
    wait_until(lambda: doomed.proc.poll() is not None, what="the replica to die after the confirm UPDATE")
    assert _effects(tmp_path) == []

    survivor = start_replica(cfg, db_url, "r2")  # the orphan sweep resumes the confirmed action
    wait_until(lambda: _effects(tmp_path), what="the note written after the restart")
    again = fake_wecom.bot_cards.click("alice", card.task_id, card.key("alice", "Confirm"))
    assert _post(survivor.bot_sender(), fake_wecom, again) == (0, "ok")  # a second click: the card's truth
    assert "executed" in card.row("alice", "State")
    assert len(_effects(tmp_path)) == 1
