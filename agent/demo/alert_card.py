"""The demo's alert-card scene: the P0 alert of the failed production run, through an alert channel of
kind `wecom_app`, as a card with buttons; a tap on **重跑失败任务** asks for the rerun's confirmation
(the normal confirm flow: a pending action and its card), a tap on **静音此工作流 30 分钟** opens a
maintenance window.

The alert is the one the prod robot received in scene 3, sent again by the app channel's notifier
(`agent/alerts/notify/wecom_app.py`) to a loopback `FakeWeCom`, which checks the card like WeCom
does; the taps are the XML WeCom sends, run through the channel's own handler (as in `cards.py`).
"""

from __future__ import annotations

import textwrap

from xihe.agent.alerts.notify.wecom_app import WeComAppNotifier
from xihe.agent.demo.cards import AGENT_ID, CORP_ID, ENV, Demo, _handle, _show, _wecom_bot, gateway
from xihe.agent.demo.environment import ROBOT_KEY_PROD
from xihe.config.alerts import Channel
from xihe.integrations.wecom.fake import CallbackSender, FakeWeCom
from xihe.integrations.wecom.fake_cards import FakeCard

ON_CALL = ("bob", "dave")  # the app channel's members: the on-call and the admin


def scene_alert_card(d: Demo) -> None:
    d.scene(
        "11. An alert as a card (an alert channel of kind wecom_app): one tap asks for the rerun, "
        "one tap mutes the workflow"
    )
    alerts = [m.content for m in d.fakes.robot.messages.get(ROBOT_KEY_PROD, []) if "/rerun " in m.content]
    if not alerts:
        d.out("    (no P0 alert to send again: scene 3 raised none)")
        return
    with FakeWeCom(d.clock) as fake:
        fake.add_app(CORP_ID, ENV["XIHE_WECOM_APP_SECRET"], AGENT_ID)
        with _wecom_bot(d, fake) as app:
            wecom = gateway(app)
            channel = Channel(kind="wecom_app", robot_key_env="XIHE_WECOM_APP_SECRET",
                              to_users=list(ON_CALL), agent_id=AGENT_ID, api_base=fake.url)  # fmt: skip
            sent = WeComAppNotifier(ENV).send(channel, alerts[0], ref="demo-p0")
            d.out(f"(scene 3's P0 alert sent again through the app channel to {', '.join(ON_CALL)}: "
                  f"{'ok' if sent.ok else sent.error})")  # fmt: skip
            (card,) = fake.cards.of_user("bob")
            _show(d, "bob", card)
            sender = CallbackSender(
                fake.url, ENV["XIHE_WECOM_TOKEN"], ENV["XIHE_WECOM_AES_KEY"], CORP_ID, d.clock
            )
            at = int(d.clock().timestamp())

            def tap(user: str, on: FakeCard, text: str, n: int) -> None:
                (key,) = [b["key"] for b in on.copies[user]["button_list"] if b["text"] == text]
                d.out(f"{user} taps [{text}]")
                code = fake.cards.click_code(on.task_id)
                _handle(wecom, sender.app_card_click_xml(user, on.task_id, key, code, AGENT_ID, at + n))

            tap("bob", card, "重跑失败任务", 1)  # the normal confirm flow: nothing reruns yet
            confirm = fake.cards.of_user("bob")[-1]
            if confirm is not card:
                _show(d, "bob", confirm)
            tap("dave", card, "静音此工作流 30 分钟", 2)
            d.out(textwrap.indent(f"[xihe → dave] {fake.contents('dave')[-1]}", "    "))
    pending = d.bot().deps.pending.open_for(user_id="bob", statuses=("pending",))
    d.out(f"    (pending for bob: {', '.join(f'#{p.id} {p.tool}' for p in pending) or 'none'})")
    d.say("dave", "/maint")  # the window the tap opened, as everyone sees it
    d.say("dave", "/maint off workflow:payment_reconcile")  # ended early: the scenes after it alert again
