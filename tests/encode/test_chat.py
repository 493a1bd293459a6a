"""The hostile corpus in chat: what the WeCom app fake and the AI bot's response_url actually receive.

The bot is the real app with its WeCom feature (inbox, worker, Session, Gateway, AppClient) pointed at
the loopback WeCom. Command replies (xihe's own text with outside values in it) must carry no markup
the outside value brought; any text, even the model's or a tool's raw output, must carry no link,
image, mention, colour, tag or entity.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.encode.corpus import HOSTILE, ids, readable
from tests.serve.harness import AGENT_ID, CORP_ID, SECRET, WECOM_ENV, serve_config, wait_until
from tests.support.wecom_view import live
from xihe.agent.app import App, build_app
from xihe.agent.clock import FakeClock
from xihe.agent.wecom.feature import CHANNEL, Gateway
from xihe.integrations.wecom.fake import FakeWeCom
from xihe.integrations.wecom.inbound import CHANNEL_APP, InboundMessage
from xihe.tools.dolphin.messages import failed_reply
from xihe.tools.shell.messages import result_for_people

APP_CONV = f"wecom:app:{AGENT_ID}:alice"
BOT_CONV = "wecom:aibot:bot1:ops"
DANGEROUS = {"link", "image", "ref_link", "mention", "autolink", "tag", "entity"}
CLOCK = FakeClock(datetime(2026, 12, 2, 9, 0, tzinfo=UTC))


@pytest.fixture(scope="module")
def bot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[App, FakeWeCom]]:
    tmp = tmp_path_factory.mktemp("chat")
    with pytest.MonkeyPatch.context() as mp, FakeWeCom(CLOCK) as fake:
        for k, v in WECOM_ENV.items():
            mp.setenv(k, v)
        fake.add_app(CORP_ID, SECRET, AGENT_ID)
        cfg = serve_config(tmp / "cfg", fake, wecom={"progress_interval_seconds": 0})
        app = build_app(cfg, clock=CLOCK, database_url=f"sqlite:///{tmp / 'x.db'}", holder="r1")
        yield app, fake
        gateway(app).stop(grace=5)


def gateway(app: App) -> Gateway:
    wecom = app.get(CHANNEL)
    assert wecom is not None
    return wecom.gateway


def received(fake: FakeWeCom, send: object, user: str = "alice") -> list[str]:
    """The app messages `user` receives while `send()` runs (a long one arrives in parts)."""
    before = len(fake.contents(user))
    assert callable(send)
    send()
    return wait_until(lambda: fake.contents(user)[before:], timeout=20, what="the reply")


def ask(app: App, fake: FakeWeCom, user: str, text: str) -> list[str]:
    """`user` types `text` in the app: inbox, worker, Session, Gateway.answer, the fake."""
    conversation = f"wecom:app:{AGENT_ID}:{user}"
    msg = InboundMessage(user, conversation, text, f"{user}-{text}", 0, str(AGENT_ID), CHANNEL_APP)
    gw = gateway(app)
    gw.inbox.seen(msg.dedupe_key, CLOCK())
    return received(fake, lambda: gw.accept(msg), user)


def constructs(parts: list[str]) -> Counter[tuple[str, str]]:
    """What WeCom renders live across the parts of one reply."""
    total: Counter[tuple[str, str]] = Counter()
    for part in parts:
        total += live(part)
    return total


def dangerous(parts: list[str]) -> list[tuple[str, str]]:
    return [k for k in constructs(parts) if k[0] in DANGEROUS]


def shows(parts: list[str], words: tuple[str, ...]) -> bool:
    text = readable("\n".join(parts))
    return all(readable(w) in text for w in words)


@pytest.mark.parametrize(("case", "text", "words"), HOSTILE, ids=ids())
def test_a_task_goal_in_tasks_adds_no_markup(
    bot: tuple[App, FakeWeCom], case: str, text: str, words: tuple[str, ...]
) -> None:
    app, fake = bot
    replies = {}
    for user, goal in ((f"b_{case}", "check order_sync"), (f"h_{case}", text)):
        conversation = f"wecom:app:{AGENT_ID}:{user}"
        app.deps.tasks.create(kind="chat", owner=user, conversation=conversation, goal=goal, now=CLOCK())
        replies[goal] = ask(app, fake, user, "/tasks")
    benign, hostile = replies["check order_sync"], replies[text]
    assert constructs(hostile) - constructs(benign) == Counter(), hostile
    assert shows(hostile, tuple(w for w in words if len(text) <= 60)), hostile  # goals are cut at 60


@pytest.mark.parametrize(("text", "words"), [c[1:] for c in HOSTILE], ids=ids())
def test_dolphinscheduler_names_errors_and_logs_in_a_reply_add_no_markup(
    bot: tuple[App, FakeWeCom], text: str, words: tuple[str, ...]
) -> None:
    app, fake = bot

    def failed(value: str) -> str:
        task = {"task": value, "state": "FAILURE", "host": value, "retry_times": 1, "max_retry_times": 1}
        return failed_reply(
            {"workflow": value, "instance_id": 7, "state": "FAILURE", "failed": [{**task, "log_tail": value}]}
        )

    benign = received(fake, lambda: app.deps.notify(APP_CONV, failed("order_sync")))
    hostile = received(fake, lambda: app.deps.notify(APP_CONV, failed(text)))
    assert constructs(hostile) - constructs(benign) == Counter(), hostile
    if len(text) < 2000:  # a long one arrives in parts, cut at WeCom's 2,048 bytes
        assert shows(hostile, words), hostile


@pytest.mark.parametrize(("text", "words"), [c[1:] for c in HOSTILE], ids=ids())
def test_shell_output_in_a_reply_adds_no_markup(
    bot: tuple[App, FakeWeCom], text: str, words: tuple[str, ...]
) -> None:
    app, fake = bot
    head = "$ ls: exit code 0 in 0.1s [sandbox: bwrap]\nstdout:\n"
    benign = received(fake, lambda: app.deps.notify(APP_CONV, result_for_people(head + "agent", "zh")))
    hostile = received(fake, lambda: app.deps.notify(APP_CONV, result_for_people(head + text, "zh")))
    assert constructs(hostile) - constructs(benign) == Counter(), hostile
    assert shows(hostile, words) or len(text) > 2000, hostile


@pytest.mark.parametrize(("text", "words"), [c[1:] for c in HOSTILE], ids=ids())
def test_any_text_even_the_models_reaches_the_app_without_links_mentions_or_tags(
    bot: tuple[App, FakeWeCom], text: str, words: tuple[str, ...]
) -> None:
    app, fake = bot
    got = received(fake, lambda: app.deps.notify(APP_CONV, f"模型的回答：**好的**\n{text}"))
    assert dangerous(got) == [], got
    assert constructs(got)[("bold", "")] >= 1  # the model's own formatting stays
    assert shows(got, words) or len(text) > 2000, got


@pytest.mark.parametrize(("text", "words"), [c[1:] for c in HOSTILE], ids=ids())
def test_any_text_reaches_the_ai_bot_response_url_without_links_mentions_or_tags(
    bot: tuple[App, FakeWeCom], text: str, words: tuple[str, ...]
) -> None:
    app, fake = bot
    gw = gateway(app)
    stream = gw.streams.open(f"m-{hash(text)}", CLOCK(), "收到")
    gw.streams.attach(stream.id, BOT_CONV, fake.new_response_url())
    before = len(fake.responses)
    app.deps.notify(BOT_CONV, text)
    (sent,) = [r["markdown"]["content"] for r in fake.responses[before:]]
    assert dangerous([sent]) == [], sent
    assert shows([sent], words) or len(text) > 2000, sent


def test_the_ai_bot_welcome_is_a_text_message_that_mentions_nobody(tmp_path: Path) -> None:
    from xihe.agent.wecom_text import text

    for _id, hostile, words in HOSTILE:
        shown = text(hostile)
        assert "<@" not in shown and "\x1b" not in shown and "\u202e" not in shown
        assert all(readable(w) in readable(shown) for w in words)
