"""AI-bot mode over HTTP: JSON callbacks (receiveid ""), streamed replies, refreshes, response_url."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from tests.wecom.conftest import BOT_AES_KEY, BOT_TOKEN, Gateway
from xihe.agent.errors import WeComError
from xihe.config.wecom import AibotSettings
from xihe.integrations.wecom.aibot import STREAM_MAX_BYTES, ResponseUrlClient, StreamRegistry, clip_utf8
from xihe.integrations.wecom.fake import FakeWeCom


def test_new_message_is_dispatched_and_answered_with_an_open_stream(gateway: Gateway) -> None:
    bot = gateway.bot_sender()
    payload = bot.aibot_text("alice", "@xihe /status 42", "m-1", chatid="grp1", response_url="https://x/y")
    resp, nonce = bot.post_aibot(payload)
    assert resp.status_code == 200
    reply = bot.open_reply(resp.json(), nonce)  # signature and nonce checked like WeCom does
    assert reply["msgtype"] == "stream"
    assert reply["stream"]["finish"] is False and reply["stream"]["content"] == "收到"
    (msg,) = gateway.dispatched
    assert (msg.user, msg.text, msg.chat_type, msg.chat_id, msg.channel) == (
        "alice",
        "/status 42",
        "group",
        "grp1",
        "wecom_aibot",
    )
    assert msg.stream_id == reply["stream"]["id"]
    assert msg.conversation == "wecom:aibot:bot1:grp1"
    assert "https://x/y" not in repr(msg)


def test_refresh_callbacks_see_the_latest_content_until_finish(gateway: Gateway) -> None:
    bot = gateway.bot_sender()
    resp, nonce = bot.post_aibot(bot.aibot_text("alice", "rerun daily sales", "m-2"))
    sid = bot.open_reply(resp.json(), nonce)["stream"]["id"]
    now = gateway.clock()

    gateway.streams.update(sid, "DS run RUNNING 3/5 tasks", now)
    resp, nonce = bot.post_aibot(bot.aibot_refresh(sid, "r-1", "alice"))
    assert bot.open_reply(resp.json(), nonce)["stream"] == {
        "id": sid,
        "finish": False,
        "content": "DS run RUNNING 3/5 tasks",
    }

    gateway.streams.append(sid, "\ndone: instance 42 SUCCESS", now, finish=True)
    resp, nonce = bot.post_aibot(bot.aibot_refresh(sid, "r-2", "alice"))
    frame = bot.open_reply(resp.json(), nonce)["stream"]
    assert frame["finish"] is True and frame["content"].endswith("SUCCESS")
    assert len(gateway.dispatched) == 1  # refreshes are never dispatched


def test_duplicate_msgid_returns_the_same_stream_without_dispatch(gateway: Gateway) -> None:
    bot = gateway.bot_sender()
    payload = bot.aibot_text("alice", "hello", "m-3")
    r1, n1 = bot.post_aibot(payload)
    r2, n2 = bot.post_aibot(payload)
    assert bot.open_reply(r1.json(), n1)["stream"]["id"] == bot.open_reply(r2.json(), n2)["stream"]["id"]
    assert len(gateway.dispatched) == 1


def test_unknown_or_expired_stream_is_closed(gateway: Gateway) -> None:
    bot = gateway.bot_sender()
    resp, nonce = bot.post_aibot(bot.aibot_refresh("nope", "r-9"))
    assert bot.open_reply(resp.json(), nonce)["stream"]["finish"] is True


def test_enter_chat_and_other_events(make_gateway: Callable[..., Gateway]) -> None:
    gw = make_gateway(
        aibot=AibotSettings(token=BOT_TOKEN, aes_key=BOT_AES_KEY, welcome_text="你好，我是 xihe")
    )
    bot = gw.bot_sender()
    event = {
        "msgid": "e-1",
        "aibotid": "bot1",
        "from": {"userid": "alice"},
        "msgtype": "event",
        "event": {"eventtype": "enter_chat"},
    }
    resp, nonce = bot.post_aibot(event)
    assert bot.open_reply(resp.json(), nonce) == {"msgtype": "text", "text": {"content": "你好，我是 xihe"}}
    feedback = {**event, "msgid": "e-2", "event": {"eventtype": "feedback_event"}}
    resp, _ = bot.post_aibot(feedback)
    assert resp.status_code == 200 and resp.content == b""
    assert gw.dispatched == []


@pytest.mark.parametrize(
    ("case", "status"),
    [
        ("app key", 401),
        ("corp receiveid", 403),
        ("stale", 403),
        ("not json", 400),
        ("no encrypt", 400),
        ("bad payload", 400),
    ],
)
def test_bad_aibot_callbacks_are_rejected(gateway: Gateway, case: str, status: int) -> None:
    bot = gateway.bot_sender()
    payload = bot.aibot_text("alice", "hi", "m-x")
    if case == "app key":
        resp, _ = gateway.app_sender().post_aibot(payload)  # signed with the app's token
    elif case == "corp receiveid":
        resp, _ = gateway.bot_sender(receiveid="ww1436e0e65a779aee").post_aibot(payload)
    elif case == "stale":
        resp, _ = bot.post_aibot(payload, timestamp=str(int(gateway.clock().timestamp()) - 3600))
    elif case == "bad payload":
        resp, _ = bot.post_aibot({"hello": "world"})
    else:
        body = b"not json" if case == "not json" else b'{"encrypted": "x"}'
        resp = bot.session.post(
            f"{gateway.url}/wecom/aibot", params=bot.signed_query("x"), data=body, timeout=5
        )
    assert resp.status_code == status, resp.text
    assert gateway.dispatched == []


def test_aibot_url_verification(gateway: Gateway) -> None:
    resp = gateway.bot_sender().verify_url("8842", path="/wecom/aibot")
    assert (resp.status_code, resp.text) == (200, "8842")


def test_stream_registry_clips_and_expires() -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    reg = StreamRegistry(ttl=timedelta(minutes=6), new_id=lambda: "s1")
    s = reg.open("m", t0)
    assert reg.update(s.id, "好" * 10000, t0)  # 30,000 bytes
    got = reg.get(s.id, t0)
    assert got is not None and len(got.content.encode()) <= STREAM_MAX_BYTES
    assert reg.update(s.id, "x", t0, finish=True)
    assert not reg.update(s.id, "late", t0)  # finished streams do not change
    assert reg.get(s.id, t0 + timedelta(minutes=7)) is None
    assert reg.by_msgid("m", t0 + timedelta(minutes=7)) is None


def test_clip_utf8_never_splits_a_character() -> None:
    clipped = clip_utf8("😀" * 10, 21, marker="…")
    assert len(clipped.encode()) <= 21 and clipped.endswith("…") and "\ufffd" not in clipped


def test_response_url_is_used_once(fake_wecom: FakeWeCom) -> None:
    client = ResponseUrlClient(allowed_prefix=fake_wecom.url + "/cgi-bin/aibot/response")
    url = fake_wecom.new_response_url()
    client.send_markdown(url, "**done**: instance 42")
    assert fake_wecom.responses == [{"msgtype": "markdown", "markdown": {"content": "**done**: instance 42"}}]
    with pytest.raises(WeComError, match="already used"):
        client.send_markdown(url, "again")
    # a second client (another replica) is refused by WeCom itself
    other = ResponseUrlClient(allowed_prefix=fake_wecom.url + "/cgi-bin/aibot/response")
    with pytest.raises(WeComError) as err:
        other.send_markdown(url, "again")
    assert err.value.errcode == 93020
    assert "response_code=" not in str(err.value)


def test_response_url_outside_the_allowed_prefix_is_refused(fake_wecom: FakeWeCom) -> None:
    client = ResponseUrlClient()
    with pytest.raises(WeComError, match="outside"):
        client.send_markdown(fake_wecom.new_response_url(), "x")
    assert fake_wecom.responses == [] and fake_wecom.server.requests == []
