"""The durable inbox every chat channel shares: message de-duplication, and messages waiting for a worker.

The inbox row of a message is created by `seen()` (insert-if-absent on the `channel:msgid` key, so a
retry of the platform landing on any replica, before or after a restart, is recognised), filled by
`enqueue()` with the message and a lease (`xihe.agent.lease`) for this replica, and taken by exactly
one worker through `claim()`, a conditional UPDATE. A replica that died with messages still queued
loses its lease, and a message that did not fit a replica's memory is released at once; `reclaim()`
on any replica picks them up. Once a worker has claimed a message it is never handed
out again: the task it creates is durable, and `resume_orphans` finishes that instead.

A channel gives its message type and how it is stored (`encode`/`decode`). The table keeps the name
`wecom_inbox` it had when WeCom was the only channel; its keys are `<channel>:<msgid>`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, Generic, Protocol, TypeVar

from sqlalchemy import Engine, and_, delete, func, insert, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite

from xihe.agent import lease
from xihe.agent.wecom_tables import wecom_inbox


class ChatMessage(Protocol):
    """What the shared machinery reads of a verified inbound message."""

    @property
    def dedupe_key(self) -> str: ...  # `<channel>:<msgid>`: the same message twice has the same key

    @property
    def user(self) -> str: ...  # the verified sender

    @property
    def conversation(self) -> str: ...  # where the answer goes (`<channel>:...`)

    @property
    def text(self) -> str: ...

    @property
    def channel(self) -> str: ...  # the metrics label, e.g. `wecom_app`


M = TypeVar("M", bound=ChatMessage)


def insert_ignore(engine: Engine, table: Any, values: dict[str, Any]) -> bool:
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


class Inbox(Generic[M]):
    """The inbox (and MsgId store) on the shared database; safe with several replicas."""

    def __init__(
        self, engine: Engine, encode: Callable[[M], dict[str, Any]], decode: Callable[[dict[str, Any]], M]
    ) -> None:
        self.engine = engine
        self.encode = encode
        self.decode = decode

    def seen(self, key: str, now: datetime) -> bool:
        """Atomically insert `key` if absent; return True when it was already present."""
        return not insert_ignore(self.engine, wecom_inbox, {"key": key, "seen_at": now, "status": "seen"})

    def forget(self, key: str) -> None:
        """Remove `key` so the platform's retry is processed again (dispatch itself failed)."""
        with self.engine.begin() as conn:
            conn.execute(delete(wecom_inbox).where(wecom_inbox.c.key == key))

    def enqueue(
        self, message: M, holder: str, now: datetime, ttl: timedelta, lane: str | None = None
    ) -> None:
        """Store the message as queued for `lane`, leased to `holder` until `now + ttl`."""
        row = wecom_inbox.c.key == message.dedupe_key
        payload = self.encode(message)
        with self.engine.begin() as conn:
            conn.execute(
                lease.claim(wecom_inbox, row, holder, now, ttl, status="queued", payload=payload, lane=lane)
            )

    def claim(self, key: str, holder: str, now: datetime, ttl: timedelta) -> M | None:
        """Take a queued message for handling (ours, or one nobody holds); None if taken."""
        queued = and_(wecom_inbox.c.key == key, wecom_inbox.c.status == "queued")
        with self.engine.begin() as conn:
            if (
                conn.execute(lease.claim(wecom_inbox, queued, holder, now, ttl, status="handling")).rowcount
                != 1
            ):
                return None
            payload = conn.execute(select(wecom_inbox.c.payload).where(wecom_inbox.c.key == key)).scalar_one()
        return self.decode(payload)

    def done(self, key: str, now: datetime) -> None:
        """The message was handled; its payload (which may hold a reply capability) is dropped."""
        with self.engine.begin() as conn:
            conn.execute(
                update(wecom_inbox)
                .where(wecom_inbox.c.key == key)
                .values(status="done", payload=None, finished_at=now, **lease.released())
            )

    def reclaim(
        self, holder: str, now: datetime, ttl: timedelta, limit: int = 50, lane: str | None = None
    ) -> list[M]:
        """Queued messages nobody holds (their replica died, or let them go), leased to `holder`, oldest
        first; with `lane`, only that lane's (and those queued before lanes were stored)."""
        where = wecom_inbox.c.status == "queued"
        if lane is not None:
            where = and_(where, or_(wecom_inbox.c.lane == lane, wecom_inbox.c.lane.is_(None)))
        with self.engine.begin() as conn:
            rows = lease.claim_batch(
                conn,
                wecom_inbox,
                holder,
                now,
                ttl,
                where=where,
                order_by=(wecom_inbox.c.seen_at, wecom_inbox.c.key),
                limit=limit,
            )
        return [self.decode(r.payload) for r in sorted(rows, key=lambda r: (r.seen_at, r.key))]

    def release(self, holder: str) -> int:
        """Let other replicas take our queued messages at once (graceful shutdown)."""
        with self.engine.begin() as conn:
            return int(
                conn.execute(lease.release(wecom_inbox, wecom_inbox.c.status == "queued", holder)).rowcount
            )

    def release_one(self, key: str, holder: str, lane: str | None = None) -> None:
        """Let any replica take this queued message at its next reclaim (our memory queue is full);
        `lane` records which lane it waits for (a row queued before lanes were stored has none)."""
        queued = and_(wecom_inbox.c.key == key, wecom_inbox.c.status == "queued")
        values = {} if lane is None else {"lane": lane}
        with self.engine.begin() as conn:
            conn.execute(lease.release(wecom_inbox, queued, holder, **values))

    def queued(self) -> int:
        """How many messages wait for a worker (all replicas)."""
        with self.engine.connect() as conn:
            return int(
                conn.execute(
                    select(func.count()).select_from(wecom_inbox).where(wecom_inbox.c.status == "queued")
                ).scalar_one()
            )
