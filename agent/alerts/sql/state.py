"""AlertStateStore over table alert_state: the pipeline's windows, fingerprints and instances."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime

from sqlalchemy import bindparam, delete, func, select

from xihe.agent.alert_tables import alert_state
from xihe.agent.alerts.sql.stores import SqlAlertStores
from xihe.agent.alerts.state import Value, decode, encode
from xihe.agent.clock import Clock, utc_now


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
