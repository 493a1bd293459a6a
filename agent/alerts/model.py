"""The vocabulary of the alert pipeline: tiers, reasons, notifications and records."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from json.encoder import encode_basestring


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


def records_json(records: Iterable[AlertRecord]) -> str:
    """`json.dumps([r.to_dict() for r in records], ensure_ascii=False)`, byte for byte, at under half
    its cost (`xihe alerts replay --json` prints ~10,000 records; issue 30): each record's text is put
    together from its fields, every string through the encoder json.dumps uses (`encode_basestring`:
    quotes, backslashes and control characters escaped; a time's ISO text needs none), a detail met
    before reused. A record with a field of another type is left to json.dumps.
    tests/alerts/test_replay_json.py compares the two on hostile text."""
    enc = encode_basestring
    memo: dict[str, str] = {}  # a detail → its JSON text (a storm repeats a few dozen)
    parts: list[str] = []
    add = parts.append
    for r in records:
        at, detail, tier = r.at, r.detail, r.tier
        if type(r.instance_id) is not int or type(at) is not datetime or type(detail) is not str:
            add(json.dumps(r.to_dict(), ensure_ascii=False))
            continue
        said = memo.get(detail)
        if said is None:
            said = memo[detail] = enc(detail)
        add(
            f'{{"at": "{at.isoformat()}", "event_key": {enc(r.event_key)}, "instance_id": {r.instance_id}, '
            f'"workflow": {enc(r.workflow)}, "task": {enc(r.task)}, "reason": {enc(r.reason.value)}, '
            f'"tier": {"null" if not tier else enc(tier.value)}, "detail": {said}, '
            f'"notification_key": {enc(r.notification_key)}}}'
        )
    return "[" + ", ".join(parts) + "]"
