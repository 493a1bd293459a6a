"""DolphinScheduler in chat, end to end: scripted LLM → gate → /confirm → simulator over HTTP → poll → reply."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from tests.alerts.feature_support import ENV, KEY, KEY_PROD, Sinks, merge, run_jobs
from tests.conftest import REPO
from tests.dolphin.conftest import BAD_HOST
from tests.dolphin.support import Bot, ask_id, make_bot
from xihe.agent.alert_event import AlertEvent
from xihe.agent.clock import FakeClock
from xihe.agent.dolphin.feature import poll_watches
from xihe.integrations.fakes.llm_server import ScriptedLLM, call, say
from xihe.integrations.fakes.smtp_sink import SmtpSink
from xihe.integrations.wecom.robot_sink import RobotSink

# 昨天 is business date 2026-12-01; ${system.biz.date} is scheduleTime - 1 day, so scheduleTime is 12-02
YESTERDAY = '{"complementStartDate":"2026-12-02 00:00:00","complementEndDate":"2026-12-02 00:00:00"}'


class RecordingAlerts:
    """Stands in for the alert pipeline service: records what the poller hands over."""

    def __init__(self) -> None:
        self.fed: list[AlertEvent] = []

    def feed(self, events: list[AlertEvent]) -> list[object]:
        self.fed.extend(events)
        return []


def test_backfill_yesterday_from_chat_polled_to_success(
    bot_for: Callable[..., Bot], llm: ScriptedLLM, db_url: str
) -> None:
    llm.add(
        call("trigger_dolphinscheduler", workflow="订单同步", dates="昨天"),
        say("已提交订单同步 2026-12-01 的补数，实例 101，结束后我会在这里通知你。"),
    )
    bot = bot_for("3.3", db_url)
    ask = bot.say("bob", "把订单同步任务补跑一下昨天的")
    assert "会写入生产环境 prod" in ask and "/confirm" in ask
    # the prompt says what the words resolve to, so the yes (and the approver's) is informed
    assert (
        "→ 在 prod 启动 order_sync（项目 etl，编号 2000000000001），"
        "补数 业务日期 2026-12-01 → scheduleTime 2026-12-02\n"
    ) in ask
    assert bot.sim.starts == []  # nothing runs before the yes
    waiting = bot.say("bob", f"/confirm {ask_id(ask)}")
    # the conversation is in Chinese, so the bot's own words are too
    assert "正在等待审批：审批人（carol, dave）" in waiting and bot.sim.starts == []
    ran = bot.say("carol", f"/approve {ask_id(ask)}")
    assert "it ran: 已提交订单同步" in ran

    (start,) = bot.sim.starts
    assert start["workflowDefinitionCode"] == "2000000000001"  # 订单同步 → order_sync via the alias
    assert start["execType"] == "COMPLEMENT_DATA" and start["scheduleTime"] == YESTERDAY
    assert json.loads(start["startParams"]) == {"xihe_run": "1:tool:1:0", "xihe_requested_by": "bob"}
    tool_result = llm.requests[-1]["messages"][-1]["content"]
    shown = json.loads(tool_result.split("\n", 1)[1])
    assert shown["instance_ids"] == [101] and shown["workflow"] == "order_sync"
    assert shown["dates"] == ["2026-12-01"] and shown["environment"] == "prod"
    assert shown["schedule_dates"] == ["2026-12-02"] and shown["biz_date_offset"] == 1

    bot.poll_until_done("1:tool:1:0")
    progress = bot.messages("cli:bob", "⏳")
    final = bot.messages("cli:bob", "✅")
    assert progress and len(progress) == 1  # throttled: one progress message for a 3-minute run
    # the conversation is in Chinese: so are the run's progress and its end
    assert "order_sync 实例 101（业务日期 2026-12-01 (scheduleTime 2026-12-02)）：运行中" in progress[0]
    assert final == [
        "✅ order_sync 实例 101（业务日期 2026-12-01 (scheduleTime 2026-12-02)），已结束：成功，耗时 3m 3s。"
    ]
    assert bot.sent[-1] == ("cli:bob", final[0])  # the final reply is the last word in the conversation
    polls = bot.app.deps.metrics.registry.get_sample_value("xihe_ds_poll_requests_total")
    assert polls is not None and 0 < polls < 40
    llm.assert_consumed()


def test_failing_workflow_reports_failure_and_feeds_alerts(
    bot_for: Callable[..., Bot], llm: ScriptedLLM
) -> None:
    llm.add(call("trigger_dolphinscheduler", workflow="坏任务", dates="2026-11-30"), say("started"))
    bot = bot_for("3.2")
    alerts = RecordingAlerts()
    bot.app.deps.alerts = alerts  # the alerts feature is off in this bot
    ask = bot.say("alice", "backfill 坏任务 for 2026-11-30")
    assert "is a write on test" in ask
    assert "backfill business date 2026-11-30 → scheduleTime 2026-11-30" in ask  # offset 0
    assert bot.say("alice", "/confirm") == "started"
    (start,) = bot.sim.starts
    assert json.loads(start["scheduleTime"])["complementStartDate"] == "2026-11-30 00:00:00"
    assert start["processDefinitionCode"] == "2000000000003"
    bot.poll_until_done("1:tool:1:0")

    (inst,) = bot.sim.instances_of("broken_sync")
    (failure,) = bot.messages("cli:alice", "❌")
    assert f"broken_sync instance {inst.id} for 2026-11-30 ended FAILURE" in failure
    assert f"**load** FAILURE on {BAD_HOST} (retries 1/1)" in failure and "SQLException" in failure
    assert f"/rerun {inst.id}" in failure
    event, *rest = alerts.fed
    assert rest == []
    assert (event.workflow, event.instance_id, event.failed_task, event.host) == (
        "broken_sync",
        inst.id,
        "load",
        BAD_HOST,
    )
    assert event.environment == "test" and event.log_tail.splitlines()[-1].endswith("exit code 1")
    assert "SQLException" in event.log_tail

    # the failed tasks, then a rerun from the failed task, watched again in the same conversation
    failed = bot.say("alice", f"/status {inst.id}")
    assert f"**broken_sync** #{inst.id} for 2026-11-30: FAILURE 2/3 tasks, failed load" in failed
    rerun_ask = bot.say("alice", f"/rerun {inst.id}")
    assert "rerun_failed is a write on test" in rerun_ask
    assert (
        f"→ rerun the failed tasks of broken_sync instance {inst.id} for 2026-11-30, now FAILURE" in rerun_ask
    )
    assert "Rerunning the failed tasks of **broken_sync**" in bot.say("alice", "/confirm")
    keys = [w.key for w in bot.app.deps.dolphin.watches.active()]
    assert len(keys) == 1
    bot.poll_until_done(keys[0])
    (success,) = bot.messages("cli:alice", "✅")
    assert success.startswith(f"✅ broken_sync instance {inst.id} for 2026-11-30 ended SUCCESS")
    assert bot.sim.instances[inst.id].run_times == 2
    # the rerun's SUCCESS goes to the alert pipeline too: it resolves this instance's alert (issue 29)
    assert [(e.state, e.instance_id, e.business_date) for e in alerts.fed] == [
        ("FAILURE", inst.id, "2026-11-30"),
        ("SUCCESS", inst.id, "2026-11-30"),
    ]
    llm.assert_consumed()


@pytest.mark.parametrize("version", ["3.1", "3.2", "3.3"])
def test_run_command_backfills_a_range_without_the_model(
    bot_for: Callable[..., Bot], clock: FakeClock, version: str
) -> None:
    clock.advance(days=2)  # today is 2026-12-04, so 12-01..12-03 are all in the past
    bot = bot_for(version, with_llm=False)
    ask = bot.say("bob", "/run order_sync 2026-12-01..2026-12-03")
    assert "needs your /confirm and an approver's /approve" in ask
    bot.say("bob", "/confirm")
    ran = bot.say("carol", f"/approve {ask_id(ask)}")
    assert (
        "Started **order_sync** (project etl, prod) for business dates 2026-12-01 … 2026-12-03 "
        "→ scheduleTime 2026-12-02 … 2026-12-04 (3 dates, one after another)"
    ) in ran
    (start,) = bot.sim.starts
    assert start["scheduleTime"] == (
        '{"complementStartDate":"2026-12-02 00:00:00","complementEndDate":"2026-12-04 00:00:00"}'
    )
    bot.poll_until_done("1:tool:1:0", limit=4 * 3600)
    finals = bot.messages("cli:bob", "✅")
    assert [m.split(" for ")[1][:10] for m in finals] == ["2026-12-01", "2026-12-02", "2026-12-03"]
    first = bot.sim.instances_of("order_sync")[0].id
    status = bot.say("bob", f"/status {first}")
    assert status.startswith(
        f"**order_sync** #{first} for 2026-12-01 (scheduleTime 2026-12-02): SUCCESS 3/3 tasks"
    )


def test_names_that_cannot_run_are_refused_before_asking(bot_for: Callable[..., Bot]) -> None:
    bot = bot_for("3.3", with_llm=False)
    ambiguous = bot.say("alice", "/run sync yesterday")
    assert "'sync' matches several workflows" in ambiguous and "order_sync (project etl)" in ambiguous
    assert ambiguous.endswith("Which one do you mean?") and "Ask the user" not in ambiguous
    unknown = bot.say("alice", "/run order_export yesterday")
    assert "no workflow called 'order_export'" in unknown and "Closest names:" in unknown
    offline = bot.say("alice", "/run legacy_export yesterday")
    assert "legacy_export" in offline and "OFFLINE" in offline and "release it" in offline
    future = bot.say("alice", "/run long_sync 2030-01-01")
    assert "in the future" in future
    assert "Usage: /run" in bot.say("alice", "/run")
    assert (
        bot.sim.starts == []
        and bot.app.deps.pending.open_for(user_id="alice", conversation="cli:alice") == []
    )


def test_a_new_workflow_is_found_by_resyncing_the_catalog(
    bot_for: Callable[..., Bot], clock: FakeClock
) -> None:
    bot = bot_for("3.3", with_llm=False)
    assert "没有叫“brand_new”的工作流" in bot.say("alice", "/run brand_new 昨天")
    from xihe.integrations.dolphinscheduler.sim import SimDefinition

    bot.sim.projects[1000000000001].definitions.append(SimDefinition("brand_new", 2000000000099))
    assert "没有叫“brand_new”的工作流" in bot.say("alice", "/run brand_new 昨天")  # synced seconds ago
    clock.advance(61)
    ask = bot.say("bob", "/run brand_new 昨天")  # not in workflows.yaml: treated as production
    assert "会写入生产环境 prod" in ask


def test_production_workflow_needs_an_approver(bot_for: Callable[..., Bot]) -> None:
    bot = bot_for("3.3", with_llm=False)
    assert "已拒绝：" in bot.say(
        "alice", "/run order_sync 昨天"
    )  # developer: test only; the reply follows 昨天
    ask = bot.say("bob", "/run order_sync 昨天")
    pending = ask_id(ask)
    bot.say("bob", f"/confirm {pending}")
    assert "cannot approve their own" in bot.say("bob", f"/approve {pending}")
    assert bot.sim.starts == []
    assert "已启动 **order_sync**" in bot.say("carol", f"/approve {pending}")
    assert len(bot.sim.starts) == 1


def test_stop_a_long_run_reports_stop_without_alert(bot_for: Callable[..., Bot]) -> None:
    bot = bot_for("3.3", with_llm=False)
    alerts = RecordingAlerts()
    bot.app.deps.alerts = alerts  # the alerts feature is off in this bot
    bot.say("alice", "/run long_sync")
    assert "Started **long_sync**" in bot.say("alice", "/confirm")
    (start,) = bot.sim.starts
    assert start["execType"] == "START_PROCESS" and start["scheduleTime"] == ""
    (inst,) = bot.sim.instances_of("long_sync")
    bot.sim.advance(60)
    poll_watches(bot.app)
    # the total is the workflow's 3 tasks, not the 1 started so far
    status = bot.say("alice", f"/status {inst.id}")
    assert status.startswith(f"**long_sync** #{inst.id}: RUNNING 0/3 tasks, running extract"), status
    # times in the team's zone (xihe.yaml timezone: Asia/Shanghai) with an explicit offset, never CST
    assert status.endswith("\nstarted 2026-12-02 17:00:00 +08:00"), status
    bot.say("alice", f"/stop {inst.id}")
    assert "Stopping **long_sync**" in bot.say("alice", "/confirm")
    bot.poll_until_done("1:tool:1:0")
    (stopped,) = bot.messages("cli:alice", "⏹️")
    assert "ended STOP" in stopped and alerts.fed == []
    # a run that already ended: said at once, no confirmation asked for
    assert "already ended STOP; there is nothing to stop" in bot.say("alice", f"/stop {inst.id}")


@pytest.fixture
def sinks(clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> Iterator[Sinks]:
    """The alert feature's robot and SMTP sinks (as in tests/alerts), on the test clock."""
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    with RobotSink(keys={KEY, KEY_PROD}, clock=clock) as robot, SmtpSink() as smtp:
        yield Sinks(robot, smtp)


def test_failure_reaches_the_wecom_robot_through_the_real_alert_pipeline(
    bot_for: Callable[..., Bot], sinks: Sinks, clock: FakeClock, db_url: str
) -> None:
    shipped = yaml.safe_load((REPO / "config" / "alerts.yaml").read_text())
    alerts = merge(
        shipped,
        {
            "instance_wait_seconds": 10,
            "maintenance": [],
            "delivery": {"robot_base_url": sinks.robot.url, "timeout_seconds": 2, "tries_per_run": 1},
            "smtp": {"host": sinks.smtp.host, "port": sinks.smtp.port, "starttls": False, "admins": ["a@t"]},
        },
    )
    bot = bot_for("3.3", db_url, with_llm=False, extra={"alerts.yaml": alerts})
    bot.say("alice", "/run broken_sync 2026-11-30")
    bot.say("alice", "/confirm")
    bot.poll_until_done("1:tool:1:0")
    (inst,) = bot.sim.instances_of("broken_sync")
    (record,) = [r for r in bot.app.deps.alerts.records.rows() if r["kind"] == "decision"]
    # retried and still failed: tier P2, summarised when its window ends
    assert (record["instance_id"], record["task"], record["tier"]) == (inst.id, "load", "P2")
    run_jobs(bot.app)
    assert sinks.robot_texts(KEY) == []
    clock.advance(minutes=shipped["window_minutes"] + 1)
    run_jobs(bot.app)
    (message,) = sinks.robot_texts(KEY)
    assert "broken_sync" in message and str(inst.id) in message and BAD_HOST in message
    assert "SQLException" in message


def test_jobs_sync_names_and_poll_through_the_scheduler(bot_for: Callable[..., Bot]) -> None:
    from xihe.agent.scheduler import all_jobs, run_job

    bot = bot_for("3.3", with_llm=False)
    jobs = {j.id: j for j in all_jobs(bot.app)}
    assert {"ds_poll", "ds_catalog_sync"} <= set(jobs)
    run_job(bot.app, jobs["ds_catalog_sync"])
    names = {e.name for e in bot.app.deps.dolphin.catalog.entries()}
    assert {"order_sync", "legacy_export", "dw_sales"} <= names
    bot.say("alice", "/run long_sync 昨天")
    bot.say("alice", "/confirm")
    bot.sim.advance(30)
    run_job(bot.app, jobs["ds_poll"])
    runs = bot.app.deps.metrics.registry.get_sample_value(
        "xihe_job_runs_total", {"job": "ds_poll", "outcome": "ok"}
    )
    assert runs == 1 and bot.messages("cli:alice", "⏳")


def test_a_restarted_bot_reports_the_run_another_process_started(
    bot_for: Callable[..., Bot], tmp_path: Path
) -> None:
    first = bot_for("3.3", with_llm=False)
    first.say("alice", "/run long_sync 昨天")
    first.say("alice", "/confirm")
    first.app.deps.engine.dispose()  # the first process is gone; a new one opens the same database
    second = make_bot(tmp_path / "restarted", first.sim, first.sim.clock, f"sqlite:///{tmp_path / 'xihe.db'}")
    first.sim.advance(60)
    poll_watches(second.app)
    second.app.deps.dolphin.client.stop(1000000000001, first.sim.instances_of("long_sync")[0].id)
    second.poll_until_done("1:tool:1:0")
    assert second.messages("cli:alice", "⏹️") and first.messages("cli:alice", "⏹️") == []


def test_without_credentials_the_feature_stays_off(
    bot_for: Callable[..., Bot], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    on = bot_for("3.3", with_llm=False)
    assert "trigger_dolphinscheduler" in on.app.registry
    monkeypatch.delenv("XIHE_DS_TOKEN")  # dolphin.yaml names it, but it is not set
    off = make_bot(tmp_path / "off", on.sim, on.sim.clock, f"sqlite:///{tmp_path / 'off.db'}")
    assert "trigger_dolphinscheduler" not in off.app.registry and off.app.deps.dolphin is None
    assert off.say("alice", "/run order_sync 昨天").startswith("没有 /run 这个命令")  # a Chinese message
    assert off.say("alice", "/run order_sync yesterday").startswith("Unknown command /run")
