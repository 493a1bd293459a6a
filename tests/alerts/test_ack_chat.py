"""`/ack` in a whole bot over SQLite: the group hears who has the alert, the escalation stops, the
change is audited; a rerun's SUCCESS resolves it; `xihe alerts stats` measures it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.alerts.feature_support import KEY_PROD, AlertsApp, Sinks, failure, run_jobs, svc
from xihe.agent.alert_event import AlertEvent
from xihe.agent.cli.main import main
from xihe.agent.clock import FakeClock
from xihe.agent.inbound import Inbound

P0 = {"project": "etl", "workflow": "order_sync", "workflow_code": 1001, "environment": "prod"}
LIFE = {"lifecycle": {"tiers": {"P0": {"escalate_after": 10, "max_escalations": 3}}, "fallback": ["dave"]}}


def test_ack_tells_the_group_stops_escalation_and_a_rerun_resolves(
    alerts_app: AlertsApp, sinks: Sinks, clock: FakeClock, sqlite_url: str
) -> None:
    app = alerts_app(sqlite_url, **LIFE)
    svc(app).feed([failure(clock, instance_id=101, **P0)])
    run_jobs(app)
    (alert,) = sinks.robot_texts(KEY_PROD)
    assert "/ack 101" in alert
    clock.advance(minutes=11)
    run_jobs(app)  # nobody answered: the on-call is paged
    assert "升级（第 1 次）" in sinks.robot_texts(KEY_PROD)[-1]
    reply = app.session.handle(Inbound("alice", "c1", "/ack"))  # the newest open alert
    assert "Acknowledged A1 (order_sync instance 101, P0); escalation stopped" in reply
    again = app.session.handle(Inbound("bob", "c1", "/ack A1"))
    assert "A1 was acknowledged already by Alice (alice)" in again
    assert "No alert A9." in app.session.handle(Inbound("bob", "c1", "/ack A9"))
    assert "Usage: /ack [ID]" in app.session.handle(Inbound("bob", "c1", "/ack soon"))
    run_jobs(app)
    line = sinks.robot_texts(KEY_PROD)[-1]
    assert "A1（order_sync 实例 101）由 Alice 认领" in line and len(line.splitlines()) == 1
    for _ in range(6):  # an hour more: no further page
        clock.advance(minutes=10)
        run_jobs(app)
    texts = sinks.robot_texts(KEY_PROD)
    assert sum("升级（第" in t for t in texts) == 1
    audit = list(reversed(app.deps.audit.search(kind="alert_life")))  # oldest first
    assert [(a["outcome"], a["actor"]) for a in audit][:3] == [
        ("fired", app.deps.holder),
        ("paged", app.deps.holder),
        ("acked", "alice"),
    ]
    # the rerun succeeds: the watcher (or DS's success alert) hands over the SUCCESS
    svc(app).feed([AlertEvent(at=clock(), instance_id=101, state="SUCCESS", rerun_by="bob", **P0)])
    run_jobs(app)
    resolved = sinks.robot_texts(KEY_PROD)[-1]
    assert "已恢复" in resolved and "实例 101 重跑成功" in resolved and "重跑：Bob" in resolved
    assert "认领：Alice" in resolved
    closed = app.session.handle(Inbound("bob", "c1", "/ack 101"))
    assert "A1 (order_sync instance 101) is resolved already" in closed


def test_stats_per_workflow_and_tier_and_unacknowledged_p0(
    alerts_app: AlertsApp,
    sinks: Sinks,
    clock: FakeClock,
    sqlite_url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app = alerts_app(sqlite_url, **LIFE)
    svc(app).feed([failure(clock, instance_id=1, **P0), failure(clock, instance_id=2, **P0)])
    clock.advance(minutes=4)
    app.session.handle(Inbound("alice", "c1", "/ack 1"))
    clock.advance(minutes=6)
    svc(app).feed([AlertEvent(at=clock(), instance_id=1, state="SUCCESS", **P0)])
    svc(app).feed([failure(clock, instance_id=3)])  # a P1 of another workflow, still open
    monkeypatch.setenv("XIHE_DATABASE_URL", sqlite_url)
    config = Path(app.settings.directory)
    assert main(["--config", str(config), "alerts", "stats", "--since", "2026-01-01", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = {(m["tier"], m["workflow"]): m for m in doc["measures"]}
    assert list(rows) == [("P0", "*"), ("P0", "order_sync"), ("P1", "*"), ("P1", "user_profile_test")]
    p0 = rows[("P0", "order_sync")]
    assert (p0["alerts"], p0["acked"], p0["resolved"]) == (2, 1, 1)
    assert (p0["ack_median"], p0["resolve_median"], p0["resolve_p90"]) == (240.0, 600.0, 600.0)
    assert [a["instance_id"] for a in doc["unacknowledged_p0"]] == [2]
    assert main(["--config", str(config), "alerts", "stats", "--since", "2026-01-01"]) == 0
    text = capsys.readouterr().out
    assert (
        "P0    order_sync                     2      1       4m       4m         1      10m      10m" in text
    )
    assert "unacknowledged P0 now: 1" in text and "A2  order_sync instance 2" in text
    assert main(["--config", str(config), "alerts", "stats", "--since", "last week"]) == 2
    assert "--since 'last week': expected a span (30m, 24h, 7d)" in capsys.readouterr().err


def test_only_listed_users_rotation_and_chain_may_acknowledge(
    alerts_app: AlertsApp, sinks: Sinks, clock: FakeClock, sqlite_url: str
) -> None:
    app = alerts_app(sqlite_url, **LIFE)
    svc(app).feed([failure(clock, instance_id=101, **P0)])
    run_jobs(app)
    refused = app.session.handle(Inbound("mallory", "c1", "/ack A1"))
    assert "mallory may not acknowledge A1" in refused and "(data-platform)" in refused
    assert "access.yaml" in refused
    (denied,) = app.deps.audit.search(kind="alert_life", outcome="denied")
    assert (
        denied["actor"] == "mallory" and denied["tool"] == "/ack" and "A1 order_sync #101" in denied["reason"]
    )
    assert svc(app).life.get(101).state == "firing"  # untouched: escalation goes on
    clock.advance(minutes=11)
    run_jobs(app)
    assert "升级（第 1 次）" in sinks.robot_texts(KEY_PROD)[-1]
    # zhangsan is not in access.yaml, but owns order_sync and is on its `oncall` list: in the chain
    assert "Acknowledged A1" in app.session.handle(Inbound("zhangsan", "c1", "/ack 101"))
    assert svc(app).life.get(101).acked_by == "zhangsan"


def test_a_rotation_member_off_duty_may_acknowledge(
    alerts_app: AlertsApp, sinks: Sinks, clock: FakeClock, sqlite_url: str
) -> None:
    app = alerts_app(sqlite_url, extra=("oncall.yaml",), **LIFE)
    svc(app).feed([failure(clock, instance_id=101, **P0)])
    run_jobs(app)
    assert "may not acknowledge" in app.session.handle(Inbound("zhaoliu", "c1", "/ack A1"))  # reporting team
    assert "Acknowledged A1" in app.session.handle(Inbound("wangwu", "c1", "/ack A1"))  # data-platform
