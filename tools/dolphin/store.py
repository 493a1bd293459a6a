"""SQL stores for DolphinScheduler watching: `SqlWatchStore` (ds_watch) and `SqlCatalogStore` (ds_catalog).

Both implement the Protocols of `xihe.tools.dolphin.watch` and `xihe.tools.dolphin.names`, on SQLite and
PostgreSQL. `SqlWatchStore.due()` *claims* what it returns: each due row gets a lease for this
replica, so two replicas running the poll job at once never poll the same run in one cycle.
The claim is `xihe.agent.lease.claim_batch` (`SELECT … FOR UPDATE SKIP LOCKED` on PostgreSQL, one
conditional UPDATE on SQLite). `save()` writes the polled watch back and releases the lease; a
replica whose lease lapsed and was taken over cannot overwrite the new holder's row.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Engine, and_, bindparam, delete, insert, or_, select, true, update
from sqlalchemy.dialects import postgresql, sqlite

from xihe.agent import lease
from xihe.agent.dolphin_tables import ds_catalog, ds_catalog_sync, ds_watch, ds_watch_instance
from xihe.tools.dolphin.names import CatalogEntry
from xihe.tools.dolphin.watch import SCHEMA_VERSION, PendingRerun, Watch

log = logging.getLogger("xihe.dolphin")

DEFAULT_LEASE = timedelta(seconds=120)


def _state(w: Watch) -> dict[str, Any]:
    """The Watch fields that live in the JSON column."""
    return {
        "expected_runs": w.expected_runs,
        "instance_ids": list(w.instance_ids),
        "states": [[i, s] for i, s in w.states],
        "reported": list(w.reported),
        "foreign_ids": list(w.foreign_ids),
        "interval": w.interval,
        "last_change_at": w.last_change_at.isoformat() if w.last_change_at else None,
        "environment": w.environment,
        "progress_tasks": w.progress_tasks,
        "dates": list(w.dates),
        "reruns": [
            {
                "instance_id": r.instance_id,
                "run_times": r.run_times,
                "end_time": r.end_time.isoformat() if r.end_time else None,
                "sent_at": r.sent_at.isoformat(),
                "by": r.by,
            }
            for r in w.reruns
        ],
        "auth_warned": w.auth_warned,
        "biz_date_offset": w.biz_date_offset,
    }


def _rerun(d: dict[str, Any]) -> PendingRerun:
    end = d.get("end_time")
    return PendingRerun(
        instance_id=int(d["instance_id"]),
        run_times=int(d["run_times"]),
        end_time=datetime.fromisoformat(end) if end else None,
        sent_at=datetime.fromisoformat(d["sent_at"]),
        by=str(d.get("by", "")),
    )


_COLUMNS = (
    "task_id",
    "conversation",
    "project",
    "project_code",
    "workflow",
    "definition_code",
    "started_at",
    "next_poll_at",
    "done",
    "state",
    "schema_version",
)


def _columns(w: Watch) -> dict[str, Any]:
    return {
        "task_id": w.task_id,
        "conversation": w.conversation,
        "project": w.project,
        "project_code": w.project_code,
        "workflow": w.workflow,
        "definition_code": w.definition_code,
        "started_at": w.started_at,
        "next_poll_at": w.next_poll_at,
        "done": w.done,
        "state": _state(w),
        "schema_version": w.schema_version,
    }


def _row(w: Watch) -> dict[str, Any]:
    """Parameters of _SAVE for one watch."""
    return {"k": w.key, "updated_at": w.last_change_at or w.next_poll_at, **_columns(w)}


# Built once: a poll cycle saves every watch it claimed with one executemany of this statement.
_SAVE = (
    update(ds_watch)
    .where(ds_watch.c.key == bindparam("k"), lease.unclaimed_or_owned(ds_watch, bindparam("me")))
    .values(**lease.released(), **{name: bindparam(name) for name in ("updated_at", *_COLUMNS)})
)


def _watch(row: Any) -> Watch:
    st = dict(row.state or {})
    changed = st.get("last_change_at")
    return Watch(
        key=row.key,
        task_id=row.task_id,
        conversation=row.conversation,
        project=row.project,
        project_code=int(row.project_code),
        workflow=row.workflow,
        definition_code=int(row.definition_code),
        started_at=row.started_at,
        next_poll_at=row.next_poll_at,
        expected_runs=int(st.get("expected_runs", 1)),
        instance_ids=tuple(int(i) for i in st.get("instance_ids", ())),
        states=tuple((int(i), str(s)) for i, s in st.get("states", ())),
        reported=tuple(int(i) for i in st.get("reported", ())),
        foreign_ids=tuple(int(i) for i in st.get("foreign_ids", ())),
        interval=float(st.get("interval", 15.0)),
        last_change_at=datetime.fromisoformat(changed) if changed else None,
        done=bool(row.done),
        environment=str(st.get("environment", "")),
        progress_tasks=bool(st.get("progress_tasks", False)),
        dates=tuple(str(d) for d in st.get("dates", ())),
        reruns=tuple(_rerun(r) for r in st.get("reruns", ())),
        auth_warned=bool(st.get("auth_warned", False)),
        biz_date_offset=int(st.get("biz_date_offset", 0)),
        schema_version=int(row.schema_version or SCHEMA_VERSION),
    )


def _instances(watches: Sequence[Watch]) -> list[dict[str, Any]]:
    """The `ds_watch_instance` rows of `watches`: each instance id it found, with its key."""
    return [{"instance_id": i, "watch_key": w.key} for w in watches for i in set(w.instance_ids)]


def _insert_ignore(engine: Engine, table: Any, key_columns: list[str]) -> Any:
    """INSERT that leaves an existing row alone, in the engine's dialect."""
    if engine.dialect.name == "postgresql":
        return postgresql.insert(table).on_conflict_do_nothing(index_elements=key_columns)
    return sqlite.insert(table).on_conflict_do_nothing(index_elements=key_columns)


class SqlWatchStore:
    """WatchStore over the `ds_watch` table, with a per-replica lease on the rows it polls."""

    def __init__(self, engine: Engine, holder: str = "xihe", lease: timedelta = DEFAULT_LEASE) -> None:
        self.engine = engine
        self.holder = holder
        self.lease = lease

    # ---- the WatchStore protocol ----------------------------------------------------------------

    def add(self, watch: Watch) -> None:
        """Insert a new watch; an existing key is left as it is (idempotent)."""
        now = watch.started_at
        stmt = _insert_ignore(self.engine, ds_watch, ["key"]).values(
            key=watch.key, created_at=now, updated_at=now, **_columns(watch)
        )
        with self.engine.begin() as conn:
            conn.execute(stmt)
            self._index(conn, [watch])

    def _index(self, conn: Connection, watches: Sequence[Watch]) -> None:
        """Record which instances `watches` followed (rows already there are left as they are)."""
        rows = _instances(watches)
        if rows:
            conn.execute(_insert_ignore(self.engine, ds_watch_instance, ["instance_id", "watch_key"]), rows)

    def get(self, key: str) -> Watch | None:
        """One watch by key."""
        with self.engine.connect() as conn:
            row = conn.execute(select(ds_watch).where(ds_watch.c.key == key)).first()
        return _watch(row) if row is not None else None

    def due(self, now: datetime, limit: int = 1000) -> list[Watch]:
        """Claim and return the due, not-done watches no other replica holds, soonest first.

        The claim is a lease of `self.lease` for `self.holder`; `save()` releases it. A replica
        that died mid-cycle leaves leases that lapse, after which another replica takes the rows.
        Rows this replica holds already come back too (each cycle saves all it claimed).
        """
        order = (ds_watch.c.next_poll_at, ds_watch.c.key)
        due = and_(ds_watch.c.done.is_(False), ds_watch.c.next_poll_at <= now)
        with self.engine.begin() as conn:
            rows = lease.claim_batch(
                conn, ds_watch, self.holder, now, self.lease, where=due, order_by=order, limit=limit, own=True
            )
        return [_watch(r) for r in sorted(rows, key=lambda r: (r.next_poll_at, r.key))]

    def save(self, watch: Watch) -> None:
        """Replace the row of `watch.key` and release this replica's lease on it.

        A row leased by another replica (ours lapsed and was taken over) is not overwritten.
        A key that does not exist yet is inserted.
        """
        self.save_all([watch])

    def save_all(self, watches: Sequence[Watch]) -> None:
        """`save` for a whole poll cycle, in one transaction (one executemany when all are ours)."""
        if not watches:
            return
        rows = [_row(w) for w in watches]
        with self.engine.begin() as conn:
            self._index(conn, watches)
            if conn.execute(_SAVE, [{**r, "me": self.holder} for r in rows]).rowcount == len(rows):
                return
            for row in rows:  # some row was not ours or does not exist yet: sort them out one by one
                held_by = conn.execute(
                    select(ds_watch.c.lease_owner).where(ds_watch.c.key == row["k"])
                ).first()
                if held_by is None:
                    values = {k: v for k, v in row.items() if k != "k"}
                    conn.execute(
                        insert(ds_watch).values(key=row["k"], created_at=row["updated_at"], **values)
                    )
                elif held_by[0] not in (None, self.holder):
                    log.warning(
                        "watch %s is leased by %s; this poll's update was dropped", row["k"], held_by[0]
                    )

    def active(self) -> list[Watch]:
        """All watches not done."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(ds_watch).where(ds_watch.c.done.is_(False)).order_by(ds_watch.c.next_poll_at)
            ).all()
        return [_watch(r) for r in rows]

    # ---- beyond the protocol ---------------------------------------------------------------------

    def release(self) -> None:
        """Drop every lease this replica holds (a cycle that failed before saving)."""
        with self.engine.begin() as conn:
            conn.execute(lease.release(ds_watch, true(), self.holder))

    def with_instance(self, instance_id: int) -> Watch | None:
        """The most recent watch that followed `instance_id` (to find its project), or None.

        One indexed lookup in `ds_watch_instance`, whatever the number of watches.
        """
        by_instance = ds_watch_instance.c
        with self.engine.connect() as conn:
            row = conn.execute(
                select(ds_watch)
                .join(ds_watch_instance, by_instance.watch_key == ds_watch.c.key)
                .where(by_instance.instance_id == instance_id)
                .order_by(ds_watch.c.updated_at.desc(), ds_watch.c.key)
                .limit(1)
            ).first()
        return _watch(row) if row is not None else None

    def progress_note(self, key: str, text: str, now: datetime, every: timedelta) -> bool:
        """Record a progress message for `key` unless one went out within `every` or it says nothing new.

        True means "send it": the row now remembers `text` and `now`. Conditional, so two replicas
        never both send the same progress message.
        """
        cond = and_(
            ds_watch.c.key == key,
            or_(
                ds_watch.c.notified_at.is_(None),
                and_(ds_watch.c.notified_at <= now - every, ds_watch.c.notified_text != text),
            ),
        )
        with self.engine.begin() as conn:
            changed = conn.execute(
                update(ds_watch).where(cond).values(notified_at=now, notified_text=text)
            ).rowcount
        return bool(changed)


class SqlCatalogStore:
    """CatalogStore over the `ds_catalog` table (name → code, project and release state)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def _lock(self, conn: Connection) -> None:
        """Serialise replacements: two replicas syncing at once would collide on the primary key."""
        conn.execute(_insert_ignore(self.engine, ds_catalog_sync, ["id"]).values(id=1, synced_at=None))
        if self.engine.dialect.name == "postgresql":
            conn.execute(select(ds_catalog_sync.c.id).where(ds_catalog_sync.c.id == 1).with_for_update())

    def replace(self, entries: Sequence[CatalogEntry], synced_at: datetime) -> None:
        """Replace the catalog of the projects present in `entries` with them."""
        projects = sorted({e.project for e in entries})
        unique = {(e.project, e.name): e for e in entries}
        with self.engine.begin() as conn:
            self._lock(conn)
            if projects:
                conn.execute(delete(ds_catalog).where(ds_catalog.c.project.in_(projects)))
            if unique:
                conn.execute(
                    insert(ds_catalog),
                    [
                        {
                            "project": e.project,
                            "name": e.name,
                            "code": e.code,
                            "project_code": e.project_code,
                            "release_state": e.release_state,
                            "synced_at": synced_at,
                        }
                        for e in unique.values()
                    ],
                )
            conn.execute(update(ds_catalog_sync).where(ds_catalog_sync.c.id == 1).values(synced_at=synced_at))

    def entries(self) -> list[CatalogEntry]:
        """The whole catalog, sorted by project and name."""
        with self.engine.connect() as conn:
            rows = conn.execute(select(ds_catalog).order_by(ds_catalog.c.project, ds_catalog.c.name)).all()
        return [
            CatalogEntry(r.project, r.name, int(r.code), r.release_state, int(r.project_code)) for r in rows
        ]

    def synced_at(self) -> datetime | None:
        """When the last sync finished, or None."""
        with self.engine.connect() as conn:
            return conn.execute(select(ds_catalog_sync.c.synced_at).where(ds_catalog_sync.c.id == 1)).scalar()
