"""The agent's own records (migration 1, columns added by 8): tasks and their steps, the audit
trail, pending actions, artifacts and memory.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from xihe.agent.lease import lease_columns
from xihe.agent.tables import Id, UTCDateTime, metadata

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
    *lease_columns(),  # which replica works on it now
    Column("retry_budget", Integer, nullable=False, default=0),
    # what came of it, beyond the lifecycle status: refused | failed | run FAILURE | run SUCCESS ... (or null)
    Column("outcome", String(40)),
    Column("runs", JSON),  # ids of the runs its steps started (DolphinScheduler instances), in order
    Column("schema_version", Integer, nullable=False, default=1),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
)
Index("ix_task_conv", task.c.conversation, task.c.id)
Index("ix_task_status", task.c.status, task.c.lease_until)

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
    Column("closed_by", String(120)),  # who rejected or cancelled it
    Column("close_note", Text),  # the reason a rejecter gave ("" or NULL: none)
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
