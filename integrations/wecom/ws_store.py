"""The long connection's durable state, shared by every replica: who holds the AI bot's connection
(`WsLease`, renewed on every heartbeat) and the frames left for that holder to send (`WsOutbox`).

WeCom keeps one connection per bot, so two replicas must never both connect: the lease decides
which one does. A replica without the connection that has something to say (a DS run finishing
there, another user's /approve) leaves the frame in the outbox; the holder drains it in order.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine, and_, delete, insert, select, update

from xihe.agent import lease
from xihe.agent.inbox import insert_ignore
from xihe.agent.wecom_tables import wecom_ws_lease, wecom_ws_outbox


class WsLease:
    """Who holds the bot's connection: a lease (`xihe.agent.lease`) on one row, safe with several replicas."""

    def __init__(self, engine: Engine, name: str) -> None:
        self.engine = engine
        self.name = name
        self.row = wecom_ws_lease.c.name == name

    def acquire(self, holder: str, now: datetime, ttl: timedelta) -> bool:
        """Take or renew the lease when it is ours or free; True when we hold it until now + ttl."""
        insert_ignore(self.engine, wecom_ws_lease, {"name": self.name, "acquired_at": now})  # a free row
        if self.renew(holder, now, ttl):
            return True
        with self.engine.begin() as conn:
            return bool(
                conn.execute(
                    lease.claim(wecom_ws_lease, self.row, holder, now, ttl, acquired_at=now)
                ).rowcount
            )

    def renew(self, holder: str, now: datetime, ttl: timedelta) -> bool:
        """Extend our lease; False when we no longer hold it (it lapsed, or another replica took over)."""
        with self.engine.begin() as conn:
            return bool(conn.execute(lease.renew(wecom_ws_lease, self.row, holder, now, ttl)).rowcount)

    def release(self, holder: str) -> bool:
        """Let another replica take over at once (graceful stop)."""
        with self.engine.begin() as conn:
            return bool(conn.execute(lease.release(wecom_ws_lease, self.row, holder)).rowcount)

    def holder(self, now: datetime) -> str | None:
        """The replica holding a live lease, if any."""
        with self.engine.connect() as conn:
            row = conn.execute(
                select(wecom_ws_lease.c.lease_owner, wecom_ws_lease.c.lease_until).where(self.row)
            ).first()
        return str(row.lease_owner) if row is not None and lease.is_held(row.lease_until, now) else None


class WsOutbox:
    """Frames waiting for the replica that holds the connection; sent in insertion order."""

    def __init__(self, engine: Engine, name: str) -> None:
        self.engine = engine
        self.name = name

    def put(self, frame: dict[str, Any], now: datetime) -> None:
        """Leave a frame for the holder."""
        with self.engine.begin() as conn:
            conn.execute(insert(wecom_ws_outbox).values(name=self.name, frame=frame, created_at=now))

    def pending(self, limit: int = 50) -> list[tuple[int, dict[str, Any]]]:
        """The oldest unsent frames."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(wecom_ws_outbox.c.id, wecom_ws_outbox.c.frame)
                .where(and_(wecom_ws_outbox.c.name == self.name, wecom_ws_outbox.c.sent_at.is_(None)))
                .order_by(wecom_ws_outbox.c.id)
                .limit(limit)
            ).all()
        return [(int(r.id), dict(r.frame)) for r in rows]

    def mark_sent(self, row_id: int, now: datetime) -> None:
        """The frame went out."""
        with self.engine.begin() as conn:
            conn.execute(update(wecom_ws_outbox).where(wecom_ws_outbox.c.id == row_id).values(sent_at=now))

    def prune(self, before: datetime) -> int:
        """Forget frames sent before `before`."""
        with self.engine.begin() as conn:
            return int(
                conn.execute(
                    delete(wecom_ws_outbox).where(
                        and_(wecom_ws_outbox.c.name == self.name, wecom_ws_outbox.c.sent_at < before)
                    )
                ).rowcount
            )
