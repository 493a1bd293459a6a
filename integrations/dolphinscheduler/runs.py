"""Start a run idempotently and find it again by its marker.

Every run xihe starts carries `startParams={"xihe_run": "<task>:<step>"}`. To resume after a crash
between "DS accepted the start" and "we recorded it", call `start_workflow(..., resume_since=...)`:
it looks for an instance carrying the marker first and starts nothing when one exists. A start
whose outcome is unknown (timeout, 5xx) is never re-sent; the outcome says `uncertain` and the
watcher finds the instance by marker if DS did create it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any, Protocol

from xihe.integrations.dolphinscheduler.client import DolphinClient
from xihe.integrations.dolphinscheduler.errors import StartOutcomeUnknown
from xihe.integrations.dolphinscheduler.models import Instance, detail_marker
from xihe.integrations.dolphinscheduler.schedule import schedule_time_param

DISCOVERY_SKEW = timedelta(minutes=2)  # server and bot clocks differ a little


class WorkflowRef(Protocol):
    """What a start needs to know about a workflow (a CatalogEntry fits)."""

    @property
    def project_code(self) -> int: ...

    @property
    def code(self) -> int: ...

    @property
    def name(self) -> str: ...


@dataclass(frozen=True)
class StartOutcome:
    """The result of asking DS to start (or finding an earlier start with the same marker)."""

    marker: str
    started_at: datetime
    dates: tuple[date, ...]
    schedule_time: str  # "" for a plain START_PROCESS
    trigger_code: int | None = None  # 3.2
    instance_ids: tuple[int, ...] = ()  # 3.3, or found by marker
    reused: bool = False  # an earlier start with this marker was found; nothing new was started
    uncertain: bool = False  # the start may or may not have happened; watch for the marker

    @property
    def expected_runs(self) -> int:
        """How many instances a serial run of these dates creates when every date succeeds."""
        return max(len(self.dates), 1)


def make_marker(task_id: str | int, step_key: str) -> str:
    """The startParams marker of one task step: "<task>:<step>"."""
    return f"{task_id}:{step_key}"


def find_started(
    client: DolphinClient,
    workflow: WorkflowRef,
    marker: str,
    since: datetime,
    *,
    trigger_code: int | None = None,
    max_pages: int = 5,
) -> list[Instance]:
    """Instances of `workflow` started at or after `since` whose startParams carry `marker`, by id.

    Uses the 3.2 trigger code when given, then falls back to paging the instance list filtered by
    definition and start time; rows without params (3.1) are read in detail. `commandType` is not
    used: it changes after a stop or rerun.
    """
    pc = workflow.project_code
    if trigger_code is not None:
        found = [i for i in client.instances_by_trigger(pc, trigger_code) if i.marker in (marker, None)]
        if found:
            return sorted(found, key=lambda i: i.id)
    out: dict[int, Instance] = {}
    for page_no in range(1, max_pages + 1):
        page = client.list_instances(
            pc, definition_code=workflow.code, start_from=since - DISCOVERY_SKEW, page_no=page_no
        )
        for row in page.items:
            found_marker = row.marker
            if found_marker is None:
                found_marker = detail_marker(client.get_instance(pc, row.id))
            if found_marker == marker:
                out[row.id] = row
        if page_no >= page.total_page:
            break
    return [out[k] for k in sorted(out)]


def start_workflow(
    client: DolphinClient,
    workflow: WorkflowRef,
    marker: str,
    now: datetime,
    dates: Sequence[date] = (),
    *,
    resume_since: datetime | None = None,
    **start_options: Any,
) -> StartOutcome:
    """Start one run (no dates) or a serial ascending backfill of `dates`, at most once per marker.

    `resume_since`: when resuming a step that may already have started, the time the step first
    ran; an instance with the marker started since then is reused instead of starting another.
    Raises DolphinError (DefinitionOffline for an offline definition) when DS refuses.
    """
    days = tuple(sorted(set(dates)))
    schedule = schedule_time_param(days) if days else ""
    if resume_since is not None:
        found = find_started(client, workflow, marker, resume_since)
        if found:
            return StartOutcome(
                marker, resume_since, days, schedule, instance_ids=tuple(i.id for i in found), reused=True
            )
    try:
        result = client.start(
            workflow.project_code,
            workflow.code,
            marker=marker,
            schedule_time=schedule or None,
            **start_options,
        )
    except StartOutcomeUnknown:
        return StartOutcome(marker, now, days, schedule, uncertain=True)
    return StartOutcome(
        marker, now, days, schedule, trigger_code=result.trigger_code, instance_ids=result.instance_ids
    )


def start_backfill(
    client: DolphinClient,
    workflow: WorkflowRef,
    dates: Sequence[date],
    marker: str,
    now: datetime,
    *,
    resume_since: datetime | None = None,
) -> StartOutcome:
    """Backfill `dates` serially, oldest first (COMPLEMENT_DATA); see start_workflow."""
    if not dates:
        raise ValueError("start_backfill needs at least one date")
    return start_workflow(client, workflow, marker, now, dates, resume_since=resume_since)
