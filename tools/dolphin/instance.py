"""DolphinScheduler tools on one workflow instance: its state, its failed tasks, rerun, stop.

    query_ds_task_status      read   an instance's state, task progress and duration
    ds_failed_tasks           read   failed tasks of a run: host, retries, log tail
    rerun_failed              write  START_FAILURE_TASK_PROCESS on a FAILURE run
    stop_run                  write  STOP a running instance

Rerun and stop read their instance once per walk (the spec's `prepare`): the gate's environment,
the precheck, the confirmation's explanation and the run all see that read, so a `/rerun 101`
reads instance 101 once before its prompt and once, fresh, after `/confirm`.

A rerun is recorded on the watch that followed the instance before it is sent (see
`agent.ds_watch.PendingRerun`), so the poll job reports the new attempt, and a crash lookup never
sends a second rerun that DolphinScheduler's master may still take.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from xihe.agent.deps import Deps
from xihe.agent.errors import DolphinError, ToolFailed
from xihe.agent.i18n import Catalog, Lang, Text, say_md
from xihe.agent.registry import Prepared, ToolContext, ToolSpec
from xihe.agent.run_states import state_text
from xihe.agent.timefmt import show
from xihe.agent.wecom_markdown import Md
from xihe.integrations.dolphinscheduler.dag import tasks_total
from xihe.integrations.dolphinscheduler.errors import StartOutcomeUnknown
from xihe.integrations.dolphinscheduler.models import Instance
from xihe.integrations.dolphinscheduler.runs import make_marker
from xihe.integrations.dolphinscheduler.states import STOPPING, TASK_FAILED, TASK_SUCCEEDED, is_terminal
from xihe.tools.dolphin.dates import run_date_label
from xihe.tools.dolphin.error_line import error_line
from xihe.tools.dolphin.failures import ds_state, explained, fail, raw_or_told
from xihe.tools.dolphin.messages import DS, action_reply, failed_reply, status_reply
from xihe.tools.dolphin.service import (
    environment_of_instance,
    environment_of_workflow,
    locate,
    service,
    told,
    workflow_of,
)
from xihe.tools.dolphin.watch import Watch, reopen_for_rerun

# ---- reading a run ---------------------------------------------------------------------------


class InstanceArgs(BaseModel):
    instance_id: int = Field(gt=0, description="workflow instance id, e.g. 101")
    project: str = Field("", description="DolphinScheduler project; empty = find it")


def _instance_arg(args: InstanceArgs) -> str:
    """The argument a DolphinScheduler error about this call concerns."""
    return f"instance_id {args.instance_id}"


def _short_state(state: str) -> str:
    return state.replace("_EXECUTION", "").replace("SUBMITTED_SUCCESS", "SUBMITTED")


def fmt_time(deps: Deps, value: datetime | None) -> str | None:
    """In the team's zone with its offset (`2026-12-02 17:01:00 +08:00`), never a bare `CST`."""
    return show(value, deps.settings.core.timezone) if value else None


def instance_info(deps: Deps, inst: Instance) -> dict[str, Any]:
    entry = workflow_of(deps, inst)
    offset = deps.settings.workflows.biz_date_offset(
        entry.project if entry else "", entry.name if entry else ""
    )
    schedule = inst.schedule_time.date() if inst.schedule_time else None
    return {
        "instance_id": inst.id,
        "workflow": entry.name if entry else inst.name,
        "project": entry.project if entry else "",
        "state": inst.state,
        "schedule_time": schedule.isoformat() if schedule else None,
        "business_date": run_date_label(schedule, offset) if schedule else None,
        "start_time": fmt_time(deps, inst.start_time),
        "end_time": fmt_time(deps, inst.end_time),
        "duration": inst.duration or None,
        "run_times": inst.run_times,
        "final": is_terminal(inst.state),
    }


def query_status(args: InstanceArgs, ctx: ToolContext) -> dict[str, Any]:
    """State, task progress and duration of one instance."""
    svc = service(ctx.deps)
    inst = locate(ctx.deps, args.instance_id, args.project)
    project_code = svc.instance_projects[inst.id]
    _, tasks = svc.client.current_tasks(project_code, inst.id)
    done = [t.name for t in tasks if t.state in TASK_SUCCEEDED]
    failed = [t.name for t in tasks if t.state in TASK_FAILED]
    running = [t.name for t in tasks if t.state not in TASK_SUCCEEDED and t.state not in TASK_FAILED]
    return {
        **instance_info(ctx.deps, inst),
        "tasks_done": len(done),
        "tasks_total": tasks_total(svc.client, project_code, inst, tasks),
        "running_tasks": running,
        "failed_tasks": failed,
        "failures": [_failure(svc.client, t) for t in tasks if t.state in TASK_FAILED],
        "next": f"/rerun {inst.id}" if inst.state == "FAILURE" else None,
    }


STATUS_LOG_LINES = 30  # of each failed task's log, to find its error line


def _failure(client: Any, t: Any) -> dict[str, Any]:
    """A failed task of a run: where it ran, its retries, and the error line of its log."""
    lines: list[str] = []
    note = ""
    if t.host:
        try:
            lines = client.log_tail(t.id, lines=STATUS_LOG_LINES)
        except DolphinError as exc:
            note = f" (log unavailable: DS {exc.code})"
    return {
        "task": t.name,
        "state": t.state,
        "host": t.host,
        "retry_times": t.retry_times,
        "max_retry_times": t.max_retry_times,
        "error": error_line(lines, t.name, t.state) + note,
    }


STATUS = ToolSpec(
    name="query_ds_task_status",
    description="State, task progress and duration of one DolphinScheduler workflow instance.",
    args=InstanceArgs,
    run=told(query_status, _instance_arg),
    risk="read",
    summarize=status_reply,
)


class FailedArgs(InstanceArgs):
    log_lines: int = Field(30, ge=1, le=200, description="log lines to keep from the end of each failed task")


def failed_tasks(args: FailedArgs, ctx: ToolContext) -> dict[str, Any]:
    """Failed tasks of a run with worker host, retry counts and the tail of each log."""
    svc = service(ctx.deps)
    inst = locate(ctx.deps, args.instance_id, args.project)
    _, tasks = svc.client.current_tasks(svc.instance_projects[inst.id], inst.id)
    out = []
    for t in tasks:
        if t.state not in TASK_FAILED:
            continue
        try:
            tail = "\n".join(svc.client.log_tail(t.id, lines=args.log_lines)) if t.host else ""
        except DolphinError as exc:
            tail = f"(log unavailable: {exc})"
        out.append(
            {
                "task": t.name,
                "task_instance_id": t.id,
                "state": t.state,
                "host": t.host,
                "retry_times": t.retry_times,
                "max_retry_times": t.max_retry_times,
                "start_time": fmt_time(ctx.deps, t.start_time),
                "end_time": fmt_time(ctx.deps, t.end_time),
                "log_tail": tail,
            }
        )
    return {**instance_info(ctx.deps, inst), "failed": out}


FAILED = ToolSpec(
    name="ds_failed_tasks",
    description="Failed tasks of a DolphinScheduler run: worker host, retry counts and log tail of each.",
    args=FailedArgs,
    run=told(failed_tasks, _instance_arg),
    risk="read",
    summarize=failed_reply,
)


# ---- acting on a run -------------------------------------------------------------------------


Target = Prepared[InstanceArgs, Instance]  # a rerun or stop and the instance it acts on


def read_instance(args: InstanceArgs, deps: Deps) -> Instance:
    """The instance a rerun or stop acts on (the specs' `prepare`), or ToolFailed saying why it cannot be read."""
    try:
        return locate(deps, args.instance_id, args.project)
    except DolphinError as exc:
        error = raw_or_told(explained(exc, service(deps).config, f"instance_id {args.instance_id}"))
        raise ToolFailed(fail("instance_unreadable", id=args.instance_id, error=error)) from exc


def target_arg(call: Target) -> str:
    return _instance_arg(call.args)


def instance_environment(call: Target, deps: Deps) -> str:
    return environment_of_instance(deps, call.target, call.args.project)


def explain_instance(verb: str, catalog: Catalog = DS) -> Callable[[Target, Deps, Lang], str]:
    """What an action on a run would do (`verb`: a `catalog` key), for the confirmation prompt."""

    def explain(call: Target, deps: Deps, lang: Lang) -> str:
        inst = call.target
        info = instance_info(deps, inst)
        when = (
            say_md(DS, "explain_for", lang, date=info["business_date"]) if info["business_date"] else Md("")
        )
        return say_md(
            catalog,
            verb,
            lang,
            workflow=info["workflow"],
            id=inst.id,
            when=when,
            state=state_text(inst.state, lang),
        )

    return explain


def rerun_precheck(call: Target, deps: Deps) -> Text | None:
    """Only a FAILURE run can be rerun from its failed tasks: say so before asking for a yes, and again
    after it when the run changed meanwhile."""
    inst = call.target
    if inst.state == "FAILURE":
        return None
    key = "rerun_ended" if is_terminal(inst.state) else "rerun_running"
    return fail(key, id=inst.id, state=ds_state(inst.state))


def stop_precheck(call: Target, deps: Deps) -> Text | None:
    """A run that already ended has nothing to stop: say so before asking for a yes (and after it)."""
    inst = call.target
    return fail("stop_ended", id=inst.id, state=ds_state(inst.state)) if is_terminal(inst.state) else None


def follow_action(ctx: ToolContext, inst: Instance, project_code: int) -> tuple[Watch | None, Watch]:
    """Record the rerun about to be sent on the watch that follows `inst` (reopened), or a new watch.

    Written before the request goes out, so a crash in between is seen by `followed_lookup`. The
    watch waits for an attempt newer than `inst` (DS keeps the old FAILURE until the master takes
    the command), and a rerun of a backfill date keeps following the rest of that chain under the
    original marker. Returns the row as it was before (to put back when DS refuses) and the new one.
    """
    svc = service(ctx.deps)
    by = make_marker(ctx.task_id, ctx.step_key)
    before = svc.watches.with_instance(inst.id)
    if before is None and inst.marker:  # 3.1/3.2: a run this bot started, before a poll named its id
        before = svc.watches.get(inst.marker)
    base = before
    if base is None:
        entry = workflow_of(ctx.deps, inst)
        environment = (
            environment_of_workflow(ctx.deps.settings, entry.project, entry.name) if entry is not None else ""
        )
        base = Watch(
            key=by,
            task_id=str(ctx.task_id),
            conversation=ctx.conversation,
            project=entry.project if entry else "",
            project_code=project_code,
            workflow=entry.name if entry else inst.name,
            definition_code=inst.definition_code,
            started_at=ctx.now,
            next_poll_at=ctx.now,
            instance_ids=(inst.id,),
            environment=environment,
            progress_tasks=True,
            biz_date_offset=ctx.deps.settings.workflows.biz_date_offset(
                entry.project if entry else "", entry.name if entry else ""
            ),
        )
    watch = reopen_for_rerun(
        base,
        inst,
        by=by,
        task_id=str(ctx.task_id),
        conversation=ctx.conversation,
        now=ctx.now,
        policy=svc.policy,
    )
    svc.watches.save(watch)
    return before, watch


def send_followed(call: Target, ctx: ToolContext, execute_type: str, action: str) -> dict[str, Any]:
    """Send an instance action whose outcome the poll job reports (rerun, pause, resume), recorded on
    the instance's watch first (`follow_action`); a refusal puts the watch back as it was."""
    svc = service(ctx.deps)
    inst = call.target
    code = svc.instance_projects[inst.id]
    before, watch = follow_action(ctx, inst, code)
    try:
        svc.writer(ctx.user).execute(code, inst.id, execute_type)
    except DolphinError as exc:
        if not (exc.retryable or isinstance(exc, StartOutcomeUnknown)):  # refused: nothing to wait for
            svc.watches.save(before if before is not None else replace(watch, done=True))
        raise  # otherwise it may have been taken: the reopened watch reports what DS does
    return {**instance_info(ctx.deps, inst), "action": action, "accepted": True, **svc.asked_by(ctx.user)}


def rerun(call: Target, ctx: ToolContext) -> dict[str, Any]:
    """Rerun a FAILURE instance from its failed tasks (same instance id); `rerun_precheck` passed on it."""
    return send_followed(call, ctx, "START_FAILURE_TASK_PROCESS", "rerun_failed")


def followed_lookup(action: str) -> Callable[[Target, ToolContext], dict[str, Any] | None]:
    """After a crash: what became of an action (rerun, pause, resume) this step recorded before sending it.

    None (send it) when the step never recorded one. Otherwise DS either shows a newer attempt
    (accepted) or still the old one: then the request may or may not have reached DS, whose master
    can take it minutes later, so it is not sent again; the watch reports what DS does, or says after
    the discovery timeout that DS never took it.
    """

    def lookup(call: Target, ctx: ToolContext) -> dict[str, Any] | None:
        svc = service(ctx.deps)
        inst = locate(ctx.deps, call.args.instance_id, call.args.project)  # afresh: after it was sent
        by = make_marker(ctx.task_id, ctx.step_key)
        watch = svc.watches.with_instance(inst.id)
        if watch is None:
            return None
        pending = watch.pending_rerun(inst.id)
        mine = pending.by == by if pending is not None else watch.task_id == str(ctx.task_id)
        if not mine:
            return None
        info = {**instance_info(ctx.deps, inst), "action": action, "accepted": True}
        if pending is not None and not pending.picked_up(inst):
            info["note"] = (
                f"The {action} request may or may not have reached DolphinScheduler before the bot stopped. "
                "The bot watches the instance and reports here; do not send it again now."
            )
        return info

    return lookup


RERUN = ToolSpec(
    name="rerun_failed",
    description="Rerun a failed DolphinScheduler workflow instance from its failed tasks (same instance id).",
    args=InstanceArgs,
    run=told(rerun, target_arg),
    risk="write",
    environment_of=instance_environment,
    lookup=followed_lookup("rerun_failed"),
    summarize=action_reply,
    explain=explain_instance("explain_rerun"),
    precheck=rerun_precheck,
    prepare=read_instance,
)


def stop(call: Target, ctx: ToolContext) -> dict[str, Any]:
    """Ask DS to stop a running instance (`stop_precheck` passed on it)."""
    svc = service(ctx.deps)
    inst = call.target
    svc.writer(ctx.user).stop(svc.instance_projects[inst.id], inst.id)
    return {**instance_info(ctx.deps, inst), "action": "stop", "accepted": True, **svc.asked_by(ctx.user)}


def stop_lookup(call: Target, ctx: ToolContext) -> dict[str, Any] | None:
    """After a crash: the stop was sent when the instance is stopping or stopped (read afresh)."""
    inst = locate(ctx.deps, call.args.instance_id, call.args.project)
    if inst.state not in STOPPING:
        return None
    return {**instance_info(ctx.deps, inst), "action": "stop", "accepted": True}


STOP = ToolSpec(
    name="stop_run",
    description="Stop a running DolphinScheduler workflow instance.",
    args=InstanceArgs,
    run=told(stop, target_arg),
    risk="write",
    environment_of=instance_environment,
    lookup=stop_lookup,
    summarize=action_reply,
    explain=explain_instance("explain_stop"),
    precheck=stop_precheck,
    prepare=read_instance,
)
