"""The pydantic model of one replay line (agent/alerts/event.py's format), the judge of every line the
fast path in `event._plain` does not take (an older line, a value to convert, a problem). Imported only
then: a replay of plain lines does not import pydantic (issue 30).
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from xihe.agent.alerts.linefields import INTEGERS as _INT
from xihe.agent.alerts.linefields import REQUIRED
from xihe.agent.alerts.linefields import STRINGS as _STR
from xihe.integrations.dolphinscheduler.states import KNOWN_STATES, workflow_state_name


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
