"""The alert pipeline of one bot process, over the shared SQL stores: what `deps.alerts` is.

    feed(events)          the DolphinScheduler feature hands over AlertEvents → records (why each went where)
    tick()                the "flush alert windows" job: held messages and ended windows → outbox
    deliver()             the "deliver outbox" job: robot (20/min), retries, e-mail fallback; every attempt audited
    raise_alert(...)      a message the model asked for (tool send_wecom_alert), through the same outbox
    maintenance_on/off    `/maint` windows, stored, audited, seen by every replica on its next feed

Decisions stay in `xihe.agent.alerts.pipeline` (pure per event); this class only opens the unit of work,
reads the clock once per call, and writes audit rows and metrics.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import datetime

from xihe.agent.alert_event import AlertEvent
from xihe.agent.alerts.ackers import may_ack, rotation_people
from xihe.agent.alerts.deliver import Deliverer
from xihe.agent.alerts.life import Transition
from xihe.agent.alerts.lifecycle import Alert, Why
from xihe.agent.alerts.maint_notice import Phase, covered_channels, notice_context, notice_rows
from xihe.agent.alerts.maintenance import (
    MaintenanceBook,
    MaintenanceWindow,
    MaintOff,
    MaintOn,
    MaintScope,
    apply_maint_command,
)
from xihe.agent.alerts.manual import manual_row
from xihe.agent.alerts.model import AlertRecord
from xihe.agent.alerts.notes import RunOrigin
from xihe.agent.alerts.notify import channel_notifiers
from xihe.agent.alerts.notify.base import Attempt
from xihe.agent.alerts.notify.email import make_mail
from xihe.agent.alerts.pipeline import FeedResult, Pipeline
from xihe.agent.alerts.sql.channel import SqlChannelHealth
from xihe.agent.alerts.sql.life import SqlLifeStore
from xihe.agent.alerts.sql.maintenance import SqlMaintenanceStore
from xihe.agent.alerts.sql.outbox import SqlOutbox
from xihe.agent.alerts.sql.ratelimit import SqlRateLimiter
from xihe.agent.alerts.sql.records import SqlRecordSink
from xihe.agent.alerts.sql.state import SqlAlertStateStore
from xihe.agent.alerts.sql.stores import SqlAlertStores
from xihe.agent.audit import AuditEvent
from xihe.agent.deps import Deps
from xihe.agent.timefmt import show
from xihe.config.alerts import AlertsConfig
from xihe.config.oncall import ONCALL_SECTION
from xihe.config.workflows import Workflow, WorkflowsConfig

log = logging.getLogger("xihe.alerts")


@dataclass(frozen=True)
class MaintChange:
    """What a `/maint on|off` did: windows opened and closed, with their numbers."""

    opened: tuple[tuple[int, MaintenanceWindow], ...] = ()
    closed: tuple[str, ...] = ()


class ProvidedOrigins:
    """The origins of runs the bot started, as the DolphinScheduler feature provides them
    (`deps.origins`, set once every feature is installed); none while it provides none."""

    def __init__(self, deps: Deps) -> None:
        self.deps = deps

    def find(self, instance_id: int) -> RunOrigin | None:
        """The origin of `instance_id`, or None."""
        origins = self.deps.origins
        return origins.find(instance_id) if origins is not None else None


class ProvidedOnCall:
    """Who is on call, as the on-call feature provides it (`deps.oncall`, rotations and overrides);
    without it, the workflow's own `oncall` list."""

    def __init__(self, deps: Deps) -> None:
        self.deps = deps

    def __call__(self, wf: Workflow, at: datetime) -> tuple[str | None, str | None]:
        lookup = self.deps.oncall
        if lookup is not None:
            return lookup(wf, at)
        return (wf.oncall[0] if wf.oncall else None, wf.oncall[1] if len(wf.oncall) > 1 else None)


@dataclass(frozen=True)
class AckResult:
    """What `/ack` did: the alert it named (None: none found), and whether it moved."""

    alert: Alert | None
    why: Why | None = None
    refused: str = ""  # the workflow team when the caller may not acknowledge it (ackers.py); else ""


class AlertService:
    """Pipeline + deliverer over SQL stores, for one process; safe to share between replicas."""

    def __init__(
        self,
        deps: Deps,
        config: AlertsConfig,
        workflows: WorkflowsConfig,
        *,
        production: frozenset[str],
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        self.deps = deps
        self.config = config
        self.stores = SqlAlertStores(deps.engine)
        self.state = SqlAlertStateStore(self.stores, deps.clock)
        self.outbox = SqlOutbox(self.stores)
        self.maint = SqlMaintenanceStore(self.stores)
        self.health = SqlChannelHealth(self.stores)
        self.records = SqlRecordSink(self.stores, deps.holder)
        self.life = SqlLifeStore(self.stores)
        self._base_book = MaintenanceBook.from_config(config)  # YAML windows; chat ones join per call
        self.pipeline = Pipeline(
            config,
            workflows,
            self.state,
            self.outbox,
            self._base_book,
            production=production,
            records=self.records,
            origins=ProvidedOrigins(deps),
            life=self.life,
            oncall=ProvidedOnCall(deps),
            names={uid: u.name for uid, u in deps.settings.access.users.items() if u.name},
            holder=deps.holder,
        )
        self.deliverer = Deliverer(
            config,
            self.outbox,
            channel_notifiers(config, os.environ).values(),
            make_mail(config),
            SqlRateLimiter(self.stores),
            owner=deps.holder,
            sleep=sleep,
            health=self.health,
            clock=deps.clock,
        )

    # ---- the pipeline ----------------------------------------------------------------------------
    def _book(self, now: datetime) -> MaintenanceBook:
        chat = tuple(w for w in self.maint.load(since=now) if w.source == "chat")
        return replace(self._base_book, windows=self._base_book.windows + chat)

    def feed(self, events: Iterable[AlertEvent], bad: Iterable[tuple[str, str]] = ()) -> list[AlertRecord]:
        """Decide a batch of events (one poll, scan or webhook post); returns a record per event.

        Each (where, problem) in `bad` (items the webhook could not use) is recorded as a bad event,
        and the rest of the batch goes on."""
        now = self.deps.clock()
        good = list(events)
        problems = list(bad)
        if not good and not problems:
            return []
        with self.stores.unit():
            self.pipeline.set_maintenance(self._book(now))
            rejected = [self.pipeline.record_bad(now, where, why) for where, why in problems]
            result = self.pipeline.feed_batch(good, now) if good else FeedResult()
        for where, why in problems:
            log.warning("alert event %s not usable: %s", where, why)
        result = FeedResult(tuple(rejected), ()) + result
        self._count(result)
        self._audit_life(result.transitions)
        return list(result.records)

    def tick(self) -> FeedResult:
        """Close what came due (held instance messages, ended windows) and audit expired maintenance."""
        now = self.deps.clock()
        self._announce_config_windows(now)
        for number, window in self.maint.expire_due(now):
            self._audit_maint(now, "expired", "system", number, window)
            self._maint_notice("end", now, number, window)
        with self.stores.unit():
            self.pipeline.set_maintenance(self._book(now))
            result = self.pipeline.tick(now)
        self._count(result)
        self._audit_life(result.transitions)
        return result

    def _count(self, result: FeedResult) -> None:
        for rec in result.records:
            self.deps.metrics.alerts.labels(rec.reason.value).inc()
        if result.notifications:
            self.deps.metrics.alerts.labels("queued").inc(len(result.notifications))

    # ---- the lifecycle ------------------------------------------------------------------------------
    def acknowledge(self, ref: str, who: str, conversation: str) -> AckResult:
        """`/ack [ID]`: acknowledge the alert `ref` names (its instance id or short id; "" = the newest
        open alert of the channels read in `conversation`, or of all channels), audited; refused
        (and the refusal audited) unless `who` may acknowledge it (ackers.py)."""
        life = self.pipeline.life
        assert life is not None
        now = self.deps.clock()
        channels = [name for name, ch in self.config.channels.items() if conversation in ch.conversations]
        with self.stores.unit():
            alert = life.find(ref, channels or None)
            if alert is None:
                return AckResult(None)
            wf = life.workflow(alert, now)
            team = wf.team if wf is not None else ""
            right = may_ack(
                who,
                listed=self.deps.settings.access.users,
                rotation=rotation_people(self.deps.settings.get(ONCALL_SECTION), team),
                chain={p for _s, p in life.chain_of(alert, now)} | set(wf.oncall if wf is not None else ()),
            )
            if right.allowed:
                moved, why = life.acknowledge(alert, who, now)
        if not right.allowed:
            self._audit_refusal(alert, who, now)
            return AckResult(alert, refused=team or "-")
        if moved is not None:
            self._audit_life([moved])
            return AckResult(moved.alert, why)
        return AckResult(alert, why)

    def _audit_refusal(self, a: Alert, who: str, now: datetime) -> None:
        self.deps.audit.record(
            AuditEvent(
                at=now,
                kind="alert_life",
                actor=who,
                outcome="denied",
                tool="/ack",
                reason=f"{a.short} {a.workflow} #{a.instance_id}: not in access.yaml, the team's rotation "
                "or the escalation chain",
                external_ids={"instance_id": a.instance_id, "alert_id": a.id},
            )
        )

    def _audit_life(self, moves: Iterable[Transition]) -> None:
        """Every lifecycle change: an audit row (kind `alert_life`) and a record on the alert's instance."""
        for t in moves:
            a = t.alert
            self.deps.audit.record(
                AuditEvent(
                    at=t.at,
                    kind="alert_life",
                    actor=t.actor if t.why in (Why.ACKED,) else self.deps.holder,
                    outcome=t.why.value,
                    tool="/ack" if t.why is Why.ACKED else "alerts",
                    reason=f"{a.short} {a.workflow} #{a.instance_id} {a.tier.value} → {a.state}",
                    external_ids={"instance_id": a.instance_id, "alert_id": a.id},
                    detail=t.to_dict(),
                )
            )
            detail = f"{a.short} #{a.instance_id} {a.state} {t.actor}".strip()
            self.records.note(t.at, f"life_{t.why.value}", t.key, detail, a.tier.value, a.instance_id)
            self.deps.metrics.alerts.labels(f"life_{t.why.value}").inc()

    # ---- delivery ----------------------------------------------------------------------------------
    def deliver(self) -> list[Attempt]:
        """Send what is due; every attempt is audited (HTTP status and body, key redacted)."""
        now = self.deps.clock()
        attempts = self.deliverer.run_once(now)
        red = self.deps.redactor
        for a in attempts:
            raw = a.to_dict()
            raw["outbox_key"] = raw.pop("key")  # a field named "key" would be masked as a secret
            detail = red.data(raw)
            self.deps.audit.record(
                AuditEvent(
                    at=now,
                    kind="alert_push",
                    actor=self.deps.holder,
                    outcome="sent" if a.ok else "failed",
                    tool=self.deliverer.channel(a.channel).kind if a.via == "robot" else "email",
                    reason=red.text(a.error) or None,
                    external_ids={"outbox_key": a.key},
                    detail=detail,
                )
            )
            self.records.delivery(replace(a, error=red.text(a.error)))
            self.deps.metrics.alerts.labels(f"{'sent' if a.ok else 'failed'}_{a.via}").inc()
        self.deps.metrics.queue.labels("alert_outbox").set(self.outbox.pending_count())
        return attempts

    # ---- a message the model raises ----------------------------------------------------------------
    def raise_alert(
        self, key: str, channel: str, title: str, body: str, mentions: Iterable[str], actor: str
    ) -> tuple[str, bool]:
        """Queue a model-written message under outbox key `key`; (key, True if new)."""
        now = self.deps.clock()
        row = manual_row(key, channel, title, body, tuple(mentions), now, self.config.max_bytes)
        with self.stores.unit():
            added = self.outbox.add(row)
            if added:
                self.records.note(now, "manual", row.key, f"raised by {actor}: {title[:200]}", row.tier)
        return row.key, added

    # ---- maintenance -------------------------------------------------------------------------------
    def open_windows(self, now: datetime) -> list[tuple[int, MaintenanceWindow]]:
        """Chat windows not yet ended, with their numbers."""
        return [(n, w) for n, w in self.maint.numbered(now) if w.source == "chat"]

    def _announce_config_windows(self, now: datetime) -> None:
        """An alerts.yaml window (fixed, or a cron schedule's occurrence) that came into force is
        announced like `/maint on`, once: the occurrence is stored (source `yaml`), so its end is
        announced by the same expiry as a chat window's, whichever replica sees it."""
        for w in self._base_book.config_occurrences(now):
            with self.stores.unit():
                if self.maint.number_of(w.id) is not None:
                    continue
                self.maint.save(replace(w, created_by="alerts.yaml"))
                n = self.maint.number_of(w.id) or 0
            self._audit_maint(now, "on", "alerts.yaml", n, w)
            self._maint_notice("on", now, n, replace(w, created_by="alerts.yaml"))

    def config_windows(self, now: datetime) -> list[tuple[str, MaintScope, datetime]]:
        """alerts.yaml windows in force at `now`: (name, scope, end)."""
        return self._base_book.config_windows(now)

    def apply_maint(self, cmd: MaintOn | MaintOff, actor: str, number: int | None = None) -> MaintChange:
        """Store a parsed `/maint on|off` (closing window `number` when given) and audit it."""
        now = self.deps.clock()
        if isinstance(cmd, MaintOn):
            self.maint.save(cmd.window)
            n = self.maint.number_of(cmd.window.id) or 0
            self._audit_maint(now, "on", actor, n, cmd.window)
            self._maint_notice("on", now, n, cmd.window)
            return MaintChange(opened=((n, cmd.window),))
        open_now = self.open_windows(now)
        if number is not None:
            targets = [w.id for n, w in open_now if n == number and w.source == "chat"]
        else:
            book = MaintenanceBook(tuple(w for _n, w in open_now))
            _book, _added, targets = apply_maint_command(book, cmd, now)
        closed = self.maint.close(targets, now, actor)
        for n, w in open_now:
            if w.id in closed:
                self._audit_maint(now, "off", actor, n, w)
                self._maint_notice("end", now, n, replace(w, end=now), closed_by=actor)
                with self.stores.unit():
                    self._count(self.pipeline.close_maintenance(w.note or w.id, w.end, now))
        return MaintChange(closed=tuple(closed))

    def covered_channels(self, window: MaintenanceWindow) -> list[str]:
        """The alert channels a window silences (where its notices go)."""
        return covered_channels(window, self.pipeline.index.by_name.values(), self.config.channels)

    def _maint_notice(
        self, phase: Phase, now: datetime, number: int, w: MaintenanceWindow, closed_by: str = ""
    ) -> None:
        """Queue the notice of a window opening or ending to every channel it covers (once per
        window, phase and channel, whichever replica queues it)."""
        context = notice_context(number, w, self.p0_covered(w))
        if phase == "end":
            # an alerts.yaml schedule recurs under one name: count only this occurrence's failures
            during = (w.start, w.end) if w.source == "yaml" else None
            context |= {
                "suppressed": self.records.suppressed_in(w.note or w.id, during),
                "closed_by": closed_by,
            }
        renderers = {ch: self.pipeline.emitter.renderer_for(ch) for ch in self.covered_channels(w)}
        with self.stores.unit():
            for row in notice_rows(phase, renderers, context, now):
                if self.outbox.add(row):
                    self.records.note(now, f"maint_{phase}", row.key, row.subject, row.tier)

    def p0_covered(self, window: MaintenanceWindow) -> list[str]:
        """Configured P0 workflows a window would silence (for a host scope: every P0 that may run there)."""
        return [
            f"{project}/{name}"
            for project, name in self.pipeline.p0_workflows()
            if window.scope.kind in ("all", "host")
            or window.scope.covers(
                AlertEvent(at=window.start, workflow=name, instance_id=0, state="FAILURE", project=project)
            )
        ]

    def _audit_maint(
        self, now: datetime, outcome: str, actor: str, number: int, w: MaintenanceWindow
    ) -> None:
        tz = self.deps.settings.core.timezone
        self.deps.audit.record(
            AuditEvent(
                at=now,
                kind="maintenance",
                actor=actor,
                outcome=outcome,
                tool="/maint",
                reason=f"window #{number} {w.scope} {show(w.start, tz, seconds=False)} – {show(w.end, tz, seconds=False)}",
                external_ids={"maintenance_id": number},
                detail=w.to_dict(),
            )
        )
