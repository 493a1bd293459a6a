"""The notifier seam: deliver.py sends through whatever notifier serves a channel's kind."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
import requests
from tenacity import wait_none

from tests.alerts.conftest import T0, config, event
from xihe.agent.alerts.deliver import Deliverer
from xihe.agent.alerts.notify import channel_notifiers, kind_markups
from xihe.agent.alerts.notify.base import Attempt
from xihe.agent.alerts.notify.wecom_robot import WeComRobotNotifier
from xihe.agent.alerts.outbox import InMemoryOutbox
from xihe.agent.alerts.ratelimit import RateLimiter
from xihe.agent.errors import ConfigError
from xihe.config.alerts import AlertsConfig, Channel
from xihe.integrations.fakes.loopback import LoopbackServer, Request, Response
from xihe.integrations.wecom.robot import RobotClient
from xihe.integrations.wecom.robot_sink import RobotSink

ENV = {"XIHE_ROBOT_KEY": "robot-key-1234", "XIHE_HOOK_TOKEN": "hook-token-5678"}


class HookNotifier:
    """A second channel kind: JSON to a webhook whose token is in `channel.robot_key_env`."""

    kind = "hook"
    markup = "wecom_markdown"

    def __init__(self, url: str) -> None:
        self.url = url

    def ready(self, channel: Channel) -> str:
        return "" if ENV.get(channel.robot_key_env) else f"{channel.robot_key_env} is not set"

    def send(self, channel: Channel, text: str, *, subject: str = "", ref: str = "") -> Attempt:
        token = ENV[channel.robot_key_env]
        resp = requests.post(self.url, json={"token": token, "title": subject, "text": text}, timeout=2)
        ok = resp.status_code == 200 and resp.json().get("ok") is True
        return Attempt(ok, resp.status_code, resp.text, error="" if ok else f"hook HTTP {resp.status_code}")


def hook_server(received: list[dict]) -> LoopbackServer:
    def handle(req: Request) -> Response:
        body = req.json()
        if body.get("token") != ENV["XIHE_HOOK_TOKEN"]:
            return Response.of_json({"ok": False}, status=403)
        received.append(body)
        return Response.of_json({"ok": True})

    return LoopbackServer(handle)


def with_hook_channel(cfg: AlertsConfig) -> AlertsConfig:
    # config/alerts.py lists the shipped kinds (a Literal); the test's own kind is built unvalidated
    hook = Channel.model_construct(kind="hook", robot_key_env="XIHE_HOOK_TOKEN", rate_limit_per_minute=20)
    return cfg.model_copy(update={"channels": {**cfg.channels, "prod": hook}})


def test_an_alert_goes_out_through_a_second_notifier_kind(make_pipeline):
    cfg = with_hook_channel(config())
    outbox = InMemoryOutbox()
    pipeline = make_pipeline(cfg, outbox=outbox, markups={**kind_markups(), "hook": "wecom_markdown"})
    # order_sync is a core production workflow on channel "prod": a P0, pushed at once
    pipeline.feed(event(workflow="order_sync", workflow_code=1001, project="etl", environment="prod"), T0)
    pipeline.feed(event(instance_id=2), T0)  # profile_test on the default channel
    received: list[dict] = []
    with hook_server(received) as hook, RobotSink() as robot:
        deliverer = Deliverer(
            cfg,
            outbox,
            [WeComRobotNotifier(RobotClient(robot.url), ENV), HookNotifier(hook.url + "/hook")],
            limiter=RateLimiter(),
            wait=wait_none(),
            sleep=lambda _s: None,
        )
        attempts = deliverer.run_once(T0 + timedelta(seconds=1))
        robot_texts = [m.content for m in robot.messages.get(ENV["XIHE_ROBOT_KEY"], [])]
    assert [(a.channel, a.via, a.ok) for a in sorted(attempts, key=lambda a: a.channel)] == [
        ("default", "robot", True),
        ("prod", "robot", True),
    ]
    assert len(received) == 1 and "order_sync" in received[0]["text"] and received[0]["title"]
    assert robot_texts and all("order_sync" not in t for t in robot_texts)
    sent = {r.channel: r for r in outbox.rows()}
    assert sent["prod"].status == "sent" and sent["prod"].text == received[0]["text"]
    assert "hook-token-5678" not in json.dumps([a.to_dict() for a in attempts])


def test_a_channel_kind_without_a_notifier_is_refused_at_construction():
    cfg = with_hook_channel(config())
    with pytest.raises(ConfigError, match=r"channels\.prod: no notifier for kind 'hook'"):
        Deliverer(cfg, InMemoryOutbox(), channel_notifiers(cfg, ENV).values())


def test_every_shipped_kind_has_a_notifier_module():
    kinds = set(Channel.model_fields["kind"].annotation.__args__)  # type: ignore[union-attr]
    assert set(channel_notifiers(config(), ENV)) == kinds
    assert kind_markups() == {"wecom_robot": "wecom_markdown", "wecom_app": "wecom_markdown"}
