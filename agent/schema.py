"""Every table xihe writes, and the versioned migrations that create them.

One `metadata`; each migration names the tables (or DDL) it adds, so an existing database only
ever moves forward. `agent.db.migrate()` applies what is missing under a lock.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Connection,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    inspect,
    text,
)
from sqlalchemy.types import TypeDecorator


class UTCDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes on every back end (SQLite stores naive text)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the store; pass an aware UTC datetime")
        return (
            value.astimezone(UTC) if dialect.name != "sqlite" else value.astimezone(UTC).replace(tzinfo=None)
        )

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


metadata = MetaData()
Id = BigInteger().with_variant(Integer, "sqlite")  # SQLite autoincrement needs INTEGER PRIMARY KEY

schema_migrations = Table(
    "schema_migrations",
    metadata,
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("description", String(200), nullable=False),
    Column("applied_at", UTCDateTime, nullable=False),
)

# What is this task, who owns it, how far did it get? (resume reads status + current_step)
task = Table(
    "task",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("kind", String(40), nullable=False),
    Column(
        "status", String(30), nullable=False
    ),  # pending|running|awaiting_confirmation|failed|done|cancelled
    Column("current_step", String(120)),
    Column("owner", String(120), nullable=False),
    Column("conversation", String(200), nullable=False),
    Column("channel", String(40), nullable=False, default="cli"),
    Column("goal", Text, nullable=False, default=""),  # the user's words that started it
    Column("reply", Text),  # the last thing the bot said for it
    Column("error", Text),
    Column("lease_owner", String(120)),
    Column("lease_expires_at", UTCDateTime),
    Column("retry_budget", Integer, nullable=False, default=0),
    # what came of it, beyond the lifecycle status: refused | failed | run FAILURE | run SUCCESS ... (or null)
    Column("outcome", String(40)),
    Column("runs", JSON),  # ids of the runs its steps started (DolphinScheduler instances), in order
    Column("schema_version", Integer, nullable=False, default=1),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
)
Index("ix_task_conv", task.c.conversation, task.c.id)
Index("ix_task_status", task.c.status, task.c.lease_expires_at)

# What happened at each step, attempt by attempt? Append-only: a rerun adds rows.
task_step = Table(
    "task_step",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("task_id", ForeignKey("task.id", ondelete="CASCADE"), nullable=False),
    Column("step_key", String(120), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("status", String(20), nullable=False),  # running|done|failed
    Column("tool_name", String(80), nullable=False),
    Column("idempotency_key", String(200), nullable=False),
    Column("input_digest", String(64)),
    Column("input_preview", Text),  # redacted, truncated arguments
    Column("output_digest", String(64)),
    Column("output_ref", String(64)),  # artifact id of the full output
    Column("output_text", Text),  # what the model saw: the whole output when under the cap
    Column("error", Text),
    Column("external_ids", JSON),
    Column("started_at", UTCDateTime, nullable=False),
    Column("finished_at", UTCDateTime),
    Column("duration_ms", Integer),
)
Index("ix_step_task", task_step.c.task_id, task_step.c.step_key, task_step.c.id)

# Who did what, through which tool, with what result, and why was it allowed?
audit_event = Table(
    "audit_event",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("at", UTCDateTime, nullable=False),
    Column("kind", String(40), nullable=False),  # tool_call|gate|command|confirm|config|alert_push|...
    Column("actor", String(120), nullable=False),
    Column("task_id", BigInteger),
    Column("step_key", String(120)),
    Column("intent", Text),
    Column("tool", String(80)),
    Column("args_redacted", JSON),
    Column("outcome", String(40), nullable=False),
    Column("reason", Text),
    Column("result_digest", String(64)),
    Column("duration_ms", Integer),
    Column("state_before", String(40)),
    Column("state_after", String(40)),
    Column("external_ids", JSON),
    Column("detail", JSON),
)
Index("ix_audit_at", audit_event.c.at)
Index("ix_audit_task", audit_event.c.task_id)

# Which risky call is waiting for whose yes, bound to what exact arguments, until when?
pending_action = Table(
    "pending_action",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("task_id", ForeignKey("task.id", ondelete="CASCADE"), nullable=False),
    Column("step_key", String(120), nullable=False),
    Column("user_id", String(120), nullable=False),
    Column("conversation", String(200), nullable=False),
    Column("tool", String(80), nullable=False),
    Column("args_json", Text, nullable=False),  # canonical JSON of the bound arguments
    Column("args_digest", String(64), nullable=False),
    Column("environment", String(40), nullable=False, default=""),
    Column("reason", Text, nullable=False),
    Column("needs_approval", Boolean, nullable=False, default=False),
    Column("status", String(20), nullable=False),  # pending|confirmed|executed|expired|cancelled|rejected
    Column("confirmed_at", UTCDateTime),
    Column("approved_by", String(120)),
    Column("approved_at", UTCDateTime),
    Column("expires_at", UTCDateTime, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    UniqueConstraint("task_id", "step_key", name="uq_pending_step"),
)
Index("ix_pending_user", pending_action.c.user_id, pending_action.c.status)

# Where is the full output a preview was cut from?
artifact = Table(
    "artifact",
    metadata,
    Column("id", String(64), primary_key=True),  # short id derived from sha256 + task
    Column("task_id", BigInteger),
    Column("step_key", String(120)),
    Column("owner", String(120), nullable=False, default=""),
    Column("name", String(200), nullable=False, default=""),
    Column("sha256", String(64), nullable=False),
    Column("size", BigInteger, nullable=False),
    Column("preview", Text, nullable=False),
    Column("content", LargeBinary, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
)

# What does the bot know about this owner, from where, since when? (history kept: current=false)
memory = Table(
    "memory",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("owner", String(120), nullable=False),
    Column("key", String(200), nullable=False),
    Column("value", Text, nullable=False),
    Column("source", String(200), nullable=False),
    Column("current", Boolean, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
)
Index("ix_memory_owner_key", memory.c.owner, memory.c.key, memory.c.current)

# ---- alerts (migration 2) ----------------------------------------------------------------------
# What does the alert pipeline remember between events? (held instance messages, open windows,
# host hit lists, dedupe keys; `due_at` drives window ends and expiry; `token` changes on every put)
alert_state = Table(
    "alert_state",
    metadata,
    Column("ns", String(16), primary_key=True),  # seen|inst|host|node|fp|p2
    Column("key", String(500), primary_key=True),
    Column("payload", Text, nullable=False),  # JSON of the record (agent.alerts.state)
    Column("due_at", UTCDateTime),
    Column("token", String(32), nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
)
Index("ix_alert_state_due", alert_state.c.due_at)

# Which notification waits to go out, which went, how and when? One row per (instance or window, tier, channel).
alert_outbox = Table(
    "alert_outbox",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("key", String(500), nullable=False, unique=True),
    Column("kind", String(20), nullable=False),  # instance|aggregate|summary|node|manual
    Column("tier", String(4), nullable=False),
    Column("channel", String(80), nullable=False),
    Column("subject", Text, nullable=False),
    Column("text", Text, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("due_at", UTCDateTime, nullable=False),
    Column("status", String(10), nullable=False),  # pending|sent
    Column("attempts", Integer, nullable=False, default=0),
    Column("lease_owner", String(120), nullable=False, default=""),
    Column("lease_until", UTCDateTime),
    Column("last_error", Text, nullable=False, default=""),
    Column("sent_at", UTCDateTime),
    Column("sent_via", String(10), nullable=False, default=""),  # robot|email
    Column("force_email", Boolean, nullable=False, default=False),
)
Index("ix_alert_outbox_due", alert_outbox.c.status, alert_outbox.c.due_at)

# Which maintenance windows were opened in chat, by whom, over what, and when did they close?
alert_maintenance = Table(
    "alert_maintenance",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),  # the number /maint shows and /maint off takes
    Column("window_id", String(300), nullable=False, unique=True),
    Column("start_at", UTCDateTime, nullable=False),
    Column("end_at", UTCDateTime, nullable=False),
    Column("scope_kind", String(20), nullable=False),  # all|project|workflow|host
    Column("scope_value", String(200), nullable=False, default=""),
    Column("source", String(20), nullable=False),  # chat
    Column("created_by", String(120), nullable=False, default=""),
    Column("note", Text, nullable=False, default=""),
    Column("closed_at", UTCDateTime),  # /maint off or expiry (audited once)
    Column("closed_by", String(120)),  # a user, or "expired"
)
Index("ix_alert_maintenance_end", alert_maintenance.c.end_at)

# Is a channel's robot answering, or do its alerts go by e-mail? (shared by replicas, survives restarts)
alert_channel = Table(
    "alert_channel",
    metadata,
    Column("channel", String(80), primary_key=True),
    Column("mode", String(10), nullable=False),  # robot|email
    Column("failures", Integer, nullable=False),  # consecutive failed rows
    Column("last_probe_at", UTCDateTime),
    Column("updated_at", UTCDateTime, nullable=False),
)

# Which pushes went to each robot in the last minute? (WeCom's 20/min, shared by replicas)
alert_robot = Table(
    "alert_robot",
    metadata,
    Column("robot", String(120), primary_key=True),  # the env variable naming the robot key
    Column("sent", Text, nullable=False),  # JSON list of ISO attempt times within the last window
    Column("updated_at", UTCDateTime, nullable=False),
)

# What happened to every failure event and every notification, and why? (pushed, folded, suppressed, sent)
alert_event = Table(
    "alert_event",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("at", UTCDateTime, nullable=False),
    Column("kind", String(20), nullable=False),  # decision|delivery
    Column("event_key", String(500), nullable=False, default=""),
    Column("instance_id", BigInteger),
    Column("workflow", String(200), nullable=False, default=""),
    Column("task", String(200), nullable=False, default=""),
    Column("reason", String(40), nullable=False),  # agent.alerts.model.Reason, or sent|send_failed
    Column("tier", String(4)),
    Column("detail", Text, nullable=False, default=""),
    Column("notification_key", String(500), nullable=False, default=""),
    Column("holder", String(120), nullable=False, default=""),
)
Index("ix_alert_event_at", alert_event.c.at)
Index("ix_alert_event_instance", alert_event.c.instance_id)

# ---- wecom (migration 3) ------------------------------------------------------------------------
# Which WeCom callbacks were seen (a retry never runs twice), and which still wait for a worker?
wecom_inbox = Table(
    "wecom_inbox",
    metadata,
    Column("key", String(200), primary_key=True),  # channel:msgid
    Column("seen_at", UTCDateTime, nullable=False),
    Column("status", String(20), nullable=False),  # seen|queued|handling|done
    Column("payload", JSON),  # the verified inbound message while it waits
    Column("holder", String(120)),  # replica that will handle it
    Column("lease_expires_at", UTCDateTime),  # after this another replica may take it
    Column("finished_at", UTCDateTime),
)
Index("ix_wecom_inbox_status", wecom_inbox.c.status, wecom_inbox.c.lease_expires_at)

# What has the AI bot streamed for a message (any replica answers the refresh), and may we still reply?
wecom_stream = Table(
    "wecom_stream",
    metadata,
    Column("id", String(64), primary_key=True),  # stream id we gave WeCom
    Column("msgid", String(200), nullable=False, unique=True),  # the message that opened it
    Column("conversation", String(200), nullable=False, default=""),
    Column("content", Text, nullable=False, default=""),
    Column("finish", Boolean, nullable=False, default=False),
    Column("response_url", Text, nullable=False, default=""),  # one-shot reply capability (1 h)
    Column("response_used", Boolean, nullable=False, default=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
)
Index("ix_wecom_stream_conv", wecom_stream.c.conversation, wecom_stream.c.created_at)

# ---- wecom long connection (migration 7) ---------------------------------------------------------
# Which replica holds the AI bot's one long connection, until when? (WeCom kicks an older connection)
wecom_ws_lease = Table(
    "wecom_ws_lease",
    metadata,
    Column("name", String(200), primary_key=True),  # aibot:<bot id>
    Column("holder", String(120), nullable=False, default=""),
    Column("expires_at", UTCDateTime, nullable=False),  # renewed on every heartbeat
    Column("acquired_at", UTCDateTime, nullable=False),
)

# Which frames did a replica without the connection leave for the holder to send? (late results)
wecom_ws_outbox = Table(
    "wecom_ws_outbox",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("name", String(200), nullable=False),  # aibot:<bot id>
    Column("frame", JSON, nullable=False),  # {cmd, headers: {req_id}, body}
    Column("created_at", UTCDateTime, nullable=False),
    Column("sent_at", UTCDateTime),
)
Index("ix_wecom_ws_outbox_pending", wecom_ws_outbox.c.name, wecom_ws_outbox.c.sent_at, wecom_ws_outbox.c.id)

# ---- long tasks (migration 5) -------------------------------------------------------------------
# What is left to do for this task, in what order, who holds each item and what proves it is done?
plan_item = Table(
    "plan_item",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("task_id", ForeignKey("task.id", ondelete="CASCADE"), nullable=False),  # the plan's task
    Column("seq", Integer, nullable=False),  # 1, 2, ... within the plan; what the model and /plan name
    Column("description", Text, nullable=False),
    Column("depends_on", JSON, nullable=False),  # seqs of items that existed when this one was added
    Column("status", String(20), nullable=False),  # pending|in_progress|completed|failed|cancelled
    Column("owner", String(120)),  # the worker holding the claim (e.g. task:12)
    Column("lease_expires_at", UTCDateTime),  # after this another worker may reclaim it
    Column("evidence", JSON),  # the checked evidence of completion ({kind, ..., checked})
    Column("reason", Text),  # why it failed or was dropped
    Column("created_key", String(200)),  # idempotency key of the step that added it (crash lookup)
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    UniqueConstraint("task_id", "seq", name="uq_plan_item_seq"),
)
Index("ix_plan_item_key", plan_item.c.created_key)

# How did the plan change, when, by whom and why? (append-only: added, claimed, replaced, dropped ...)
plan_change = Table(
    "plan_change",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("task_id", BigInteger, nullable=False),
    Column("seq", Integer, nullable=False),
    Column("change", String(20), nullable=False),
    Column("actor", String(120), nullable=False),
    Column("reason", Text),
    Column("detail", JSON),
    Column("at", UTCDateTime, nullable=False),
)
Index("ix_plan_change_task", plan_change.c.task_id, plan_change.c.id)

# ---- dolphinscheduler (migration 4) ------------------------------------------------------------
# Which DolphinScheduler runs is the bot following, for which conversation, and which replica polls
# each one now? One row per started run or serial backfill, keyed by its startParams marker.
ds_watch = Table(
    "ds_watch",
    metadata,
    Column("key", String(200), primary_key=True),  # marker "<task>:<step>" carried in startParams
    Column("task_id", String(40), nullable=False),
    Column("conversation", String(200), nullable=False),  # where the final state is reported
    Column("project", String(200), nullable=False),
    Column("project_code", BigInteger, nullable=False),
    Column("workflow", String(200), nullable=False),
    Column("definition_code", BigInteger, nullable=False),
    Column("started_at", UTCDateTime, nullable=False),  # when the start was sent (discovery bound)
    Column("next_poll_at", UTCDateTime, nullable=False),
    Column("done", Boolean, nullable=False, default=False),
    Column("state", JSON, nullable=False),  # the rest of the Watch: instance ids, states, backoff ...
    Column("lease_owner", String(120)),  # the replica polling it in this cycle
    Column("lease_expires_at", UTCDateTime),
    Column("notified_at", UTCDateTime),  # last progress message (throttle)
    Column("notified_text", Text),
    Column("schema_version", Integer, nullable=False, default=1),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
)
Index("ix_ds_watch_due", ds_watch.c.done, ds_watch.c.next_poll_at)

# Which DolphinScheduler definition does a workflow name mean, with what code, and is it online?
ds_catalog = Table(
    "ds_catalog",
    metadata,
    Column("project", String(200), primary_key=True),
    Column("name", String(200), primary_key=True),
    Column("code", BigInteger, nullable=False),
    Column("project_code", BigInteger, nullable=False),
    Column("release_state", String(20), nullable=False),  # ONLINE | OFFLINE
    Column("synced_at", UTCDateTime, nullable=False),
)

# When did the last name sync finish? (one row; replicas' syncs also take turns on it)
ds_catalog_sync = Table(
    "ds_catalog_sync",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("synced_at", UTCDateTime),
)

Migration = tuple[int, str, Callable[[Connection], None]]


def _create(*tables: Table) -> Callable[[Connection], None]:
    def run(conn: Connection) -> None:
        metadata.create_all(conn, tables=list(tables))

    return run


def _add_columns(table: Table, *names: str) -> Callable[[Connection], None]:
    """Add columns defined above to a table created by an earlier migration (a new store has them already)."""

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
    # Reserved versions, one per feature: 2 alerts · 3 wecom · 4 dolphinscheduler · 5 long tasks · 6 web UI.
    # A feature defines its tables above this list, in its own banner block, and adds its entry here.
]
