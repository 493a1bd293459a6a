"""The vocabulary of the alert pipeline: tiers, reasons, notifications and records."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum


class Tier(StrEnum):
    """Alert tier: P0 pages the on-call, P1 is pushed plainly, P2 is aggregated."""

    P0 = "P0"
    P1 = "P1"
    P2 = "P2"


class Reason(StrEnum):
    """Why a decision came out as it did; recorded for every event and shown by `alerts replay`."""

    # classify
    FINAL_FAILURE = "final_failure"
    RETRY_PENDING = "retry_pending"  # task failed, retries left, workflow still running
    FAILOVER_PENDING = "failover_pending"  # NEED_FAULT_TOLERANCE: the row is replaced on another worker
    USER_STOP = "user_stop"  # workflow STOP / READY_STOP, task STOP, or KILL caused by a stop
    USER_PAUSE = "user_pause"
    PARENT_STOPPED = "parent_stopped"
    MAINTENANCE = "maintenance"
    KILLED = "killed"  # a task attempt killed (a stop, or the failure strategy): the workflow event decides
    IN_PROGRESS = "in_progress"  # started, dispatched, queued or running: nothing has failed yet
    NOT_FAILED = "not_failed"  # succeeded
    BAD_EVENT = "bad_event"  # not usable (bad JSON, missing field, unknown state): recorded, skipped
    DUPLICATE_EVENT = "duplicate_event"  # the same (instance, task, state, retry) was seen already
    # tier
    TIER_EXPLICIT = "tier_explicit"
    TIER_PROD_CORE = "tier_prod_core"
    TIER_RETRIED_EXHAUSTED = "tier_retried_exhausted"
    TIER_DEFAULT = "tier_default"
    TIER_UNKNOWN_WORKFLOW = "tier_unknown_workflow"
    # group
    NEW_INSTANCE = "new_instance"  # opens this instance's message
    JOINED_INSTANCE = "joined_instance"  # another failed task of an instance whose message is still held
    INSTANCE_ALREADY_NOTIFIED = "instance_already_notified"  # late task of an instance already sent
    FINGERPRINT_REPEAT = "fingerprint_repeat"  # same error within the window: folded into the aggregate
    AGGREGATED_P2 = "aggregated_p2"  # retried-and-failed: goes into the P2 summary
    NODE_STORM = "node_storm"  # folded into a suspect-node alert
    NODE_STORM_OPENED = "node_storm_opened"  # this failure crossed the host threshold


PUSHED = frozenset({Reason.NEW_INSTANCE, Reason.NODE_STORM_OPENED})


class Kind(StrEnum):
    """What a notification summarises."""

    INSTANCE = "instance"
    AGGREGATE = "aggregate"  # fingerprint window
    SUMMARY = "summary"  # P2 window
    NODE = "node"  # suspect worker host
    MAINT = "maint"  # what a maintenance window suppressed, when it ends


@dataclass(frozen=True)
class Notification:
    """One message to send; `key` is unique per (instance or window, tier, channel)."""

    key: str
    kind: Kind
    tier: Tier
    channel: str
    created_at: datetime
    text: str
    subject: str
    mentions: tuple[str, ...] = ()


@dataclass(frozen=True)
class AlertRecord:
    """What happened to one event (or to a held message): pushed, folded or suppressed, and why."""

    at: datetime
    event_key: str
    instance_id: int
    workflow: str
    task: str
    reason: Reason
    tier: Tier | None = None
    detail: str = ""
    notification_key: str = ""

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form (for audit rows and `alerts replay --json`)."""
        return {
            "at": self.at.isoformat(),
            "event_key": self.event_key,
            "instance_id": self.instance_id,
            "workflow": self.workflow,
            "task": self.task,
            "reason": self.reason.value,
            "tier": self.tier.value if self.tier else None,
            "detail": self.detail,
            "notification_key": self.notification_key,
        }
