"""ds_task_log: a task's log paged from DolphinScheduler (`/log/detail` skipLineNum/limit).

    ds_task_log   read   the last lines of a task's log, or one page from a line on

DolphinScheduler has no tail endpoint: the last lines are read by paging `skipLineNum += lineNum`
until an empty page (the UI's way), keeping every line so the whole log can be saved as an
artifact when it is longer than what a reply shows. `from_line` reads one page from that line
(0-based, as DolphinScheduler counts), and says where the next one starts or that the log ended.
Log text is outside text: replies put it through `block` inside a fence, so nothing in a log can
become a link, a mention or markup.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from xihe.agent.errors import ToolFailed
from xihe.agent.i18n import Catalog, Lang, say_md, text
from xihe.agent.registry import ToolContext, ToolSpec
from xihe.agent.wecom_markdown import Md, block
from xihe.integrations.dolphinscheduler.models import TaskRun
from xihe.integrations.dolphinscheduler.states import TASK_FAILED
from xihe.tools.dolphin.instance import instance_info
from xihe.tools.dolphin.service import locate, service, told

LAST_LINES = 40  # a reply's default: the end of the log
PAGE_LINES = 50  # one `--from N` page
MAX_LINES = 20_000  # read at most this much of one log (the artifact keeps all of it)

LOGS: Catalog = {
    "no_task": {
        "en": "instance {id} has no task called '{task}'; its tasks: {names}",
        "zh": "实例 {id} 没有叫“{task}”的任务；它的任务有：{names}",
    },
    "no_tasks": {"en": "instance {id} has no task that started yet", "zh": "实例 {id} 还没有开始运行的任务"},
    "not_dispatched": {
        "en": "task {task} of instance {id} has no log yet: it was not dispatched to a worker",
        "zh": "实例 {id} 的任务 {task} 还没有日志：它还没有分发到工作节点",
    },
    "head_last": {
        "en": "Log of **{task}** ({state}) in **{workflow}** #{id}: last {n} of {total} lines",
        "zh": "**{workflow}** #{id} 中 **{task}**（{state}）的日志：共 {total} 行，最后 {n} 行",
    },
    "head_page": {
        "en": "Log of **{task}** ({state}) in **{workflow}** #{id}: lines {first}–{last}",
        "zh": "**{workflow}** #{id} 中 **{task}**（{state}）的日志：第 {first}–{last} 行",
    },
    "past_end": {
        "en": "Log of **{task}** in **{workflow}** #{id} has no lines from line {first} on: it ends before that.",
        "zh": "**{workflow}** #{id} 中 **{task}** 的日志从第 {first} 行起没有内容：日志在那之前就结束了。",
    },
    "more": {"en": "More: `{command}`", "zh": "后面还有：`{command}`"},
    "end": {"en": "(end of the log)", "zh": "（日志结束）"},
    "artifact": {
        "en": "The whole log ({total} lines) is saved as artifact {ref}.",
        "zh": "完整日志（{total} 行）已保存为附件 {ref}。",
    },
}


class LogArgs(BaseModel):
    instance_id: int = Field(gt=0, description="workflow instance id, e.g. 101")
    task: str = Field(
        "", description="task name in that run; empty = its failed task, else the last one that ran"
    )
    from_line: int | None = Field(
        None, ge=0, description="read one page from this line (0 = the start); empty = the last lines"
    )
    project: str = Field("", description="DolphinScheduler project; empty = find it")


def named_task(tasks: list[TaskRun], instance_id: int, name: str) -> TaskRun:
    """The current attempt of the task called `name`, or ToolFailed listing the run's tasks."""
    row = next((t for t in tasks if t.name == name), None)
    if row is None:
        names = ", ".join(sorted({t.name for t in tasks})) or "-"
        raise ToolFailed(text(LOGS, "no_task", id=instance_id, task=name, names=names))
    return row


def _pick(tasks: list[TaskRun], args: LogArgs) -> TaskRun:
    """The named task's current attempt, else the failed one, else the one that started last."""
    if args.task:
        return named_task(tasks, args.instance_id, args.task)
    if not tasks:
        raise ToolFailed(text(LOGS, "no_tasks", id=args.instance_id))
    failed = [t for t in tasks if t.state in TASK_FAILED]
    return failed[0] if failed else tasks[0]  # /tasks is newest start first


def _read_all(client: Any, task_id: int) -> list[str]:
    """Every line of the log, paged as the UI does (1000 lines a page) up to MAX_LINES."""
    lines: list[str] = []
    skip = 0
    while len(lines) < MAX_LINES:
        page = client.log_page(task_id, skip, 1000)
        if not page.lines:
            break
        lines.extend(page.lines)
        skip = page.next_skip
    while lines and not lines[-1]:
        lines.pop()
    return lines


def task_log(args: LogArgs, ctx: ToolContext) -> dict[str, Any]:
    """The last lines of a task's log (the whole log as an artifact when longer), or one page of it."""
    svc = service(ctx.deps)
    inst = locate(ctx.deps, args.instance_id, args.project)
    _, tasks = svc.client.current_tasks(svc.instance_projects[inst.id], inst.id)
    row = _pick(tasks, args)
    if not row.host:
        raise ToolFailed(text(LOGS, "not_dispatched", task=row.name, id=inst.id))
    base = {
        **instance_info(ctx.deps, inst),
        "task": row.name,
        "task_state": row.state,
        "task_instance_id": row.id,
    }
    if args.from_line is not None:
        page = svc.client.log_page(row.id, args.from_line, PAGE_LINES)
        ended = len(page.lines) < PAGE_LINES
        return {**base, "from_line": args.from_line, "lines": list(page.lines),
                "next_from": None if ended else page.next_skip}  # fmt: skip
    lines = _read_all(svc.client, row.id)
    result = {**base, "total_lines": len(lines), "lines": lines[-LAST_LINES:]}
    if len(lines) > LAST_LINES:
        ref = ctx.deps.artifacts.put(
            "\n".join(lines),
            ctx.now,
            task_id=ctx.task_id,
            step_key=ctx.step_key,
            owner=ctx.user,
            name=f"log of task {row.name} in instance {inst.id}",
        )
        result["artifact"] = ref.id
    return result


def log_reply(r: dict[str, Any], lang: Lang = "en") -> str:
    """The log lines in a fence (encoded: a log is outside text), what comes next, where the rest is."""
    values = {"task": r["task"], "workflow": r["workflow"], "id": r["instance_id"]}
    lines: list[str] = r["lines"]
    if "from_line" in r:
        first = r["from_line"]
        if not lines:
            return say_md(LOGS, "past_end", lang, first=first, **values)
        head = say_md(
            LOGS, "head_page", lang, state=r["task_state"], first=first, last=first + len(lines) - 1, **values
        )
        nxt = r["next_from"]
        command = f"/log {r['instance_id']} {r['task']} --from {nxt}"
        tail = say_md(LOGS, "more", lang, command=command) if nxt is not None else say_md(LOGS, "end", lang)
    else:
        head = say_md(
            LOGS, "head_last", lang, state=r["task_state"], n=len(lines), total=r["total_lines"], **values
        )
        tail = (
            say_md(LOGS, "artifact", lang, total=r["total_lines"], ref=r["artifact"])
            if r.get("artifact")
            else Md("")
        )
    fence = "```\n" + block("\n".join(lines)) + "\n```"
    return "\n".join(part for part in (head, fence, tail) if part)


LOG = ToolSpec(
    name="ds_task_log",
    description="Read a task's log from a DolphinScheduler run: the last lines by default, or one page from "
    "from_line on (the result says where the next page starts). A long log is saved whole as an artifact.",
    args=LogArgs,
    run=told(task_log, lambda args: f"instance_id {args.instance_id}"),
    risk="read",
    summarize=log_reply,
)
