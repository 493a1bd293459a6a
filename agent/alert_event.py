"""AlertEvent: one event of a workflow run, the one shape every source hands to the alert pipeline.

The DolphinScheduler feature emits these (the watcher, the `/hooks/dolphinscheduler` webhook, the
failed-run scan) and `xihe alerts replay` reads them from a file; the alert pipeline consumes them.
Outside input becomes an AlertEvent only at its edge, validated there (the webhook body, a replay
line: `xihe.agent.alerts.event`). `to_dict`/`from_dict` are the form the pipeline stores its own
state in, read back as written.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class AlertEvent:
    """One workflow-instance event (`task` empty) or task-attempt event (`task` set)."""

    at: datetime
    workflow: str
    instance_id: int
    state: str  # a DolphinScheduler state name: the workflow's, or the attempt's when `task` is set
    project: str = ""
    workflow_code: int = 0
    task: str = ""  # "" = workflow-instance event
    host: str = ""  # worker "ip:port"
    error: str = ""
    retry_times: int = 0  # task event: the attempt number; workflow FAILURE: of the task that failed it
    max_retry_times: int = 0
    environment: str = ""
    # Extensions the product's own sources fill in (optional in a replay file):
    failed_task: str = ""  # workflow event: the task that failed it, when the source knows
    failed_task_state: str = ""  # and that task's own state (FAILURE, KILL, NEED_FAULT_TOLERANCE)
    log_tail: str = ""
    log_url: str = ""
    start_time: datetime | None = None
    end_time: datetime | None = None
    parent_stopped: bool = False
    source: str = "replay"  # replay | poller | webhook | scan
    business_date: str = (
        ""  # ISO date the run is for (DS scheduleTime less the workflow's offset), when known
    )
    rerun_by: str = ""  # a SUCCESS after a rerun: who reran it, when the source knows

    @property
    def is_task(self) -> bool:
        """A task-attempt event (else a workflow-instance event)."""
        return bool(self.task)

    @property
    def task_name(self) -> str:
        """The failed task this event names, for either kind ("" when unknown)."""
        return self.task or self.failed_task

    @property
    def exhausted(self) -> bool:
        """A FAILURE with no retries left (retry_times >= max_retry_times)."""
        return self.retry_times >= self.max_retry_times

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form; `task` is null for a workflow-instance event."""
        out = asdict(self)
        for key in TIMES:
            if out[key] is not None:
                out[key] = out[key].isoformat()
        out["task"] = self.task or None
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AlertEvent:
        """Inverse of `to_dict`, for what the bot stored itself (keys it does not know are skipped)."""
        values = {k: v for k, v in data.items() if k in FIELDS}
        for key in TIMES:
            if values.get(key) is not None:
                values[key] = datetime.fromisoformat(values[key])
        values["task"] = values.get("task") or ""
        return cls(**values)


TIMES = ("at", "start_time", "end_time")
FIELDS = frozenset(f.name for f in fields(AlertEvent))
