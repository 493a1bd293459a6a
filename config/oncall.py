"""`config/oncall.yaml`: on-call rotations per team (members, hand-off time and zone, daily or weekly,
a secondary). Workflows name their team (`team:` in workflows.yaml); a workflow without one keeps its
`oncall: [primary, secondary]` list."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import date, time
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from xihe.config.semantic import unknown_name
from xihe.config.settings import Problem, Section, Settings

USERID = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")  # a WeCom userid
TEAM = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")  # typed in chat: /oncall take 2h TEAM
_HANDOFF = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$")


def _userids(ids: list[str], what: str) -> list[str]:
    bad = [u for u in ids if not USERID.match(u)]
    if bad:
        raise ValueError(f"{what}: not a WeCom userid: {', '.join(map(repr, bad))}")
    dup = sorted({u for u in ids if ids.count(u) > 1})
    if dup:
        raise ValueError(f"{what}: listed twice: {', '.join(dup)}")
    return ids


class Rotation(BaseModel):
    """One team's rotation: members take shifts in order, one per day or week, from `start`."""

    model_config = ConfigDict(extra="forbid")

    members: list[str] = Field(
        min_length=1, description="WeCom userids in shift order, e.g. [zhangsan, lisi]"
    )
    every: Literal["daily", "weekly"] = Field("weekly", description="shift length: daily or weekly")
    handoff: str = Field("10:00", description="local time (HH:MM, 24 h) a shift is handed to the next member")
    start: date = Field(
        description="the date the first member's first shift begins (at `handoff`); weekly shifts are "
        "handed over on this date's weekday"
    )
    timezone: str | None = Field(None, description="IANA zone of `handoff`; default: the file's `timezone`")
    secondary: Literal["next"] | list[str] = Field(
        "next",
        description="the backup: `next` (the member whose shift comes next) or a list of userids who "
        "take the secondary role in turn, shift by shift",
    )

    @field_validator("members")
    @classmethod
    def _members(cls, v: list[str]) -> list[str]:
        return _userids(v, "members")

    @field_validator("secondary")
    @classmethod
    def _secondary(cls, v: Literal["next"] | list[str]) -> Literal["next"] | list[str]:
        if isinstance(v, list):
            if not v:
                raise ValueError("secondary: give `next` or at least one userid")
            _userids(v, "secondary")
        return v

    @field_validator("handoff")
    @classmethod
    def _handoff(cls, v: str) -> str:
        if not _HANDOFF.match(v):
            raise ValueError(f"handoff {v!r} is not a time of day HH:MM (00:00-23:59), e.g. '10:00'")
        return v

    @property
    def handoff_time(self) -> time:
        """`handoff` as a time of day."""
        hours, minutes = self.handoff.split(":")
        return time(int(hours), int(minutes))


class OnCallConfig(BaseModel):
    """Every team's rotation, and the bounds of chat overrides."""

    model_config = ConfigDict(extra="forbid")

    timezone: str = Field(
        "Asia/Shanghai", description="zone of hand-off times unless a rotation names its own"
    )
    max_override_hours: int = Field(
        168, ge=1, le=24 * 31, description="longest `/oncall take` or `/oncall swap` accepted from chat"
    )
    rotations: dict[str, Rotation] = Field(
        default_factory=dict, description="team name → rotation; workflows.yaml names the team (`team:`)"
    )

    @model_validator(mode="after")
    def _team_names(self) -> OnCallConfig:
        bad = [t for t in self.rotations if not TEAM.match(t)]
        if bad:
            raise ValueError(
                f"team names are letters, digits, '.', '_' and '-' (typed in chat): {', '.join(map(repr, bad))}"
            )
        return self

    def zone_of(self, team: str) -> str:
        """The IANA zone of a team's hand-offs."""
        return self.rotations[team].timezone or self.timezone

    def teams_of(self, user: str) -> list[str]:
        """The teams whose rotation lists `user` (as a member or an explicit secondary)."""
        return [
            t
            for t, r in self.rotations.items()
            if user in r.members or (isinstance(r.secondary, list) and user in r.secondary)
        ]


def team_problems(settings: Settings, cfg: OnCallConfig) -> Iterator[Problem]:
    """Workflows (workflows.yaml) naming a team this file has no rotation for."""
    for i, wf in enumerate(settings.workflows.workflows):
        if wf.team and wf.team not in cfg.rotations:
            yield (
                "workflows.yaml",
                ("workflows", i, "team"),
                unknown_name("team", wf.team, cfg.rotations, "oncall.yaml rotations"),
            )


ONCALL_SECTION = Section("oncall.yaml", "oncall", OnCallConfig, checks=team_problems)
