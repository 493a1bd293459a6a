"""The alert pipeline in the product: service, `/maint`, jobs and a tool.

    service        `deps.alerts` = AlertService (SQL stores shared by replicas); the DolphinScheduler
                   feature calls `.feed(events)` (its watcher, webhook and failed-run scan)
    commands       `/maint on 30m [scope]`, `/maint off [N|scope]`, `/maint` (list), role-checked
                   (admin) and audited; `/ack [ID]` (acknowledge an alert: its escalation stops,
                   its channel hears who has it), audited
    jobs           alerts_flush (held messages and ended windows → outbox) and alerts_deliver
                   (outbox → robot/e-mail; every attempt audited)
    tools          send_wecom_alert (a write: the gate asks) through the same outbox

Nothing is installed when config/alerts.yaml is absent.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from xihe.agent.alerts.lifecycle import Why
from xihe.agent.alerts.maintenance import MaintError, MaintOff, MaintOn, parse_maint_command
from xihe.agent.alerts.messages import ACK, MAINT
from xihe.agent.alerts.service import AlertService
from xihe.agent.audit import AuditEvent
from xihe.agent.deps import Services
from xihe.agent.feature import Context, Feature, Installed, Job, Runtime
from xihe.agent.gate import is_admin
from xihe.agent.help import HelpEntry
from xihe.agent.i18n import Lang, said_md, say_md
from xihe.agent.inbound import reply_lang
from xihe.agent.timefmt import show
from xihe.agent.wecom_markdown import Md
from xihe.config.alerts import ALERTS_SECTION
from xihe.tools.send_wecom_alert import NAME as TOOL_NAME
from xihe.tools.send_wecom_alert import make_spec

if TYPE_CHECKING:
    from xihe.agent.commands import Command
    from xihe.agent.gate import Who
    from xihe.agent.inbound import Inbound
    from xihe.agent.session import Session


def service(app: Runtime) -> AlertService | None:
    """The installed alert service, or None when alerts are not configured."""
    svc = app.deps.alerts
    return svc if isinstance(svc, AlertService) else None


MAINT_HELP = [
    HelpEntry("/maint on 30m [scope]", "silence alerts for a while", "/maint on 30m workflow:order_sync",
              "暂停告警一段时间", needs="admin",
              detail="scope: all, project:X, workflow:X or host:X.",
              detail_zh="范围：all、project:X、workflow:X 或 host:X。"),
    HelpEntry("/maint off [N|scope]", "end maintenance windows (yours, number N, or a scope)",
              "/maint off 3", "结束维护窗口（你的、编号 N 或某个范围）", needs="admin"),
    HelpEntry("/maint", "list open maintenance windows", "/maint", "列出进行中的维护窗口"),
    HelpEntry("/ack [ID]", "acknowledge an alert (its instance id, or A7); alone: the newest open one",
              "/ack 101", "认领告警（实例编号或告警编号 A7）；不带编号：最新的未处理告警",
              detail="Stops its escalation; the alert channel hears who has it.",
              detail_zh="停止升级，告警群会收到谁认领了它。"),
]  # fmt: skip


# ---- feature interface ---------------------------------------------------------------------------
def install(ctx: Context) -> Installed:
    """When alerts.yaml exists: the tool, the service over the SQL stores, `/maint` and the jobs (flush
    windows every 5 s, deliver the outbox every 3 s, both idempotent and replica-safe)."""
    cfg = ctx.settings.get(ALERTS_SECTION)
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
        commands={"maint": _maint, "ack": _ack},
        help=list(MAINT_HELP),
        jobs=jobs,
    )


FEATURE = Feature("alerts", ALERTS_SECTION, install, (TOOL_NAME,))


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


# ---- /ack ---------------------------------------------------------------------------------------
def _ack(session: Session, who: Who, msg: Inbound, cmd: Command) -> str:
    """`/ack [ID]`: the alert has someone; its escalation stops and its channel hears who."""
    deps = session.deps
    svc = deps.alerts
    lang = reply_lang(session, msg)
    if not isinstance(svc, AlertService):
        return say_md(MAINT, "not_configured", lang)
    if len(cmd.args) > 1:
        return say_md(ACK, "usage", lang)
    ref = cmd.args[0] if cmd.args else ""
    if ref and not (ref.lstrip("#").isdigit() or (ref[:1] in "Aa" and ref[1:].isdigit())):
        return say_md(ACK, "usage", lang)
    out = svc.acknowledge(ref, who.user, msg.conversation)
    a = out.alert
    if a is None:
        return say_md(ACK, "unknown", lang, ref=ref) if ref else say_md(ACK, "none", lang)
    facts = {"short": a.short, "workflow": a.workflow, "instance_id": a.instance_id}
    if out.refused:
        return say_md(ACK, "refused", lang, user=who.user, short=a.short, team=out.refused)
    if out.why is Why.ACKED:
        return say_md(ACK, "acked", lang, **facts, tier=a.tier.value, channel=a.channel)
    if out.why is Why.ALREADY_ACKED:
        at = show(a.acked_at, svc.pipeline.renderer.tz, seconds=False) if a.acked_at else "-"
        return say_md(ACK, "already", lang, short=a.short, who=_person(deps, a.acked_by), at=at)
    state = say_md(ACK, f"state_{a.state}", lang) if a.state in ("resolved", "expired") else Md(a.state)
    return say_md(ACK, "closed", lang, **facts, state=state)


def _person(deps: Any, user: str) -> str:
    u = deps.settings.access.users.get(user)
    return f"{u.name} ({user})" if u is not None and u.name else user


# ---- /maint --------------------------------------------------------------------------------------
def _fmt(svc: AlertService, number: int, w: Any, lang: Lang) -> Md:
    tz = svc.pipeline.renderer.tz
    start, end = show(w.start, tz, seconds=False), show(w.end, tz, seconds=False)
    return say_md(
        MAINT, "window", lang, n=number, scope=w.scope, start=start, end=end, who=w.created_by or w.source
    )


def _listing(svc: AlertService, now: datetime, lang: Lang) -> str:
    """`/maint`: every window in force, chat ones (numbered) and alerts.yaml ones, then the schedules."""
    tz = svc.pipeline.renderer.tz
    lines = [_fmt(svc, n, w, lang) for n, w in svc.open_windows(now)]
    active = svc.config_windows(now)
    for name, scope, end in active:
        lines.append(
            say_md(MAINT, "config_window", lang, name=name, scope=scope, end=show(end, tz, seconds=False))
        )
    lines = lines or [say_md(MAINT, "none_open", lang)]
    idle = [s.name for s in svc.config.maintenance if s.name not in {name for name, _s, _e in active}]
    if idle:
        lines.append(say_md(MAINT, "scheduled", lang, names=", ".join(idle)))
    return "\n".join(lines)


def _maint(session: Session, who: Who, msg: Inbound, cmd: Command) -> str:
    app_deps = session.deps
    svc = app_deps.alerts
    lang = reply_lang(session, msg)
    if not isinstance(svc, AlertService):
        return say_md(MAINT, "not_configured", lang)
    now = app_deps.clock()
    if not cmd.args:
        return _listing(svc, now, lang)
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
        roles = ", ".join(who.roles) or say_md(MAINT, "no_roles", lang)
        return say_md(MAINT, "needs_admin", lang, verb=cmd.args[0], user=who.user, roles=roles)
    number: int | None = None
    if cmd.args[0] == "off" and len(cmd.args) == 2 and cmd.args[1].lstrip("#").isdigit():
        number = int(cmd.args[1].lstrip("#"))
        parsed: MaintOn | MaintOff = MaintOff(None)
    else:
        try:
            parsed = parse_maint_command("/maint " + cmd.rest, now, who.user)
        except MaintError as exc:
            return said_md(exc.message, lang)
    change = svc.apply_maint(parsed, who.user, number)
    if change.opened:
        n, w = change.opened[0]
        reply: str = say_md(MAINT, "on", lang, window=_fmt(svc, n, w, lang))
        p0 = svc.p0_covered(w)
        if p0:
            where = say_md(MAINT, "p0_host", lang) if w.scope.kind == "host" else Md("")
            reply += "\n" + say_md(MAINT, "p0", lang, workflows=", ".join(p0), where=where)
        return reply + "\n" + say_md(MAINT, "posted", lang, channels=", ".join(svc.covered_channels(w)))
    if not change.closed:
        return say_md(MAINT, "none_matched", lang)
    return say_md(MAINT, "closed", lang, n=len(change.closed))
