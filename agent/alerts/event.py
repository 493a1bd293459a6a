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

from dataclasses import MISSING, fields
from datetime import datetime
from sys import intern as _intern
from typing import Any

from xihe.agent.alert_event import FIELDS, AlertEvent
from xihe.agent.alerts.linefields import INTEGERS as _INT
from xihe.agent.alerts.linefields import REQUIRED
from xihe.agent.alerts.linefields import STRINGS as _STR
from xihe.integrations.dolphinscheduler.states import KNOWN_STATES, WORKFLOW_RUNNING, workflow_state_name


class EventError(ValueError):
    """An event that cannot be used, with what is wrong (`field`: problem)."""


def parse_event(data: Any) -> AlertEvent:
    """Validate one decoded JSON value against the event format; EventError says what is wrong."""
    return _plain(data) or _validated(data)


def _validated(data: Any) -> AlertEvent:
    from pydantic import ValidationError

    from xihe.agent.alerts.eventline import EventLine

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
_BLANK = (None, "")
# AlertEvent's defaults, which are EventLine's (agent/alerts/eventline.py, not imported here: pydantic;
# tests/alerts/test_event.py holds the two equal)
_DEFAULTS = {f.name: f.default for f in fields(AlertEvent) if f.default is not MISSING}
# the fast path fills an AlertEvent's fields directly: it must know every one of them
_WHOLE = {*_DEFAULTS, *REQUIRED} == set(FIELDS) and not hasattr(AlertEvent, "__post_init__")
# every field in AlertEvent's order (a required one None until the line gives it): an event filled in
# this order shares its attribute keys with the others, as one AlertEvent(...) made does, and each
# read of an attribute costs ~half that of an event filled in another order (CPython's split dicts)
_BLANK_EVENT = {f.name: _DEFAULTS.get(f.name) for f in fields(AlertEvent)}


def _plain(data: Any) -> AlertEvent | None:
    """A line in the current format whose values have their JSON types, without pydantic; None
    for anything else (an older line, a value to convert, a problem), which `_validated` judges.

    The same event `_validated` makes: a stream of 10,000 lines parses ~3× faster (issue 30).
    tests/alerts/test_event.py compares the two on the storm streams and on edge cases.
    """
    if type(data) is not dict or "task_state" in data or not _WHOLE:
        return None
    # filled in place: every field is in `values` (_WHOLE), so this is the object AlertEvent(**values)
    # makes, without its frozen __init__'s 22 object.__setattr__ calls (~2 µs of a line's ~4; issue 30)
    event = object.__new__(AlertEvent)
    values = event.__dict__
    values.update(_BLANK_EVENT)
    for key, value in data.items():
        if value is None:  # null is the same as missing
            continue
        kind = type(value)
        if key in _PLAIN_STR:
            if kind is not str:
                return None
            # one object per distinct text: a storm repeats the same names, hosts and errors thousands
            # of times (less memory to walk, equal texts compared by identity, each hashed once)
            value = _intern(value)
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
            value = value.strip()
            if value not in KNOWN_STATES:  # a state's own name (the common case) is used as it is
                value = workflow_state_name(value).upper()
                if value not in KNOWN_STATES:
                    return None
            value = _intern(value)
        elif key == "parent_stopped":
            value = bool(value)
        elif key == "business_date":
            return None  # a date to check: the validator's rule, in one place
        else:
            continue  # a key the format does not know: ignored
        values[key] = value
    for key in REQUIRED:  # a loop, not any(<generator>): ~0.5 µs a line (issue 30)
        if values.get(key) in _BLANK:
            return None
    return event


def unknown_fields(data: dict[str, Any]) -> list[str]:
    """Keys of a JSON event the format does not know (they are ignored)."""
    if "task_state" in data or data.keys() <= FIELDS:  # the common case: a set comparison in C
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
