"""Maintenance everyone can see: `/maint on` tells the alert channels it covers (scope, end, who, a
warning over P0 core workflows), its end tells them how many failures it suppressed, and `/maint`
lists every window in force, chat and alerts.yaml ones."""

from __future__ import annotations

from datetime import UTC, datetime

from tests.alerts.feature_support import KEY, KEY_PROD, AlertsApp, Sinks, failure, run_jobs, svc
from xihe.agent.alerts.maint_notice import covered_channels
from xihe.agent.alerts.maintenance import MaintenanceWindow, MaintScope
from xihe.agent.app import App
from xihe.agent.clock import FakeClock
from xihe.agent.inbound import Inbound
from xihe.config.workflows import Workflow


def ask(app: App, text: str, user: str = "dave") -> str:
    return app.session.handle(Inbound(user, "c1", text))


WORKFLOWS = [
    Workflow(name="order_sync", project="etl", channel="prod"),
    Workflow(name="daily_sales", project="etl", channel="prod"),
    Workflow(name="user_profile_test", project="sandbox"),
]
T = datetime(2026, 12, 2, 9, tzinfo=UTC)


def window(kind: str, value: str = "") -> MaintenanceWindow:
    return MaintenanceWindow("w", T, T, MaintScope(kind, value))  # type: ignore[arg-type]


def test_the_channels_a_window_covers() -> None:
    channels = ["default", "prod", "spare"]
    assert covered_channels(window("all"), WORKFLOWS, channels) == ["default", "prod", "spare"]
    assert covered_channels(window("host", "10.0.0.1"), WORKFLOWS, channels) == ["default", "prod", "spare"]
    assert covered_channels(window("project", "etl"), WORKFLOWS, channels) == ["prod"]
    assert covered_channels(window("workflow", "user_profile_test"), WORKFLOWS, channels) == ["default"]
    assert covered_channels(window("workflow", "adhoc_job"), WORKFLOWS, channels) == [
        "default"
    ]  # unconfigured


def test_maint_on_notice_reaches_the_channel_once_and_the_end_counts_what_it_suppressed(
    alerts_app: AlertsApp, sinks: Sinks, clock: FakeClock, db_url: str
) -> None:
    app = alerts_app(db_url)
    reply = ask(app, "/maint on 1h project:sandbox")
    assert "Posted to the alert channel(s) default" in reply and "P0" not in reply
    other = alerts_app(db_url)  # a second replica runs the same jobs
    run_jobs(app)
    run_jobs(other)
    (notice,) = sinks.robot_texts(KEY)
    assert "维护开始</font>：project:sandbox" in notice and "设置人：dave" in notice
    assert "2026-12-02 17:00:00 +08:00 ～ 2026-12-02 18:00:00 +08:00" in notice
    assert sinks.robot_texts(KEY_PROD) == []  # the prod channel's workflows are not covered
    for iid in (31, 32, 32):
        svc(app).feed([failure(clock, instance_id=iid, task=f"t{iid}")])
    clock.advance(minutes=61)
    run_jobs(other)  # whichever replica sees the end first tells the channel, once
    run_jobs(app)
    texts = sinks.robot_texts(KEY)
    ends = [t for t in texts if "维护结束" in t]
    assert len(ends) == 1 and "屏蔽了 2 个失败实例（清单另发）" in ends[0] and "到期结束" in ends[0]
    assert any("维护窗口已结束" in t and "实例（2 个）" in t for t in texts)  # the list, as before


def test_an_empty_window_still_says_it_ended(
    alerts_app: AlertsApp, sinks: Sinks, clock: FakeClock, db_url: str
) -> None:
    app = alerts_app(db_url)
    ask(app, "/maint on 30m workflow:order_sync")
    clock.advance(minutes=5)
    assert "Closed 1" in ask(app, "/maint off 1")
    run_jobs(app)
    start, end = sinks.robot_texts(KEY_PROD)
    assert "⚠️ 覆盖 P0 核心工作流：etl/order_sync" in start
    assert "维护结束</font>：workflow:order_sync" in end and "屏蔽了 0 个失败实例，告警恢复推送" in end
    assert "17:00:00 +08:00 ～ 2026-12-02 17:05:00 +08:00" in end and "由 dave 提前结束" in end
    assert sinks.robot_texts(KEY) == []


def test_maint_lists_chat_and_config_windows_in_force(
    alerts_app: AlertsApp, sinks: Sinks, clock: FakeClock, db_url: str
) -> None:
    app = alerts_app(
        db_url,
        maintenance=[
            {
                "name": "nightly-restart",
                "cron": "0 17 * * *",
                "duration_minutes": 60,
                "scope": {"kind": "host", "value": "10.0.0.9"},
            },
            {"name": "upgrade", "start": "2026-12-05T22:00:00+08:00", "end": "2026-12-05T23:00:00+08:00"},
        ],
    )
    ask(app, "/maint on 2h workflow:user_profile_test")
    listing = ask(app, "/maint", user="alice")  # anyone may look
    assert "#1 workflow:user_profile_test" in listing
    assert "nightly-restart host:10.0.0.9 until 2026-12-02 18:00 +08:00 (alerts.yaml)" in listing
    assert "Scheduled in alerts.yaml: upgrade" in listing and "nightly-restart," not in listing
    clock.advance(hours=1)
    later = ask(app, "/maint")
    assert (
        "nightly-restart host" not in later and "Scheduled in alerts.yaml: nightly-restart, upgrade" in later
    )


def test_alerts_yaml_windows_are_announced_at_start_and_end_once_per_occurrence(
    alerts_app: AlertsApp, sinks: Sinks, clock: FakeClock, db_url: str
) -> None:
    hourly = {"name": "hourly-flush", "cron": "30 * * * *", "duration_minutes": 10,
              "scope": {"kind": "workflow", "value": "order_sync"}}  # fmt: skip
    app = alerts_app(db_url, maintenance=[hourly])
    other = alerts_app(db_url, maintenance=[hourly])  # a second replica runs the same jobs
    run_jobs(app)
    assert sinks.robot_texts(KEY_PROD) == []  # 17:00: not in force yet
    for night in range(2):
        clock.advance(minutes=31 if night == 0 else 50)  # 17:31, then 18:31
        run_jobs(app)
        run_jobs(other)
        if night == 0:  # a P0 failure during the first occurrence only
            core = {"project": "etl", "workflow": "order_sync", "workflow_code": 1001, "environment": "prod"}
            svc(app).feed([failure(clock, instance_id=40, **core)])
            listing = ask(app, "/maint")  # listed once, as the alerts.yaml window it is (no chat number)
            assert listing == "hourly-flush workflow:order_sync until 2026-12-02 17:40 +08:00 (alerts.yaml)"
        clock.advance(minutes=10)
        run_jobs(other)
        run_jobs(app)
    texts = sinks.robot_texts(KEY_PROD)
    starts = [t for t in texts if "维护开始" in t]
    ends = [t for t in texts if "维护结束</font>" in t]
    assert len(starts) == 2 and len(ends) == 2
    assert "alerts.yaml 中的维护窗口 hourly-flush" in starts[0] and "/maint off" not in starts[0]
    assert "⚠️ 覆盖 P0 核心工作流：etl/order_sync" in starts[0] and "设置人：alerts.yaml" in starts[0]
    assert "17:30:00 +08:00 ～ 2026-12-02 17:40:00 +08:00" in starts[0]
    assert "屏蔽了 1 个失败实例" in ends[0] and "屏蔽了 0 个失败实例" in ends[1]  # each occurrence its own
