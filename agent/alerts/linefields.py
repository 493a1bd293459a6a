"""The field groups of a replay line (the format in agent/alerts/event.py), shared by the fast path there
and the validator (agent/alerts/eventline.py), which event.py imports only when a line needs it."""

from __future__ import annotations

REQUIRED = ("at", "workflow", "instance_id", "state")
STRINGS = (  # text fields (`state`, `source`, `business_date` have rules of their own)
    "project",
    "workflow",
    "task",
    "host",
    "error",
    "environment",
    "failed_task",
    "failed_task_state",
    "log_tail",
    "log_url",
    "rerun_by",
)
INTEGERS = ("workflow_code", "instance_id", "retry_times", "max_retry_times")
