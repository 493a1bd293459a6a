"""Durability of the wired pipeline: robot outage during a storm, restart mid-window, two replicas racing."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta

from tests.alerts.feature_support import KEY, KEY_PROD, AlertsApp, Sinks, failure, job, run_jobs, svc
from xihe.agent.alert_event import AlertEvent
from xihe.agent.app import App
from xihe.agent.clock import FakeClock
from xihe.agent.email_text import plain


def delivered_exactly_once(app: App, sinks: Sinks) -> list[str]:
    """Every outbox row is sent and arrived once (robot or mail); returns the row keys."""
    rows = svc(app).outbox.rows()
    assert rows and all(r.status == "sent" for r in rows), [r.key for r in rows if r.status != "sent"]
    robot = sinks.robot_texts(KEY) + sinks.robot_texts(KEY_PROD)
    mail = [m.body.strip() for m in sinks.smtp.mails]
    for r in rows:
        assert robot.count(r.text) + mail.count(plain(r.text).strip()) == 1, r.key
    assert len(robot) + len(mail) == len(rows)
    assert not any(code == 45009 for _at, _k, _s, code in sinks.robot.answers)  # never over 20/min
    return [r.key for r in rows]


def test_outage_during_a_storm_on_sql_stores_every_alert_arrives_exactly_once(
    alerts_app: AlertsApp, sinks: Sinks, clock: FakeClock, db_url: str
) -> None:
    app = alerts_app(db_url)
    sinks.robot.fail_for(240, "http500")  # the robot is down for the first 4 minutes
    fed: list[AlertEvent] = []
    for step in range(36):  # 6 minutes in 10-second steps
        batch = [
            failure(
                clock,
                instance_id=1000 + step * 2 + j,
                host=f"10.1.{step}.{j}:1",
                error=f"cause-{'ab'[j]}{'x' * step}",
            )
            for j in range(2)
        ]
        if step % 3 == 0:
            batch.append(
                failure(
                    clock,
                    instance_id=5000 + step,
                    state="RUNNING_EXECUTION",
                    retry_times=0,
                    max_retry_times=2,
                )
            )
        if fed:
            batch.append(fed[-1])  # a re-poll of the previous event
        svc(app).feed(batch)
        fed.extend(batch)
        run_jobs(app)
        if step == 18:  # the process restarts in the middle of the storm and the outage
            app = alerts_app(db_url)
        clock.advance(10)
    for _ in range(60):  # drain: windows close, the backlog goes out
        run_jobs(app)
        clock.advance(10)
    keys = delivered_exactly_once(app, sinks)
    assert sum(1 for k in keys if k.startswith("inst:")) == 72  # one message per failed instance
    assert sinks.smtp.mails and sinks.robot.all_messages()  # by e-mail during the outage, robot after
    assert svc(app).health.get("default").mode == "robot"  # switched back after a probe succeeded
    reasons = Counter(r["reason"] for r in svc(app).records.rows())
    assert reasons["retry_pending"] == 12 and reasons["duplicate_event"] == 35
    assert reasons["sent"] == len(keys)


def test_restart_in_the_middle_of_a_window_loses_nothing(
    alerts_app: AlertsApp, sinks: Sinks, clock: FakeClock, db_url: str
) -> None:
    t0 = clock()
    first = alerts_app(db_url)
    err = "Connection refused to 10.9.9.9:5432"
    svc(first).feed([failure(clock, instance_id=1, host="10.0.0.1:1", error=err)])
    clock.advance(11)
    run_jobs(first)  # instance 1 pushed; its error's 10-minute window stays open
    clock.advance(49)
    recs = svc(first).feed(
        [failure(clock, instance_id=2, host="10.0.0.2:1", error=err.replace("9.9.9", "8.8.8"))]
    )
    assert [r.reason.value for r in recs] == ["fingerprint_repeat"]
    clock.advance(60)
    svc(first).feed([failure(clock, instance_id=3, host="10.0.0.3:1", error="disk full on /data")])
    clock.advance(11)
    job(first, "alerts_flush")  # instance 3 reached the outbox but was not delivered yet
    svc(first).feed([failure(clock, instance_id=4, host="10.0.0.4:1", error="OOM killed")])  # held 10 s
    first.deps.engine.dispose()  # the process dies here

    second = alerts_app(db_url)
    assert (
        svc(second)
        .feed([failure(clock, instance_id=4, host="10.0.0.4:1", error="OOM killed")])[0]
        .reason.value
        == "duplicate_event"
    )  # what the dead process saw is remembered
    clock.advance(11)
    run_jobs(second)
    clock.now = t0 + timedelta(minutes=10, seconds=1)
    run_jobs(second)
    texts = sinks.robot_texts()
    assert len(texts) == 4
    assert "实例 ID：1" in texts[0]
    assert any("实例 ID：3" in t for t in texts[1:3]) and any("实例 ID：4" in t for t in texts[1:3])
    assert (
        "同类错误汇总：1 次" in texts[3] and "1（A1）、2（A2）" in texts[3]
    )  # the fold survived the restart
    delivered_exactly_once(second, sinks)


def test_two_replicas_on_one_database_never_send_twice(
    alerts_app: AlertsApp, sinks: Sinks, clock: FakeClock, db_url: str
) -> None:
    """Two apps (own engines, own threads) get the same events and run the same jobs at once."""
    replicas = [alerts_app(db_url, holder="replica-a"), alerts_app(db_url, holder="replica-b")]
    steps = 30
    per_step: list[list[AlertEvent]] = []
    for step in range(steps):
        at = clock() + timedelta(seconds=10 * step)
        n = 30 if step == 0 else 2  # a burst first: more than one robot minute's worth
        batch = [
            failure(
                clock,
                at=at,
                instance_id=100 * step + j,
                host=f"10.2.{step}.{j}:1",
                error=f"boom {'x' * step} {'y' * j}",  # letters: numbers would be normalised away
                **(
                    {"project": "etl", "workflow": "order_sync", "workflow_code": 1001, "environment": "prod"}
                    if j % 5 == 0
                    else {}
                ),
            )
            for j in range(n)
        ]
        per_step.append(batch)
    errors: list[BaseException] = []

    def tick() -> None:
        clock.advance(10)

    barrier = threading.Barrier(2, action=tick)  # both replicas finished the step: time moves on

    def run(app: App) -> None:
        try:
            for step in range(steps + 40):
                if step < steps:
                    svc(app).feed(per_step[step])
                run_jobs(app)
                barrier.wait(timeout=60)
        except BaseException as exc:  # surfaced in the main thread
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=run, args=(app,)) for app in replicas]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    keys = delivered_exactly_once(replicas[0], sinks)
    assert sum(1 for k in keys if k.startswith("inst:")) == sum(len(b) for b in per_step)
    decisions = [r for r in svc(replicas[0]).records.rows() if r["kind"] == "decision"]
    firsts = Counter(r["event_key"] for r in decisions if r["reason"] != "duplicate_event")
    assert set(firsts.values()) == {1}  # each event decided once; the other replica saw a duplicate
    holders = Counter(r["holder"] for r in svc(replicas[0]).records.rows() if r["reason"] == "sent")
    assert sum(holders.values()) == len(keys)
    assert len(sinks.robot_texts(KEY)) > 20  # the burst needed more than one minute of robot slots
