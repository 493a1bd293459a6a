"""An alert's life after its first push: firing → acknowledged → resolved (or expired).

One alert per failed instance (the instance id is its key; its own short id is `A<n>`), whatever
message carried it (its own, a window's, a suspect-node alert). Pure decisions over `Alert` with
`now` passed in; `LifeStore` (lifestore.py, sql/life.py) keeps them, `Lifecycle` (life.py) applies
them inside the pipeline's unit of work.

    fire          a final failure: a new alert, or a resolved one firing again
    acknowledge   `/ack`: firing → acknowledged (stops escalation); a refusal says why
    resolve       the instance (or a later run of the same workflow and business date) succeeded
    next_step     whether an unacknowledged alert pages the next step of its chain now, and whom
    expire        open longer than `expire_hours`: expired
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Literal

from xihe.agent.alerts.model import Tier

if TYPE_CHECKING:
    from xihe.config.alerts import TierPolicy

State = Literal["firing", "acknowledged", "resolved", "expired"]
OPEN: tuple[State, ...] = ("firing", "acknowledged")
STEPS = ("oncall", "secondary", "owner", "fallback")  # the escalation chain, in order


class Why(StrEnum):
    """Why a lifecycle decision came out as it did (audited, shown)."""

    FIRED = "fired"
    REFIRED = "refired"  # a resolved or expired alert's instance failed again
    STILL_OPEN = "still_open"  # another failure of an instance whose alert is open: nothing changes
    ACKED = "acked"
    ALREADY_ACKED = "already_acked"
    NOT_OPEN = "not_open"
    RESOLVED_SAME = "resolved_same_instance"  # the failed instance ended SUCCESS (a rerun, DS's retry)
    RESOLVED_LATER = "resolved_later_run"  # a later run of the same workflow and business date succeeded
    EXPIRED = "expired"
    PAGED = "paged"  # an escalation page went to the next step of the chain


@dataclass(frozen=True)
class Alert:
    """One alert's state, with who moved it and when."""

    instance_id: int
    project: str
    workflow: str
    business_date: str  # ISO date, or "" when the source did not know it
    tier: Tier
    channel: str
    state: State
    fired_at: datetime
    notification_key: str = ""  # the message that carried it (its own, or a window's)
    id: int = 0  # 0 until stored; shown as A<id>
    acked_at: datetime | None = None
    acked_by: str = ""
    resolved_at: datetime | None = None
    resolved_by: str = ""  # who reran it, when known
    resolved_how: str = ""  # Why.RESOLVED_* or Why.EXPIRED
    resolved_instance: int = 0  # the run whose SUCCESS resolved it
    pages: int = 0  # escalation pages sent
    steps_done: str = ""  # comma-separated step names already paged (never twice)
    next_page_at: datetime | None = None

    @property
    def short(self) -> str:
        """The alert's own short id, as shown and as `/ack` takes it."""
        return f"A{self.id}"

    @property
    def open(self) -> bool:
        """Firing or acknowledged."""
        return self.state in OPEN


def _first_page(now: datetime, policy: TierPolicy) -> datetime | None:
    return now + timedelta(minutes=policy.escalate_after) if policy.escalate_after else None


def fire(
    existing: Alert | None,
    *,
    instance_id: int,
    project: str,
    workflow: str,
    business_date: str,
    tier: Tier,
    channel: str,
    notification_key: str,
    now: datetime,
    policy: TierPolicy,
) -> tuple[Alert | None, Why]:
    """A final failure of `instance_id`: the alert to store (None: keep the stored one as it is)."""
    if existing is not None and existing.open:
        return None, Why.STILL_OPEN
    fresh = Alert(
        instance_id,
        project,
        workflow,
        business_date,
        tier,
        channel,
        "firing",
        now,
        notification_key,
        next_page_at=_first_page(now, policy),
    )
    if existing is None:
        return fresh, Why.FIRED
    return replace(fresh, id=existing.id), Why.REFIRED


def acknowledge(alert: Alert, who: str, now: datetime) -> tuple[Alert | None, Why]:
    """`/ack`: a firing alert becomes acknowledged by `who`; else None and why not."""
    if alert.state == "acknowledged":
        return None, Why.ALREADY_ACKED
    if alert.state != "firing":
        return None, Why.NOT_OPEN
    return replace(alert, state="acknowledged", acked_at=now, acked_by=who, next_page_at=None), Why.ACKED


def resolve(alert: Alert, now: datetime, how: Why, by_instance: int, rerun_by: str = "") -> Alert | None:
    """An open alert becomes resolved (None when it is not open)."""
    if not alert.open:
        return None
    return replace(
        alert,
        state="resolved",
        resolved_at=now,
        resolved_by=rerun_by,
        resolved_how=how.value,
        resolved_instance=by_instance,
        next_page_at=None,
    )


def resolves(
    alert: Alert, instance_id: int, workflow: str, business_date: str, started: datetime | None
) -> Why | None:
    """Whether a SUCCESS of run `instance_id` resolves `alert`: the same instance, or a later run of
    the same workflow and business date (both dates known, the run started after the alert fired)."""
    if not alert.open:
        return None
    if instance_id == alert.instance_id:
        return Why.RESOLVED_SAME
    later = started is None or started >= alert.fired_at - timedelta(minutes=1)
    if workflow == alert.workflow and business_date and business_date == alert.business_date and later:
        return Why.RESOLVED_LATER
    return None


@dataclass(frozen=True)
class Page:
    """One escalation page to send: the step of the chain and the person."""

    step: str
    person: str
    number: int  # 1 = the first escalation


def chain(
    oncall: str | None, secondary: str | None, owner: str, fallback: Sequence[str]
) -> list[tuple[str, str]]:
    """(step, person) in order: the current on-call, the secondary, the workflow owner, the fallback
    (a step with nobody is left out; a person already in the chain is not paged twice)."""
    out: list[tuple[str, str]] = []
    for step, person in (("oncall", oncall), ("secondary", secondary), ("owner", owner)):
        if person and person not in [p for _s, p in out]:
            out.append((step, person))
    for i, person in enumerate(fallback):
        if person and person not in [p for _s, p in out]:
            out.append((f"fallback{i + 1}" if i else "fallback", person))
    return out


def next_step(alert: Alert, steps: list[tuple[str, str]], now: datetime, policy: TierPolicy) -> Page | None:
    """The page due now for an unacknowledged alert: the first step of its chain not paged yet,
    when `escalate_after` passed since it fired (or since the last page); None when nothing is due,
    it was acknowledged or resolved, or it has had `max_escalations` pages."""
    if alert.state != "firing" or alert.next_page_at is None or now < alert.next_page_at:
        return None
    if alert.pages >= policy.max_escalations:
        return None
    done = set(filter(None, alert.steps_done.split(",")))
    for step, person in steps:
        if step not in done:
            return Page(step, person, alert.pages + 1)
    return None


def paged(alert: Alert, page: Page, now: datetime, policy: TierPolicy) -> Alert:
    """The alert after `page` went to the outbox: the step is done, the next one due later."""
    steps = ",".join(filter(None, [*alert.steps_done.split(","), page.step]))
    more = alert.pages + 1 < policy.max_escalations and policy.escalate_after > 0
    return replace(
        alert,
        pages=alert.pages + 1,
        steps_done=steps,
        next_page_at=now + timedelta(minutes=policy.escalate_after) if more else None,
    )


def exhausted(alert: Alert) -> Alert:
    """An alert whose chain has nobody left to page: no more pages."""
    return replace(alert, next_page_at=None)


def expire(alert: Alert, now: datetime, hours: int) -> Alert | None:
    """An alert open for `hours` becomes expired (None: not yet, or not open)."""
    if not alert.open or now - alert.fired_at < timedelta(hours=hours):
        return None
    return replace(alert, state="expired", resolved_at=now, resolved_how=Why.EXPIRED.value, next_page_at=None)
