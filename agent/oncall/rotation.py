"""Who a rotation puts on call at a moment: pure functions of the rotation and the time.

A shift begins at the hand-off time, as a wall-clock time in the rotation's zone (so a daylight-saving
change moves it in UTC, never on the wall), on `start` and every day or week from it; shift k is the
member at k mod len(members) — before `start` too, counting backwards. Overrides from chat are
applied on top (`apply_overrides`): a `take` makes its user the primary, a `swap` exchanges two
people's duties; each only between its start and end.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

from xihe.config.oncall import Rotation

Kind = Literal["take", "swap"]


@dataclass(frozen=True)
class Shift:
    """One shift of a rotation: its number (0 = the first at `start`), when it begins and ends (UTC),
    and who holds it."""

    number: int
    start: datetime
    end: datetime
    primary: str
    secondary: str | None


@dataclass(frozen=True)
class Override:
    """A stored change from chat: `user` covers (take: the primary duty; swap: `replaces`' duty)
    from `start` to `end`."""

    team: str
    kind: Kind
    user: str
    replaces: str
    start: datetime
    end: datetime
    created_by: str
    created_at: datetime
    id: int = 0

    def active(self, at: datetime) -> bool:
        """In force at `at` (start inclusive, end exclusive)."""
        return self.start <= at < self.end


def shift_at(rot: Rotation, zone: str, at: datetime) -> Shift:
    """The shift of `rot` in force at `at` (an aware datetime); hand-offs in `zone`."""
    tz = ZoneInfo(zone)
    local = at.astimezone(tz)
    period = 1 if rot.every == "daily" else 7
    day = local.date()
    if local.time() < rot.handoff_time:
        day -= timedelta(days=1)
    number = (day - rot.start).days // period
    first = rot.start + timedelta(days=number * period)
    begins = datetime.combine(first, rot.handoff_time, tzinfo=tz)
    ends = datetime.combine(first + timedelta(days=period), rot.handoff_time, tzinfo=tz)
    primary, secondary = holders(rot, number)
    return Shift(number, begins.astimezone(UTC), ends.astimezone(UTC), primary, secondary)


def holders(rot: Rotation, number: int) -> tuple[str, str | None]:
    """(primary, secondary) of shift `number`: the member in turn, and the next member or the
    explicit secondary in turn (never the primary; None when nobody else is there)."""
    members = rot.members
    primary = members[number % len(members)]
    if rot.secondary == "next":
        backups = [members[(number + 1) % len(members)]]
    else:
        sec = rot.secondary
        backups = [sec[(number + i) % len(sec)] for i in range(len(sec))]
    return primary, next((b for b in backups if b != primary), None)


def shifts_between(rot: Rotation, zone: str, start: datetime, end: datetime) -> list[Shift]:
    """Every shift that overlaps [start, end), in order."""
    out: list[Shift] = []
    at = start
    while at < end and len(out) < 400:
        shift = shift_at(rot, zone, at)
        out.append(shift)
        at = shift.end
    return out


def apply_overrides(
    primary: str | None, secondary: str | None, overrides: Iterable[Override], at: datetime
) -> tuple[str | None, str | None]:
    """(primary, secondary) after the overrides in force at `at`, oldest first (a later one wins)."""
    for o in sorted((o for o in overrides if o.active(at)), key=lambda o: (o.created_at, o.id)):
        if o.kind == "take":
            if secondary == o.user:
                secondary = primary
            primary = o.user
        else:
            swap = {o.replaces: o.user, o.user: o.replaces}
            primary = swap.get(primary, primary) if primary is not None else None
            secondary = swap.get(secondary, secondary) if secondary is not None else None
    return primary, secondary
