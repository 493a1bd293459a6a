"""Finding 1 of issue 26: outside text in a P0 robot alert must not become a live link under a real mention.

The event goes through the real pipeline, outbox, deliverer and robot client into the loopback robot
sink; the assertions read what the sink received.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from tenacity import wait_none

from tests.alerts.conftest import PRODUCTION, T0, WORKFLOWS, config, event
from tests.encode.corpus import HOSTILE, ids, readable
from tests.support.wecom_view import added, live
from xihe.agent.alerts.deliver import Deliverer
from xihe.agent.alerts.manual import manual_row
from xihe.agent.alerts.notify.wecom_robot import WeComRobotNotifier
from xihe.agent.alerts.outbox import InMemoryOutbox
from xihe.agent.alerts.pipeline import Pipeline
from xihe.agent.alerts.ratelimit import RateLimiter
from xihe.agent.alerts.state import InMemoryAlertStateStore
from xihe.integrations.wecom.robot import RobotClient
from xihe.integrations.wecom.robot_sink import RobotSink

KEY = "robot-key-prod"
PHISH = "[点此处理](http://evil.example/phish)"
# order_sync (tests/alerts/conftest.py) is a P0 core workflow paging zhangsan and lisi; DolphinScheduler
# reports it under whatever name it now has (its code is what identifies it)


def p0_alert(**fields: str) -> str:
    """The P0 message the robot sink receives for one failed order_sync run with these event fields."""
    cfg = config(public_base_url="https://xihe.example")
    outbox = InMemoryOutbox()
    pipeline = Pipeline(cfg, WORKFLOWS, InMemoryAlertStateStore(), outbox, production=PRODUCTION)
    base = dict(project="etl", workflow="order_sync", workflow_code=1001, environment="prod", instance_id=42)
    pipeline.feed(event(**{**base, **fields}), T0)
    pipeline.tick(T0 + timedelta(seconds=1))
    with RobotSink(keys={KEY}) as sink:
        notifier = WeComRobotNotifier(RobotClient(sink.url, timeout=2), {"XIHE_ROBOT_KEY_PROD": KEY})
        Deliverer(
            cfg, outbox, [notifier], None, RateLimiter(), wait=wait_none(), sleep=lambda _s: None
        ).run_once(T0 + timedelta(seconds=1))
        (message,) = sink.messages[KEY]
    assert message.msgtype == "markdown"
    return message.content


def test_a_phishing_link_in_names_error_and_log_stays_text_under_the_real_mention():
    benign = p0_alert(workflow="order_sync", task="load", error="boom", log_tail="ERROR boom")
    hostile = p0_alert(
        workflow=f"order_sync {PHISH}",
        task=f"load{PHISH}",
        error=f"failed, see {PHISH}",
        log_tail=f"line 1\n{PHISH}\nline 3",
    )
    assert ("mention", "zhangsan") in live(hostile)  # the page itself still goes out
    assert not [k for k in live(hostile) if k[1].startswith("http://evil")], hostile
    assert added(hostile, benign) == {}, hostile
    # still readable, in the heading, the failed-task line, the error and the log tail
    assert hostile.count("［点此处理］(http://evil.example/phish)") >= 4


DANGEROUS = {"link", "image", "ref_link", "mention", "autolink", "tag", "entity"}


@pytest.mark.parametrize(("text", "words"), [c[1:] for c in HOSTILE], ids=ids())
def test_hostile_event_fields_add_no_markup_to_the_p0_robot_message(
    text: str, words: tuple[str, ...]
) -> None:
    benign = p0_alert(workflow="order_sync", task="load", error="boom", log_tail="ERROR boom", host="h:1")
    hostile = p0_alert(workflow=text, task=text, error=text, log_tail=text, host=text, project=text)
    found = live(hostile)
    assert found[("mention", "zhangsan")] == 1 and hostile.startswith("<@zhangsan>")
    assert not [k for k in found if k[0] in DANGEROUS and k not in live(benign)], hostile
    assert added(hostile, benign) == {}, hostile
    assert len(hostile.encode()) <= 4096
    assert all(readable(w) in readable(hostile) for w in words), hostile


@pytest.mark.parametrize(("text", "words"), [c[1:] for c in HOSTILE], ids=ids())
def test_a_model_raised_alert_keeps_its_formatting_but_links_and_pages_nobody(
    text: str, words: tuple[str, ...]
) -> None:
    cfg = config()
    outbox = InMemoryOutbox()
    title = text[:120]  # the tool's argument model allows 120 characters
    outbox.add(manual_row("manual:t:P0:prod", "prod", title, f"**状态**\n{text}", ("zhangsan",), T0))
    with RobotSink(keys={KEY}) as sink:
        notifier = WeComRobotNotifier(RobotClient(sink.url, timeout=2), {"XIHE_ROBOT_KEY_PROD": KEY})
        Deliverer(
            cfg, outbox, [notifier], None, RateLimiter(), wait=wait_none(), sleep=lambda _s: None
        ).run_once(T0)
        (message,) = sink.messages[KEY]
    found = live(message.content)
    assert [k for k in found if k[0] in DANGEROUS] == [("mention", "zhangsan")], message.content
    assert found[("heading", "")] <= 1 + live(text)[("heading", "")]  # our title; the body is the model's
    assert all(readable(w) in readable(message.content) for w in words)
