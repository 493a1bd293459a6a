"""The frames of the AI bot's long connection (长连接): their commands, how we build them, how we read them.

Frames are JSON `{cmd, headers: {req_id}, body}` (WeCom's answers to our frames carry no `cmd`,
only `headers.req_id`, `errcode` and `errmsg`). After `aibot_subscribe` (bot_id + secret) WeCom
pushes `aibot_msg_callback` / `aibot_event_callback`; we answer a message with
`aibot_respond_msg` stream frames on its req_id, an `enter_chat` with `aibot_respond_welcome_msg`,
and reach a conversation later with `aibot_send_msg`. A `ping` goes every heartbeat. There is no
message crypto on this channel (TLS only).

Stream ids are `ws-<req_id>`, so any replica can turn a stream update into the right frame.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from typing import Any

from xihe.integrations.wecom.aibot import STREAM_MAX_BYTES, clip_utf8

SUBSCRIBE = "aibot_subscribe"
PING = "ping"
MSG_CALLBACK = "aibot_msg_callback"
EVENT_CALLBACK = "aibot_event_callback"
RESPOND = "aibot_respond_msg"
RESPOND_WELCOME = "aibot_respond_welcome_msg"
RESPOND_UPDATE = "aibot_respond_update_msg"
SEND = "aibot_send_msg"
KICKED_EVENT = "disconnected_event"

WS_STREAM_PREFIX = "ws-"
_STREAM_ID_MAX = 64  # wecom_stream.id


def new_req_id(prefix: str) -> str:
    """A req_id for a frame we start (WeCom's SDK prefixes it with the command)."""
    return f"{prefix}_{int(time.time() * 1000)}_{secrets.token_hex(4)}"


def make_frame(cmd: str, req_id: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """One frame `{cmd, headers: {req_id}, body}`."""
    frame: dict[str, Any] = {"cmd": cmd, "headers": {"req_id": req_id}}
    if body is not None:
        frame["body"] = body
    return frame


def stream_id_for(req_id: str) -> str:
    """The stream id of the answer to the message pushed with `req_id`."""
    sid = WS_STREAM_PREFIX + req_id
    if len(sid) <= _STREAM_ID_MAX:
        return sid
    return "wh-" + hashlib.sha256(req_id.encode("utf-8")).hexdigest()[:40]


def respond_frame(req_id: str, stream_id: str, content: str, finish: bool) -> dict[str, Any]:
    """`aibot_respond_msg`: the full text so far of one streamed answer."""
    body = {
        "msgtype": "stream",
        "stream": {"id": stream_id, "finish": finish, "content": clip_utf8(content, STREAM_MAX_BYTES)},
    }
    return make_frame(RESPOND, req_id, body)


def send_msg_frame(chatid: str, content: str) -> dict[str, Any]:
    """`aibot_send_msg`: a proactive markdown message to a chat (group chatid, or userid for 1:1)."""
    body = {
        "chatid": chatid,
        "msgtype": "markdown",
        "markdown": {"content": clip_utf8(content, STREAM_MAX_BYTES)},
    }
    return make_frame(SEND, new_req_id(SEND), body)


def parse_frame(raw: str | bytes) -> dict[str, Any] | None:
    """A received frame as a dict; None when it is not a JSON object."""
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def send_card_frame(chatid: str, card: dict[str, Any]) -> dict[str, Any]:
    """`aibot_send_msg`: a proactive template card to a chat (group chatid, or userid for 1:1)."""
    return make_frame(
        SEND, new_req_id(SEND), {"chatid": chatid, "msgtype": "template_card", "template_card": card}
    )


def update_card_frame(req_id: str, body: dict[str, Any]) -> dict[str, Any]:
    """`aibot_respond_update_msg`: the answer to the card click pushed with `req_id` (within 5 s)."""
    return make_frame(RESPOND_UPDATE, req_id, body)
