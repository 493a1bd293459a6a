"""Alerts through the WeCom app: the markdown to the channel's members and, for a run alert, a card
whose buttons stand for the alert's typed next steps (checked by the strict WeCom fake)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from tests.alerts.test_render import ctx
from xihe.agent.alerts.deliver import addressed
from xihe.agent.alerts.notify.wecom_app import WeComAppNotifier, alert_card
from xihe.agent.alerts.outbox import OutboxRow
from xihe.agent.alerts.render import Renderer
from xihe.agent.cards import command_of_key
from xihe.config.alerts import Channel
from xihe.integrations.wecom.fake import FakeWeCom

ENV = {"XIHE_WECOM_CORP_ID": "wwcorp", "XIHE_WECOM_APP_SECRET": "app-secret-value-123"}


def _channel(**over: object) -> Channel:
    fields = {"kind": "wecom_app", "robot_key_env": "XIHE_WECOM_APP_SECRET", "to_users": ["carol", "dave"]}
    return Channel.model_validate({**fields, "agent_id": 1000002, **over})


def test_a_run_alert_goes_as_markdown_and_a_card_whose_buttons_run_ack_rerun_and_maint() -> None:
    text = Renderer().render("instance.md.j2", ctx())
    with FakeWeCom() as fake:
        fake.add_app("wwcorp", "app-secret-value-123", 1000002)
        channel = _channel(api_base=fake.url)
        attempt = WeComAppNotifier(ENV).send(channel, text, ref="instance:42")
        assert attempt.ok, attempt
        for user in ("carol", "dave"):
            assert fake.contents(user)[0] == text
            (card,) = fake.cards.of_user(user)
            buttons = card.copies[user]["button_list"]
            assert [b["text"] for b in buttons] == ["认领", "重跑失败任务", "静音此工作流 30 分钟"]
            assert [command_of_key(b["key"]) for b in buttons] == [
                "/ack 42",  # the alert has someone: its escalation stops
                "/rerun 42",  # the normal confirm flow, as typed
                "/maint on 30m workflow:order_sync",  # the code of /maint
            ]
        assert "zhangsan" not in card.copies["carol"]["main_title"]["title"]


def test_texts_without_a_run_get_no_card_and_the_channel_needs_its_members() -> None:
    assert alert_card("**P2 summary**: 3 runs failed") is None
    assert WeComAppNotifier({}).ready(_channel()) == (
        "variable(s) XIHE_WECOM_CORP_ID, XIHE_WECOM_APP_SECRET not set"
    )
    with pytest.raises(ValidationError, match="to_users"):
        _channel(to_users=[])


def test_a_refused_send_is_reported_without_the_secret() -> None:
    with FakeWeCom() as fake:  # the app is not registered: gettoken refuses the secret
        attempt = WeComAppNotifier(ENV).send(_channel(api_base=fake.url), "x")
    assert not attempt.ok and "app-secret-value-123" not in attempt.error + attempt.body


def test_an_escalation_page_through_the_app_goes_to_that_person_alone() -> None:
    now = datetime(2026, 12, 2, 9, tzinfo=UTC)
    page = OutboxRow("page:1:0:secondary", "page", "P0", "oncall-app", "paging bob", "<@bob>\n\n## 升级", now, now,
                     to_user="bob")  # fmt: skip
    plain = OutboxRow("inst:1:P0:oncall-app", "instance", "P0", "oncall-app", "s", "alert", now, now)
    with FakeWeCom() as fake:
        fake.add_app("wwcorp", "app-secret-value-123", 1000002)
        channel = _channel(api_base=fake.url)
        assert addressed(channel, plain) is channel
        assert addressed(_channel(kind="wecom_robot", agent_id=None), page).kind == "wecom_robot"
        attempt = WeComAppNotifier(ENV).send(addressed(channel, page), page.text, ref=page.key)
        assert attempt.ok, attempt
        assert fake.contents("bob") == [page.text]  # an app message to the person paged
        assert fake.contents("carol") == [] and fake.contents("dave") == []
