"""Window messages (aggregate windows, node storms, P2 summaries) name each instance with its alert's
short id, `101（A7）`, so `/ack A7` works from them; an instance without an alert stays a bare id."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from tests.alerts.conftest import T0, config, event
from xihe.agent.alerts.lifestore import InMemoryLifeStore
from xihe.agent.alerts.model import Kind, Reason
from xihe.agent.alerts.outbox import InMemoryOutbox
from xihe.agent.alerts.pipeline import Pipeline
from xihe.agent.clock import FakeClock

Make = Callable[..., Pipeline]


def texts(outbox: InMemoryOutbox, kind: Kind) -> list[str]:
    return [r.text for r in outbox.rows() if r.kind == kind.value]


def short_of(p: Pipeline, instance_id: int) -> str:
    assert p.life is not None
    a = p.life.store.get(instance_id)
    assert a is not None
    return a.short


def test_a_node_storm_names_each_instance_with_its_alert_id_and_ack_finds_it(make_pipeline: Make) -> None:
    clock, outbox = FakeClock(T0), InMemoryOutbox()
    cfg = config(instance_wait_seconds=30, node_storm={"threshold": 3, "window_minutes": 10})
    p = make_pipeline(cfg, outbox=outbox, life=InMemoryLifeStore())
    for i in range(1, 5):
        p.feed(
            event(instance_id=i, host="10.0.0.9:1234", error=f"distinct cause {'x' * i}"), clock.advance(2)
        )
    p.tick(clock.advance(60))
    (node,) = texts(outbox, Kind.NODE)
    ids = "、".join(f"{i}（{short_of(p, i)}）" for i in range(1, 5))
    assert f"实例（4 个）：{ids}" in node and "/ack 告警ID" in node
    assert p.life is not None
    found = p.life.find(short_of(p, 3))
    assert found is not None and found.instance_id == 3


def test_an_aggregate_window_names_alert_ids(make_pipeline: Make) -> None:
    clock, outbox = FakeClock(T0), InMemoryOutbox()
    p = make_pipeline(config(window_minutes=10), outbox=outbox, life=InMemoryLifeStore())
    p.feed(event(instance_id=1, error="timeout after 30s on 10.0.0.5:80"), clock())
    for i in range(2, 4):
        extra: dict[str, Any] = {"workflow": "daily_sales", "workflow_code": 1002, "project": "etl"}
        r = p.feed(event(instance_id=i, host=f"10.0.1.{i}:1", error=f"timeout after {i}s on 10.0.0.{i}:80", **extra),
                   clock.advance(60))  # fmt: skip
        assert r.records[0].reason is Reason.FINGERPRINT_REPEAT
    p.tick(T0 + timedelta(minutes=10))
    (agg,) = texts(outbox, Kind.AGGREGATE)
    assert f"2（{short_of(p, 2)}）、3（{short_of(p, 3)}）" in agg and "/ack 告警ID" in agg


def test_a_p2_summary_names_alert_ids(make_pipeline: Make) -> None:
    outbox = InMemoryOutbox()
    p = make_pipeline(outbox=outbox, life=InMemoryLifeStore())
    for i in range(1, 3):
        r = p.feed(
            event(instance_id=i, host=f"h{i}", retry_times=2, max_retry_times=2, error=f"e{i} different"),
            T0 + timedelta(minutes=i),
        )
        assert r.records[0].reason is Reason.AGGREGATED_P2
    p.tick(T0 + timedelta(minutes=11))
    (summary,) = texts(outbox, Kind.SUMMARY)
    assert f"实例（2 个）：1（{short_of(p, 1)}）、2（{short_of(p, 2)}）" in summary
    assert "/ack 告警ID" in summary


def test_without_a_lifecycle_the_ids_stay_bare_and_no_ack_hint(make_pipeline: Make) -> None:
    outbox = InMemoryOutbox()
    p = make_pipeline(outbox=outbox)
    for i in range(1, 3):
        p.feed(event(instance_id=i, host=f"h{i}", retry_times=2, max_retry_times=2, error=f"e{i} x"),
               T0 + timedelta(minutes=i))  # fmt: skip
    p.tick(T0 + timedelta(minutes=11))
    (summary,) = texts(outbox, Kind.SUMMARY)
    assert "实例（2 个）：1、2" in summary and "/ack" not in summary
