"""The durable outbox: one row per notification key; inserting a key twice is a no-op.

Rows are claimed with a lease (`xihe.agent.lease`) so two senders (replicas) never send the same row
at once, and a crashed sender's claim is taken back once its lease lapses; the sender renews the
lease just before each send. `sql.outbox.SqlOutbox` backs it with table `alert_outbox` (claims: a conditional
`UPDATE … RETURNING` on SQLite, `SELECT … FOR UPDATE SKIP LOCKED` on PostgreSQL).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Protocol

from xihe.agent.alerts.model import Notification
from xihe.agent.held import is_held


@dataclass(frozen=True)
class OutboxRow:
    """One message waiting for (or done with) delivery."""

    key: str
    kind: str
    tier: str
    channel: str
    subject: str
    text: str
    created_at: datetime
    due_at: datetime
    status: str = "pending"  # pending | sent
    attempts: int = 0
    lease_owner: str = ""
    lease_until: datetime | None = None
    last_error: str = ""
    sent_at: datetime | None = None
    sent_via: str = ""  # robot | email
    force_email: bool = False  # the robot refused the content itself (40058, 40008, 44004)
    to_user: str = ""  # an escalation page: an app channel sends it to this person only (the robot @s them)

    @classmethod
    def of(cls, n: Notification) -> OutboxRow:
        """A pending row for a notification, due at once."""
        return cls(
            n.key, n.kind.value, n.tier.value, n.channel, n.subject, n.text, n.created_at, n.created_at
        )


class Outbox(Protocol):
    """Durable queue of notifications keyed by notification key."""

    def add(self, row: OutboxRow) -> bool:
        """Insert; False (and no change) when the key exists already."""

    def claim(self, now: datetime, owner: str, lease: timedelta, limit: int) -> list[OutboxRow]:
        """Lease up to `limit` pending rows due at `now` (oldest due first) to `owner`."""

    def mark_sent(self, key: str, owner: str, now: datetime, via: str) -> bool:
        """Record delivery; False when `owner` no longer holds the lease (someone else took over)."""

    def mark_failed(
        self, key: str, owner: str, now: datetime, error: str, retry_at: datetime, force_email: bool = False
    ) -> bool:
        """Count a failed attempt, release the lease, retry at `retry_at`."""

    def release(self, key: str, owner: str, due_at: datetime) -> None:
        """Give a claimed row back untried (e.g. rate limit), due again at `due_at`."""

    def renew(self, key: str, owner: str, now: datetime, lease: timedelta) -> bool:
        """Extend `owner`'s live lease to `now + lease`; False when `owner` no longer holds the row."""

    def get(self, key: str) -> OutboxRow | None:
        """One row."""

    def rows(self) -> list[OutboxRow]:
        """Every row, in insertion order."""


class InMemoryOutbox:
    """Outbox in a dict (insertion ordered)."""

    def __init__(self) -> None:
        self._rows: dict[str, OutboxRow] = {}
        self._pending: dict[str, None] = {}  # keys not yet sent, so claims skip the sent history

    def add(self, row: OutboxRow) -> bool:
        """Insert unless present."""
        if row.key in self._rows:
            return False
        self._rows[row.key] = row
        self._pending[row.key] = None
        return True

    def claim(self, now: datetime, owner: str, lease: timedelta, limit: int) -> list[OutboxRow]:
        """Lease due pending rows."""
        rows = (self._rows[k] for k in self._pending)
        due = [r for r in rows if r.due_at <= now and not is_held(r.lease_until, now)]
        due.sort(key=lambda r: (r.due_at, r.created_at))
        out = []
        for r in due[:limit]:
            claimed = replace(r, lease_owner=owner, lease_until=now + lease)
            self._rows[r.key] = claimed
            out.append(claimed)
        return out

    def _held(self, key: str, owner: str) -> OutboxRow | None:
        r = self._rows.get(key)
        return r if r is not None and r.lease_owner == owner and r.status == "pending" else None

    def mark_sent(self, key: str, owner: str, now: datetime, via: str) -> bool:
        """Record delivery if `owner` still holds the row."""
        r = self._held(key, owner)
        if r is None:
            return False
        self._rows[key] = replace(
            r,
            status="sent",
            sent_at=now,
            sent_via=via,
            attempts=r.attempts + 1,
            lease_owner="",
            lease_until=None,
        )
        self._pending.pop(key, None)
        return True

    def mark_failed(
        self, key: str, owner: str, now: datetime, error: str, retry_at: datetime, force_email: bool = False
    ) -> bool:
        """Count a failure and reschedule."""
        r = self._held(key, owner)
        if r is None:
            return False
        self._rows[key] = replace(
            r,
            attempts=r.attempts + 1,
            last_error=error,
            due_at=retry_at,
            lease_owner="",
            lease_until=None,
            force_email=r.force_email or force_email,
        )
        return True

    def release(self, key: str, owner: str, due_at: datetime) -> None:
        """Unclaim without counting an attempt."""
        r = self._held(key, owner)
        if r is not None:
            self._rows[key] = replace(r, due_at=due_at, lease_owner="", lease_until=None)

    def renew(self, key: str, owner: str, now: datetime, lease: timedelta) -> bool:
        """Extend the lease if `owner` still holds the row at `now`."""
        r = self._held(key, owner)
        if r is None or not is_held(r.lease_until, now):
            return False
        self._rows[key] = replace(r, lease_until=now + lease)
        return True

    def get(self, key: str) -> OutboxRow | None:
        """One row."""
        return self._rows.get(key)

    def rows(self) -> list[OutboxRow]:
        """All rows."""
        return list(self._rows.values())

    def next_due(self) -> datetime | None:
        """Earliest due time of a pending row (simulation helper)."""
        if not self._pending:  # the common case in a replay: everything sent
            return None
        pending = [self._rows[k].due_at for k in self._pending]
        return min(pending) if pending else None
