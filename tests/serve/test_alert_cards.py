"""Alert cards end to end (issue 28): a DolphinScheduler failure → a P0 alert through the WeCom app
channel, as markdown and as a card with buttons → a tap on **Rerun failed tasks** gives the normal
confirm flow (a pending rerun and its confirmation card) → a tap on **Mute 30 min** opens a
maintenance window. A real `xihe serve`, the DolphinScheduler simulator (its failed run), its HTTP
alert plugin's POST, and the WeCom fake (card sends validated, clicks sent as WeCom sends them)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests
import yaml
from sqlalchemy import select

from tests.serve.harness import AGENT_ID, Replica, serve_config, wait_until
from tests.serve.test_cards import _card, _click, _clicks, _key
from xihe.agent.alert_tables import alert_maintenance
from xihe.agent.clock import FakeClock, utc_now
from xihe.agent.core_tables import pending_action
from xihe.agent.db import make_engine
from xihe.agent.demo.environment import WORKFLOWS, seed
from xihe.integrations.dolphinscheduler.sim import DolphinSimulator
from xihe.integrations.dolphinscheduler.sim.model import SimInstance
from xihe.integrations.wecom.fake import FakeWeCom

HOOK_SECRET = "ds-alert-plugin-secret-0001"


def _configure(cfg: Path, sim: DolphinSimulator, fake: FakeWeCom) -> None:
    """dolphin.yaml at the simulator, the demo's workflows, and alerts.yaml whose prod channel is the
    WeCom app (its members: dave), the default one a robot."""
    dolphin = {"base_url": sim.url, "version": sim.version, "token_env": "XIHE_DS_TOKEN",
               "server_timezone": "UTC", "retries": 0}  # fmt: skip
    (cfg / "dolphin.yaml").write_text(yaml.safe_dump(dolphin))
    (cfg / "workflows.yaml").write_text(yaml.safe_dump(WORKFLOWS, allow_unicode=True))
    alerts = yaml.safe_load((Path(__file__).parents[2] / "config" / "alerts.yaml").read_text())
    alerts["maintenance"] = []
    alerts["channels"]["prod"] = {
        "kind": "wecom_app",
        "robot_key_env": "XIHE_WECOM_APP_SECRET",
        "to_users": ["dave"],
        "agent_id": AGENT_ID,
        "api_base": fake.url,
    }
    (cfg / "alerts.yaml").write_text(yaml.safe_dump(alerts, allow_unicode=True))


def _failed_run(sim: DolphinSimulator, clock: FakeClock) -> SimInstance:
    """payment_reconcile started the way a schedule starts it, run until it fails."""
    inst = sim.run_directly("payment_reconcile", schedule=clock())
    for _ in range(200):
        if inst.state == "FAILURE":
            return inst
        sim.advance(5)
    raise AssertionError(f"run {inst.id} did not fail: {inst.state}")


def _plugin_post(bot: Replica, inst: SimInstance) -> requests.Response:
    """What DolphinScheduler's HTTP alert plugin posts for the failed run (its failed task items)."""
    fmt = "%Y-%m-%d %H:%M:%S"
    items = [
        {
            "projectCode": inst.project.code,
            "projectName": inst.project.name,
            "processId": inst.id,
            "processDefinitionCode": inst.definition.code,
            "processName": f"{inst.definition.name}-1-20261202170000123",
            "taskName": t.name,
            "taskType": "SHELL",
            "taskState": t.state,
            "taskStartTime": t.start_time.strftime(fmt) if t.start_time else None,
            "taskEndTime": t.end_time.strftime(fmt) if t.end_time else None,
            "taskHost": t.host or "",
            "logPath": t.log_path or "",
        }
        for t in inst.tasks
        if t.state == "FAILURE" and t.flag == "YES"
    ]
    body = {"title": "start process failed", "content": json.dumps(items)}
    return bot.http.post(
        bot.url + "/hooks/dolphinscheduler", json=body, headers={"X-Xihe-Token": HOOK_SECRET}, timeout=30
    )


def _rows(db_url: str, table: Any) -> list[Any]:
    engine = make_engine(db_url)
    try:
        with engine.connect() as conn:
            return list(conn.execute(select(table).order_by(table.c.id)))
    finally:
        engine.dispose()


def test_a_failure_alert_card_asks_for_a_rerun_and_mutes_the_workflow_by_taps(
    tmp_path: Path,
    db_url: str,
    fake_wecom: FakeWeCom,
    start_replica: Callable[..., Replica],
) -> None:
    clock = FakeClock(utc_now())
    with DolphinSimulator(seed(task_seconds=5, fail_retries=0), version="3.2", clock=clock) as sim:
        cfg = serve_config(tmp_path / "cfg", fake_wecom)
        _configure(cfg, sim, fake_wecom)
        env = {"XIHE_DS_TOKEN": sim.token, "XIHE_DS_WEBHOOK_SECRET": HOOK_SECRET}
        bot = start_replica(cfg, db_url, env=env)
        inst = _failed_run(sim, clock)
        assert _plugin_post(bot, inst).status_code == 200

        # the P0 alert reaches the app channel's member: its markdown, and a card with three buttons
        alert = _card(fake_wecom, "dave")
        text = wait_until(lambda: fake_wecom.contents("dave"), what="the alert's markdown")[0]
        assert "payment_reconcile" in text and f"/rerun {inst.id}" in text  # typed commands kept
        copy = alert.copies["dave"]
        assert [b["text"] for b in copy["button_list"]] == ["认领", "重跑失败任务", "静音此工作流 30 分钟"]
        assert copy["main_title"]["title"] == "P0 工作流失败：payment_reconcile"  # no markup left
        rows = {r["keyname"]: r["value"] for r in copy["horizontal_content_list"]}
        assert rows["实例 ID"] == str(inst.id) and rows["失败任务"] == "report（重试 0/0）"
        assert rows["告警"] == "A1"  # the alert's own id (/ack A1), a row of its own
        assert _rows(db_url, pending_action) == [] and _rows(db_url, alert_maintenance) == []

        now = int(time.time())
        _click(bot.app_sender(), fake_wecom, "dave", alert, _key(alert, "dave", "重跑失败任务"), now)
        # the normal confirm flow: a pending rerun bound to dave, and its confirmation card
        (action,) = wait_until(lambda: _rows(db_url, pending_action), what="the pending rerun")
        assert (action.user_id, action.status) == ("dave", "pending")
        assert str(inst.id) in action.args_json and action.needs_approval  # a production write
        confirm = _card(fake_wecom, "dave", 2)
        assert confirm.task_id != alert.task_id and confirm.copies["dave"]["button_list"]
        assert len(sim.starts) == 0 and inst.run_times == 1  # nothing reran on a tap alone

        _click(
            bot.app_sender(), fake_wecom, "dave", alert, _key(alert, "dave", "静音此工作流 30 分钟"), now + 1
        )
        (window,) = wait_until(lambda: _rows(db_url, alert_maintenance), what="the maintenance window")
        assert (window.scope_kind, window.scope_value, window.created_by) == (
            "workflow",
            "payment_reconcile",
            "dave",
        )
        assert 29 * 60 <= (window.end_at - window.start_at).total_seconds() <= 31 * 60
        clicks = wait_until(lambda: len(_clicks(db_url)) == 2 and _clicks(db_url), what="two taps audited")
        assert [(c.actor, c.detail["command"]) for c in clicks] == [
            ("dave", f"/rerun {inst.id}"),
            ("dave", "/maint on 30m workflow:payment_reconcile"),
        ]
