"""Intake of the long connection: pushed message and event frames -> the inbox and the worker path.

A message is de-duplicated by msgid in the durable inbox (across replicas), gets its answer stream
(acknowledged at once when an ack text is set) and is handed to `accept`; an `enter_chat` event is
answered with the welcome text; a card click is queued like a message (no stream: its answer is
the card's update, `aibot_respond_update_msg` within 5 s, which `on_card_click` sends). The kick (`disconnected_event`) never gets here: the connection
handles it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from xihe.agent import wecom_text
from xihe.agent.wecom_markdown import reply
from xihe.integrations.wecom.aibot import AibotPayload
from xihe.integrations.wecom.inbound import CHANNEL_AIBOT, InboundMessage, MsgIdStore
from xihe.integrations.wecom.ws_frames import RESPOND_WELCOME, make_frame, respond_frame
from xihe.integrations.wecom.ws_streams import PushingStreams

log = logging.getLogger("xihe.wecom.longconn")  # the long connection's logger, as in longconn.py


class Intake:
    """Turns pushed callbacks into inbox messages (durable msgid de-duplication across replicas)."""

    def __init__(
        self,
        inbox: MsgIdStore,
        streams: PushingStreams,
        accept: Callable[[InboundMessage], None],
        deliver: Callable[[dict[str, Any]], None],
        clock: Callable[[], datetime],
        *,
        ack_text: str = "",
        welcome_text: str = "",
        count: Callable[[str], None] = lambda outcome: None,
        on_card_click: Callable[[str, InboundMessage | None, str], None] | None = None,
    ) -> None:
        self.inbox = inbox
        self.streams = streams
        self.accept = accept
        self.deliver = deliver
        self.clock = clock
        self.ack_text = reply(ack_text)  # YAML text, shown as WeCom markdown
        self.welcome_text = wecom_text.text(welcome_text)  # a WeCom text message
        self.count = count
        self.on_card_click = on_card_click  # (task_id, the click or None when repeated, req_id)

    def on_frame(self, frame: dict[str, Any]) -> None:
        """One `aibot_msg_callback` or `aibot_event_callback` (not the kick, which the connection handles)."""
        req_id = str((frame.get("headers") or {}).get("req_id") or "")
        try:
            payload = AibotPayload.model_validate(frame.get("body") or {})
        except ValidationError as exc:
            log.warning(
                "long connection: %s frame without a valid body (%d errors)",
                frame.get("cmd"),
                exc.error_count(),
            )
            self.count("invalid")
            return
        user = payload.sender.userid if payload.sender else ""
        if not req_id or not user:
            log.warning("long connection: frame without req_id or from.userid ignored")
            self.count("invalid")
            return
        now = self.clock()
        key = f"{CHANNEL_AIBOT}:{payload.msgid}"
        click = payload.card_click()
        if self.inbox.seen(key, now):
            log.info("long connection: msgid seen before, not handled again", extra={"key": key})
            self.count("duplicate")
            if click is not None and self.on_card_click is not None:
                self.on_card_click(click[0], None, req_id)  # answered with the card as it stands
            return
        if click is not None and self.on_card_click is not None:
            message = payload.inbound(user, now, "")
            self._accept(key, message)
            self.on_card_click(click[0], message, req_id)
            self.count("card_click")
            return
        if payload.msgtype == "event":
            kind = payload.event.eventtype if payload.event else ""
            if kind == "enter_chat" and self.welcome_text:
                body = {"msgtype": "text", "text": {"content": self.welcome_text}}
                self.deliver(make_frame(RESPOND_WELCOME, req_id, body))
            self.count("event")
            return
        stream = self.streams.open_ws(payload.msgid, req_id, now, self.ack_text)
        if self.ack_text:
            self.deliver(respond_frame(req_id, stream.id, stream.content, False))
        self._accept(key, payload.inbound(user, now, stream.id))

    def _accept(self, key: str, message: InboundMessage) -> None:
        try:
            self.accept(message)
        except Exception:
            # WeCom may deliver it again; let that delivery run it
            self.inbox.forget(key)
            raise
