"""DolphinScheduler's tables (migration 4): watched runs and the workflow name catalog; (16) runs by instance."""

from __future__ import annotations

from sqlalchemy import JSON, BigInteger, Boolean, Column, Index, Integer, String, Table, Text

from xihe.agent.lease import lease_columns
from xihe.agent.tables import UTCDateTime, metadata

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
    *lease_columns(),  # the replica polling it in this cycle
    Column("notified_at", UTCDateTime),  # last progress message (throttle)
    Column("notified_text", Text),
    Column("schema_version", Integer, nullable=False, default=1),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
)
Index("ix_ds_watch_due", ds_watch.c.done, ds_watch.c.next_poll_at)

# Which watch followed workflow instance N? (`/status N` and the run tools read one watch by it, not the
# newest thousands.) Written with the watch whenever it learns an instance id; never removed before it.
ds_watch_instance = Table(
    "ds_watch_instance",
    metadata,
    Column("instance_id", BigInteger, primary_key=True, autoincrement=False),
    Column("watch_key", String(200), primary_key=True),
)

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

# Which DolphinScheduler schedules did someone take offline from chat, and when are they reminded that
# it is still off? One row per schedule; `/schedule WORKFLOW on` removes it (migration 17).
ds_schedule_off = Table(
    "ds_schedule_off",
    metadata,
    Column("project_code", BigInteger, primary_key=True),
    Column("schedule_id", BigInteger, primary_key=True),
    Column("project", String(200), nullable=False),
    Column("workflow", String(200), nullable=False),
    Column("definition_code", BigInteger, nullable=False),
    Column("conversation", String(200), nullable=False),  # where the reminder goes
    Column("user", String(200), nullable=False),  # who took it offline
    Column("off_at", UTCDateTime, nullable=False),
    Column("remind_at", UTCDateTime, nullable=False),
    Column("reminded_at", UTCDateTime),  # set by the replica that claimed the reminder
)
Index("ix_ds_schedule_off_due", ds_schedule_off.c.reminded_at, ds_schedule_off.c.remind_at)
