"""Rotation hand-offs at the configured wall-clock time in the configured zone; overrides on top."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from xihe.agent.oncall.lookup import RotationOnCall, on_call
from xihe.agent.oncall.rotation import Override, shift_at
from xihe.config.oncall import OnCallConfig, Rotation
from xihe.config.workflows import Workflow


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


WEEKLY = Rotation(
    members=["zhangsan", "lisi", "wangwu"], every="weekly", handoff="10:00", start=date(2026, 11, 30)
)
DAILY = Rotation(
    members=["wangwu", "zhaoliu"],
    every="daily",
    handoff="09:30",
    start=date(2026, 12, 1),
    timezone="Europe/Berlin",
    secondary=["dave"],
)
CFG = OnCallConfig(timezone="Asia/Shanghai", rotations={"data": WEEKLY, "reports": DAILY})


def test_weekly_hands_off_at_ten_shanghai_time_which_is_two_utc() -> None:
    before, at = utc("2026-12-07 01:59:59"), utc("2026-12-07 02:00:00")  # Monday 09:59:59 / 10:00 +08:00
    assert (on_call(CFG, "data", before).primary, on_call(CFG, "data", before).secondary) == (
        "zhangsan",
        "lisi",
    )
    after = on_call(CFG, "data", at)
    assert (after.primary, after.secondary) == ("lisi", "wangwu")  # secondary: the next member
    assert (after.shift.start, after.shift.end) == (at, at + timedelta(days=7))
    third = on_call(CFG, "data", utc("2026-12-21 02:00:00"))
    assert (third.primary, third.secondary) == ("zhangsan", "lisi")  # round again; next wraps


def test_weekly_midweek_keeps_the_shift_and_counts_back_before_start() -> None:
    assert on_call(CFG, "data", utc("2026-12-03 18:00:00")).primary == "zhangsan"
    early = on_call(CFG, "data", utc("2026-11-29 12:00:00"))  # the week before start
    assert early.primary == "wangwu" and early.shift.number == -1


def test_daily_hands_off_at_half_past_nine_berlin_across_daylight_saving() -> None:
    # winter: 09:30 CET = 08:30 UTC
    assert on_call(CFG, "reports", utc("2026-12-04 08:29:59")).primary == "wangwu"
    assert on_call(CFG, "reports", utc("2026-12-04 08:30:00")).primary == "zhaoliu"
    # summer (DST from 2027-03-28): 09:30 CEST = 07:30 UTC, the same wall-clock time
    spring = shift_at(DAILY, "Europe/Berlin", utc("2027-03-29 07:30:00"))
    assert spring.start == utc("2027-03-29 07:30:00") and spring.end == utc("2027-03-30 07:30:00")
    assert shift_at(DAILY, "Europe/Berlin", utc("2027-03-29 07:29:59")).start == utc("2027-03-28 07:30:00")
    # the day of the change is 23 hours long (09:30 CET → 09:30 CEST)
    change = shift_at(DAILY, "Europe/Berlin", utc("2027-03-28 06:00:00"))
    assert change.end - change.start == timedelta(hours=23)


def test_explicit_secondary_list_never_names_the_primary() -> None:
    assert on_call(CFG, "reports", utc("2026-12-04 09:00:00")).secondary == "dave"
    solo = OnCallConfig(rotations={"x": Rotation(members=["a"], start=date(2026, 1, 1), secondary=["a"])})
    assert on_call(solo, "x", utc("2026-12-04 09:00:00")).secondary is None


def _o(kind: str, user: str, replaces: str, start: str, hours: float, n: int = 1) -> Override:
    s = utc(start)
    return Override("data", kind, user, replaces, s, s + timedelta(hours=hours), user, s, n)  # type: ignore[arg-type]


def test_a_take_makes_its_user_primary_until_it_ends() -> None:
    take = _o("take", "wangwu", "zhangsan", "2026-12-02 09:00:00", 2)
    during = on_call(CFG, "data", utc("2026-12-02 10:59:59"), [take])
    assert (during.primary, during.secondary) == ("wangwu", "lisi") and during.overrides == (take,)
    after = on_call(CFG, "data", utc("2026-12-02 11:00:00"), [take])  # expired by itself
    assert (after.primary, after.overrides) == ("zhangsan", ())
    by_secondary = on_call(
        CFG, "data", utc("2026-12-02 10:00:00"), [_o("take", "lisi", "", "2026-12-02 09:00:00", 2)]
    )
    assert (by_secondary.primary, by_secondary.secondary) == ("lisi", "zhangsan")  # they change places


def test_a_swap_exchanges_two_duties_and_a_later_override_wins() -> None:
    swap = _o("swap", "wangwu", "zhangsan", "2026-12-02 00:00:00", 16)
    assert on_call(CFG, "data", utc("2026-12-02 12:00:00"), [swap]).primary == "wangwu"
    to_secondary = _o("swap", "zhangsan", "lisi", "2026-12-02 00:00:00", 16)
    s = on_call(CFG, "data", utc("2026-12-02 12:00:00"), [to_secondary])
    assert (s.primary, s.secondary) == ("lisi", "zhangsan")
    later = _o("take", "lisi", "", "2026-12-02 11:00:00", 1, n=2)
    both = on_call(CFG, "data", utc("2026-12-02 11:30:00"), [later, swap])
    assert (both.primary, both.secondary) == ("lisi", "wangwu")


class ListOverrides:
    def __init__(self, items: list[Override]) -> None:
        self.items = items

    def overlapping(self, teams: object, start: datetime, end: datetime) -> list[Override]:
        return [o for o in self.items if o.start < end and o.end > start]


@pytest.mark.parametrize(
    ("wf", "expected"),
    [
        (Workflow(name="a", project="p", team="data", oncall=["x", "y"]), ("zhangsan", "lisi")),
        (Workflow(name="b", project="p", oncall=["x", "y"]), ("x", "y")),
        (Workflow(name="c", project="p", oncall=["x"]), ("x", None)),
        (Workflow(name="d", project="p"), (None, None)),
    ],
)
def test_the_lookup_uses_the_team_rotation_else_the_workflow_list(
    wf: Workflow, expected: tuple[str | None, str | None]
) -> None:
    lookup = RotationOnCall(lambda: CFG, ListOverrides([]))
    assert lookup(wf, utc("2026-12-02 09:00:00")) == expected


def test_the_lookup_applies_stored_overrides_and_reads_the_config_each_time() -> None:
    wf = Workflow(name="a", project="p", team="data", oncall=["x", "y"])
    current: list[OnCallConfig | None] = [CFG]
    lookup = RotationOnCall(
        lambda: current[0], ListOverrides([_o("take", "wangwu", "", "2026-12-02 08:00:00", 2)])
    )
    assert lookup(wf, utc("2026-12-02 09:00:00")) == ("wangwu", "lisi")
    assert lookup(wf, utc("2026-12-02 10:00:00")) == ("zhangsan", "lisi")
    current[0] = None  # oncall.yaml removed by a reload: the workflow's own list again
    assert lookup(wf, utc("2026-12-02 09:00:00")) == ("x", "y")
