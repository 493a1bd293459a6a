"""The versioned migrations that create every table, and the table that records which ran.

Each migration names the tables (or DDL) it adds, so an existing database only ever moves forward.
Tables are created as their modules define them now; a later migration that changes a table
(8 adds columns, 9 renames the lease columns) therefore looks first and leaves a new store alone.
`agent.db.migrate()` applies what is missing under a lock.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime

from sqlalchemy import Column, Connection, Integer, String, Table, and_, inspect, or_, select, text, update
from sqlalchemy.engine.interfaces import ReflectedColumn

from xihe.agent.alert_tables import (
    alert_channel,
    alert_event,
    alert_life,
    alert_maintenance,
    alert_outbox,
    alert_page,
    alert_robot,
    alert_state,
)
from xihe.agent.core_tables import artifact, audit_event, memory, pending_action, task, task_step
from xihe.agent.dolphin_tables import (
    ds_catalog,
    ds_catalog_sync,
    ds_schedule_off,
    ds_watch,
    ds_watch_instance,
)
from xihe.agent.lease import released
from xihe.agent.mail_tables import chat_mail
from xihe.agent.oncall_tables import oncall_override
from xihe.agent.plan_tables import plan_change, plan_item
from xihe.agent.tables import UTCDateTime, metadata
from xihe.agent.web_tables import ui_login_attempt, ui_login_lock, ui_session
from xihe.agent.wecom_tables import wecom_card, wecom_inbox, wecom_stream, wecom_ws_lease, wecom_ws_outbox

# Which migrations has this database had, and when?
schema_migrations = Table(
    "schema_migrations",
    metadata,
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("description", String(200), nullable=False),
    Column("applied_at", UTCDateTime, nullable=False),
)

Migration = tuple[int, str, Callable[[Connection], None]]


def _create(*tables: Table) -> Callable[[Connection], None]:
    def run(conn: Connection) -> None:
        metadata.create_all(conn, tables=list(tables))

    return run


def _add_columns(table: Table, *names: str) -> Callable[[Connection], None]:
    """Add columns its module defines to a table created by an earlier migration (a new store has them already)."""

    def run(conn: Connection) -> None:
        present = {c["name"] for c in inspect(conn).get_columns(table.name)}
        for name in names:
            if name in present:
                continue
            column = table.c[name]
            kind = column.type.compile(dialect=conn.dialect)
            conn.execute(text(f"ALTER TABLE {table.name} ADD COLUMN {name} {kind}"))

    return run


# ---- migration 9: one lease --------------------------------------------------------------------
# Each leased table's owner and expiry columns before migration 9; alert_state had none (a scan
# marker kept its claim in the payload as "claimed|<holder>|<until>").
OLD_LEASE_COLUMNS: dict[str, tuple[str, str]] = {
    "task": ("lease_owner", "lease_expires_at"),
    "plan_item": ("owner", "lease_expires_at"),
    "alert_outbox": ("lease_owner", "lease_until"),  # lease_owner NOT NULL, '' when free
    "wecom_inbox": ("holder", "lease_expires_at"),
    "wecom_ws_lease": ("holder", "expires_at"),  # both NOT NULL; released by backdating expires_at
    "ds_watch": ("lease_owner", "lease_expires_at"),
}
_LEASED = {t.name: t for t in (task, plan_item, alert_outbox, wecom_inbox, wecom_ws_lease, ds_watch)}


def _one_lease(conn: Connection) -> None:
    """Rename each leased table's columns to lease_owner/lease_until (nullable), keeping every row and
    every held lease; a row that was free (no owner, an empty one, or no expiry) ends up NULL/NULL.

    Each step looks at the columns before it acts: on a new store, whose tables migrations 1-8
    created as they are defined now, nothing changes.
    """
    for name, (owner, until) in OLD_LEASE_COLUMNS.items():
        table = _LEASED[name]
        columns = {c["name"]: c for c in inspect(conn).get_columns(name)}
        renames = {
            old: new for old, new in ((owner, "lease_owner"), (until, "lease_until")) if old in columns
        }
        renames = {old: new for old, new in renames.items() if old != new or not columns[old]["nullable"]}
        if renames and conn.dialect.name == "sqlite" and any(not columns[o]["nullable"] for o in renames):
            _rebuild_sqlite(conn, table, renames)
        else:
            _rename_columns(conn, name, renames, columns)
        c = table.c
        free = or_(c.lease_owner.is_(None), c.lease_owner == "", c.lease_until.is_(None))
        conn.execute(update(table).where(free).values(**released()))
    _add_columns(alert_state, "lease_owner", "lease_until")(conn)
    _scan_marks_to_lease(conn)


def _rename_columns(
    conn: Connection, name: str, renames: dict[str, str], columns: dict[str, ReflectedColumn]
) -> None:
    q = conn.dialect.identifier_preparer.quote
    for old, new in renames.items():
        if old != new:
            conn.execute(text(f"ALTER TABLE {q(name)} RENAME COLUMN {q(old)} TO {q(new)}"))
        if not columns[old]["nullable"]:  # PostgreSQL only: SQLite rebuilds the table instead
            conn.execute(text(f"ALTER TABLE {q(name)} ALTER COLUMN {q(new)} DROP NOT NULL"))


def _rebuild_sqlite(conn: Connection, table: Table, renames: dict[str, str]) -> None:
    """SQLite cannot drop NOT NULL: copy the rows into the table as defined now (nothing references it)."""
    q = conn.dialect.identifier_preparer.quote
    old_name = f"{table.name}__before_lease"
    conn.execute(text(f"ALTER TABLE {q(table.name)} RENAME TO {q(old_name)}"))
    for index in inspect(conn).get_indexes(old_name):
        conn.execute(text(f"DROP INDEX {q(str(index['name']))}"))
    table.create(conn)
    source = {new: old for old, new in renames.items()}
    targets = ", ".join(q(c.name) for c in table.c)
    sources = ", ".join(q(source.get(c.name, c.name)) for c in table.c)
    conn.execute(text(f"INSERT INTO {q(table.name)} ({targets}) SELECT {sources} FROM {q(old_name)}"))
    conn.execute(text(f"DROP TABLE {q(old_name)}"))


def _scan_marks_to_lease(conn: Connection) -> None:
    """Scan markers (alert_state, ns `seen`, keys `scan:`) move their claim from the payload to the lease."""
    t = alert_state.c
    marks = and_(t.ns == "seen", t.key.like("scan:%"))
    for key, payload in conn.execute(select(t.key, t.payload).where(marks)).all():
        try:
            status, holder, until = str(json.loads(payload)).split("|", 2)
            values = {"lease_owner": holder, "lease_until": datetime.fromisoformat(until)}
        except ValueError:
            continue  # already in the new form
        if status != "claimed":
            values = released()
        new_status = "open" if status == "claimed" else status
        conn.execute(
            update(alert_state)
            .where(and_(marks, t.key == key))
            .values(payload=json.dumps(new_status), **values)
        )


def _watch_instances(conn: Connection) -> None:
    """Create `ds_watch_instance` and fill it from the instance ids the watches' state holds."""
    metadata.create_all(conn, tables=[ds_watch_instance])
    rows = {
        (int(i), key)
        for key, state in conn.execute(select(ds_watch.c.key, ds_watch.c.state))
        for i in (state or {}).get("instance_ids", ())
    }
    if rows:
        conn.execute(
            ds_watch_instance.insert(), [{"instance_id": i, "watch_key": k} for i, k in sorted(rows)]
        )


def _alert_lifecycle(conn: Connection) -> None:
    """Migration 14: alert lifecycles and their escalation pages; the outbox row's `to_user` (a page
    to one person through an app channel)."""
    metadata.create_all(conn, tables=[alert_life, alert_page])
    _add_columns(alert_outbox, "to_user")(conn)


MIGRATIONS: list[Migration] = [
    (
        1,
        "tasks, steps, audit, pending actions, artifacts, memory",
        _create(task, task_step, audit_event, pending_action, artifact, memory),
    ),
    (
        2,
        "alerts: pipeline state, outbox, maintenance windows, channel health, robot rate, decisions",
        _create(alert_state, alert_outbox, alert_maintenance, alert_channel, alert_robot, alert_event),
    ),
    (3, "wecom inbox (MsgId de-duplication) and AI-bot streams", _create(wecom_inbox, wecom_stream)),
    (
        4,
        "dolphinscheduler: watched runs, workflow name catalog",
        _create(ds_watch, ds_catalog, ds_catalog_sync),
    ),
    (5, "long tasks: plan items and plan changes", _create(plan_item, plan_change)),
    (7, "wecom long connection: holder lease, outbox of frames", _create(wecom_ws_lease, wecom_ws_outbox)),
    (8, "task outcome and the runs a task started", _add_columns(task, "outcome", "runs")),
    (9, "one lease: every leased table holds it in lease_owner and lease_until", _one_lease),
    (
        10,
        "wecom action cards: who got which card for which pending action, and its update code",
        _create(wecom_card),
    ),
    (
        11,
        "web UI: server-side sessions, failed-login attempts and lockouts",
        _create(ui_session, ui_login_attempt, ui_login_lock),
    ),
    (12, "terminal chats' mail: late messages waiting for their xihe chat", _create(chat_mail)),
    (
        13,
        "pending actions: who rejected or cancelled one, and the reason given",
        _add_columns(pending_action, "closed_by", "close_note"),
    ),
    (
        14,
        "alerts lifecycle: each failed instance's alert (firing, acknowledged, resolved) and its escalation pages",
        _alert_lifecycle,
    ),
    (15, "on-call overrides from chat: who covers whose duty, until when", _create(oncall_override)),
    (16, "dolphinscheduler: which watch followed which instance (read by key)", _watch_instances),
    (
        17,
        "dolphinscheduler: schedules taken offline from chat, and their reminders",
        _create(ds_schedule_off),
    ),
    (
        18,
        "inbox: each queued message's lane, so a pull takes only what a lane has room for",
        _add_columns(wecom_inbox, "lane"),
    ),
    # Reserved versions, one per feature: 2 alerts · 3 wecom · 4 dolphinscheduler · 5 long tasks · 6 web UI.
    # A feature defines its tables in its own `agent/<feature>_tables.py` and adds its entry here.
]
