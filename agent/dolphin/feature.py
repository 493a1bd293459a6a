"""DolphinScheduler in chat: tools, `/run` `/status` `/rerun` `/stop` (and the commands of
`ops_commands`: /pause /resume /force-success /log /runs /failed /schedule), run watching and the name sync;
and DolphinScheduler's events for the alert pipeline.

Active when config/dolphin.yaml exists and the credentials it names are set. Then:

- tools (tools/dolphin/): trigger_dolphinscheduler, query_ds_task_status, ds_failed_tasks,
  rerun_failed, stop_run, pause_run, resume_run, force_success, ds_task_log, ds_recent_runs,
  ds_failed_runs, ds_schedule, set_schedule; the gate sees each write's workflow environment (workflows.yaml);
- commands that go through `session.run_tool` (same registry, gate, confirmation and audit):
      /run order_sync 2026-12-01..2026-12-03    /status 101    /rerun 101    /stop 101
  and, when no model is configured, the `/run` that a free-text run request means (a command hint);
- jobs: `ds_poll` polls the claimed watch rows (`run_poll_cycle` over the SQL store), posts
  progress (throttled) and the final state to the conversation that started the run, and hands
  AlertEvents to `deps.alerts` when the alert pipeline is installed; `ds_catalog_sync`
  refreshes name → code and release state; `ds_schedule_reminder` reminds a schedule left offline.
- when config/alerts.yaml exists (with or without dolphin.yaml): the `/hooks/dolphinscheduler`
  webhook, the `alerts_scan` job and `deps.origins` (sources.py).

Delivery is at most once per outcome: the watch row is saved (lease released) before the
messages go out, so a crash in between loses that message rather than repeating it forever.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from xihe.agent.alert_event import AlertEvent
from xihe.agent.commands import Command
from xihe.agent.deps import Services
from xihe.agent.dolphin import ops_commands
from xihe.agent.dolphin.schedule_reminder import remind_schedules
from xihe.agent.dolphin.sources import install_sources
from xihe.agent.errors import ConfigError, TaskStateError
from xihe.agent.feature import Context, Feature, Installed, Job, Runtime, merge
from xihe.agent.help import HelpEntry
from xihe.agent.hooks import Hooks
from xihe.agent.i18n import Catalog, Lang, say
from xihe.agent.inbound import reply_lang
from xihe.agent.tasks import TaskStatus
from xihe.agent.tool_names import DS_TOOLS
from xihe.config.dolphin import DOLPHIN_SECTION, credentials
from xihe.integrations.dolphinscheduler.states import is_terminal
from xihe.tools.dolphin.hint import run_command
from xihe.tools.dolphin.messages import (
    appeared_text,
    auth_text,
    finished_text,
    not_found_text,
    progress_text,
)
from xihe.tools.dolphin.poll import run_poll_cycle
from xihe.tools.dolphin.service import DolphinService, build_service, service_of
from xihe.tools.dolphin.watch import AuthFailed, Finished, NotFound, PollResult, Progress, Watch

if TYPE_CHECKING:
    from xihe.agent.gate import Who
    from xihe.agent.inbound import Inbound
    from xihe.agent.session import Session
    from xihe.tools.dolphin.store import SqlWatchStore

log = logging.getLogger("xihe.dolphin")

PROGRESS_EVERY = timedelta(minutes=5)  # at most one progress message per run in this window

HELP = [
    HelpEntry("/run WORKFLOW [DATES]", "start a workflow, or backfill business dates", "/run order_sync 昨天",
              "启动工作流，或按业务日期补数", needs="tool", tool="trigger_dolphinscheduler",
              detail="DATES: one date, a range 2026-12-01..2026-12-03, or words like 昨天, 上周一, 12月1号到3号; "
                     "上周 / last week and 上个月 / last month backfill every date of it, one after another.",
              detail_zh="日期：单个日期、区间 2026-12-01..2026-12-03，或 昨天、上周一、12月1号到3号 这样的说法；"
                        "上周、上个月会逐日补数其中的每一天。"),
    HelpEntry("/status INSTANCE", "state, task progress and duration of a run", "/status 1024",
              "某次运行的状态、任务进度和耗时", needs="tool", tool="query_ds_task_status"),
    HelpEntry("/rerun INSTANCE", "rerun a failed run from its failed tasks", "/rerun 1024",
              "从失败的任务开始重跑一次失败的运行", needs="tool", tool="rerun_failed"),
    HelpEntry("/stop INSTANCE", "stop a running run", "/stop 1024", "停止正在运行的实例", needs="tool",
              tool="stop_run"),
]  # fmt: skip


def install(ctx: Context) -> Installed:
    """DolphinScheduler in chat (`install_chat`) and its alert event sources (`install_sources`)."""
    chat, sources = install_chat(ctx), install_sources(ctx)
    return replace(merge([chat, sources]), state=sources.state)


def install_chat(ctx: Context) -> Installed:
    """When dolphin.yaml is configured and its credentials are set: the service, the tools, the
    commands and their help lines, the poll and name-sync jobs. Without credentials it is off, which
    /readyz shows as a warning."""
    cfg = ctx.settings.get(DOLPHIN_SECTION)
    if cfg is None:
        return Installed()
    try:
        credentials(cfg)
    except ConfigError as exc:
        if not ctx.offline:
            log.warning("DolphinScheduler is configured but disabled: %s", exc)
        return Installed(warnings={"dolphinscheduler": str(exc)})
    from xihe.tools.dolphin.tools import SPECS

    if ctx.offline:
        return Installed(tools=list(SPECS))
    svc = build_service(ctx.deps, cfg)
    tick = max(1.0, min(cfg.poll.interval_seconds / 3, 15.0))
    return Installed(
        tools=list(SPECS),
        services=Services(dolphin=svc),
        commands={"run": _run, "status": _status, "rerun": _rerun, "stop": _stop, **ops_commands.COMMANDS},
        help=[*HELP, *ops_commands.HELP],
        hooks=Hooks(command_hints=(lambda text: run_command(text, ctx.settings.workflows),)),
        jobs=[
            Job("ds_poll", poll_watches, tick, follows=True),
            Job("ds_catalog_sync", sync_names, 600),
            Job("ds_schedule_reminder", remind_schedules, 60, follows=True),
        ],
    )


FEATURE = Feature("dolphin", DOLPHIN_SECTION, install, DS_TOOLS)


# ---- commands --------------------------------------------------------------------------------


USAGE: Catalog = {
    "run": {
        "en": "Usage: /run WORKFLOW [DATES], e.g. `/run order_sync 2026-12-01..2026-12-03` or `/run 订单同步 昨天`.",
        "zh": "用法：/run 工作流 [日期]，例如 `/run order_sync 2026-12-01..2026-12-03` 或 `/run 订单同步 昨天`。",
    },
    "instance": {
        "en": "Usage: /{verb} INSTANCE [PROJECT], e.g. /{verb} 101.",
        "zh": "用法：/{verb} 实例编号 [项目]，例如 /{verb} 101。",
    },
}


def _run(session: Session, who: Who, msg: Inbound, cmd: Command) -> str:
    if not cmd.args:
        return say(USAGE, "run", reply_lang(session, msg))
    args: dict[str, object] = {"workflow": cmd.args[0], "dates": " ".join(cmd.args[1:])}
    return session.run_tool(who, msg, "trigger_dolphinscheduler", args).reply


def _instance_command(tool: str, verb: str) -> Any:
    def handler(session: Session, who: Who, msg: Inbound, cmd: Command) -> str:
        if not cmd.args or not cmd.args[0].lstrip("#").isdigit():
            return say(USAGE, "instance", reply_lang(session, msg), verb=verb)
        args: dict[str, object] = {"instance_id": int(cmd.args[0].lstrip("#"))}
        if len(cmd.args) > 1:
            args["project"] = cmd.args[1]
        return session.run_tool(who, msg, tool, args).reply

    return handler


_status = _instance_command("query_ds_task_status", "status")
_rerun = _instance_command("rerun_failed", "rerun")
_stop = _instance_command("stop_run", "stop")


# ---- jobs ------------------------------------------------------------------------------------


def _lang(app: Runtime, w: Watch) -> Lang:
    """The language of the conversation a watched run reports to (that of the task that started it)."""
    tasks = app.deps.tasks
    try:
        goal = tasks.get(int(w.task_id)).goal
    except (ValueError, TaskStateError):
        goal = ""
    return app.deps.lang(goal, w.conversation)


def _hand_to_alerts(app: Runtime, events: list[AlertEvent]) -> None:
    """Failures go to the alert pipeline (AlertService.feed takes one poll's batch)."""
    alerts = app.deps.alerts
    if alerts is not None and events:
        alerts.feed(events)


def deliver(app: Runtime, svc: DolphinService, result: PollResult, now: datetime) -> None:
    """Post outcomes to their conversations and failures to the alert pipeline; one failure never blocks the rest."""
    for outcome in result.outcomes:
        conversation = outcome.watch.conversation
        try:
            lang = _lang(app, outcome.watch)
            _link_run(app, outcome, now, lang)
            if isinstance(outcome, Finished):
                app.deps.notify(conversation, finished_text(outcome, result.events, lang))
            elif isinstance(outcome, Progress):
                text = progress_text(outcome, lang)
                if svc.watches.progress_note(outcome.watch.key, text, now, PROGRESS_EVERY):
                    app.deps.notify(conversation, text)
            elif isinstance(outcome, NotFound):
                timeout = svc.policy.discovery_timeout
                app.deps.notify(
                    conversation, not_found_text(outcome, app.deps.settings.core.timezone, timeout, lang)
                )
                if not outcome.rerun_of:
                    _mark_not_run(app, outcome.watch, now)
            elif isinstance(outcome, AuthFailed):
                app.deps.notify(conversation, auth_text(outcome, svc.config, lang))
        except Exception:
            log.exception("could not post a DolphinScheduler outcome to %s", conversation)
    try:
        _hand_to_alerts(app, result.events)
    except Exception:
        log.exception("the alert pipeline refused %d DolphinScheduler event(s)", len(result.events))
    for error in result.errors:
        log.warning("DolphinScheduler poll: %s", error)


def _link_run(
    app: Runtime, outcome: Progress | Finished | NotFound | AuthFailed, now: datetime, lang: Lang
) -> None:
    """The task learns its runs as soon as they are seen (3.1/3.2 create them late), and how they ended."""
    if not isinstance(outcome, Progress | Finished) or not outcome.watch.task_id.isdigit():
        return
    task_id = int(outcome.watch.task_id)
    if app.deps.tasks.add_runs(task_id, [outcome.instance.id], now) and isinstance(outcome, Progress):
        # a run DolphinScheduler created after the start was answered (3.1/3.2): name it at once
        i = outcome.instance.id
        app.deps.notify(outcome.watch.conversation, appeared_text(outcome.watch.workflow, i, task_id, lang))
    if isinstance(outcome, Finished):
        final = dict(outcome.watch.states)
        bad = [state for state in final.values() if is_terminal(state) and state != "SUCCESS"]
        app.deps.tasks.set_outcome(task_id, f"run {bad[-1] if bad else outcome.state}"[:40], now)


def _mark_not_run(app: Runtime, w: Watch, now: datetime) -> None:
    """The task that asked for a run DS never made did not get what it asked for: it is not `done`."""
    try:
        app.deps.tasks.update(
            int(w.task_id),
            now,
            expect=(TaskStatus.DONE,),
            status=TaskStatus.FAILED,
            error=f"DolphinScheduler never created the {w.workflow} run (marker {w.key}); nothing ran",
        )
    except (ValueError, TaskStateError):
        log.warning("could not mark task %s of watch %s as not run", w.task_id, w.key)


class _Batched:
    """The SQL watch store with saves collected, so one poll cycle writes back in one transaction."""

    def __init__(self, store: SqlWatchStore) -> None:
        self.store = store
        self.pending: list[Watch] = []

    def due(self, now: datetime, limit: int = 1000) -> list[Watch]:
        return self.store.due(now, limit)

    def save(self, watch: Watch) -> None:
        self.pending.append(watch)

    def add(self, watch: Watch) -> None:
        self.store.add(watch)

    def get(self, key: str) -> Watch | None:
        return self.store.get(key)

    def active(self) -> list[Watch]:
        return self.store.active()


def poll_watches(app: Runtime) -> PollResult | None:
    """The `ds_poll` job: claim due watches, poll them with few requests, save, then report."""
    svc = service_of(app.deps)
    if svc is None:
        return None
    now = app.deps.clock()
    batch = _Batched(svc.watches)
    try:
        result = run_poll_cycle(batch, svc.poll_client, now, svc.policy)
        svc.watches.save_all(batch.pending)
    except Exception:
        svc.watches.release()  # let the next cycle (here or on another replica) take them at once
        raise
    deliver(app, svc, result, now)
    return result


def sync_names(app: Runtime) -> int:
    """The `ds_catalog_sync` job: refresh name → code and release state; returns the entry count."""
    from xihe.tools.dolphin.service import sync

    svc = service_of(app.deps)
    if svc is None:
        return 0
    return len(sync(svc, app.deps.clock()))
