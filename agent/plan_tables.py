"""Long tasks' tables (migration 5): plan items and the append-only log of plan changes."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from xihe.agent.lease import lease_columns
from xihe.agent.tables import Id, UTCDateTime, metadata

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
    *lease_columns(),  # the worker holding the claim (e.g. task:12); after lease_until another may take it
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
