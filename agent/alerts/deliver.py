"""The outbox sender: the channel's notifier first, rate-limited, retried with tenacity, e-mail after repeated failure.

`Deliverer.run_once(now)` is one scheduler job run: claim due rows, push each through the notifier
of the channel's kind (notify/; 20/min per robot, every attempt counted), retry what the notifier
calls retryable with tenacity, and track consecutive failed rows per channel. After
`failures_before_email` of them the channel switches to e-mail; while on e-mail, one row per
`probe_seconds` tries the notifier first and a success switches the channel back. Every attempt
comes back as the notifier's `Attempt`, stamped with its row, for the audit. In modes, records and
audit, "robot" names the channel's own notifier (whatever its kind) and "email" the fallback.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from xihe.agent.alerts.notify.base import Attempt, Notifier
from xihe.agent.alerts.outbox import Outbox, OutboxRow
from xihe.agent.alerts.ratelimit import RateLimiter
from xihe.agent.errors import ConfigError

if TYPE_CHECKING:
    from tenacity import RetryCallState

    from xihe.config.alerts import AlertsConfig, Channel


def stamped(a: Attempt, row: OutboxRow, via: str, now: datetime, probe: bool = False) -> Attempt:
    """`a` as the audit records it: which row and channel, which way (robot | email), when."""
    return replace(a, key=row.key, channel=row.channel, via=via, at=now, probe=probe)


@dataclass
class ChannelHealth:
    """Per-channel delivery mode (table `alert_channel(channel PK, mode, failures, last_probe_at)`)."""

    mode: str = "robot"  # robot | email
    failures: int = 0
    last_probe_at: datetime | None = None


class ChannelHealthStore(Protocol):
    """Where channel health lives; each change is one atomic step so replicas can share it."""

    def get(self, channel: str) -> ChannelHealth:
        """The channel's health (a fresh channel is on the robot with no failures)."""

    def claim_probe(self, channel: str, now: datetime, every: timedelta) -> bool:
        """While on e-mail, take the one robot probe allowed per `every`; False when not due or taken."""

    def success(self, channel: str, now: datetime) -> None:
        """The robot accepted a message: back to the robot, failures reset."""

    def failure(self, channel: str, now: datetime, threshold: int, can_mail: bool) -> ChannelHealth:
        """Count a failed row; at `threshold` (and with mail possible) switch to e-mail. Returns the result."""


class InMemoryChannelHealth:
    """ChannelHealthStore in a dict (one process); `store[channel]` reads a channel's health."""

    def __init__(self) -> None:
        self._h: dict[str, ChannelHealth] = {}

    def __getitem__(self, channel: str) -> ChannelHealth:
        return self._h[channel]

    def get(self, channel: str) -> ChannelHealth:
        """The channel's health (a copy)."""
        return replace(self._h.setdefault(channel, ChannelHealth()))

    def claim_probe(self, channel: str, now: datetime, every: timedelta) -> bool:
        """Take the probe when one is due."""
        h = self._h.setdefault(channel, ChannelHealth())
        if h.mode != "email" or (h.last_probe_at is not None and now - h.last_probe_at < every):
            return False
        h.last_probe_at = now
        return True

    def success(self, channel: str, now: datetime) -> None:
        """Back to the robot."""
        h = self._h.setdefault(channel, ChannelHealth())
        h.mode, h.failures = "robot", 0

    def failure(self, channel: str, now: datetime, threshold: int, can_mail: bool) -> ChannelHealth:
        """Count a failure; maybe switch to e-mail."""
        h = self._h.setdefault(channel, ChannelHealth())
        h.failures += 1
        if h.failures >= threshold and can_mail and h.mode != "email":
            h.mode, h.last_probe_at = "email", now
        return replace(h)


P0_RESERVE = 4  # slots per robot-minute that only P0 messages may use, so a page never waits behind a storm


def row_limit(row: OutboxRow, ch: Channel) -> int:
    """Messages per minute this row may count up to: the full limit for P0, less the reserve for others."""
    full = ch.rate_limit_per_minute
    return full if row.tier == "P0" else max(1, full - min(P0_RESERVE, full // 4))


class _RateLimited(Exception):
    """No slot left in this robot's minute; the row goes back to the queue."""


@dataclass
class Deliverer:
    """Sends due outbox rows; construct once, call `run_once(now)` from the scheduler.

    `notifiers` serve the channel kinds (one per kind); `mail` is the e-mail fallback (None: none).
    """

    config: AlertsConfig
    outbox: Outbox
    notifiers: Iterable[Notifier]
    mail: Notifier | None = None
    limiter: RateLimiter = field(default_factory=RateLimiter)
    owner: str = "xihe"
    wait: Any = field(default_factory=lambda: _wait_exponential())  # None: retry at once
    sleep: Callable[[float], None] | None = None  # None = tenacity's time.sleep
    health: ChannelHealthStore = field(default_factory=InMemoryChannelHealth)
    clock: Callable[[], datetime] | None = None  # real time for lease renewal (None: the run's `now`)

    def __post_init__(self) -> None:
        self._by_kind = {n.kind: n for n in self.notifiers}
        for name, ch in self.config.channels.items():
            if ch.kind not in self._by_kind:
                raise ConfigError(f"alerts.yaml channels.{name}: no notifier for kind {ch.kind!r}")

    def channel(self, name: str) -> Channel:
        """The channel's settings (an unknown name is the default channel)."""
        return self.config.channels.get(name) or self.config.channels["default"]

    def _backoff(self, row: OutboxRow, now: datetime) -> datetime:
        seconds = min(600, self.config.delivery.retry_seconds * 2 ** min(row.attempts, 10))
        return now + timedelta(seconds=seconds)

    def run_once(self, now: datetime) -> list[Attempt]:
        """Deliver what is due at `now`; return every attempt made."""
        d = self.config.delivery
        audit: list[Attempt] = []
        for row in self.outbox.claim(now, self.owner, timedelta(seconds=d.lease_seconds), d.batch):
            self._deliver(row, now, audit)
        return audit

    def _deliver(self, row: OutboxRow, now: datetime, audit: list[Attempt]) -> None:
        d = self.config.delivery
        # Renew just before sending: a row claimed early in a slow batch must not have lapsed to
        # another replica, which would then send it a second time.
        current = self.clock() if self.clock is not None else now
        if not self.outbox.renew(row.key, self.owner, current, timedelta(seconds=d.lease_seconds)):
            return
        ch = self.channel(row.channel)
        notifier = self._by_kind[ch.kind]
        health = self.health.get(row.channel)
        can_mail = self.mail is not None and not self.mail.ready(ch)
        every = timedelta(seconds=d.probe_seconds)
        probe_due = (
            can_mail
            and health.mode == "email"
            and (health.last_probe_at is None or now - health.last_probe_at >= every)
        )
        use_robot = not can_mail or (not row.force_email and (health.mode == "robot" or probe_due))
        if use_robot:
            problem = notifier.ready(ch)
            if problem:
                audit.append(stamped(Attempt(False, error=problem), row, "robot", now))
                outcome = "failed"
            else:
                robot_id = ch.robot_key_env
                limit = row_limit(row, ch)
                if not self.limiter.allowed(robot_id, now, limit):
                    self.outbox.release(row.key, self.owner, self.limiter.next_free(robot_id, now, limit))
                    return
                probe = probe_due and self.health.claim_probe(row.channel, now, every)
                if probe_due and not probe:
                    outcome = "skip"  # another sender holds this probe: this row goes by mail
                else:
                    outcome = self._notify(notifier, ch, row, robot_id, limit, now, audit, probe)
            if outcome == "sent":
                self.outbox.mark_sent(row.key, self.owner, now, "robot")
                self.health.success(row.channel, now)
                return
            if outcome == "limited":
                self.outbox.release(
                    row.key, self.owner, self.limiter.next_free(ch.robot_key_env, now, row_limit(row, ch))
                )
                return
            if outcome == "content":
                row = replace(row, force_email=True)
            elif outcome == "failed":
                health = self.health.failure(row.channel, now, d.failures_before_email, can_mail)
            if outcome != "skip" and (not can_mail or (health.mode != "email" and not row.force_email)):
                self.outbox.mark_failed(
                    row.key,
                    self.owner,
                    now,
                    audit[-1].error,
                    self._backoff(row, now),
                    force_email=row.force_email,
                )
                return
        self._mail(row, ch, now, audit)

    def _notify(
        self,
        notifier: Notifier,
        ch: Channel,
        row: OutboxRow,
        robot_id: str,
        limit: int,
        now: datetime,
        audit: list[Attempt],
        probe: bool,
    ) -> str:
        """Returns sent | failed | content | limited."""

        def attempt() -> Attempt:
            if not self.limiter.acquire(robot_id, now, limit):
                raise _RateLimited()
            a = notifier.send(addressed(ch, row), row.text, subject=row.subject, ref=row.key)
            audit.append(stamped(a, row, "robot", now, probe))
            return a

        tries = 1 if probe else self.config.delivery.tries_per_run
        try:
            result = attempt()
            if not result.ok and result.retryable and tries > 1:
                result = self._retried(attempt, result, tries)
        except _RateLimited:
            return "limited" if not audit or audit[-1].key != row.key or audit[-1].ok else "failed"
        if result.ok:
            return "sent"
        return "content" if result.refused else "failed"

    def _retried(self, attempt: Callable[[], Attempt], first: Attempt, tries: int) -> Attempt:
        """Tries 2..`tries` with tenacity, after a first attempt that failed and may be retried.

        tenacity's first call returns that attempt, so the waits, the stop and the last result are
        what one `Retrying` over every try gives; most rows go out at the first try, and a process
        that never retries (the replay) never imports tenacity (~5 ms; issue 30)."""
        from tenacity import Retrying, retry_if_result, stop_after_attempt, wait_none

        made = [first]

        def again() -> Attempt:
            return made.pop() if made else attempt()

        def last(state: RetryCallState) -> Attempt:
            assert state.outcome is not None
            result: Attempt = state.outcome.result()
            return result

        kwargs: dict[str, Any] = {
            "stop": stop_after_attempt(tries),
            "wait": wait_none() if self.wait is None else self.wait,
            "reraise": True,
            "retry": retry_if_result(lambda a: not a.ok and a.retryable),
            "retry_error_callback": last,
        }
        if self.sleep is not None:
            kwargs["sleep"] = self.sleep
        result: Attempt = Retrying(**kwargs)(again)
        return result

    def _mail(self, row: OutboxRow, ch: Channel, now: datetime, audit: list[Attempt]) -> None:
        assert self.mail is not None
        a = self.mail.send(ch, row.text, subject=row.subject, ref=row.key)
        audit.append(stamped(a, row, "email", now))
        if not a.ok:
            self.outbox.mark_failed(
                row.key, self.owner, now, a.error, self._backoff(row, now), force_email=row.force_email
            )
            return
        self.outbox.mark_sent(row.key, self.owner, now, "email")


def addressed(ch: Channel, row: OutboxRow) -> Channel:
    """The channel as one row is sent: an escalation page (`to_user`) through the self-built app goes
    to that person alone (an app message); the group robot posts it to the group, @-mentioning them."""
    if row.to_user and ch.kind == "wecom_app":
        return ch.model_copy(update={"to_users": [row.to_user]})
    return ch


def _wait_exponential() -> Any:
    """The default wait between tries: 0.5 s doubling up to 4 s."""
    from tenacity import wait_exponential

    return wait_exponential(multiplier=0.5, max=4)
