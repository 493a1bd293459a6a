"""DolphinScheduler's `scheduleTime` for a backfill: the JSON a start sends for a set of dates.

    schedule_time_param([2026-12-02, 2026-12-03]) -> '{"complementStartDate":"2026-12-02 00:00:00",…}'

Contiguous dates go as a start/end range, others as a comma-separated list; DolphinScheduler refuses
more than MAX_DATES complement dates (error 1400003).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from datetime import date

MAX_DATES = 100


def is_contiguous(dates: Sequence[date]) -> bool:
    """Whether sorted unique `dates` form one run of consecutive days."""
    return all((b - a).days == 1 for a, b in itertools.pairwise(dates))


def schedule_time_param(dates: Sequence[date]) -> str:
    """DolphinScheduler's `scheduleTime` JSON: a start/end range when contiguous, else a date list."""
    days = sorted(set(dates))
    if not days:
        raise ValueError("schedule_time_param needs at least one date")
    if len(days) > MAX_DATES:
        raise ValueError(f"{len(days)} dates; DolphinScheduler backfills at most {MAX_DATES}")

    def fmt(d: date) -> str:
        return f"{d.isoformat()} 00:00:00"

    if is_contiguous(days):
        value = {"complementStartDate": fmt(days[0]), "complementEndDate": fmt(days[-1])}
    else:
        value = {"complementScheduleDateList": ",".join(fmt(d) for d in days)}
    return json.dumps(value, separators=(",", ":"))
