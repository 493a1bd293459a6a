"""The on-call feature: rotations from config/oncall.yaml, overrides from chat, and the lookup the
alert pipeline asks.

    services   `deps.oncall` = RotationOnCall (rotation + stored overrides; reads the live config, so
               an edited oncall.yaml counts once the config reload applied it)
    commands   `/oncall [all|TEAM]`, `/oncall take [2h] [TEAM]`, `/oncall swap @USER [today] [TEAM]`:
               validated (members of the rotation only), stored (table oncall_override, shared by
               replicas), audited (kind `oncall`), ending by themselves

Nothing is installed when config/oncall.yaml is absent (workflows page their `oncall` lists).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from xihe.agent.audit import AuditEvent
from xihe.agent.deps import Deps, Services
from xihe.agent.feature import Context, Feature, Installed
from xihe.agent.help import HelpEntry
from xihe.agent.i18n import Lang, said_md, say_md
from xihe.agent.inbound import reply_lang
from xihe.agent.oncall.command import OnCallError, parse_show, plan_swap, plan_take
from xihe.agent.oncall.lookup import RotationOnCall
from xihe.agent.oncall.messages import ONCALL
from xihe.agent.oncall.overrides import SqlOverrides
from xihe.agent.oncall.rotation import Override
from xihe.agent.oncall.view import describe, person
from xihe.agent.timefmt import show
from xihe.config.oncall import ONCALL_SECTION, OnCallConfig

if TYPE_CHECKING:
    from xihe.agent.commands import Command
    from xihe.agent.gate import Who
    from xihe.agent.inbound import Inbound
    from xihe.agent.session import Session

ONCALL_HELP = [
    HelpEntry("/oncall [all|TEAM]", "who is on call now (your team, all teams or one)", "/oncall",
              "现在谁值班（你的团队、所有团队或某个团队）"),
    HelpEntry("/oncall take [2h] [TEAM]", "take your team's current shift (for a while, or until the hand-off)",
              "/oncall take 2h", "临时接你团队的班（一段时间，或到交接为止）",
              detail="Members of the rotation only; 15 minutes to max_override_hours (oncall.yaml). "
              "It ends by itself.",
              detail_zh="仅限轮换成员；15 分钟到 max_override_hours（oncall.yaml）。到时自动结束。"),
    HelpEntry("/oncall swap @USER [today|tomorrow|DATE|4h] [TEAM]", "someone in your rotation covers your duty",
              "/oncall swap @lisi today", "请轮换中的同事替你值班",
              detail="USER is a userid or a display name from access.yaml; you cover their duty in return.",
              detail_zh="USER 是 userid 或 access.yaml 中的显示名；你同时替 ta 的班。"),
]  # fmt: skip


def install(ctx: Context) -> Installed:
    """When oncall.yaml exists: the lookup service and `/oncall`."""
    if ctx.settings.get(ONCALL_SECTION) is None or ctx.offline:
        return Installed()
    deps = ctx.deps
    lookup = RotationOnCall(lambda: deps.settings.get(ONCALL_SECTION), SqlOverrides(deps.engine))
    return Installed(services=Services(oncall=lookup), commands={"oncall": _oncall}, help=list(ONCALL_HELP))


FEATURE = Feature("oncall", ONCALL_SECTION, install)


def names_of(deps: Deps) -> dict[str, str]:
    """userid → display name, from access.yaml."""
    return {uid: u.name for uid, u in deps.settings.access.users.items() if u.name}


def _oncall(session: Session, who: Who, msg: Inbound, cmd: Command) -> str:
    deps = session.deps
    lang = reply_lang(session, msg)
    cfg = deps.settings.get(ONCALL_SECTION)
    if cfg is None:
        return say_md(ONCALL, "not_configured", lang)
    now = deps.clock()
    store = SqlOverrides(deps.engine)
    verb = cmd.args[0].lower() if cmd.args else ""
    try:
        if verb == "take":
            planned = plan_take(
                cfg, cmd.args[1:], who.user, now, lambda t, s, e: store.overlapping([t], s, e)
            )
        elif verb == "swap":
            planned = plan_swap(
                cfg,
                cmd.args[1:],
                who.user,
                now,
                lambda t, s, e: store.overlapping([t], s, e),
                names_of(deps),
            )
        else:
            shown = parse_show(cfg, cmd.args, who.user)
            return show_now(deps, cfg, store, shown.teams, now, lang, everything=shown.everything)
    except OnCallError as exc:
        _audit(deps, now, who.user, "refused", msg.text, str(exc), {})
        return said_md(exc.message, lang)
    saved = store.add(planned, note=deps.redactor.text(msg.text))
    _audit(deps, now, who.user, planned.kind, msg.text, _summary(saved), _detail(saved))
    return _confirmation(cfg, saved, names_of(deps), lang)


def show_now(
    deps: Deps,
    cfg: OnCallConfig,
    store: SqlOverrides,
    teams: tuple[str, ...],
    at: datetime,
    lang: Lang,
    *,
    everything: bool,
) -> str:
    """Who `teams` have on call at `at`; `everything`: also the workflows that page their own list."""
    lookup = RotationOnCall(lambda: cfg, store)
    states = [lookup.team(cfg, t, at) for t in teams]
    workflows = deps.settings.workflows if everything else None
    return describe(cfg, states, at, deps.settings.core.timezone, names_of(deps), lang, workflows)


def _confirmation(cfg: OnCallConfig, o: Override, names: dict[str, str], lang: Lang) -> str:
    tz = cfg.zone_of(o.team)
    end = show(o.end, tz, seconds=False)
    if o.kind == "take":
        return say_md(ONCALL, "took", lang, team=o.team, end=end, before=person(o.replaces, names, lang))
    return say_md(
        ONCALL,
        "swapped",
        lang,
        user=person(o.user, names, lang),
        team=o.team,
        start=show(o.start, tz, seconds=False),
        end=end,
        back=say_md(ONCALL, "swapped_back", lang),
    )


def _summary(o: Override) -> str:
    what = f"{o.user} takes the shift" if o.kind == "take" else f"{o.user} covers {o.replaces}"
    return f"override #{o.id} of {o.team}: {what} {o.start.isoformat()} – {o.end.isoformat()}"


def _detail(o: Override) -> dict[str, object]:
    return {
        "id": o.id,
        "team": o.team,
        "kind": o.kind,
        "user": o.user,
        "replaces": o.replaces,
        "start": o.start.isoformat(),
        "end": o.end.isoformat(),
        "hours": round((o.end - o.start) / timedelta(hours=1), 2),
    }


def _audit(
    deps: Deps, now: datetime, actor: str, outcome: str, typed: str, reason: str, detail: dict[str, object]
) -> None:
    deps.audit.record(
        AuditEvent(
            at=now,
            kind="oncall",
            actor=actor,
            outcome=outcome,
            tool="/oncall",
            intent=deps.redactor.text(typed),
            reason=reason,
            external_ids={"override_id": detail["id"]} if "id" in detail else {},
            detail=detail,
        )
    )
