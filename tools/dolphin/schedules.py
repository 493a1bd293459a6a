"""A workflow's schedule: show it, take it offline during an incident, put it back online.

    ds_schedule    read    cron, zone, state and the next fire times (DolphinScheduler's preview)
    set_schedule   write   release state ONLINE / OFFLINE; the workflow's environment gates it

`set_schedule` reads the schedule once per walk (`prepare`) and refuses at once what
DolphinScheduler would refuse: no schedule, the state it already has (10126), online while the
definition is offline (50004; the catalog knows the definition's release state). An "off" is recorded (`ScheduleOffStore`)
so the one who took it offline is reminded after `schedule_off_reminder_minutes` while it stays off.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from pydantic import BaseModel, Field

from xihe.agent.deps import Deps
from xihe.agent.errors import DolphinError, ToolFailed
from xihe.agent.i18n import Catalog, Lang, Text, say_md, text
from xihe.agent.registry import Prepared, ToolContext, ToolSpec
from xihe.integrations.dolphinscheduler.models import CronSchedule
from xihe.tools.dolphin.names import CatalogEntry
from xihe.tools.dolphin.schedule_store import ScheduleOff
from xihe.tools.dolphin.service import environment_of_workflow, resolve_workflow, service, told

SCHEDULES: Catalog = {
    "none": {
        "en": "workflow {workflow} (project {project}) has no schedule in DolphinScheduler",
        "zh": "工作流 {workflow}（项目 {project}）在 DolphinScheduler 里没有定时调度",
    },
    "already": {
        "en": "the schedule of {workflow} is already {state}; nothing was sent",
        "zh": "{workflow} 的定时调度已经是 {state}；没有发送任何请求",
    },
    "definition_offline": {
        "en": "workflow {workflow} (project {project}) is {state}; DolphinScheduler puts a schedule online "
        "only for an online workflow (50004), so nothing was sent: release the workflow first",
        "zh": "工作流 {workflow}（项目 {project}）的状态是 {state}；DolphinScheduler 只能为已上线的工作流上线定时调度"
        "（50004），所以没有发送任何请求：请先上线该工作流",
    },
    "explain_off": {
        "en": "take the schedule of {workflow} (project {project}, cron {cron}, {zone}) offline: it does not "
        "fire until `/schedule {workflow} on`",
        "zh": "下线 {workflow}（项目 {project}，cron {cron}，{zone}）的定时调度：在 `/schedule {workflow} on` 之前不会再触发",
    },
    "explain_on": {
        "en": "put the schedule of {workflow} (project {project}, cron {cron}, {zone}) back online",
        "zh": "重新上线 {workflow}（项目 {project}，cron {cron}，{zone}）的定时调度",
    },
    "show": {
        "en": "Schedule of **{workflow}** (project {project}): `{cron}` ({zone}), {state}",
        "zh": "**{workflow}**（项目 {project}）的定时调度：`{cron}`（{zone}），{state}",
    },
    "next": {"en": "Next fire times: {times}", "zh": "接下来的触发时间：{times}"},
    "would": {"en": "Would fire (once back online): {times}", "zh": "上线后会在这些时间触发：{times}"},
    "none_ahead": {
        "en": "No fire times ahead: the schedule is valid {valid} (DolphinScheduler's zone)",
        "zh": "之后没有触发时间：这个定时调度的有效期是 {valid}（DolphinScheduler 的时区）",
    },
    "off": {
        "en": "The schedule of **{workflow}** is now OFFLINE: it does not fire until `/schedule {workflow} on`. "
        "I'll remind you in {minutes} min if it is still off.",
        "zh": "**{workflow}** 的定时调度已下线：在 `/schedule {workflow} on` 之前不会再触发。"
        "如果 {minutes} 分钟后仍是下线状态，我会提醒你。",
    },
    "on": {
        "en": "The schedule of **{workflow}** is ONLINE again. Next fire times: {times}",
        "zh": "**{workflow}** 的定时调度已重新上线。接下来的触发时间：{times}",
    },
}


class ShowArgs(BaseModel):
    workflow: str = Field(description="the workflow as the user named it (name or alias), e.g. 'order_sync'")
    project: str = Field("", description="DolphinScheduler project, only when the user names one")


class SetArgs(ShowArgs):
    state: Literal["on", "off"] = Field(description="on = ONLINE (it fires), off = OFFLINE (it does not)")


@dataclass(frozen=True)
class Scheduled:
    """A workflow and its schedule (None when it has none), read once per walk."""

    entry: CatalogEntry
    schedule: CronSchedule | None


Target = Prepared[SetArgs, Scheduled]


def _read(args: ShowArgs, deps: Deps) -> Scheduled:
    entry = resolve_workflow(deps, args.workflow, args.project, offline_ok=True)
    found = service(deps).client.schedules(entry.project_code, entry.code)
    return Scheduled(entry, found[0] if found else None)


def _next(deps: Deps, s: Scheduled) -> list[str]:
    if s.schedule is None:
        return []
    try:
        return service(deps).client.schedule_preview(s.entry.project_code, s.schedule)
    except DolphinError:
        return []  # the times are a courtesy; the state is what was asked


def _info(deps: Deps, s: Scheduled) -> dict[str, Any]:
    e, sc = s.entry, s.schedule
    if sc is None:
        raise ToolFailed(text(SCHEDULES, "none", workflow=e.name, project=e.project))
    return {
        "workflow": e.name,
        "project": e.project,
        "schedule_id": sc.id,
        "cron": sc.crontab,
        "timezone": sc.timezone,
        "state": sc.release_state,
        "valid": f"{sc.start_time} .. {sc.end_time}",
        "next_fire_times": _next(deps, s),
    }


def show(args: ShowArgs, ctx: ToolContext) -> dict[str, Any]:
    """The workflow's schedule: cron, zone, state, next fire times."""
    return _info(ctx.deps, _read(args, ctx.deps))


def _precheck(call: Target, deps: Deps) -> Text | None:
    s, wanted = call.target, "ONLINE" if call.args.state == "on" else "OFFLINE"
    if s.schedule is None:
        return text(SCHEDULES, "none", workflow=s.entry.name, project=s.entry.project)
    if s.schedule.release_state == wanted:
        return text(SCHEDULES, "already", workflow=s.entry.name, state=wanted)
    if wanted == "ONLINE" and s.entry.release_state != "ONLINE":
        return text(SCHEDULES, "definition_offline", workflow=s.entry.name, project=s.entry.project,
                    state=s.entry.release_state)  # fmt: skip
    return None


def _explain(call: Target, deps: Deps, lang: Lang) -> str:
    s = call.target
    sc = s.schedule
    values = {"workflow": s.entry.name, "project": s.entry.project}
    return say_md(SCHEDULES, f"explain_{call.args.state}", lang, cron=sc.crontab if sc else "-",
                  zone=sc.timezone if sc else "-", **values)  # fmt: skip


def set_state(call: Target, ctx: ToolContext) -> dict[str, Any]:
    """Release or take offline the schedule (`_precheck` passed); an "off" is remembered for its reminder."""
    svc = service(ctx.deps)
    s = call.target
    assert s.schedule is not None  # the precheck refused a workflow without one
    online = call.args.state == "on"
    svc.writer(ctx.user).set_schedule_online(s.entry.project_code, s.schedule.id, online)
    minutes = svc.config.schedule_off_reminder_minutes
    if online:
        svc.schedules_off.on(s.entry.project_code, s.schedule.id)
    else:
        svc.schedules_off.off(
            ScheduleOff(s.entry.project_code, s.schedule.id, s.entry.project, s.entry.name, s.entry.code,
                        ctx.conversation, ctx.user, ctx.now, ctx.now + timedelta(minutes=minutes))
        )  # fmt: skip
    after = Scheduled(s.entry, _reread(ctx.deps, s))
    return {**_info(ctx.deps, after), "action": call.args.state, "remind_after_minutes": minutes,
            **svc.asked_by(ctx.user)}  # fmt: skip


def _reread(deps: Deps, s: Scheduled) -> CronSchedule | None:
    found = service(deps).client.schedules(s.entry.project_code, s.entry.code)
    return found[0] if found else None


def lookup(call: Target, ctx: ToolContext) -> dict[str, Any] | None:
    """After a crash: done when DS shows the wanted state (read afresh), else send it."""
    now = _reread(ctx.deps, call.target)
    wanted = "ONLINE" if call.args.state == "on" else "OFFLINE"
    if now is None or now.release_state != wanted:
        return None
    return {**_info(ctx.deps, Scheduled(call.target.entry, now)), "action": call.args.state,
            "remind_after_minutes": service(ctx.deps).config.schedule_off_reminder_minutes}  # fmt: skip


def show_reply(r: dict[str, Any], lang: Lang = "en") -> str:
    """`/schedule WORKFLOW`: cron, zone, state, the next fire times."""
    head = say_md(SCHEDULES, "show", lang, workflow=r["workflow"], project=r["project"], cron=r["cron"],
                  zone=r["timezone"], state=r["state"])  # fmt: skip
    if not r["next_fire_times"]:  # DS previews none past the schedule's endTime
        return head + "\n" + say_md(SCHEDULES, "none_ahead", lang, valid=r["valid"])
    times = ", ".join(r["next_fire_times"])
    return head + "\n" + say_md(SCHEDULES, "next" if r["state"] == "ONLINE" else "would", lang, times=times)


def set_reply(r: dict[str, Any], lang: Lang = "en") -> str:
    """`/schedule WORKFLOW on|off`: the new state and what follows."""
    minutes = f"{r['remind_after_minutes']:g}"
    times = ", ".join(r["next_fire_times"]) or "-"
    return say_md(SCHEDULES, r["action"], lang, workflow=r["workflow"], minutes=minutes, times=times)


def _environment(call: Target, deps: Deps) -> str:
    return environment_of_workflow(deps.settings, call.target.entry.project, call.target.entry.name)


SCHEDULE = ToolSpec(
    name="ds_schedule",
    description="A DolphinScheduler workflow's schedule: cron, time zone, ONLINE/OFFLINE and the next fire times.",
    args=ShowArgs,
    run=told(show, lambda args: f"workflow {args.workflow!r}"),
    risk="read",
    summarize=show_reply,
)

SET_SCHEDULE = ToolSpec(
    name="set_schedule",
    description="Turn a DolphinScheduler workflow's schedule off (OFFLINE: it stops firing, e.g. during an "
    "incident) or back on (ONLINE). The bot reminds the user if an 'off' stays off.",
    args=SetArgs,
    run=told(set_state, lambda call: f"workflow {call.args.workflow!r}"),
    risk="write",
    environment_of=_environment,
    lookup=lookup,
    summarize=set_reply,
    explain=_explain,
    precheck=_precheck,
    prepare=_read,
)
