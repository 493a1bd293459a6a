"""The DolphinScheduler HTTP alert plugin webhook: secret, validation, parsing, idempotency."""

from __future__ import annotations

import json

import pytest

from tests.alerts.conftest import T0
from xihe.agent.alerts.classify import idempotency_key
from xihe.agent.alerts.model import Reason
from xihe.agent.dolphin.webhook import Parsed, handle_ds_webhook

SECRET = "s3cret-token-value"
ITEMS = [
    {
        "projectCode": 7,
        "projectName": "etl",
        "owner": "admin",
        "processId": 345,
        "processDefinitionCode": 1001,
        "processName": "order_sync-1-20261202170000123",
        "taskCode": 11,
        "taskName": "load",
        "taskType": "SHELL",
        "taskState": "FAILURE",
        "taskStartTime": "2026-12-02 17:00:00",
        "taskEndTime": "2026-12-02 17:05:00",
        "taskHost": "10.0.0.11:1234",
        "taskPriority": "MEDIUM",
        "logPath": "/logs/345/11.log",
    },
    {
        "projectCode": 7,
        "projectName": "etl",
        "processId": 345,
        "processName": "order_sync-1-20261202170000123",
        "taskName": "index",
        "taskType": "SQL",
        "taskState": "KILL",
        "taskHost": "10.0.0.12:1234",
    },
]


def post(body: object, token: str = SECRET) -> tuple[int, object]:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return handle_ds_webhook({"X-Xihe-Token": token, "Content-Type": "application/json"}, raw, SECRET, T0)


def test_wrong_or_missing_secret_is_401():
    assert post({"msg": "[]"}, token="nope")[0] == 401
    assert handle_ds_webhook({}, b"{}", SECRET, T0)[0] == 401
    assert handle_ds_webhook({"X-Xihe-Token": ""}, b"{}", "", T0)[0] == 401  # unset secret never opens


def test_bearer_header_is_accepted():
    status, _ = handle_ds_webhook(
        {"Authorization": f"Bearer {SECRET}"}, json.dumps({"msg": "[]"}).encode(), SECRET, T0
    )
    assert status == 200


@pytest.mark.parametrize(
    "body",
    [
        {"msg": "start process failed" + json.dumps(ITEMS)},  # contentField holding title + content
        {"title": "start process failed", "content": json.dumps(ITEMS)},
        {"title": "start process failed", "content": ITEMS},
        ITEMS,
    ],
)
def test_failure_items_become_events(body):
    status, parsed = post(body)
    assert status == 200 and isinstance(parsed, Parsed) and len(parsed.events) == 2 and parsed.bad == []
    first = parsed.events[0]
    assert (
        first.instance_id,
        first.workflow,
        first.workflow_code,
        first.host,
        first.state,
        first.source,
    ) == (345, "order_sync", 1001, "10.0.0.11:1234", "FAILURE", "webhook")
    assert first.start_time is not None and first.start_time.utcoffset().total_seconds() == 8 * 3600
    # the workflow has failed, so each item is the workflow's FAILURE naming its task and that task's state
    assert [(e.task, e.failed_task, e.state, e.failed_task_state) for e in parsed.events] == [
        ("", "load", "FAILURE", "FAILURE"),
        ("", "index", "FAILURE", "KILL"),
    ]
    assert idempotency_key(parsed.events[0]) != idempotency_key(parsed.events[1])


def test_a_bad_item_is_listed_and_the_good_ones_still_come_through():
    items = [ITEMS[0], {"processName": "no id"}, ITEMS[1]]
    status, parsed = post({"title": "process failed", "content": items})
    assert status == 200 and isinstance(parsed, Parsed)
    assert [e.failed_task for e in parsed.events] == ["load", "index"]
    assert parsed.bad == [("webhook:item 1", "item 1: processId: Field required")]


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b"not json", "not UTF-8 JSON"),
        ({"other": 1}, "no alert content field"),
        ({"msg": "no array here"}, "no JSON array"),
    ],
)
def test_invalid_payloads_are_400_with_the_problem(body, problem):
    status, error = post(body)
    assert status == 400 and problem in str(error)


def test_a_post_with_no_usable_item_is_400_with_each_problem():
    status, parsed = post({"msg": '[{"processName": "x"}]'})
    assert status == 400 and isinstance(parsed, Parsed) and "processId" in parsed.bad[0][1]


def test_an_item_in_a_state_nobody_knows_is_listed_at_the_edge():
    items = [{**ITEMS[0], "processState": "EXPLODED"}, ITEMS[1]]
    status, parsed = post({"title": "process failed", "content": items})
    assert status == 200 and isinstance(parsed, Parsed)
    assert [e.failed_task for e in parsed.events] == ["index"]
    assert parsed.bad == [("webhook:item 0", "item 0: state: unknown state 'EXPLODED'")]


def test_reposted_alert_is_idempotent(make_pipeline):
    p = make_pipeline()
    _, parsed = post({"msg": json.dumps(ITEMS)})
    assert isinstance(parsed, Parsed)
    first = p.feed_batch(parsed.events, T0)
    again = p.feed_batch(parsed.events, T0)
    assert [r.reason for r in first.records] == [Reason.NEW_INSTANCE, Reason.JOINED_INSTANCE]
    assert [r.reason for r in again.records] == [Reason.DUPLICATE_EVENT, Reason.DUPLICATE_EVENT]
    assert len(p.outbox.rows()) == 1


def test_a_success_alert_resolves_the_alert_of_that_instance(make_pipeline):
    from xihe.agent.alerts.lifecycle import Why
    from xihe.agent.alerts.lifestore import InMemoryLifeStore

    p = make_pipeline(life=InMemoryLifeStore())
    _, failed = post({"title": "process failed", "content": ITEMS[:1]})
    assert isinstance(failed, Parsed)
    assert [t.why for t in p.feed_batch(failed.events, T0).transitions] == [Why.FIRED]
    # DolphinScheduler's success alert (warning type SUCCESS or ALL) of the same instance, after a rerun
    success = {**ITEMS[0], "processState": "SUCCESS", "taskState": "", "taskName": ""}
    status, ok = post({"title": "process success", "content": [success]})
    assert status == 200 and isinstance(ok, Parsed)
    assert [(e.state, e.instance_id, e.task) for e in ok.events] == [("SUCCESS", 345, "")]
    (moved,) = p.feed_batch(ok.events, T0).transitions
    assert (moved.why, moved.alert.instance_id, moved.alert.state) == (Why.RESOLVED_SAME, 345, "resolved")
