"""Durable WeCom state shared by every replica: the inbox (MsgId de-duplication + messages waiting for a
worker) and the AI bot's streams.

The inbox row of a message is created by `seen()` (insert-if-absent on the `channel:msgid` key, so a
WeCom retry landing on any replica, before or after a restart, is recognised), filled by `enqueue()`
with the message and a lease for this replica, and taken by exactly one worker through `claim()`, a
conditional UPDATE. A replica that died with messages still queued loses its lease; `reclaim()` on
another replica picks them up. Once a worker has claimed a message it is never handed out again:
the task it creates is durable, and `resume_orphans` finishes that instead.
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine, and_, delete, insert, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite

from xihe.agent.schema import wecom_inbox, wecom_stream
from xihe.integrations.wecom.aibot import STREAM_MAX_BYTES, Stream, clip_utf8
from xihe.integrations.wecom.inbound import InboundMessage


def _insert_ignore(engine: Engine, table: Any, values: dict[str, Any]) -> bool:
    """Insert unless the primary/unique key exists; True when a row was inserted."""
    stmt: Any
    if engine.dialect.name == "postgresql":
        stmt = postgresql.insert(table).values(**values).on_conflict_do_nothing()
    elif engine.dialect.name == "sqlite":
        stmt = sqlite.insert(table).values(**values).on_conflict_do_nothing()
    else:  # pragma: no cover - only SQLite and PostgreSQL are supported
        stmt = insert(table).values(**values)
    pk = next(iter(table.primary_key.columns))
    with engine.begin() as conn:
        # RETURNING tells inserted from skipped on both back ends (psycopg's rowcount does not here)
        return conn.execute(stmt.returning(pk)).first() is not None


def message_to_json(message: InboundMessage) -> dict[str, Any]:
    """The inbox payload of a message."""
    return dataclasses.asdict(message)


def message_from_json(data: dict[str, Any]) -> InboundMessage:
    """The message back from its inbox payload."""
    return InboundMessage(**data)


class SqlMsgIdStore:
    """A MsgIdStore (and inbox) on the shared database; safe with several replicas."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def seen(self, key: str, now: datetime) -> bool:
        """Atomically insert `key` if absent; return True when it was already present."""
        return not _insert_ignore(self.engine, wecom_inbox, {"key": key, "seen_at": now, "status": "seen"})

    def forget(self, key: str) -> None:
        """Remove `key` so WeCom's retry is processed again (dispatch itself failed)."""
        with self.engine.begin() as conn:
            conn.execute(delete(wecom_inbox).where(wecom_inbox.c.key == key))

    def enqueue(self, message: InboundMessage, holder: str, now: datetime, lease: timedelta) -> None:
        """Store the message as queued for `holder` until `now + lease`."""
        with self.engine.begin() as conn:
            conn.execute(
                update(wecom_inbox)
                .where(wecom_inbox.c.key == message.dedupe_key)
                .values(
                    status="queued",
                    payload=message_to_json(message),
                    holder=holder,
                    lease_expires_at=now + lease,
                )
            )

    def claim(self, key: str, holder: str, now: datetime) -> InboundMessage | None:
        """Take a queued message for handling (ours, or anyone's whose lease lapsed); None if taken."""
        ours_or_free = or_(wecom_inbox.c.holder == holder, wecom_inbox.c.lease_expires_at < now)
        with self.engine.begin() as conn:
            got = conn.execute(
                update(wecom_inbox)
                .where(and_(wecom_inbox.c.key == key, wecom_inbox.c.status == "queued", ours_or_free))
                .values(status="handling", holder=holder)
            ).rowcount
            if got != 1:
                return None
            payload = conn.execute(select(wecom_inbox.c.payload).where(wecom_inbox.c.key == key)).scalar_one()
        return message_from_json(payload)

    def done(self, key: str, now: datetime) -> None:
        """The message was handled; its payload (which may hold a response_url) is dropped."""
        with self.engine.begin() as conn:
            conn.execute(
                update(wecom_inbox)
                .where(wecom_inbox.c.key == key)
                .values(status="done", payload=None, finished_at=now, lease_expires_at=None)
            )

    def reclaim(self, holder: str, now: datetime, lease: timedelta, limit: int = 50) -> list[str]:
        """Queued messages whose holder's lease lapsed, re-leased to `holder`; their keys."""
        lapsed = and_(wecom_inbox.c.status == "queued", wecom_inbox.c.lease_expires_at < now)
        with self.engine.connect() as conn:
            keys = list(
                conn.execute(
                    select(wecom_inbox.c.key).where(lapsed).order_by(wecom_inbox.c.seen_at).limit(limit)
                ).scalars()
            )
        taken = []
        for key in keys:
            with self.engine.begin() as conn:
                if conn.execute(
                    update(wecom_inbox)
                    .where(and_(wecom_inbox.c.key == key, lapsed))
                    .values(holder=holder, lease_expires_at=now + lease)
                ).rowcount:
                    taken.append(key)
        return taken

    def release(self, holder: str, now: datetime) -> int:
        """Let other replicas take our queued messages at once (graceful shutdown)."""
        with self.engine.begin() as conn:
            return int(
                conn.execute(
                    update(wecom_inbox)
                    .where(and_(wecom_inbox.c.status == "queued", wecom_inbox.c.holder == holder))
                    .values(lease_expires_at=now - timedelta(seconds=1))
                ).rowcount
            )

    def release_one(self, key: str, now: datetime) -> None:
        """Let any replica take this queued message at its next reclaim (our memory queue is full)."""
        with self.engine.begin() as conn:
            conn.execute(
                update(wecom_inbox)
                .where(and_(wecom_inbox.c.key == key, wecom_inbox.c.status == "queued"))
                .values(lease_expires_at=now - timedelta(seconds=1))
            )

    def queued(self) -> int:
        """How many messages wait for a worker (all replicas)."""
        from sqlalchemy import func

        with self.engine.connect() as conn:
            return int(
                conn.execute(
                    select(func.count()).select_from(wecom_inbox).where(wecom_inbox.c.status == "queued")
                ).scalar_one()
            )


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
        _insert_ignore(
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
