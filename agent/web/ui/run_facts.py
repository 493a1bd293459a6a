"""What `/ui/runs/ID` says about a run: read from DolphinScheduler when the page is opened.

The state, workflow, business date, start/end/duration, and each failed task with its host, retries,
error line and log tail (paged from `/log/detail` now, not the copy an alert kept). When
DolphinScheduler is not configured or cannot be read, `problem` says why and the page shows what
the bot itself recorded (its tasks and alerts).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from xihe.agent.deps import Deps
from xihe.agent.errors import BotError, DolphinError
from xihe.integrations.dolphinscheduler.states import TASK_FAILED, TASK_SUCCEEDED, is_terminal
from xihe.tools.dolphin.dates import run_date_label
from xihe.tools.dolphin.error_line import error_line
from xihe.tools.dolphin.service import locate, service_of, workflow_of

_FAILED = frozenset({"FAILURE", "KILL", "NEED_FAULT_TOLERANCE"})
_HALTED = frozenset({"STOP", "PAUSE", "READY_STOP", "READY_PAUSE"})


def state_class(state: str) -> str:
    """The badge class of a DolphinScheduler state: red for a failure, green for success."""
    if state in _FAILED or state in TASK_FAILED:
        return "s-failed"
    if state in TASK_SUCCEEDED or state == "SUCCESS":
        return "s-done"
    if state in _HALTED:
        return "s-awaiting_confirmation"
    return "s-running"


@dataclass(frozen=True)
class FailedTask:
    """One failed task attempt of the run."""

    name: str
    state: str
    host: str
    retry_times: int
    max_retry_times: int
    start: datetime | None
    end: datetime | None
    error: str
    log: str


@dataclass(frozen=True)
class RunFacts:
    """The run as DolphinScheduler tells it now (`problem` set when it could not be read)."""

    problem: str = ""
    workflow: str = ""
    project: str = ""
    state: str = ""
    business_date: str = ""
    start: datetime | None = None
    end: datetime | None = None
    seconds: float | None = None
    run_times: int = 0
    final: bool = False
    failed: list[FailedTask] = field(default_factory=list)

    @property
    def badge(self) -> str:
        return state_class(self.state)


def read_run(deps: Deps, run_id: int, log_lines: int = 60) -> RunFacts:
    """Read run `run_id` (instance, current task attempts, failed tasks' log tails) from DolphinScheduler."""
    svc = service_of(deps)
    if svc is None:
        return RunFacts(problem="DolphinScheduler is not configured (dolphin.yaml)")
    try:
        inst = locate(deps, run_id)
        _, tasks = svc.client.current_tasks(svc.instance_projects[inst.id], inst.id)
    except (BotError, DolphinError) as exc:
        return RunFacts(problem=f"DolphinScheduler could not be read: {exc}"[:500])
    entry = workflow_of(deps, inst)
    project, name = (entry.project, entry.name) if entry else ("", inst.name)
    date = ""
    if inst.schedule_time is not None:
        offset = deps.settings.workflows.biz_date_offset(project, name)
        date = run_date_label(inst.schedule_time.date(), offset)
    failed = []
    for t in tasks:
        if t.state not in TASK_FAILED:
            continue
        try:
            lines = svc.client.log_tail(t.id, lines=log_lines) if t.host else []
            note = "" if t.host else "(not dispatched to a worker: no log)"
        except DolphinError as exc:
            lines, note = [], f"(log unavailable: {exc})"
        failed.append(
            FailedTask(
                t.name,
                t.state,
                t.host,
                t.retry_times,
                t.max_retry_times,
                t.start_time,
                t.end_time,
                error_line(lines, t.name, t.state),
                "\n".join(lines) or note,
            )
        )
    seconds = (inst.end_time - inst.start_time).total_seconds() if inst.start_time and inst.end_time else None
    return RunFacts(
        workflow=name,
        project=project,
        state=inst.state,
        business_date=date,
        start=inst.start_time,
        end=inst.end_time,
        seconds=seconds,
        run_times=inst.run_times,
        final=is_terminal(inst.state),
        failed=failed,
    )
