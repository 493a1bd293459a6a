"""The JSON-line form of an AlertEvent (what `xihe alerts replay` reads), validated at that edge,
and the mapping of a DolphinScheduler report onto the event.

One JSON object a line:

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

A report that gives the workflow's state and a task's state apart (DolphinScheduler's alert
plugin items, an older replay line with `task_state`) is mapped by `from_report`.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from xihe.agent.alert_event import FIELDS, AlertEvent
from xihe.integrations.dolphinscheduler.states import KNOWN_STATES, WORKFLOW_RUNNING, workflow_state_name

REQUIRED = ("at", "workflow", "instance_id", "state")
_STR = (
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
_INT = ("workflow_code", "instance_id", "retry_times", "max_retry_times")


class EventError(ValueError):
    """An event that cannot be used, with what is wrong (`field`: problem)."""


def _problem(text: str) -> PydanticCustomError:
    return PydanticCustomError("event", "{problem}", {"problem": text})


class EventLine(BaseModel):
    """One replay line. Unknown keys are ignored; null is the same as missing."""

    model_config = ConfigDict(extra="ignore")

    at: datetime = Field(description="when it happened, ISO 8601 with an offset")
    workflow: str = Field(description="workflow definition name")
    instance_id: int = Field(description="workflow instance id")
    state: str = Field(
        description="DolphinScheduler state: the workflow's, or the attempt's when `task` is set"
    )
    project: str = Field("", description="project name")
    workflow_code: int = Field(0, description="workflow definition code")
    task: str = Field("", description="the task of a task-attempt event; empty for a workflow event")
    host: str = Field("", description="worker ip:port")
    error: str = Field("", description="error line")
    retry_times: int = Field(
        0, description="the attempt number (workflow FAILURE: of the task that failed it)"
    )
    max_retry_times: int = Field(0, description="retries the task may take")
    environment: str = Field("", description="environment, when the workflow is not configured")
    failed_task: str = Field("", description="workflow event: the task that failed it")
    failed_task_state: str = Field("", description="that task's own state")
    log_tail: str = Field("", description="the end of the task's log")
    log_url: str = Field("", description="where the whole log is")
    start_time: datetime | None = Field(None, description="run start, ISO 8601 with an offset")
    end_time: datetime | None = Field(None, description="run end, ISO 8601 with an offset")
    parent_stopped: bool = Field(False, description="the parent workflow was stopped")
    source: str = Field("replay", description="replay | poller | webhook | scan")
    task_state: str = Field("", description="older lines: the task's state, `state` being the workflow's")
    business_date: str = Field("", description="the business date the run is for, YYYY-MM-DD")
    rerun_by: str = Field("", description="a SUCCESS after a rerun: who reran it")

    @field_validator("business_date", mode="before")
    @classmethod
    def _date(cls, value: Any) -> str:
        text = str(value).strip()
        try:
            return date.fromisoformat(text).isoformat() if text else ""
        except ValueError:
            raise _problem(f"business_date: not a YYYY-MM-DD date: {text[:40]!r}") from None

    @model_validator(mode="before")
    @classmethod
    def _present(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            raise _problem(f"expected a JSON object, got {type(data).__name__}")
        missing = [k for k in REQUIRED if data.get(k) in (None, "")]
        if missing:
            raise _problem(f"missing required field(s) {', '.join(missing)}")
        return {k: v for k, v in data.items() if v is not None}

    @field_validator("at", "start_time", "end_time", mode="before")
    @classmethod
    def _time(cls, value: Any) -> datetime:
        if isinstance(value, datetime):
            parsed = value
        else:
            if not isinstance(value, str):
                raise _problem(f"expected an ISO 8601 time, got {type(value).__name__}")
            try:
                parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
            except ValueError:
                raise _problem(f"not an ISO 8601 time: {value[:40]!r}") from None
        if parsed.tzinfo is None:
            raise _problem(f"{value!s:.40} has no UTC offset (write e.g. +08:00 or Z)")
        return parsed

    @field_validator(*_INT, mode="before")
    @classmethod
    def _int(cls, value: Any) -> int:
        if isinstance(value, bool):
            raise _problem("expected an integer, got a boolean")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return int(value.strip())
        raise _problem(f"expected an integer, got {value!r:.40}")

    @field_validator(*_STR, mode="before")
    @classmethod
    def _str(cls, value: Any) -> str:
        if isinstance(value, dict | list):
            raise _problem(f"expected a string, got {type(value).__name__}")
        return str(value)

    @field_validator("state", "source", "task_state", mode="before")
    @classmethod
    def _text(cls, value: Any) -> str:
        return str(value)

    @field_validator("parent_stopped", mode="before")
    @classmethod
    def _flag(cls, value: Any) -> bool:
        return bool(value)

    @field_validator("retry_times", "max_retry_times")
    @classmethod
    def _not_negative(cls, value: int) -> int:
        if value < 0:
            raise _problem("must not be negative")
        return value

    @field_validator("state")
    @classmethod
    def _known(cls, value: str) -> str:
        state = workflow_state_name(value.strip()).upper()
        if state not in KNOWN_STATES:
            raise _problem(f"unknown state {value[:40]!r}")
        return state


def parse_event(data: Any) -> AlertEvent:
    """Validate one decoded JSON value against the event format; EventError says what is wrong."""
    return _plain(data) or _validated(data)


def _validated(data: Any) -> AlertEvent:
    try:
        line = EventLine.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        raise EventError(f"{where}: {first['msg']}" if where else first["msg"]) from None
    if "task_state" in data:  # an older line: `state` is the workflow's, `task_state` the task's
        values = line.model_dump(exclude={"task_state", "failed_task", "failed_task_state"})
        return from_report(**values, task_state=line.task_state)
    return AlertEvent(**line.model_dump(exclude={"task_state"}))


_PLAIN_STR = frozenset((*_STR, "source"))
_PLAIN_INT = frozenset(_INT)
_TIME_FIELDS = frozenset(("at", "start_time", "end_time"))
_DEFAULTS = {name: field.default for name, field in EventLine.model_fields.items() if not field.is_required()}
del _DEFAULTS["task_state"]
# the fast path fills an AlertEvent's fields directly: it must know every one of them
_WHOLE = {*_DEFAULTS, *REQUIRED} == set(FIELDS) and not hasattr(AlertEvent, "__post_init__")


def _plain(data: Any) -> AlertEvent | None:
    """A line in the current format whose values have their JSON types, without pydantic; None
    for anything else (an older line, a value to convert, a problem), which `_validated` judges.

    The same event `_validated` makes: a stream of 10,000 lines parses ~3× faster (issue 30).
    tests/alerts/test_event.py compares the two on the storm streams and on edge cases.
    """
    if type(data) is not dict or "task_state" in data or not _WHOLE:
        return None
    values = dict(_DEFAULTS)
    for key, value in data.items():
        if value is None:  # null is the same as missing
            continue
        kind = type(value)
        if key in _PLAIN_STR:
            if kind is not str:
                return None
        elif key in _PLAIN_INT:
            if kind is not int or (value < 0 and key != "instance_id" and key != "workflow_code"):
                return None
        elif key in _TIME_FIELDS:
            if kind is not str:
                return None
            try:
                value = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
            except ValueError:
                return None
            if value.tzinfo is None:
                return None
        elif key == "state":
            if kind is not str:
                return None
            value = workflow_state_name(value.strip()).upper()
            if value not in KNOWN_STATES:
                return None
        elif key == "parent_stopped":
            value = bool(value)
        elif key == "business_date":
            return None  # a date to check: the validator's rule, in one place
        else:
            continue  # a key the format does not know: ignored
        values[key] = value
    if any(values.get(k) in (None, "") for k in REQUIRED):
        return None
    # every field is in `values` (_WHOLE): the object AlertEvent(**values) makes, without its frozen
    # __init__'s 22 object.__setattr__ calls (~2 µs of a line's ~4; issue 30)
    event = object.__new__(AlertEvent)
    event.__dict__.update(values)
    return event


def unknown_fields(data: dict[str, Any]) -> list[str]:
    """Keys of a JSON event the format does not know (they are ignored)."""
    if "task_state" in data:
        return []
    return sorted(k for k in data if k not in FIELDS)


def from_report(state: str, task: str = "", task_state: str = "", **event: Any) -> AlertEvent:
    """A DolphinScheduler report (the workflow's `state`, a `task` and its `task_state`) as the one event.

    While the workflow still runs, a reported task is one attempt: a task-attempt event with the
    task's state. Once the workflow has ended, the report is the workflow's own event (FAILURE,
    STOP, ...) naming the task that failed it. `event` holds the other AlertEvent fields. Raises
    EventError for a state nobody knows.
    """
    wf_state = workflow_state_name(state).upper()
    t_state = workflow_state_name(task_state).upper()
    if task and (not wf_state or wf_state in WORKFLOW_RUNNING):
        attempt = t_state or "FAILURE"  # DolphinScheduler reports only failed attempts without a state
        if attempt not in KNOWN_STATES:
            raise EventError(f"task_state: unknown state {task_state[:40]!r}")
        return AlertEvent(**event, state=attempt, task=task)
    final = wf_state or t_state
    if final not in KNOWN_STATES:
        raise EventError(f"state: unknown state {state[:40]!r}")
    return AlertEvent(**event, state=final, failed_task=task, failed_task_state=t_state)
