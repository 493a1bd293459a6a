"""Emitting alert messages: rendered in the markup of the channel's notifier, then added to the outbox.

The pipeline decides *when* an instance message or a window's message goes out; `Emitter` renders
it (`notes.py` says what it contains) and adds it to the outbox under its key, where a duplicate key
(a re-flush after a crash) is a no-op. Sending is the deliverer's (`deliver.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from xihe.agent.alert_event import AlertEvent
from xihe.agent.alerts.classify import WorkflowIndex, environment_of, tier_for
from xihe.agent.alerts.grouping import window_key
from xihe.agent.alerts.model import Kind, Notification, Tier
from xihe.agent.alerts.notes import Origins, instance_note, window_notes
from xihe.agent.alerts.notify import kind_markups
from xihe.agent.alerts.outbox import Outbox, OutboxRow
from xihe.agent.alerts.render import Renderer
from xihe.agent.alerts.state import InstanceState, Window

if TYPE_CHECKING:
    from xihe.config.alerts import AlertsConfig
    from xihe.config.workflows import Workflow

OnCallLookup = Callable[["Workflow", datetime], tuple[str | None, str | None]]
"""Who is on call for a workflow at a time: (primary, secondary) userids, either may be None
(`xihe.agent.oncall.lookup.RotationOnCall` when oncall.yaml exists)."""


def listed_oncall(wf: Workflow, at: datetime) -> tuple[str | None, str | None]:
    """Without rotations: the workflow's own `oncall: [primary, secondary]` list (workflows.yaml)."""
    return (wf.oncall[0] if wf.oncall else None, wf.oncall[1] if len(wf.oncall) > 1 else None)


class Emitter:
    """Renders instance and window messages per channel markup and adds them to the outbox."""

    def __init__(
        self,
        config: AlertsConfig,
        index: WorkflowIndex,
        outbox: Outbox,
        origins: Origins,
        markups: Mapping[str, str] | None = None,
        oncall: OnCallLookup | None = None,
    ) -> None:
        self.config = config
        self.index = index
        self.outbox = outbox
        self.origins = origins
        self.oncall = oncall  # None: P0 mentions the workflow's whole `oncall` list, as configured
        # the short id of an instance's alert (A7), shown in its message; "" without a lifecycle
        self.alert_short: Callable[[int], str] = lambda _instance_id: ""
        # Rendered before the outbox, in the markup of the notifier that serves the channel's kind.
        markup_of = kind_markups() if markups is None else markups
        self._markup = {name: markup_of[ch.kind] for name, ch in config.channels.items()}
        self._renderers = {
            m: Renderer(
                config.templates_dir or None, config.timezone, config.max_bytes, config.log_tail_chars, m
            )
            for m in set(self._markup.values())
        }

    def renderer_for(self, channel: str) -> Renderer:
        """The renderer of `channel`'s notifier markup (an unknown channel is rendered as "default")."""
        return self._renderers[self._markup.get(channel, self._markup["default"])]

    def mentions(self, wf: Workflow | None, at: datetime) -> tuple[str, ...]:
        """Whom a P0 of `wf` mentions at `at`: a workflow of a `team` with a rotation its current
        on-call (the rotation with its overrides; the secondary is the next step of the escalation
        chain); any other its own `oncall` list, as configured."""
        if wf is None:
            return ()
        if self.oncall is None or not wf.team:
            return tuple(wf.oncall)
        found = self.oncall(wf, at)
        if found == listed_oncall(wf, at):  # no rotation for its team: its own list, as configured
            return tuple(wf.oncall)
        return (found[0],) if found[0] else tuple(wf.oncall[:1])

    def emit(self, note: Notification) -> Notification:
        """Add `note` to the outbox (a duplicate key, i.e. a re-flush after a crash, is a no-op)."""
        self.outbox.add(OutboxRow.of(note))
        return note

    def instance_note(self, inst: InstanceState, now: datetime, key: str) -> Notification:
        """The message of one instance (its failed tasks so far), under outbox key `key`."""
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
            self.mentions(wf, inst.events[0].at),
            self.alert_short(inst.instance_id),
        )

    def window(
        self,
        w: Window,
        now: datetime,
        template: str,
        kind: Kind,
        suffix: str = "",
        followup: bool = False,
        escalated: bool = False,
    ) -> list[Notification]:
        """Render a window's message (in parts when its instances do not fit) and emit every part."""
        tier = Tier.P2 if w.kind == "p2" else w.top_tier
        extra: dict[str, Any] = {
            "followup": followup,
            "escalated": escalated,
            "window_minutes": self.config.node_storm.window_minutes,
            "window_name": w.key.split("|")[0],
            "p0_list": [],
        }
        if kind is Kind.MAINT:
            extra["p0_list"] = [n for n, _c in w.workflows if is_p0(self.index, n)]
            tier = Tier.P0 if extra["p0_list"] else Tier.P1
        notes = window_notes(
            self.renderer_for(w.channel),
            w,
            tier,
            now,
            template,
            kind,
            window_key(w, suffix),
            extra,
            self.alert_short,
        )
        return [self.emit(n) for n in notes]


def is_p0(index: WorkflowIndex, workflow: str) -> bool:
    """Whether a configured workflow's failures page (tier P0); False for an unknown workflow."""
    wf = next((w for (_p, name), w in index.by_name.items() if name == workflow), None)
    if wf is None:
        return False
    tier, _r = tier_for(
        AlertEvent(at=datetime.min, workflow=workflow, instance_id=0, state="FAILURE"),
        wf,
        index.production,
    )
    return tier is Tier.P0
