"""Who may acknowledge an alert (`/ack`, the Acknowledge button on alert cards).

An acknowledgement stops the escalation of a P0, so it is not for anyone who can write to the bot:

    listed     a user of access.yaml, whatever the roles (people the team registered)
    rotation   a member of the on-call rotation of the alert's workflow team (oncall.yaml, members and
               secondaries), whether on duty or not: the people who hand the pager to each other
    chain      a person of the alert's escalation chain now (on-call, secondary, workflow owner,
               `lifecycle.fallback`) or of the workflow's `oncall` list: the people who would be paged

Anyone else is refused with the reason, and the refusal is audited. Pure: the caller gathers the sets.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal

from xihe.config.oncall import OnCallConfig

Basis = Literal["listed", "rotation", "chain", "outsider"]


@dataclass(frozen=True)
class AckRight:
    """Whether a user may acknowledge one alert, and on what basis (audited)."""

    basis: Basis

    @property
    def allowed(self) -> bool:
        """Anyone but an outsider."""
        return self.basis != "outsider"


def may_ack(
    user: str, *, listed: Collection[str], rotation: Collection[str], chain: Collection[str]
) -> AckRight:
    """`user`'s right to acknowledge: listed in access.yaml, in the workflow team's rotation, or in the
    alert's escalation chain (checked in that order); else an outsider."""
    if user in listed:
        return AckRight("listed")
    if user in rotation:
        return AckRight("rotation")
    if user in chain:
        return AckRight("chain")
    return AckRight("outsider")


def rotation_people(cfg: OnCallConfig | None, team: str) -> list[str]:
    """Everyone in `team`'s rotation (members, then listed secondaries); [] without one."""
    rot = cfg.rotations.get(team) if cfg is not None and team else None
    if rot is None:
        return []
    return list(dict.fromkeys([*rot.members, *(rot.secondary if isinstance(rot.secondary, list) else [])]))
