"""Chat commands for DolphinScheduler beyond start and rerun; each maps to a tool through
`session.run_tool` (same registry, gate, confirmation and audit):

    /pause 101    /resume 101    /force-success 101 load    /log 101 [load] [--from 200]
    /runs order_sync [20]    /failed [昨晚 | since 22:00 | 昨天]    /schedule order_sync [on|off]

`/resume ID` is also the task command (continue a task of yours that stopped). ID means your stopped
task first (as before), then a paused or stopped workflow instance, then a task in any other state
(which says why it cannot continue), else an instance. `/resume run ID` / `/resume task ID` say which.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from xihe.agent.commands import Command
from xihe.agent.errors import DolphinError, TaskStateError, ToolFailed
from xihe.agent.help import HelpEntry
from xihe.agent.i18n import Catalog, say
from xihe.agent.inbound import reply_lang
from xihe.agent.task_commands import resume_task
from xihe.agent.tasks import Task, TaskStatus
from xihe.integrations.dolphinscheduler.states import ACTION_ALLOWED
from xihe.tools.dolphin.service import locate

if TYPE_CHECKING:
    from xihe.agent.gate import Who
    from xihe.agent.inbound import Inbound
    from xihe.agent.session import Session

USAGE: Catalog = {
    "instance": {
        "en": "Usage: /{verb} INSTANCE [PROJECT], e.g. /{verb} 101.",
        "zh": "用法：/{verb} 实例编号 [项目]，例如 /{verb} 101。",
    },
    "force": {
        "en": "Usage: /force-success INSTANCE TASK, e.g. /force-success 101 load.",
        "zh": "用法：/force-success 实例编号 任务名，例如 /force-success 101 load。",
    },
    "log": {
        "en": "Usage: /log INSTANCE [TASK] [--from LINE], e.g. /log 101 load --from 200.",
        "zh": "用法：/log 实例编号 [任务名] [--from 行号]，例如 /log 101 load --from 200。",
    },
    "schedule": {
        "en": "Usage: /schedule WORKFLOW [on|off], e.g. /schedule order_sync off.",
        "zh": "用法：/schedule 工作流 [on|off]，例如 /schedule order_sync off。",
    },
    "runs": {
        "en": "Usage: /runs WORKFLOW [N], e.g. /runs order_sync 20.",
        "zh": "用法：/runs 工作流 [条数]，例如 /runs order_sync 20。",
    },
}

HELP = [
    HelpEntry("/pause INSTANCE · /resume INSTANCE", "pause a running run; resume a paused or stopped one",
              "/pause 1024", "暂停正在运行的实例；恢复已暂停或已停止的实例", needs="tool", tool="pause_run",
              detail="/resume ID continues your own stopped task when ID is one, else the paused or stopped "
                     "run; `/resume run ID` always means the workflow instance, `/resume task ID` your task.",
              detail_zh="如果 ID 是你自己停下的任务，/resume ID 会继续那个任务，否则恢复那个已暂停或已停止的实例；"
                        "`/resume run ID` 总是指工作流实例，`/resume task ID` 总是指你的任务。"),
    HelpEntry("/force-success INSTANCE TASK", "mark a failed task successful so the run goes on",
              "/force-success 1024 load", "把失败的任务标记为强制成功，让运行继续", needs="tool",
              tool="force_success"),
    HelpEntry("/log INSTANCE [TASK] [--from N]", "a task's log: the last lines, or a page from line N",
              "/log 1024 load", "任务日志：最后几行，或从第 N 行起的一页", needs="tool", tool="ds_task_log"),
    HelpEntry("/runs WORKFLOW [N]", "the last N runs of a workflow: business date, state, duration",
              "/runs order_sync 20", "某个工作流最近 N 次运行：业务日期、状态、耗时", needs="tool",
              tool="ds_recent_runs"),
    HelpEntry("/failed [SINCE]", "runs that failed since then, by workflow, with their error line",
              "/failed 昨晚", "自某时以来失败的运行，按工作流分组，附错误行", needs="tool",
              tool="ds_failed_runs", detail="SINCE: 昨晚 / last night, since 22:00, 22点, 昨天, a date; "
              "default the last 24 hours.", detail_zh="SINCE：昨晚、since 22:00、22点、昨天 或日期；默认最近 24 小时。"),
    HelpEntry("/schedule WORKFLOW [on|off]", "a workflow's schedule (cron, zone, next fire times); turn it off or on",
              "/schedule order_sync off", "工作流的定时调度（cron、时区、下次触发时间）；下线或上线它", needs="tool",
              tool="ds_schedule", detail="An 'off' is reminded if it is still off after a while (dolphin.yaml "
              "schedule_off_reminder_minutes).", detail_zh="下线后如果过一段时间仍未上线，我会提醒（dolphin.yaml 的 "
              "schedule_off_reminder_minutes）。"),
]  # fmt: skip


def _instance_id(arg: str) -> int | None:
    text = arg.lstrip("#")
    return int(text) if text.isdigit() and int(text) > 0 else None


def _on_instance(
    session: Session, who: Who, msg: Inbound, args: tuple[str, ...], tool: str, verb: str
) -> str:
    instance = _instance_id(args[0]) if args else None
    if instance is None:
        return say(USAGE, "instance", reply_lang(session, msg), verb=verb)
    call: dict[str, object] = {"instance_id": instance}
    if len(args) > 1:
        call["project"] = args[1]
    return session.run_tool(who, msg, tool, call).reply


def pause(session: Session, who: Who, msg: Inbound, cmd: Command) -> str:
    """/pause INSTANCE [PROJECT]."""
    return _on_instance(session, who, msg, cmd.args, "pause_run", "pause")


def _task(session: Session, arg: str) -> Task | None:
    if not arg.isdigit():
        return None
    try:
        return session.deps.tasks.get(int(arg))
    except TaskStateError:
        return None


def _suspended_run(session: Session, arg: str) -> bool:
    """Whether `arg` names a workflow instance that is paused or stopped (what DS can resume)."""
    if _instance_id(arg) is None:
        return False
    try:
        inst = locate(session.deps, int(arg.lstrip("#")))
    except (ToolFailed, DolphinError):
        return False
    return inst.state in ACTION_ALLOWED["RECOVER_SUSPENDED_PROCESS"]


def resume(session: Session, who: Who, msg: Inbound, cmd: Command) -> str:
    """/resume ID: your stopped task, else a paused or stopped run, else the task (which says why
    not), else the run (which says why not); `/resume run ID` and `/resume task ID` say which."""
    args = cmd.args
    if args and args[0].lower() in ("run", "task"):
        rest = replace(cmd, args=args[1:])
        if args[0].lower() == "task":
            return resume_task(session, who, msg, rest)
        return _on_instance(session, who, msg, rest.args, "resume_run", "resume")
    task = _task(session, args[0]) if args else None
    if task is not None and task.owner == who.user and task.status == TaskStatus.FAILED:
        return resume_task(session, who, msg, cmd)
    if args and _suspended_run(session, args[0]):
        return _on_instance(session, who, msg, args, "resume_run", "resume")
    if task is not None:
        return resume_task(session, who, msg, cmd)
    return _on_instance(session, who, msg, args, "resume_run", "resume")


def force_success(session: Session, who: Who, msg: Inbound, cmd: Command) -> str:
    """/force-success INSTANCE TASK [PROJECT]."""
    instance = _instance_id(cmd.args[0]) if cmd.args else None
    if instance is None or len(cmd.args) < 2:
        return say(USAGE, "force", reply_lang(session, msg))
    call: dict[str, object] = {"instance_id": instance, "task": cmd.args[1]}
    if len(cmd.args) > 2:
        call["project"] = cmd.args[2]
    return session.run_tool(who, msg, "force_success", call).reply


def log(session: Session, who: Who, msg: Inbound, cmd: Command) -> str:
    """/log INSTANCE [TASK] [--from N]."""
    args = list(cmd.args)
    start: int | None = None
    if "--from" in args:
        at = args.index("--from")
        value = args[at + 1] if at + 1 < len(args) else ""
        if not value.isdigit():
            return say(USAGE, "log", reply_lang(session, msg))
        start = int(value)
        del args[at : at + 2]
    instance = _instance_id(args[0]) if args else None
    if instance is None or len(args) > 2:
        return say(USAGE, "log", reply_lang(session, msg))
    call: dict[str, object] = {"instance_id": instance}
    if len(args) > 1:
        call["task"] = args[1]
    if start is not None:
        call["from_line"] = start
    return session.run_tool(who, msg, "ds_task_log", call).reply


def runs(session: Session, who: Who, msg: Inbound, cmd: Command) -> str:
    """/runs WORKFLOW [N]."""
    if not cmd.args or len(cmd.args) > 2 or (len(cmd.args) == 2 and not cmd.args[1].isdigit()):
        return say(USAGE, "runs", reply_lang(session, msg))
    call: dict[str, object] = {"workflow": cmd.args[0]}
    if len(cmd.args) == 2:
        call["limit"] = int(cmd.args[1])
    return session.run_tool(who, msg, "ds_recent_runs", call).reply


def schedule(session: Session, who: Who, msg: Inbound, cmd: Command) -> str:
    """/schedule WORKFLOW (show) or /schedule WORKFLOW on|off."""
    args = cmd.args
    if not args or len(args) > 2 or (len(args) == 2 and args[1].lower() not in ("on", "off")):
        return say(USAGE, "schedule", reply_lang(session, msg))
    if len(args) == 1:
        return session.run_tool(who, msg, "ds_schedule", {"workflow": args[0]}).reply
    return session.run_tool(who, msg, "set_schedule", {"workflow": args[0], "state": args[1].lower()}).reply


def failed(session: Session, who: Who, msg: Inbound, cmd: Command) -> str:
    """/failed [SINCE]: the words after the command, as typed."""
    return session.run_tool(who, msg, "ds_failed_runs", {"since": cmd.rest}).reply


COMMANDS = {
    "pause": pause,
    "resume": resume,
    "force-success": force_success,
    "log": log,
    "runs": runs,
    "failed": failed,
    "schedule": schedule,
}
