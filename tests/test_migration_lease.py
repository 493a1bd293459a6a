"""Migration 9 (one lease) upgrades a version-8 store without losing a row or a held lease, and
leaves it with exactly the schema a new store gets, on SQLite and PostgreSQL.

The version-8 store is built here from today's tables with each leased table's lease columns put
back as version 8 defined them (`V8_LEASE`: five spellings; alert_state had none).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Column,
    Engine,
    ForeignKey,
    Index,
    MetaData,
    String,
    Table,
    UniqueConstraint,
    insert,
    inspect,
    select,
)

from tests.conftest import reset_postgres
from xihe.agent.db import make_engine, migrate
from xihe.agent.dolphin.scan_marks import ScanMarks
from xihe.agent.tables import UTCDateTime, metadata
from xihe.agent.task_store import TaskStore
from xihe.integrations.wecom.ws_store import WsLease
from xihe.tools.dolphin.store import SqlWatchStore

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
HELD = T0 + timedelta(seconds=60)

# The lease columns of version 8, in place of today's (lease_owner, lease_until); None: no lease.
V8_LEASE: dict[str, tuple[Column[Any], Column[Any]] | None] = {
    "task": (Column("lease_owner", String(120)), Column("lease_expires_at", UTCDateTime)),
    "plan_item": (Column("owner", String(120)), Column("lease_expires_at", UTCDateTime)),
    "alert_outbox": (
        Column("lease_owner", String(120), nullable=False, default=""),
        Column("lease_until", UTCDateTime),
    ),
    "wecom_inbox": (Column("holder", String(120)), Column("lease_expires_at", UTCDateTime)),
    "wecom_ws_lease": (
        Column("holder", String(120), nullable=False, default=""),
        Column("expires_at", UTCDateTime, nullable=False),
    ),
    "ds_watch": (Column("lease_owner", String(120)), Column("lease_expires_at", UTCDateTime)),
    "alert_state": None,
}


def v8_metadata() -> MetaData:
    """Every table as version 8 had it."""
    md = MetaData()
    for t in metadata.sorted_tables:
        if t.name not in V8_LEASE:
            t.to_metadata(md)
            continue
        old = V8_LEASE[t.name]
        swap = dict(
            zip(
                ("lease_owner", "lease_until"), [c._copy() for c in old] if old else (None, None), strict=True
            )
        )
        columns = [swap[c.name] if c.name in swap else _copy(c) for c in t.c]
        rename = {new: old_col.name for new, old_col in swap.items() if old_col is not None}
        v8 = Table(
            t.name,
            md,
            *[c for c in columns if c is not None],
            *[
                UniqueConstraint(*c.columns.keys(), name=c.name)
                for c in t.constraints
                if isinstance(c, UniqueConstraint) and not c._column_flag
            ],
        )
        for index in t.indexes:
            Index(index.name, *[v8.c[rename.get(c.name, c.name)] for c in index.columns], unique=index.unique)
    return md


def _copy(column: Column[Any]) -> Column[Any]:
    copy = column._copy()  # leaves the foreign keys out
    for fk in column.foreign_keys:
        copy.append_foreign_key(ForeignKey(fk.target_fullname, ondelete=fk.ondelete))
    return copy


def _claimed(holder: str, until: datetime) -> str:
    return json.dumps(f"claimed|{holder}|{until.isoformat()}")


def seed_v8(engine: Engine) -> None:
    """A version-8 store with held, lapsed and free leases in every leased table."""
    md = v8_metadata()
    md.create_all(engine)
    t = md.tables
    stamp = {"created_at": T0, "updated_at": T0}
    with engine.begin() as conn:
        conn.execute(
            insert(t["schema_migrations"]),
            [{"version": v, "description": f"v{v}", "applied_at": T0} for v in (1, 2, 3, 4, 5, 7, 8)],
        )
        base = {"kind": "chat", "status": "running", "owner": "alice", "conversation": "c", **stamp}
        conn.execute(
            insert(t["task"]),
            [
                {**base, "lease_owner": "r1:1", "lease_expires_at": HELD},
                {**base, "lease_owner": None, "lease_expires_at": None},
                {**base, "lease_owner": "r2:2", "lease_expires_at": T0 - timedelta(minutes=5)},
            ],
        )
        item = {"task_id": 1, "depends_on": [], "description": "d", **stamp}
        conn.execute(
            insert(t["plan_item"]),
            [
                {**item, "seq": 1, "status": "in_progress", "owner": "task:1", "lease_expires_at": HELD},
                {**item, "seq": 2, "status": "completed", "owner": "task:1", "lease_expires_at": None},
            ],
        )
        note = {"kind": "instance", "tier": "P1", "channel": "default", "subject": "s", "text": "t"}
        conn.execute(
            insert(t["alert_outbox"]),
            [
                {
                    **note,
                    "key": "a",
                    "created_at": T0,
                    "due_at": T0,
                    "status": "pending",
                    "lease_owner": "r1:1",
                }
                | {"lease_until": HELD},
                {**note, "key": "b", "created_at": T0, "due_at": T0, "status": "pending", "lease_owner": ""}
                | {"lease_until": None},
            ],
        )
        conn.execute(
            insert(t["wecom_inbox"]),
            [
                {"key": "w:1", "seen_at": T0, "status": "queued", "holder": "r1:1", "lease_expires_at": HELD},
                {"key": "w:2", "seen_at": T0, "status": "done", "holder": "r1:1", "lease_expires_at": None},
                {"key": "w:3", "seen_at": T0, "status": "queued", "holder": "r1:1"}
                | {"lease_expires_at": T0 - timedelta(seconds=1)},  # released the version-8 way
            ],
        )
        conn.execute(
            insert(t["wecom_ws_lease"]),
            [
                {"name": "aibot:bot1", "holder": "r1:1", "expires_at": HELD, "acquired_at": T0},
                {
                    "name": "aibot:bot2",
                    "holder": "",
                    "expires_at": T0 - timedelta(seconds=1),
                    "acquired_at": T0,
                },
            ],
        )
        watch = {"task_id": "1", "conversation": "c", "project": "etl", "project_code": 1, "workflow": "w"}
        watch |= {"definition_code": 2, "started_at": T0, "next_poll_at": T0, "state": {}, **stamp}
        conn.execute(
            insert(t["ds_watch"]),
            [
                {**watch, "key": "1:a", "lease_owner": "r1:1", "lease_expires_at": HELD},
                {
                    **watch,
                    "key": "2:a",
                    "lease_owner": None,
                    "lease_expires_at": None,
                    "state": {"instance_ids": [41]},
                },
            ],
        )
        mark = {"ns": "seen", "token": "t", "updated_at": T0}
        conn.execute(
            insert(t["alert_state"]),
            [
                {**mark, "key": "scan:7:1", "payload": _claimed("r1:1", HELD)},
                {**mark, "key": "scan:8:1", "payload": json.dumps(f"done|r1:1|{T0.isoformat()}")},
                {**mark, "key": "some-event", "payload": '{"x": 1}'},
            ],
        )


def leases(engine: Engine, table: str, key: str) -> list[tuple[Any, ...]]:
    t = metadata.tables[table]
    with engine.connect() as conn:
        return [
            tuple(r)
            for r in conn.execute(select(t.c[key], t.c.lease_owner, t.c.lease_until).order_by(t.c[key]))
        ]


def describe(engine: Engine) -> dict[str, Any]:
    """The schema as the database reports it: columns in order, keys, indexes, constraints."""
    insp = inspect(engine)
    out: dict[str, Any] = {}
    for name in sorted(insp.get_table_names()):
        out[name] = {
            "columns": [
                (c["name"], str(c["type"]), c["nullable"], c.get("default")) for c in insp.get_columns(name)
            ],
            "pk": insp.get_pk_constraint(name)["constrained_columns"],
            "fks": sorted(
                (tuple(f["constrained_columns"]), f["referred_table"]) for f in insp.get_foreign_keys(name)
            ),
            "indexes": sorted(
                (i["name"], tuple(i["column_names"]), i["unique"]) for i in insp.get_indexes(name)
            ),
            "unique": sorted(tuple(u["column_names"]) for u in insp.get_unique_constraints(name)),
        }
    return out


def test_a_version_8_store_upgrades_keeping_rows_and_held_leases(db_url: str, tmp_path: Path) -> None:
    engine = make_engine(db_url)
    seed_v8(engine)
    # 10: WeCom action cards; 11: web UI sessions; 12: chat mail; 13: who closed an action; 14: alert lifecycle; 15: on-call overrides; 16: watches by instance; 17: schedules taken offline; 18: the inbox lane
    assert migrate(engine) == [9, 10, 11, 12, 13, 14, 15, 16, 17, 18]
    assert leases(engine, "task", "id") == [
        (1, "r1:1", HELD),
        (2, None, None),
        (3, "r2:2", T0 - timedelta(minutes=5)),
    ]
    assert leases(engine, "plan_item", "seq") == [(1, "task:1", HELD), (2, None, None)]
    assert leases(engine, "alert_outbox", "key") == [("a", "r1:1", HELD), ("b", None, None)]
    assert leases(engine, "wecom_inbox", "key") == [
        ("w:1", "r1:1", HELD),
        ("w:2", None, None),
        ("w:3", "r1:1", T0 - timedelta(seconds=1)),  # lapsed: free, as it was
    ]
    assert leases(engine, "wecom_ws_lease", "name") == [
        ("aibot:bot1", "r1:1", HELD),
        ("aibot:bot2", None, None),
    ]
    assert leases(engine, "ds_watch", "key") == [("1:a", "r1:1", HELD), ("2:a", None, None)]
    found = SqlWatchStore(engine).with_instance(41)  # 16 indexed the instance ids the watches held
    assert found is not None and found.key == "2:a" and SqlWatchStore(engine).with_instance(1) is None
    assert leases(engine, "alert_state", "key") == [
        ("scan:7:1", "r1:1", HELD),
        ("scan:8:1", None, None),
        ("some-event", None, None),
    ]
    # the stores read the upgraded rows: the held leases keep everyone else out
    assert WsLease(engine, "aibot:bot1").holder(T0) == "r1:1" and not WsLease(engine, "aibot:bot1").acquire(
        "r2:2", T0, timedelta(seconds=30)
    )
    assert not TaskStore(engine).claim(1, "r2:2", T0, timedelta(seconds=30))
    assert [t.id for t in TaskStore(engine).orphans(T0)] == [2, 3]
    marks = ScanMarks(engine, "r2:2").load(["scan:7:1", "scan:8:1"])
    assert {k: (m.status, m.holder) for k, (m, _) in marks.items()} == {
        "scan:7:1": ("open", "r1:1"),
        "scan:8:1": ("done", None),
    }
    assert (
        ScanMarks(engine, "r2:2").claim("scan:7:1", T0, timedelta(seconds=30), HELD, marks["scan:7:1"])
        is None
    )
    with engine.connect() as conn:
        payload = (
            conn.execute(select(metadata.tables["alert_state"].c.payload).order_by("key")).scalars().all()
        )
    assert payload == ['"open"', '"done"', '{"x": 1}']
    assert migrate(engine) == []
    upgraded = describe(engine)
    engine.dispose()

    if db_url.startswith("sqlite"):
        fresh = make_engine(f"sqlite:///{tmp_path / 'fresh.db'}")
    else:
        reset_postgres(db_url)
        fresh = make_engine(db_url)
    assert 9 in migrate(fresh)
    assert describe(fresh) == upgraded
    fresh.dispose()
