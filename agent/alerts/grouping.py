"""Where a final failure goes (a pure decision with its `Reason`), and the outbox keys of messages."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from xihe.agent.alert_event import AlertEvent
from xihe.agent.alerts.model import Reason, Tier
from xihe.agent.alerts.state import HostHits, InstanceState, Window

if TYPE_CHECKING:
    from xihe.config.alerts import AlertsConfig


def decide_group(
    event: AlertEvent,
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


def epoch(t: datetime) -> int:
    """Whole seconds since 1970 (for keys)."""
    return int(t.timestamp())


def instance_key(instance_id: int, tier: Tier, channel: str, followup: int = 0) -> str:
    """Outbox key of an instance message (and of its follow-ups)."""
    return f"inst:{instance_id}:{tier.value}:{channel}{f':more{followup}' if followup else ''}"


def window_key(w: Window, suffix: str = "") -> str:
    """Outbox key of a window's message. No tier in it: a window's tier may rise as failures fold in,
    and records written before that must still name the key the message goes out under."""
    ident = w.key.split("|")[0]
    return f"{w.kind}:{ident}:{epoch(w.opened_at)}{':' + suffix if suffix else ''}:{w.channel}"
