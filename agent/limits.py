"""How many messages one replica takes: per user and in all, as token buckets on an injected clock.

A bucket holds up to `burst` tokens and gains `rate` per second; a message takes one. `RateLimits.check`
answers None (take it) or how many seconds until the sender may write again, which the channel says
in its reply. Pure decisions: no I/O, thread-safe.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime


@dataclass
class _Bucket:
    tokens: float
    at: datetime


class Bucket:
    """One token bucket per name (a user, or `*` for everyone)."""

    def __init__(self, rate: float, burst: float) -> None:
        self.rate = rate
        self.burst = burst
        self._buckets: dict[str, _Bucket] = {}

    def wait(self, name: str, now: datetime) -> float:
        """Seconds until `name` has a token (0: it has one now, without taking it)."""
        b = self._buckets.get(name)
        if b is None:
            return 0.0
        tokens = min(self.burst, b.tokens + (now - b.at).total_seconds() * self.rate)
        return 0.0 if tokens >= 1 else (1 - tokens) / self.rate

    def take(self, name: str, now: datetime) -> None:
        b = self._buckets.get(name)
        tokens = (
            self.burst if b is None else min(self.burst, b.tokens + (now - b.at).total_seconds() * self.rate)
        )
        self._buckets[name] = _Bucket(tokens - 1, now)
        if len(self._buckets) > 100_000:  # forget full buckets: they are what a new name gets
            self._buckets = {k: v for k, v in self._buckets.items() if v.tokens < self.burst - 1}


class RateLimits:
    """Per-user and global message rates of one replica."""

    def __init__(
        self,
        per_user_per_minute: float,
        global_per_second: float,
        global_burst: float,
        clock: Callable[[], datetime],
    ) -> None:
        self.user = Bucket(per_user_per_minute / 60, per_user_per_minute)
        self.everyone = Bucket(global_per_second, global_burst)
        self.clock = clock
        self._lock = threading.Lock()

    def check(self, user: str) -> tuple[str, int] | None:
        """None when `user` may send now (counted); else which limit (`user`/`global`) and the seconds to wait."""
        now = self.clock()
        with self._lock:
            mine, all_ = self.user.wait(user, now), self.everyone.wait("*", now)
            if mine > 0 or all_ > 0:
                which = "user" if mine >= all_ else "global"
                return which, max(1, math.ceil(max(mine, all_)))
            self.user.take(user, now)
            self.everyone.take("*", now)
            return None
