"""Folding final failures: a grouping decision applied to the state store.

`decide_group` (grouping.py) says where a final failure goes; `Folding` makes it so: a new
instance's message is held for its other tasks, later tasks join it (or a follow-up once it was
sent), repeats fold into their fingerprint window, P2 failures into the channel's summary window,
a host's burst opens a suspect-node window (announced at once, re-announced when a higher tier
joins), and failures inside a maintenance window are counted in that window. Messages that are due
at once go out through the `Emitter`; held ones come due in `Pipeline.tick`.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from xihe.agent.alert_event import AlertEvent
from xihe.agent.alerts.classify import WorkflowIndex, idempotency_key, tier_for
from xihe.agent.alerts.emit import Emitter
from xihe.agent.alerts.fingerprint import fingerprint
from xihe.agent.alerts.grouping import decide_group, epoch, instance_key, window_key
from xihe.agent.alerts.maintenance import MaintenanceBook
from xihe.agent.alerts.model import AlertRecord, Kind, Notification, Reason, Tier
from xihe.agent.alerts.state import (
    NS_FP,
    NS_HOST,
    NS_INSTANCE,
    NS_MAINT,
    NS_NODE,
    NS_P2,
    NS_REPEAT,
    AlertStateStore,
    HostHits,
    InstanceState,
    Repeat,
    Window,
    rank,
)

if TYPE_CHECKING:
    from xihe.config.alerts import AlertsConfig

MAX_TASKS = 20  # failed tasks kept per instance message; more are counted


def record_of(
    event: AlertEvent,
    now: datetime,
    reason: Reason,
    tier: Tier | None = None,
    detail: str = "",
    target: str = "",
    ekey: str = "",
) -> AlertRecord:
    """The record of one decision about `event` (`ekey`: its idempotency key, when already known).

    One per event: its fields are set directly, the object AlertRecord(...) makes without its frozen
    __init__'s per-field object.__setattr__ (issue 30; tests/alerts/test_storm.py compares the two)."""
    rec = object.__new__(AlertRecord)
    fill = rec.__dict__  # in the fields' order, as AlertRecord(...) fills it (its keys shared)
    fill["at"] = now
    fill["event_key"] = ekey or idempotency_key(event)
    fill["instance_id"] = event.instance_id
    fill["workflow"] = event.workflow
    fill["task"] = event.task or event.failed_task  # event.task_name
    fill["reason"] = reason
    fill["tier"] = tier
    fill["detail"] = detail
    fill["notification_key"] = target
    return rec


class Folding:
    """Applies each final failure's grouping decision to the state store; returns its record."""

    def __init__(
        self,
        config: AlertsConfig,
        index: WorkflowIndex,
        state: AlertStateStore,
        emitter: Emitter,
    ) -> None:
        self.config = config
        self.index = index
        self.state = state
        self.emitter = emitter
        self._memory = timedelta(hours=config.memory_hours)
        self._window = timedelta(minutes=config.window_minutes)
        self._storm = timedelta(minutes=config.node_storm.window_minutes)
        self._wait = timedelta(seconds=config.instance_wait_seconds)
        self._lookback = timedelta(minutes=config.repeat_lookback_minutes)
        # the latest end of a maintenance window that kept a failure quiet: its end-of-window message
        # comes due then (a replay runs its clock on to it)
        self.quiet_until: datetime | None = None

    def _hold(self, tier: Tier) -> timedelta:
        """How long a new instance's message waits for its other tasks: P0 not at all."""
        return timedelta(0) if tier is Tier.P0 else self._wait

    def final_failure(self, event: AlertEvent, now: datetime, notes: list[Notification]) -> list[AlertRecord]:
        """Tier and group a final failure (not seen before, outside maintenance) and apply the decision.

        Its record comes last, after one for each earlier instance a node window opened by it absorbed."""
        st = self.state
        wf = self.index.find(event)
        tier, tier_reason = tier_for(event, wf, self.index.production)
        channel = wf.channel if wf is not None and wf.channel in self.config.channels else "default"
        mentions = self.emitter.mentions(wf, now) if tier is Tier.P0 else ()
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

        repeat = self._repeat(event, fp, now)
        absorbed: list[AlertRecord] = []
        if g is Reason.NODE_STORM:
            assert node is not None
            node = node.add(event, tier, mentions, folded=node.announced is not None)
            target = window_key(node, "end" if node.announced is not None else "")
            if node.announced is None:
                if tier is Tier.P0:  # a held storm alert goes out at once when a P0 joins it
                    node = self._announce(node, now, notes)
            elif rank(tier) < rank(node.announced):
                # a higher tier joined a storm announced lower: say so now, at the new tier
                # it lists only what the earlier node alert did not (`named`), and says how many that was
                node = replace(node, announced=tier, escalations=node.escalations + 1)
                target = window_key(node, f"up{node.escalations}")
                notes.extend(
                    self.emitter.window(
                        node, now, "node.md.j2", Kind.NODE, f"up{node.escalations}", escalated=True
                    )
                )
                node = replace(node, named=len(node.instances))
            st.put(NS_NODE, event.host, node, self._node_due(node))
        elif g is Reason.NODE_STORM_OPENED:
            node, absorbed = self._open_storm(event, tier, mentions, hits, now, notes)
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
                InstanceState(
                    event.instance_id,
                    "held",
                    tier,
                    channel,
                    now,
                    (event,),
                    target,
                    fpw.ends_at,
                    repeat=repeat,
                ),
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
        return [*absorbed, record_of(event, now, g, tier, why, target)]

    def _repeat(self, event: AlertEvent, fp: str, now: datetime) -> Repeat | None:
        """Count this instance's failure against the same workflow + fingerprint within the look-back;
        the count when it is a repeat (the second time or later), else None."""
        if not self._lookback:
            return None
        key = f"{event.workflow}|{fp}"
        seen = self.state.get(NS_REPEAT, key)
        assert seen is None or isinstance(seen, Repeat)
        if seen is None or now - seen.last_at > self._lookback:
            rep = Repeat(1, now, event.instance_id, now)
        else:
            rep = seen.again(now)
        self.state.put(NS_REPEAT, key, rep, now + self._lookback)
        return rep if rep.count > 1 else None

    def _node_due(self, node: Window) -> datetime:
        """A node window comes due to be announced (held ones), then at its end (a follow-up)."""
        return node.ends_at if node.announced is not None else min(node.opened_at + self._wait, node.ends_at)

    def _announce(self, node: Window, now: datetime, notes: list[Notification]) -> Window:
        """Send a node window's alert now (naming every instance so far) and mark it announced."""
        notes.extend(self.emitter.window(node, now, "node.md.j2", Kind.NODE))
        return replace(node, announced=node.top_tier, named=len(node.instances))

    def announce_due(self, node: Window, now: datetime) -> list[Notification]:
        """A held node alert came due: send it and keep the window for its end-of-window follow-up."""
        notes: list[Notification] = []
        node = self._announce(node, now, notes)
        self.state.put(NS_NODE, node.key, node, node.ends_at)
        return notes

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
            return record_of(
                event, now, Reason.JOINED_INSTANCE, inst.tier, f"{why}; instance {inst.status}", target
            )
        if inst.status == "sent" and new_task and len(inst.events) < MAX_TASKS:
            # a task that failed after the message went out: one follow-up collects it (and any more)
            more = replace(inst, status="more", events=(*inst.events, event), followups=inst.followups + 1)
            st.put(NS_INSTANCE, iid, more, now + self._wait)
            target = instance_key(inst.instance_id, inst.tier, inst.channel, more.followups)
            return record_of(event, now, Reason.JOINED_INSTANCE, inst.tier, f"{why}; follow-up", target)
        return record_of(event, now, g, inst.tier, f"{why}; instance {inst.status}", inst.target)

    def suppress(
        self, event: AlertEvent, now: datetime, detail: str, ekey: str, book: MaintenanceBook
    ) -> AlertRecord:
        """A final failure inside a maintenance window: counted in that window's end-of-window list."""
        found = book.covering(now, event)
        wf = self.index.find(event)
        tier, _why = tier_for(event, wf, self.index.production)
        if found is None:  # the book changed between classify and here: record only
            return record_of(event, now, Reason.MAINTENANCE, tier, detail, ekey=ekey)
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
        if self.quiet_until is None or end > self.quiet_until:
            self.quiet_until = end
        return record_of(event, now, Reason.MAINTENANCE, tier, detail, window_key(w), ekey)

    def _open_storm(
        self,
        event: AlertEvent,
        tier: Tier,
        mentions: tuple[str, ...],
        hits: HostHits | None,
        now: datetime,
        notes: list[Notification],
    ) -> tuple[Window, list[AlertRecord]]:
        """Open a suspect-node window over the host's recent failures.

        The window names the host's recent instances; those whose own message was still held, or
        that were counted in a summary or same-error window, are named only here (one message per
        problem). Its alert goes out at once when it holds a P0, else after `instance_wait_seconds`
        so the rest of the burst joins it; later failures come in one end-of-window follow-up. Returns
        the window and a record for each instance it absorbed (its earlier record named another key)."""
        st = self.state
        ns_cfg = self.config.node_storm
        node = Window("node", event.host, ns_cfg.channel, now, now + self._storm, event, top_tier=Tier.P2)
        target = window_key(node)
        absorbed: list[AlertRecord] = []
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
                self.emitter.mentions(wf, now) if inst.tier is Tier.P0 else (),
                folded=False,
            )
            if inst.status in ("held", "folded") and self._absorb(inst, target):
                why = f"named in the node alert of {event.host} instead of {inst.target}"
                absorbed.append(record_of(first, now, Reason.NODE_STORM, inst.tier, why, target))
            elif inst.status != "held":  # its own message or summary went out: counted, named apart
                node = replace(node, alerted=(*node.alerted, inst.instance_id))
        node = node.add(event, tier, mentions, folded=False)
        st.delete(NS_HOST, event.host)  # these hits are spent on this storm
        if node.top_tier is Tier.P0 or not self._wait:
            node = self._announce(node, now, notes)
        st.put(NS_NODE, event.host, node, self._node_due(node))
        return node, absorbed

    def _absorb(self, inst: InstanceState, target: str) -> bool:
        """An instance a new node window names: its held message is not sent, and it leaves the
        summary or same-error window it was counted in. False when it is named elsewhere already (another
        node or maintenance window, or a summary that went out)."""
        st, first = self.state, inst.events[0]
        if inst.status == "held":
            fp_key = f"{fingerprint(first.error, first.workflow, first.task_name)}|{inst.channel}"
            ns, key, folded = NS_FP, fp_key, False
        elif inst.target.startswith("p2:"):
            ns, key, folded = NS_P2, inst.channel, True
        elif inst.target.startswith("fp:"):
            fp_key = f"{fingerprint(first.error, first.workflow, first.task_name)}|{inst.channel}"
            ns, key, folded = NS_FP, fp_key, True
        else:
            return False  # already in another node or maintenance window
        w = st.get(ns, key)
        if folded and (not isinstance(w, Window) or inst.instance_id not in w.instances):
            return False  # the summary it sat in went out already: it was named there
        if isinstance(w, Window):
            st.put(ns, key, w.drop(inst.instance_id, first.workflow, folded), w.ends_at)
        st.put(
            NS_INSTANCE,
            str(inst.instance_id),
            replace(inst, status="folded", target=target),
            inst.opened_at + self._memory,
        )
        return True
