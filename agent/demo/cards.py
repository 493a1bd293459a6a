"""The demo's card scene: a confirmation and an approval done by tapping WeCom cards.

The bot is built a second time over the demo's store with the WeCom app on (its wecom.yaml points at
a loopback `FakeWeCom`, which checks every card send and update like WeCom does); messages and
clicks are the XML WeCom sends, read by the real parser and run through the channel's own handler.
The kept demo directory does not change: this config lives in a temporary directory.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

import yaml

from xihe.agent.app import App, build_app
from xihe.agent.clock import FakeClock
from xihe.agent.demo.environment import Fakes
from xihe.agent.wecom.feature import CHANNEL, Gateway
from xihe.integrations.dolphinscheduler.sim import DolphinSimulator
from xihe.integrations.wecom.callback import parse_app_message
from xihe.integrations.wecom.fake import CallbackSender, FakeWeCom
from xihe.integrations.wecom.fake_cards import FakeCard
from xihe.integrations.wecom.inbound import InboundMessage


class Demo(Protocol):
    """What the scene uses of `xihe.agent.demo.scenes.Demo`."""

    clock: FakeClock
    config: Path
    db: str
    fakes: Fakes

    @property
    def sim(self) -> DolphinSimulator: ...

    def bot(self) -> App: ...

    def out(self, text: str = "") -> None: ...

    def say(self, user: str, text: str, conversation: str | None = None) -> str: ...

    def scene(self, title: str) -> None: ...


CORP_ID = "wwdemo0000000001"
AGENT_ID = 1000002
ENV = {  # the fake's own test secrets, not real ones
    "XIHE_WECOM_CORP_ID": CORP_ID,
    "XIHE_WECOM_TOKEN": "demoToken0000",
    "XIHE_WECOM_AES_KEY": "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C",
    "XIHE_WECOM_APP_SECRET": "demo-app-secret-000000",
}


@contextmanager
def _wecom_bot(d: Demo, fake: FakeWeCom) -> Iterator[App]:
    saved = {k: os.environ.get(k) for k in ENV}
    with tempfile.TemporaryDirectory(prefix="xihe-demo-wecom-") as tmp:
        cfg = Path(tmp) / "config"
        shutil.copytree(d.config, cfg)
        wecom = yaml.safe_load((Path(__file__).parents[2] / "config" / "wecom.yaml").read_text())
        wecom.update(api_base=fake.url, agent_id=AGENT_ID, progress_interval_seconds=0)
        wecom["aibot"]["enabled"] = False
        (cfg / "wecom.yaml").write_text(yaml.safe_dump(wecom, allow_unicode=True))
        os.environ.update(ENV)
        app = build_app(cfg, clock=d.clock, database_url=d.db, holder="demo-wecom")
        try:
            yield app
        finally:
            gateway(app).stop()
            app.deps.engine.dispose()
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def gateway(app: App) -> Gateway:
    wecom = app.get(CHANNEL)
    assert wecom is not None
    return wecom.gateway


def _show(d: Demo, user: str, card: FakeCard) -> None:
    """One recipient's copy of a card, as a line of text."""
    copy = card.copies[user]
    rows = " · ".join(f"{r['keyname']}: {r['value']}" for r in copy["horizontal_content_list"])
    buttons = (
        f"[{copy['replace_text']}]"
        if copy.get("replace_text")
        else " ".join(f"[{b['text']}]" for b in copy["button_list"])
    )
    d.out(
        textwrap.indent(
            f"[card → {user}] {copy['main_title']['title']} — {copy['main_title']['desc']} · {rows} {buttons}",
            "    ",
        )
    )


def scene_cards(d: Demo) -> None:
    d.scene(
        "8. One tap instead of typing: WeCom cards confirm and approve (the self-built app on a loopback fake)"
    )
    with FakeWeCom(d.clock) as fake:
        fake.add_app(CORP_ID, ENV["XIHE_WECOM_APP_SECRET"], AGENT_ID)
        with _wecom_bot(d, fake) as app:
            wecom = gateway(app)
            sender = CallbackSender(
                fake.url, ENV["XIHE_WECOM_TOKEN"], ENV["XIHE_WECOM_AES_KEY"], CORP_ID, d.clock
            )
            msgs = iter(range(9000, 9100))

            def send(user: str, text: str) -> None:
                d.out(f"{user}> {text}")
                _handle(wecom, sender.app_text_xml(user, text, next(msgs), AGENT_ID))

            def tap(user: str, card: FakeCard, text: str) -> None:
                (key,) = [b["key"] for b in card.copies[user]["button_list"] if b["text"] == text]
                d.out(f"{user} taps [{text}]")
                code = fake.cards.click_code(card.task_id)
                now = int(d.clock().timestamp()) + next(msgs)
                _handle(wecom, sender.app_card_click_xml(user, card.task_id, key, code, AGENT_ID, now))

            send("alice", "/run 订单同步 2026-12-02")
            (mine,) = fake.cards.of_user("alice")
            _show(d, "alice", mine)
            tap("alice", mine, "确认执行")
            _show(d, "alice", mine)

            send("bob", "/run 支付对账 2026-12-02")
            (bobs,) = fake.cards.of_user("bob")
            tap("bob", bobs, "确认执行")
            carol, dave = fake.cards.of_user("carol")[0], fake.cards.of_user("dave")[0]
            _show(d, "carol", carol)
            tap("carol", carol, "批准")
            for user, card in (("bob", bobs), ("carol", carol), ("dave", dave)):  # every copy
                _show(d, user, card)
            tap("dave", dave, "批准")  # too late: nothing runs twice
            d.out(textwrap.indent(f"[xihe → dave] {fake.contents('dave')[-1]}", "    "))
            d.out(f"    (DolphinScheduler received {len(d.sim.starts)} starts in all)")


def _handle(wecom: Gateway, xml: str) -> Any:
    """What the channel's worker does with one callback WeCom sent (after its signature checks)."""
    message = parse_app_message(xml.encode("utf-8"))
    assert isinstance(message, InboundMessage)
    wecom.handle(message)
