"""The outbox sender: robot first, rate-limited, retried with tenacity, e-mail after repeated failure.

`Deliverer.run_once(now)` is one scheduler job run: claim due rows, push each through the channel's
robot (20/min/robot, every HTTP attempt counted), retry retryable errcodes/timeouts/5xx with
tenacity, and track consecutive failed rows per channel. After `failures_before_email` of them the
channel switches to e-mail; while on e-mail, one row per `probe_seconds` tries the robot first and a
success switches the channel back. Every attempt comes back as a `DeliveryAttempt` for the audit.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from xihe.agent.alerts.outbox import Outbox, OutboxRow
from xihe.agent.alerts.ratelimit import RateLimiter
from xihe.agent.errors import MailError
from xihe.config.alerts import AlertsConfig, Channel
from xihe.integrations.wecom.robot import CONTENT_ERRCODES, RobotError, RobotReply, redact


class RobotSender(Protocol):
    """What the deliverer needs from a robot client (integrations.wecom_robot.RobotClient)."""

    def send_markdown(self, key: str, content: str) -> RobotReply:
        """Push markdown; raise RobotError on failure."""


class MailSender(Protocol):
    """What the deliverer needs from a mailer (integrations.mailer.Mailer)."""

    def send(self, to: list[str], subject: str, body: str, message_id_key: str = "") -> str:
        """Send; raise MailError on failure; return the server reply."""


@dataclass(frozen=True)
class DeliveryAttempt:
    """One push attempt, as the audit records it (no webhook key, no password)."""

    key: str
    channel: str
    via: str  # robot | email
    at: datetime
    ok: bool
    http_status: int | None = None
    body: str = ""
    errcode: int | None = None
    error: str = ""
    probe: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "key": self.key,
            "channel": self.channel,
            "via": self.via,
            "at": self.at.isoformat(),
            "ok": self.ok,
            "http_status": self.http_status,
            "body": self.body,
            "errcode": self.errcode,
            "error": self.error,
            "probe": self.probe,
        }


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
    """Sends due outbox rows; construct once, call `run_once(now)` from the scheduler."""

    config: AlertsConfig
    outbox: Outbox
    robot: RobotSender
    mailer: MailSender | None = None
    limiter: RateLimiter = field(default_factory=RateLimiter)
    owner: str = "xihe"
    env: Mapping[str, str] = field(default_factory=lambda: os.environ)
    wait: Any = field(default_factory=lambda: wait_exponential(multiplier=0.5, max=4))
    sleep: Callable[[float], None] | None = None  # None = tenacity's time.sleep
    health: ChannelHealthStore = field(default_factory=InMemoryChannelHealth)
    clock: Callable[[], datetime] | None = None  # real time for lease renewal (None: the run's `now`)

    def _channel(self, name: str) -> Channel:
        return self.config.channels.get(name) or self.config.channels["default"]

    def _backoff(self, row: OutboxRow, now: datetime) -> datetime:
        seconds = min(600, self.config.delivery.retry_seconds * 2 ** min(row.attempts, 10))
        return now + timedelta(seconds=seconds)

    def run_once(self, now: datetime) -> list[DeliveryAttempt]:
        """Deliver what is due at `now`; return every attempt made."""
        d = self.config.delivery
        audit: list[DeliveryAttempt] = []
        for row in self.outbox.claim(now, self.owner, timedelta(seconds=d.lease_seconds), d.batch):
            self._deliver(row, now, audit)
        return audit

    def _deliver(self, row: OutboxRow, now: datetime, audit: list[DeliveryAttempt]) -> None:
        d = self.config.delivery
        # Renew just before sending: a row claimed early in a slow batch must not have lapsed to
        # another replica, which would then send it a second time.
        current = self.clock() if self.clock is not None else now
        if not self.outbox.renew(row.key, self.owner, current + timedelta(seconds=d.lease_seconds)):
            return
        ch = self._channel(row.channel)
        health = self.health.get(row.channel)
        can_mail = bool(self.mailer is not None and self._recipients(ch))
        every = timedelta(seconds=d.probe_seconds)
        probe_due = (
            can_mail
            and health.mode == "email"
            and (health.last_probe_at is None or now - health.last_probe_at >= every)
        )
        use_robot = not can_mail or (not row.force_email and (health.mode == "robot" or probe_due))
        if use_robot:
            key = self.env.get(ch.robot_key_env, "")
            if not key:
                audit.append(
                    DeliveryAttempt(
                        row.key,
                        row.channel,
                        "robot",
                        now,
                        False,
                        error=f"robot key variable {ch.robot_key_env} is not set",
                    )
                )
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
                    outcome = self._robot(row, key, robot_id, limit, now, audit, probe)
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

    def _robot(
        self,
        row: OutboxRow,
        key: str,
        robot_id: str,
        limit: int,
        now: datetime,
        audit: list[DeliveryAttempt],
        probe: bool,
    ) -> str:
        """Returns sent | failed | content | limited."""

        def attempt() -> RobotReply:
            if not self.limiter.acquire(robot_id, now, limit):
                raise _RateLimited()
            try:
                reply = self.robot.send_markdown(key, row.text)
            except RobotError as exc:
                audit.append(
                    DeliveryAttempt(
                        row.key,
                        row.channel,
                        "robot",
                        now,
                        False,
                        exc.status,
                        redact(exc.body, key),
                        exc.errcode,
                        redact(str(exc), key),
                        probe,
                    )
                )
                raise
            audit.append(
                DeliveryAttempt(
                    row.key,
                    row.channel,
                    "robot",
                    now,
                    True,
                    reply.status,
                    redact(reply.body, key),
                    reply.errcode,
                    "",
                    probe,
                )
            )
            return reply

        kwargs: dict[str, Any] = {
            "stop": stop_after_attempt(1 if probe else self.config.delivery.tries_per_run),
            "wait": self.wait,
            "reraise": True,
            "retry": retry_if_exception(lambda e: isinstance(e, RobotError) and e.retryable),
        }
        if self.sleep is not None:
            kwargs["sleep"] = self.sleep
        try:
            Retrying(**kwargs)(attempt)
        except _RateLimited:
            return "limited" if not audit or audit[-1].key != row.key or audit[-1].ok else "failed"
        except RobotError as exc:
            return "content" if exc.errcode in CONTENT_ERRCODES else "failed"
        return "sent"

    def _recipients(self, ch: Channel) -> list[str]:
        return list(ch.email_to or self.config.smtp.admins)

    def _mail(self, row: OutboxRow, ch: Channel, now: datetime, audit: list[DeliveryAttempt]) -> None:
        assert self.mailer is not None
        try:
            reply = self.mailer.send(self._recipients(ch), row.subject, row.text, row.key)
        except MailError as exc:
            audit.append(DeliveryAttempt(row.key, row.channel, "email", now, False, error=str(exc)))
            self.outbox.mark_failed(
                row.key, self.owner, now, str(exc), self._backoff(row, now), force_email=row.force_email
            )
            return
        audit.append(DeliveryAttempt(row.key, row.channel, "email", now, True, body=reply))
        self.outbox.mark_sent(row.key, self.owner, now, "email")
