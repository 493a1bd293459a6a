"""Times shown to people: in the team's zone, always with an explicit offset (`+08:00`), never `CST`."""

from __future__ import annotations

from datetime import datetime, tzinfo
from functools import lru_cache
from zoneinfo import ZoneInfo


@lru_cache(maxsize=32)
def zone(name: str) -> ZoneInfo:
    """The zone called `name` (an IANA name such as Asia/Shanghai); raises ZoneInfoNotFoundError."""
    return ZoneInfo(name)


def _as_zone(tz: str | tzinfo) -> tzinfo:
    return zone(tz) if isinstance(tz, str) else tz


def offset_of(value: datetime) -> str:
    """`+08:00` for an aware datetime (`+00:00` for UTC)."""
    delta = value.utcoffset()
    if delta is None:
        raise ValueError(f"naive datetime {value!r} has no offset")
    minutes = int(delta.total_seconds() // 60)
    sign = "+" if minutes >= 0 else "-"
    hours, mins = divmod(abs(minutes), 60)
    return f"{sign}{hours:02d}:{mins:02d}"


def show(value: datetime | None, tz: str | tzinfo, *, seconds: bool = True, date: bool = True) -> str:
    """`2026-12-03 15:04:05 +08:00` in `tz`; `-` for None. A naive value is taken as UTC."""
    if value is None:
        return "-"
    if value.tzinfo is None:
        value = value.replace(tzinfo=zone("UTC"))
    local = value.astimezone(_as_zone(tz))
    fmt = ("%Y-%m-%d " if date else "") + ("%H:%M:%S" if seconds else "%H:%M")
    return f"{local.strftime(fmt)} {offset_of(local)}"
