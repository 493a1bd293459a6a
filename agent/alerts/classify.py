"""Pure decisions on one event: is it a final failure (classify) and which tier is it (tier_for)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from agent.alerts.maintenance import MaintenanceBook
from agent.alerts.model import Reason, Tier
from agent.events import FailureEvent
from config.workflows import Workflow, WorkflowsConfig

# DolphinScheduler WorkflowExecutionStatus names (reference §8.1) that mean "still going".
RUNNING_STATES = frozenset(
    {
        "SUBMITTED_SUCCESS",
        "RUNNING_EXECUTION",
        "READY_PAUSE",
        "DELAY_EXECUTION",
        "SERIAL_WAIT",
        "READY_BLOCK",
        "WAIT_TO_RUN",
        "FAILOVER",
        "RUNNING",
    }
)
STOP_STATES = frozenset({"STOP", "READY_STOP"})
SUCCESS_STATES = frozenset({"SUCCESS", "FORCED_SUCCESS"})
PROD_ENVIRONMENTS = frozenset({"prod", "production", "prd"})


def idempotency_key(event: FailureEvent) -> str:
    """One key per (instance, task, state, retry): a re-polled or re-posted event is a duplicate."""
    return f"{event.instance_id}:{event.task}:{event.task_state or event.state}:{event.retry_times}"


def classify(event: FailureEvent, book: MaintenanceBook, now: datetime) -> tuple[Reason, str]:
    """FINAL_FAILURE when the event should alert; otherwise the reason it is only recorded."""
    state, task_state = event.state.upper(), event.task_state.upper()
    if event.parent_stopped:
        return Reason.PARENT_STOPPED, "the parent workflow was stopped"
    if state in STOP_STATES or task_state == "STOP":
        return Reason.USER_STOP, f"workflow {state or '-'} / task {task_state or '-'}"
    if task_state == "KILL" and state not in ("FAILURE",):
        return Reason.USER_STOP, "task killed by a stop"
    if state in ("PAUSE", "READY_PAUSE") or task_state == "PAUSE":
        return Reason.USER_PAUSE, f"workflow {state}"
    if task_state == "NEED_FAULT_TOLERANCE":
        return Reason.FAILOVER_PENDING, "worker failover: the task is resubmitted elsewhere"
    if state in SUCCESS_STATES or task_state in SUCCESS_STATES:
        return Reason.NOT_FAILED, f"workflow {state}"
    if state in RUNNING_STATES:
        if task_state in ("", "FAILURE") and event.retry_times < event.max_retry_times:
            return Reason.RETRY_PENDING, f"retry {event.retry_times}/{event.max_retry_times} pending"
        if task_state not in ("", "FAILURE"):
            return Reason.NOT_FAILED, f"task {task_state} while workflow {state}"
        # retries exhausted: the task failed for good even though the workflow still runs (reference §11.4)
    elif state != "FAILURE":
        return Reason.NOT_FAILED, f"workflow state {state or '-'}"
    window = book.active(now, event)
    if window is not None:
        return Reason.MAINTENANCE, f"maintenance window {window}"
    return Reason.FINAL_FAILURE, ""


@dataclass(frozen=True)
class WorkflowIndex:
    """Workflows by code and by (project, name), built once per config load."""

    by_code: dict[int, Workflow]
    by_name: dict[tuple[str, str], Workflow]

    @classmethod
    def build(cls, config: WorkflowsConfig) -> WorkflowIndex:
        """Index a WorkflowsConfig."""
        return cls(
            {w.code: w for w in config.workflows if w.code is not None},
            {(w.project, w.name): w for w in config.workflows},
        )

    def find(self, event: FailureEvent) -> Workflow | None:
        """The configured workflow of `event`, by definition code first, then by project and name."""
        return self.by_code.get(event.workflow_code) or self.by_name.get((event.project, event.workflow))


def environment_of(event: FailureEvent, wf: Workflow | None) -> str:
    """Configured environment wins over what the event carries."""
    return (wf.environment if wf is not None else event.environment or "").lower()


def tier_for(event: FailureEvent, wf: Workflow | None) -> tuple[Tier, Reason]:
    """Tier of a final failure: explicit YAML tier > production core (P0) > retried and exhausted (P2) > P1."""
    if wf is not None and wf.tier != "auto":
        return Tier(wf.tier), Reason.TIER_EXPLICIT
    if wf is not None and wf.core and environment_of(event, wf) in PROD_ENVIRONMENTS:
        return Tier.P0, Reason.TIER_PROD_CORE
    if event.retry_times > 0 and event.retry_times >= event.max_retry_times:
        return Tier.P2, Reason.TIER_RETRIED_EXHAUSTED
    if wf is None:
        return Tier.P1, Reason.TIER_UNKNOWN_WORKFLOW
    return Tier.P1, Reason.TIER_DEFAULT
