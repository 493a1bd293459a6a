"""AlertEvent: the one event model of the alert pipeline, and its JSON-line form.

One JSON object a line (what `xihe alerts replay` reads):

    {"at": "2026-12-02T09:00:05+08:00", "project": "etl", "workflow": "order_sync",
     "workflow_code": 1001, "instance_id": 101, "state": "FAILURE", "task": "load",
     "host": "10.0.0.11:1234", "error": "Connection refused", "retry_times": 3,
     "max_retry_times": 3, "environment": "prod"}

- `task` null (or missing): a workflow-instance event; `state` is the workflow's state
  (RUNNING_EXECUTION at start, then SUCCESS, FAILURE, STOP, ...). A workflow-level FAILURE carries
  the host, error and retry fields of the first task that exhausted its retries.
- `task` set: a task-attempt event; `state` is that attempt's state (RUNNING_EXECUTION when
  dispatched, then SUCCESS, FAILURE or KILL) and `retry_times` is the attempt number (0 = first run).
- Required: `at` (ISO 8601 with an offset), `workflow`, `instance_id`, `state` (a DolphinScheduler
  state name). Every other field may be null or missing.

The product's own sources (the watcher, the webhook, the scan) produce `agent.events.FailureEvent`,
which reads `state` as the workflow's and keeps the task's in `task_state`; `from_failure` maps it
onto this model at the edge, so the pipeline knows one vocabulary only.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from datetime import datetime
from typing import Any

from xihe.integrations.dolphinscheduler.states import KNOWN_STATES, WORKFLOW_RUNNING, workflow_state_name
from xihe.tools.dolphin.events import FailureEvent

REQUIRED = ("at", "workflow", "instance_id", "state")
DOCUMENTED = (
    "at",
    "project",
    "workflow",
    "workflow_code",
    "instance_id",
    "state",
    "task",
    "host",
    "error",
    "retry_times",
    "max_retry_times",
    "environment",
)


class EventError(ValueError):
    """An event that cannot be used, with what is wrong (`field`: problem)."""


@dataclass(frozen=True)
class AlertEvent:
    """One workflow-instance event (`task` empty) or task-attempt event (`task` set)."""

    at: datetime
    workflow: str
    instance_id: int
    state: str
    project: str = ""
    workflow_code: int = 0
    task: str = ""  # "" = workflow-instance event
    host: str = ""  # worker "ip:port"
    error: str = ""
    retry_times: int = 0  # task event: the attempt number; workflow FAILURE: of the task that failed it
    max_retry_times: int = 0
    environment: str = ""
    # Extensions the product's own sources fill in (optional in a replay file):
    failed_task: str = ""  # workflow FAILURE: the task that failed it, when the source knows
    log_tail: str = ""
    log_url: str = ""
    start_time: datetime | None = None
    end_time: datetime | None = None
    parent_stopped: bool = False
    source: str = "replay"  # replay | poller | webhook | scan

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
        for key in ("at", "start_time", "end_time"):
            if out[key] is not None:
                out[key] = out[key].isoformat()
        out["task"] = self.task or None
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AlertEvent:
        """Parse one JSON object; raises EventError naming the field. Unknown keys are ignored."""
        return parse_event(data)


_STR = ("project", "workflow", "task", "host", "error", "environment", "failed_task", "log_tail", "log_url")
_INT = ("workflow_code", "instance_id", "retry_times", "max_retry_times")
_TIME = ("at", "start_time", "end_time")
_FIELDS = frozenset(f.name for f in fields(AlertEvent))


def _time(key: str, value: Any) -> datetime:
    if isinstance(value, datetime):
        parsed = value
    else:
        if not isinstance(value, str):
            raise EventError(f"{key}: expected an ISO 8601 time, got {type(value).__name__}")
        try:
            parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise EventError(f"{key}: not an ISO 8601 time: {value[:40]!r}") from None
    if parsed.tzinfo is None:
        raise EventError(f"{key}: {value!s:.40} has no UTC offset (write e.g. +08:00 or Z)")
    return parsed


def _int(key: str, value: Any) -> int:
    if isinstance(value, bool):
        raise EventError(f"{key}: expected an integer, got a boolean")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    raise EventError(f"{key}: expected an integer, got {value!r:.40}")


def parse_event(data: Any) -> AlertEvent:
    """Validate one decoded JSON value against the event format; EventError says what is wrong."""
    if not isinstance(data, dict):
        raise EventError(f"expected a JSON object, got {type(data).__name__}")
    if "task_state" in data:  # the product's own FailureEvent form (older replay files)
        try:
            return from_failure(FailureEvent.from_dict({**data, "source": data.get("source") or "replay"}))
        except (TypeError, ValueError) as exc:
            raise EventError(str(exc)) from None
    missing = [k for k in REQUIRED if data.get(k) in (None, "")]
    if missing:
        raise EventError(f"missing required field(s) {', '.join(missing)}")
    values: dict[str, Any] = {}
    for key, value in data.items():
        if key not in _FIELDS or value is None:
            continue
        if key in _TIME:
            values[key] = _time(key, value)
        elif key in _INT:
            values[key] = _int(key, value)
        elif key in _STR:
            if isinstance(value, dict | list):
                raise EventError(f"{key}: expected a string, got {type(value).__name__}")
            values[key] = str(value)
        elif key == "parent_stopped":
            values[key] = bool(value)
        else:
            values[key] = str(value)
    state = workflow_state_name(values["state"].strip()).upper()
    if state not in KNOWN_STATES:
        raise EventError(f"state: unknown state {values['state'][:40]!r}")
    values["state"] = state
    for key in ("retry_times", "max_retry_times"):
        if values.get(key, 0) < 0:
            raise EventError(f"{key}: must not be negative")
    return AlertEvent(**values)


def unknown_fields(data: dict[str, Any]) -> list[str]:
    """Keys of a JSON event the format does not know (they are ignored)."""
    if "task_state" in data:
        return []
    return sorted(k for k in data if k not in _FIELDS)


def from_failure(fe: FailureEvent) -> AlertEvent:
    """Map the product's FailureEvent (workflow `state` + task `task_state`) onto the one model.

    While the workflow still runs, a reported task is one attempt: a task-attempt event with the
    task's state. Once the workflow has ended, the report is the workflow's own event (FAILURE,
    STOP, ...) naming the task that failed it. Raises EventError for a state nobody knows.
    """
    wf_state = workflow_state_name(fe.state).upper()
    task_state = workflow_state_name(fe.task_state).upper()
    common: dict[str, Any] = dict(
        at=fe.at,
        workflow=fe.workflow,
        instance_id=fe.instance_id,
        project=fe.project,
        workflow_code=fe.workflow_code,
        host=fe.host,
        error=fe.error,
        retry_times=fe.retry_times,
        max_retry_times=fe.max_retry_times,
        environment=fe.environment,
        log_tail=fe.log_tail,
        log_url=fe.log_url,
        start_time=fe.start_time,
        end_time=fe.end_time,
        parent_stopped=fe.parent_stopped,
        source=fe.source,
    )
    if fe.task and (not wf_state or wf_state in WORKFLOW_RUNNING):
        state = task_state or "FAILURE"  # the product reports only failed attempts without a state
        if state not in KNOWN_STATES:
            raise EventError(f"task_state: unknown state {fe.task_state[:40]!r}")
        return AlertEvent(**common, state=state, task=fe.task)
    state = wf_state or task_state
    if state not in KNOWN_STATES:
        raise EventError(f"state: unknown state {fe.state[:40]!r}")
    return AlertEvent(**common, state=state, failed_task=fe.task)
