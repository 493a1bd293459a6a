"""`/oncall` arguments → what to show or which override to store: pure, with the time given.

    /oncall                                   your team(s) now (every team when you are in none)
    /oncall all | TEAM                        every team | one team
    /oncall take [DURATION] [TEAM]            you are the primary from now for DURATION (default:
                                              until the shift's hand-off)
    /oncall swap @USER [PERIOD] [TEAM]        USER covers your duty in PERIOD (default today) and you
                                              cover theirs, if any

DURATION is 30m, 2h or 1d; PERIOD is today, tomorrow, a date YYYY-MM-DD (a day in the team's zone)
or a duration from now. USER is a member of the rotation, by userid or by access.yaml display name.
Every error is an `OnCallError` naming the bad argument.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from xihe.agent.i18n import Text, text
from xihe.agent.oncall.lookup import on_call
from xihe.agent.oncall.messages import ONCALL
from xihe.agent.oncall.rotation import Override, shifts_between
from xihe.agent.timefmt import show
from xihe.config.oncall import OnCallConfig
from xihe.config.semantic import did_you_mean

MIN_OVERRIDE = timedelta(minutes=15)
_DURATION = re.compile(r"^(\d{1,4})\s*(m|min|h|d)$", re.I)

Stored = Callable[[str, datetime, datetime], list[Override]]  # (team, start, end) → overlapping overrides


class OnCallError(ValueError):
    """A `/oncall` argument that is wrong; `message` says so in any language (`str()` is English)."""

    def __init__(self, message: Text) -> None:
        super().__init__(str(message))
        self.message = message


@dataclass(frozen=True)
class Show:
    """`/oncall`, `/oncall all`, `/oncall TEAM`: the teams to show."""

    teams: tuple[str, ...]
    everything: bool  # all teams, and the workflows without one


def _fail(key: str, **values: object) -> OnCallError:
    return OnCallError(text(ONCALL, key, **values))


def parse_duration(value: str, max_hours: int) -> timedelta:
    """`30m`, `2h`, `1d` within [15 minutes, max_hours]."""
    m = _DURATION.match(value)
    if not m:
        raise _fail("bad_duration", value=value)
    amount = int(m.group(1)) * {"m": 1, "min": 1, "h": 60, "d": 1440}[m.group(2).lower()]
    length = timedelta(minutes=amount)
    if not MIN_OVERRIDE <= length <= timedelta(hours=max_hours):
        raise _fail("bad_length", value=value, hours=max_hours)
    return length


def parse_period(value: str, now: datetime, zone: str, max_hours: int) -> tuple[datetime, datetime]:
    """[start, end) of `today`, `tomorrow`, a date (whole days in `zone`; today's starts now) or a
    duration from now."""
    tz = ZoneInfo(zone)
    today = now.astimezone(tz).date()
    word = value.lower()
    if word in ("today", "今天"):
        day = today
    elif word in ("tomorrow", "明天"):
        day = today + timedelta(days=1)
    elif re.match(r"^\d{4}-\d{2}-\d{2}$", value):
        try:
            day = date.fromisoformat(value)
        except ValueError:
            raise _fail("bad_period", value=value) from None
    elif _DURATION.match(value):
        return now, now + parse_duration(value, max_hours)
    else:
        raise _fail("bad_period", value=value)
    start = max(now, datetime.combine(day, time(0), tzinfo=tz))
    end = datetime.combine(day + timedelta(days=1), time(0), tzinfo=tz)
    if end <= now:
        raise _fail("past_period", value=value, now=show(now, tz, seconds=False))
    if end - now > timedelta(hours=max_hours):
        raise _fail("bad_length", value=value, hours=max_hours)
    return start, end


def _team(cfg: OnCallConfig, user: str, named: str | None, example: str) -> str:
    """The team of the command: the one named (which must list `user`), else `user`'s only one."""
    if named is not None:
        if named not in cfg.rotations:
            raise _fail("unknown_team", team=named, hint=_known(named, cfg))
        if named not in cfg.teams_of(user):
            members = ", ".join(cfg.rotations[named].members)
            raise _fail("not_member", user=user, team=named, members=members)
        return named
    mine = cfg.teams_of(user)
    if not mine:
        raise _fail("no_team", user=user, teams=", ".join(cfg.rotations) or "-")
    if len(mine) > 1:
        raise _fail("which_team", user=user, teams=", ".join(mine), example=f"{example} {mine[0]}")
    return mine[0]


def _known(name: str, cfg: OnCallConfig) -> str:
    return (did_you_mean(name, cfg.rotations) or f" (teams: {', '.join(cfg.rotations) or '-'})").strip()


def parse_show(cfg: OnCallConfig, args: tuple[str, ...], user: str) -> Show:
    """`/oncall [all|TEAM]`."""
    if not args:
        mine = tuple(cfg.teams_of(user))
        return Show(mine, False) if mine else Show(tuple(cfg.rotations), True)
    if len(args) > 1:
        raise _fail("usage")
    if args[0].lower() == "all":
        return Show(tuple(cfg.rotations), True)
    if args[0] not in cfg.rotations:
        raise _fail("unknown_team", team=args[0], hint=_known(args[0], cfg))
    return Show((args[0],), False)


def plan_take(cfg: OnCallConfig, args: tuple[str, ...], user: str, now: datetime, stored: Stored) -> Override:
    """`/oncall take [DURATION] [TEAM]`: `user` is the primary from now."""
    if len(args) > 2:
        raise _fail("usage")
    duration = args[0] if args and _DURATION.match(args[0]) else None
    rest = args[1:] if duration is not None else args
    if len(rest) > 1:
        raise _fail("usage")
    if rest and rest[0] not in cfg.rotations and rest[0][:1].isdigit():
        raise _fail("bad_duration", value=rest[0])
    length = parse_duration(duration, cfg.max_override_hours) if duration is not None else None
    team = _team(cfg, user, rest[0] if rest else None, f"/oncall take {duration or '2h'}")
    state = on_call(cfg, team, now, stored(team, now, now + timedelta(microseconds=1)))
    if length is not None:
        end = now + length
    elif state.primary == user:
        zone = ZoneInfo(cfg.zone_of(team))
        raise _fail("already_primary", user=user, team=team, end=show(state.shift.end, zone, seconds=False))
    else:
        end = state.shift.end
    return Override(team, "take", user, state.primary or "", now, end, user, now)


def plan_swap(
    cfg: OnCallConfig,
    args: tuple[str, ...],
    user: str,
    now: datetime,
    stored: Stored,
    names: Mapping[str, str],
) -> Override:
    """`/oncall swap @USER [PERIOD] [TEAM]`: USER covers `user`'s duty in PERIOD (and the reverse).
    `names` maps userids to display names (access.yaml), so `@李四` finds lisi."""
    if not args:
        raise _fail("swap_who")
    if len(args) > 3:
        raise _fail("usage")
    who, period_arg = args[0], args[1] if len(args) > 1 else "today"
    named = args[2] if len(args) > 2 else None
    if who.lstrip("@＠").strip().casefold() in (user.casefold(), names.get(user, user).casefold()):
        raise _fail("swap_self", user=user)
    if named is None:  # in several rotations: the one `who` is in too, when that is one
        shared = [t for t in cfg.teams_of(user) if _find(cfg, t, who, names)]
        named = shared[0] if len(shared) == 1 else None
    team = _team(cfg, user, named, f"/oncall swap {who} {period_arg}")
    other = _member(cfg, team, who, names)
    zone = cfg.zone_of(team)
    start, end = parse_period(period_arg, now, zone, cfg.max_override_hours)
    rot = cfg.rotations[team]
    held = stored(team, start, end)
    duty = [on_call(cfg, team, max(s.start, start), held) for s in shifts_between(rot, zone, start, end)]
    if not any(user in (d.primary, d.secondary) for d in duty):
        on = ", ".join(sorted({p for d in duty for p in (d.primary, d.secondary) if p})) or "-"
        raise _fail("not_on_duty", user=user, team=team, period=period_arg, who=on)
    return Override(team, "swap", other, user, start, end, user, now)


def _people(cfg: OnCallConfig, team: str) -> list[str]:
    rot = cfg.rotations[team]
    return list(dict.fromkeys([*rot.members, *(rot.secondary if isinstance(rot.secondary, list) else [])]))


def _find(cfg: OnCallConfig, team: str, who: str, names: Mapping[str, str]) -> str | None:
    """The userid `@who` names in `team`'s rotation (a userid, or an access.yaml display name), or None."""
    people = _people(cfg, team)
    wanted = who.lstrip("@＠").strip().casefold()
    by_id = [uid for uid in people if uid.casefold() == wanted]
    by_name = [uid for uid in people if names.get(uid, "").casefold() == wanted]
    found = by_id or by_name
    return found[0] if len(found) == 1 else None


def _member(cfg: OnCallConfig, team: str, who: str, names: Mapping[str, str]) -> str:
    """`_find`, or an error listing the members."""
    found = _find(cfg, team, who, names)
    if found is None:
        shown = ", ".join(f"{names[u]} ({u})" if names.get(u) else u for u in _people(cfg, team))
        raise _fail("not_member", user=who, team=team, members=shown)
    return found
