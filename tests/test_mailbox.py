"""Terminal chats' mail: a late message for a conversation no channel claims waits in the store for that
conversation's `xihe chat`, which takes each exactly once, whichever process made it (SQLite and
PostgreSQL). Old mail nobody read goes with the retention job."""

from __future__ import annotations

import threading
from datetime import timedelta

from tests.conftest import MakeApp
from xihe.agent.clock import FakeClock
from xihe.agent.db import open_store_engine
from xihe.agent.mailbox import Mailbox
from xihe.agent.ops.feature import prune


def test_mail_waits_for_its_own_conversation_and_is_taken_once(db_url: str, clock: FakeClock) -> None:
    engine = open_store_engine(db_url)
    here, there = Mailbox(engine, clock), Mailbox(open_store_engine(db_url), clock)
    for n in range(3):
        here.post("cli:alice", f"alice {n}")
    there.post("cli:bob", "bob 0")
    assert here.take("cli:carol") == []  # nothing for carol: nobody else's mail
    assert there.take("cli:alice") == [
        "alice 0",
        "alice 1",
        "alice 2",
    ]  # made in one process, read in another
    assert here.take("cli:alice") == []
    assert here.take("cli:bob") == ["bob 0"]


def test_two_terminals_on_one_conversation_never_print_a_message_twice(db_url: str, clock: FakeClock) -> None:
    boxes = [Mailbox(open_store_engine(db_url), clock) for _ in range(2)]
    for n in range(60):
        boxes[0].post("cli:alice", str(n))
    taken: list[list[str]] = [[], []]

    def drain(i: int) -> None:
        while batch := boxes[i].take("cli:alice", limit=7):
            taken[i].extend(batch)

    threads = [threading.Thread(target=drain, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(taken[0] + taken[1], key=int) == [str(n) for n in range(60)]


def test_the_bot_files_messages_for_unclaimed_conversations_as_mail(
    make_app: MakeApp, clock: FakeClock
) -> None:
    app = make_app()  # no notify given: what `xihe serve` and `xihe chat` build
    app.deps.notify("cli:bob", "▶️ payment_reconcile run 102 started")
    mail = Mailbox(app.deps.engine, clock)
    assert mail.take("cli:carol") == [] and mail.take("cli:bob") == ["▶️ payment_reconcile run 102 started"]
    app.deps.notify("cli:bob", "unread")
    clock.advance(timedelta(days=91).total_seconds())
    assert prune(app)["chat_mail"] == 1 and mail.take("cli:bob") == []
