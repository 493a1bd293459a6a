"""classify over every (workflow/task) × state × retry combination of the event format, and tier_for."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from tests.alerts.conftest import PRODUCTION, T0, WORKFLOWS, event
from xihe.agent.alerts.classify import WorkflowIndex, classify, tier_for
from xihe.agent.alerts.event import AlertEvent, parse_event
from xihe.agent.alerts.maintenance import MaintenanceBook, MaintenanceWindow, MaintScope
from xihe.agent.alerts.model import Reason, Tier
from xihe.config.workflows import WorkflowsConfig
from xihe.integrations.dolphinscheduler.states import KNOWN_STATES

# What each state means, written out here (not derived from the code under test).
STOPS = {"STOP", "READY_STOP"}
PAUSES = {"PAUSE", "READY_PAUSE"}
ENDED_OK = {"SUCCESS", "FORCED_SUCCESS", "BLOCK"}
RETRIES = [(0, 0), (0, 3), (2, 3), (3, 3), (4, 3)]  # (retry_times, max_retry_times)


def expected(level: str, state: str, retry: int, max_retry: int) -> Reason:
    if state == "FAILURE":
        if level == "task" and retry < max_retry:
            return Reason.RETRY_PENDING  # DolphinScheduler will run it again
        return Reason.FINAL_FAILURE
    if state == "KILL":
        return Reason.KILLED if level == "task" else Reason.USER_STOP
    if state in STOPS:
        return Reason.USER_STOP
    if state in PAUSES:
        return Reason.USER_PAUSE
    if state == "NEED_FAULT_TOLERANCE":
        return Reason.FAILOVER_PENDING
    if state in ENDED_OK:
        return Reason.NOT_FAILED
    return Reason.IN_PROGRESS  # started, dispatched, queued, waiting, running


CASES = [
    (level, state, r, m)
    for level in ("workflow", "task")
    for state in sorted(KNOWN_STATES)
    for r, m in RETRIES
]


def line(level: str, state: str, retry: int, max_retry: int) -> str:
    """One line of the documented format; a workflow event has task null (and host/error null unless FAILURE)."""
    failed = state == "FAILURE"
    return json.dumps(
        {
            "at": "2026-12-02T17:00:00+08:00",
            "project": "sandbox",
            "workflow": "profile_test",
            "workflow_code": 2001,
            "instance_id": 7,
            "state": state,
            "task": "load" if level == "task" else None,
            "host": "10.0.0.1:1234" if level == "task" or failed else None,
            "error": "boom" if failed else None,
            "retry_times": retry,
            "max_retry_times": max_retry,
            "environment": None,
        }
    )


def test_the_table_covers_every_known_state() -> None:
    assert len(CASES) == 2 * len(KNOWN_STATES) * len(RETRIES)
    assert {"RUNNING_EXECUTION", "DISPATCH", "FAILURE", "KILL", "SUCCESS", "STOP"} <= KNOWN_STATES


@pytest.mark.parametrize(
    ("level", "state", "retry", "max_retry"), CASES, ids=["-".join(map(str, c)) for c in CASES]
)
def test_classification_of_every_combination(level: str, state: str, retry: int, max_retry: int) -> None:
    e = parse_event(json.loads(line(level, state, retry, max_retry)))
    assert e.is_task is (level == "task")
    assert classify(e, MaintenanceBook(), T0)[0] is expected(level, state, retry, max_retry)


def test_start_and_dispatch_events_never_alert() -> None:
    start = parse_event(json.loads(line("workflow", "RUNNING_EXECUTION", 0, 0)))
    dispatch = parse_event(json.loads(line("task", "RUNNING_EXECUTION", 0, 0)))
    assert classify(start, MaintenanceBook(), T0)[0] is Reason.IN_PROGRESS
    assert classify(dispatch, MaintenanceBook(), T0)[0] is Reason.IN_PROGRESS


def test_a_stopped_parent_wins_over_any_state() -> None:
    for state in ("FAILURE", "KILL", "RUNNING_EXECUTION"):
        assert (
            classify(event(state=state, parent_stopped=True), MaintenanceBook(), T0)[0]
            is Reason.PARENT_STOPPED
        )


def test_maintenance_window_suppresses_only_its_scope_and_time() -> None:
    book = MaintenanceBook().add(
        MaintenanceWindow("w", T0, T0 + timedelta(minutes=30), MaintScope("host", "10.0.0.1"))
    )
    assert classify(event(), book, T0 + timedelta(minutes=5))[0] is Reason.MAINTENANCE
    assert classify(event(host="10.0.0.2:1234"), book, T0 + timedelta(minutes=5))[0] is Reason.FINAL_FAILURE
    assert classify(event(), book, T0 + timedelta(minutes=30))[0] is Reason.FINAL_FAILURE
    intermediate = event(retry_times=1, max_retry_times=3)
    assert classify(intermediate, book, T0 + timedelta(minutes=5))[0] is Reason.RETRY_PENDING


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
    e: AlertEvent = event(**kw)
    assert tier_for(e, WorkflowIndex.build(WORKFLOWS, PRODUCTION).find(e), PRODUCTION) == (tier, reason)


def test_production_is_what_access_yaml_says_and_nothing_else() -> None:
    """A core workflow pages (P0) only on an environment access.yaml marks `production: true`."""
    from xihe.config.access import AccessConfig

    access = AccessConfig.model_validate({"environments": {"live": {"production": True}, "prod": {}}})
    production = access.production_environments()
    assert production == {"live"}
    wfs = WorkflowsConfig.model_validate(
        {
            "workflows": [
                {"name": "a", "project": "p", "code": 1, "environment": "live", "core": True},
                {"name": "b", "project": "p", "code": 2, "environment": "prod", "core": True},
            ]
        }
    )
    index = WorkflowIndex.build(wfs, production)
    live, prod = event(workflow="a", workflow_code=1), event(workflow="b", workflow_code=2)
    assert tier_for(live, index.find(live), production) == (Tier.P0, Reason.TIER_PROD_CORE)
    assert tier_for(prod, index.find(prod), production) == (Tier.P1, Reason.TIER_DEFAULT)
