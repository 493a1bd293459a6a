"""Pure decisions on one event: is it a final failure (classify) and which tier is it (tier_for)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from sys import intern
from typing import TYPE_CHECKING

from xihe.agent.alert_event import AlertEvent
from xihe.agent.alerts.maintenance import MaintenanceBook
from xihe.agent.alerts.model import Reason, Tier
from xihe.integrations.dolphinscheduler.states import PAUSING, STOPPING, TASK_SUCCEEDED

if TYPE_CHECKING:
    from xihe.config.workflows import Workflow, WorkflowsConfig


def idempotency_key(event: AlertEvent) -> str:
    """One key per (instance, task or failed task, state, attempt): a re-polled or re-posted event is a duplicate."""
    task = event.task or f"-{event.failed_task}"
    return f"{event.instance_id}:{task}:{event.state}:{event.retry_times}"


def _not_final(event: AlertEvent) -> tuple[Reason, str] | None:
    """Why `event` is not a final failure, or None when it is one (states.py holds the state vocabulary)."""
    state = event.state
    if event.parent_stopped:
        return Reason.PARENT_STOPPED, "the parent workflow was stopped"
    what = f"task {event.task}" if event.is_task else "workflow"
    if state == "FAILURE":
        if event.is_task and not event.exhausted:
            return (
                Reason.RETRY_PENDING,
                f"attempt {event.retry_times} of {event.max_retry_times} retries failed",
            )
        return None
    if state in STOPPING:
        return Reason.USER_STOP, f"{what} {state}"
    if state == "KILL":
        if (
            event.is_task
        ):  # a stop, or the failure strategy after another task failed: the workflow event decides
            return Reason.KILLED, f"{what} attempt killed"
        return Reason.USER_STOP, f"{what} KILL"
    if state in PAUSING:
        return Reason.USER_PAUSE, f"{what} {state}"
    if state == "NEED_FAULT_TOLERANCE":
        return Reason.FAILOVER_PENDING, "worker failover: the task is resubmitted elsewhere"
    if state in TASK_SUCCEEDED or state == "BLOCK":
        return Reason.NOT_FAILED, f"{what} {state}"
    return Reason.IN_PROGRESS, f"{what} {state}"


def classify(event: AlertEvent, book: MaintenanceBook, now: datetime) -> tuple[Reason, str]:
    """FINAL_FAILURE when the event should alert; otherwise the reason it is only recorded.

    Final: a workflow-level FAILURE, or a task attempt's FAILURE with retries exhausted
    (retry_times >= max_retry_times). Start, dispatch and intermediate failures never alert.
    """
    why = _not_final(event)
    if why is not None:  # its detail as one object per distinct text (a storm's records keep thousands)
        return why[0], intern(why[1])
    window = book.active(now, event)
    if window is not None:
        return Reason.MAINTENANCE, f"maintenance window {window}"
    return Reason.FINAL_FAILURE, ""


@dataclass(frozen=True)
class WorkflowIndex:
    """Workflows by code and by (project, name), built once per config load."""

    by_code: dict[int, Workflow]
    by_name: dict[tuple[str, str], Workflow]
    production: frozenset[str]  # access.yaml's production environments (AccessConfig.production_environments)

    @classmethod
    def build(cls, config: WorkflowsConfig, production: frozenset[str]) -> WorkflowIndex:
        """Index a WorkflowsConfig; `production` names the environments access.yaml marks production."""
        return cls(
            {w.code: w for w in config.workflows if w.code is not None},
            {(w.project, w.name): w for w in config.workflows},
            production,
        )

    def find(self, event: AlertEvent) -> Workflow | None:
        """The configured workflow of `event`, by definition code first, then by project and name."""
        return self.by_code.get(event.workflow_code) or self.by_name.get((event.project, event.workflow))


def environment_of(event: AlertEvent, wf: Workflow | None) -> str:
    """Configured environment wins over what the event carries."""
    return (wf.environment if wf is not None else event.environment or "").lower()


def tier_for(event: AlertEvent, wf: Workflow | None, production: frozenset[str]) -> tuple[Tier, Reason]:
    """Tier of a final failure: explicit YAML tier > production core (P0) > retried and exhausted (P2) > P1.

    `production`: the environments access.yaml marks `production: true`."""
    if wf is not None and wf.tier != "auto":
        return Tier(wf.tier), Reason.TIER_EXPLICIT
    if wf is not None and wf.core and environment_of(event, wf) in production:
        return Tier.P0, Reason.TIER_PROD_CORE
    if event.retry_times > 0 and event.exhausted:
        return Tier.P2, Reason.TIER_RETRIED_EXHAUSTED
    if wf is None:
        return Tier.P1, Reason.TIER_UNKNOWN_WORKFLOW
    return Tier.P1, Reason.TIER_DEFAULT
