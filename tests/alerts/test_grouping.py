"""Grouping rules on a FakeClock: per instance, fingerprint windows, P2 summaries, node storms, restarts."""

from __future__ import annotations

import re
from datetime import timedelta

from tests.alerts.conftest import T0, config, event
from xihe.agent.alerts.model import Kind, Reason
from xihe.agent.alerts.outbox import InMemoryOutbox
from xihe.agent.alerts.state import InMemoryAlertStateStore
from xihe.agent.clock import FakeClock


def kinds(outbox: InMemoryOutbox) -> list[str]:
    return [r.kind for r in outbox.rows()]


def test_several_failed_tasks_of_one_instance_give_one_message(make_pipeline):
    clock = FakeClock(T0)
    outbox = InMemoryOutbox()
    p = make_pipeline(config(instance_wait_seconds=15), outbox=outbox)
    r1 = p.feed(event(task="a"), clock())
    r2 = p.feed(event(task="b"), clock.advance(5))
    assert r1.records[0].reason is Reason.NEW_INSTANCE and r2.records[0].reason is Reason.JOINED_INSTANCE
    assert outbox.rows() == []  # still held
    out = p.tick(clock.advance(10))
    assert len(out.notifications) == 1 and len(outbox.rows()) == 1
    assert "失败任务：a（重试 0/0）、b（重试 0/0）" in out.notifications[0].text


def test_a_task_failing_after_the_message_comes_in_one_follow_up(make_pipeline):
    clock = FakeClock(T0)
    outbox = InMemoryOutbox()
    p = make_pipeline(config(instance_wait_seconds=15), outbox=outbox)
    p.feed(event(task="a"), clock())
    p.tick(clock.advance(15))
    late = p.feed(event(task="late"), clock.advance(120))
    later = p.feed(event(task="later"), clock.advance(5))
    assert [r.reason for r in late.records + later.records] == [Reason.JOINED_INSTANCE] * 2
    same = p.feed(event(task="", failed_task="a"), clock.advance(1))
    assert same.records[0].reason is Reason.INSTANCE_ALREADY_NOTIFIED  # the workflow event adds nothing new
    p.tick(clock.advance(15))
    rows = outbox.rows()
    assert [r.key for r in rows] == ["inst:1:P1:default", "inst:1:P1:default:more1"]
    assert "（更新 1）" in rows[1].text and "late（重试 0/0）、later" in rows[1].text
    assert {late.records[0].notification_key, later.records[0].notification_key} == {rows[1].key}


def test_duplicate_event_is_recorded_not_processed(make_pipeline):
    p = make_pipeline()
    p.feed(event(), T0)
    assert p.feed(event(), T0 + timedelta(seconds=1)).records[0].reason is Reason.DUPLICATE_EVENT


def test_same_fingerprint_folds_into_one_aggregate_at_window_end(make_pipeline):
    clock = FakeClock(T0)
    outbox = InMemoryOutbox()
    p = make_pipeline(config(window_minutes=10), outbox=outbox)
    p.feed(event(instance_id=1, error="timeout after 30s on 10.0.0.5:80"), clock())
    for i in range(2, 6):  # same cause, different numbers → same fingerprint
        r = p.feed(
            event(
                instance_id=i,
                host=f"10.0.1.{i}:1",
                error=f"timeout after {i}s on 10.0.0.{i}:80",
                workflow="daily_sales",
                workflow_code=1002,
                project="etl",
            ),
            clock.advance(60),
        )
        assert r.records[0].reason is Reason.FINGERPRINT_REPEAT
    assert kinds(outbox) == [Kind.INSTANCE.value]
    p.tick(T0 + timedelta(minutes=9, seconds=59))
    assert kinds(outbox) == [Kind.INSTANCE.value]
    out = p.tick(T0 + timedelta(minutes=10))
    assert kinds(outbox) == [Kind.INSTANCE.value, Kind.AGGREGATE.value]
    text = out.notifications[0].text
    assert "4 次" in text and "daily_sales×4" in text and "profile_test×1" in text


def test_window_without_repeats_sends_no_aggregate(make_pipeline):
    outbox = InMemoryOutbox()
    p = make_pipeline(outbox=outbox)
    p.feed(event(), T0)
    p.tick(T0 + timedelta(hours=1))
    assert kinds(outbox) == [Kind.INSTANCE.value]


def test_p0_is_never_folded_and_mentions_oncall(make_pipeline):
    outbox = InMemoryOutbox()
    p = make_pipeline(outbox=outbox)
    prod = {"workflow": "order_sync", "workflow_code": 1001, "project": "etl", "environment": "prod"}
    p.feed(event(instance_id=1, **prod), T0)
    r = p.feed(event(instance_id=2, host="10.0.0.2:1", **prod), T0 + timedelta(minutes=1))
    assert r.records[0].reason is Reason.NEW_INSTANCE
    rows = outbox.rows()
    assert len(rows) == 2 and all(row.text.startswith("<@zhangsan> <@lisi>") for row in rows)
    assert all(row.channel == "prod" and row.tier == "P0" for row in rows)


def test_p1_is_pushed_without_mentions(make_pipeline):
    outbox = InMemoryOutbox()
    make_pipeline(outbox=outbox).feed(event(), T0)
    assert "<@" not in outbox.rows()[0].text and outbox.rows()[0].tier == "P1"


def test_retried_failures_are_summarised_once_per_window(make_pipeline):
    outbox = InMemoryOutbox()
    p = make_pipeline(outbox=outbox)
    for i in range(1, 4):
        r = p.feed(
            event(instance_id=i, host=f"h{i}", retry_times=2, max_retry_times=2, error=f"e{i} different"),
            T0 + timedelta(minutes=i),
        )
        assert r.records[0].reason is Reason.AGGREGATED_P2
    assert outbox.rows() == []
    p.tick(T0 + timedelta(minutes=11))
    assert kinds(outbox) == [Kind.SUMMARY.value] and "3 次" in outbox.rows()[0].text


def test_node_storm_absorbs_held_messages_and_follows_up_with_only_later_failures(make_pipeline):
    clock = FakeClock(T0)
    outbox = InMemoryOutbox()
    p = make_pipeline(
        config(instance_wait_seconds=30, node_storm={"threshold": 3, "window_minutes": 10}), outbox=outbox
    )
    reasons = []
    for i in range(1, 7):
        out = p.feed(
            event(instance_id=i, host="10.0.0.9:1234", error=f"distinct cause {'x' * i}"), clock.advance(2)
        )
        reasons.append(out.records[-1].reason)  # absorbed instances' records come first
    assert reasons[:2] == [Reason.NEW_INSTANCE, Reason.NEW_INSTANCE]
    assert reasons[2] is Reason.NODE_STORM_OPENED and set(reasons[3:]) == {Reason.NODE_STORM}
    p.tick(clock.advance(60))  # the held instance messages are named in the node alert instead
    assert kinds(outbox) == [Kind.NODE.value]
    assert (
        "10.0.0.9:1234" in outbox.rows()[0].text and "实例（6 个）：1、2、3、4、5、6" in outbox.rows()[0].text
    )
    p.feed(event(instance_id=7, host="10.0.0.9:1234", error="later"), clock.advance(60))
    p.tick(T0 + timedelta(minutes=11))  # end of the storm window: one follow-up with the later one only
    assert kinds(outbox) == [Kind.NODE.value, Kind.NODE.value]
    assert "又有 1 次失败" in outbox.rows()[1].text and "新增实例（1 个）：7" in outbox.rows()[1].text


def test_maintenance_from_yaml_cron_suppresses(make_pipeline):
    cfg = config(
        timezone="UTC",
        maintenance=[
            {
                "name": "nightly",
                "cron": "55 8 * * *",
                "duration_minutes": 10,
                "scope": {"kind": "project", "value": "sandbox"},
            }
        ],
    )
    outbox = InMemoryOutbox()
    p = make_pipeline(cfg, outbox=outbox)
    r = p.feed(event(), T0)  # 09:00 is inside 08:55 + 10 min
    assert r.records[0].reason is Reason.MAINTENANCE and "nightly" in r.records[0].detail
    assert p.feed(event(instance_id=2), T0 + timedelta(minutes=5)).records[0].reason is Reason.NEW_INSTANCE


def test_restart_in_the_middle_of_a_window_loses_nothing(make_pipeline):
    cfg = config(instance_wait_seconds=15)
    state = InMemoryAlertStateStore(serialize=True)  # stored as JSON text, as a database row would be
    outbox = InMemoryOutbox()
    first = make_pipeline(cfg, state=state, outbox=outbox)
    first.feed(event(instance_id=1, task="a"), T0)
    first.feed(event(instance_id=1, task="b"), T0 + timedelta(seconds=5))
    first.feed(event(instance_id=2, host="10.0.0.2:1"), T0 + timedelta(seconds=20))
    del first  # "crash"
    second = make_pipeline(cfg, state=state, outbox=outbox)
    r = second.feed(event(instance_id=3, host="10.0.0.3:1"), T0 + timedelta(minutes=2))
    assert r.records[0].reason is Reason.FINGERPRINT_REPEAT
    assert second.feed(event(instance_id=1, task="b"), T0 + timedelta(minutes=3)).records[0].reason is (
        Reason.DUPLICATE_EVENT
    )
    second.tick(T0 + timedelta(minutes=10, seconds=1))
    rows = outbox.rows()
    assert [r.kind for r in rows] == ["instance", "aggregate"]
    assert "失败任务：a（重试 0/0）、b（重试 0/0）" in rows[0].text
    assert "2 次" in rows[1].text  # instances 2 and 3 folded across the restart
    # a third pipeline re-flushing the same state cannot send twice
    third = make_pipeline(cfg, state=state, outbox=outbox)
    third.tick(T0 + timedelta(hours=1))
    assert len(outbox.rows()) == 2


def test_a_node_alert_takes_the_highest_tier_present_and_escalates_when_a_higher_one_joins(make_pipeline):
    clock = FakeClock(T0)
    outbox = InMemoryOutbox()
    p = make_pipeline(config(instance_wait_seconds=30, node_storm={"threshold": 3}), outbox=outbox)
    host = {"host": "10.0.0.9:1234"}
    core = {"workflow": "order_sync", "workflow_code": 1001, "project": "etl", "environment": "prod"}
    p.feed(event(instance_id=1, error="a", **host), clock.advance(1))  # P1
    p.feed(event(instance_id=2, error="bb", **host, **core), clock.advance(1))  # P0, sent at once
    opened = p.feed(event(instance_id=3, error="ccc", **host), clock.advance(1))  # P1 opens the storm
    assert opened.records[-1].reason is Reason.NODE_STORM_OPENED
    node = [n for n in opened.notifications if n.kind is Kind.NODE]
    assert [n.tier.value for n in node] == ["P0"] and node[0].text.startswith("<@zhangsan> <@lisi>")

    q = make_pipeline(config(node_storm={"threshold": 2}), outbox=InMemoryOutbox())
    q.feed(event(instance_id=11, error="a", **host), T0)
    q.feed(event(instance_id=12, error="bb", **host), T0 + timedelta(seconds=1))  # a P1 storm
    up = q.feed(event(instance_id=13, error="ccc", **host, **core), T0 + timedelta(seconds=2))
    assert up.records[0].reason is Reason.NODE_STORM
    assert [(n.kind, n.tier.value) for n in up.notifications] == [(Kind.NODE, "P0")]
    assert "升级为 P0" in up.notifications[0].text and "13" in up.notifications[0].text
    assert up.records[0].notification_key == up.notifications[0].key


def test_a_window_names_every_instance_over_several_messages_when_they_do_not_fit(make_pipeline):
    outbox = InMemoryOutbox()
    p = make_pipeline(config(max_bytes=1024, node_storm={"threshold": 2}), outbox=outbox)
    ids = list(range(900_000, 900_300))
    for k, iid in enumerate(ids):
        p.feed(event(instance_id=iid, host="10.0.0.9:1234", error=f"e{k}"), T0 + timedelta(seconds=k))
    p.tick(T0 + timedelta(hours=1))
    follow = [r for r in outbox.rows() if ":end:" in r.key or ":end#" in r.key.replace(":default", "")]
    text = "\n".join(r.text for r in outbox.rows() if r.key.startswith("node:"))
    assert all(str(i) in text for i in ids)
    assert all(len(r.text.encode()) <= 1024 for r in outbox.rows())
    assert len(follow) > 1 and "（续 2/" in follow[1].text
    assert "窗口内共 300 个实例" in follow[0].text  # the true count, not a capped one


def listed(text: str) -> list[str]:
    """The ids a message lists as its instances (the `实例（N 个）：…` line), not ids named in notes."""
    found = re.search(r"实例（\d+ 个[^）]*）：([^\n]*)", text)
    return found.group(1).split("、") if found else []


def test_a_node_storm_lists_nothing_twice_and_marks_what_was_alerted_before(make_pipeline):
    clock = FakeClock(T0)
    outbox = InMemoryOutbox()
    p = make_pipeline(config(instance_wait_seconds=30, node_storm={"threshold": 4}), outbox=outbox)
    host = {"host": "10.0.0.9:1234"}
    core = {"workflow": "order_sync", "workflow_code": 1001, "project": "etl", "environment": "prod"}
    p.feed(event(instance_id=101, error="a", **host, **core), clock.advance(1))  # P0: sent at once
    p.feed(event(instance_id=102, error="bb", **host), clock.advance(1))  # P1: held 30 s
    p.tick(clock.advance(40))  # 102's own message goes out
    p.feed(event(instance_id=103, error="ccc", **host), clock.advance(1))  # held
    opened = p.feed(event(instance_id=104, error="dddd", **host), clock.advance(1))  # the 4th: a storm
    assert opened.records[-1].reason is Reason.NODE_STORM_OPENED
    p.feed(event(instance_id=105, error="eeeee", **host), clock.advance(60))  # after the node alert
    p.tick(T0 + timedelta(minutes=30))  # the window's end: its follow-up
    rows = outbox.rows()
    assert [r.kind for r in rows] == ["instance", "instance", "node", "node"]
    alert, followup = rows[2].text, rows[3].text
    # the P0 and P1 sent before the storm are counted in the node alert, marked, not listed again
    assert "4 个实例在该节点失败" in alert
    assert listed(alert) == ["103", "104"]
    assert "已单独告警（也计入本告警）：101、102" in alert
    assert listed(followup) == ["105"] and "已单独告警" not in followup
    every = [i for r in rows for i in listed(r.text)]
    assert sorted(every) == sorted(set(every))  # no instance listed twice across all messages


def test_a_node_alert_escalation_lists_only_what_the_earlier_alert_did_not(make_pipeline):
    outbox = InMemoryOutbox()
    p = make_pipeline(config(instance_wait_seconds=30, node_storm={"threshold": 2}), outbox=outbox)
    host = {"host": "10.0.0.9:1234"}
    core = {"workflow": "order_sync", "workflow_code": 1001, "project": "etl", "environment": "prod"}
    p.feed(event(instance_id=11, error="a", **host), T0)
    p.feed(event(instance_id=12, error="bb", **host), T0 + timedelta(seconds=1))  # a P1 storm
    p.tick(T0 + timedelta(seconds=40))  # its alert lists 11 and 12
    assert listed(outbox.rows()[0].text) == ["11", "12"]
    up = p.feed(event(instance_id=13, error="ccc", **host, **core), T0 + timedelta(seconds=50))
    (text,) = [n.text for n in up.notifications]
    assert "升级为 P0" in text and "3 个实例" in text
    assert listed(text) == ["13"] and "前一条节点告警已列出 2 个" in text
