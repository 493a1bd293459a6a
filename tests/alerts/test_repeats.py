"""Storms and repeats (issue 27 item 5) on a FakeClock: one message per problem, repeats counted.

Each test replays what on-call met: an 8-instance storm on one host, the same failure at 10:00,
10:20 and 10:40, and a node follow-up whose 最近错误 was the oldest error of the window.
"""

from __future__ import annotations

import re
from datetime import timedelta

from tests.alerts.conftest import T0, config, event
from xihe.agent.alerts.model import Kind, Reason
from xihe.agent.alerts.outbox import InMemoryOutbox
from xihe.agent.alerts.state import InMemoryAlertStateStore
from xihe.agent.clock import FakeClock

HOST = "10.0.0.9:1234"
CORE = {"workflow": "order_sync", "workflow_code": 1001, "project": "etl", "environment": "prod"}


def ids_listed(text: str) -> list[int]:
    m = re.search(r"实例（\d+ 个[^）]*）：([\d、]+)", text)
    return [int(i) for i in m.group(1).split("、")] if m else []


def test_an_eight_instance_burst_on_one_host_is_one_message_naming_all_eight(make_pipeline):
    clock = FakeClock(T0)
    outbox = InMemoryOutbox()
    p = make_pipeline(config(instance_wait_seconds=15), outbox=outbox)  # threshold 5 in 10 min
    for i in range(1, 9):
        p.feed(event(instance_id=i, host=HOST, error=f"cause {'x' * i}"), clock.advance(1))
    p.tick(clock.advance(60))
    p.tick(T0 + timedelta(hours=1))  # the storm window ended
    rows = outbox.rows()
    assert [r.kind for r in rows] == [Kind.NODE.value]
    assert ids_listed(rows[0].text) == list(range(1, 9))


def test_a_node_follow_up_lists_only_instances_not_named_in_the_node_alert(make_pipeline):
    clock = FakeClock(T0)
    outbox = InMemoryOutbox()
    p = make_pipeline(config(instance_wait_seconds=15), outbox=outbox)
    for i in range(1, 6):
        p.feed(event(instance_id=i, host=HOST, error=f"old cause {'x' * i}"), clock.advance(1))
    p.tick(clock.advance(60))  # the node alert names 1..5
    p.feed(event(instance_id=6, host=HOST, error="disk full on /data"), clock.advance(60))
    p.feed(event(instance_id=7, host=HOST, error="the latest: no space left"), clock.advance(60))
    p.tick(T0 + timedelta(hours=1))
    rows = outbox.rows()
    assert [r.kind for r in rows] == [Kind.NODE.value, Kind.NODE.value]
    assert ids_listed(rows[0].text) == [1, 2, 3, 4, 5]
    assert ids_listed(rows[1].text) == [6, 7]  # 1..5 were named already
    assert "最近错误**：the latest: no space left" in rows[1].text


def test_p2_summary_does_not_relist_instances_named_in_a_node_alert(make_pipeline):
    outbox = InMemoryOutbox()
    p = make_pipeline(config(node_storm={"threshold": 3}), outbox=outbox)
    p2 = {"retry_times": 2, "max_retry_times": 2}
    p.feed(event(instance_id=1, host="10.0.0.2:1", error="elsewhere", **p2), T0)
    p.feed(event(instance_id=2, host=HOST, error="a", **p2), T0 + timedelta(seconds=1))
    p.feed(event(instance_id=3, host=HOST, error="bb", **p2), T0 + timedelta(seconds=2))
    opened = p.feed(event(instance_id=4, host=HOST, error="ccc", **p2), T0 + timedelta(seconds=3))
    assert [r.reason for r in opened.records] == [Reason.NODE_STORM] * 2 + [Reason.NODE_STORM_OPENED]
    assert [r.instance_id for r in opened.records] == [2, 3, 4]  # 2 and 3 are named in the node alert now
    p.tick(T0 + timedelta(hours=1))
    by_kind = {r.kind: r.text for r in outbox.rows()}
    assert ids_listed(by_kind[Kind.NODE.value]) == [2, 3, 4]
    assert ids_listed(by_kind[Kind.SUMMARY.value]) == [1]
    assert "1 个实例，1 次" in by_kind[Kind.SUMMARY.value]


def test_a_p0_storm_still_pages_at_once(make_pipeline):
    outbox = InMemoryOutbox()
    p = make_pipeline(config(instance_wait_seconds=15, node_storm={"threshold": 2}), outbox=outbox)
    p.feed(event(instance_id=1, host=HOST, error="a"), T0)
    out = p.feed(event(instance_id=2, host=HOST, error="bb", **CORE), T0 + timedelta(seconds=1))
    assert [(n.kind, n.tier.value) for n in out.notifications] == [(Kind.NODE, "P0")]


def test_the_third_time_in_40_minutes_says_so_and_links_the_first(make_pipeline):
    state = InMemoryAlertStateStore(serialize=True)  # across a restart, as the database keeps it
    outbox = InMemoryOutbox()
    cfg = config(public_base_url="https://xihe.example.com")
    texts = []
    for n, minutes in enumerate((0, 20, 40), 1):
        p = make_pipeline(cfg, state=state, outbox=outbox)
        out = p.feed(event(instance_id=100 + n, **CORE), T0 + timedelta(minutes=minutes))
        assert [(x.kind, x.tier.value) for x in out.notifications] == [(Kind.INSTANCE, "P0")]
        texts.append(out.notifications[0].text)
        subject = out.notifications[0].subject
    assert "第" not in texts[0]
    assert "第 2 次（20 分钟内）" in texts[1]
    assert "第 3 次（40 分钟内）" in texts[2] and "third time in 40 minutes" in subject
    assert "[首次告警](https://xihe.example.com/ui/runs/101)" in texts[2]


def test_a_repeat_outside_the_look_back_starts_counting_again(make_pipeline):
    outbox = InMemoryOutbox()
    p = make_pipeline(config(repeat_lookback_minutes=30), outbox=outbox)
    p.feed(event(instance_id=1, **CORE), T0)
    p.feed(event(instance_id=2, **CORE), T0 + timedelta(minutes=20))
    late = p.feed(event(instance_id=3, **CORE), T0 + timedelta(minutes=51))  # 31 min after the last
    assert "第 2 次" in outbox.rows()[1].text
    assert "第" not in late.notifications[0].text
    other = p.feed(
        event(instance_id=4, error="a different cause: HTTP 503", **CORE), T0 + timedelta(minutes=52)
    )
    assert "第" not in other.notifications[0].text  # same workflow, another fingerprint
