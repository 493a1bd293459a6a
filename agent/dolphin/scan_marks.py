"""The failed-run scan's marker rows: one row in `alert_state` (namespace `seen`) per scanned instance run.

Key `scan:<instance>:<run>`, inserted only if absent, so of two replicas scanning at once exactly
one claims an instance. A claim is a lease (`claimed` until a time); a lapsed one is taken over with
a conditional UPDATE on the row token. A handed-over instance's mark is `done` until it leaves the
look-back window; an instance that could not be read is released for the next scan.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Engine, and_, delete, select, update
from sqlalchemy.dialects import postgresql, sqlite

from xihe.agent.alert_tables import alert_state
from xihe.agent.alerts.state import NS_SEEN
from xihe.integrations.dolphinscheduler.models import Instance

log = logging.getLogger("xihe.alerts.scan")

KEY_PREFIX = "scan:"


def mark_key(inst: Instance) -> str:
    """The marker row key of one run of an instance (a rerun is a new run)."""
    return f"{KEY_PREFIX}{inst.id}:{inst.run_times}"


@dataclass(frozen=True)
class Mark:
    """A marker row's payload: `claimed` (with a lease) or `done`."""

    status: str
    holder: str
    until: datetime  # claimed: lease end; done: when it was handed over

    def text(self) -> str:
        return json.dumps(f"{self.status}|{self.holder}|{self.until.isoformat()}")

    @classmethod
    def parse(cls, payload: str) -> Mark:
        status, holder, until = str(json.loads(payload)).split("|", 2)
        return cls(status, holder, datetime.fromisoformat(until))


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
                select(t.key, t.payload, t.token).where(and_(t.ns == NS_SEEN, t.key.in_(list(keys))))
            ).all()
        out = {}
        for key, payload, token in rows:
            try:
                out[key] = (Mark.parse(payload), token)
            except ValueError:
                log.warning("unreadable scan marker %s: %r", key, payload)
        return out

    def claim(
        self, key: str, now: datetime, lease: timedelta, expires: datetime, seen: tuple[Mark, str] | None
    ) -> str | None:
        """Claim `key` for this replica; the row token when we hold it, None when someone else does.

        New keys are inserted only if absent (two replicas: one wins). A claim whose lease lapsed
        (`seen`, read before) is taken over only if its token is still the one we read.
        """
        token = uuid.uuid4().hex
        values = {
            "payload": Mark("claimed", self.holder, now + lease).text(),
            "due_at": expires,
            "token": token,
            "updated_at": now,
        }
        t = alert_state.c
        with self.engine.begin() as conn:
            if seen is None:
                inserted = conn.execute(self._insert.values(ns=NS_SEEN, key=key, **values)).first()
                won = 1 if inserted is not None else 0  # rowcount is -1 here on psycopg
            else:
                mark, old = seen
                if mark.status != "claimed" or mark.until > now:
                    return None
                won = conn.execute(
                    update(alert_state)
                    .where(and_(t.ns == NS_SEEN, t.key == key, t.token == old))
                    .values(**values)
                ).rowcount
        return token if won == 1 else None

    def done(self, key: str, token: str, now: datetime, expires: datetime) -> None:
        """The instance was handed over: keep the marker until it leaves the look-back window."""
        t = alert_state.c
        with self.engine.begin() as conn:
            conn.execute(
                update(alert_state)
                .where(and_(t.ns == NS_SEEN, t.key == key, t.token == token))
                .values(
                    payload=Mark("done", self.holder, now).text(),
                    due_at=expires,
                    token=uuid.uuid4().hex,
                    updated_at=now,
                )
            )

    def release(self, key: str, token: str) -> None:
        """Give a claim back at once (the instance could not be read or fed): the next scan retries."""
        t = alert_state.c
        with self.engine.begin() as conn:
            conn.execute(delete(alert_state).where(and_(t.ns == NS_SEEN, t.key == key, t.token == token)))
