"""How fast alerts are handled: time to acknowledge and to resolve (median, p90) per workflow and tier
over a period, and the P0s nobody has acknowledged yet. Pure over `Alert`s (`xihe alerts stats`, the
web alerts page)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from xihe.agent.alerts.lifecycle import Alert
from xihe.agent.alerts.model import Tier

ALL = "*"  # the workflow of a tier's total row


def percentile(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank `q` percentile (0 < q <= 100) of `values`; None when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


@dataclass(frozen=True)
class Measure:
    """One row: a workflow (or `*`, every workflow) at one tier."""

    workflow: str
    tier: str
    alerts: int
    acked: int
    resolved: int
    ack_median: float | None  # seconds
    ack_p90: float | None
    resolve_median: float | None
    resolve_p90: float | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (seconds)."""
        return dict(self.__dict__)


def _row(workflow: str, tier: str, alerts: list[Alert]) -> Measure:
    ack = [(a.acked_at - a.fired_at).total_seconds() for a in alerts if a.acked_at]
    res = [
        (a.resolved_at - a.fired_at).total_seconds()
        for a in alerts
        if a.resolved_at and a.state == "resolved"
    ]
    return Measure(
        workflow,
        tier,
        len(alerts),
        len(ack),
        len(res),
        percentile(ack, 50),
        percentile(ack, 90),
        percentile(res, 50),
        percentile(res, 90),
    )


def measures(alerts: Iterable[Alert]) -> list[Measure]:
    """Per tier (P0 first): a total row (`*`), then one row per workflow, by name."""
    by: dict[tuple[str, str], list[Alert]] = {}
    for a in alerts:
        by.setdefault((a.tier.value, a.workflow), []).append(a)
    out: list[Measure] = []
    for tier in [t.value for t in Tier]:
        keys = sorted(k for k in by if k[0] == tier)
        if not keys:
            continue
        out.append(_row(ALL, tier, [a for k in keys for a in by[k]]))
        out.extend(_row(wf, tier, by[(tier, wf)]) for _t, wf in keys)
    return out


def unacked_p0(open_alerts: Iterable[Alert]) -> list[Alert]:
    """P0 alerts firing now that nobody acknowledged, oldest first."""
    return sorted(
        (a for a in open_alerts if a.tier is Tier.P0 and a.state == "firing"), key=lambda a: a.fired_at
    )


_SPAN = re.compile(r"^(\d+)([mhd])$")


def parse_since(text: str, now: datetime, tz: Any) -> datetime:
    """`--since`: a span back from now (`30m`, `24h`, `7d`) or an ISO 8601 date or time (without an
    offset: in `tz`). ValueError names what is wrong."""
    m = _SPAN.match(text.strip())
    if m:
        n, unit = int(m.group(1)), m.group(2)
        return now - timedelta(**{{"m": "minutes", "h": "hours", "d": "days"}[unit]: n})
    try:
        at = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"--since {text!r}: expected a span (30m, 24h, 7d) or an ISO 8601 date or time"
        ) from None
    return at if at.tzinfo is not None else at.replace(tzinfo=tz)


def span(seconds: float | None) -> str:
    """Seconds for people: `-`, `45s`, `12m`, `3h05m`, `2d04h`."""
    if seconds is None:
        return "-"
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"
