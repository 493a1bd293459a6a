"""Outbox over table alert_outbox; claims are leases (`xihe.agent.lease`: SKIP LOCKED on PostgreSQL,
a conditional UPDATE on SQLite).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, func, select

from xihe.agent import lease
from xihe.agent.alert_tables import alert_outbox
from xihe.agent.alerts.outbox import OutboxRow
from xihe.agent.alerts.sql.stores import SqlAlertStores

_O = alert_outbox.c


def _outbox_row(r: Any) -> OutboxRow:
    m = r._mapping
    return OutboxRow(
        key=m["key"],
        kind=m["kind"],
        tier=m["tier"],
        channel=m["channel"],
        subject=m["subject"],
        text=m["text"],
        created_at=m["created_at"],
        due_at=m["due_at"],
        status=m["status"],
        attempts=m["attempts"],
        lease_owner=m["lease_owner"] or "",
        lease_until=m["lease_until"],
        last_error=m["last_error"] or "",
        sent_at=m["sent_at"],
        sent_via=m["sent_via"] or "",
        force_email=bool(m["force_email"]),
        to_user=m["to_user"] or "",
    )


class SqlOutbox:
    """Outbox over table alert_outbox; the key is unique, so a second add of a key is a no-op."""

    def __init__(self, stores: SqlAlertStores) -> None:
        self.s = stores

    def add(self, row: OutboxRow) -> bool:
        """Insert; False (and no change) when the key exists already."""
        stmt = (
            self.s.insert(alert_outbox)
            .values(
                key=row.key,
                kind=row.kind,
                tier=row.tier,
                channel=row.channel,
                subject=row.subject,
                text=row.text,
                created_at=row.created_at,
                due_at=row.due_at,
                status=row.status,
                attempts=row.attempts,
                last_error="",
                sent_via="",
                force_email=row.force_email,
                to_user=row.to_user or None,
            )
            .on_conflict_do_nothing(index_elements=["key"])
            .returning(_O.id)  # rowcount is not reliable for INSERT … ON CONFLICT with RETURNING ids
        )
        with self.s.tx() as conn:
            return conn.execute(stmt).first() is not None

    def claim(self, now: datetime, owner: str, lease_for: timedelta, limit: int) -> list[OutboxRow]:
        """Lease up to `limit` due pending rows nobody holds to `owner`, oldest due first."""
        due = and_(_O.status == "pending", _O.due_at <= now)
        order = (_O.due_at, _O.created_at, _O.id)
        with self.s.tx() as conn:
            rows = lease.claim_batch(
                conn, alert_outbox, owner, now, lease_for, where=due, order_by=order, limit=limit
            )
        out = [_outbox_row(r) for r in rows]
        out.sort(key=lambda r: (r.due_at, r.created_at))
        return out

    def _pending(self, key: str) -> Any:
        return and_(_O.key == key, _O.status == "pending")

    def mark_sent(self, key: str, owner: str, now: datetime, via: str) -> bool:
        """Record delivery; False when `owner` no longer holds the lease."""
        values = {"status": "sent", "sent_at": now, "sent_via": via, "attempts": _O.attempts + 1}
        with self.s.tx() as conn:
            n = conn.execute(lease.release(alert_outbox, self._pending(key), owner, **values)).rowcount
        return bool(n == 1)

    def mark_failed(
        self, key: str, owner: str, now: datetime, error: str, retry_at: datetime, force_email: bool = False
    ) -> bool:
        """Count a failed attempt, release the lease, retry at `retry_at`."""
        values: dict[str, Any] = {"attempts": _O.attempts + 1, "last_error": error[:2000], "due_at": retry_at}
        if force_email:
            values["force_email"] = True
        with self.s.tx() as conn:
            n = conn.execute(lease.release(alert_outbox, self._pending(key), owner, **values)).rowcount
        return bool(n == 1)

    def release(self, key: str, owner: str, due_at: datetime) -> None:
        """Give a claimed row back untried, due again at `due_at`."""
        with self.s.tx() as conn:
            conn.execute(lease.release(alert_outbox, self._pending(key), owner, due_at=due_at))

    def renew(self, key: str, owner: str, now: datetime, lease_for: timedelta) -> bool:
        """Extend `owner`'s live lease to `now + lease_for`; False when it no longer holds the row."""
        with self.s.tx() as conn:
            n = conn.execute(lease.renew(alert_outbox, self._pending(key), owner, now, lease_for)).rowcount
        return bool(n == 1)

    def get(self, key: str) -> OutboxRow | None:
        """One row."""
        with self.s.tx() as conn:
            r = conn.execute(select(alert_outbox).where(_O.key == key)).first()
        return _outbox_row(r) if r is not None else None

    def rows(self) -> list[OutboxRow]:
        """Every row, in insertion order."""
        with self.s.tx() as conn:
            return [_outbox_row(r) for r in conn.execute(select(alert_outbox).order_by(_O.id))]

    def recent(self, limit: int) -> list[OutboxRow]:
        """The newest rows first (the web pages)."""
        with self.s.tx() as conn:
            q = select(alert_outbox).order_by(_O.id.desc()).limit(limit)
            return [_outbox_row(r) for r in conn.execute(q)]

    def next_due(self) -> datetime | None:
        """Earliest due time of a pending row."""
        with self.s.tx() as conn:
            due: datetime | None = conn.execute(
                select(func.min(_O.due_at)).where(_O.status == "pending")
            ).scalar()
        return due

    def pending_count(self) -> int:
        """Rows not yet sent (the queue-depth gauge)."""
        with self.s.tx() as conn:
            n: int = conn.execute(select(func.count()).where(_O.status == "pending")).scalar() or 0
        return n
