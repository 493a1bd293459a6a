"""Task reports: which step failed, with what input, how long each took. Shared by chat, CLI and UI.

Chat shows them in the conversation's language (REPORT); the CLI and `--json` keep English. The
readable forms are WeCom markdown (`say_md`): a goal, an input or an error is outside text.
"""

from __future__ import annotations

import json
from typing import Any

from xihe.agent.deps import Deps
from xihe.agent.frontier import INTERRUPTED
from xihe.agent.i18n import Catalog, Lang, say_md
from xihe.agent.run_states import state_text
from xihe.agent.tasks import StepStatus, Task
from xihe.agent.timefmt import offset_of, show, zone
from xihe.agent.user_text import readable_args
from xihe.agent.wecom_markdown import Md, inline

REPORT: Catalog = {
    "head": {
        "en": "Task #{id} [{status}] {kind} by {owner}: {goal}",
        "zh": "任务 #{id} [{status}] {kind}，发起人 {owner}：{goal}",
    },
    "times": {"en": "created {created}, updated {updated}", "zh": "创建于 {created}，更新于 {updated}"},
    "current": {"en": "current step: {step}", "zh": "当前步骤：{step}"},
    "runs": {"en": "runs: {runs}", "zh": "运行实例：{runs}"},
    "run": {"en": "{id} (/status {id})", "zh": "{id}（/status {id}）"},
    "step": {
        "en": "- {step} #{attempt} {status} {tool} ({took})",
        "zh": "- {step} #{attempt} {status} {tool}（{took}）",
    },
    "ms": {"en": "{ms} ms", "zh": "{ms} 毫秒"},
    "input": {"en": " input: {text}", "zh": " 输入：{text}"},
    "step_error": {"en": " error: {text}", "zh": " 错误：{text}"},
    "interrupted": {"en": "the process stopped during this step", "zh": "进程在这一步中途停止"},
    "error": {"en": "error: {text}", "zh": "错误：{text}"},
    "list_head": {"en": "Your recent tasks (times in {zone}):", "zh": "你最近的任务（时间为 {zone}）："},
    "line": {"en": "- #{id} {at} {status} {kind}: {goal}", "zh": "- #{id} {at} {status} {kind}：{goal}"},
    "line_runs": {
        "en": "- #{id} {at} {status} {kind}: {goal} · runs {runs}",
        "zh": "- #{id} {at} {status} {kind}：{goal} · 运行实例 {runs}",
    },
    "queries": {
        "en": "(and {n} read-only queries such as /status, not listed; `/task ID` shows any task)",
        "zh": "（另有 {n} 次只读查询，例如 /status，没有列出；`/task 编号` 可以查看任何任务）",
    },
    "none": {"en": "You have no tasks yet.", "zh": "你还没有任务。"},
    "with_outcome": {"en": "{status} · {outcome}", "zh": "{status} · {outcome}"},
    "run_state": {"en": "run {state}", "zh": "运行{state}"},
}
WORDS: Catalog = {  # task and step statuses, outcomes and kinds as people read them
    "pending": {"en": "pending", "zh": "排队中"},
    "running": {"en": "running", "zh": "进行中"},
    "awaiting_confirmation": {"en": "awaiting_confirmation", "zh": "等待确认"},
    "done": {"en": "done", "zh": "完成"},
    "failed": {"en": "failed", "zh": "失败"},
    "cancelled": {"en": "cancelled", "zh": "已取消"},
    "refused": {"en": "refused", "zh": "被拒绝"},
    "chat": {"en": "chat", "zh": "对话"},
    "command": {"en": "command", "zh": "命令"},
    "query": {"en": "query", "zh": "查询"},
}


def _word(value: str, lang: Lang) -> Md:
    if value.startswith("run "):
        return say_md(REPORT, "run_state", lang, state=state_text(value.removeprefix("run "), lang))
    return say_md(WORDS, value, lang) if value in WORDS else Md(inline(value))


def readable_input(preview: str) -> str:
    """A step's stored argument preview as `key: value · key: value`; as stored when it is not a
    whole JSON object (a long preview is cut off)."""
    try:
        data = json.loads(preview)
    except ValueError:
        return preview
    if not isinstance(data, dict):
        return preview
    shown = {k: v for k, v in data.items() if v not in ([], {})}
    return readable_args(shown).replace("\n", " · ") or preview


def _step_error(error: str, lang: Lang) -> str:
    return say_md(REPORT, "interrupted", lang) if error == INTERRUPTED else error


def status_text(task: Task, lang: Lang = "en") -> Md:
    """`Task.shown_status` in `lang`, e.g. `done · run FAILURE` / `完成 · 运行失败`."""
    shown = task.shown_status
    if shown != task.status and task.outcome:
        return say_md(
            REPORT, "with_outcome", lang, status=_word(task.status, lang), outcome=_word(task.outcome, lang)
        )
    return _word(shown, lang)


def task_lines(tasks: list[Task], lang: Lang = "en", tz: str = "UTC", queries: int = 0) -> str:
    """`/tasks`: one line per task with when it started (in the team's zone) and the runs it started;
    `queries` read-only commands (/status ...) among them were left out and are counted at the end."""
    if not tasks:
        return say_md(REPORT, "none", lang)
    offset = offset_of(tasks[0].created_at.astimezone(zone(tz)))
    lines = [say_md(REPORT, "list_head", lang, zone=f"{tz} {offset}")]
    for t in tasks:
        lines.append(
            say_md(
                REPORT,
                "line_runs" if t.runs else "line",
                lang,
                id=t.id,
                at=show(t.created_at, tz, seconds=False)[:16],
                status=status_text(t, lang),
                kind=_word(t.kind, lang),
                goal=t.goal[:60],
                runs=", ".join(map(str, t.runs)),
            )
        )
    if queries:
        lines.append(say_md(REPORT, "queries", lang, n=queries))
    return "\n".join(lines)


def task_data(deps: Deps, task_id: int) -> dict[str, Any]:
    """The task and its step log as plain data (the `--json` form)."""
    task = deps.tasks.get(task_id)
    steps = deps.tasks.steps(task_id)
    return {
        "task": {
            **{k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in task.__dict__.items()},
            "runs": list(task.runs),
            "shown_status": task.shown_status,
        },
        "steps": [
            {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in s.__dict__.items()}
            for s in steps
        ],
    }


def task_report(deps: Deps, task_id: int, lang: Lang = "en") -> str:
    """A readable step table: outcome rows only (plus attempts still running)."""
    task = deps.tasks.get(task_id)
    steps = deps.tasks.steps(task_id)
    tz = deps.settings.core.timezone
    lines: list[str] = [
        say_md(
            REPORT,
            "head",
            lang,
            id=task.id,
            status=status_text(task, lang),
            kind=_word(task.kind, lang),
            owner=task.owner,
            goal=task.goal[:80],
        ),
        say_md(REPORT, "times", lang, created=show(task.created_at, tz), updated=show(task.updated_at, tz)),
        say_md(REPORT, "current", lang, step=task.current_step or Md("-")),
    ]
    if task.runs:
        runs = Md(", ".join(say_md(REPORT, "run", lang, id=r) for r in task.runs))
        lines.append(say_md(REPORT, "runs", lang, runs=runs))
    finished = {(s.step_key, s.attempt) for s in steps if s.status != StepStatus.RUNNING}
    for s in steps:
        if s.status == StepStatus.RUNNING and (s.step_key, s.attempt) in finished:
            continue
        took = say_md(REPORT, "ms", lang, ms=s.duration_ms) if s.duration_ms is not None else Md("…")
        status = _word(s.status, lang)
        line: str = say_md(
            REPORT,
            "step",
            lang,
            step=s.step_key,
            attempt=s.attempt,
            status=Md(f"{status:7}") if lang == "en" else status,  # a column in English
            tool=s.tool_name,
            took=took,
        )
        if s.input_preview:
            line += say_md(REPORT, "input", lang, text=readable_input(s.input_preview)[:120])
        if s.error:
            line += say_md(REPORT, "step_error", lang, text=_step_error(s.error, lang)[:160])
        lines.append(line)
    if task.error:
        lines.append(say_md(REPORT, "error", lang, text=task.error))
    return "\n".join(lines)
