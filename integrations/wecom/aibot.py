"""AI bot (智能机器人) in API mode: JSON callbacks, streamed passive replies and `response_url`.

Callbacks are `{"encrypt": ...}` with the §3 crypto and receiveid "". A new message is answered at
once with a stream frame (`finish: false`); WeCom then POSTs `msgtype: "stream"` refresh callbacks
with that stream id and gets whatever the `StreamRegistry` holds by then, until `finish: true`.
"""

from __future__ import annotations

import json
import re
import secrets
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Protocol

import requests
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from xihe.agent import wecom_text
from xihe.agent.cards import command_of_key
from xihe.agent.errors import WeComError
from xihe.agent.redact import excerpt
from xihe.agent.wecom_markdown import reply
from xihe.integrations.wecom.crypto import MsgCrypto
from xihe.integrations.wecom.inbound import (
    CHANNEL_AIBOT,
    Echo,
    InboundMessage,
    MsgIdStore,
    Rejected,
    check_body,
    open_ciphertext,
    signed_params,
    verify_url,
)

STREAM_MAX_BYTES = 20480
_TRUNCATED = "\n\n…(truncated)"
_LEADING_MENTION = re.compile(r"^\s*@\S+\s*")


def clip_utf8(text: str, limit: int, marker: str = _TRUNCATED) -> str:
    """`text` if it fits in `limit` UTF-8 bytes, else its head plus `marker`, cut on a character boundary."""
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    room = limit - len(marker.encode("utf-8"))
    return raw[:room].decode("utf-8", "ignore") + marker


# ---- payload (outside input: pydantic at the edge) -------------------------------------------


class _From(BaseModel):
    model_config = ConfigDict(extra="ignore")
    userid: str = Field(description="sender's userid")


class _Content(BaseModel):
    model_config = ConfigDict(extra="ignore")
    content: str = Field("", description="text (voice: WeCom's transcription)")


class _StreamRef(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: str = Field("", description="stream id set by our first reply")


class _CardEvent(BaseModel):
    model_config = ConfigDict(extra="ignore")
    card_type: str = Field("", description="the clicked card's type")
    event_key: str = Field("", description="the clicked button's key")
    task_id: str = Field("", description="the clicked card's task_id")


class _Event(BaseModel):
    model_config = ConfigDict(extra="ignore")
    eventtype: str = Field("", description="enter_chat, template_card_event, feedback_event, ...")
    template_card_event: _CardEvent | None = Field(None, description="a card click (documented form)")
    # WeCom's own Node SDK types the click flat under `event`; tolerated, the nested form wins
    event_key: str = Field("", description="a card click's key (flat form)")
    task_id: str = Field("", description="a card click's task_id (flat form)")

    def card_click(self) -> tuple[str, str] | None:
        """(task_id, key) of a `template_card_event`, None for other events."""
        if self.eventtype != CARD_EVENT:
            return None
        nested = self.template_card_event
        if nested is not None and nested.task_id:
            return nested.task_id, nested.event_key
        return self.task_id, self.event_key


CARD_EVENT = "template_card_event"


class _MixedItem(BaseModel):
    model_config = ConfigDict(extra="ignore")
    msgtype: str = Field(description="text or image")
    text: _Content | None = Field(None, description="text part")


class _Mixed(BaseModel):
    model_config = ConfigDict(extra="ignore")
    msg_item: list[_MixedItem] = Field(default_factory=list, description="parts in order")


class AibotPayload(BaseModel):
    """A decrypted AI-bot callback (fields we use; others ignored)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    msgid: str = Field(description="de-duplication key; WeCom may deliver the same msgid twice")
    aibotid: str = Field("", description="the bot's id")
    chatid: str = Field("", description="group chat id (groups only)")
    chattype: str = Field("single", description="single or group")
    sender: _From | None = Field(None, alias="from", description="the sender")
    response_url: str = Field("", description="one-shot URL for one later markdown reply (valid 1 h)")
    msgtype: str = Field(description="text, mixed, voice, image, file, stream, event")
    create_time: int = Field(0, description="unix seconds, when present")
    text: _Content | None = Field(None, description="text body")
    voice: _Content | None = Field(None, description="voice body (transcribed)")
    mixed: _Mixed | None = Field(None, description="text + image body")
    stream: _StreamRef | None = Field(None, description="stream refresh: which stream")
    event: _Event | None = Field(None, description="event body")

    def plain_text(self) -> str:
        """The text the user typed, without a leading @mention of the bot in groups."""
        if self.msgtype == "text" and self.text:
            body = self.text.content
        elif self.msgtype == "voice" and self.voice:
            body = self.voice.content
        elif self.msgtype == "mixed" and self.mixed:
            body = "\n".join(i.text.content for i in self.mixed.msg_item if i.msgtype == "text" and i.text)
        else:
            body = ""
        return _LEADING_MENTION.sub("", body, count=1) if self.chattype == "group" else body

    def card_click(self) -> tuple[str, str] | None:
        """(task_id, key) when this is a card click."""
        return self.event.card_click() if self.msgtype == "event" and self.event is not None else None

    def inbound(self, user: str, now: datetime, stream_id: str, response_url: str = "") -> InboundMessage:
        """The channel-neutral message the gateway dispatches (callback and long-connection modes alike);
        a card click is the typed command its button stands for."""
        click = self.card_click()
        if click is not None:
            return InboundMessage(
                user=user,
                conversation=f"wecom:aibot:{self.aibotid}:{self.chatid or user}",
                text=command_of_key(click[1]) or "",
                msg_id=self.msgid,
                create_time=self.create_time or int(now.timestamp()),
                agent_id=self.aibotid,
                channel=CHANNEL_AIBOT,
                msg_type="event",
                event=CARD_EVENT,
                chat_type=self.chattype,
                chat_id=self.chatid,
                response_url=response_url,
                card_task=click[0],
            )
        return InboundMessage(
            user=user,
            conversation=f"wecom:aibot:{self.aibotid}:{self.chatid or user}",
            text=self.plain_text(),
            msg_id=self.msgid,
            create_time=self.create_time or int(now.timestamp()),
            agent_id=self.aibotid,
            channel=CHANNEL_AIBOT,
            msg_type=self.msgtype,
            chat_type=self.chattype,
            chat_id=self.chatid,
            stream_id=stream_id,
            response_url=response_url,
        )


# ---- stream registry ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Stream:
    """The latest state of one streamed answer."""

    id: str
    msgid: str
    content: str
    finish: bool
    created_at: datetime
    updated_at: datetime


class Streams(Protocol):
    """Where streamed answers live: `StreamRegistry` in one process, `store.SqlStreamRegistry` across replicas."""

    def open(self, msgid: str, now: datetime, content: str = "") -> Stream:
        """Start the stream for `msgid`, or return the one already started for it."""
        ...

    def get(self, stream_id: str, now: datetime) -> Stream | None:
        """The stream's latest state, or None when unknown or expired."""
        ...

    def by_msgid(self, msgid: str, now: datetime) -> Stream | None:
        """The stream opened for `msgid`, if still live."""
        ...

    def update(self, stream_id: str, content: str, now: datetime, *, finish: bool = False) -> bool:
        """Set the full text so far; False when the stream is gone or finished."""
        ...


class StreamRegistry:
    """Streams by id (and by the msgid that opened them); thread-safe; expires after `ttl`."""

    def __init__(
        self, ttl: timedelta = timedelta(minutes=6), new_id: Callable[[], str] | None = None
    ) -> None:
        self.ttl = ttl
        self._new_id = new_id or (lambda: secrets.token_hex(12))
        self._streams: dict[str, Stream] = {}
        self._by_msgid: dict[str, str] = {}
        self._lock = threading.Lock()

    def _prune(self, now: datetime) -> None:
        for sid in [s.id for s in self._streams.values() if now - s.created_at > self.ttl]:
            self._by_msgid.pop(self._streams.pop(sid).msgid, None)

    def open(self, msgid: str, now: datetime, content: str = "") -> Stream:
        """Start the stream for `msgid`, or return the one already started for it."""
        with self._lock:
            self._prune(now)
            if msgid in self._by_msgid:
                return self._streams[self._by_msgid[msgid]]
            stream = Stream(self._new_id(), msgid, clip_utf8(content, STREAM_MAX_BYTES), False, now, now)
            self._streams[stream.id] = stream
            self._by_msgid[msgid] = stream.id
            return stream

    def get(self, stream_id: str, now: datetime) -> Stream | None:
        """The stream's latest state, or None when unknown or expired."""
        with self._lock:
            self._prune(now)
            return self._streams.get(stream_id)

    def by_msgid(self, msgid: str, now: datetime) -> Stream | None:
        """The stream opened for `msgid`, if still live."""
        with self._lock:
            self._prune(now)
            sid = self._by_msgid.get(msgid)
            return self._streams.get(sid) if sid else None

    def update(self, stream_id: str, content: str, now: datetime, *, finish: bool = False) -> bool:
        """Set the full text so far (clipped to 20,480 bytes); False when the stream is gone or finished."""
        with self._lock:
            stream = self._streams.get(stream_id)
            if stream is None or stream.finish:
                return False
            self._streams[stream_id] = replace(
                stream, content=clip_utf8(content, STREAM_MAX_BYTES), finish=finish, updated_at=now
            )
            return True

    def append(self, stream_id: str, text: str, now: datetime, *, finish: bool = False) -> bool:
        """Add `text` to the stream's content (progress lines)."""
        with self._lock:
            stream = self._streams.get(stream_id)
            current = stream.content if stream else ""
        return self.update(stream_id, current + text, now, finish=finish)


def stream_frame(stream_id: str, content: str, finish: bool) -> dict[str, Any]:
    """The plaintext JSON of one stream reply."""
    return {"msgtype": "stream", "stream": {"id": stream_id, "finish": finish, "content": content}}


# ---- callback handling -------------------------------------------------------------------------


@dataclass(frozen=True)
class BotReply:
    """A verified callback: what to dispatch (if anything) and the plaintext reply (if any)."""

    message: InboundMessage | None
    reply: dict[str, Any] | None
    note: str = ""
    card_task: str = ""  # a card click: answer with that card's update (within WeCom's 5 s)


def encrypt_reply(crypto: MsgCrypto, reply: Mapping[str, Any], nonce: str, now: datetime) -> dict[str, str]:
    """Wrap a plaintext reply as `{encrypt, msgsignature, timestamp, nonce}` (nonce = the callback's)."""
    timestamp = str(int(now.timestamp()))
    encrypted = crypto.encrypt(json.dumps(reply, ensure_ascii=False).encode("utf-8"))
    return {
        "encrypt": encrypted,
        "msgsignature": crypto.sign(timestamp, nonce, encrypted),
        "timestamp": timestamp,
        "nonce": nonce,
    }


class AibotCallback:
    """Verifies and decrypts AI-bot callbacks, de-duplicates by msgid and answers from the stream registry."""

    def __init__(
        self,
        crypto: MsgCrypto,
        store: MsgIdStore,
        streams: Streams,
        *,
        window_seconds: int = 300,
        max_body_bytes: int = 65536,
        ack_text: str = "",
        welcome_text: str = "",
    ) -> None:
        if crypto.receiveid != "":
            raise ValueError('the AI bot uses receiveid ""')
        self.crypto = crypto
        self.store = store
        self.streams = streams
        self.window_seconds = window_seconds
        self.max_body_bytes = max_body_bytes
        self.ack_text = reply(ack_text)  # YAML text, shown as WeCom markdown
        self.welcome_text = wecom_text.text(welcome_text)  # a WeCom text message

    def verify(self, query: Mapping[str, str], now: datetime) -> Echo | Rejected:
        """GET: answer the decrypted echostr."""
        return verify_url(query, self.crypto, now, self.window_seconds)

    def open_payload(
        self, query: Mapping[str, str], body: bytes, content_type: str, now: datetime
    ) -> AibotPayload | Rejected:
        """Every check up to a validated payload; no state touched."""
        signed = signed_params(query)
        if isinstance(signed, Rejected):
            return signed
        text = check_body(body, content_type, self.max_body_bytes)
        if isinstance(text, Rejected):
            return text
        try:
            outer = json.loads(text)
        except ValueError:
            return Rejected(400, "callback body is not JSON")
        if not isinstance(outer, dict) or not isinstance(outer.get("encrypt"), str) or not outer["encrypt"]:
            return Rejected(400, 'callback body must be {"encrypt": "..."}')
        plain = open_ciphertext(self.crypto, signed, outer["encrypt"], now, self.window_seconds)
        if isinstance(plain, Rejected):
            return plain
        try:
            return AibotPayload.model_validate_json(plain)
        except ValidationError as exc:
            return Rejected(
                400, f"decrypted payload is not a valid AI-bot callback ({exc.error_count()} errors)"
            )

    def receive(
        self, query: Mapping[str, str], body: bytes, content_type: str, now: datetime
    ) -> BotReply | Rejected:
        """POST: verify, then answer a refresh, an event or a new message (opening its stream)."""
        payload = self.open_payload(query, body, content_type, now)
        if isinstance(payload, Rejected):
            return payload
        if payload.msgtype == "stream":
            return self._refresh(payload, now)
        user = payload.sender.userid if payload.sender else ""
        if not user:
            return Rejected(400, "callback has no from.userid")
        key = f"{CHANNEL_AIBOT}:{payload.msgid}"
        duplicate = self.store.seen(key, now)
        click = payload.card_click()
        if click is not None:  # dispatched once; a repeat delivery still gets the card as it stands
            message = None if duplicate else payload.inbound(user, now, "", payload.response_url)
            return BotReply(message, None, "duplicate card click" if duplicate else "card click", click[0])
        if payload.msgtype == "event":
            kind = payload.event.eventtype if payload.event else ""
            if kind == "enter_chat" and self.welcome_text and not duplicate:
                return BotReply(None, {"msgtype": "text", "text": {"content": self.welcome_text}}, "welcome")
            return BotReply(None, None, f"event {kind or '?'} needs no reply")
        if duplicate:
            stream = self.streams.by_msgid(payload.msgid, now)
            frame = stream_frame(stream.id, stream.content, stream.finish) if stream else None
            return BotReply(None, frame, "duplicate msgid")
        stream = self.streams.open(payload.msgid, now, self.ack_text)
        message = payload.inbound(user, now, stream.id, payload.response_url)
        return BotReply(message, stream_frame(stream.id, stream.content, False), "new message")

    def _refresh(self, payload: AibotPayload, now: datetime) -> BotReply:
        sid = payload.stream.id if payload.stream else ""
        stream = self.streams.get(sid, now) if sid else None
        if stream is None:
            # unknown or expired: close it so WeCom stops polling
            return BotReply(None, stream_frame(sid, "", True), "unknown stream")
        return BotReply(None, stream_frame(stream.id, stream.content, stream.finish), "refresh")


# ---- response_url ------------------------------------------------------------------------------


def _strip_query(url: str) -> str:
    return url.split("?", 1)[0]


class ResponseUrlClient:
    """Posts the one allowed markdown reply to a callback's response_url."""

    def __init__(
        self,
        allowed_prefix: str = "https://qyapi.weixin.qq.com/cgi-bin/aibot/response",
        *,
        session: requests.Session | None = None,
        timeout: float = 10.0,
    ) -> None:
        self.allowed_prefix = allowed_prefix
        self.session = session or requests.Session()
        self.timeout = timeout
        self._used: set[str] = set()
        self._lock = threading.Lock()

    def send_markdown(self, response_url: str, content: str) -> dict[str, Any]:
        """One POST of `{"msgtype": "markdown"}` (clipped to 20,480 bytes); raises WeComError on failure."""
        body = {"msgtype": "markdown", "markdown": {"content": clip_utf8(content, STREAM_MAX_BYTES)}}
        return self._post(response_url, body)

    def send_card(self, response_url: str, card: dict[str, Any]) -> dict[str, Any]:
        """One POST of `{"msgtype": "template_card"}` (WeCom takes it only for a 1:1 chat's response_url)."""
        return self._post(response_url, {"msgtype": "template_card", "template_card": card})

    def _post(self, response_url: str, body: dict[str, Any]) -> dict[str, Any]:
        if not response_url.startswith(self.allowed_prefix):
            raise WeComError(f"response_url {_strip_query(response_url)} is outside {self.allowed_prefix}")
        with self._lock:
            if response_url in self._used:
                raise WeComError("response_url was already used (it allows one call)")
            self._used.add(response_url)
        try:
            resp = self.session.post(response_url, json=body, timeout=self.timeout)
        except requests.RequestException as exc:
            # no retry: the URL allows one call and we cannot know whether this one landed
            raise WeComError(f"response_url call failed: {type(exc).__name__}", retryable=False) from None
        if resp.status_code != 200:
            raise WeComError(
                f"response_url answered HTTP {resp.status_code}", retryable=resp.status_code >= 500
            )
        try:
            data = resp.json()
        except ValueError:
            raise WeComError("response_url answered non-JSON") from None
        errcode = int(data.get("errcode", 0) or 0)
        if errcode:
            raise WeComError(
                f"response_url refused: errcode {errcode} {excerpt(str(data.get('errmsg', '')), response_url)}",
                errcode=errcode,
            )
        return dict(data)
