"""Action cards end to end: a real `xihe serve`, the WeCom fake's card API, and clicks sent like
WeCom sends them (encrypted XML `template_card_event` with a fresh ResponseCode per click)."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests
from sqlalchemy import select

from tests.alerts.test_render import ctx
from tests.conftest import REPO
from tests.serve.harness import AGENT_ID, CORP_ID, SECRET, Replica, serve_config, wait_until
from xihe.agent.alerts.notify.wecom_app import WeComAppNotifier
from xihe.agent.alerts.render import Renderer
from xihe.agent.core_tables import audit_event
from xihe.agent.db import make_engine
from xihe.config.alerts import Channel
from xihe.integrations.fakes.llm_server import ScriptedLLM, call, say
from xihe.integrations.wecom.fake import CallbackSender, FakeWeCom
from xihe.integrations.wecom.fake_cards import FakeCard


def _card(fake: FakeWeCom, user: str, n: int = 1) -> FakeCard:
    return wait_until(
        lambda: len(fake.cards.of_user(user)) >= n and fake.cards.of_user(user)[n - 1],
        what=f"card {n} to {user}",
    )


def _key(card: FakeCard, user: str, text: str) -> str:
    (key,) = [b["key"] for b in card.copies[user]["button_list"] if b["text"] == text]
    return str(key)


def _click(
    sender: CallbackSender,
    fake: FakeWeCom,
    user: str,
    card: FakeCard,
    key: str,
    at: int,
    *,
    dying: bool = False,
) -> bytes:
    """POST one card click; `dying`: the replica is set to die while it handles the click, so the
    connection may drop before the answer is written (the click was recorded before the crash point)."""
    xml = sender.app_card_click_xml(
        user, card.task_id, key, fake.cards.click_code(card.task_id), AGENT_ID, at
    )
    query, body = sender.app_envelope(xml, AGENT_ID)
    try:
        resp = sender.post_app(query, body)
    except requests.ConnectionError:
        if not dying:
            raise
        return body
    assert resp.status_code == 200
    return body


def _state(card: FakeCard, user: str) -> str:
    rows = {r["keyname"]: r["value"] for r in card.copies[user]["horizontal_content_list"]}
    return str(rows["State"])


def _clicks(db_url: str) -> list[Any]:
    engine = make_engine(db_url)
    with engine.connect() as conn:
        rows = conn.execute(
            select(audit_event).where(audit_event.c.kind == "card_click").order_by(audit_event.c.id)
        )
        return list(rows)


def _effects(tmp_path: Path) -> list[Any]:
    path = tmp_path / "effects.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_confirm_by_click_refuses_others_stale_replayed_and_second_clicks(
    tmp_path: Path,
    db_url: str,
    llm: ScriptedLLM,
    fake_wecom: FakeWeCom,
    start_replica: Callable[..., Replica],
) -> None:
    llm.add(call("write_note", note="deploy window moved", environment="test"), say("Note written."))
    bot = start_replica(serve_config(tmp_path / "cfg", fake_wecom, llm_url=llm.base_url), db_url)
    sender = bot.app_sender()
    assert sender.post_app_text("alice", "note that the deploy window moved", 1, AGENT_ID).status_code == 200
    card = _card(fake_wecom, "alice")
    assert (
        "/confirm" in wait_until(lambda: fake_wecom.contents("alice"), what="text prompt")[0]
    )  # typed path kept
    assert _state(card, "alice") == "waiting for alice's confirmation"
    confirm = _key(card, "alice", "Confirm")
    now = int(time.time())

    _click(sender, fake_wecom, "bob", card, confirm, now)  # someone else's click
    wait_until(lambda: len(_clicks(db_url)) == 1, what="the first click audited")  # workers may reorder
    stale = confirm.rsplit(":", 1)[0] + ":0000000000000000"
    _click(sender, fake_wecom, "alice", card, stale, now + 1)  # a digest that no longer matches
    wait_until(lambda: len(_clicks(db_url)) == 2, what="two refused clicks audited")
    assert _effects(tmp_path) == []

    body = _click(sender, fake_wecom, "alice", card, confirm, now + 2)
    wait_until(lambda: _effects(tmp_path), what="the note written")
    assert (
        sender.session.post(  # WeCom's retry of the same event: acknowledged, not run again
            sender.base_url + "/wecom/callback",
            params=sender.signed_query(_encrypt_of(body)),
            data=body,
            timeout=30,
        ).status_code
        == 200
    )
    wait_until(lambda: len(_clicks(db_url)) == 3, what="the accepted click audited")
    _click(sender, fake_wecom, "alice", card, confirm, now + 3)  # a second physical click
    clicks = wait_until(lambda: len(_clicks(db_url)) == 4 and _clicks(db_url), what="four clicks audited")
    assert [c.outcome for c in clicks] == ["refused", "refused", "accepted", "refused"]
    assert [c.actor for c in clicks] == ["bob", "alice", "alice", "alice"]
    assert "no longer has the arguments" in clicks[1].reason
    assert clicks[2].task_id == 1 and clicks[2].detail["pending_id"] == 1
    assert len(_effects(tmp_path)) == 1  # executed exactly once
    final = wait_until(lambda: "executed" in _state(card, "alice") and card, what="card shows executed")
    assert final.copies["alice"]["replace_text"] == "executed"
    assert _state(final, "alice").startswith("confirmed by alice at ")


def _encrypt_of(body: bytes) -> str:
    text = body.decode()
    return text.split("<Encrypt><![CDATA[", 1)[1].split("]]>", 1)[0]


def _prod_write_confirmed(
    tmp_path: Path, db_url: str, fake: FakeWeCom, start_replica: Callable[..., Replica], llm_url: str
) -> tuple[CallbackSender, int, FakeCard, FakeCard, FakeCard]:
    """bob asks for a production write and confirms it by click: (sender, now, bob's, carol's, dave's card)."""
    bot = start_replica(serve_config(tmp_path / "cfg", fake, llm_url=llm_url), db_url)
    sender = bot.app_sender()
    assert sender.post_app_text("bob", "note the prod window", 1, AGENT_ID).status_code == 200
    mine = _card(fake, "bob")
    now = int(time.time())
    _click(sender, fake, "bob", mine, _key(mine, "bob", "Confirm"), now)
    return sender, now, mine, _card(fake, "carol"), _card(fake, "dave")


def test_production_write_approved_by_a_second_users_click(
    tmp_path: Path,
    db_url: str,
    llm: ScriptedLLM,
    fake_wecom: FakeWeCom,
    start_replica: Callable[..., Replica],
) -> None:
    llm.add(call("write_note", note="prod window", environment="prod"), say("Note written on prod."))
    sender, now, mine, carol, dave = _prod_write_confirmed(
        tmp_path, db_url, fake_wecom, start_replica, llm.base_url
    )
    wait_until(
        lambda: "waiting for approval by carol, dave" in _state(mine, "bob"), what="requester card waits"
    )
    assert _effects(tmp_path) == []

    _click(sender, fake_wecom, "carol", carol, _key(carol, "carol", "Approve"), now + 1)
    wait_until(lambda: _effects(tmp_path), what="the prod note written")
    for card, user in ((mine, "bob"), (carol, "carol"), (dave, "dave")):  # every copy tells the truth
        wait_until(lambda c=card, u=user: "executed" in _state(c, u), what=f"{user}'s card executed")
        assert "approved by carol" in _state(card, user)
    _click(sender, fake_wecom, "dave", dave, _key(dave, "dave", "Approve"), now + 2)  # too late
    clicks = wait_until(lambda: len(_clicks(db_url)) == 3 and _clicks(db_url), what="three clicks audited")
    assert [(c.actor, c.outcome) for c in clicks] == [
        ("bob", "accepted"),
        ("carol", "accepted"),
        ("dave", "refused"),
    ]
    assert len(_effects(tmp_path)) == 1


def test_a_crash_between_click_and_execution_resumes_exactly_once(
    tmp_path: Path,
    db_url: str,
    llm: ScriptedLLM,
    fake_wecom: FakeWeCom,
    start_replica: Callable[..., Replica],
) -> None:
    llm.add(call("write_note", note="deploy window moved", environment="test"), say("Note written."))
    # a short lease: the job that refreshes cards (with the reclaim, at half the lease) runs every 2.5 s
    cfg = serve_config(tmp_path / "cfg", fake_wecom, llm_url=llm.base_url, lease_seconds=5)
    doomed = start_replica(cfg, db_url, "r1", {"XIHE_TEST_CRASH_AT": "after_confirm_update"})
    sender = doomed.app_sender()
    assert sender.post_app_text("alice", "note that the deploy window moved", 1, AGENT_ID).status_code == 200
    card = _card(fake_wecom, "alice")
    _click(sender, fake_wecom, "alice", card, _key(card, "alice", "Confirm"), int(time.time()), dying=True)
    wait_until(lambda: doomed.proc.poll() is not None, what="the replica to die after the confirm UPDATE")
    assert _effects(tmp_path) == []

    start_replica(cfg, db_url, "r2")  # the orphan sweep resumes the confirmed action
    wait_until(lambda: _effects(tmp_path), what="the note written after the restart")
    wait_until(lambda: "executed" in _state(card, "alice"), what="the card shows executed")
    assert len(_effects(tmp_path)) == 1


def test_a_typed_rejection_with_its_reason_shows_on_every_copy_and_a_later_click_runs_nothing(
    tmp_path: Path,
    db_url: str,
    llm: ScriptedLLM,
    fake_wecom: FakeWeCom,
    start_replica: Callable[..., Replica],
) -> None:
    llm.add(call("write_note", note="prod window", environment="prod"), say("Not written."))
    sender, now, mine, carol, dave = _prod_write_confirmed(
        tmp_path, db_url, fake_wecom, start_replica, llm.base_url
    )
    assert sender.post_app_text("carol", "/reject 1 wrong business date", 2, AGENT_ID).status_code == 200
    said = "rejected by carol: wrong business date; nothing was run"
    for card, user in ((mine, "bob"), (carol, "carol"), (dave, "dave")):  # typed, and every copy says it
        wait_until(lambda c=card, u=user: _state(c, u) == said, what=f"{user}'s card rejected")
        assert card.copies[user]["replace_text"] == "rejected"
    _click(sender, fake_wecom, "dave", dave, _key(dave, "dave", "Approve"), now + 1)  # too late
    clicks = wait_until(lambda: len(_clicks(db_url)) == 2 and _clicks(db_url), what="two clicks audited")
    assert [(c.actor, c.outcome) for c in clicks] == [("bob", "accepted"), ("dave", "refused")]
    assert clicks[1].state_before == "rejected" and "rejected" in clicks[1].reason
    assert _effects(tmp_path) == []


def test_an_alert_cards_mute_button_runs_maint_for_the_admin_who_taps_it(
    tmp_path: Path,
    db_url: str,
    fake_wecom: FakeWeCom,
    start_replica: Callable[..., Replica],
) -> None:
    cfg = serve_config(tmp_path / "cfg", fake_wecom)
    shutil.copy(REPO / "config" / "alerts.yaml", cfg / "alerts.yaml")
    bot = start_replica(cfg, db_url)
    channel = Channel(
        kind="wecom_app", robot_key_env="S", to_users=["dave"], agent_id=AGENT_ID, api_base=fake_wecom.url
    )
    text = Renderer().render("instance.md.j2", ctx())  # a P0 run alert, as the pipeline renders it
    assert WeComAppNotifier({"XIHE_WECOM_CORP_ID": CORP_ID, "S": SECRET}).send(channel, text).ok
    (card,) = fake_wecom.cards.of_user("dave")
    _click(
        bot.app_sender(),
        fake_wecom,
        "dave",
        card,
        _key(card, "dave", "静音此工作流 30 分钟"),
        int(time.time()),
    )
    (click,) = wait_until(lambda: _clicks(db_url), what="the tap audited")
    assert (click.actor, click.outcome, click.detail["command"]) == (
        "dave",
        "ran",
        "/maint on 30m workflow:order_sync",
    )
    assert "order_sync" in click.reason and wait_until(lambda: fake_wecom.contents("dave")[1:], what="reply")
