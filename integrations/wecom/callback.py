"""Self-built app callbacks: GET URL verification and encrypted XML POSTs.

Order of checks on a POST (cheapest first, nothing dispatched until all pass): body size → UTF-8 →
outer XML (defusedxml, no DTD at all, so no entities, billion laughs or external references) →
timestamp window → signature over `Encrypt` → decrypt + receiveid → inner XML → MsgId de-dupe.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from datetime import datetime
from xml.etree.ElementTree import Element

import defusedxml.ElementTree as DET
from defusedxml import DefusedXmlException

from xihe.agent.cards import command_of_key
from xihe.integrations.wecom.crypto import MsgCrypto
from xihe.integrations.wecom.inbound import (
    CHANNEL_APP,
    Accepted,
    Duplicate,
    Echo,
    InboundMessage,
    MsgIdStore,
    Rejected,
    check_body,
    open_ciphertext,
    signed_params,
    verify_url,
)


def parse_xml(text: str | bytes, what: str) -> Element | Rejected:
    """Parse untrusted XML with defusedxml, refusing any DTD."""
    try:
        return DET.fromstring(text, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    except DefusedXmlException as exc:
        return Rejected(400, f"{what}: forbidden XML construct ({type(exc).__name__})")
    except (ET.ParseError, ValueError) as exc:
        return Rejected(400, f"{what}: malformed XML ({exc})")


def _text(root: Element, tag: str) -> str:
    node = root.find(tag)
    return (node.text or "").strip() if node is not None else ""


def parse_app_message(plaintext: bytes) -> InboundMessage | Rejected:
    """Turn decrypted app XML into an InboundMessage (events keyed by FromUserName+CreateTime)."""
    try:
        text = plaintext.decode("utf-8")
    except UnicodeDecodeError:
        return Rejected(400, "decrypted message is not UTF-8")
    root = parse_xml(text, "decrypted message")
    if isinstance(root, Rejected):
        return root
    user = _text(root, "FromUserName")
    msg_type = _text(root, "MsgType")
    create_time = _text(root, "CreateTime")
    if not user or not msg_type or not create_time.isdigit():
        return Rejected(400, "decrypted message lacks FromUserName, MsgType or CreateTime")
    agent_id = _text(root, "AgentID")
    event = _text(root, "Event") if msg_type == "event" else ""
    msg_id = _text(root, "MsgId")
    if event == "template_card_event":
        return _card_click(root, user, int(create_time), agent_id)
    if not msg_id:
        if msg_type != "event":
            return Rejected(400, "decrypted message lacks MsgId")
        msg_id = f"event:{user}:{create_time}"  # WeCom: de-dupe events by FromUserName + CreateTime
    if msg_type == "text":
        node = root.find("Content")
        body = (node.text or "") if node is not None else ""  # the user's own whitespace kept
    else:
        body = _text(root, "Recognition")  # voice: WeCom's transcription, when enabled
    return InboundMessage(
        user=user,
        conversation=f"wecom:app:{agent_id}:{user}",
        text=body,
        msg_id=msg_id,
        create_time=int(create_time),
        agent_id=agent_id,
        channel=CHANNEL_APP,
        msg_type=msg_type,
        event=event,
    )


def _card_click(root: Element, user: str, create_time: int, agent_id: str) -> InboundMessage:
    """A button click on one of our cards: the typed command its key stands for.

    The event has no MsgId and WeCom re-sends the identical event when we answer late, so it is
    de-duplicated on FromUserName + CreateTime + TaskId + EventKey; a key that is not ours gives an
    empty text (answered as "not a text message").
    """
    key, task_id = _text(root, "EventKey"), _text(root, "TaskId")
    return InboundMessage(
        user=user,
        conversation=f"wecom:app:{agent_id}:{user}",
        text=command_of_key(key) or "",
        msg_id=f"event:{user}:{create_time}:{task_id}:{key}",
        create_time=create_time,
        agent_id=agent_id,
        channel=CHANNEL_APP,
        msg_type="event",
        event="template_card_event",
        card_task=task_id,
        response_code=_text(root, "ResponseCode"),
    )


class AppCallback:
    """Verifies, decrypts and de-duplicates self-built app callbacks; does no I/O besides the store."""

    def __init__(
        self,
        crypto: MsgCrypto,
        store: MsgIdStore,
        *,
        window_seconds: int = 300,
        max_body_bytes: int = 65536,
        agent_id: int | None = None,
    ) -> None:
        self.crypto = crypto
        self.store = store
        self.window_seconds = window_seconds
        self.max_body_bytes = max_body_bytes
        self.agent_id = agent_id

    def verify(self, query: Mapping[str, str], now: datetime) -> Echo | Rejected:
        """GET: answer the decrypted echostr."""
        return verify_url(query, self.crypto, now, self.window_seconds)

    def receive(
        self, query: Mapping[str, str], body: bytes, content_type: str, now: datetime
    ) -> Accepted | Duplicate | Rejected:
        """POST: every check, then the atomic MsgId insert; Accepted only for a first delivery."""
        signed = signed_params(query)
        if isinstance(signed, Rejected):
            return signed
        text = check_body(body, content_type, self.max_body_bytes)
        if isinstance(text, Rejected):
            return text
        outer = parse_xml(text, "callback body")
        if isinstance(outer, Rejected):
            return outer
        encrypt = _text(outer, "Encrypt")
        if not encrypt:
            return Rejected(400, "callback body has no Encrypt element")
        plain = open_ciphertext(self.crypto, signed, encrypt, now, self.window_seconds)
        if isinstance(plain, Rejected):
            return plain
        message = parse_app_message(plain)
        if isinstance(message, Rejected):
            return message
        if self.agent_id is not None and message.agent_id and message.agent_id != str(self.agent_id):
            return Rejected(403, f"message is for AgentID {message.agent_id}, not this app")
        if self.store.seen(message.dedupe_key, now):
            return Duplicate(message.dedupe_key, message)
        return Accepted(message)
