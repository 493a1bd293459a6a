"""The alert pipeline: `feed(event, now)` and `tick(now)` turn FailureEvents into outbox rows and records.

Per event: dedupe → classify → tier → group (one pure decision each, each with a `Reason`), then
the decision is applied to the `AlertStateStore`. Held instance messages and windows come due in
`tick(now)` (the scheduler's "flush alert windows" job; `feed` also flushes what is due). All state
is in the store and the outbox, so a new Pipeline over the same stores continues without loss, and
re-flushing after a crash is harmless because outbox keys are unique.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from agent.alerts.classify import WorkflowIndex, classify, environment_of, idempotency_key, tier_for
from agent.alerts.fingerprint import fingerprint
from agent.alerts.maintenance import MaintenanceBook
from agent.alerts.model import AlertRecord, Kind, Notification, Reason, Tier
from agent.alerts.outbox import Outbox, OutboxRow
from agent.alerts.render import Renderer, duration_seconds
from agent.alerts.state import (
    NS_FP,
    NS_HOST,
    NS_INSTANCE,
    NS_NODE,
    NS_P2,
    NS_SEEN,
    AlertStateStore,
    HostHits,
    InstanceState,
    Window,
)
from agent.events import FailureEvent
from config.alerts import AlertsConfig
from config.workflows import WorkflowsConfig

MAX_TASKS = 20  # failed tasks kept per instance message; more are counted


class RecordSink(Protocol):
    """Where records go (the lead: an `alert_event` table or the audit log)."""

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


def decide_group(
    event: FailureEvent,
    tier: Tier,
    now: datetime,
    config: AlertsConfig,
    instance: InstanceState | None,
    hits: HostHits | None,
    node: Window | None,
    fp_window: Window | None,
) -> Reason:
    """Where a final failure goes: its instance, a node storm, the P2 summary, a fingerprint window, or new."""
    if instance is not None:
        return Reason.JOINED_INSTANCE if instance.status == "held" else Reason.INSTANCE_ALREADY_NOTIFIED
    if event.host:
        if node is not None and node.ends_at > now:
            return Reason.NODE_STORM
        since = now - timedelta(minutes=config.node_storm.window_minutes)
        recent = sum(1 for at, _i in hits.hits if at > since) if hits is not None else 0
        if recent + 1 >= config.node_storm.threshold:
            return Reason.NODE_STORM_OPENED
    if tier is Tier.P2:
        return Reason.AGGREGATED_P2
    if fp_window is not None and fp_window.ends_at > now and (tier is not Tier.P0 or config.fold_p0):
        return Reason.FINGERPRINT_REPEAT
    return Reason.NEW_INSTANCE


def _epoch(t: datetime) -> int:
    return int(t.timestamp())


def instance_key(instance_id: int, tier: Tier, channel: str) -> str:
    """Outbox key of an instance message."""
    return f"inst:{instance_id}:{tier.value}:{channel}"


def window_key(w: Window, followup: bool = False) -> str:
    """Outbox key of a window's message (one per window and tier and channel)."""
    prefix = {"fp": "fp", "p2": "p2", "node": "node"}[w.kind]
    ident = w.key.split("|")[0]
    tier = Tier.P2 if w.kind == "p2" else w.top_tier
    return f"{prefix}:{ident}:{_epoch(w.opened_at)}{':end' if followup else ''}:{tier.value}:{w.channel}"


class Pipeline:
    """Decides and records; never sends. Construct per config load; call from the poller, webhook and scheduler."""

    def __init__(
        self,
        config: AlertsConfig,
        workflows: WorkflowsConfig,
        state: AlertStateStore,
        outbox: Outbox,
        book: MaintenanceBook | None = None,
        renderer: Renderer | None = None,
        records: RecordSink | None = None,
    ) -> None:
        self.config = config
        self.index = WorkflowIndex.build(workflows)
        self.state = state
        self.outbox = outbox
        self.book = book if book is not None else MaintenanceBook.from_config(config)
        self.renderer = renderer or Renderer(
            config.templates_dir or None, config.timezone, config.max_bytes, config.log_tail_chars
        )
        self.records = records
        self._memory = timedelta(hours=config.memory_hours)
        self._window = timedelta(minutes=config.window_minutes)
        self._storm = timedelta(minutes=config.node_storm.window_minutes)
        self._wait = timedelta(seconds=config.instance_wait_seconds)

    def set_maintenance(self, book: MaintenanceBook) -> None:
        """Swap in a new book after `/maint on|off` or a config reload."""
        self.book = book

    # ---- entry points -------------------------------------------------------------------------
    def feed(self, event: FailureEvent, now: datetime) -> FeedResult:
        """Process one event at `now`; returns its record(s) and any notification that came due."""
        return self.feed_batch((event,), now)

    def feed_batch(self, events: Iterable[FailureEvent], now: datetime) -> FeedResult:
        """Process events reported together (e.g. one webhook post), then flush what is due."""
        before = self.tick(now)  # close windows that ended before these events, so they do not reopen them
        recs: list[AlertRecord] = []
        notes: list[Notification] = list(before.notifications)
        for event in events:
            recs.extend(self._decide(event, now, notes))
        notes.extend(self.tick(now).notifications)
        out = FeedResult(tuple(recs), tuple(notes))
        if self.records is not None:
            for r in recs:
                self.records.record(r)
        return out

    def tick(self, now: datetime) -> FeedResult:
        """Flush held instance messages and ended windows due at `now`; expire old state."""
        due = self.state.next_due()
        if due is None or due > now:
            return _EMPTY  # the common case: nothing due; skip the generator
        notes: list[Notification] = []
        for ns, key, value in self.state.pop_due(now):
            if ns == NS_INSTANCE and isinstance(value, InstanceState) and value.status == "held":
                notes.append(self._emit(self._instance_note(value, now)))
                self.state.put(ns, key, replace(value, status="sent"), now + self._memory)
            elif ns == NS_FP and isinstance(value, Window) and value.folded > 0:
                notes.append(self._emit(self._window_note(value, now, "aggregate.md.j2", Kind.AGGREGATE)))
            elif ns == NS_P2 and isinstance(value, Window):
                notes.append(self._emit(self._window_note(value, now, "summary.md.j2", Kind.SUMMARY)))
            elif ns == NS_NODE and isinstance(value, Window) and value.folded > 0:
                notes.append(
                    self._emit(self._window_note(value, now, "node.md.j2", Kind.NODE, followup=True))
                )
            # anything else (seen keys, host hits, sent instances) simply expires
        return FeedResult((), tuple(notes))

    def next_due(self) -> datetime | None:
        """When `tick` next has something to do (for simulations and a smart scheduler)."""
        return self.state.next_due()

    # ---- decisions applied ----------------------------------------------------------------------
    def _record(
        self,
        event: FailureEvent,
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
            event.task,
            reason,
            tier,
            detail,
            target,
        )

    def _decide(self, event: FailureEvent, now: datetime, notes: list[Notification]) -> list[AlertRecord]:
        st = self.state
        ekey = idempotency_key(event)
        if st.get(NS_SEEN, ekey) is not None:
            return [self._record(event, now, Reason.DUPLICATE_EVENT, ekey=ekey)]
        st.put(NS_SEEN, ekey, "1", now + self._memory)
        reason, detail = classify(event, self.book, now)
        if reason is not Reason.FINAL_FAILURE:
            return [self._record(event, now, reason, detail=detail, ekey=ekey)]
        wf = self.index.find(event)
        tier, tier_reason = tier_for(event, wf)
        channel = wf.channel if wf is not None and wf.channel in self.config.channels else "default"
        mentions = tuple(wf.oncall) if wf is not None and tier is Tier.P0 else ()
        fp = fingerprint(event.error, event.workflow, event.task)
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
            if g is Reason.JOINED_INSTANCE:
                joined = (
                    replace(inst, events=(*inst.events, event))
                    if len(inst.events) < MAX_TASKS
                    else replace(inst, extra_tasks=inst.extra_tasks + 1)
                )
                st.put(NS_INSTANCE, iid, joined, inst.opened_at + self._wait)
            return [self._record(event, now, g, inst.tier, f"{why}; instance {inst.status}", inst.target)]

        recs: list[AlertRecord] = []
        if g is Reason.NODE_STORM:
            assert node is not None
            node = node.add(event, tier, mentions, folded=True)
            st.put(NS_NODE, event.host, node, node.ends_at)
            target = window_key(node, followup=True)
        elif g is Reason.NODE_STORM_OPENED:
            node, cancelled = self._open_storm(event, tier, mentions, hits, now, notes)
            target = window_key(node)
            recs.extend(
                self._record(
                    e, now, Reason.NODE_STORM, t, "held message replaced by the suspect-node alert", target
                )
                for e, t in cancelled
            )
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
                now + self._wait,
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
        recs.insert(0, self._record(event, now, g, tier, why, target))
        return recs

    def _open_storm(
        self,
        event: FailureEvent,
        tier: Tier,
        mentions: tuple[str, ...],
        hits: HostHits | None,
        now: datetime,
        notes: list[Notification],
    ) -> tuple[Window, list[tuple[FailureEvent, Tier]]]:
        """Open a suspect-node window, pull held messages of that host into it, emit its alert now."""
        st = self.state
        ns_cfg = self.config.node_storm
        node = Window("node", event.host, ns_cfg.channel, now, now + self._storm, event)
        cancelled: list[tuple[FailureEvent, Tier]] = []
        held: list[InstanceState] = []
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
            if inst.status == "held":
                held.append(inst)
                cancelled.extend((e, inst.tier) for e in inst.events)
        node = node.add(event, tier, mentions, folded=False)
        st.delete(NS_HOST, event.host)  # these hits are spent on this storm
        st.put(NS_NODE, event.host, node, node.ends_at)
        notes.append(self._emit(self._window_note(node, now, "node.md.j2", Kind.NODE)))
        for inst in held:
            st.put(
                NS_INSTANCE,
                str(inst.instance_id),
                replace(inst, status="folded", target=window_key(node)),
                now + self._memory,
            )
        return node, cancelled

    # ---- notifications --------------------------------------------------------------------------
    def _emit(self, note: Notification) -> Notification:
        self.outbox.add(OutboxRow.of(note))  # a duplicate key (re-flush after a crash) is a no-op
        return note

    def _instance_note(self, inst: InstanceState, now: datetime) -> Notification:
        first = inst.events[0]
        wf = self.index.find(first)
        mentions = tuple(wf.oncall) if wf is not None and inst.tier is Tier.P0 else ()
        starts = [e.start_time for e in inst.events if e.start_time]
        ends = [e.end_time or e.at for e in inst.events]
        start = min(starts) if starts else None
        end = max(ends) if ends else None
        hosts = list(dict.fromkeys(e.host for e in inst.events if e.host))
        error = next((e.error for e in inst.events if e.error), "")
        log = next((e.log_tail for e in inst.events if e.log_tail), "")
        ctx: dict[str, Any] = {
            "mentions": mentions,
            "tier": inst.tier.value,
            "workflow_name": first.workflow,
            "project_name": first.project,
            "code": first.workflow_code or (wf.code if wf else "") or "-",
            "instance_id": inst.instance_id,
            "environment": environment_of(first, wf) or "-",
            "task_list": [{"name": e.task or "-", "retry": e.retry_times} for e in inst.events],
            "task_more": inst.extra_tasks,
            "host_list": hosts or ["-"],
            "start": start,
            "end": end,
            "seconds": duration_seconds(start, end),
            "summary_error": error or "-",
            "tail_log": log,
            "log_url": next((e.log_url for e in inst.events if e.log_url), ""),
            "next_summary": inst.next_summary_at,
        }
        text = self.renderer.render("instance.md.j2", ctx)
        subject = f"[xihe {inst.tier.value}] {first.workflow} #{inst.instance_id} failed"
        return Notification(inst.target, Kind.INSTANCE, inst.tier, inst.channel, now, text, subject, mentions)

    def _window_note(
        self,
        w: Window,
        now: datetime,
        template: str,
        kind: Kind,
        followup: bool = False,
    ) -> Notification:
        tier = Tier.P2 if w.kind == "p2" else w.top_tier
        mentions = w.mentions if tier is Tier.P0 else ()
        ctx: dict[str, Any] = {
            "mentions": mentions,
            "tier": tier.value,
            "folded": w.folded,
            "total": w.total,
            "opened": w.opened_at,
            "ends": w.ends_at,
            "workflow_list": [{"name": n, "count": c} for n, c in w.workflows],
            "instance_list": list(w.instances),
            "host_list": list(w.hosts) or ["-"],
            "sample_name": w.sample.workflow,
            "sample_task_name": w.sample.task or "-",
            "sample_error": w.sample.error or "-",
            "host_name": w.key,
            "followup": followup,
            "window_minutes": self.config.node_storm.window_minutes,
        }
        text = self.renderer.render(template, ctx)
        what = {
            Kind.AGGREGATE: "same error",
            Kind.SUMMARY: "retried and failed",
            Kind.NODE: f"suspect node {w.key}",
        }
        subject = f"[xihe {tier.value}] {what.get(kind, kind.value)}: {w.total} failure(s)"
        return Notification(window_key(w, followup), kind, tier, w.channel, now, text, subject, mentions)
