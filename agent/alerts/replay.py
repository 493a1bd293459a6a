"""Replay a recorded AlertEvent stream through the real pipeline and deliverer on a simulated clock.

Used by `xihe alerts replay`, the tests and the storm benchmark. Stores are in memory; the robot is
`SimRobot`, which enforces WeCom's 20 messages/minute on the simulated clock and counts violations.
"""

from __future__ import annotations

import json
import time
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xihe.agent.alert_event import AlertEvent
from xihe.agent.alerts.deliver import Deliverer
from xihe.agent.alerts.event import EventError, parse_event, unknown_fields
from xihe.agent.alerts.life import Transition
from xihe.agent.alerts.lifecycle import Why
from xihe.agent.alerts.lifestore import InMemoryLifeStore
from xihe.agent.alerts.model import PUSHED, AlertRecord
from xihe.agent.alerts.notify.base import Attempt
from xihe.agent.alerts.notify.email import EmailNotifier
from xihe.agent.alerts.notify.wecom_robot import WeComRobotNotifier
from xihe.agent.alerts.outbox import InMemoryOutbox
from xihe.agent.alerts.pipeline import Pipeline
from xihe.agent.alerts.ratelimit import RateLimiter
from xihe.agent.alerts.state import InMemoryAlertStateStore
from xihe.agent.clock import FakeClock
from xihe.agent.errors import MailError
from xihe.integrations.wecom.robot import RobotError, RobotReply

if TYPE_CHECKING:
    from xihe.config.alerts import AlertsConfig
    from xihe.config.workflows import WorkflowsConfig


_AT = attrgetter("at")


class SimRobot:
    """An in-process robot on a simulated clock: WeCom's per-key limit, byte limit and outages."""

    def __init__(self, clock: FakeClock, per_minute: int = 20, max_bytes: int = 4096) -> None:
        self.clock = clock
        self.per_minute = per_minute
        self.max_bytes = max_bytes
        self.sent: list[tuple[datetime, str, str]] = []
        self.requests: dict[str, list[datetime]] = {}
        self.violations = 0
        self.down: list[tuple[datetime, datetime]] = []  # outage stretches [start, end)

    def send_markdown(self, key: str, content: str) -> RobotReply:
        """Accept, or raise RobotError like WeCom would."""
        now = self.clock()
        reqs = self.requests.setdefault(key, [])
        reqs.append(now)
        since = now - timedelta(minutes=1)
        recent = sum(1 for t in reqs[-self.per_minute - 1 :] if t > since)
        if any(a <= now < b for a, b in self.down):
            raise RobotError("robot HTTP 502", retryable=True, status=502, body="bad gateway")
        if recent > self.per_minute:
            self.violations += 1
            raise RobotError(
                "robot errcode 45009",
                errcode=45009,
                retryable=True,
                status=200,
                body='{"errcode":45009,"errmsg":"api freq out of limit"}',
            )
        if len(content.encode("utf-8")) > self.max_bytes:
            raise RobotError("robot errcode 40058", errcode=40058, status=200, body='{"errcode":40058}')
        self.sent.append((now, key, content))
        return RobotReply(200, '{"errcode":0,"errmsg":"ok"}', 0)


class SimMailer:
    """Records mail instead of sending it; can be down for a stretch."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.sent: list[tuple[datetime, list[str], str, str]] = []
        self.down: list[tuple[datetime, datetime]] = []

    def send(
        self, to: list[str], subject: str, body: str, message_id_key: str = "", *, html: str = ""
    ) -> str:
        """Record one mail (its plain part)."""
        now = self.clock()
        if any(a <= now < b for a, b in self.down):
            raise MailError("SMTP 451: simulated outage", retryable=True)
        self.sent.append((now, list(to), subject, body))
        return "250 OK"


@dataclass
class ReplayResult:
    """Everything a replay produced."""

    notifications: list[dict[str, Any]]
    records: list[AlertRecord]
    attempts: list[Attempt]
    events: int
    naive: int
    rate_limit_violations: int
    core_seconds: float
    unsent: int
    robot: SimRobot = field(repr=False)
    lifecycle: list[Transition] = field(default_factory=list)  # fired, acked, paged, resolved, expired
    ack_problems: list[str] = field(default_factory=list)  # ack lines that named no open alert

    def resolved(self) -> list[int]:
        """The instances whose alert a SUCCESS resolved, in order, each once."""
        return [
            t.alert.instance_id for t in self.lifecycle if t.why in (Why.RESOLVED_SAME, Why.RESOLVED_LATER)
        ]

    def suppressed(self) -> list[dict[str, Any]]:
        """Records of events that were not pushed as their own message, with the reason."""
        return [r.to_dict() for r in self.records if r.reason not in PUSHED]

    def summary(self) -> dict[str, Any]:
        """Counts for humans and the benchmark."""
        reasons = Counter(map(attrgetter("reason"), self.records))  # Reason members, counted in C
        by_kind = Counter(n["kind"] for n in self.notifications)
        return {
            "events": self.events,
            "notifications": len(self.notifications),
            "by_kind": dict(by_kind),
            "naive_one_per_failure": self.naive,
            "by_reason": {k.value: n for k, n in sorted(reasons.items())},  # a StrEnum sorts as its value
            "rate_limit_violations": self.rate_limit_violations,
            "unsent": self.unsent,
            "via": dict(Counter(n["via"] for n in self.notifications)),
            "lifecycle": dict(Counter(t.why.value for t in self.lifecycle)),
            "resolved_instances": self.resolved(),
        }


@dataclass(frozen=True)
class BadLine:
    """A line of a replay file that was not used, and why."""

    line: int
    problem: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"line": self.line, "problem": self.problem}


@dataclass(frozen=True)
class AckLine:
    """An acknowledgement in a replay stream: `{"at": ..., "ack": "101" | "A1", "by": "zhangsan"}`."""

    at: datetime
    ref: str
    by: str
    line: int = 0


def parse_ack(data: dict[str, Any], line: int = 0) -> AckLine:
    """An ack line (a JSON object with key `ack`); EventError says what is wrong."""
    unknown = sorted(set(data) - {"at", "ack", "by"})
    if unknown:
        raise EventError(f"ack line: unknown field(s) {', '.join(unknown)} (an ack line has at, ack, by)")
    missing = [k for k in ("at", "ack", "by") if data.get(k) in (None, "")]
    if missing:
        raise EventError(f"ack line: missing required field(s) {', '.join(missing)}")
    ref, by = str(data["ack"]).strip(), str(data["by"]).strip()
    if not (ref.isdigit() or (ref[:1] in "Aa" and ref[1:].isdigit())):
        raise EventError(f"ack: expected an instance id (101) or an alert id (A1), got {ref[:40]!r}")
    try:
        at = datetime.fromisoformat(str(data["at"]).strip().replace("Z", "+00:00"))
    except ValueError:
        raise EventError(f"at: not an ISO 8601 time: {str(data['at'])[:40]!r}") from None
    if at.tzinfo is None:
        raise EventError(f"at: {data['at']!s:.40} has no UTC offset (write e.g. +08:00 or Z)")
    return AckLine(at, ref, by, line)


@dataclass
class Loaded:
    """A parsed replay file: the usable events and ack lines, the bad lines, and ignored unknown fields."""

    events: list[AlertEvent] = field(default_factory=list)
    bad: list[BadLine] = field(default_factory=list)
    unknown_fields: Counter[str] = field(default_factory=Counter)
    acks: list[AckLine] = field(default_factory=list)


def parse_lines(lines: Iterable[str]) -> Loaded:
    """Parse JSON lines in the event format; a bad line is kept as a BadLine and parsing goes on."""
    out = Loaded()
    # A line repeated verbatim (a re-polled or re-posted report: half of a storm) is the same event:
    # decoded once. AlertEvent is frozen, so the repeats share it.
    events: dict[str, tuple[AlertEvent, list[str]]] = {}
    for n, line in enumerate(lines, 1):
        known = events.get(line)
        if known is not None:
            out.events.append(known[0])
            if known[1]:
                out.unknown_fields.update(known[1])
            continue
        if line[:1] != "{" and (not line.strip() or line.lstrip().startswith("#")):
            continue  # blank or a comment (an object's line is neither)
        try:
            data = _loads(line)
        except json.JSONDecodeError as exc:
            out.bad.append(BadLine(n, f"invalid JSON: {exc.msg} (column {exc.colno})"))
            continue
        except RecursionError:
            out.bad.append(BadLine(n, "invalid JSON: nested too deeply"))
            continue
        try:
            if isinstance(data, dict) and "ack" in data:
                out.acks.append(parse_ack(data, n))
                continue
            event = parse_event(data)
        except EventError as exc:
            out.bad.append(BadLine(n, str(exc)))
            continue
        unknown = unknown_fields(data)
        events[line] = (event, unknown)
        out.events.append(event)
        if unknown:
            out.unknown_fields.update(unknown)
    return out


_raw_decode = json.JSONDecoder().raw_decode  # json.loads's decoder (the same defaults)


def _loads(line: str) -> Any:
    """`json.loads(line)` without its two Python-level wrappers (~0.75 µs of its ~1.9 per line;
    issue 30): a line that is one JSON value, with at most whitespace after it, decoded directly;
    anything else (leading whitespace, trailing data, an error) by json.loads itself, which raises
    its own error with its own message."""
    try:
        data, end = _raw_decode(line)
    except (ValueError, RecursionError):
        return json.loads(line)
    if end != len(line) and line[end:].strip(" \t\n\r"):
        return json.loads(line)
    return data


def load_events(path: str | Path) -> Loaded:
    """Parse a JSONL file (see `parse_lines`); raises OSError when it cannot be read."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        return parse_lines(fh)


def failure_reports(events: Iterable[AlertEvent]) -> int:
    """What a naive one-alert-per-failure policy would push: every FAILURE event."""
    return sum(1 for e in events if e.state == "FAILURE")


def run_replay(
    events: Iterable[AlertEvent],
    config: AlertsConfig,
    workflows: WorkflowsConfig,
    production: frozenset[str],
    robot_down: Iterable[tuple[datetime, datetime]] = (),
    acks: Iterable[AckLine] = (),
) -> ReplayResult:
    """Feed `events` (and `acks`) in time order on a simulated clock; deliver through
    SimRobot/SimMailer. Alerts live as in the bot: acknowledged by the ack lines, paged up their
    chain while the replay's clock runs, resolved by a SUCCESS."""
    stream = sorted(events, key=_AT)
    times = list(map(_AT, stream))
    pending_acks = sorted(acks, key=lambda a: a.at)
    start = stream[0].at if stream else datetime.fromisoformat("2026-01-01T00:00:00+00:00")
    clock = FakeClock(start)
    state = InMemoryAlertStateStore()
    outbox = InMemoryOutbox()
    pipeline = Pipeline(config, workflows, state, outbox, production=production, life=InMemoryLifeStore())
    life = pipeline.life
    assert life is not None
    moves: list[Transition] = []
    ack_problems: list[str] = []
    robot = SimRobot(clock)
    robot.down = list(robot_down)
    mailer = SimMailer(clock)
    env = {ch.robot_key_env: f"sim-{name}" for name, ch in config.channels.items()}
    deliverer = Deliverer(
        config,
        outbox,
        [WeComRobotNotifier(robot, env)],
        EmailNotifier(mailer, config.smtp.admins),
        RateLimiter(),
        wait=None,
        sleep=lambda _s: None,
    )
    records: list[AlertRecord] = []
    attempts: list[Attempt] = []
    core = 0.0
    horizon = timedelta(
        minutes=max(config.window_minutes, config.node_storm.window_minutes),
        seconds=config.instance_wait_seconds + 1,
    )
    # alerts nobody acknowledged keep paging up their chain: follow them to the last page
    paging = max((p.escalate_after * p.max_escalations for p in config.lifecycle.tiers.values()), default=0)
    horizon = max(horizon, timedelta(minutes=paging, seconds=1))
    last = stream[-1].at + horizon if stream else start
    if pending_acks:
        last = max(last, pending_acks[-1].at + timedelta(seconds=1))
    i, n = 0, len(stream)
    while True:
        candidates = [
            t
            for t in (
                times[i] if i < n else None,
                pending_acks[0].at if pending_acks else None,
                pipeline.next_due(),
                outbox.next_due(),
            )
            if t is not None
        ]
        if i >= n:
            candidates = [t for t in candidates if t <= last] or [
                t for t in (outbox.next_due(),) if t is not None
            ]
        if not candidates:
            break
        now = max(min(candidates), clock.now)
        clock.now = now
        t0 = time.perf_counter()
        while pending_acks and pending_acks[0].at <= now and (i >= n or pending_acks[0].at <= times[i]):
            ack = pending_acks.pop(0)
            alert = life.find(ack.ref)
            moved, why = life.acknowledge(alert, ack.by, now) if alert is not None else (None, None)
            if moved is not None:
                moves.append(moved)
            else:
                what = "no such alert" if alert is None else why.value if why else "?"
                ack_problems.append(f"line {ack.line}: ack {ack.ref} by {ack.by}: {what}")
        # the events of this instant, each decided as if fed alone (`feed_batch(each=True)`)
        fed_to = bisect_right(times, now, i)
        if fed_to > i:
            fed = pipeline.feed_batch(stream[i:fed_to], now, each=True)
            moves.extend(fed.transitions)
            records.extend(fed.records)
            i = fed_to
            quiet = pipeline.folding.quiet_until
            if quiet is not None:  # keep going until a maintenance window ends and says what it kept quiet
                last = max(last, quiet + timedelta(seconds=1))
        else:
            moves.extend(pipeline.tick(now).transitions)
        core += time.perf_counter() - t0
        due = outbox.next_due()
        if due is not None and due <= now:  # nothing to claim otherwise
            attempts.extend(deliverer.run_once(now))
        if i >= n and not pending_acks and outbox.next_due() is None and (pipeline.next_due() or last) > last:
            break
    sent = [r for r in outbox.rows() if r.status == "sent"]
    notes = [
        {
            "time": r.sent_at.isoformat() if r.sent_at else None,
            "created": r.created_at.isoformat(),
            "tier": r.tier,
            "channel": r.channel,
            "via": r.sent_via,
            "key": r.key,
            "kind": r.kind,
            "text": r.text,
        }
        for r in sorted(sent, key=lambda r: (r.sent_at or r.created_at, r.key))
    ]
    return ReplayResult(
        notes,
        records,
        attempts,
        n,
        failure_reports(stream),
        robot.violations,
        core,
        sum(1 for r in outbox.rows() if r.status != "sent"),
        robot,
        moves,
        ack_problems,
    )
