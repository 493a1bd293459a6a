"""The AI bot's long connection on loopback: a real bot (scripted LLM, test plugin tools) against the
WebSocket fake. Waits are bounded waits for socket events; lease time moves on the FakeClock."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.wecom.conftest import BOT_ID, BOT_SECRET, Start, longconn
from xihe.agent.app import App
from xihe.agent.clock import FakeClock
from xihe.agent.errors import ConfigErrors
from xihe.agent.wecom import feature as wecom_feature
from xihe.config.wecom import LongConnectionSettings, load_wecom, resolve_settings
from xihe.integrations.fakes.llm_server import ScriptedLLM, call, say
from xihe.integrations.wecom.fake_ws import FakeWeComWS
from xihe.integrations.wecom.longconn import LongConnection
from xihe.integrations.wecom.ws_frames import stream_id_for
from xihe.integrations.wecom.ws_store import WsLease


def wait_until(predicate: Callable[[], Any], what: str, timeout: float = 10.0) -> Any:
    """Bounded wait for a state the connection thread reaches after a socket event."""
    deadline = time.monotonic() + timeout
    idle = threading.Event()
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        idle.wait(0.01)


def metric(app: App, outcome: str) -> float:
    value = app.deps.metrics.messages.labels("wecom_aibot_ws", outcome)._value.get()
    return float(value)


def test_conversation_ask_confirm_result_over_the_long_connection(
    start_bot: Start, fake_ws: FakeWeComWS, llm: ScriptedLLM, tmp_path: Path
) -> None:
    llm.add(call("write_note", note="deploy window moved", environment="test"), say("Note written."))
    app = start_bot()
    session = fake_ws.wait_connected()
    assert session.frames[0]["cmd"] == "aibot_subscribe"
    assert session.frames[0]["body"] == {"bot_id": BOT_ID, "secret": "***"}  # the fake masks it on record
    assert fake_ws.wait_for(lambda: fake_ws.pings() >= 1, what="a heartbeat")
    assert not any(r.path == "/wecom/aibot" for r in wecom_feature.routes(app) if hasattr(r, "path"))

    ask = fake_ws.push_text("alice", "@xihe note that the deploy window moved", "m-1", chatid="ops")
    prompt = fake_ws.wait_final(ask)
    (card,) = fake_ws.wait_for(lambda: fake_ws.bot_cards.of_chat("ops"), what="the card in the group")
    assert card.card["main_title"]["title"] == "Confirm action 1"  # the typed path below works as well
    first = fake_ws.replies(ask)[0]
    assert first == {"id": stream_id_for(ask), "finish": False, "content": "收到"}  # ack at once
    assert prompt["id"] == first["id"]
    assert "/confirm" in prompt["content"] and "write_note" in prompt["content"]
    assert not (tmp_path / "effects.jsonl").exists()  # nothing ran before the yes

    confirm = fake_ws.push_text("alice", "@xihe /confirm", "m-2", chatid="ops")
    result = fake_ws.wait_final(confirm)
    assert result["content"] == "Note written."
    frames = fake_ws.replies(confirm)
    assert [f["finish"] for f in frames] == [False] * (len(frames) - 1) + [True]
    assert any("⏳ task 1: running `write_note`" in f["content"] for f in frames[:-1])  # progress
    effects = (tmp_path / "effects.jsonl").read_text().splitlines()
    assert len(effects) == 1 and json.loads(effects[0])["user"] == "alice"
    llm.assert_consumed()

    # a late result (a DS run ending, another user's /approve) is a proactive aibot_send_msg
    app.deps.notify("wecom:aibot:bot1:ops", "DS run 42 finished: SUCCESS")
    sent = fake_ws.wait_for(
        lambda: [s for s in fake_ws.sent() if s["msgtype"] == "markdown"], what="aibot_send_msg"
    )
    assert sent == [
        {"chatid": "ops", "msgtype": "markdown", "markdown": {"content": "DS run 42 finished: SUCCESS"}}
    ]
    # every frame we sent was acknowledged with errcode 0 (req_ids were the pushed ones)
    assert all(
        f["headers"]["req_id"] in fake_ws.pushed_req_ids for f in fake_ws.frames if "respond" in f["cmd"]
    )


def test_redelivered_msgid_runs_once(start_bot: Start, fake_ws: FakeWeComWS, llm: ScriptedLLM) -> None:
    llm.add(call("echo", text="pong"), say("echo says pong"))
    app = start_bot()
    fake_ws.wait_connected()
    first = fake_ws.push_text("bob", "echo pong", "m-dup")
    assert fake_ws.wait_final(first)["content"] == "echo says pong"
    again = fake_ws.push_text("bob", "echo pong", "m-dup")  # WeCom delivers the same msgid again
    marker = fake_ws.push_text("bob", "/help", "m-help")  # frames are handled in order
    assert "/help" in fake_ws.wait_final(marker)["content"]
    assert fake_ws.replies(again) == []
    assert metric(app, "duplicate") == 1
    llm.assert_consumed()  # a second run would have asked the scripted model again and failed


def test_dropped_connection_reconnects_and_continues(start_bot: Start, fake_ws: FakeWeComWS) -> None:
    app = start_bot(heartbeat=0.2)
    conn = longconn(app)
    fake_ws.wait_connected()
    fake_ws.drop()  # the network goes away without a close handshake
    fake_ws.wait_connected(count=2)
    assert conn.delays == [1.0]  # waited the initial back-off once
    req = fake_ws.push_text("alice", "/help", "m-after-drop")
    assert "/help" in fake_ws.wait_final(req)["content"]

    fake_ws.answer_pings = False  # a half-open connection: pings vanish
    fake_ws.wait_connected(count=3, timeout=10)
    assert "heartbeats" in wait_until(lambda: conn.last_error, "the reason")
    fake_ws.answer_pings = True
    req = fake_ws.push_text("alice", "/help", "m-after-silence")
    assert "/help" in fake_ws.wait_final(req)["content"]


def test_wrong_secret_is_reported_clearly_without_the_secret(
    start_bot: Start, fake_ws: FakeWeComWS, caplog: pytest.LogCaptureFixture
) -> None:
    wrong = "wrong-secret-value-987"
    caplog.set_level(logging.INFO)
    app = start_bot(secret=wrong, backoff_max=4)
    conn = longconn(app)
    wait_until(lambda: len(conn.delays) >= 4, "four refused attempts")
    assert conn.delays[:4] == [1.0, 2.0, 4.0, 4.0]  # doubling, capped
    assert fake_ws.sessions == [] and len(fake_ws.refused) >= 4
    assert "refused aibot_subscribe for bot bot1: errcode 40001" in conn.last_error
    assert "secret" in conn.last_error  # says where to look ...
    assert wrong not in conn.last_error and wrong not in caplog.text  # ... never what it is
    assert "refused aibot_subscribe" in caplog.text


def test_two_replicas_one_connection_and_takeover(
    start_bot: Start, fake_ws: FakeWeComWS, clock: FakeClock, llm: ScriptedLLM
) -> None:
    llm.add(call("echo", text="one"), say("echo says one"))
    a = start_bot("r1")
    fake_ws.wait_connected()
    b = start_bot("r2")
    conn_a, conn_b = longconn(a), longconn(b)
    wait_until(lambda: conn_b.state == "standby", "r2 in standby")
    assert len(fake_ws.sessions) == 1 and conn_a.connected and not conn_b.connected
    handled = fake_ws.push_text("carol", "echo one", "m-r1")
    assert fake_ws.wait_final(handled)["content"] == "echo says one"

    conn_a.kill()  # r1 dies: its socket closes, its lease is left to lapse
    fake_ws.wait_for(lambda: fake_ws.live() is None, what="r1's socket to close")
    conn_b.wake()
    wait_until(lambda: conn_b.state == "standby", "r2 still waiting for the lease")
    assert len(fake_ws.sessions) == 1  # no takeover while r1's lease is valid

    clock.advance(31)  # the lease lapses
    conn_b.wake()
    fake_ws.wait_connected(count=2)
    wait_until(lambda: conn_b.connected, "r2 to hold the connection")
    assert WsLease(b.deps.engine, "aibot:bot1").holder(clock()) == "r2"

    redelivered = fake_ws.push_text("carol", "echo one", "m-r1")  # r1 had handled it: not again
    req = fake_ws.push_text("carol", "/help", "m-r2")
    assert "/help" in fake_ws.wait_final(req)["content"]
    assert fake_ws.replies(redelivered) == []
    llm.assert_consumed()

    # a replica without the connection leaves late results in the outbox; the holder sends them
    a.deps.notify("wecom:aibot:bot1:carol", "DS run 7 finished: FAILED")
    sent = fake_ws.wait_for(fake_ws.sent, what="the outbox drained by r2")
    assert sent == [
        {"chatid": "carol", "msgtype": "markdown", "markdown": {"content": "DS run 7 finished: FAILED"}}
    ]


def test_a_newer_connection_kicks_the_old_one(
    fake_ws: FakeWeComWS, clock: FakeClock, sqlite_url: str
) -> None:
    """WeCom keeps one connection per bot; the kicked side backs off instead of fighting."""
    from xihe.agent.db import open_store_engine

    engine = open_store_engine(sqlite_url)
    settings = LongConnectionSettings(
        bot_id=BOT_ID, secret=BOT_SECRET, url=fake_ws.url, heartbeat_seconds=0.5
    )
    never = threading.Event()
    conn = LongConnection(settings, engine, holder="r1", clock=clock, sleep=lambda s: never.wait(0.01))
    conn.start()
    try:
        fake_ws.wait_connected()
        outsider = FakeOutsider(fake_ws.url)  # e.g. someone ran the bot elsewhere with the same secret
        fake_ws.wait_for(lambda: 1 in fake_ws.kicked, what="the kick")
        wait_until(lambda: conn.last_error.startswith("kicked"), "the kick to be noticed")
        fake_ws.wait_connected(count=3)  # we still hold the lease, so we come back ...
        assert conn.delays == [2.0]  # ... after a longer back-off than a plain drop (1 s)
        outsider.close()
    finally:
        conn.stop()
        engine.dispose()


class FakeOutsider:
    """A bare second client subscribing with the right secret."""

    def __init__(self, url: str) -> None:
        from websockets.sync.client import connect

        self.ws = connect(url)
        self.ws.send(
            json.dumps(
                {
                    "cmd": "aibot_subscribe",
                    "headers": {"req_id": "s1"},
                    "body": {"bot_id": BOT_ID, "secret": BOT_SECRET},
                }
            )
        )
        assert json.loads(self.ws.recv(timeout=5))["errcode"] == 0

    def close(self) -> None:
        self.ws.close()


def test_config_websocket_mode_needs_bot_id_and_secret_not_callback_keys() -> None:
    cfg = load_wecom("enabled: false\naibot: {enabled: true, mode: websocket}\n")
    with pytest.raises(ConfigErrors) as err:
        resolve_settings(cfg, {})
    text = str(err.value)
    assert "XIHE_WECOM_AIBOT_ID" in text and "XIHE_WECOM_AIBOT_SECRET" in text
    assert "AIBOT_TOKEN" not in text and "AES_KEY" not in text
    settings = resolve_settings(cfg, {"XIHE_WECOM_AIBOT_ID": "b", "XIHE_WECOM_AIBOT_SECRET": "s3cr3t"})
    assert settings.aibot is not None and settings.aibot.long_connection is not None
    assert "s3cr3t" not in repr(settings)
    with pytest.raises(ConfigErrors, match="lease_seconds"):
        load_wecom("aibot:\n  long_connection: {heartbeat_seconds: 30, lease_seconds: 20}\n")
