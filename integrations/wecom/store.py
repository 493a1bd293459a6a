"""Durable WeCom state shared by every replica: WeCom messages in the shared inbox (MsgId
de-duplication + messages waiting for a worker: `xihe.agent.inbox`) and the AI bot's streams.
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine, and_, select, update

from xihe.agent.inbox import Inbox, insert_ignore
from xihe.agent.wecom_tables import wecom_stream
from xihe.integrations.wecom.aibot import STREAM_MAX_BYTES, Stream, clip_utf8
from xihe.integrations.wecom.inbound import InboundMessage


def message_to_json(message: InboundMessage) -> dict[str, Any]:
    """The inbox payload of a message."""
    return dataclasses.asdict(message)


def message_from_json(data: dict[str, Any]) -> InboundMessage:
    """The message back from its inbox payload."""
    return InboundMessage(**data)


class SqlMsgIdStore(Inbox[InboundMessage]):
    """The shared inbox (`xihe.agent.inbox.Inbox`) holding WeCom messages; safe with several replicas."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine, message_to_json, message_from_json)


def _stream(row: Any) -> Stream:
    return Stream(row.id, row.msgid, row.content, bool(row.finish), row.created_at, row.updated_at)


class SqlStreamRegistry:
    """AI-bot streams in the shared database, so a refresh callback on any replica sees the latest frame."""

    def __init__(
        self, engine: Engine, ttl: timedelta = timedelta(minutes=6), new_id: Callable[[], str] | None = None
    ) -> None:
        self.engine = engine
        self.ttl = ttl
        self._new_id = new_id or (lambda: secrets.token_hex(12))

    def _live(self, now: datetime) -> Any:
        return wecom_stream.c.created_at >= now - self.ttl

    def open(self, msgid: str, now: datetime, content: str = "") -> Stream:
        """Start the stream for `msgid`, or return the one already started for it (on any replica)."""
        insert_ignore(
            self.engine,
            wecom_stream,
            {
                "id": self._new_id(),
                "msgid": msgid,
                "content": clip_utf8(content, STREAM_MAX_BYTES),
                "finish": False,
                "created_at": now,
                "updated_at": now,
            },
        )
        with self.engine.connect() as conn:
            return _stream(conn.execute(select(wecom_stream).where(wecom_stream.c.msgid == msgid)).one())

    def get(self, stream_id: str, now: datetime) -> Stream | None:
        """The stream's latest state, or None when unknown or expired."""
        with self.engine.connect() as conn:
            row = conn.execute(
                select(wecom_stream).where(and_(wecom_stream.c.id == stream_id, self._live(now)))
            ).first()
        return _stream(row) if row else None

    def by_msgid(self, msgid: str, now: datetime) -> Stream | None:
        """The stream opened for `msgid`, if still live."""
        with self.engine.connect() as conn:
            row = conn.execute(
                select(wecom_stream).where(and_(wecom_stream.c.msgid == msgid, self._live(now)))
            ).first()
        return _stream(row) if row else None

    def update(self, stream_id: str, content: str, now: datetime, *, finish: bool = False) -> bool:
        """Set the full text so far (clipped); False when the stream is gone, expired or finished."""
        with self.engine.begin() as conn:
            return bool(
                conn.execute(
                    update(wecom_stream)
                    .where(and_(wecom_stream.c.id == stream_id, ~wecom_stream.c.finish, self._live(now)))
                    .values(content=clip_utf8(content, STREAM_MAX_BYTES), finish=finish, updated_at=now)
                ).rowcount
            )

    def append(self, stream_id: str, text: str, now: datetime, *, finish: bool = False) -> bool:
        """Add `text` to the stream's content (progress lines)."""
        stream = self.get(stream_id, now)
        if stream is None:
            return False
        return self.update(stream_id, stream.content + text, now, finish=finish)

    def attach(self, stream_id: str, conversation: str, response_url: str) -> None:
        """Remember which conversation the stream answers and its one-shot response_url."""
        with self.engine.begin() as conn:
            conn.execute(
                update(wecom_stream)
                .where(wecom_stream.c.id == stream_id)
                .values(conversation=conversation, response_url=response_url)
            )

    def open_for(self, conversation: str, now: datetime) -> Stream | None:
        """The newest live, unfinished stream of a conversation (where progress lines go)."""
        with self.engine.connect() as conn:
            row = conn.execute(
                select(wecom_stream)
                .where(
                    and_(wecom_stream.c.conversation == conversation, ~wecom_stream.c.finish, self._live(now))
                )
                .order_by(wecom_stream.c.created_at.desc())
                .limit(1)
            ).first()
        return _stream(row) if row else None

    def take_response_url(self, conversation: str, now: datetime, max_age: timedelta) -> str | None:
        """Claim the newest unused response_url of a conversation (each may be used once, by one replica)."""
        fresh = and_(
            wecom_stream.c.conversation == conversation,
            wecom_stream.c.response_url != "",
            ~wecom_stream.c.response_used,
            wecom_stream.c.created_at >= now - max_age,
        )
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(wecom_stream.c.id, wecom_stream.c.response_url)
                .where(fresh)
                .order_by(wecom_stream.c.created_at.desc())
                .limit(3)
            ).all()
        for sid, url in rows:
            with self.engine.begin() as conn:
                if conn.execute(
                    update(wecom_stream)
                    .where(and_(wecom_stream.c.id == sid, ~wecom_stream.c.response_used))
                    .values(response_used=True)
                ).rowcount:
                    return str(url)
        return None
