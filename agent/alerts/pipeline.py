"""The alert pipeline: `feed(event, now)` and `tick(now)` turn AlertEvents into outbox rows and records.

Per event: dedupe → classify (here) → tier → group (one pure decision each, each with a `Reason`),
then the decision is applied to the `AlertStateStore` (folding.py). Held instance messages and
windows come due in `tick(now)` (the scheduler's "flush alert windows" job; `feed` also flushes
what is due) and are rendered into the outbox by the `Emitter` (emit.py). All state is in the store
and the outbox, so a new Pipeline over the same stores continues without loss, and re-flushing
after a crash is harmless because outbox keys are unique.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from xihe.agent.alert_event import AlertEvent
from xihe.agent.alerts.classify import WorkflowIndex, classify, idempotency_key
from xihe.agent.alerts.emit import Emitter, OnCallLookup, is_p0
from xihe.agent.alerts.folding import Folding, record_of
from xihe.agent.alerts.grouping import epoch, instance_key
from xihe.agent.alerts.life import Lifecycle, Transition
from xihe.agent.alerts.lifestore import LifeStore
from xihe.agent.alerts.maintenance import MaintenanceBook
from xihe.agent.alerts.model import AlertRecord, Kind, Notification, Reason
from xihe.agent.alerts.notes import NoOrigins, Origins
from xihe.agent.alerts.outbox import Outbox
from xihe.agent.alerts.state import (
    NS_FP,
    NS_INSTANCE,
    NS_MAINT,
    NS_NODE,
    NS_P2,
    NS_SEEN,
    AlertStateStore,
    InstanceState,
    Window,
)

if TYPE_CHECKING:
    from xihe.config.alerts import AlertsConfig
    from xihe.config.workflows import WorkflowsConfig

log = logging.getLogger("xihe.alerts")


class RecordSink(Protocol):
    """Where records go (an `alert_event` table, or a list in a replay)."""

    def record(self, rec: AlertRecord) -> None:
        """Store one record."""


@dataclass(frozen=True)
class FeedResult:
    """What one feed or tick produced."""

    records: tuple[AlertRecord, ...] = ()
    notifications: tuple[Notification, ...] = ()
    transitions: tuple[Transition, ...] = ()  # alert lifecycle changes (fired, resolved, paged, expired)

    def __add__(self, other: FeedResult) -> FeedResult:
        return FeedResult(
            self.records + other.records,
            self.notifications + other.notifications,
            self.transitions + other.transitions,
        )


_EMPTY = FeedResult()


class Pipeline:
    """Decides and records; never sends. Construct per config load; call from the poller, webhook and scheduler."""

    def __init__(
        self,
        config: AlertsConfig,
        workflows: WorkflowsConfig,
        state: AlertStateStore,
        outbox: Outbox,
        book: MaintenanceBook | None = None,
        *,
        production: frozenset[str],
        markups: Mapping[str, str] | None = None,
        records: RecordSink | None = None,
        origins: Origins | None = None,
        life: LifeStore | None = None,
        oncall: OnCallLookup | None = None,
        names: Mapping[str, str] | None = None,
        holder: str = "",
    ) -> None:
        self.config = config
        self.index = WorkflowIndex.build(workflows, production)
        self.state = state
        self.outbox = outbox
        self.book = book if book is not None else MaintenanceBook.from_config(config)
        self.emitter = Emitter(config, self.index, outbox, origins or NoOrigins(), markups, oncall)
        self.folding = Folding(config, self.index, state, self.emitter)
        self.renderer = self.emitter.renderer_for("default")
        self.records = records
        self._memory = timedelta(hours=config.memory_hours)
        # The lifecycle (acknowledge, escalate, resolve) runs when a LifeStore is given.
        self.life = (
            Lifecycle(config, self.index, life, self.emitter, origins or NoOrigins(), oncall, names, holder)
            if life is not None
            else None
        )
        if life is not None:
            self.emitter.alert_short = lambda iid: a.short if (a := life.get(iid)) is not None else ""

    def set_maintenance(self, book: MaintenanceBook) -> None:
        """Swap in a new book after `/maint on|off` or a config reload."""
        self.book = book

    # ---- entry points -------------------------------------------------------------------------
    def feed(self, event: AlertEvent, now: datetime) -> FeedResult:
        """Process one event at `now`; returns its record(s) and any notification that came due."""
        return self.feed_batch((event,), now)

    def feed_batch(self, events: Iterable[AlertEvent], now: datetime, *, each: bool = False) -> FeedResult:
        """Process events reported together (e.g. one webhook post), then flush what is due.

        `each`: flush what came due between the events too, so they are decided exactly as if fed
        one by one at this `now` (the replay feeds the events of one simulated instant so, issue 30);
        a tick between two feeds at the same instant is what `feed` would have run first."""
        # close windows that ended before these events, so they do not reopen them
        before = self.tick(now)
        recs: list[AlertRecord] = []
        notes: list[Notification] = list(before.notifications) if before is not _EMPTY else []
        moves: list[Transition] = list(before.transitions) if before is not _EMPTY else []
        between = False
        for event in events:
            if between:
                flushed = self.tick(now)
                if flushed is not _EMPTY:
                    notes.extend(flushed.notifications)
                    moves.extend(flushed.transitions)
            between = each
            try:
                decided = self._decide(event, now, notes)
                recs.extend(decided)
                if self.life is not None:
                    moves.extend(self._lifecycle(event, decided, now))
            except Exception as exc:  # one event never stops the batch; the record says what broke
                recs.append(self._broken(event, now, exc))
        after = self.tick(now)
        if after is not _EMPTY:
            notes.extend(after.notifications)
            moves.extend(after.transitions)
        out = FeedResult(tuple(recs), tuple(notes), tuple(moves))
        if self.records is not None:
            for r in recs:
                self.records.record(r)
        return out

    @staticmethod
    def _broken(event: AlertEvent, now: datetime, exc: Exception) -> AlertRecord:
        """The record of an event the pipeline failed on (logged with its key)."""
        key = idempotency_key(event)
        log.exception("alert pipeline failed on event %s", key)
        return AlertRecord(
            now,
            key,
            event.instance_id,
            event.workflow,
            event.task_name,
            Reason.BAD_EVENT,
            None,
            f"internal error: {type(exc).__name__}: {exc}"[:500],
        )

    def record_bad(self, at: datetime, where: str, problem: str) -> AlertRecord:
        """Record an event that could not be used (bad JSON, missing field, unknown state)."""
        rec = AlertRecord(at, where, 0, "", "", Reason.BAD_EVENT, None, problem)
        if self.records is not None:
            self.records.record(rec)
        return rec

    def tick(self, now: datetime) -> FeedResult:
        """Flush held instance messages and ended windows due at `now`; expire old state; page the
        next escalation step of alerts nobody acknowledged."""
        moved = self.life.tick(now) if self.life is not None else None
        moves = tuple(moved) if moved else ()
        due = self.state.next_due()
        if due is None or due > now:  # the common case: nothing due; skip the generator
            return FeedResult((), (), moves) if moves else _EMPTY
        notes: list[Notification] = []
        for ns, key, value in self.state.pop_due(now):
            try:
                notes.extend(self._flush(ns, key, value, now))
            except Exception:  # one broken record never blocks the others; it is kept and retried
                log.exception("alert pipeline could not flush %s/%s", ns, key)
                self.state.put(ns, key, value, now + timedelta(minutes=1))
        return FeedResult((), tuple(notes), moves)

    def _lifecycle(self, event: AlertEvent, decided: list[AlertRecord], now: datetime) -> list[Transition]:
        """The alert of a final failure fires; a SUCCESS resolves the alerts it answers."""
        if self.life is None:
            return []
        if event.state == "SUCCESS":
            return self.life.succeeded(event, now)
        own = decided[-1] if decided else None  # it comes last (after those a node window absorbed)
        if own is not None and own.instance_id != event.instance_id:
            own = next((r for r in reversed(decided) if r.instance_id == event.instance_id), None)
        moved = self.life.failed(event, own, now) if own is not None else None
        return [moved] if moved is not None else []

    def _flush(self, ns: str, key: str, value: object, now: datetime) -> list[Notification]:
        """The message(s) a due record stands for (none for seen keys, host hits, sent instances)."""
        if ns == NS_INSTANCE and isinstance(value, InstanceState) and value.status in ("held", "more"):
            note_key = instance_key(value.instance_id, value.tier, value.channel, value.followups)
            note = self.emitter.emit(self.emitter.instance_note(value, now, note_key))
            self.state.put(ns, key, replace(value, status="sent"), now + self._memory)
            return [note]
        if ns == NS_FP and isinstance(value, Window) and value.folded > 0:
            return self.emitter.window(value, now, "aggregate.md.j2", Kind.AGGREGATE)
        if ns == NS_P2 and isinstance(value, Window) and value.instances:
            return self.emitter.window(value, now, "summary.md.j2", Kind.SUMMARY)
        if ns == NS_NODE and isinstance(value, Window) and value.announced is None:
            return self.folding.announce_due(value, now)
        if ns == NS_NODE and isinstance(value, Window) and len(value.instances) > value.named:
            # the follow-up names only the instances the node alert did not
            return self.emitter.window(value, now, "node.md.j2", Kind.NODE, "end", followup=True)
        if ns == NS_MAINT and isinstance(value, Window):
            return self.emitter.window(value, now, "maint.md.j2", Kind.MAINT)
        return []  # simply expires

    def close_maintenance(self, name: str, end: datetime, now: datetime) -> FeedResult:
        """A window closed early (`/maint off`): say now what it suppressed."""
        key = f"{name}|{epoch(end)}"
        w = self.state.get(NS_MAINT, key)
        if not isinstance(w, Window):
            return _EMPTY
        self.state.delete(NS_MAINT, key)
        return FeedResult(
            (), tuple(self.emitter.window(replace(w, ends_at=now), now, "maint.md.j2", Kind.MAINT))
        )

    def p0_workflows(self) -> list[tuple[str, str]]:
        """(project, workflow) of every configured workflow whose failures page (tier P0)."""
        return sorted(pw for pw in self.index.by_name if is_p0(self.index, pw[1]))

    def next_due(self) -> datetime | None:
        """When `tick` next has something to do (for simulations and a smart scheduler)."""
        state = self.state.next_due()
        page = self.life.next_due() if self.life is not None else None
        return state if page is None else page if state is None else min(state, page)

    # ---- intake ---------------------------------------------------------------------------------
    def _decide(self, event: AlertEvent, now: datetime, notes: list[Notification]) -> list[AlertRecord]:
        """Dedupe and classify one event; a final failure is folded (see `Folding`)."""
        st = self.state
        ekey = idempotency_key(event)
        if st.get(NS_SEEN, ekey) is not None:
            return [record_of(event, now, Reason.DUPLICATE_EVENT, ekey=ekey)]
        st.put(NS_SEEN, ekey, "1", now + self._memory)
        reason, detail = classify(event, self.book, now)
        if reason is Reason.MAINTENANCE:
            return [self.folding.suppress(event, now, detail, ekey, self.book)]
        if reason is not Reason.FINAL_FAILURE:
            return [record_of(event, now, reason, detail=detail, ekey=ekey)]
        return self.folding.final_failure(event, now, notes)
