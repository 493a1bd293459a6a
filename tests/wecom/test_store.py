"""The shared WeCom state on SQLite and PostgreSQL: MsgId insert-if-absent, the inbox lifecycle and
AI-bot streams that any replica can answer from."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine

from xihe.agent.db import open_store_engine
from xihe.integrations.wecom.inbound import CHANNEL_AIBOT, CHANNEL_APP, InboundMessage
from xihe.integrations.wecom.store import SqlMsgIdStore, SqlStreamRegistry

NOW = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
LEASE = timedelta(seconds=30)


def _msg(msg_id: str, channel: str = CHANNEL_APP, **kw: Any) -> InboundMessage:
    return InboundMessage(
        user="alice",
        conversation="wecom:app:1000002:alice",
        text="/help",
        msg_id=msg_id,
        create_time=0,
        agent_id="1000002",
        channel=channel,
        **kw,
    )


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    eng = open_store_engine(db_url)
    yield eng
    eng.dispose()


def test_seen_is_insert_if_absent_even_under_concurrency(engine: Engine) -> None:
    a, b = SqlMsgIdStore(engine), SqlMsgIdStore(engine)  # two replicas
    assert a.seen("wecom_app:1", NOW) is False
    assert b.seen("wecom_app:1", NOW) is True
    results: list[bool] = []
    threads = [
        threading.Thread(target=lambda s=s: results.append(s.seen("wecom_app:2", NOW))) for s in (a, b) * 8
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False] + [True] * 15
    a.forget("wecom_app:2")
    assert b.seen("wecom_app:2", NOW) is False  # a retry after a failed dispatch runs again


def test_inbox_claim_once_reclaim_after_lease_and_release(engine: Engine) -> None:
    r1, r2 = SqlMsgIdStore(engine), SqlMsgIdStore(engine)
    message = _msg("5")
    assert not r1.seen(message.dedupe_key, NOW)
    r1.enqueue(message, "r1", NOW, LEASE)
    assert r1.queued() == 1
    assert r2.claim(message.dedupe_key, "r2", NOW, LEASE) is None  # r1's lease
    assert r2.reclaim("r2", NOW, LEASE) == []
    # r1 died: after its lease another replica takes the message, exactly once
    later = NOW + LEASE + timedelta(seconds=1)
    assert r2.reclaim("r2", later, LEASE) == [message]
    assert r1.reclaim("r1", later, LEASE) == []
    assert r1.claim(message.dedupe_key, "r1", later, LEASE) is None
    got = r2.claim(message.dedupe_key, "r2", later, LEASE)
    assert got == message
    assert r2.claim(message.dedupe_key, "r2", later, LEASE) is None  # handling: never handed out again
    r2.done(message.dedupe_key, later)
    assert r1.queued() == 0

    other = _msg("6")
    r1.seen(other.dedupe_key, NOW)
    r1.enqueue(other, "r1", NOW, LEASE)
    assert r1.release("r1") == 1  # graceful shutdown hands it over at once
    assert r2.reclaim("r2", NOW, LEASE) == [other]


def test_streams_are_shared_and_response_urls_are_used_once(engine: Engine) -> None:
    s1, s2 = SqlStreamRegistry(engine), SqlStreamRegistry(engine)
    first = s1.open("m-1", NOW, "收到")
    assert s2.open("m-1", NOW, "other") == first  # the retry on the other replica gets the same stream
    assert s2.by_msgid("m-1", NOW) == first
    conv = "wecom:aibot:bot1:ops"
    s1.attach(first.id, conv, "https://example/cgi-bin/aibot/response?response_code=abc")
    assert s2.open_for(conv, NOW) == first
    assert s1.update(first.id, "answer", NOW, finish=True)
    frame = s2.get(first.id, NOW)
    assert frame is not None and (frame.content, frame.finish) == ("answer", True)
    assert not s2.update(first.id, "late", NOW)  # finished streams stay as they are
    assert s2.open_for(conv, NOW) is None
    assert s2.get(first.id, NOW + timedelta(minutes=7)) is None  # expired after the ttl
    assert s1.take_response_url(conv, NOW, timedelta(hours=1)) is not None
    assert s2.take_response_url(conv, NOW, timedelta(hours=1)) is None
    big = "字" * 10000
    second = s1.open("m-2", NOW)
    assert s1.update(second.id, big, NOW)
    stored = s2.get(second.id, NOW)
    assert stored is not None and len(stored.content.encode()) <= 20480


def test_aibot_dedupe_key_is_per_channel(engine: Engine) -> None:
    store = SqlMsgIdStore(engine)
    assert store.seen(_msg("9").dedupe_key, NOW) is False
    assert store.seen(_msg("9", channel=CHANNEL_AIBOT).dedupe_key, NOW) is False
