"""The versioned migrations that create every table, and the table that records which ran.

Each migration names the tables (or DDL) it adds, so an existing database only ever moves forward.
`agent.db.migrate()` applies what is missing under a lock.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Column, Connection, Integer, String, Table, inspect, text

from xihe.agent.alert_tables import (
    alert_channel,
    alert_event,
    alert_maintenance,
    alert_outbox,
    alert_robot,
    alert_state,
)
from xihe.agent.core_tables import artifact, audit_event, memory, pending_action, task, task_step
from xihe.agent.dolphin_tables import ds_catalog, ds_catalog_sync, ds_watch
from xihe.agent.mail_tables import chat_mail
from xihe.agent.plan_tables import plan_change, plan_item
from xihe.agent.tables import UTCDateTime, metadata
from xihe.agent.wecom_tables import wecom_inbox, wecom_stream, wecom_ws_lease, wecom_ws_outbox

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
    (10, "terminal chats' mail: late messages waiting for their xihe chat", _create(chat_mail)),
    # Reserved versions, one per feature: 2 alerts · 3 wecom · 4 dolphinscheduler · 5 long tasks · 6 web UI.
    # A feature defines its tables in its own `agent/<feature>_tables.py` and adds its entry here.
]
