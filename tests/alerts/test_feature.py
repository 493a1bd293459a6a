"""The alerts feature in a whole bot: events → jobs → robot sink; /maint; the webhook over HTTP; the tool."""

from __future__ import annotations

import json
from datetime import timedelta

from sqlalchemy import select
from starlette.testclient import TestClient

from tests.alerts.feature_support import KEY, KEY_PROD, SECRET, AlertsApp, Sinks, failure, run_jobs, svc
from tests.conftest import MakeApp
from xihe.agent.alert_tables import alert_outbox
from xihe.agent.app import App
from xihe.agent.clock import FakeClock
from xihe.agent.inbound import Inbound
from xihe.agent.web.server import create_server
from xihe.integrations.fakes.llm_server import ScriptedLLM, call, say


def ask(app: App, text: str, user: str = "dave", conv: str = "c1") -> str:
    return app.session.handle(Inbound(user, conv, text))


def test_fed_events_become_exactly_the_expected_wecom_messages(
    alerts_app: AlertsApp, sinks: Sinks, clock: FakeClock, db_url: str
) -> None:
    app = alerts_app(db_url)
    s = svc(app)
    core = {"project": "etl", "workflow": "order_sync", "workflow_code": 1001, "environment": "prod"}
    records = s.feed(
        [
            failure(clock, instance_id=501, task="extract", host="10.0.0.11:1234", **core),
            failure(clock, instance_id=501, task="load", host="10.0.0.12:1234", **core),
            failure(clock, instance_id=601),
            failure(clock, instance_id=701, state="RUNNING_EXECUTION", retry_times=1, max_retry_times=3),
            failure(clock, instance_id=801, state="STOP", task_state="KILL"),
            failure(clock, instance_id=601),  # the same report again (a re-poll)
        ]
    )
    assert [r.reason.value for r in records] == [
        "new_instance",
        "joined_instance",
        "new_instance",
        "retry_pending",
        "user_stop",
        "duplicate_event",
    ]
    run_jobs(app)
    assert len(sinks.robot_texts(KEY_PROD)) == 1  # P0 goes out at once
    assert sinks.robot_texts(KEY) == []  # P1 is held 10 s so sibling tasks can join
    clock.advance(11)
    run_jobs(app)
    run_jobs(app)  # a second pass sends nothing new
    prod, default = sinks.robot_texts(KEY_PROD), sinks.robot_texts(KEY)
    assert len(prod) == 1 and len(default) == 1
    assert "<@zhangsan>" in prod[0] and "<@lisi>" in prod[0] and "order_sync" in prod[0]
    assert "extract" in prod[0] and "load" in prod[0] and "501" in prod[0]  # one message per instance
    assert "user_profile_test" in default[0] and "<@" not in default[0]  # P1: no @
    assert sinks.smtp.mails == []
    # every decision is recorded with its reason, every push audited with status and body, key redacted
    reasons = [r["reason"] for r in s.records.rows()]
    assert reasons.count("sent") == 2 and "retry_pending" in reasons and "user_stop" in reasons
    pushes = app.deps.audit.search(kind="alert_push")
    assert len(pushes) == 2 and all(p["outcome"] == "sent" for p in pushes)
    for p in pushes:
        assert p["detail"]["http_status"] == 200 and '"errcode": 0' in p["detail"]["body"]
        assert p["detail"]["outbox_key"].startswith("inst:") and p["detail"]["via"] == "robot"
        assert KEY not in json.dumps(p, default=str) and KEY_PROD not in json.dumps(p, default=str)


def test_maint_on_suppresses_then_expires_with_audit(
    alerts_app: AlertsApp, sinks: Sinks, clock: FakeClock, db_url: str
) -> None:
    app = alerts_app(db_url)
    assert "needs an admin role" in ask(app, "/maint on 30m", user="alice")
    assert "No maintenance window is open" in ask(app, "/maint", user="alice")
    reply = ask(app, "/maint on 30m")
    assert "is on" in reply and "#1 all" in reply
    assert "#1 all 2026-12-02 17:00 +08:00 – 2026-12-02 17:30 +08:00" in reply  # the team's zone
    assert "#1 all" in ask(app, "/maint", user="alice")
    records = svc(app).feed([failure(clock, instance_id=11)])
    assert [r.reason.value for r in records] == ["maintenance"]
    clock.advance(minutes=29)
    run_jobs(app)
    # both channels are told the window is on (scope all); the failure inside it is not pushed
    for key in (KEY, KEY_PROD):
        (notice,) = sinks.robot_texts(key)
        assert "维护开始</font>：all" in notice and "设置人：dave" in notice and "17:30" in notice
        assert "⚠️ 覆盖 P0 核心工作流：etl/order_sync" in notice  # scope all covers the P0 core workflow
    clock.advance(
        minutes=2
    )  # the window ran out: each channel hears it ended; one message lists what it suppressed
    run_jobs(app)
    ended = sinks.robot_texts()[1:]
    assert (
        len(ended) == 2
        and "维护结束</font>：all" in ended[0]
        and "屏蔽了 1 个失败实例（清单另发）" in ended[0]
    )
    assert "到期结束（设置人：dave）" in ended[0]
    assert "维护窗口已结束" in ended[1] and "实例（1 个）：11" in ended[1]
    prod_end = sinks.robot_texts(KEY_PROD)[1]
    assert "维护结束</font>：all" in prod_end and "屏蔽了 1 个失败实例" in prod_end
    assert [r.reason.value for r in svc(app).feed([failure(clock, instance_id=12)])] == ["new_instance"]
    clock.advance(11)
    run_jobs(app)
    texts = sinks.robot_texts()
    assert len(texts) == 4 and "12" in texts[3]
    audit = app.deps.audit.search(kind="maintenance")
    assert sorted((a["outcome"], a["actor"]) for a in audit) == [
        ("denied", "alice"),
        ("expired", "system"),
        ("on", "dave"),
    ]
    run_jobs(app)
    assert len(app.deps.audit.search(kind="maintenance")) == 3  # expiry audited once


def test_maint_on_over_a_p0_core_workflow_warns_and_lists_what_it_hid_when_closed(
    alerts_app: AlertsApp, sinks: Sinks, clock: FakeClock, db_url: str
) -> None:
    app = alerts_app(db_url)
    quiet = ask(app, "/maint on 1h workflow:user_profile_test")
    assert "is on" in quiet and "P0" not in quiet
    reply = ask(app, "/maint on 1h workflow:order_sync")
    assert "⚠️ It covers P0 core workflow(s) etl/order_sync" in reply and "page nobody" in reply
    core = {"project": "etl", "workflow": "order_sync", "workflow_code": 1001, "environment": "prod"}
    assert [r.reason.value for r in svc(app).feed([failure(clock, instance_id=77, **core)])] == [
        "maintenance"
    ]
    run_jobs(app)
    (quiet_notice,) = sinks.robot_texts(KEY)  # user_profile_test's channel: told, no P0 warning
    assert "维护开始</font>：workflow:user_profile_test" in quiet_notice
    assert "P0" not in quiet_notice and "/maint off 1" in quiet_notice
    (p0_notice,) = sinks.robot_texts(
        KEY_PROD
    )  # order_sync's channel, warned; the failure itself is not pushed
    assert "⚠️ 覆盖 P0 核心工作流：etl/order_sync" in p0_notice and "/maint off 2" in p0_notice
    assert "Closed 1" in ask(app, "/maint off workflow:order_sync")
    run_jobs(app)
    texts = sinks.robot_texts(KEY_PROD)[1:]
    assert len(texts) == 2 and "维护结束" in texts[0] and "屏蔽了 1 个失败实例" in texts[0]
    assert "由 dave 提前结束" in texts[0]
    assert "其中 P0 工作流：order_sync" in texts[1] and "实例（1 个）：77" in texts[1]
    assert len(sinks.robot_texts(KEY)) == 1  # the other window is still on: no end notice there


def test_maint_off_by_number_and_scope(
    alerts_app: AlertsApp, sinks: Sinks, clock: FakeClock, db_url: str
) -> None:
    app = alerts_app(db_url)
    ask(app, "/maint on 2h host:10.0.0.1")
    clock.advance(1)
    ask(app, "/maint on 1h workflow:user_profile_test")
    listing = ask(app, "/maint")
    assert "#1 host:10.0.0.1" in listing and "#2 workflow:user_profile_test" in listing
    assert "needs an admin role" in ask(app, "/maint off 1", user="bob")
    assert "Closed 1" in ask(app, "/maint off 1")
    assert "No open maintenance window matched" in ask(app, "/maint off 1")
    assert [r.reason.value for r in svc(app).feed([failure(clock, instance_id=5)])] == ["maintenance"]
    assert "Closed 1" in ask(app, "/maint off workflow:user_profile_test")
    assert [r.reason.value for r in svc(app).feed([failure(clock, instance_id=6)])] == ["new_instance"]
    assert "usage: /maint on" in ask(app, "/maint on forever")
    outcomes = [a["outcome"] for a in app.deps.audit.search(kind="maintenance")]
    assert sorted(outcomes) == ["denied", "off", "off", "on", "on"]


ITEMS = [
    {
        "projectName": "etl",
        "processId": 345,
        "processDefinitionCode": 1001,
        "processName": "order_sync-1-20261202170000123",
        "taskName": "load",
        "taskType": "SHELL",
        "taskState": "FAILURE",
        "taskHost": "10.0.0.11:1234",
    },
    {
        "projectName": "etl",
        "processId": 345,
        "processName": "order_sync-1-20261202170000123",
        "taskName": "index",
        "taskType": "SQL",
        "taskState": "FAILURE",
        "taskHost": "10.0.0.12:1234",
    },
]


def test_webhook_route_over_http(alerts_app: AlertsApp, sinks: Sinks, clock: FakeClock, db_url: str) -> None:
    app = alerts_app(db_url)
    client = TestClient(create_server(app, with_scheduler=False))
    body = {"title": "process failed", "msg": json.dumps(ITEMS)}
    url = "/hooks/dolphinscheduler"
    assert client.post(url, json=body, headers={"X-Xihe-Token": "wrong"}).status_code == 401
    assert client.post(url, json=body).status_code == 401
    bad = client.post(url, content=b"{not json", headers={"X-Xihe-Token": SECRET})
    assert bad.status_code == 400 and "not UTF-8 JSON" in bad.json()["error"]
    missing = client.post(
        url, json={"msg": json.dumps([{"taskName": "x"}])}, headers={"X-Xihe-Token": SECRET}
    )
    assert missing.status_code == 400 and "processId" in missing.json()["bad"][0]["error"]
    mixed = client.post(
        url,
        json={"msg": json.dumps([{"taskName": "x"}, {**ITEMS[0], "processId": 346}])},
        headers={"X-Xihe-Token": SECRET},
    )
    assert mixed.status_code == 200 and mixed.json()["events"] == 1 and len(mixed.json()["bad"]) == 1
    bad_rows = [r for r in svc(app).records.rows() if r["reason"] == "bad_event"]
    assert len(bad_rows) == 2 and all("processId" in r["detail"] for r in bad_rows)  # recorded, not lost
    ok = client.post(url, json=body, headers={"X-Xihe-Token": SECRET})
    assert ok.status_code == 200
    assert (ok.json()["events"], ok.json()["pushed"], ok.json()["duplicates"]) == (2, 1, 0)
    again = client.post(url, json=body, headers={"Authorization": f"Bearer {SECRET}"})  # DS retried the post
    assert again.status_code == 200 and again.json()["duplicates"] == 2 and again.json()["pushed"] == 0
    clock.advance(11)
    run_jobs(app)
    run_jobs(app)
    prod = sinks.robot_texts(KEY_PROD)
    assert len(prod) == 2 and "实例 ID：346" in prod[0]  # the good item of the mixed post
    assert "load" in prod[1] and "index" in prod[1] and "实例 ID：345" in prod[1]
    with app.deps.engine.connect() as conn:
        assert len(conn.execute(select(alert_outbox.c.key)).all()) == 2
    rejected = app.deps.audit.search(kind="webhook")
    assert len(rejected) == 4 and all(r["outcome"] == "rejected" for r in rejected)
    assert all(SECRET not in json.dumps(r, default=str) for r in rejected)


def test_send_wecom_alert_waits_for_confirm_then_lands_in_the_robot_sink(
    alerts_app: AlertsApp, sinks: Sinks, clock: FakeClock, llm: ScriptedLLM, db_url: str
) -> None:
    args = {
        "channel": "default",
        "title": "order_sync is late",
        "markdown": "**order_sync** has not finished.\nPing <@everyone> please",
        "mentions": ["zhangsan"],
    }
    app = alerts_app(db_url, script=[call("send_wecom_alert", **args), say("Alert queued.")])
    spec = app.registry.get("send_wecom_alert")
    assert spec.risk == "write"
    assert spec.schema()["function"]["parameters"]["properties"]["channel"]["enum"] == ["default", "prod"]
    reply = ask(app, "tell the default group that order_sync is late", user="alice")
    assert "/confirm" in reply
    run_jobs(app)
    assert svc(app).outbox.rows() == [] and sinks.robot.all_messages() == []  # nothing before the yes
    assert ask(app, "/confirm", user="alice") == "Alert queued."
    rows = svc(app).outbox.rows()
    assert len(rows) == 1 and rows[0].key.startswith("manual:") and rows[0].key.endswith(":P0:default")
    assert sinks.robot.all_messages() == []  # queued, not posted around the outbox
    run_jobs(app)
    texts = sinks.robot_texts()
    assert len(texts) == 1
    assert texts[0].startswith("## order_sync is late") and texts[0].endswith("<@zhangsan>")
    assert "<@everyone>" not in texts[0]  # only the mentions argument pages anyone
    step = [s for s in app.deps.tasks.steps(1) if s.tool_name == "send_wecom_alert" and s.status == "done"]
    assert step and rows[0].key in (step[0].output_text or "")
    assert svc(app).outbox.get(rows[0].key).sent_via == "robot"  # type: ignore[union-attr]
    llm.assert_consumed()


def test_without_alerts_yaml_nothing_is_installed(make_app: MakeApp) -> None:
    app = make_app(with_llm=False)
    assert app.deps.alerts is None and "send_wecom_alert" not in app.registry
    assert "Unknown command /maint" in app.session.handle(Inbound("dave", "c", "/maint"))


def test_delivery_falls_back_to_mail_and_the_health_is_shared(
    alerts_app: AlertsApp, sinks: Sinks, clock: FakeClock, db_url: str
) -> None:
    app = alerts_app(db_url)
    sinks.robot.fail_for(600, "http500")
    svc(app).feed(
        [failure(clock, instance_id=100 + i, host=f"10.1.{i}.1:1", error=f"e{'x' * i}") for i in range(4)]
    )
    clock.advance(11)
    for _ in range(3):
        run_jobs(app)
        clock.advance(31)
    assert svc(app).health.get("default").mode == "email"
    other = alerts_app(db_url)  # another replica (or a restart) sees the same channel state
    assert svc(other).health.get("default").mode == "email"
    for _ in range(6):
        run_jobs(other)
        clock.advance(timedelta(seconds=61).total_seconds())
    assert all(r.status == "sent" for r in svc(other).outbox.rows())
    assert len(sinks.smtp.mails) == 4 and sinks.robot.all_messages() == []
    failed = app.deps.audit.search(kind="alert_push", outcome="failed")
    assert failed and all(f["detail"]["http_status"] == 500 for f in failed if f["tool"] == "wecom_robot")
