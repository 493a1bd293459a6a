"""The alert lifecycle inside the pipeline: the pure decisions of lifecycle.py applied to a `LifeStore`,
with the messages they send (templates ack.md.j2, page.md.j2, resolved.md.j2) queued in the outbox.

Called inside the pipeline's unit of work (one replica at a time); a page is claimed in the store per
(alert, firing, step) before it is queued, so a step is paged once whichever replica or restart gets
there. Every change comes back as a `Transition`, which the service audits and records.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from xihe.agent.alert_event import AlertEvent
from xihe.agent.alerts.classify import WorkflowIndex
from xihe.agent.alerts.emit import Emitter, OnCallLookup, listed_oncall
from xihe.agent.alerts.grouping import epoch
from xihe.agent.alerts.lifecycle import (
    Alert,
    Page,
    Why,
    acknowledge,
    chain,
    exhausted,
    expire,
    fire,
    next_step,
    paged,
    resolve,
    resolves,
)
from xihe.agent.alerts.lifestore import LifeStore, PageRow
from xihe.agent.alerts.model import AlertRecord, Reason, Tier
from xihe.agent.alerts.notes import Origins
from xihe.agent.alerts.outbox import OutboxRow
from xihe.agent.alerts.render import duration_seconds
from xihe.agent.wecom_markdown import Url, checked_url

if TYPE_CHECKING:
    from xihe.config.alerts import AlertsConfig
    from xihe.config.workflows import Workflow

# Final-failure decisions that leave someone told (or about to be): each gives its instance an alert.
ALERTED = frozenset(
    {
        Reason.NEW_INSTANCE,
        Reason.JOINED_INSTANCE,
        Reason.INSTANCE_ALREADY_NOTIFIED,
        Reason.FINGERPRINT_REPEAT,
        Reason.AGGREGATED_P2,
        Reason.NODE_STORM,
        Reason.NODE_STORM_OPENED,
    }
)
STEP_NAMES = {"oncall": "值班", "secondary": "备岗", "owner": "负责人", "fallback": "兜底"}


@dataclass(frozen=True)
class Transition:
    """One change of an alert's state (or an escalation page), for audit, records and replay."""

    at: datetime
    alert: Alert
    why: Why
    actor: str = ""  # who acknowledged; the person paged
    key: str = ""  # the outbox row it queued, if any

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        a = self.alert
        return {
            "at": self.at.isoformat(),
            "alert": a.short,
            "instance_id": a.instance_id,
            "workflow": a.workflow,
            "tier": a.tier.value,
            "state": a.state,
            "why": self.why.value,
            "actor": self.actor,
            "notification_key": self.key,
        }


def business_date(event: AlertEvent) -> str:
    """The business date of a run, when its source knows it (the watcher: scheduleTime less the
    workflow's offset; a replay line's `business_date`); never guessed from the start time, since two
    runs of one day may be for different dates."""
    return event.business_date


class Lifecycle:
    """Fires, resolves, escalates and expires alerts; acknowledges them for `/ack`."""

    def __init__(
        self,
        config: AlertsConfig,
        index: WorkflowIndex,
        store: LifeStore,
        emitter: Emitter,
        origins: Origins,
        oncall: OnCallLookup | None = None,
        names: Mapping[str, str] | None = None,
        holder: str = "",
    ) -> None:
        self.config = config
        self.life = config.lifecycle
        self.index = index
        self.store = store
        self.emitter = emitter
        self.origins = origins
        self.oncall = oncall or listed_oncall
        self.names = names or {}
        self.holder = holder
        self._expire = timedelta(hours=self.life.expire_hours)

    def name(self, user: str) -> str:
        """A person as shown: the display name from access.yaml, else the userid."""
        return self.names.get(user) or user

    # ---- events -------------------------------------------------------------------------------
    def failed(self, event: AlertEvent, rec: AlertRecord, now: datetime) -> Transition | None:
        """A final failure's decision: its instance's alert fires (once; again after a resolve)."""
        if rec.reason not in ALERTED or rec.tier is None:
            return None
        wf = self.index.find(event)
        channel = wf.channel if wf is not None and wf.channel in self.config.channels else "default"
        alert, why = fire(
            self.store.get(event.instance_id),
            instance_id=event.instance_id,
            project=event.project,
            workflow=event.workflow,
            business_date=business_date(event),
            tier=rec.tier,
            channel=channel,
            notification_key=rec.notification_key,
            now=now,
            policy=self.life.policy(rec.tier.value),
        )
        if alert is None:
            return None
        return Transition(now, self.store.save(alert), why)

    def succeeded(self, event: AlertEvent, now: datetime) -> list[Transition]:
        """A workflow SUCCESS: resolves the alert of the same instance, and those of earlier runs of
        the same workflow and business date; each says so in its channel (per tier `send_resolved`)."""
        if event.is_task or event.state != "SUCCESS":
            return []
        biz = business_date(event)
        if biz:
            same_project = [
                a
                for a in self.store.open_alerts()
                # only its own alert or one of the same workflow can be resolved (`resolves`)
                if (a.instance_id == event.instance_id or a.workflow == event.workflow)
                and (not event.project or a.project in ("", event.project))
            ]
            # its own alert first, then earlier runs of the same workflow and business date
            candidates = sorted(same_project, key=lambda a: a.instance_id != event.instance_id)
        else:  # without a business date only its own alert can be resolved (`resolves`): one lookup
            own = self.store.get(event.instance_id)
            same = own is not None and (not event.project or own.project in ("", event.project))
            candidates = [own] if own is not None and same and own.open else []
        rerun_by = event.rerun_by or self._started_by(event.instance_id)
        out: list[Transition] = []
        for alert in candidates:
            how = resolves(alert, event.instance_id, event.workflow, biz, event.start_time)
            if how is None:
                continue
            done = resolve(alert, now, how, event.instance_id, rerun_by)
            if done is None:
                continue
            done = self.store.save(done)
            key = self._resolved_row(done, now) if self.life.policy(done.tier.value).send_resolved else ""
            out.append(Transition(now, done, how, rerun_by, key))
        return out

    def _started_by(self, instance_id: int) -> str:
        origin = self.origins.find(instance_id)
        return origin.started_by if origin is not None and origin.started_by != "?" else ""

    # ---- acknowledge ---------------------------------------------------------------------------
    def find(self, ref: str, channels: Iterable[str] | None = None) -> Alert | None:
        """The alert `ref` names: `A7` (its short id), `101` (its instance id); "" = the newest open
        alert of `channels` (all channels when None)."""
        ref = ref.strip().lstrip("#")
        if not ref:
            return self.store.latest(channels)
        digits = ref[1:] if ref[:1] in ("A", "a") else ref
        if not digits.isdigit() or len(digits) > 18:  # beyond a 64-bit id: no such alert
            return None
        return self.store.by_id(int(digits)) if digits != ref else self.store.get(int(digits))

    def acknowledge(self, alert: Alert, who: str, now: datetime) -> tuple[Transition | None, Why]:
        """`/ack`: firing → acknowledged; the alert's channel hears one short line."""
        done, why = acknowledge(alert, who, now)
        if done is None:
            return None, why
        done = self.store.save(done)
        row = OutboxRow(
            f"ack:{done.id}:{epoch(done.fired_at)}",
            "ack",
            done.tier.value,
            done.channel,
            f"[xihe] {done.short} {done.workflow} #{done.instance_id} acknowledged by {who}",
            self.emitter.renderer_for(done.channel).render(
                "ack.md.j2",
                {
                    "short": done.short,
                    "workflow": done.workflow,
                    "instance_id": done.instance_id,
                    "who": self.name(who),
                },
            ),
            now,
            now,
        )
        self.emitter.outbox.add(row)
        return Transition(now, done, why, who, row.key), why

    def next_due(self) -> datetime | None:
        """When the next escalation page of a firing alert is due, or None."""
        return self.store.earliest()[0]

    # ---- the clock -----------------------------------------------------------------------------
    def tick(self, now: datetime) -> list[Transition]:
        """Escalation pages that came due, and expiry of alerts open too long."""
        page, fired = self.store.earliest()
        if fired is None or (now < fired + self._expire and (page is None or now < page)):
            return []  # the common case: no open alert, or no page due and nothing to expire
        out: list[Transition] = []
        expired_by = now - self._expire  # fired at or before: open too long (`expire`'s own test)
        for alert in self.store.open_alerts():
            if alert.fired_at <= expired_by:
                old = expire(alert, now, self.life.expire_hours)
                if old is not None:
                    out.append(Transition(now, self.store.save(old), Why.EXPIRED))
                    continue
            elif alert.next_page_at is None or now < alert.next_page_at:
                continue  # neither expires nor pages now (`_escalate` would return at once)
            out.extend(self._escalate(alert, now))
        return out

    def _escalate(self, alert: Alert, now: datetime) -> list[Transition]:
        if alert.state != "firing" or alert.next_page_at is None or now < alert.next_page_at:
            return []
        policy = self.life.policy(alert.tier.value)
        page = next_step(alert, self.chain_of(alert, now), now, policy)
        if page is None:
            self.store.save(exhausted(alert))
            return []
        claim = PageRow(
            alert.id, epoch(alert.fired_at), page.step, page.person, page.number, now, self.holder
        )
        after = paged(alert, page, now, policy)
        if not self.store.claim_page(claim):
            self.store.save(after)  # paged already (another replica, before a restart): move on
            return []
        key = self._page_row(alert, page, now)
        return [Transition(now, self.store.save(after), Why.PAGED, page.person, key)]

    def workflow(self, alert: Alert, now: datetime) -> Workflow | None:
        """The workflows.yaml entry of the alert's workflow, or None."""
        return self.index.find(
            AlertEvent(
                at=now,
                workflow=alert.workflow,
                instance_id=alert.instance_id,
                state="FAILURE",
                project=alert.project,
            )
        )

    def chain_of(self, alert: Alert, now: datetime) -> list[tuple[str, str]]:
        """The alert's escalation chain at `now`: (step, person) in order."""
        wf = self.workflow(alert, now)
        primary, secondary = self.oncall(wf, now) if wf is not None else (None, None)
        return chain(primary, secondary, wf.owner if wf is not None else "", self.life.fallback)

    def _page_row(self, alert: Alert, page: Page, now: datetime) -> str:
        ctx = {
            "person": page.person,
            "person_name": self.name(page.person),
            "number": page.number,
            "step_name": STEP_NAMES.get(page.step.rstrip("0123456789"), page.step),
            "workflow": alert.workflow,
            "short": alert.short,
            "tier": alert.tier.value,
            "instance_id": alert.instance_id,
            "failed_at": alert.fired_at,
            "seconds": duration_seconds(alert.fired_at, now),
        }
        row = OutboxRow(
            f"page:{alert.id}:{epoch(alert.fired_at)}:{page.step}",
            "page",
            Tier.P0.value if alert.tier is Tier.P0 else alert.tier.value,
            alert.channel,
            f"[xihe {alert.tier.value}] {alert.short} {alert.workflow} #{alert.instance_id} unacknowledged: "
            f"paging {page.person} ({page.step})",
            self.emitter.renderer_for(alert.channel).render("page.md.j2", ctx),
            now,
            now,
            to_user=page.person,
        )
        self.emitter.outbox.add(row)
        return row.key

    def _trace(self, alert: Alert) -> Url | None:
        """The alerted run's page in xihe's UI (its alerts and what resolved them), when configured."""
        base = self.config.public_base_url.rstrip("/")
        return checked_url(f"{base}/ui/runs/{alert.instance_id}") if base else None

    def _resolved_row(self, alert: Alert, now: datetime) -> str:
        same = alert.resolved_instance == alert.instance_id
        ctx = {
            "workflow": alert.workflow,
            "short": alert.short,
            "tier": alert.tier.value,
            "instance_id": alert.instance_id,
            "by_instance": alert.resolved_instance,
            "business_date": alert.business_date,
            "same": same,
            "failed_at": alert.fired_at,
            "seconds": duration_seconds(alert.fired_at, now),
            "rerun_by": self.name(alert.resolved_by) if alert.resolved_by else "",
            "acked_by": self.name(alert.acked_by) if alert.acked_by else "",
            "trace_url": self._trace(alert),
        }
        row = OutboxRow(
            f"resolved:{alert.id}:{epoch(alert.fired_at)}",
            "resolved",
            alert.tier.value,
            alert.channel,
            f"[xihe] resolved: {alert.short} {alert.workflow} #{alert.instance_id}",
            self.emitter.renderer_for(alert.channel).render("resolved.md.j2", ctx),
            now,
            now,
        )
        self.emitter.outbox.add(row)
        return row.key
