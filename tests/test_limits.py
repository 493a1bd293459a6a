"""Per-user and global message rates (agent/limits.py), on an injected clock."""

from __future__ import annotations

from xihe.agent.clock import FakeClock
from xihe.agent.limits import RateLimits


def test_a_user_over_the_rate_waits_and_others_go_on(clock: FakeClock) -> None:
    limits = RateLimits(per_user_per_minute=3, global_per_second=100, global_burst=100, clock=clock)
    assert [limits.check("alice") for _ in range(3)] == [None, None, None]
    assert limits.check("alice") == ("user", 20)  # one more message every 20 s
    assert limits.check("bob") is None
    clock.advance(19)
    assert limits.check("alice") == ("user", 1)
    clock.advance(1)
    assert limits.check("alice") is None
    assert limits.check("alice") == ("user", 20)


def test_everyone_together_over_the_global_rate_waits(clock: FakeClock) -> None:
    limits = RateLimits(per_user_per_minute=60, global_per_second=2, global_burst=4, clock=clock)
    assert [limits.check(f"u{i}") for i in range(4)] == [None] * 4
    assert limits.check("u9") == ("global", 1)
    clock.advance(0.5)
    assert limits.check("u9") is None  # half a second gives one message back
    assert limits.check("u8") == ("global", 1)
