"""The alert pipeline in the product: service, `/maint`, jobs, the DolphinScheduler webhook and a tool.

    service        `deps.alerts` = AlertService (SQL stores shared by replicas); the DolphinScheduler
                   watcher calls `.feed(events)`
    commands       `/maint on 30m [scope]`, `/maint off [N|scope]`, `/maint` (list), role-checked
                   (admin) and audited
    jobs           alerts_flush (held messages and ended windows → outbox) and alerts_deliver
                   (outbox → robot/e-mail; every attempt audited); alerts_scan when `scan.enabled`
                   (failed runs of the configured DS projects the bot did not start → feed, once)
    routes         POST /hooks/dolphinscheduler: shared secret from the env variable alerts.yaml
                   names, validated body, idempotent (a re-post is recorded as a duplicate)
    tools          send_wecom_alert (a write: the gate asks) through the same outbox

Nothing is installed when config/alerts.yaml is absent.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from xihe.agent.alerts.maintenance import MaintError, MaintOff, MaintOn, parse_maint_command
from xihe.agent.alerts.messages import MAINT
from xihe.agent.alerts.model import PUSHED, Reason
from xihe.agent.alerts.scan import ScanResult
from xihe.agent.alerts.scanner import Scanner
from xihe.agent.alerts.service import AlertService
from xihe.agent.alerts.webhook import handle_ds_webhook
from xihe.agent.audit import AuditEvent
from xihe.agent.deps import Services
from xihe.agent.feature import Context, Feature, Installed, Job, Runtime, Section
from xihe.agent.gate import is_admin
from xihe.agent.help import HelpEntry
from xihe.agent.i18n import Lang, say
from xihe.agent.inbound import reply_lang
from xihe.agent.timefmt import show
from xihe.config.alerts import AlertsConfig
from xihe.tools.dolphin.service import DolphinService
from xihe.tools.send_wecom_alert import NAME as TOOL_NAME
from xihe.tools.send_wecom_alert import make_spec

if TYPE_CHECKING:
    from xihe.agent.commands import Command
    from xihe.agent.gate import Who
    from xihe.agent.inbound import Inbound
    from xihe.agent.session import Session

log = logging.getLogger("xihe.alerts")


def _config(settings: Any) -> AlertsConfig | None:
    cfg = settings.section("alerts")
    return cfg if isinstance(cfg, AlertsConfig) else None


def service(app: Runtime) -> AlertService | None:
    """The installed alert service, or None when alerts are not configured."""
    svc = app.deps.alerts
    return svc if isinstance(svc, AlertService) else None


def scanner(app: Runtime) -> Scanner | None:
    """The failed-run scanner, when alerts.yaml enables `scan`."""
    found = app.state("alerts")
    return found if isinstance(found, Scanner) else None


MAINT_HELP = [
    HelpEntry("/maint on 30m [scope]", "silence alerts for a while", "/maint on 30m workflow:order_sync",
              "暂停告警一段时间", needs="admin",
              detail="scope: all, project:X, workflow:X or host:X.",
              detail_zh="范围：all、project:X、workflow:X 或 host:X。"),
    HelpEntry("/maint off [N|scope]", "end maintenance windows (yours, number N, or a scope)",
              "/maint off 3", "结束维护窗口（你的、编号 N 或某个范围）", needs="admin"),
    HelpEntry("/maint", "list open maintenance windows", "/maint", "列出进行中的维护窗口"),
]  # fmt: skip


# ---- feature interface ---------------------------------------------------------------------------
def install(ctx: Context) -> Installed:
    """When alerts.yaml exists: the tool, the service over the SQL stores, `/maint`, the jobs (flush
    windows every 5 s, deliver the outbox every 3 s, both idempotent and replica-safe; scan if on)
    and the webhook."""
    cfg = _config(ctx.settings)
    if cfg is None:
        return Installed()
    tool = make_spec(sorted(cfg.channels))
    if ctx.offline:
        return Installed(tools=[tool])
    for name in [ch.robot_key_env for ch in cfg.channels.values()] + [
        cfg.smtp.password_env,
        cfg.webhook.secret_env,
    ]:
        if name:
            ctx.deps.redactor.add(ctx.settings.secret(name))
    jobs = [
        Job("alerts_flush", flush_windows, 5, run_at_start=True, follows=True),
        Job("alerts_deliver", deliver_outbox, 3, follows=True),
    ]
    scan = None
    if cfg.scan.enabled:
        scan = Scanner(ctx.deps, cfg.scan, ctx.settings.workflows)
        jobs.append(Job("alerts_scan", scan_failed_runs, cfg.scan.interval_seconds))
    return Installed(
        tools=[tool],
        services=Services(
            alerts=AlertService(
                ctx.deps,
                cfg,
                ctx.settings.workflows,
                production=ctx.settings.access.production_environments(),
            )
        ),
        commands={"maint": _maint},
        help=list(MAINT_HELP),
        jobs=jobs,
        routes=[routes],
        state=scan,
    )


FEATURE = Feature("alerts", Section("alerts.yaml", "alerts", AlertsConfig), install, (TOOL_NAME,))


def flush_windows(app: Runtime) -> None:
    """Job: held instance messages and ended windows go to the outbox; expired maintenance is audited."""
    svc = service(app)
    if svc is not None:
        svc.tick()


def deliver_outbox(app: Runtime) -> None:
    """Job: send what is due in the outbox."""
    svc = service(app)
    if svc is not None:
        svc.deliver()


def scan_failed_runs(app: Runtime) -> ScanResult | None:
    """Job: report failed runs of the configured DS projects the bot did not start (once each)."""
    svc, scan = service(app), scanner(app)
    if svc is None or scan is None:
        return None
    ds = app.deps.dolphin
    if not isinstance(ds, DolphinService):
        log.warning("alerts.yaml enables the failed-run scan, but DolphinScheduler is not configured")
        return None
    return scan.run(ds, svc.feed, app.deps.clock())


def routes(app: Runtime) -> list[BaseRoute]:
    """POST /hooks/dolphinscheduler."""
    cfg = _config(app.settings)
    if cfg is None:
        return []

    async def hook(request: Request) -> Response:
        svc = service(app)
        if svc is None:
            return JSONResponse({"ok": False, "error": "alerts are not configured"}, status_code=503)
        body = await request.body()
        secret = app.settings.secret(cfg.webhook.secret_env) or ""
        now = app.deps.clock()
        status, out = handle_ds_webhook(
            request.headers, body, secret, now, cfg.webhook.header, cfg.webhook.ds_timezone
        )
        if isinstance(out, str):
            app.deps.audit.record(
                AuditEvent(
                    at=now,
                    kind="webhook",
                    actor=request.client.host if request.client else "unknown",
                    outcome="rejected",
                    tool="/hooks/dolphinscheduler",
                    reason=f"HTTP {status}: {out}",
                )
            )
            return JSONResponse({"ok": False, "error": out}, status_code=status)
        records = await run_in_threadpool(svc.feed, out.events, out.bad)
        if status != 200:
            app.deps.audit.record(
                AuditEvent(
                    at=now,
                    kind="webhook",
                    actor=request.client.host if request.client else "unknown",
                    outcome="rejected",
                    tool="/hooks/dolphinscheduler",
                    reason=f"HTTP {status}: " + "; ".join(why for _w, why in out.bad)[:500],
                )
            )
        return JSONResponse(
            {
                "ok": status == 200,
                "events": len(out.events),
                "bad": [{"item": where, "error": why} for where, why in out.bad],
                "pushed": sum(1 for r in records if r.reason in PUSHED),
                "duplicates": sum(1 for r in records if r.reason is Reason.DUPLICATE_EVENT),
                "records": [r.to_dict() for r in records],
            },
            status_code=status,
        )

    return [Route("/hooks/dolphinscheduler", hook, methods=["POST"])]


# ---- /maint --------------------------------------------------------------------------------------
def _fmt(svc: AlertService, number: int, w: Any, lang: Lang) -> str:
    tz = svc.pipeline.renderer.tz
    start, end = show(w.start, tz, seconds=False), show(w.end, tz, seconds=False)
    return say(
        MAINT, "window", lang, n=number, scope=w.scope, start=start, end=end, who=w.created_by or w.source
    )


def _maint(session: Session, who: Who, msg: Inbound, cmd: Command) -> str:
    app_deps = session.deps
    svc = app_deps.alerts
    lang = reply_lang(session, msg)
    if not isinstance(svc, AlertService):
        return say(MAINT, "not_configured", lang)
    now = app_deps.clock()
    if not cmd.args:
        open_windows = svc.open_windows(now)
        yaml_names = [s.name for s in svc.config.maintenance]
        lines = [_fmt(svc, n, w, lang) for n, w in open_windows] or [say(MAINT, "none_open", lang)]
        if yaml_names:
            lines.append(say(MAINT, "scheduled", lang, names=", ".join(yaml_names)))
        return "\n".join(lines)
    if not is_admin(who, app_deps.settings.access):
        app_deps.audit.record(
            AuditEvent(
                at=now,
                kind="maintenance",
                actor=who.user,
                outcome="denied",
                tool="/maint",
                intent=app_deps.redactor.text(msg.text),
                reason="no admin role",
            )
        )
        roles = ", ".join(who.roles) or say(MAINT, "no_roles", lang)
        return say(MAINT, "needs_admin", lang, verb=cmd.args[0], user=who.user, roles=roles)
    number: int | None = None
    if cmd.args[0] == "off" and len(cmd.args) == 2 and cmd.args[1].lstrip("#").isdigit():
        number = int(cmd.args[1].lstrip("#"))
        parsed: MaintOn | MaintOff = MaintOff(None)
    else:
        try:
            parsed = parse_maint_command("/maint " + cmd.rest, now, who.user)
        except MaintError as exc:
            return exc.message.in_(lang)
    change = svc.apply_maint(parsed, who.user, number)
    if change.opened:
        n, w = change.opened[0]
        reply = say(MAINT, "on", lang, window=_fmt(svc, n, w, lang))
        p0 = svc.p0_covered(w)
        if p0:
            where = say(MAINT, "p0_host", lang) if w.scope.kind == "host" else ""
            reply += "\n" + say(MAINT, "p0", lang, workflows=", ".join(p0), where=where)
        return reply
    if not change.closed:
        return say(MAINT, "none_matched", lang)
    return say(MAINT, "closed", lang, n=len(change.closed))
