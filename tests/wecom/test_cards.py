"""Template cards against the strict fake: what WeCom refuses, single-use update codes, click keys."""

from __future__ import annotations

import pytest
from tenacity import wait_none

from tests.alerts.test_render import ctx
from tests.wecom.conftest import AGENT_ID, CORP_ID
from xihe.agent.alerts.notify.wecom_app import alert_card
from xihe.agent.alerts.render import Renderer
from xihe.agent.cards import Button, Card, alert_buttons, alert_key, command_of_key
from xihe.agent.clock import FakeClock
from xihe.agent.errors import WeComError
from xihe.integrations.wecom.app_client import AppClient, TokenCache
from xihe.integrations.wecom.cards import template_card, validate_card
from xihe.integrations.wecom.fake import FakeWeCom

CARD = Card(
    "Confirm action 3",
    "write_note on test",
    (("State", "waiting"),),
    (Button("Confirm", "xihe:confirm:3:ab12cd34ef56ab78"),),
)


@pytest.fixture
def client(fake_wecom: FakeWeCom, clock: FakeClock) -> AppClient:
    return AppClient(
        CORP_ID,
        "app-secret-value",
        AGENT_ID,
        api_base=fake_wecom.url,
        tokens=TokenCache(clock),
        wait=wait_none(),
    )


def test_the_fake_refuses_cards_wecom_refuses() -> None:
    good = template_card(CARD, "xihe-confirm-3-1")
    assert validate_card(good) is None
    assert "task_id" in (validate_card({**good, "task_id": "bad id!"}) or "")
    assert "task_id" in (validate_card({**good, "task_id": "x" * 129}) or "")
    many = [{"text": str(i), "key": f"k{i}"} for i in range(7)]
    assert validate_card({**good, "button_list": many}) == "button_list exceed max length 6"
    assert (
        validate_card({**good, "button_list": [{"text": "a", "key": "k"}] * 2})
        == "button_list.key is not unique"
    )
    assert "card_action" in (validate_card({"card_type": "text_notice", "main_title": {"title": "t"}}) or "")


def test_send_gives_a_single_use_update_code_and_task_ids_never_repeat(
    client: AppClient, fake_wecom: FakeWeCom, clock: FakeClock
) -> None:
    code = client.send_card(["alice"], template_card(CARD, "xihe-confirm-3-1"))
    assert code
    with pytest.raises(WeComError, match="task_id duplicated"):
        client.send_card(["alice"], template_card(CARD, "xihe-confirm-3-1"))
    done = Card(CARD.title, CARD.desc, (("State", "executed"),), CARD.buttons, "executed")
    assert (
        client.update_card(code, template_card(done, "xihe-confirm-3-1", update=True), users=["alice"]) == []
    )
    assert fake_wecom.cards.copy("xihe-confirm-3-1", "alice")["replace_text"] == "executed"
    with pytest.raises(WeComError, match="response_code is invalid or used"):
        client.update_card(code, template_card(done, "xihe-confirm-3-1", update=True), users=["alice"])
    late = fake_wecom.cards.click_code("xihe-confirm-3-1")
    clock.advance(hours=72)
    with pytest.raises(WeComError, match="response_code is invalid or used"):  # 72 h, then gone
        client.update_card(late, template_card(done, "xihe-confirm-3-1", update=True))


def test_a_button_key_stands_for_its_typed_command() -> None:
    assert command_of_key("xihe:confirm:3:ab12cd34ef56ab78") == "/confirm 3 digest=ab12cd34ef56ab78"
    assert command_of_key("xihe:approve:12:ab12cd34") == "/approve 12 digest=ab12cd34"
    for foreign in ("ack:alert-1", "xihe:sh:3:ab", "xihe:confirm:x:ab12", "xihe:confirm:3:a b"):
        assert command_of_key(foreign) is None


def test_alert_card_buttons_stand_for_the_typed_ack_rerun_and_maint() -> None:
    ack, rerun, mute = alert_buttons(102, "payment_reconcile", "zh")
    assert (ack.text, rerun.text, mute.text) == ("认领", "重跑失败任务", "静音此工作流 30 分钟")
    assert command_of_key(ack.key) == "/ack 102"
    assert command_of_key(rerun.key) == "/rerun 102"
    assert command_of_key(mute.key) == "/maint on 30m workflow:payment_reconcile"
    for foreign in ("xihe:alert:drop:102", "xihe:alert:rerun:", "xihe:alert:rerun:1 2"):
        assert command_of_key(foreign) is None
    with pytest.raises(ValueError, match="unknown alert card verb"):
        alert_key("escalate", "102")


def test_an_alert_card_reads_the_alert_as_plain_text() -> None:
    hostile = "[点此处理](http://evil.example/phish) <font color=red>x</font> " + "长" * 60
    card = alert_card(Renderer().render("instance.md.j2", ctx(summary_error=hostile)))
    assert card is not None
    assert card.title == "P0 工作流失败：order_sync"  # the title line without its <font> badge
    assert dict(card.rows) == {"实例 ID": "42", "失败任务": "load（重试 2/2）",
                               "失败时间": "2026-12-02 09:05:00 +08:00"}  # fmt: skip
    assert len(card.desc) <= 44 and card.desc.endswith("…") and "<" not in card.desc
    assert "](" not in card.desc  # the error's link is not a link on a card either
    assert validate_card(template_card(card, "xihe-alert-1")) is None  # WeCom takes it
    logged = "[ERROR] 2026-12-05 04:47:00 +00:00 - report failed: java.sql.SQLException: refused"
    card = alert_card(Renderer().render("instance.md.j2", ctx(summary_error=logged)))
    assert card is not None and card.desc.startswith("report failed: java.sql.SQLException")
