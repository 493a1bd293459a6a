"""classify and tier_for: one row per rule, each with its recorded reason."""

from __future__ import annotations

from datetime import timedelta

import pytest

from agent.alerts.classify import WorkflowIndex, classify, tier_for
from agent.alerts.maintenance import MaintenanceBook, MaintenanceWindow, MaintScope
from agent.alerts.model import Reason, Tier
from tests.alerts.conftest import T0, WORKFLOWS, event

CLASSIFY = [
    ("final failure", {}, Reason.FINAL_FAILURE),
    (
        "retry pending while running",
        {"state": "RUNNING_EXECUTION", "task_state": "FAILURE", "retry_times": 0, "max_retry_times": 3},
        Reason.RETRY_PENDING,
    ),
    (
        "retries exhausted while running is final",
        {"state": "RUNNING_EXECUTION", "task_state": "FAILURE", "retry_times": 3, "max_retry_times": 3},
        Reason.FINAL_FAILURE,
    ),
    ("user stop", {"state": "STOP"}, Reason.USER_STOP),
    ("ready stop", {"state": "READY_STOP", "task_state": "KILL"}, Reason.USER_STOP),
    ("kill by stop", {"state": "RUNNING_EXECUTION", "task_state": "KILL"}, Reason.USER_STOP),
    (
        "kill by failure strategy is part of a failure",
        {"state": "FAILURE", "task_state": "KILL"},
        Reason.FINAL_FAILURE,
    ),
    ("parent stopped", {"parent_stopped": True}, Reason.PARENT_STOPPED),
    ("pause", {"state": "PAUSE"}, Reason.USER_PAUSE),
    (
        "worker failover",
        {"state": "RUNNING_EXECUTION", "task_state": "NEED_FAULT_TOLERANCE"},
        Reason.FAILOVER_PENDING,
    ),
    ("workflow succeeded after retry", {"state": "SUCCESS", "task_state": "FAILURE"}, Reason.NOT_FAILED),
]


@pytest.mark.parametrize(("name", "kw", "reason"), CLASSIFY, ids=[c[0] for c in CLASSIFY])
def test_classify_rules(name: str, kw: dict[str, object], reason: Reason) -> None:
    assert classify(event(**kw), MaintenanceBook(), T0)[0] is reason


def test_maintenance_window_suppresses_only_its_scope_and_time() -> None:
    book = MaintenanceBook().add(
        MaintenanceWindow("w", T0, T0 + timedelta(minutes=30), MaintScope("host", "10.0.0.1"))
    )
    assert classify(event(), book, T0 + timedelta(minutes=5))[0] is Reason.MAINTENANCE
    assert classify(event(host="10.0.0.2:1234"), book, T0 + timedelta(minutes=5))[0] is Reason.FINAL_FAILURE
    assert classify(event(), book, T0 + timedelta(minutes=30))[0] is Reason.FINAL_FAILURE


TIERS = [
    (
        "prod core → P0",
        {"workflow": "order_sync", "workflow_code": 1001, "project": "etl"},
        Tier.P0,
        Reason.TIER_PROD_CORE,
    ),
    (
        "prod non-core → P1",
        {"workflow": "daily_sales", "workflow_code": 1002, "project": "etl"},
        Tier.P1,
        Reason.TIER_DEFAULT,
    ),
    ("test → P1", {}, Tier.P1, Reason.TIER_DEFAULT),
    (
        "retried and exhausted → P2",
        {"retry_times": 2, "max_retry_times": 2},
        Tier.P2,
        Reason.TIER_RETRIED_EXHAUSTED,
    ),
    (
        "explicit P2 wins",
        {"workflow": "report_export", "workflow_code": 1003, "project": "etl"},
        Tier.P2,
        Reason.TIER_EXPLICIT,
    ),
    (
        "explicit P0 wins over test",
        {"workflow": "pinned_p0", "workflow_code": 2002},
        Tier.P0,
        Reason.TIER_EXPLICIT,
    ),
    (
        "core prod beats retried",
        {"workflow": "order_sync", "workflow_code": 1001, "retry_times": 1, "max_retry_times": 1},
        Tier.P0,
        Reason.TIER_PROD_CORE,
    ),
    (
        "unknown workflow → P1",
        {"workflow": "nope", "workflow_code": 9},
        Tier.P1,
        Reason.TIER_UNKNOWN_WORKFLOW,
    ),
    (
        "found by name when code is missing",
        {"workflow": "order_sync", "workflow_code": 0, "project": "etl"},
        Tier.P0,
        Reason.TIER_PROD_CORE,
    ),
]


@pytest.mark.parametrize(("name", "kw", "tier", "reason"), TIERS, ids=[t[0] for t in TIERS])
def test_tier_rules(name: str, kw: dict[str, object], tier: Tier, reason: Reason) -> None:
    e = event(**kw)
    assert tier_for(e, WorkflowIndex.build(WORKFLOWS).find(e)) == (tier, reason)
