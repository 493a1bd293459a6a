"""What `/ui/runs/ID` says about a run: read from DolphinScheduler when the page is opened.

The state, workflow, business date, start/end/duration, and each failed task with its host, retries,
error line and log tail (paged from `/log/detail` now, not the copy an alert kept). A reader pages
further on demand (`LogRequest`: one task, `PAGE_LINES` lines from a line on, one `/log/detail`
call with skipLineNum/limit). Reading is bounded: the tail pages at most `MAX_TAIL_PAGES` pages. When
DolphinScheduler is not configured or cannot be read, `problem` says why and the page shows what
the bot itself recorded (its tasks and alerts).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from xihe.agent.deps import Deps
from xihe.agent.errors import BotError, DolphinError
from xihe.integrations.dolphinscheduler.states import TASK_FAILED, TASK_SUCCEEDED, is_terminal
from xihe.tools.dolphin.dates import run_date_label
from xihe.tools.dolphin.error_line import error_line
from xihe.tools.dolphin.service import locate, service_of, workflow_of

TAIL_LINES = 60  # the page's default: the end of each failed task's log
PAGE_LINES = 100  # one page read on demand
MAX_LOG_LINE = 10_000_000  # the furthest line a reader may ask for
MAX_TAIL_PAGES = 100  # pages of 1,000 lines read to find the end (DS has no tail endpoint)
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
    task_id: int = 0
    first_line: int = 0  # the 0-based line number (as DolphinScheduler counts) of the first line shown
    shown: int = 0  # how many lines are shown
    total: int | None = None  # the log's length when its end was read (the tail), else None
    paged: bool = False  # a page the reader asked for, not the tail
    more_after: bool = False  # a page that was full: later lines may follow
    cut: bool = False  # the tail was not reached within MAX_TAIL_PAGES

    @property
    def earlier_from(self) -> int | None:
        """Where the page of earlier lines starts, or None at the start of the log."""
        return max(0, self.first_line - PAGE_LINES) if self.first_line > 0 and self.shown else None

    @property
    def earlier_lines(self) -> int:
        """How many lines the earlier page holds: up to the first line shown here, never past it."""
        return min(PAGE_LINES, self.first_line - (self.earlier_from or 0))

    @property
    def later_from(self) -> int | None:
        """Where the page of later lines starts, or None when this page reached the end."""
        return self.first_line + self.shown if self.paged and self.more_after else None


@dataclass(frozen=True)
class LogRequest:
    """A reader's request for one page of one failed task's log (`?task=ID&from=N&lines=K`)."""

    task_id: int
    from_line: int
    lines: int = PAGE_LINES


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


def _tail(client: Any, task_id: int, n: int) -> tuple[list[str], int, bool]:
    """The last `n` lines of a log, its length, and whether MAX_TAIL_PAGES ran out before its end."""
    tail: deque[str] = deque(maxlen=n)
    skip = 0
    for _ in range(MAX_TAIL_PAGES):
        page = client.log_page(task_id, skip, 1000)
        if not page.lines:
            break
        tail.extend(page.lines)
        skip = page.next_skip
    else:
        return list(tail), skip, True
    while tail and not tail[-1]:  # the log's final newline
        tail.pop()
        skip -= 1
    return list(tail), skip, False


def read_run(
    deps: Deps, run_id: int, log_lines: int = TAIL_LINES, page: LogRequest | None = None
) -> RunFacts:
    """Read run `run_id` (instance, current task attempts, failed tasks' log tails) from DolphinScheduler;
    the failed task `page` names shows that page of its log instead of its tail."""
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
        paged = page is not None and page.task_id == t.id
        tail: list[str] = []
        shown: list[str] = []
        first, total, cut = 0, None, False
        note = "" if t.host else "(not dispatched to a worker: no log)"
        try:
            if t.host:  # the tail always: the error line is in it, and it tells the log's length
                tail, length, cut = _tail(svc.client, t.id, log_lines)
                shown, first, total = tail, length - len(tail), length
            if t.host and paged and page is not None:
                shown = list(svc.client.log_page(t.id, page.from_line, page.lines).lines)
                first = page.from_line
                note = f"(no lines from line {first} on: the log ends before that)"
        except DolphinError as exc:
            tail, shown, note = [], [], f"(log unavailable: {exc})"
        failed.append(
            FailedTask(
                t.name,
                t.state,
                t.host,
                t.retry_times,
                t.max_retry_times,
                t.start_time,
                t.end_time,
                error_line(tail, t.name, t.state),
                "\n".join(shown) or note,
                task_id=t.id,
                first_line=first,
                shown=len(shown),
                total=total,
                paged=paged,
                more_after=paged and bool(shown) and (cut or first + len(shown) < (total or 0)),
                cut=cut,
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
