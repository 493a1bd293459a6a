"""Per-robot sliding-window rate limit (WeCom: 20 messages per minute per robot), with `now` injected."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from datetime import datetime, timedelta


def next_free(sent: Sequence[datetime], now: datetime, limit: int, window: timedelta) -> datetime:
    """Earliest time >= now at which one more message keeps <= `limit` sends in any `window` (pure).

    `sent` holds send times, oldest first. A send at t occupies the window (t - window, t].
    """
    recent = [t for t in sent if t > now - window]
    if len(recent) < limit:
        return now
    return recent[len(recent) - limit] + window


class RateLimiter:
    """Remembers recent attempts per robot and answers `allowed(robot, now)` / `next_free(robot, now)`.

    Every HTTP attempt counts (WeCom counts requests, failures included). State is only the last
    minute of attempts, so losing it on restart at worst delays sending by up to a minute
    (a replica-shared limit can be rebuilt from the audit of attempts).
    """

    def __init__(self, limit: int = 20, window: timedelta = timedelta(minutes=1)) -> None:
        self.limit = limit
        self.window = window
        self._sent: dict[str, deque[datetime]] = {}

    def _recent(self, robot: str, now: datetime) -> deque[datetime]:
        q = self._sent.setdefault(robot, deque())
        while q and q[0] <= now - self.window:
            q.popleft()
        return q

    def next_free(self, robot: str, now: datetime, limit: int | None = None) -> datetime:
        """When the next attempt to `robot` may go out."""
        return next_free(self._recent(robot, now), now, limit or self.limit, self.window)

    def allowed(self, robot: str, now: datetime, limit: int | None = None) -> bool:
        """True when an attempt at `now` stays within the limit."""
        return self.next_free(robot, now, limit) <= now

    def record(self, robot: str, now: datetime) -> None:
        """Count one attempt at `now`."""
        self._recent(robot, now).append(now)

    def acquire(self, robot: str, now: datetime, limit: int | None = None) -> bool:
        """Check and count one attempt in one step (a shared limiter does this atomically)."""
        if not self.allowed(robot, now, limit):
            return False
        self.record(robot, now)
        return True
