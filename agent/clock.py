"""Time as a dependency: decisions take `now`, adapters take a `Clock`."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    """The real clock: an aware UTC datetime."""
    return datetime.now(UTC)


class FakeClock:
    """A clock tests move by hand; never sleeps."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 12, 2, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float = 0, **kw: float) -> datetime:
        """Move forward by `seconds` (or timedelta keywords) and return the new time."""
        self.now += timedelta(seconds=seconds, **kw)
        return self.now
