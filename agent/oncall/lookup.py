"""Who is on call for a team or a workflow at a time: the rotation in oncall.yaml plus the overrides
from chat. `on_call` is pure (config, team, time, overrides); `RotationOnCall` reads the live config
and the stored overrides, and is what the alert pipeline asks (its `OnCallLookup`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from xihe.agent.oncall.rotation import Override, Shift, apply_overrides, shift_at
from xihe.config.oncall import OnCallConfig
from xihe.config.workflows import Workflow


class OverrideSource(Protocol):
    """Where overrides are kept (`overrides.SqlOverrides`)."""

    def overlapping(self, teams: Iterable[str], start: datetime, end: datetime) -> list[Override]:
        """Overrides of `teams` in force at some moment of [start, end)."""
        ...


@dataclass(frozen=True)
class OnCall:
    """A team's on-call at one moment: the rotation's shift, the overrides in force, and the result."""

    team: str
    at: datetime
    shift: Shift
    overrides: tuple[Override, ...]
    primary: str | None
    secondary: str | None


def on_call(cfg: OnCallConfig, team: str, at: datetime, overrides: Iterable[Override] = ()) -> OnCall:
    """Who `team` has on call at `at`: its rotation's shift, changed by the overrides in force then."""
    shift = shift_at(cfg.rotations[team], cfg.zone_of(team), at)
    active = tuple(o for o in overrides if o.team == team and o.active(at))
    primary, secondary = apply_overrides(shift.primary, shift.secondary, active, at)
    return OnCall(team, at, shift, active, primary, secondary)


def listed(wf: Workflow) -> tuple[str | None, str | None]:
    """A workflow's own `oncall: [primary, secondary]` list (workflows.yaml)."""
    return (wf.oncall[0] if wf.oncall else None, wf.oncall[1] if len(wf.oncall) > 1 else None)


class RotationOnCall:
    """The `OnCallLookup` the alert pipeline's escalation chain and P0 mentions use:
    `lookup(wf, at) -> (primary, secondary)` userids (either may be None).

    A workflow whose `team` has a rotation in oncall.yaml gets that rotation's on-call at `at`, with
    the chat overrides in force then; any other workflow (no team, or no oncall.yaml) its own
    `oncall` list. `config` is called on every lookup, so an edited oncall.yaml counts as soon as the
    config reload applied it."""

    def __init__(self, config: Callable[[], OnCallConfig | None], overrides: OverrideSource) -> None:
        self.config = config
        self.overrides = overrides

    def __call__(self, wf: Workflow, at: datetime) -> tuple[str | None, str | None]:
        cfg = self.config()
        if cfg is None or wf.team not in cfg.rotations:
            return listed(wf)
        found = self.team(cfg, wf.team, at)
        return found.primary, found.secondary

    def team(self, cfg: OnCallConfig, team: str, at: datetime) -> OnCall:
        """`team`'s on-call at `at`, with the stored overrides."""
        stored = self.overrides.overlapping([team], at, at + timedelta(microseconds=1))
        return on_call(cfg, team, at, stored)
