"""The hostile corpus by e-mail: what the loopback SMTP sink receives when the robot refuses a P0 alert.

The alert goes through the real pipeline, outbox and deliverer; the robot answers 40058 (content
refused), so the row goes by the e-mail fallback over smtplib. The mail must have a one-line subject,
a plain part that reads the alert, and an HTML part whose only tags and links are xihe's own.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from tenacity import wait_none

from tests.alerts.conftest import PRODUCTION, T0, config, event
from tests.encode.corpus import HOSTILE, ids, readable
from tests.encode.html_page import parsed
from tests.encode.test_alert_links import KEY, WORKFLOWS
from xihe.agent.alerts.deliver import Deliverer
from xihe.agent.alerts.notify.email import EmailNotifier
from xihe.agent.alerts.notify.wecom_robot import WeComRobotNotifier
from xihe.agent.alerts.outbox import InMemoryOutbox
from xihe.agent.alerts.pipeline import Pipeline
from xihe.agent.alerts.ratelimit import RateLimiter
from xihe.agent.alerts.state import InMemoryAlertStateStore
from xihe.integrations.fakes.smtp_sink import Mail, SmtpSink
from xihe.integrations.mailer import Mailer
from xihe.integrations.wecom.robot import RobotClient
from xihe.integrations.wecom.robot_sink import RobotSink

OURS = {"html", "body", "p", "div", "span", "a", "b", "br"}
TRUSTED = "https://xihe.example/ui/runs/42"


def mailed(**fields: str) -> Mail:
    """The fallback mail for one failed order_sync run (P0) with these event fields."""
    cfg = config(public_base_url="https://xihe.example", smtp={"host": "127.0.0.1", "admins": ["ops@test"]})
    outbox = InMemoryOutbox()
    pipeline = Pipeline(cfg, WORKFLOWS, InMemoryAlertStateStore(), outbox, production=PRODUCTION)
    base = dict(project="etl", workflow="order_sync", workflow_code=1001, environment="prod", instance_id=42)
    pipeline.feed(event(**{**base, **fields}), T0)
    now = T0 + timedelta(seconds=1)
    pipeline.tick(now)
    with RobotSink(keys={KEY}) as sink, SmtpSink() as smtp:
        sink.script(40058)  # WeCom refuses the content: the row goes by mail
        robot = WeComRobotNotifier(RobotClient(sink.url, timeout=2), {"XIHE_ROBOT_KEY_PROD": KEY})
        mail = EmailNotifier(Mailer(smtp.host, smtp.port, "xihe@test"), cfg.smtp.admins)
        Deliverer(
            cfg, outbox, [robot], mail, RateLimiter(), wait=wait_none(), sleep=lambda _s: None
        ).run_once(now)
        (got,) = smtp.mails
    return got


@pytest.mark.parametrize(("text", "words"), [c[1:] for c in HOSTILE], ids=ids())
def test_hostile_fields_reach_the_fallback_mail_as_text(text: str, words: tuple[str, ...]) -> None:
    got = mailed(workflow=text, task=text, error=text, log_tail=text, host=text)
    subject = got.message["Subject"]
    assert "\n" not in subject and "\r" not in subject and got.message["Bcc"] is None
    assert got.subject.strip().startswith("[xihe P0]") and len(got.subject.strip()) <= 200
    page = parsed(got.html)
    assert {tag for tag, _a in page.tags} <= OURS, got.html
    assert [a.get("href") for tag, a in page.tags if tag == "a"] == [TRUSTED]  # only xihe's own link
    assert all(set(a) <= {"href", "style"} for _tag, a in page.tags)  # no onerror=, no src=
    shown = "".join(page.text)
    assert "@zhangsan" in shown and "@zhangsan" in got.body  # the page, read out
    for part in (shown, got.body):
        assert all(readable(w) in readable(part) for w in words), part
    assert "<font" not in got.body and "<@" not in got.body and "[运行详情](" not in got.body


def test_a_plain_alert_mail_reads_like_the_robot_message() -> None:
    got = mailed(task="load", error="boom", log_tail="ERROR boom")
    assert got.subject == "[xihe P0] order_sync #42 failed"
    assert got.body.startswith("@zhangsan @lisi \nP0 工作流失败：order_sync")
    assert f"运行详情 <{TRUSTED}>" in got.body and "> ERROR boom" in got.body
    assert f'<a href="{TRUSTED}">运行详情</a>' in got.html and "<b>错误</b>" in got.html
