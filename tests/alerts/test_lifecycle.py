"""The alert lifecycle on an injected clock: fire once per instance, escalate step by step (once per
step, on one of two replicas, across a restart), stop on acknowledge, resolve on a SUCCESS."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine

from tests.alerts.conftest import PRODUCTION, T0, WORKFLOWS, config, event
from xihe.agent.alerts.lifecycle import Why
from xihe.agent.alerts.lifestore import InMemoryLifeStore, LifeStore
from xihe.agent.alerts.outbox import InMemoryOutbox, Outbox
from xihe.agent.alerts.pipeline import Pipeline
from xihe.agent.alerts.sql.life import SqlLifeStore
from xihe.agent.alerts.sql.outbox import SqlOutbox
from xihe.agent.alerts.sql.state import SqlAlertStateStore
from xihe.agent.alerts.sql.stores import SqlAlertStores
from xihe.agent.alerts.state import InMemoryAlertStateStore
from xihe.agent.db import open_store_engine
from xihe.config.workflows import WorkflowsConfig

MIN = timedelta(minutes=1)
PROD: dict[str, Any] = {
    "workflow": "order_sync",
    "workflow_code": 1001,
    "project": "etl",
    "environment": "prod",
}
# order_sync pages zhangsan (on call) and lisi (secondary); its owner and the fallback come next
FLOW = WorkflowsConfig.model_validate(
    {
        "workflows": [
            {**w.model_dump(), "owner": "wangwu"} if w.name == "order_sync" else w.model_dump()
            for w in WORKFLOWS.workflows
        ]
    }
)
LIFE = {"lifecycle": {"tiers": {"P0": {"escalate_after": 15, "max_escalations": 4}}, "fallback": ["boss"]}}


def p0(instance_id: int = 101, at: datetime = T0, **kw: Any) -> Any:
    return event(instance_id=instance_id, at=at, host="", **{**PROD, **kw})


def success(instance_id: int, at: datetime, **kw: Any) -> Any:
    return event(
        instance_id=instance_id, at=at, state="SUCCESS", task="", host="", error="", **{**PROD, **kw}
    )


def pipeline(
    life: LifeStore | None = None,
    outbox: Outbox | None = None,
    state: Any = None,
    cfg: dict[str, Any] | None = None,
    **kw: Any,
) -> Pipeline:
    return Pipeline(
        config(**(cfg if cfg is not None else LIFE)),
        FLOW,
        state if state is not None else InMemoryAlertStateStore(),
        outbox if outbox is not None else InMemoryOutbox(),
        production=PRODUCTION,
        life=life if life is not None else InMemoryLifeStore(),
        **kw,
    )


def pages(outbox: Outbox) -> list[str]:
    return [
        r.key.split(":")[-1] + "→" + r.text.split(">")[0].lstrip("<@")
        for r in outbox.rows()
        if r.kind == "page"
    ]


def test_one_alert_per_failed_instance_and_its_short_id_and_ack_line() -> None:
    outbox = InMemoryOutbox()
    p = pipeline(outbox=outbox)
    first = p.feed(p0(), T0)
    assert [t.why for t in first.transitions] == [Why.FIRED]
    again = p.feed(p0(task="t2"), T0 + MIN)  # another failed task of the same instance
    assert again.transitions == ()
    assert p.life is not None
    alert = p.life.find("101")
    assert (
        alert is not None and alert.short == "A1" and alert.state == "firing" and p.life.find("a1") == alert
    )
    moved, why = p.life.acknowledge(alert, "zhangsan", T0 + 2 * MIN)
    assert why is Why.ACKED and moved is not None and moved.alert.acked_by == "zhangsan"
    message = next(r for r in outbox.rows() if r.kind == "instance")
    assert "> 实例 ID：101　告警：A1\n" in message.text  # its own short id, for /ack A1
    line = next(r for r in outbox.rows() if r.kind == "ack")
    assert line.channel == "prod" and "由 zhangsan 认领" in line.text and len(line.text.splitlines()) == 1
    assert p.life.acknowledge(moved.alert, "lisi", T0 + 3 * MIN)[1] is Why.ALREADY_ACKED


def test_escalation_pages_each_step_once_in_order_then_stops() -> None:
    outbox = InMemoryOutbox()
    p = pipeline(outbox=outbox)
    p.feed(p0(), T0)
    for minute in range(0, 120, 1):  # a tick every minute for two hours
        p.tick(T0 + minute * MIN)
    assert pages(outbox) == ["oncall→zhangsan", "secondary→lisi", "owner→wangwu", "fallback→boss"]
    times = [r.created_at for r in outbox.rows() if r.kind == "page"]
    assert times == [T0 + 15 * MIN, T0 + 30 * MIN, T0 + 45 * MIN, T0 + 60 * MIN]


def test_max_escalations_caps_the_pages() -> None:
    outbox = InMemoryOutbox()
    cfg = {"lifecycle": {"tiers": {"P0": {"escalate_after": 10, "max_escalations": 2}}, "fallback": ["boss"]}}
    p = pipeline(outbox=outbox, cfg=cfg)
    p.feed(p0(), T0)
    for minute in range(0, 200, 5):
        p.tick(T0 + minute * MIN)
    assert pages(outbox) == ["oncall→zhangsan", "secondary→lisi"]


def test_ack_stops_escalation() -> None:
    outbox = InMemoryOutbox()
    p = pipeline(outbox=outbox)
    p.feed(p0(), T0)
    p.tick(T0 + 16 * MIN)
    assert p.life is not None
    alert = p.life.find("")  # /ack alone: the newest open alert
    assert alert is not None
    p.life.acknowledge(alert, "lisi", T0 + 20 * MIN)
    for minute in range(20, 180, 5):
        p.tick(T0 + minute * MIN)
    assert pages(outbox) == ["oncall→zhangsan"]


def test_p1_does_not_escalate_by_default() -> None:
    outbox = InMemoryOutbox()
    p = pipeline(outbox=outbox, cfg={})
    p.feed(event(instance_id=7), T0)  # profile_test: P1
    for minute in range(0, 300, 10):
        p.tick(T0 + minute * MIN)
    assert pages(outbox) == [] and p.life is not None and p.life.find("7") is not None


def test_a_rerun_success_resolves_with_time_and_who_reran() -> None:
    outbox = InMemoryOutbox()
    p = pipeline(outbox=outbox)
    p.feed(p0(), T0)
    out = p.feed(success(101, T0 + 12 * MIN, rerun_by="lisi"), T0 + 12 * MIN)
    assert [(t.why, t.alert.state, t.actor) for t in out.transitions] == [
        (Why.RESOLVED_SAME, "resolved", "lisi")
    ]
    (row,) = [r for r in outbox.rows() if r.kind == "resolved"]
    assert (
        row.channel == "prod"
        and "实例 101 重跑成功" in row.text
        and "用时 12m00s" in row.text
        and "lisi" in row.text
    )
    for minute in range(12, 120, 5):  # resolved: no page any more
        p.tick(T0 + minute * MIN)
    assert pages(outbox) == []
    assert p.feed(success(101, T0 + 30 * MIN, rerun_by="lisi"), T0 + 30 * MIN).transitions == ()


def test_a_later_run_of_the_same_business_date_resolves_another_date_does_not() -> None:
    outbox = InMemoryOutbox()
    p = pipeline(outbox=outbox)
    p.feed(p0(business_date="2026-12-01"), T0)
    other = p.feed(success(202, T0 + 5 * MIN, business_date="2026-11-30"), T0 + 5 * MIN)
    assert other.transitions == ()
    out = p.feed(success(203, T0 + 10 * MIN, business_date="2026-12-01"), T0 + 10 * MIN)
    (t,) = out.transitions
    assert t.why is Why.RESOLVED_LATER and t.alert.instance_id == 101 and t.alert.resolved_instance == 203
    (row,) = [r for r in outbox.rows() if r.kind == "resolved"]
    assert "同一业务日期 2026-12-01 的实例 203 运行成功" in row.text


def test_send_resolved_off_for_a_tier_records_but_says_nothing() -> None:
    outbox = InMemoryOutbox()
    cfg = {"lifecycle": {"tiers": {"P0": {"escalate_after": 15, "send_resolved": False}}}}
    p = pipeline(outbox=outbox, cfg=cfg)
    p.feed(p0(), T0)
    (t,) = p.feed(success(101, T0 + MIN), T0 + MIN).transitions
    assert t.alert.state == "resolved" and [r for r in outbox.rows() if r.kind == "resolved"] == []


def test_an_alert_open_too_long_expires() -> None:
    p = pipeline(cfg={"lifecycle": {"expire_hours": 2}})
    p.feed(event(instance_id=7), T0)
    moves = p.tick(T0 + 2 * timedelta(hours=1)).transitions
    assert [(t.why, t.alert.state) for t in moves] == [(Why.EXPIRED, "expired")]


def test_storm_instances_each_get_one_alert() -> None:
    p = pipeline(cfg={"node_storm": {"threshold": 3, "window_minutes": 10}})
    for i in range(5):
        p.feed(event(instance_id=10 + i, host="10.0.0.9:1", error=f"e{i}"), T0 + i * MIN)
    assert p.life is not None
    assert sorted(a.instance_id for a in p.life.store.open_alerts()) == [10, 11, 12, 13, 14]


# ---- two replicas over one database, and a restart ---------------------------------------------
@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    eng = open_store_engine(db_url)
    yield eng
    eng.dispose()


def replica(engine: Engine, holder: str) -> tuple[Pipeline, SqlAlertStores]:
    stores = SqlAlertStores(engine)
    p = pipeline(
        life=SqlLifeStore(stores),
        outbox=SqlOutbox(stores),
        state=SqlAlertStateStore(stores, lambda: T0),
        holder=holder,
    )
    return p, stores


def test_escalation_on_two_replicas_across_a_restart_pages_each_step_once(engine: Engine) -> None:
    a, sa = replica(engine, "replica-a")
    b, sb = replica(engine, "replica-b")
    with sa.unit():
        a.feed(p0(), T0)
    for minute in range(0, 40):
        for p, s in ((a, sa), (b, sb)):
            with s.unit():
                p.tick(T0 + minute * MIN)
    b, sb = replica(engine, "replica-b")  # b restarts: a new process over the same store
    for minute in range(40, 120):
        for p, s in ((b, sb), (a, sa)):
            with s.unit():
                p.tick(T0 + minute * MIN)
    outbox = SqlOutbox(sa)
    assert pages(outbox) == ["oncall→zhangsan", "secondary→lisi", "owner→wangwu", "fallback→boss"]
    life = SqlLifeStore(sa)
    alert = life.get(101)
    assert alert is not None and alert.pages == 4
    assert [(pg.step, pg.number) for pg in life.pages(alert.id)] == [
        ("oncall", 1),
        ("secondary", 2),
        ("owner", 3),
        ("fallback", 4),
    ]
    assert {pg.holder for pg in life.pages(alert.id)} <= {"replica-a", "replica-b"}


def test_sql_ack_then_success_on_another_replica(engine: Engine) -> None:
    a, sa = replica(engine, "replica-a")
    b, sb = replica(engine, "replica-b")
    with sa.unit():
        a.feed(p0(), T0)
    assert b.life is not None
    with sb.unit():
        alert = b.life.find("A1")
        assert alert is not None
        b.life.acknowledge(alert, "zhangsan", T0 + MIN)
    with sa.unit():
        for minute in range(1, 60):
            a.tick(T0 + minute * MIN)
        out = a.feed(success(101, T0 + 61 * MIN), T0 + 61 * MIN)
    assert [t.why for t in out.transitions] == [Why.RESOLVED_SAME]
    assert pages(SqlOutbox(sa)) == []
    final = SqlLifeStore(sa).get(101)
    assert final is not None and (final.state, final.acked_by) == ("resolved", "zhangsan")


def test_a_team_p0_mentions_its_current_on_call_and_escalates_to_who_is_on_call_then() -> None:
    team = WorkflowsConfig.model_validate(
        {
            "workflows": [
                {**w.model_dump(), "team": "data"} if w.name == "order_sync" else w.model_dump()
                for w in FLOW.workflows
            ]
        }
    )
    handoff = T0 + 10 * MIN

    def rotation(wf: Any, at: datetime) -> tuple[str | None, str | None]:
        return ("alice", "bob") if at < handoff else ("carol", "bob")  # carol takes over at the hand-off

    outbox = InMemoryOutbox()
    p = Pipeline(
        config(**LIFE),
        team,
        InMemoryAlertStateStore(),
        outbox,
        production=PRODUCTION,
        life=InMemoryLifeStore(),
        oncall=rotation,
    )
    p.feed(p0(), T0)
    (first,) = [r for r in outbox.rows() if r.kind == "instance"]
    assert (
        first.text.startswith("<@alice>") and "<@zhangsan>" not in first.text and "<@bob>" not in first.text
    )
    for minute in range(0, 40):
        p.tick(T0 + minute * MIN)
    assert pages(outbox) == ["oncall→carol", "secondary→bob"]  # the on-call at the time of the page


def test_bare_ack_takes_the_newest_open_alert_of_the_conversations_channels() -> None:
    p = pipeline()
    p.feed(p0(101), T0)  # prod
    p.feed(event(instance_id=7), T0 + MIN)  # profile_test: default channel, newer
    assert p.life is not None
    newest_prod, newest = p.life.find("", ["prod"]), p.life.find("")
    assert newest_prod is not None and newest_prod.instance_id == 101
    assert newest is not None and newest.instance_id == 7
    assert p.life.find("", ["nowhere"]) is None and p.life.find("A99") is None and p.life.find("x") is None
    assert p.life.find("9" * 30) is None  # beyond a 64-bit id


def test_two_replicas_ticking_at_once_page_each_step_once(engine: Engine) -> None:
    a, sa = replica(engine, "replica-a")
    b, sb = replica(engine, "replica-b")
    with sa.unit():
        a.feed(p0(), T0)
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def run(p: Pipeline, s: SqlAlertStores) -> None:
        try:
            for minute in range(0, 80):
                barrier.wait(timeout=30)  # both tick the same minute, racing
                with s.unit():
                    p.tick(T0 + minute * MIN)
        except BaseException as exc:  # surfaced in the main thread
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=run, args=r) for r in ((a, sa), (b, sb))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert pages(SqlOutbox(sa)) == ["oncall→zhangsan", "secondary→lisi", "owner→wangwu", "fallback→boss"]


def test_the_resolved_message_links_the_original_run_page() -> None:
    outbox = InMemoryOutbox()
    p = pipeline(outbox=outbox, cfg={**LIFE, "public_base_url": "https://xihe.example.com"})
    p.feed(p0(), T0)
    p.feed(success(101, T0 + MIN), T0 + MIN)
    (row,) = [r for r in outbox.rows() if r.kind == "resolved"]
    assert row.text.endswith("[原告警与运行详情](https://xihe.example.com/ui/runs/101)")
    assert "重跑：非 xihe 发起（DolphinScheduler 界面或自动重试）" in row.text


@pytest.mark.parametrize("kind", ["memory", "sql"])
def test_earliest_is_the_first_page_due_and_the_oldest_open_alert(kind: str, engine: Engine) -> None:
    """What an idle tick compares `now` with (issue 30): the earliest `next_page_at` of a firing alert
    and the earliest `fired_at` of an open one, on both stores, as alerts are acked and resolved."""
    from xihe.agent.alerts.lifecycle import acknowledge, fire, resolve
    from xihe.agent.alerts.model import Tier
    from xihe.config.alerts import TierPolicy

    store: LifeStore = InMemoryLifeStore() if kind == "memory" else SqlLifeStore(SqlAlertStores(engine))
    assert store.earliest() == (None, None)
    policy = TierPolicy(escalate_after=15)
    saved = []
    for n, (iid, at) in enumerate([(1, T0 + 5 * MIN), (2, T0), (3, T0 + 9 * MIN)]):
        alert, _ = fire(
            None,
            instance_id=iid,
            project="etl",
            workflow="wf",
            business_date="",
            tier=Tier.P0,
            channel="default",
            notification_key=f"k{n}",
            now=at,
            policy=policy,
        )
        assert alert is not None
        saved.append(store.save(alert))
    assert store.earliest() == (T0 + 15 * MIN, T0)
    acked, _ = acknowledge(saved[1], "zhangsan", T0 + 10 * MIN)  # no more pages, still open
    assert acked is not None
    store.save(acked)
    assert store.earliest() == (T0 + 20 * MIN, T0)
    done = resolve(acked, T0 + 11 * MIN, Why.RESOLVED_SAME, 2)
    assert done is not None
    store.save(done)
    assert store.earliest() == (T0 + 20 * MIN, T0 + 5 * MIN)
