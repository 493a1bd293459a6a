"""SQL back ends (SQLite and PostgreSQL) of the alert Protocols, so replicas share one pipeline.

    SqlAlertStores        engine + a per-thread unit of work: `with stores.unit():` serialises
                          pipeline work across threads and processes and commits it at once
    SqlAlertStateStore    AlertStateStore   (table alert_state)
    SqlOutbox             Outbox            (alert_outbox; claims leased: SKIP LOCKED / conditional UPDATE)
    SqlMaintenanceStore   MaintenanceStore  (alert_maintenance; numbered, closed once, expiry audited once)
    SqlChannelHealth      ChannelHealthStore (alert_channel; every change one atomic statement)
    SqlRateLimiter        RateLimiter       (alert_robot; check-and-count under a row lock)
    SqlRecordSink         RecordSink        (alert_event; decisions and deliveries with their reasons)

On SQLite every writing transaction starts with a write, so it holds the database's write lock
before it reads (a read-then-write transaction would fail with SQLITE_BUSY under concurrency).
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Engine, and_, bindparam, delete, func, insert, or_, select, text, update
from sqlalchemy.dialects import postgresql, sqlite

from xihe.agent.alerts.deliver import ChannelHealth, DeliveryAttempt
from xihe.agent.alerts.maintenance import MaintenanceWindow, MaintScope
from xihe.agent.alerts.model import AlertRecord
from xihe.agent.alerts.outbox import OutboxRow
from xihe.agent.alerts.ratelimit import RateLimiter, next_free
from xihe.agent.alerts.state import Value, decode, encode
from xihe.agent.clock import Clock, utc_now
from xihe.agent.schema import (
    alert_channel,
    alert_event,
    alert_maintenance,
    alert_outbox,
    alert_robot,
    alert_state,
)

PIPELINE_LOCK = 74_262  # pg_advisory_xact_lock key of the pipeline unit of work


class SqlAlertStores:
    """The engine the alert stores share, and the unit of work they join when one is open."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.postgres = engine.dialect.name == "postgresql"
        self._local = threading.local()
        self._lock = threading.RLock()

    @contextmanager
    def unit(self) -> Iterator[Connection]:
        """One transaction for a whole feed or tick, exclusive across threads and replicas.

        State, outbox rows and records commit together, and two replicas fed the same event (say a
        webhook retried to the other one) decide one after the other, so the second sees a duplicate.
        """
        current: Connection | None = getattr(self._local, "conn", None)
        if current is not None:
            yield current
            return
        with self._lock, self.engine.begin() as conn:
            if self.postgres:
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": PIPELINE_LOCK})
            else:
                conn.exec_driver_sql("DELETE FROM alert_state WHERE 1 = 0")  # takes the write lock now
            self._local.conn = conn
            try:
                yield conn
            finally:
                self._local.conn = None

    @contextmanager
    def tx(self) -> Iterator[Connection]:
        """The open unit's connection, or a transaction of its own."""
        current: Connection | None = getattr(self._local, "conn", None)
        if current is not None:
            yield current
            return
        with self.engine.begin() as conn:
            yield conn

    def insert(self, table: Any) -> Any:
        """A dialect insert (for ON CONFLICT clauses)."""
        return postgresql.insert(table) if self.postgres else sqlite.insert(table)


# ---- pipeline state ------------------------------------------------------------------------------
class SqlAlertStateStore:
    """AlertStateStore over table alert_state."""

    def __init__(self, stores: SqlAlertStores, clock: Clock = utc_now, batch: int = 500) -> None:
        self.s = stores
        self.clock = clock  # only for updated_at, which is informational
        self.batch = batch
        # Statements built once and executed with parameters: this is the per-event hot path.
        t = alert_state.c
        upsert = stores.insert(alert_state)
        self._put = upsert.on_conflict_do_update(
            index_elements=["ns", "key"],
            set_={k: upsert.excluded[k] for k in ("payload", "due_at", "token", "updated_at")},
        )
        self._get = select(t.payload).where(t.ns == bindparam("p_ns"), t.key == bindparam("p_key"))
        self._delete = delete(alert_state).where(t.ns == bindparam("p_ns"), t.key == bindparam("p_key"))
        self._next_due = select(func.min(t.due_at))

    def get(self, ns: str, key: str) -> Value | None:
        """The record, or None."""
        with self.s.tx() as conn:
            payload = conn.execute(self._get, {"p_ns": ns, "p_key": key}).scalar()
        return decode(ns, payload) if payload is not None else None

    def put(self, ns: str, key: str, value: Value, due_at: datetime | None) -> None:
        """Insert or replace."""
        values = {
            "ns": ns,
            "key": key,
            "payload": encode(value),
            "due_at": due_at,
            "token": uuid.uuid4().hex,
            "updated_at": self.clock(),
        }
        with self.s.tx() as conn:
            conn.execute(self._put, values)

    def delete(self, ns: str, key: str) -> None:
        """Remove; missing is fine."""
        with self.s.tx() as conn:
            conn.execute(self._delete, {"p_ns": ns, "p_key": key})

    def next_due(self) -> datetime | None:
        """Earliest due time, or None."""
        with self.s.tx() as conn:
            due: datetime | None = conn.execute(self._next_due).scalar()
        return due

    def pop_due(self, now: datetime) -> Iterator[tuple[str, str, Value]]:
        """Yield due records, earliest first; a record the caller leaves untouched is dropped."""
        t = alert_state.c
        while True:
            with self.s.tx() as conn:
                rows = conn.execute(
                    select(t.ns, t.key, t.payload, t.token)
                    .where(t.due_at <= now)
                    .order_by(t.due_at, t.ns, t.key)
                    .limit(self.batch)
                ).all()
            for ns, key, payload, token in rows:
                yield ns, key, decode(ns, payload)
                with self.s.tx() as conn:  # untouched (same token) → drop it
                    conn.execute(delete(alert_state).where(t.ns == ns, t.key == key, t.token == token))
            if len(rows) < self.batch:
                return

    def count(self, ns: str) -> int:
        """Records in a namespace (tests and metrics)."""
        with self.s.tx() as conn:
            n: int = conn.execute(select(func.count()).where(alert_state.c.ns == ns)).scalar() or 0
        return n


# ---- outbox --------------------------------------------------------------------------------------
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
                lease_owner="",
                last_error="",
                sent_via="",
                force_email=row.force_email,
            )
            .on_conflict_do_nothing(index_elements=["key"])
            .returning(_O.id)  # rowcount is not reliable for INSERT … ON CONFLICT with RETURNING ids
        )
        with self.s.tx() as conn:
            return conn.execute(stmt).first() is not None

    def _claimable(self, now: datetime) -> Any:
        return and_(
            _O.status == "pending",
            _O.due_at <= now,
            or_(_O.lease_until.is_(None), _O.lease_until <= now),
        )

    def claim(self, now: datetime, owner: str, lease: timedelta, limit: int) -> list[OutboxRow]:
        """Lease up to `limit` due pending rows to `owner`, oldest due first."""
        until = now + lease
        with self.s.tx() as conn:
            if self.s.postgres:
                ids = (
                    conn.execute(
                        select(_O.id)
                        .where(self._claimable(now))
                        .order_by(_O.due_at, _O.created_at, _O.id)
                        .limit(limit)
                        .with_for_update(skip_locked=True)
                    )
                    .scalars()
                    .all()
                )
                if not ids:
                    return []
                stmt = update(alert_outbox).where(_O.id.in_(ids))
            else:
                # One statement: SQLite takes the write lock before it reads, so claims never overlap.
                pick = (
                    select(_O.id)
                    .where(self._claimable(now))
                    .order_by(_O.due_at, _O.created_at, _O.id)
                    .limit(limit)
                    .scalar_subquery()
                )
                stmt = update(alert_outbox).where(_O.id.in_(pick), self._claimable(now))
            rows = conn.execute(
                stmt.values(lease_owner=owner, lease_until=until).returning(*alert_outbox.c)
            ).all()
        out = [_outbox_row(r) for r in rows]
        out.sort(key=lambda r: (r.due_at, r.created_at))
        return out

    def _held(self, key: str, owner: str) -> Any:
        return and_(_O.key == key, _O.lease_owner == owner, _O.status == "pending")

    def mark_sent(self, key: str, owner: str, now: datetime, via: str) -> bool:
        """Record delivery; False when `owner` no longer holds the lease."""
        with self.s.tx() as conn:
            n = conn.execute(
                update(alert_outbox)
                .where(self._held(key, owner))
                .values(
                    status="sent",
                    sent_at=now,
                    sent_via=via,
                    attempts=_O.attempts + 1,
                    lease_owner="",
                    lease_until=None,
                )
            ).rowcount
        return bool(n == 1)

    def mark_failed(
        self, key: str, owner: str, now: datetime, error: str, retry_at: datetime, force_email: bool = False
    ) -> bool:
        """Count a failed attempt, release the lease, retry at `retry_at`."""
        values: dict[str, Any] = {
            "attempts": _O.attempts + 1,
            "last_error": error[:2000],
            "due_at": retry_at,
            "lease_owner": "",
            "lease_until": None,
        }
        if force_email:
            values["force_email"] = True
        with self.s.tx() as conn:
            n = conn.execute(update(alert_outbox).where(self._held(key, owner)).values(**values)).rowcount
        return bool(n == 1)

    def release(self, key: str, owner: str, due_at: datetime) -> None:
        """Give a claimed row back untried, due again at `due_at`."""
        with self.s.tx() as conn:
            conn.execute(
                update(alert_outbox)
                .where(self._held(key, owner))
                .values(due_at=due_at, lease_owner="", lease_until=None)
            )

    def renew(self, key: str, owner: str, until: datetime) -> bool:
        """Extend `owner`'s lease; False when someone else holds the row now."""
        with self.s.tx() as conn:
            n = conn.execute(
                update(alert_outbox).where(self._held(key, owner)).values(lease_until=until)
            ).rowcount
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


# ---- maintenance windows -------------------------------------------------------------------------
_M = alert_maintenance.c


def _window(r: Any) -> MaintenanceWindow:
    m = r._mapping
    return MaintenanceWindow(
        m["window_id"],
        m["start_at"],
        m["end_at"],
        MaintScope(m["scope_kind"], m["scope_value"] or ""),
        m["source"],
        m["created_by"] or "",
        m["note"] or "",
    )


class SqlMaintenanceStore:
    """MaintenanceStore over table alert_maintenance; each window also has a number for /maint."""

    def __init__(self, stores: SqlAlertStores) -> None:
        self.s = stores

    def save(self, window: MaintenanceWindow) -> None:
        """Insert or replace the window with this id."""
        values = {
            "window_id": window.id,
            "start_at": window.start,
            "end_at": window.end,
            "scope_kind": window.scope.kind,
            "scope_value": window.scope.value,
            "source": window.source,
            "created_by": window.created_by,
            "note": window.note,
        }
        stmt = self.s.insert(alert_maintenance).values(**values)
        stmt = stmt.on_conflict_do_update(
            index_elements=["window_id"], set_={k: stmt.excluded[k] for k in values if k != "window_id"}
        )
        with self.s.tx() as conn:
            conn.execute(stmt)

    def delete(self, window_id: str) -> None:
        """Remove the window; a missing id is not an error."""
        with self.s.tx() as conn:
            conn.execute(delete(alert_maintenance).where(_M.window_id == window_id))

    def load(self, since: datetime | None = None) -> list[MaintenanceWindow]:
        """Stored windows (only those ending after `since`, when given)."""
        q = select(alert_maintenance).order_by(_M.id)
        if since is not None:
            q = q.where(_M.end_at > since)
        with self.s.tx() as conn:
            return [_window(r) for r in conn.execute(q)]

    def numbered(self, now: datetime) -> list[tuple[int, MaintenanceWindow]]:
        """(number, window) of windows not yet ended at `now`."""
        with self.s.tx() as conn:
            rows = conn.execute(select(alert_maintenance).where(_M.end_at > now).order_by(_M.id)).all()
        return [(int(r._mapping["id"]), _window(r)) for r in rows]

    def number_of(self, window_id: str) -> int | None:
        """The number of a stored window."""
        with self.s.tx() as conn:
            n = conn.execute(select(_M.id).where(_M.window_id == window_id)).scalar()
        return int(n) if n is not None else None

    def close(self, window_ids: list[str], now: datetime, by: str) -> list[str]:
        """End open windows now; returns the ids this call closed (a second close is a no-op)."""
        closed = []
        with self.s.tx() as conn:
            for wid in window_ids:
                n = conn.execute(
                    update(alert_maintenance)
                    .where(_M.window_id == wid, _M.closed_at.is_(None), _M.end_at > now)
                    .values(end_at=now, closed_at=now, closed_by=by)
                ).rowcount
                if n == 1:
                    closed.append(wid)
        return closed

    def expire_due(self, now: datetime) -> list[tuple[int, MaintenanceWindow]]:
        """Mark windows that ran out as expired, exactly once across replicas; returns them."""
        with self.s.tx() as conn:
            rows = conn.execute(
                update(alert_maintenance)
                .where(_M.closed_at.is_(None), _M.end_at <= now)
                .values(closed_at=_M.end_at, closed_by="expired")
                .returning(*alert_maintenance.c)
            ).all()
        return [(int(r._mapping["id"]), _window(r)) for r in rows]


# ---- channel health ------------------------------------------------------------------------------
_C = alert_channel.c


class SqlChannelHealth:
    """ChannelHealthStore over table alert_channel: shared by replicas, survives restarts."""

    def __init__(self, stores: SqlAlertStores) -> None:
        self.s = stores

    def _ensure(self, conn: Connection, channel: str, now: datetime) -> None:
        conn.execute(
            self.s.insert(alert_channel)
            .values(channel=channel, mode="robot", failures=0, last_probe_at=None, updated_at=now)
            .on_conflict_do_nothing(index_elements=["channel"])
        )

    def _read(self, conn: Connection, channel: str) -> ChannelHealth:
        r = conn.execute(select(alert_channel).where(_C.channel == channel)).first()
        if r is None:
            return ChannelHealth()
        m = r._mapping
        return ChannelHealth(m["mode"], int(m["failures"]), m["last_probe_at"])

    def __getitem__(self, channel: str) -> ChannelHealth:
        with self.s.tx() as conn:
            return self._read(conn, channel)

    def get(self, channel: str) -> ChannelHealth:
        """The channel's health."""
        with self.s.tx() as conn:
            return self._read(conn, channel)

    def claim_probe(self, channel: str, now: datetime, every: timedelta) -> bool:
        """Take the probe when one is due (one replica wins)."""
        with self.s.tx() as conn:
            n = conn.execute(
                update(alert_channel)
                .where(
                    _C.channel == channel,
                    _C.mode == "email",
                    or_(_C.last_probe_at.is_(None), _C.last_probe_at <= now - every),
                )
                .values(last_probe_at=now, updated_at=now)
            ).rowcount
        return bool(n == 1)

    def success(self, channel: str, now: datetime) -> None:
        """Back to the robot, failures reset."""
        with self.s.tx() as conn:
            self._ensure(conn, channel, now)
            conn.execute(
                update(alert_channel)
                .where(_C.channel == channel)
                .values(mode="robot", failures=0, updated_at=now)
            )

    def failure(self, channel: str, now: datetime, threshold: int, can_mail: bool) -> ChannelHealth:
        """Count a failed row; switch to e-mail at the threshold (when mail is possible)."""
        with self.s.tx() as conn:
            self._ensure(conn, channel, now)
            conn.execute(
                update(alert_channel)
                .where(_C.channel == channel)
                .values(failures=_C.failures + 1, updated_at=now)
            )
            if can_mail:
                conn.execute(
                    update(alert_channel)
                    .where(_C.channel == channel, _C.mode != "email", _C.failures >= threshold)
                    .values(mode="email", last_probe_at=now)
                )
            return self._read(conn, channel)


# ---- robot rate limit ----------------------------------------------------------------------------
class SqlRateLimiter(RateLimiter):
    """WeCom's per-robot limit counted in table alert_robot, so all replicas share one budget."""

    def __init__(self, stores: SqlAlertStores, limit: int = 20, window: timedelta = timedelta(minutes=1)):
        super().__init__(limit, window)
        self.s = stores

    def _load(self, conn: Connection, robot: str, now: datetime, lock: bool) -> list[datetime]:
        if lock:  # a write first: the row lock (PostgreSQL) or the write lock (SQLite) is ours
            conn.execute(
                self.s.insert(alert_robot)
                .values(robot=robot, sent="[]", updated_at=now)
                .on_conflict_do_nothing(index_elements=["robot"])
            )
            if self.s.postgres:
                conn.execute(
                    select(alert_robot.c.robot).where(alert_robot.c.robot == robot).with_for_update()
                )
        raw = conn.execute(select(alert_robot.c.sent).where(alert_robot.c.robot == robot)).scalar()
        times = [datetime.fromisoformat(t) for t in json.loads(raw or "[]")]
        return [t for t in times if t > now - self.window]

    def next_free(self, robot: str, now: datetime, limit: int | None = None) -> datetime:
        """When the next attempt to `robot` may go out."""
        with self.s.tx() as conn:
            sent = self._load(conn, robot, now, lock=False)
        return next_free(sorted(sent), now, limit or self.limit, self.window)

    def _store(self, conn: Connection, robot: str, sent: list[datetime], now: datetime) -> None:
        conn.execute(
            update(alert_robot)
            .where(alert_robot.c.robot == robot)
            .values(sent=json.dumps([t.isoformat() for t in sorted(sent)]), updated_at=now)
        )

    def record(self, robot: str, now: datetime) -> None:
        """Count one attempt."""
        with self.s.tx() as conn:
            sent = self._load(conn, robot, now, lock=True)
            self._store(conn, robot, [*sent, now], now)

    def acquire(self, robot: str, now: datetime, limit: int | None = None) -> bool:
        """Check and count one attempt under the robot's row lock."""
        with self.s.tx() as conn:
            sent = self._load(conn, robot, now, lock=True)
            if next_free(sorted(sent), now, limit or self.limit, self.window) > now:
                return False
            self._store(conn, robot, [*sent, now], now)
        return True


# ---- records -------------------------------------------------------------------------------------
_INSERT_EVENT = insert(alert_event)


class SqlRecordSink:
    """RecordSink over table alert_event: every decision and every delivery, with its reason."""

    def __init__(self, stores: SqlAlertStores, holder: str = "") -> None:
        self.s = stores
        self.holder = holder

    def record(self, rec: AlertRecord) -> None:
        """Store one pipeline decision."""
        with self.s.tx() as conn:
            conn.execute(
                _INSERT_EVENT,
                {
                    "at": rec.at,
                    "kind": "decision",
                    "event_key": rec.event_key,
                    "instance_id": rec.instance_id,
                    "workflow": rec.workflow,
                    "task": rec.task,
                    "reason": rec.reason.value,
                    "tier": rec.tier.value if rec.tier else None,
                    "detail": rec.detail,
                    "notification_key": rec.notification_key,
                    "holder": self.holder,
                },
            )

    def note(self, at: datetime, reason: str, key: str, detail: str = "", tier: str | None = None) -> None:
        """Store a decision that is not about one event (a delivery, a model-raised alert)."""
        with self.s.tx() as conn:
            conn.execute(
                insert(alert_event).values(
                    at=at,
                    kind="delivery" if reason in ("sent", "send_failed") else "decision",
                    reason=reason,
                    tier=tier,
                    detail=detail,
                    notification_key=key,
                    holder=self.holder,
                )
            )

    def delivery(self, attempt: DeliveryAttempt) -> None:
        """Store a delivery outcome."""
        detail = f"via {attempt.via}" + ("" if attempt.ok else f": {attempt.error}")
        self.note(attempt.at, "sent" if attempt.ok else "send_failed", attempt.key, detail)

    def rows(self, reason: str | None = None, instance_id: int | None = None) -> list[dict[str, Any]]:
        """Records in insertion order, optionally filtered."""
        q = select(alert_event).order_by(alert_event.c.id)
        if reason is not None:
            q = q.where(alert_event.c.reason == reason)
        if instance_id is not None:
            q = q.where(alert_event.c.instance_id == instance_id)
        with self.s.tx() as conn:
            return [dict(r._mapping) for r in conn.execute(q)]
