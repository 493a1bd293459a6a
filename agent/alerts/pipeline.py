"""The alert pipeline: `feed(event, now)` and `tick(now)` turn AlertEvents into outbox rows and records.

Per event: dedupe → classify → tier → group (one pure decision each, each with a `Reason`), then
the decision is applied to the `AlertStateStore`. Held instance messages and windows come due in
`tick(now)` (the scheduler's "flush alert windows" job; `feed` also flushes what is due). All state
is in the store and the outbox, so a new Pipeline over the same stores continues without loss, and
re-flushing after a crash is harmless because outbox keys are unique.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from xihe.agent.alerts.classify import WorkflowIndex, classify, environment_of, idempotency_key, tier_for
from xihe.agent.alerts.event import AlertEvent
from xihe.agent.alerts.fingerprint import fingerprint
from xihe.agent.alerts.grouping import decide_group, epoch, instance_key, window_key
from xihe.agent.alerts.maintenance import MaintenanceBook
from xihe.agent.alerts.model import AlertRecord, Kind, Notification, Reason, Tier
from xihe.agent.alerts.notes import NoOrigins, Origins, instance_note, window_notes
from xihe.agent.alerts.notify import kind_markups
from xihe.agent.alerts.outbox import Outbox, OutboxRow
from xihe.agent.alerts.render import Renderer
from xihe.agent.alerts.state import (
    NS_FP,
    NS_HOST,
    NS_INSTANCE,
    NS_MAINT,
    NS_NODE,
    NS_P2,
    NS_SEEN,
    AlertStateStore,
    HostHits,
    InstanceState,
    Window,
    rank,
)
from xihe.config.alerts import AlertsConfig
from xihe.config.workflows import WorkflowsConfig

log = logging.getLogger("xihe.alerts")

MAX_TASKS = 20  # failed tasks kept per instance message; more are counted


class RecordSink(Protocol):
    """Where records go (an `alert_event` table, or a list in a replay)."""

    def record(self, rec: AlertRecord) -> None:
        """Store one record."""


@dataclass(frozen=True)
class FeedResult:
    """What one feed or tick produced."""

    records: tuple[AlertRecord, ...] = ()
    notifications: tuple[Notification, ...] = ()

    def __add__(self, other: FeedResult) -> FeedResult:
        return FeedResult(self.records + other.records, self.notifications + other.notifications)


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
    ) -> None:
        self.config = config
        self.index = WorkflowIndex.build(workflows, production)
        self.state = state
        self.outbox = outbox
        self.book = book if book is not None else MaintenanceBook.from_config(config)
        # Rendered before the outbox, in the markup of the notifier that serves the channel's kind.
        markup_of = kind_markups() if markups is None else markups
        self._markup = {name: markup_of[ch.kind] for name, ch in config.channels.items()}
        self._renderers = {
            m: Renderer(
                config.templates_dir or None, config.timezone, config.max_bytes, config.log_tail_chars, m
            )
            for m in set(self._markup.values())
        }
        self.renderer = self.renderer_for("default")
        self.records = records
        self.origins: Origins = origins or NoOrigins()
        self._memory = timedelta(hours=config.memory_hours)
        self._window = timedelta(minutes=config.window_minutes)
        self._storm = timedelta(minutes=config.node_storm.window_minutes)
        self._wait = timedelta(seconds=config.instance_wait_seconds)

    def set_maintenance(self, book: MaintenanceBook) -> None:
        """Swap in a new book after `/maint on|off` or a config reload."""
        self.book = book

    def _hold(self, tier: Tier) -> timedelta:
        """How long a new instance's message waits for its other tasks: P0 not at all."""
        return timedelta(0) if tier is Tier.P0 else self._wait

    # ---- entry points -------------------------------------------------------------------------
    def feed(self, event: AlertEvent, now: datetime) -> FeedResult:
        """Process one event at `now`; returns its record(s) and any notification that came due."""
        return self.feed_batch((event,), now)

    def feed_batch(self, events: Iterable[AlertEvent], now: datetime) -> FeedResult:
        """Process events reported together (e.g. one webhook post), then flush what is due."""
        before = self.tick(now)  # close windows that ended before these events, so they do not reopen them
        recs: list[AlertRecord] = []
        notes: list[Notification] = list(before.notifications)
        for event in events:
            try:
                recs.extend(self._decide(event, now, notes))
            except Exception as exc:  # one event never stops the batch; the record says what broke
                log.exception("alert pipeline failed on event %s", idempotency_key(event))
                recs.append(
                    AlertRecord(
                        now,
                        idempotency_key(event),
                        event.instance_id,
                        event.workflow,
                        event.task_name,
                        Reason.BAD_EVENT,
                        None,
                        f"internal error: {type(exc).__name__}: {exc}"[:500],
                    )
                )
        notes.extend(self.tick(now).notifications)
        out = FeedResult(tuple(recs), tuple(notes))
        if self.records is not None:
            for r in recs:
                self.records.record(r)
        return out

    def record_bad(self, at: datetime, where: str, problem: str) -> AlertRecord:
        """Record an event that could not be used (bad JSON, missing field, unknown state)."""
        rec = AlertRecord(at, where, 0, "", "", Reason.BAD_EVENT, None, problem)
        if self.records is not None:
            self.records.record(rec)
        return rec

    def tick(self, now: datetime) -> FeedResult:
        """Flush held instance messages and ended windows due at `now`; expire old state."""
        due = self.state.next_due()
        if due is None or due > now:
            return _EMPTY  # the common case: nothing due; skip the generator
        notes: list[Notification] = []
        for ns, key, value in self.state.pop_due(now):
            try:
                notes.extend(self._flush(ns, key, value, now))
            except Exception:  # one broken record never blocks the others; it is kept and retried
                log.exception("alert pipeline could not flush %s/%s", ns, key)
                self.state.put(ns, key, value, now + timedelta(minutes=1))
        return FeedResult((), tuple(notes))

    def _flush(self, ns: str, key: str, value: object, now: datetime) -> list[Notification]:
        """The message(s) a due record stands for (none for seen keys, host hits, sent instances)."""
        if ns == NS_INSTANCE and isinstance(value, InstanceState) and value.status in ("held", "more"):
            note_key = instance_key(value.instance_id, value.tier, value.channel, value.followups)
            note = self._emit(self._instance_note(value, now, note_key))
            self.state.put(ns, key, replace(value, status="sent"), now + self._memory)
            return [note]
        if ns == NS_FP and isinstance(value, Window) and value.folded > 0:
            return self._emit_window(value, now, "aggregate.md.j2", Kind.AGGREGATE)
        if ns == NS_P2 and isinstance(value, Window):
            return self._emit_window(value, now, "summary.md.j2", Kind.SUMMARY)
        if ns == NS_NODE and isinstance(value, Window) and value.folded > 0:
            return self._emit_window(value, now, "node.md.j2", Kind.NODE, "end", followup=True)
        if ns == NS_MAINT and isinstance(value, Window):
            return self._emit_window(value, now, "maint.md.j2", Kind.MAINT)
        return []  # simply expires

    def close_maintenance(self, name: str, end: datetime, now: datetime) -> FeedResult:
        """A window closed early (`/maint off`): say now what it suppressed."""
        key = f"{name}|{epoch(end)}"
        w = self.state.get(NS_MAINT, key)
        if not isinstance(w, Window):
            return _EMPTY
        self.state.delete(NS_MAINT, key)
        return FeedResult(
            (), tuple(self._emit_window(replace(w, ends_at=now), now, "maint.md.j2", Kind.MAINT))
        )

    def p0_workflows(self) -> list[tuple[str, str]]:
        """(project, workflow) of every configured workflow whose failures page (tier P0)."""
        return sorted(pw for pw in self.index.by_name if self._is_p0(pw[1]))

    def next_due(self) -> datetime | None:
        """When `tick` next has something to do (for simulations and a smart scheduler)."""
        return self.state.next_due()

    # ---- decisions applied ----------------------------------------------------------------------
    def _record(
        self,
        event: AlertEvent,
        now: datetime,
        reason: Reason,
        tier: Tier | None = None,
        detail: str = "",
        target: str = "",
        ekey: str = "",
    ) -> AlertRecord:
        return AlertRecord(
            now,
            ekey or idempotency_key(event),
            event.instance_id,
            event.workflow,
            event.task_name,
            reason,
            tier,
            detail,
            target,
        )

    def _decide(self, event: AlertEvent, now: datetime, notes: list[Notification]) -> list[AlertRecord]:
        st = self.state
        ekey = idempotency_key(event)
        if st.get(NS_SEEN, ekey) is not None:
            return [self._record(event, now, Reason.DUPLICATE_EVENT, ekey=ekey)]
        st.put(NS_SEEN, ekey, "1", now + self._memory)
        reason, detail = classify(event, self.book, now)
        if reason is Reason.MAINTENANCE:
            return [self._suppress(event, now, detail, ekey)]
        if reason is not Reason.FINAL_FAILURE:
            return [self._record(event, now, reason, detail=detail, ekey=ekey)]
        wf = self.index.find(event)
        tier, tier_reason = tier_for(event, wf, self.index.production)
        channel = wf.channel if wf is not None and wf.channel in self.config.channels else "default"
        mentions = tuple(wf.oncall) if wf is not None and tier is Tier.P0 else ()
        fp = fingerprint(event.error, event.workflow, event.task_name)
        iid = str(event.instance_id)
        inst = st.get(NS_INSTANCE, iid)
        hits = st.get(NS_HOST, event.host) if event.host else None
        node = st.get(NS_NODE, event.host) if event.host else None
        fp_key = f"{fp}|{channel}"
        fpw = st.get(NS_FP, fp_key)
        assert inst is None or isinstance(inst, InstanceState)
        assert hits is None or isinstance(hits, HostHits)
        assert node is None or isinstance(node, Window)
        assert fpw is None or isinstance(fpw, Window)
        g = decide_group(event, tier, now, self.config, inst, hits, node, fpw)
        why = f"{tier_reason.value}; fingerprint {fp}"

        if g is Reason.JOINED_INSTANCE or g is Reason.INSTANCE_ALREADY_NOTIFIED:
            assert inst is not None
            return [self._join(inst, event, g, now, why)]

        if g is Reason.NODE_STORM:
            assert node is not None
            node = node.add(event, tier, mentions, folded=True)
            target = window_key(node, "end")
            if node.announced is not None and rank(tier) < rank(node.announced):
                # a higher tier joined a storm announced lower: say so now, at the new tier
                node = replace(node, announced=tier, escalations=node.escalations + 1)
                target = window_key(node, f"up{node.escalations}")
                notes.extend(
                    self._emit_window(
                        node, now, "node.md.j2", Kind.NODE, f"up{node.escalations}", escalated=True
                    )
                )
            st.put(NS_NODE, event.host, node, node.ends_at)
        elif g is Reason.NODE_STORM_OPENED:
            node = self._open_storm(event, tier, mentions, hits, now, notes)
            target = window_key(node)
        elif g is Reason.AGGREGATED_P2:
            p2 = st.get(NS_P2, channel)
            assert p2 is None or isinstance(p2, Window)
            if p2 is None or p2.ends_at <= now:
                p2 = Window("p2", channel, channel, now, now + self._window, event, top_tier=Tier.P2)
            p2 = p2.add(event, tier, (), folded=True)
            st.put(NS_P2, channel, p2, p2.ends_at)
            target = window_key(p2)
        elif g is Reason.FINGERPRINT_REPEAT:
            assert fpw is not None
            fpw = fpw.add(event, tier, mentions if self.config.fold_p0 else (), folded=True)
            st.put(NS_FP, fp_key, fpw, fpw.ends_at)
            target = window_key(fpw)
        else:  # NEW_INSTANCE
            if fpw is None or fpw.ends_at <= now:
                fpw = Window("fp", fp_key, channel, now, now + self._window, event, top_tier=tier)
            fpw = fpw.add(event, tier, (), folded=False)
            st.put(NS_FP, fp_key, fpw, fpw.ends_at)
            target = instance_key(event.instance_id, tier, channel)
            st.put(
                NS_INSTANCE,
                iid,
                InstanceState(event.instance_id, "held", tier, channel, now, (event,), target, fpw.ends_at),
                now + self._hold(tier),
            )
        if g is not Reason.NEW_INSTANCE:
            st.put(
                NS_INSTANCE,
                iid,
                InstanceState(event.instance_id, "folded", tier, channel, now, (event,), target),
                now + self._memory,
            )
        if event.host and g not in (Reason.NODE_STORM, Reason.NODE_STORM_OPENED):
            since = now - self._storm
            kept = tuple(h for h in hits.hits if h[0] > since) if hits is not None else ()
            st.put(
                NS_HOST,
                event.host,
                HostHits(event.host, (*kept, (now, event.instance_id))),
                now + self._storm,
            )
        return [self._record(event, now, g, tier, why, target)]

    def _join(
        self, inst: InstanceState, event: AlertEvent, g: Reason, now: datetime, why: str
    ) -> AlertRecord:
        """Another final event of an instance already known: held → joins; sent → a follow-up if new."""
        st, iid = self.state, str(inst.instance_id)
        known = {e.task_name for e in inst.events}
        new_task = bool(event.task_name) and event.task_name not in known
        if inst.status == "held" or (inst.status == "more" and new_task):
            joined = (
                replace(inst, events=(*inst.events, event))
                if len(inst.events) < MAX_TASKS
                else replace(inst, extra_tasks=inst.extra_tasks + 1)
            )
            due = inst.opened_at + self._hold(inst.tier) if inst.status == "held" else now + self._wait
            st.put(NS_INSTANCE, iid, joined, max(due, now))
            target = instance_key(inst.instance_id, inst.tier, inst.channel, inst.followups)
            return self._record(
                event, now, Reason.JOINED_INSTANCE, inst.tier, f"{why}; instance {inst.status}", target
            )
        if inst.status == "sent" and new_task and len(inst.events) < MAX_TASKS:
            # a task that failed after the message went out: one follow-up collects it (and any more)
            more = replace(inst, status="more", events=(*inst.events, event), followups=inst.followups + 1)
            st.put(NS_INSTANCE, iid, more, now + self._wait)
            target = instance_key(inst.instance_id, inst.tier, inst.channel, more.followups)
            return self._record(event, now, Reason.JOINED_INSTANCE, inst.tier, f"{why}; follow-up", target)
        return self._record(event, now, g, inst.tier, f"{why}; instance {inst.status}", inst.target)

    def _suppress(self, event: AlertEvent, now: datetime, detail: str, ekey: str) -> AlertRecord:
        """A final failure inside a maintenance window: counted in that window's end-of-window list."""
        found = self.book.covering(now, event)
        wf = self.index.find(event)
        tier, _why = tier_for(event, wf, self.index.production)
        if found is None:  # the book changed between classify and here: record only
            return self._record(event, now, Reason.MAINTENANCE, tier, detail, ekey=ekey)
        name, end = found
        key = f"{name}|{epoch(end)}"
        w = self.state.get(NS_MAINT, key)
        assert w is None or isinstance(w, Window)
        channel = wf.channel if wf is not None and wf.channel in self.config.channels else "default"
        if w is None:
            w = Window("maint", key, channel, now, end, event, top_tier=Tier.P2)
        if event.instance_id not in w.instances:
            w = w.add(event, tier, (), folded=True)
        self.state.put(NS_MAINT, key, w, end)
        return self._record(event, now, Reason.MAINTENANCE, tier, detail, window_key(w), ekey)

    def _open_storm(
        self,
        event: AlertEvent,
        tier: Tier,
        mentions: tuple[str, ...],
        hits: HostHits | None,
        now: datetime,
        notes: list[Notification],
    ) -> Window:
        """Open a suspect-node window over the host's recent failures and emit its alert now.

        Held instance messages of that host still go out (their records already name them); the
        node alert takes the highest tier among its instances."""
        st = self.state
        ns_cfg = self.config.node_storm
        node = Window("node", event.host, ns_cfg.channel, now, now + self._storm, event, top_tier=Tier.P2)
        since = now - self._storm
        for at, iid in hits.hits if hits is not None else ():
            if at <= since:
                continue
            inst = st.get(NS_INSTANCE, str(iid))
            if not isinstance(inst, InstanceState):
                continue
            first = inst.events[0]
            wf = self.index.find(first)
            node = node.add(
                first,
                inst.tier,
                tuple(wf.oncall) if wf is not None and inst.tier is Tier.P0 else (),
                folded=False,
            )
        node = node.add(event, tier, mentions, folded=False)
        node = replace(node, announced=node.top_tier)
        st.delete(NS_HOST, event.host)  # these hits are spent on this storm
        st.put(NS_NODE, event.host, node, node.ends_at)
        notes.extend(self._emit_window(node, now, "node.md.j2", Kind.NODE))
        return node

    # ---- notifications --------------------------------------------------------------------------
    def renderer_for(self, channel: str) -> Renderer:
        """The renderer of `channel`'s notifier markup (an unknown channel is rendered as "default")."""
        return self._renderers[self._markup.get(channel, self._markup["default"])]

    def _emit(self, note: Notification) -> Notification:
        self.outbox.add(OutboxRow.of(note))  # a duplicate key (re-flush after a crash) is a no-op
        return note

    def _instance_note(self, inst: InstanceState, now: datetime, key: str) -> Notification:
        first = inst.events[0]
        wf = self.index.find(first)
        origin = self.origins.find(inst.instance_id)
        return instance_note(
            self.renderer_for(inst.channel),
            self.config,
            inst,
            wf,
            environment_of(first, wf),
            origin,
            now,
            key,
        )

    def _emit_window(
        self,
        w: Window,
        now: datetime,
        template: str,
        kind: Kind,
        suffix: str = "",
        followup: bool = False,
        escalated: bool = False,
    ) -> list[Notification]:
        tier = Tier.P2 if w.kind == "p2" else w.top_tier
        extra: dict[str, Any] = {
            "followup": followup,
            "escalated": escalated,
            "window_minutes": self.config.node_storm.window_minutes,
            "window_name": w.key.split("|")[0],
            "p0_list": [],
        }
        if kind is Kind.MAINT:
            extra["p0_list"] = [n for n, _c in w.workflows if self._is_p0(n)]
            tier = Tier.P0 if extra["p0_list"] else Tier.P1
        notes = window_notes(
            self.renderer_for(w.channel), w, tier, now, template, kind, window_key(w, suffix), extra
        )
        return [self._emit(n) for n in notes]

    def _is_p0(self, workflow: str) -> bool:
        wf = next((w for (_p, name), w in self.index.by_name.items() if name == workflow), None)
        if wf is None:
            return False
        tier, _r = tier_for(
            AlertEvent(at=datetime.min, workflow=workflow, instance_id=0, state="FAILURE"),
            wf,
            self.index.production,
        )
        return tier is Tier.P0
