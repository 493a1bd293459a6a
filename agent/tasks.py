"""Durable tasks and their append-only steps: the records and their states.

`task` answers "where is it now"; `task_step` answers "what happened at each step". A step attempt
writes a `running` row before its side effect and a `done`/`failed` row after; nothing is updated
in place, so a rerun never hides why the previous attempt failed. The rows are kept by
`xihe.agent.task_store.TaskStore` (tasks and leases) and `xihe.agent.step_log.StepLog` (steps).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any


class TaskStatus(StrEnum):
    """Where a task is (the `task.status` column holds these values)."""

    PENDING = "pending"
    RUNNING = "running"
    AWAITING_CONFIRMATION = "awaiting_confirmation"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


class StepStatus(StrEnum):
    """A `task_step` row: an attempt starting (`running`) or its outcome."""

    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


# task kinds: free text for the model, an explicit command that may act, a command that only reads (/status)
CHAT, COMMAND, QUERY = "chat", "command", "query"

ACTIVE = (TaskStatus.PENDING, TaskStatus.RUNNING, TaskStatus.AWAITING_CONFIRMATION)
FINISHED = (TaskStatus.DONE, TaskStatus.FAILED, TaskStatus.CANCELLED)


@dataclass(frozen=True)
class Task:
    """A unit of work started by one message or command."""

    id: int
    kind: str
    status: TaskStatus
    current_step: str | None
    owner: str
    conversation: str
    channel: str
    goal: str
    reply: str | None
    error: str | None
    lease_owner: str | None
    lease_until: datetime | None
    retry_budget: int
    created_at: datetime
    updated_at: datetime
    outcome: str | None = None  # refused | failed | run FAILURE | run SUCCESS ... (see `shown_status`)
    runs: tuple[int, ...] = ()  # runs its steps started (DolphinScheduler instance ids)

    @property
    def shown_status(self) -> str:
        """What people read: the lifecycle status, and what came of it when that matters.

        `done · refused`, `done · failed`, `done · run FAILURE`; a plain `done` only when the
        last action ran and (for a followed run) the run succeeded. A task that failed (its model
        was lost) after starting a run shows how the run ended: `failed · run SUCCESS`.
        """
        if self.status == TaskStatus.FAILED:  # a run it started still ends, and shows how
            return (
                f"failed · {self.outcome}" if self.outcome and self.outcome.startswith("run ") else "failed"
            )
        if self.outcome and self.outcome != "run SUCCESS":
            return f"{self.status} · {self.outcome}"
        return self.status


@dataclass(frozen=True)
class TaskStep:
    """One row of the step log: an attempt starting (`running`) or its outcome."""

    id: int
    task_id: int
    step_key: str
    attempt: int
    status: StepStatus
    tool_name: str
    idempotency_key: str
    input_digest: str | None
    input_preview: str | None
    output_digest: str | None
    output_ref: str | None
    output_text: str | None
    error: str | None
    external_ids: dict[str, Any] | None
    started_at: datetime
    finished_at: datetime | None
    duration_ms: int | None


def run_ids(external_ids: dict[str, Any] | None) -> list[int]:
    """Run ids named by a step's external ids (`instance_id`, `instance_ids`)."""
    found: list[int] = []
    for key, value in (external_ids or {}).items():
        if "instance" in key:
            for item in value if isinstance(value, list | tuple) else [value]:
                if isinstance(item, int) or (isinstance(item, str) and item.isdigit()):
                    found.append(int(item))
    return found
