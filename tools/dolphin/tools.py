"""DolphinScheduler tools: start (or backfill) a workflow here; read, rerun and stop a run in instance.py;
pause and resume in suspend.py, force a task's success in force.py, its log in logs.py, recent and
failed runs in history.py, schedules in schedules.py. `SPECS` lists them all.

    trigger_dolphinscheduler  write  start a run / serial backfill; the workflow's environment gates it
    query_ds_task_status      read   an instance's state, task progress and duration
    ds_failed_tasks           read   failed tasks of a run: host, retries, log tail
    rerun_failed              write  START_FAILURE_TASK_PROCESS on a FAILURE run
    stop_run                  write  STOP a running instance

The workflow a trigger names is resolved once per walk (the spec's `prepare`, a `Plan`); its
relative dates (昨天) are read again when it runs, as of when the user asked.

Triggering is idempotent per step: the start carries the marker `<task>:<step>` in startParams, and
the spec's `lookup` finds a run with that marker after a crash, so the step is recorded instead of
starting a second run. A started run becomes a durable watch row; the poll job reports its end in
the conversation that asked for it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import date, datetime
from typing import Any

from pydantic import BaseModel, Field

from xihe.agent.deps import Deps
from xihe.agent.errors import TaskStateError, ToolFailed
from xihe.agent.i18n import Lang, say_md
from xihe.agent.registry import Prepared, ToolContext, ToolSpec
from xihe.integrations.dolphinscheduler.errors import DefinitionOffline
from xihe.integrations.dolphinscheduler.models import REQUESTED_BY_KEY
from xihe.integrations.dolphinscheduler.runs import StartOutcome, find_started, make_marker, start_workflow
from xihe.integrations.dolphinscheduler.schedule import schedule_time_param
from xihe.tools.dolphin.dates import backfill_label, parse_dates, schedule_dates
from xihe.tools.dolphin.failures import fail
from xihe.tools.dolphin.force import FORCE_SUCCESS
from xihe.tools.dolphin.history import FAILED_RUNS, RUNS
from xihe.tools.dolphin.instance import FAILED, RERUN, STATUS, STOP
from xihe.tools.dolphin.logs import LOG
from xihe.tools.dolphin.messages import DS, trigger_reply
from xihe.tools.dolphin.names import CatalogEntry
from xihe.tools.dolphin.schedules import SCHEDULE, SET_SCHEDULE
from xihe.tools.dolphin.service import (
    environment_of_workflow,
    resolve_workflow,
    service,
    told,
)
from xihe.tools.dolphin.suspend import PAUSE, RESUME
from xihe.tools.dolphin.watch import watch_from_start

# ---- trigger ---------------------------------------------------------------------------------


class TriggerArgs(BaseModel):
    workflow: str = Field(
        description="the workflow as the user named it: its DolphinScheduler name (order_sync) or an "
        "alias (订单同步); close spellings are matched, ambiguous ones come back as a list to ask about"
    )
    dates: str = Field(
        "",
        description="business date(s) to run for (the days whose data to load), copied from the user's "
        "words: 昨天, 前天, 2026-12-01, 12月1日到3日, 2026-12-01..2026-12-03, last monday. The tool turns "
        "them into DolphinScheduler scheduleTimes. Several dates run serially, oldest first. "
        "Empty = one normal run now (no backfill)",
    )
    project: str = Field("", description="DolphinScheduler project, only when the user names one")


@dataclass(frozen=True)
class Plan:
    """What a trigger call means once names and dates are read."""

    entry: CatalogEntry
    dates: tuple[date, ...]  # business dates, as the user named them
    environment: str
    offset: int  # scheduleTime = business date + offset days (workflows.yaml biz_date_offset)

    @property
    def schedule_dates(self) -> tuple[date, ...]:
        """The scheduleTime dates DolphinScheduler runs."""
        return tuple(schedule_dates(self.dates, self.offset))


Target = Prepared[TriggerArgs, Plan]  # a trigger call and what it means as of the walk that read it


def _dates(args: TriggerArgs, deps: Deps, now: datetime) -> tuple[date, ...]:
    return tuple(parse_dates(args.dates, now, deps.settings.workflows.timezone)) if args.dates.strip() else ()


def _plan(args: TriggerArgs, deps: Deps) -> Plan:
    """The spec's `prepare`: the workflow resolved once per walk, its dates as of now.

    Resolving before the gate means an unknown name or a future date is refused at once, instead of
    after the user confirmed something that cannot run.
    """
    entry = resolve_workflow(deps, args.workflow, args.project)
    offset = deps.settings.workflows.biz_date_offset(entry.project, entry.name)
    environment = environment_of_workflow(deps.settings, entry.project, entry.name)
    return Plan(entry, _dates(args, deps, deps.clock()), environment, offset)


def _workflow_arg(call: Target) -> str:
    """The argument a DolphinScheduler error about this call concerns."""
    return f"workflow {call.args.workflow!r}"


def _asked_at(ctx: ToolContext) -> datetime:
    """When the user asked: relative dates (昨天) mean the same day after a late /confirm or a resume."""
    try:
        return ctx.deps.tasks.get(ctx.task_id).created_at
    except TaskStateError:
        return ctx.now


def _asked_plan(call: Target, ctx: ToolContext) -> tuple[Plan, datetime]:
    """The plan with its dates as of when the user asked, and that moment."""
    asked = _asked_at(ctx)
    return replace(call.target, dates=_dates(call.args, ctx.deps, asked)), asked


def _trigger_environment(call: Target, deps: Deps) -> str:
    return call.target.environment


def explain_trigger(call: Target, deps: Deps, lang: Lang) -> str:
    """What a trigger would start, for the confirmation prompt."""
    plan = call.target
    e = plan.entry
    where = plan.environment or say_md(DS, "no_environment", lang)
    what = say_md(
        DS, "explain_start", lang, workflow=e.name, project=e.project, code=e.code, environment=where
    )
    if not plan.dates:
        return what + say_md(DS, "explain_now", lang)
    return what + say_md(DS, "explain_backfill", lang, label=backfill_label(plan.dates, plan.offset, lang))


def _watch(ctx: ToolContext, plan: Plan, out: StartOutcome) -> None:
    svc = service(ctx.deps)
    watch = watch_from_start(
        out,
        task_id=str(ctx.task_id),
        conversation=ctx.conversation,
        project=plan.entry.project,
        project_code=plan.entry.project_code,
        workflow=plan.entry.name,
        definition_code=plan.entry.code,
        now=ctx.now,
        environment=plan.environment,
        policy=svc.policy,
        dates=tuple(d.isoformat() for d in plan.dates),
    )
    svc.watches.add(replace(watch, progress_tasks=True, biz_date_offset=plan.offset))


def _started(plan: Plan, out: StartOutcome, status: str) -> dict[str, Any]:
    result: dict[str, Any] = {
        "status": status,
        "workflow": plan.entry.name,
        "project": plan.entry.project,
        "workflow_code": plan.entry.code,
        "environment": plan.environment,
        "dates": [d.isoformat() for d in plan.dates],
        "schedule_dates": [d.isoformat() for d in plan.schedule_dates],
        "biz_date_offset": plan.offset,
        "instance_ids": list(out.instance_ids),
        "marker": out.marker,
    }
    if out.schedule_time:
        result["schedule_time"] = out.schedule_time
    if out.trigger_code is not None:
        result["trigger_code"] = out.trigger_code
    if status == "start_uncertain":
        result["note"] = (
            "DolphinScheduler did not answer the start in time; it may or may not have started. "
            "The bot watches for the run by its marker and reports in this conversation. Do not start it again."
        )
    else:
        result["note"] = "The bot watches the run and reports its final state in this conversation."
    return result


def trigger(call: Target, ctx: ToolContext) -> dict[str, Any]:
    """Start one run or a serial backfill; the run becomes a watch row."""
    svc = service(ctx.deps)
    plan, _ = _asked_plan(call, ctx)
    marker = make_marker(ctx.task_id, ctx.step_key)
    cfg = svc.config
    try:
        out = start_workflow(
            svc.writer(ctx.user),
            plan.entry,
            marker,
            ctx.now,
            plan.schedule_dates,
            worker_group=cfg.worker_group,
            tenant_code=cfg.tenant_code,
            failure_strategy=cfg.failure_strategy,
            extra_params={REQUESTED_BY_KEY: ctx.user},
        )
    except DefinitionOffline as exc:
        raise ToolFailed(fail("start_offline", workflow=plan.entry.name, code=exc.code)) from exc
    _watch(ctx, plan, out)
    return {
        **_started(plan, out, "start_uncertain" if out.uncertain else "started"),
        **svc.asked_by(ctx.user),
    }


def trigger_lookup(call: Target, ctx: ToolContext) -> dict[str, Any] | None:
    """After a crash: the run this step already started (found by its marker), or None."""
    svc = service(ctx.deps)
    plan, asked = _asked_plan(call, ctx)
    marker = make_marker(ctx.task_id, ctx.step_key)
    found = find_started(svc.client, plan.entry, marker, asked)
    if not found and svc.client.profile.start_is_asynchronous:
        # 3.1/3.2 create the instance asynchronously: "not found yet" may be a start the master has not
        # consumed. Starting again could make two runs, so watch for the marker instead (the poller
        # reports "not found" after the discovery timeout, and the user can start it again then).
        days = plan.schedule_dates
        out = StartOutcome(marker, asked, days, schedule_time_param(days) if days else "", uncertain=True)
        _watch(ctx, plan, out)
        return _started(plan, out, "start_uncertain")
    if not found:
        return None  # 3.3 answers a start with its ids synchronously: no marker means no run
    out = StartOutcome(
        marker,
        asked,
        plan.schedule_dates,
        schedule_time_param(plan.schedule_dates) if plan.schedule_dates else "",
        instance_ids=tuple(i.id for i in found),
        reused=True,
    )
    _watch(ctx, plan, out)
    return _started(plan, out, "already_started")


TRIGGER = ToolSpec(
    name="trigger_dolphinscheduler",
    description=(
        "Start a DolphinScheduler workflow run, or backfill it for past business dates (补跑/补数). "
        "Pass the workflow and the dates exactly as the user said them; the tool resolves aliases and "
        "relative dates. Returns the instance id(s); the bot reports the final state later."
    ),
    args=TriggerArgs,
    run=told(trigger, _workflow_arg),
    risk="write",
    environment_of=_trigger_environment,
    lookup=trigger_lookup,
    summarize=trigger_reply,
    explain=explain_trigger,
    prepare=_plan,
)


SPECS: tuple[ToolSpec, ...] = (
    TRIGGER,
    STATUS,
    FAILED,
    RERUN,
    STOP,
    PAUSE,
    RESUME,
    FORCE_SUCCESS,
    LOG,
    RUNS,
    FAILED_RUNS,
    SCHEDULE,
    SET_SCHEDULE,
)
