"""Full conversations through the gateway over loopback HTTP, with replies landing in the WeCom fake.

The worker below stands in for the lead's agent: it takes dispatched messages off a queue in the
background (as `xihe serve` will) and answers through the real AppClient / StreamRegistry /
ResponseUrlClient, which talk to FakeWeCom.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator

import pytest
from tenacity import wait_none

from tests.wecom.conftest import AGENT_ID, CORP_ID, Gateway
from xihe.agent.clock import FakeClock
from xihe.integrations.wecom.aibot import ResponseUrlClient, StreamRegistry
from xihe.integrations.wecom.app_client import AppClient, TokenCache
from xihe.integrations.wecom.fake import FakeWeCom
from xihe.integrations.wecom.inbound import InboundMessage


class Worker:
    """A tiny scripted bot: `/run X` asks for confirmation, `/confirm` runs it and reports progress."""

    def __init__(
        self, gw_streams: StreamRegistry, app: AppClient, responder: ResponseUrlClient, clock: FakeClock
    ) -> None:
        self.inbox: queue.Queue[InboundMessage | None] = queue.Queue()
        self.streams = gw_streams
        self.app, self.responder, self.clock = app, responder, clock
        self.pending: dict[str, str] = {}
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def loop(self) -> None:
        while (msg := self.inbox.get()) is not None:
            self.handle(msg)
            self.inbox.task_done()
        self.inbox.task_done()

    def say(self, msg: InboundMessage, text: str, *, finish: bool = True) -> None:
        if msg.channel == "wecom_app":
            self.app.send_markdown(msg.user, text)
        else:
            self.streams.update(msg.stream_id, text, self.clock(), finish=finish)

    def handle(self, msg: InboundMessage) -> None:
        if msg.text.startswith("/run "):
            self.pending[msg.conversation] = msg.text[5:]
            self.say(msg, f"将运行 **{msg.text[5:]}**，回复 /confirm 确认执行")
        elif msg.text == "/confirm" and msg.conversation in self.pending:
            name = self.pending.pop(msg.conversation)
            if msg.channel == "wecom_app":
                self.say(msg, f"started {name}: DS run RUNNING 3/5 tasks")
                self.say(msg, f"done: {name} instance 42 SUCCESS")
            else:
                self.say(msg, f"started {name}: DS run RUNNING 3/5 tasks", finish=False)
                self.responder.send_markdown(msg.response_url, f"done: {name} instance 42 SUCCESS")
                self.say(msg, f"done: {name} instance 42 SUCCESS")
        else:
            self.say(msg, "unknown command; try /run NAME")


@pytest.fixture
def conversation(
    make_gateway: Callable[..., Gateway], fake_wecom: FakeWeCom, clock: FakeClock
) -> Iterator[tuple[Gateway, Worker, FakeWeCom]]:
    app = AppClient(
        CORP_ID,
        "app-secret-value",
        AGENT_ID,
        api_base=fake_wecom.url,
        tokens=TokenCache(clock),
        wait=wait_none(),
    )
    responder = ResponseUrlClient(allowed_prefix=fake_wecom.url + "/cgi-bin/aibot/response")
    holder: list[Worker] = []
    gw = make_gateway(dispatch=lambda m: holder[0].inbox.put(m))
    worker = Worker(gw.streams, app, responder, clock)
    holder.append(worker)
    worker.thread.start()
    yield gw, worker, fake_wecom
    worker.inbox.put(None)
    worker.thread.join(timeout=10)


def test_app_conversation_ask_confirm_result(conversation: tuple[Gateway, Worker, FakeWeCom]) -> None:
    gw, worker, fake = conversation
    sender = gw.app_sender()
    assert sender.post_app_text("alice", "/run order_sync 2026-12-01", 1, AGENT_ID).status_code == 200
    worker.inbox.join()
    assert fake.contents("alice") == ["将运行 **order_sync 2026-12-01**，回复 /confirm 确认执行"]
    # WeCom retries the confirmation (we were slow): it still runs once
    for _ in range(3):
        assert sender.post_app_text("alice", "/confirm", 2, AGENT_ID).status_code == 200
    worker.inbox.join()
    assert fake.contents("alice")[1:] == [
        "started order_sync 2026-12-01: DS run RUNNING 3/5 tasks",
        "done: order_sync 2026-12-01 instance 42 SUCCESS",
    ]
    # another user's /confirm cannot release alice's request
    assert sender.post_app_text("bob", "/confirm", 3, AGENT_ID).status_code == 200
    worker.inbox.join()
    assert fake.contents("bob") == ["unknown command; try /run NAME"]


def test_aibot_group_conversation_streams_progress_and_uses_response_url(
    conversation: tuple[Gateway, Worker, FakeWeCom],
) -> None:
    gw, worker, fake = conversation
    bot = gw.bot_sender()
    resp, nonce = bot.post_aibot(
        bot.aibot_text(
            "alice", "@xihe /run daily_sales", "g-1", chatid="ops", response_url=fake.new_response_url()
        )
    )
    first = bot.open_reply(resp.json(), nonce)["stream"]
    worker.inbox.join()
    resp, nonce = bot.post_aibot(bot.aibot_refresh(first["id"], "r-1", "alice"))
    assert bot.open_reply(resp.json(), nonce)["stream"]["content"].startswith("将运行 **daily_sales**")

    resp, nonce = bot.post_aibot(
        bot.aibot_text("alice", "@xihe /confirm", "g-2", chatid="ops", response_url=fake.new_response_url())
    )
    second = bot.open_reply(resp.json(), nonce)["stream"]
    assert second["id"] != first["id"]
    worker.inbox.join()
    resp, nonce = bot.post_aibot(bot.aibot_refresh(second["id"], "r-2", "alice"))
    frame = bot.open_reply(resp.json(), nonce)["stream"]
    assert frame == {"id": second["id"], "finish": True, "content": "done: daily_sales instance 42 SUCCESS"}
    assert [r["markdown"]["content"] for r in fake.responses] == ["done: daily_sales instance 42 SUCCESS"]
