"""A minimal 5-field cron matcher (minute hour day-of-month month day-of-week) for maintenance windows."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

_RANGES = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))
_NAMES = ("minute", "hour", "day of month", "month", "day of week")


def _field(text: str, lo: int, hi: int, name: str) -> frozenset[int]:
    out: set[int] = set()
    for part in text.split(","):
        step = 1
        if "/" in part:
            part, step_text = part.split("/", 1)
            if not step_text.isdigit() or int(step_text) == 0:
                raise ValueError(f"cron {name}: bad step {step_text!r}")
            step = int(step_text)
        if part == "*":
            start, end = lo, hi
        elif "-" in part:
            a, b = part.split("-", 1)
            if not (a.isdigit() and b.isdigit()):
                raise ValueError(f"cron {name}: bad range {part!r}")
            start, end = int(a), int(b)
        elif part.isdigit():
            start = end = int(part)
            if step != 1:
                end = hi
        else:
            raise ValueError(f"cron {name}: bad value {part!r}")
        if not (lo <= start <= hi and lo <= end <= hi and start <= end):
            raise ValueError(f"cron {name}: {part!r} outside {lo}-{hi}")
        out.update(range(start, end + 1, step))
    return frozenset(out)


@dataclass(frozen=True)
class CronSpec:
    """A parsed cron expression; `matches(local_dt)` checks one minute."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday (7 is folded to 0)
    dom_any: bool
    dow_any: bool

    @classmethod
    def parse(cls, text: str) -> CronSpec:
        """Parse `m h dom mon dow`; raise ValueError naming the bad field."""
        parts = text.split()
        if len(parts) != 5:
            raise ValueError(f"cron needs 5 fields (minute hour day month weekday), got {len(parts)}")
        sets = [_field(p, lo, hi, n) for p, (lo, hi), n in zip(parts, _RANGES, _NAMES, strict=True)]
        weekdays = frozenset(d % 7 for d in sets[4])
        return cls(sets[0], sets[1], sets[2], sets[3], weekdays, parts[2] == "*", parts[4] == "*")

    def matches(self, local: datetime) -> bool:
        """True when the minute of the local time `local` is a firing minute."""
        if local.minute not in self.minutes or local.hour not in self.hours or local.month not in self.months:
            return False
        dom_ok = local.day in self.days
        dow_ok = (local.isoweekday() % 7) in self.weekdays
        if self.dom_any or self.dow_any:  # classic cron: both restricted means either may match
            return dom_ok and dow_ok
        return dom_ok or dow_ok
