"""Recent runs of a workflow, and what failed since a moment, across the projects the bot sees.

    ds_recent_runs   read   the last N runs of one workflow: business date, state, duration
    ds_failed_runs   read   FAILURE runs since a moment (昨晚, since 22:00, 昨天), grouped by workflow,
                            each with its error line (from the failed task's log tail)

Both read DolphinScheduler's instance list (newest start first, filtered server-side by definition,
state and start time). Names come from the synced catalog; a run of a definition the catalog does
not know is named by its instance name.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from pydantic import BaseModel, Field

from xihe.agent.deps import Deps
from xihe.agent.errors import DolphinError
from xihe.agent.i18n import Catalog, Lang, say_md
from xihe.agent.registry import ToolContext, ToolSpec
from xihe.agent.run_states import state_text
from xihe.agent.timefmt import show
from xihe.integrations.dolphinscheduler.models import Instance
from xihe.integrations.dolphinscheduler.states import TASK_FAILED
from xihe.tools.dolphin.dates import run_date_label
from xihe.tools.dolphin.error_line import error_line
from xihe.tools.dolphin.instance import fmt_time
from xihe.tools.dolphin.service import catalog, resolve_workflow, service, told
from xihe.tools.dolphin.since import parse_since

MAX_RUNS = 50
MAX_FAILED = 100  # failed runs listed
ERROR_LOGS = 20  # failed runs whose log is read for an error line
ERROR_LOG_LINES = 30

HISTORY: Catalog = {
    "runs_head": {"en": "Last {n} runs of **{workflow}** (project {project}):", "zh": "**{workflow}**（项目 {project}）最近 {n} 次运行："},
    "no_runs": {"en": "**{workflow}** (project {project}) has no runs.", "zh": "**{workflow}**（项目 {project}）还没有运行过。"},
    "run": {"en": "- #{id} {date} {state}{took} (started {start})", "zh": "- #{id} {date} {state}{took}（开始于 {start}）"},
    "manual": {"en": "(no business date)", "zh": "（无业务日期）"},
    "took": {"en": ", {duration}", "zh": "，耗时 {duration}"},
    "failed_head": {"en": "Failed since {since}: {n} run(s) in {w} workflow(s)", "zh": "自 {since} 以来失败：{w} 个工作流共 {n} 次运行"},
    "none_failed": {"en": "Nothing failed since {since}.", "zh": "自 {since} 以来没有失败的运行。"},
    "workflow": {"en": "**{workflow}** (project {project}):", "zh": "**{workflow}**（项目 {project}）："},
    "failed_run": {"en": "- #{id} {date} ended {end}: {error}", "zh": "- #{id} {date}，结束于 {end}：{error}"},
    "more": {"en": "(and more; ask for a shorter window)", "zh": "（还有更多；请缩短时间范围）"},
}  # fmt: skip


class RunsArgs(BaseModel):
    workflow: str = Field(description="the workflow as the user named it (name or alias), e.g. 'order_sync'")
    limit: int = Field(10, ge=1, le=MAX_RUNS, description="how many of its latest runs, newest first")
    project: str = Field("", description="DolphinScheduler project, only when the user names one")


class FailedArgs(BaseModel):
    since: str = Field(
        "",
        description="since when, copied from the user's words: 昨晚, last night, since 22:00, 22点, 昨天, "
        "2026-12-01. Empty = the last 24 hours",
    )


def _run(deps: Deps, inst: Instance, offset: int) -> dict[str, Any]:
    schedule = inst.schedule_time.date() if inst.schedule_time else None
    return {
        "instance_id": inst.id,
        "business_date": run_date_label(schedule, offset) if schedule else None,
        "state": inst.state,
        "duration": inst.duration or None,
        "start_time": fmt_time(deps, inst.start_time),
        "end_time": fmt_time(deps, inst.end_time),
    }


def recent_runs(args: RunsArgs, ctx: ToolContext) -> dict[str, Any]:
    """The workflow's last `limit` runs, newest first."""
    svc = service(ctx.deps)
    entry = resolve_workflow(ctx.deps, args.workflow, args.project)
    offset = ctx.deps.settings.workflows.biz_date_offset(entry.project, entry.name)
    page = svc.client.list_instances(entry.project_code, definition_code=entry.code, page_size=args.limit)
    runs = [_run(ctx.deps, i, offset) for i in page.items[: args.limit]]
    return {"workflow": entry.name, "project": entry.project, "runs": runs, "total": page.total}


def _error(client: Any, project_code: int, inst: Instance) -> str:
    """The error line of the run's failed task (its log tail), or what is known without it."""
    try:
        _, tasks = client.current_tasks(project_code, inst.id)
        failed = [t for t in tasks if t.state in TASK_FAILED]
        if not failed:
            return f"instance {inst.id} ended {inst.state}"
        t = failed[-1]
        lines = client.log_tail(t.id, lines=ERROR_LOG_LINES) if t.host else []
        return f"{t.name}: {error_line(lines, t.name, t.state)}"
    except DolphinError as exc:
        return f"(error unavailable: DS {exc.code})"


def failed_runs(args: FailedArgs, ctx: ToolContext) -> dict[str, Any]:
    """FAILURE runs that started since the moment `since` names, grouped by workflow."""
    svc = service(ctx.deps)
    zone = ctx.deps.settings.core.timezone
    since = parse_since(args.since, ctx.now, ctx.deps.settings.workflows.timezone)
    entries = catalog(svc, ctx.now)
    names = {e.code: e for e in entries}
    projects = list(OrderedDict.fromkeys(e.project_code for e in entries))
    found: list[tuple[int, Instance]] = []
    for code in projects:
        page_no = 1
        while len(found) < MAX_FAILED:
            page = svc.client.list_instances(code, state="FAILURE", start_from=since, page_no=page_no)
            found.extend((code, i) for i in page.items)
            if page_no >= page.total_page or not page.items:
                break
            page_no += 1
    groups: dict[str, dict[str, Any]] = {}
    for n, (code, inst) in enumerate(found[:MAX_FAILED]):
        entry = names.get(inst.definition_code)
        workflow, project = (entry.name, entry.project) if entry else (inst.name, "")
        offset = ctx.deps.settings.workflows.biz_date_offset(project, workflow)
        run = _run(ctx.deps, inst, offset)
        run["error"] = _error(svc.client, code, inst) if n < ERROR_LOGS else None
        group = groups.setdefault(
            f"{project}/{workflow}", {"workflow": workflow, "project": project, "runs": []}
        )
        group["runs"].append(run)
    return {
        "since": show(since, zone),
        "failed": sum(len(g["runs"]) for g in groups.values()),
        "workflows": list(groups.values()),
        "truncated": len(found) > MAX_FAILED,
    }


def _date(r: dict[str, Any], lang: Lang) -> str:
    return r["business_date"] or say_md(HISTORY, "manual", lang)


def runs_reply(r: dict[str, Any], lang: Lang = "en") -> str:
    """`/runs`: one line per run."""
    head = {"workflow": r["workflow"], "project": r["project"]}
    if not r["runs"]:
        return say_md(HISTORY, "no_runs", lang, **head)
    lines = [say_md(HISTORY, "runs_head", lang, n=len(r["runs"]), **head)]
    for run in r["runs"]:
        took = say_md(HISTORY, "took", lang, duration=run["duration"]) if run["duration"] else ""
        state = state_text(run["state"], lang)
        lines.append(say_md(HISTORY, "run", lang, id=run["instance_id"], date=_date(run, lang), state=state,
                            took=took, start=run["start_time"] or "-"))  # fmt: skip
    return "\n".join(lines)


def failed_reply(r: dict[str, Any], lang: Lang = "en") -> str:
    """`/failed`: failed runs grouped by workflow, each with its error line."""
    if not r["workflows"]:
        return say_md(HISTORY, "none_failed", lang, since=r["since"])
    lines = [say_md(HISTORY, "failed_head", lang, since=r["since"], n=r["failed"], w=len(r["workflows"]))]
    for g in r["workflows"]:
        lines.append(say_md(HISTORY, "workflow", lang, workflow=g["workflow"], project=g["project"] or "-"))
        for run in g["runs"]:
            lines.append(say_md(HISTORY, "failed_run", lang, id=run["instance_id"], date=_date(run, lang),
                                end=run["end_time"] or "-", error=run["error"] or "-"))  # fmt: skip
    if r["truncated"]:
        lines.append(say_md(HISTORY, "more", lang))
    return "\n".join(lines)


RUNS = ToolSpec(
    name="ds_recent_runs",
    description="The latest runs of one DolphinScheduler workflow, newest first: instance id, business date, "
    "state, duration and start time.",
    args=RunsArgs,
    run=told(recent_runs, lambda args: f"workflow {args.workflow!r}"),
    risk="read",
    summarize=runs_reply,
)

FAILED_RUNS = ToolSpec(
    name="ds_failed_runs",
    description="DolphinScheduler runs that failed since a moment the user names (昨晚, last night, since 22:00, "
    "昨天), grouped by workflow, each with the error line of its failed task. Use for 'what failed last night'.",
    args=FailedArgs,
    run=told(failed_runs, lambda args: f"since {args.since!r}"),
    risk="read",
    summarize=failed_reply,
)
