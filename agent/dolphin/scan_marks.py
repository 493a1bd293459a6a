"""The failed-run scan's marker rows: one row in `alert_state` (namespace `seen`) per scanned instance run.

Key `scan:<instance>:<run>`, inserted only if absent, so of two replicas scanning at once exactly
one claims an instance. A claim is the row's lease (`xihe.agent.lease`) on an `open` mark; a lapsed
or released one is claimed again. A handed-over instance's mark is `done` until it leaves the
look-back window; an instance that could not be read is released for the next scan.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Engine, and_, select
from sqlalchemy.dialects import postgresql, sqlite

from xihe.agent import lease
from xihe.agent.alert_tables import alert_state
from xihe.agent.alerts.state import NS_SEEN
from xihe.integrations.dolphinscheduler.models import Instance

log = logging.getLogger("xihe.alerts.scan")

KEY_PREFIX = "scan:"


def mark_key(inst: Instance) -> str:
    """The marker row key of one run of an instance (a rerun is a new run)."""
    return f"{KEY_PREFIX}{inst.id}:{inst.run_times}"


OPEN, DONE = json.dumps("open"), json.dumps("done")  # the payloads: being reported (or released), handed over


@dataclass(frozen=True)
class Mark:
    """A marker row: `open` (claimed while its lease is held) or `done`."""

    status: str
    holder: str | None  # the lease owner
    until: datetime | None  # the lease end

    @classmethod
    def parse(cls, payload: str, holder: str | None, until: datetime | None) -> Mark:
        status = json.loads(payload)
        if status not in ("open", "done"):
            raise ValueError(f"not a scan mark status: {status!r}")
        return cls(status, holder, until)


class ScanMarks:
    """Marker rows in `alert_state` (namespace `seen`): one per scanned instance run."""

    def __init__(self, engine: Engine, holder: str) -> None:
        self.engine = engine
        self.holder = holder
        self._insert = (
            (postgresql.insert if engine.dialect.name == "postgresql" else sqlite.insert)(alert_state)
            .on_conflict_do_nothing(index_elements=["ns", "key"])
            .returning(alert_state.c.key)
        )

    def load(self, keys: Sequence[str]) -> dict[str, tuple[Mark, str]]:
        """The marks present among `keys`, with their row tokens."""
        if not keys:
            return {}
        t = alert_state.c
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(t.key, t.payload, t.lease_owner, t.lease_until, t.token).where(
                    and_(t.ns == NS_SEEN, t.key.in_(list(keys)))
                )
            ).all()
        out = {}
        for key, payload, holder, until, token in rows:
            try:
                out[key] = (Mark.parse(payload, holder, until), token)
            except ValueError:
                log.warning("unreadable scan marker %s: %r", key, payload)
        return out

    def claim(
        self, key: str, now: datetime, ttl: timedelta, expires: datetime, seen: tuple[Mark, str] | None
    ) -> str | None:
        """Claim `key` for this replica; the row token when we hold it, None when someone else does.

        New keys are inserted only if absent (two replicas: one wins). An open mark (`seen`, read
        before) is claimed if nobody holds it: its lease lapsed or was released.
        """
        token = uuid.uuid4().hex
        values = {"payload": OPEN, "due_at": expires, "token": token, "updated_at": now}
        t = alert_state.c
        with self.engine.begin() as conn:
            if seen is None:
                row = {"ns": NS_SEEN, "key": key, **values, **lease.taken(self.holder, now, ttl)}
                inserted = conn.execute(self._insert.values(**row)).first()
                won = 1 if inserted is not None else 0  # rowcount is -1 here on psycopg
            else:
                if seen[0].status != "open":
                    return None
                open_mark = and_(t.ns == NS_SEEN, t.key == key, t.payload == OPEN)
                won = conn.execute(
                    lease.claim(alert_state, open_mark, self.holder, now, ttl, **values)
                ).rowcount
        return token if won == 1 else None

    def done(self, key: str, token: str, now: datetime, expires: datetime) -> None:
        """The instance was handed over: keep the marker until it leaves the look-back window."""
        t = alert_state.c
        ours = and_(t.ns == NS_SEEN, t.key == key, t.token == token)
        values = {"payload": DONE, "due_at": expires, "token": uuid.uuid4().hex, "updated_at": now}
        with self.engine.begin() as conn:
            conn.execute(lease.release(alert_state, ours, self.holder, **values))

    def release(self, key: str, token: str) -> None:
        """Give a claim back at once (the instance could not be read or fed): the next scan retries."""
        t = alert_state.c
        with self.engine.begin() as conn:
            conn.execute(
                lease.release(alert_state, and_(t.ns == NS_SEEN, t.key == key, t.token == token), self.holder)
            )
