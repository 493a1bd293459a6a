"""Build whole bots with the alerts feature pointed at the loopback robot and SMTP sinks."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import CORE_FILES, REPO, write_config
from xihe.agent.alert_event import AlertEvent
from xihe.agent.alerts.event import from_report
from xihe.agent.alerts.service import AlertService
from xihe.agent.app import App, build_app
from xihe.agent.clock import FakeClock
from xihe.agent.feature import Job
from xihe.agent.scheduler import all_jobs, run_job
from xihe.integrations.fakes.llm_server import ScriptedLLM
from xihe.integrations.fakes.smtp_sink import SmtpSink
from xihe.integrations.wecom.robot_sink import RobotSink

KEY = "robot-key-default-0123456789"
KEY_PROD = "robot-key-prod-9876543210"
SECRET = "ds-webhook-secret-value"
ENV = {
    "XIHE_ROBOT_KEY": KEY,
    "XIHE_ROBOT_KEY_PROD": KEY_PROD,
    "XIHE_DS_WEBHOOK_SECRET": SECRET,
    "XIHE_SMTP_PASSWORD": "smtp-password-value",
}


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge `over` into a copy of `base`."""
    out = dict(base)
    for k, v in over.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


@dataclass
class Sinks:
    """The robot and SMTP sinks one test's bots deliver to."""

    robot: RobotSink
    smtp: SmtpSink

    def robot_texts(self, key: str = KEY) -> list[str]:
        return [m.content for m in self.robot.messages.get(key, [])]


@pytest.fixture
def sinks(clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> Iterator[Sinks]:
    """A robot sink on the test clock that knows both keys, an SMTP sink, and the env variables."""
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    with RobotSink(keys={KEY, KEY_PROD}, clock=clock) as robot, SmtpSink() as smtp:
        yield Sinks(robot, smtp)


AlertsApp = Callable[..., App]


@pytest.fixture
def alerts_app(tmp_path: Path, llm: ScriptedLLM, clock: FakeClock, sinks: Sinks) -> AlertsApp:
    """`alerts_app(db, **alerts_yaml_overrides)`: a bot with alerts.yaml + workflows.yaml (+ the shipped
    files named in `extra`, e.g. oncall.yaml); call again = restart."""
    counter = {"n": 0}

    def make(
        db: str,
        *,
        script: list[Any] | None = None,
        holder: str = "",
        extra: tuple[str, ...] = (),
        **over: Any,
    ) -> App:
        counter["n"] += 1
        if script:
            llm.add(*script)
        cfg = write_config(
            tmp_path / f"alerts-config{counter['n']}",
            llm_url=llm.base_url,
            files=(*CORE_FILES, "workflows.yaml", *extra),
        )
        shipped = yaml.safe_load((REPO / "config" / "alerts.yaml").read_text())
        alerts = merge(
            shipped,
            {
                "instance_wait_seconds": 10,
                "maintenance": [],
                "delivery": {
                    "robot_base_url": sinks.robot.url,
                    "timeout_seconds": 2,
                    "tries_per_run": 1,  # retries happen on later runs, on the fake clock (no sleeps)
                    "retry_seconds": 30,
                    "probe_seconds": 60,
                },
                "smtp": {
                    "host": sinks.smtp.host,
                    "port": sinks.smtp.port,
                    "starttls": False,
                    "admins": ["ops@test"],
                },
            },
        )
        alerts = merge(alerts, over)
        (cfg / "alerts.yaml").write_text(yaml.safe_dump(alerts, allow_unicode=True))
        return build_app(cfg, clock=clock, database_url=db, holder=holder or f"replica-{counter['n']}")

    return make


def svc(app: App) -> AlertService:
    """The alert service of a bot."""
    service = app.deps.alerts
    assert isinstance(service, AlertService)
    return service


def job(app: App, job_id: str) -> None:
    """Run one of the bot's scheduler jobs once, the way the scheduler does."""
    jobs: dict[str, Job] = {j.id: j for j in all_jobs(app)}
    run_job(app, jobs[job_id])


def run_jobs(app: App) -> None:
    """One pass of the alert jobs: flush windows, then deliver."""
    job(app, "alerts_flush")
    job(app, "alerts_deliver")


def failure(clock: FakeClock, **kw: Any) -> AlertEvent:
    """A final failure of user_profile_test (test, P1, default channel) at the clock's time, as
    DolphinScheduler reports it (`state` the workflow's, `task_state` the task's)."""
    base: dict[str, Any] = {
        "at": clock(),
        "project": "sandbox",
        "workflow": "user_profile_test",
        "workflow_code": 2001,
        "instance_id": 1,
        "state": "FAILURE",
        "task": "t1",
        "host": "10.0.0.1:1234",
        "error": "Connection refused to 10.9.9.9:5432",
        "environment": "test",
        "task_state": "FAILURE",
    }
    base.update(kw)
    return from_report(**base)
