"""How `/oncall` and `xihe oncall show` show who is on call: one line per team (its shift and the
overrides in force), then the workflows that page their own `oncall` list. WeCom markdown, every
name and id encoded as outside text."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from zoneinfo import ZoneInfo

from xihe.agent.i18n import Lang, say_md
from xihe.agent.oncall.lookup import OnCall
from xihe.agent.oncall.messages import ONCALL
from xihe.agent.timefmt import show
from xihe.agent.wecom_markdown import Md
from xihe.config.oncall import OnCallConfig
from xihe.config.workflows import WorkflowsConfig


def person(uid: str | None, names: Mapping[str, str], lang: Lang) -> str:
    """`Name (userid)` when access.yaml names the user, else the userid; `nobody` for None."""
    if not uid:
        return say_md(ONCALL, "nobody", lang)
    name = names.get(uid, "")
    return f"{name} ({uid})" if name and name != uid else uid


def team_lines(cfg: OnCallConfig, state: OnCall, names: Mapping[str, str], lang: Lang) -> list[Md]:
    """A team's line and one line per override in force."""
    tz = ZoneInfo(cfg.zone_of(state.team))
    rot = cfg.rotations[state.team]
    lines = [
        say_md(
            ONCALL,
            "team",
            lang,
            team=state.team,
            primary=person(state.primary, names, lang),
            secondary=person(state.secondary, names, lang),
            start=show(state.shift.start, tz, seconds=False),
            end=show(state.shift.end, tz, seconds=False),
            every=say_md(ONCALL, rot.every, lang),
        )
    ]
    for o in state.overrides:
        lines.append(
            say_md(
                ONCALL,
                "take_line" if o.kind == "take" else "swap_line",
                lang,
                n=o.id,
                user=person(o.user, names, lang),
                replaces=person(o.replaces, names, lang),
                end=show(o.end, tz, seconds=False),
                by=o.created_by,
            )
        )
    return lines


def describe(
    cfg: OnCallConfig,
    states: Iterable[OnCall],
    at: datetime,
    zone: str,
    names: Mapping[str, str],
    lang: Lang,
    workflows: WorkflowsConfig | None = None,
) -> Md:
    """The whole answer; `workflows` given: also the workflows that page their own list."""
    lines: list[str] = [say_md(ONCALL, "now", lang, at=show(at, zone, seconds=False))]
    for state in states:
        lines += team_lines(cfg, state, names, lang)
    own = [
        f"{wf.name} → {', '.join(wf.oncall)}"
        for wf in (workflows.workflows if workflows is not None else ())
        if wf.oncall and wf.team not in cfg.rotations
    ]
    if own:
        lines.append(say_md(ONCALL, "listed", lang, items="; ".join(own)))
    return Md("\n".join(lines))
