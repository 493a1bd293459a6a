"""What people read about DolphinScheduler runs, in the conversation's language (zh and en).

Command replies (`/run`, `/status`, `/rerun`, `/stop`, failed tasks) render a tool's result; the
poll job's messages (progress, a run that ended, a backfill chain that stopped at a date, a start DS
never ran, credentials DS rejects) render a poll outcome. Each message is one catalog entry; an
optional part (a business date, a duration, a list of running tasks) is its own entry, filled in
the same language. The tools' results stay English JSON for the model. Messages are WeCom markdown
(`say_md`): every value from DolphinScheduler (names, states, errors, hosts, log lines) is encoded as
outside text, so a task named `[点此](http://…)` is shown, not linked.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from typing import Any

from xihe.agent.alert_event import AlertEvent
from xihe.agent.i18n import Catalog, Lang, say_md
from xihe.agent.run_states import state_text
from xihe.agent.timefmt import show
from xihe.agent.wecom_markdown import Md, block
from xihe.config.dolphin import DolphinConfig
from xihe.integrations.dolphinscheduler.models import Instance
from xihe.integrations.dolphinscheduler.schedule import is_contiguous
from xihe.tools.dolphin.dates import backfill_label, run_date_label
from xihe.tools.dolphin.watch import AuthFailed, Finished, NotFound, Progress, Watch

ICONS = {"SUCCESS": "✅", "FAILURE": "❌", "STOP": "⏹️", "PAUSE": "⏸️", "BLOCK": "⛔"}

DS: Catalog = {
    # what a write would do, in the confirmation prompt and on /pending
    "explain_start": {
        "en": "start {workflow} (project {project}, code {code}) on {environment}",
        "zh": "在 {environment} 启动 {workflow}（项目 {project}，编号 {code}）",
    },
    "no_environment": {"en": "no environment", "zh": "未指定环境"},
    "explain_now": {"en": ", one normal run now", "zh": "，现在正常运行一次"},
    "explain_backfill": {"en": ", backfill {label}", "zh": "，补数 {label}"},
    "explain_for": {"en": " for {date}", "zh": "（{date}）"},
    "explain_rerun": {
        "en": "rerun the failed tasks of {workflow} instance {id}{when}, now {state}",
        "zh": "重跑 {workflow} 实例 {id}{when} 的失败任务，当前 {state}",
    },
    "explain_stop": {
        "en": "stop {workflow} instance {id}{when}, now {state}",
        "zh": "停止 {workflow} 实例 {id}{when}，当前 {state}",
    },
    # /run
    "started": {"en": "Started", "zh": "已启动"},
    "already_started": {"en": "Already started (found by its marker)", "zh": "已经启动过（按标记找到）"},
    "start_uncertain": {"en": "Start sent, outcome unknown:", "zh": "启动请求已发出，结果未知："},
    "trigger": {
        "en": "{head} **{workflow}** (project {project}, {environment}){span}: {which}. "
        "I'll report here when it ends.",
        "zh": "{head} **{workflow}**（项目 {project}，{environment}）{span}：{which}。结束后我会在这里告诉你。",
    },
    "no_env": {"en": "no environment", "zh": "无环境"},
    "span": {"en": " for {label}", "zh": "，{label}"},
    "instances": {"en": "instance {ids}", "zh": "实例 {ids}"},
    "no_id_yet": {
        "en": "the instance id follows once DS creates it",
        "zh": "DolphinScheduler 创建实例后我会告诉你实例编号",
    },
    # /status
    "status": {
        "en": "**{workflow}** #{id}{when}: {state} {done}/{total} tasks{running}{failed}",
        "zh": "**{workflow}** #{id}{when}：{state}，任务 {done}/{total}{running}{failed}",
    },
    "when": {"en": " for {date}", "zh": "（业务日期 {date}）"},
    "running_tasks": {"en": ", running {names}", "zh": "，运行中：{names}"},
    "failed_tasks": {"en": ", failed {names}", "zh": "，失败：{names}"},
    "started_at": {"en": "started {at}", "zh": "开始于 {at}"},
    "not_started": {"en": "not started yet", "zh": "尚未开始"},
    "ended_at": {"en": ", ended {at}", "zh": "，结束于 {at}"},
    "took": {"en": ", took {duration}", "zh": "，耗时 {duration}"},
    "running_for": {"en": ", running for {duration}", "zh": "，已运行 {duration}"},
    "run_times": {"en": "run {n} times", "zh": "共运行 {n} 次"},
    # failed tasks
    "failed_head": {"en": "**{workflow}** #{id}: {state}", "zh": "**{workflow}** #{id}：{state}"},
    "no_failed": {
        "en": "**{workflow}** #{id}: {state}, no failed tasks.",
        "zh": "**{workflow}** #{id}：{state}，没有失败的任务。",
    },
    "failed_task": {
        "en": "- {task} {state} on {host}, retries {retries}/{max_retries}",
        "zh": "- {task} {state}，节点 {host}，重试 {retries}/{max_retries}",
    },
    "not_dispatched": {"en": "(not dispatched)", "zh": "（未分发）"},
    # /rerun, /stop
    "rerun_failed": {
        "en": "Rerunning the failed tasks of **{workflow}** #{id} (was {state}). I'll report here when it ends.",
        "zh": "正在重跑 **{workflow}** #{id} 的失败任务（之前是 {state}）。结束后我会在这里告诉你。",
    },
    "stop": {
        "en": "Stopping **{workflow}** #{id} (was {state}).",
        "zh": "正在停止 **{workflow}** #{id}（之前是 {state}）。",
    },
    # what the poll job posts
    "appeared": {
        "en": "▶️ {workflow} run {id} started (task #{task}) — /status {id}",
        "zh": "▶️ {workflow} 运行实例 {id} 已启动（任务 #{task}）—— /status {id}",
    },
    "progress": {
        "en": "⏳ {workflow} instance {id}{when} {state}{tasks}{running}",
        "zh": "⏳ {workflow} 实例 {id}{when}：{state}{tasks}{running}",
    },
    "tasks_done": {"en": ", {done}/{total} tasks done", "zh": "，已完成 {done}/{total} 个任务"},
    "finished": {
        "en": "{icon} {workflow} instance {id}{when} ended {state}{took}.",
        "zh": "{icon} {workflow} 实例 {id}{when}，已结束：{state}{took}。",
    },
    "in": {"en": " in {duration}", "zh": "，耗时 {duration}"},
    "task_failed": {
        "en": "- task **{task}** {state} on {host} (retries {retries}/{max_retries}): {error}",
        "zh": "- 任务 **{task}** {state}，节点 {host}（重试 {retries}/{max_retries}）：{error}",
    },
    "event": {"en": "- {error}", "zh": "- {error}"},
    "chain_stopped": {
        "en": "The backfill stopped here: {dates} ({n} date) did not run.",
        "zh": "补数在这里停止了：{dates}（{n} 个日期）没有运行。",
    },
    "chain_stopped_many": {
        "en": "The backfill stopped here: {dates} ({n} dates) did not run.",
        "zh": "补数在这里停止了：{dates}（{n} 个日期）没有运行。",
    },
    "rerun_hint": {
        "en": "`/rerun {id}` reruns the failed tasks.",
        "zh": "发送 `/rerun {id}` 重跑失败的任务。",
    },
    "rerun_hint_chain": {
        "en": "`/rerun {id}` reruns the failed tasks and then goes on with the dates that did not run.",
        "zh": "发送 `/rerun {id}` 重跑失败的任务，然后继续跑没有运行的日期。",
    },
    "minutes": {"en": "{n} min", "zh": "{n} 分钟"},
    "rerun_not_taken": {
        "en": "⚠️ DolphinScheduler did not pick up the rerun of {workflow} instance {id} within {waited} of "
        "the request; it still shows its last run. `/rerun {id}` sends the rerun again.",
        "zh": "⚠️ DolphinScheduler 在请求后 {waited} 内没有接手 {workflow} 实例 {id} 的重跑，它显示的仍是上一次运行。"
        "发送 `/rerun {id}` 再次重跑。",
    },
    "never_ran": {
        "en": "⚠️ {workflow}{dates} did not run: DolphinScheduler has no instance of it from this request "
        "(sent {sent}, looked for {waited}). Nothing was started. `{retry}` starts it again.",
        "zh": "⚠️ {workflow}{dates} 没有运行：DolphinScheduler 里没有这次请求产生的实例（请求发出于 {sent}，"
        "找了 {waited}）。什么都没有启动。发送 `{retry}` 重新启动。",
    },
    "for_dates": {"en": " for {dates}", "zh": "（{dates}）"},
    "auth": {
        "en": "⚠️ I can no longer follow {workflow} ({runs}): DolphinScheduler rejects the bot's credentials "
        "(HTTP 401: token missing or expired, or the user is disabled). To fix it, {fix}. "
        "I keep checking and report here once it works again.",
        "zh": "⚠️ 我无法继续跟踪 {workflow}（{runs}）：DolphinScheduler 拒绝了机器人的凭据（HTTP 401：令牌缺失或已过期，"
        "或用户已停用）。解决办法：{fix}。我会继续检查，恢复后在这里告诉你。",
    },
    "the_run": {"en": "the run it started", "zh": "它启动的那次运行"},
    "fix_token": {
        "en": "create a new access token for the bot's user in DolphinScheduler (Security → Token Manage), "
        "put it in {env} and restart xihe",
        "zh": "在 DolphinScheduler 里为机器人的用户新建访问令牌（安全中心 → 令牌管理），写入 {env} 后重启 xihe",
    },
    "fix_password": {
        "en": "check that user {user} is enabled and {env} holds its password, then restart xihe",
        "zh": "确认用户 {user} 已启用、{env} 里是它的密码，然后重启 xihe",
    },
}


def dates_text(dates: Sequence[str]) -> str:
    """`2026-12-01..2026-12-03` for consecutive dates, else `2026-12-01,2026-12-05` (what /run reads)."""
    if len(dates) > 1 and is_contiguous([date.fromisoformat(d) for d in dates]):
        return f"{dates[0]}..{dates[-1]}"
    return ",".join(dates)


def _opt(key: str, lang: Lang, present: object, **values: object) -> Md:
    """An optional part of a message: the `key` entry when `present`, else nothing."""
    return say_md(DS, key, lang, **values) if present else Md("")


# ---- command replies (a tool's result) ---------------------------------------------------------


def trigger_reply(r: dict[str, Any], lang: Lang = "en") -> str:
    """`/run`: what was started, and the instance id(s) when DS already named them."""
    ids = r.get("instance_ids") or []
    days = [date.fromisoformat(d) for d in r.get("dates") or []]
    label = backfill_label(days, int(r.get("biz_date_offset", 0)), lang) if days else ""
    status = r["status"]
    return say_md(
        DS,
        "trigger",
        lang,
        head=say_md(DS, status, lang) if status in DS else status,
        workflow=r["workflow"],
        project=r["project"],
        environment=r["environment"] or say_md(DS, "no_env", lang),
        span=_opt("span", lang, days, label=label),
        which=say_md(DS, "instances", lang, ids=", ".join(map(str, ids)))
        if ids
        else say_md(DS, "no_id_yet", lang),
    )


def status_reply(r: dict[str, Any], lang: Lang = "en") -> str:
    """`/status`: state, task progress, times and attempts of one instance."""
    line = say_md(
        DS,
        "status",
        lang,
        workflow=r["workflow"],
        id=r["instance_id"],
        when=_opt("when", lang, r.get("business_date"), date=r.get("business_date")),
        state=state_text(r["state"], lang),
        done=r["tasks_done"],
        total=r["tasks_total"],
        running=_opt("running_tasks", lang, r["running_tasks"], names=", ".join(r["running_tasks"])),
        failed=_opt("failed_tasks", lang, r["failed_tasks"], names=", ".join(r["failed_tasks"])),
    )
    start = r.get("start_time")
    times: str = say_md(DS, "started_at", lang, at=start) if start else say_md(DS, "not_started", lang)
    times += _opt("ended_at", lang, r.get("end_time"), at=r.get("end_time"))
    if r.get("duration"):
        times += say_md(DS, "took" if r["final"] else "running_for", lang, duration=r["duration"])
    lines = [line, times]
    if r["run_times"] > 1:
        lines.append(say_md(DS, "run_times", lang, n=r["run_times"]))
    for f in r.get("failures") or []:  # what went wrong, from each failed task's log
        host = f["host"] or say_md(DS, "not_dispatched", lang)
        retries, most = f["retry_times"], f["max_retry_times"]
        values = {"task": f["task"], "state": f["state"], "error": f["error"]}
        lines.append(say_md(DS, "task_failed", lang, host=host, retries=retries, max_retries=most, **values))
    if r.get("next"):
        lines.append(say_md(DS, "rerun_hint", lang, id=r["instance_id"]))
    return "\n".join(lines)


def failed_reply(r: dict[str, Any], lang: Lang = "en") -> str:
    """The failed tasks of a run: host, retries and the last lines of each log."""
    values = {"workflow": r["workflow"], "id": r["instance_id"], "state": state_text(r["state"], lang)}
    if not r["failed"]:
        return say_md(DS, "no_failed", lang, **values)
    parts: list[str] = [say_md(DS, "failed_head", lang, **values)]
    for t in r["failed"]:
        parts.append(
            say_md(
                DS,
                "failed_task",
                lang,
                task=t["task"],
                state=state_text(t["state"], lang),
                host=t["host"] or say_md(DS, "not_dispatched", lang),
                retries=t["retry_times"],
                max_retries=t["max_retry_times"],
            )
        )
        if t["log_tail"]:
            parts.append("```\n" + block("\n".join(t["log_tail"].splitlines()[-8:])) + "\n```")
    return "\n".join(parts)


def action_reply(r: dict[str, Any], lang: Lang = "en") -> str:
    """`/rerun` and `/stop`: what was sent for which run."""
    return say_md(
        DS, r["action"], lang, workflow=r["workflow"], id=r["instance_id"], state=state_text(r["state"], lang)
    )


# ---- what the poll job posts ---------------------------------------------------------------------


def _when(w: Watch, inst: Instance, lang: Lang) -> str:
    if inst.schedule_time is None:
        return ""
    return say_md(DS, "when", lang, date=run_date_label(inst.schedule_time.date(), w.biz_date_offset))


def appeared_text(workflow: str, instance_id: int, task_id: int, lang: Lang = "en") -> str:
    """A run DS created after the start was answered (3.1/3.2): its id, once."""
    return say_md(DS, "appeared", lang, workflow=workflow, id=instance_id, task=task_id)


def progress_text(outcome: Progress, lang: Lang = "en") -> str:
    """A short progress line, e.g. "⏳ order_sync instance 101 for 2026-12-01 RUNNING, 1/3 tasks done"."""
    w, inst = outcome.watch, outcome.instance
    counted = outcome.tasks_done is not None
    return say_md(
        DS,
        "progress",
        lang,
        workflow=w.workflow,
        id=inst.id,
        when=_when(w, inst, lang),
        state=state_text(outcome.state, lang),
        tasks=_opt("tasks_done", lang, counted, done=outcome.tasks_done, total=outcome.tasks_total),
        running=_opt("running_tasks", lang, counted and outcome.running, names=", ".join(outcome.running)),
    )


def _failure_lines(events: Sequence[AlertEvent], lang: Lang) -> list[str]:
    lines: list[str] = []
    for e in events:
        if not e.failed_task:
            lines.append(say_md(DS, "event", lang, error=e.error))
            continue
        lines.append(
            say_md(
                DS,
                "task_failed",
                lang,
                task=e.failed_task,
                state=state_text(e.failed_task_state, lang),
                host=e.host or "?",
                retries=e.retry_times,
                max_retries=e.max_retry_times,
                error=e.error,
            )
        )
    return lines


def finished_text(outcome: Finished, events: Sequence[AlertEvent], lang: Lang = "en") -> str:
    """A run that ended: its state, the failed tasks, the backfill dates that did not run, what to do."""
    w, inst = outcome.watch, outcome.instance
    took = _opt("in", lang, inst.duration, duration=inst.duration)
    lines: list[str] = [
        say_md(
            DS,
            "finished",
            lang,
            icon=ICONS.get(outcome.state, "ℹ️"),
            workflow=w.workflow,
            id=inst.id,
            when=_when(w, inst, lang),
            state=state_text(outcome.state, lang),
            took=took,
        )
    ]
    if outcome.state == "FAILURE":
        lines += _failure_lines([e for e in events if e.instance_id == inst.id], lang)
    if outcome.not_run:
        n = len(outcome.not_run)
        key = "chain_stopped_many" if n > 1 else "chain_stopped"
        lines.append(say_md(DS, key, lang, dates=dates_text(outcome.not_run), n=n))
    if outcome.state == "FAILURE":
        lines.append(say_md(DS, "rerun_hint_chain" if outcome.not_run else "rerun_hint", lang, id=inst.id))
    return "\n".join(lines)


def not_found_text(outcome: NotFound, tz: str, timeout_seconds: float, lang: Lang = "en") -> str:
    """A start DS never ran, or a rerun it never took, with the one command to retry."""
    w = outcome.watch
    waited = say_md(DS, "minutes", lang, n=round(timeout_seconds / 60))
    if outcome.rerun_of:
        return say_md(DS, "rerun_not_taken", lang, workflow=w.workflow, id=outcome.rerun_of, waited=waited)
    dates = dates_text(w.dates)
    return say_md(
        DS,
        "never_ran",
        lang,
        workflow=w.workflow,
        dates=_opt("for_dates", lang, w.dates, dates=dates),
        sent=show(w.started_at, tz),
        waited=waited,
        retry=f"/run {w.workflow} {dates}" if w.dates else f"/run {w.workflow}",
    )


def auth_text(outcome: AuthFailed, cfg: DolphinConfig, lang: Lang = "en") -> str:
    """A followed run the bot can no longer read because DS rejects its credentials, and the fix."""
    w = outcome.watch
    ids = ", ".join(map(str, w.instance_ids))
    runs = say_md(DS, "instances", lang, ids=ids) if w.instance_ids else say_md(DS, "the_run", lang)
    if cfg.token_env:
        fix = say_md(DS, "fix_token", lang, env=cfg.token_env)
    else:
        fix = say_md(DS, "fix_password", lang, user=cfg.user, env=cfg.password_env)
    return say_md(DS, "auth", lang, workflow=w.workflow, runs=runs, fix=fix)
