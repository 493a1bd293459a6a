"""FailureEvent: one failed (or stopped, or retrying) task of a workflow run, from any source.

The DolphinScheduler watcher, the `/hooks/dolphinscheduler` webhook and `xihe alerts replay` all
produce these; the alert pipeline consumes them. One JSON object per line in replay files.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from datetime import UTC, datetime
from typing import Any

_ERROR_LINE = re.compile(r"error|exception|failed|traceback", re.IGNORECASE)


def error_line(lines: Sequence[str], task: str, state: str) -> str:
    """What went wrong, from a failed task's log tail: its last error-looking line, else the bare fact."""
    errors = [ln for ln in lines if _ERROR_LINE.search(ln)]
    return errors[-1].strip()[:500] if errors else f"task {task} ended {state}"


def _parse_time(value: Any) -> datetime | None:
    if value in (None, ""):
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    text = str(value).replace("Z", "+00:00")
    parsed = datetime.fromisoformat(text)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


@dataclass(frozen=True)
class FailureEvent:
    """A workflow task that ended badly, as reported at `at`."""

    at: datetime
    project: str
    workflow: str
    workflow_code: int
    instance_id: int
    state: str  # workflow instance state when reported: FAILURE, STOP, RUNNING_EXECUTION (retry pending), ...
    task: str = ""
    host: str = ""  # worker host of the failed task, "ip:port"
    error: str = ""
    retry_times: int = 0
    max_retry_times: int = 0
    environment: str = ""
    task_state: str = ""  # FAILURE, KILL, STOP, NEED_FAULT_TOLERANCE...
    log_tail: str = ""
    log_url: str = ""
    start_time: datetime | None = None
    end_time: datetime | None = None
    parent_stopped: bool = False
    source: str = "poller"  # poller | webhook | scan | replay

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FailureEvent:
        """Build from a JSON object; unknown keys are an error naming them."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"unknown field(s) {', '.join(unknown)}")
        values = dict(data)
        for key in ("at", "start_time", "end_time"):
            if key in values:
                values[key] = _parse_time(values[key])
        if values.get("at") is None:
            raise ValueError("field 'at' is required")
        for key in ("workflow_code", "instance_id", "retry_times", "max_retry_times"):
            if key in values and values[key] is not None:
                values[key] = int(values[key])
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for key in ("at", "start_time", "end_time"):
            if out[key] is not None:
                out[key] = out[key].isoformat()
        return out
