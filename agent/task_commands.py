"""The chat commands about tasks: /tasks (your recent ones), /task ID (one task's steps) and
/resume ID (continue one of yours that stopped, e.g. when the model failed for a while)."""

from __future__ import annotations

from xihe.agent.commands import Command
from xihe.agent.errors import TaskStateError
from xihe.agent.gate import Who
from xihe.agent.i18n import Catalog, Lang, say
from xihe.agent.inbound import CommandSession, Inbound, reply_lang
from xihe.agent.tasks import QUERY, Task, TaskStatus

LISTED = 10  # tasks /tasks shows
QUERY_WINDOW = 30  # read-only queries (/status ...) skipped over to find them


def list_tasks(session: CommandSession, who: Who, msg: Inbound, cmd: Command) -> str:
    from xihe.agent.report import task_lines

    deps = session.deps
    recent = deps.tasks.recent(owner=who.user, limit=LISTED + QUERY_WINDOW)
    listed = [t for t in recent if t.kind != QUERY][:LISTED]
    oldest = listed[-1].id if listed else 0
    queries = sum(1 for t in recent if t.kind == QUERY and t.id > oldest)
    return task_lines(listed, reply_lang(session, msg), deps.settings.core.timezone, queries)


TASK: Catalog = {
    "usage": {"en": "/task needs a task id, e.g. /task 12.", "zh": "/task 需要任务编号，例如 /task 12。"},
    "not_yours": {"en": "Task {id} belongs to someone else.", "zh": "任务 {id} 属于别人。"},
    "missing": {"en": "There is no task {id}.", "zh": "没有任务 {id}。"},
    "resume_usage": {
        "en": "/resume needs a task id, e.g. /resume 12.",
        "zh": "/resume 需要任务编号，例如 /resume 12。",
    },
    "not_stopped": {
        "en": "Task {id} is {status}; only a task that stopped can be resumed.",
        "zh": "任务 {id} 的状态是 {status}；只有停下的任务才能继续。",
    },
}


def _named_task(session: CommandSession, cmd: Command, lang: Lang, usage: str) -> Task | str:
    """The task the command's first argument names, or what to tell the user instead."""
    if not cmd.args or not cmd.args[0].isdigit():
        return say(TASK, usage, lang)
    try:
        return session.deps.tasks.get(int(cmd.args[0]))
    except TaskStateError:
        return say(TASK, "missing", lang, id=cmd.args[0])


def show_task(session: CommandSession, who: Who, msg: Inbound, cmd: Command) -> str:
    from xihe.agent.report import task_report

    lang = reply_lang(session, msg)
    task = _named_task(session, cmd, lang, "usage")
    if isinstance(task, str):
        return task
    if task.owner != who.user and not any(
        session.deps.settings.access.roles.get(r, None) and session.deps.settings.access.roles[r].approver
        for r in who.roles
    ):
        return say(TASK, "not_yours", lang, id=task.id)
    return task_report(session.deps, task.id, lang)


def resume_task(session: CommandSession, who: Who, msg: Inbound, cmd: Command) -> str:
    """/resume ID: continue your task that stopped, at its first unfinished step (done steps are reused)."""
    lang = reply_lang(session, msg)
    task = _named_task(session, cmd, lang, "resume_usage")
    if isinstance(task, str):
        return task
    if task.owner != who.user:
        return say(TASK, "not_yours", lang, id=task.id)
    if task.status != TaskStatus.FAILED:
        return say(TASK, "not_stopped", lang, id=task.id, status=task.status)
    return session.agent.resume(task.id).reply
