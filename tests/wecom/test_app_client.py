"""App message client against the loopback FakeWeCom: token cache and refetch rules, errors, splitting."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
import requests
from tenacity import wait_none

from tests.wecom.conftest import AGENT_ID, CORP_ID
from xihe.agent.clock import FakeClock
from xihe.agent.errors import WeComError
from xihe.integrations.fakes.loopback import LoopbackServer, Response
from xihe.integrations.wecom.app_client import AppClient, TokenCache, split_utf8
from xihe.integrations.wecom.fake import FakeWeCom

SECRET = "app-secret-value"


def make_client(fake: FakeWeCom, clock: FakeClock, **kw: Any) -> AppClient:
    kw.setdefault("tokens", TokenCache(clock))
    return AppClient(CORP_ID, kw.pop("secret", SECRET), AGENT_ID, api_base=fake.url, wait=wait_none(), **kw)


def test_token_is_cached_until_it_expires(fake_wecom: FakeWeCom, clock: FakeClock) -> None:
    client = make_client(fake_wecom, clock)
    client.send_markdown("alice", "one")
    client.send_markdown("alice", "two")
    assert fake_wecom.gettoken_calls == 1
    clock.advance(7200 - 299)  # inside the 5-minute safety margin: refetch before WeCom expires it
    client.send_markdown("alice", "three")
    assert fake_wecom.gettoken_calls == 2
    assert fake_wecom.contents("alice") == ["one", "two", "three"]


def test_cache_is_per_app(fake_wecom: FakeWeCom, clock: FakeClock) -> None:
    fake_wecom.add_app(CORP_ID, "other-secret", 1000003)
    tokens = TokenCache(clock)
    a = make_client(fake_wecom, clock, tokens=tokens)
    b = AppClient(CORP_ID, "other-secret", 1000003, api_base=fake_wecom.url, tokens=tokens, wait=wait_none())
    a.send_markdown("alice", "from a")
    b.send_markdown("alice", "from b")
    assert fake_wecom.gettoken_calls == 2
    assert [m.agent_id for m in fake_wecom.sent["alice"]] == [AGENT_ID, 1000003]


@pytest.mark.parametrize("cause", ["invalidated", "expired"])
def test_invalid_or_expired_token_is_refetched_once_and_the_send_retried(
    fake_wecom: FakeWeCom, clock: FakeClock, cause: str
) -> None:
    # the client's cache thinks the token is fresh; WeCom disagrees (40014 or 42001)
    client = make_client(fake_wecom, clock, tokens=TokenCache(clock, margin=timedelta(0)))
    client.send_markdown("alice", "before")
    if cause == "invalidated":
        fake_wecom.invalidate_tokens()
    else:
        fake_wecom.expires_in = 7200
        for issued in fake_wecom.tokens.values():
            issued.expires_at = clock()
    client.send_markdown("alice", "after")
    assert fake_wecom.gettoken_calls == 2
    assert fake_wecom.contents("alice") == ["before", "after"]
    assert fake_wecom.send_calls == 3  # before, the refused one, the retry


def test_a_second_invalid_token_is_not_retried_again(fake_wecom: FakeWeCom, clock: FakeClock) -> None:
    client = make_client(fake_wecom, clock)
    client.access_token()
    fake_wecom.fail_send = [40014, 40014, 40014]
    with pytest.raises(WeComError) as err:
        client.send_markdown("alice", "x")
    assert err.value.errcode == 40014
    assert fake_wecom.send_calls == 2 and fake_wecom.gettoken_calls == 2


def test_bad_secret_is_40001_and_not_retried(fake_wecom: FakeWeCom, clock: FakeClock) -> None:
    client = make_client(fake_wecom, clock, secret="wrong-secret-123")
    with pytest.raises(WeComError) as err:
        client.send_markdown("alice", "x")
    assert err.value.errcode == 40001 and not err.value.retryable
    assert "corpsecret" in str(err.value) and "wrong-secret-123" not in str(err.value)
    assert fake_wecom.gettoken_calls == 1 and fake_wecom.send_calls == 0


def test_ip_allow_list_problem_is_named(fake_wecom: FakeWeCom, clock: FakeClock) -> None:
    fake_wecom.ip_blocked = True
    with pytest.raises(WeComError) as err:
        make_client(fake_wecom, clock).send_markdown("alice", "x")
    assert err.value.errcode == 60020
    assert "trusted IP" in str(err.value) and "企业可信IP" in str(err.value)
    assert SECRET not in str(err.value)


def test_refetch_is_single_flight_across_threads(fake_wecom: FakeWeCom, clock: FakeClock) -> None:
    tokens = TokenCache(clock)
    clients = [make_client(fake_wecom, clock, tokens=tokens) for _ in range(8)]
    clients[0].access_token()
    fake_wecom.invalidate_tokens()
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def work(c: AppClient, i: int) -> None:
        barrier.wait()
        try:
            c.send_markdown(f"u{i}", "hi")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(c, i)) for i, c in enumerate(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert fake_wecom.gettoken_calls == 2  # the first fetch plus exactly one refetch
    assert all(fake_wecom.contents(f"u{i}") == ["hi"] for i in range(8))


def test_long_markdown_is_split_by_bytes_and_each_part_accepted(
    fake_wecom: FakeWeCom, clock: FakeClock
) -> None:
    lines = [f"第{i}行：DS run 状态 RUNNING ✅ " + "数据" * 20 for i in range(60)]
    content = "\n".join(lines)
    assert len(content.encode()) > 3 * 2048
    answers = make_client(fake_wecom, clock).send_markdown("alice", content)
    sent = fake_wecom.contents("alice")
    assert len(answers) == len(sent) > 3
    assert "".join(sent) == content
    assert all(len(part.encode()) <= 2048 for part in sent)
    assert all(part.endswith("\n") for part in sent[:-1])  # cut on line boundaries


def test_the_fake_enforces_the_2048_byte_limit(fake_wecom: FakeWeCom, clock: FakeClock) -> None:
    client = make_client(fake_wecom, clock)
    with pytest.raises(WeComError) as err:
        client.send({"touser": "alice", "msgtype": "markdown", "markdown": {"content": "字" * 683}})
    assert err.value.errcode == 40058


def test_transport_errors_are_retried_with_tenacity_then_reported_without_secrets(clock: FakeClock) -> None:
    answers = [Response(503), Response(502)]

    def handler(req: Any) -> Response:
        if answers:
            return answers.pop(0)
        return Response.of_json({"errcode": 0, "errmsg": "ok", "access_token": "T0K3N", "expires_in": 7200})

    with LoopbackServer(handler) as server:
        client = AppClient(
            CORP_ID, SECRET, AGENT_ID, api_base=server.url, tokens=TokenCache(clock), wait=wait_none()
        )
        assert client.access_token() == "T0K3N"
        assert len(server.requests) == 3

    # connection refused every time: reported as retryable, with no secret in the text
    dead = AppClient(
        CORP_ID, SECRET, AGENT_ID, api_base=server.url, tokens=TokenCache(clock), wait=wait_none()
    )
    with pytest.raises(WeComError) as err:
        dead.access_token()
    assert err.value.retryable
    assert SECRET not in str(err.value) and "corpsecret" not in str(err.value)


def test_system_busy_is_retried(fake_wecom: FakeWeCom, clock: FakeClock) -> None:
    fake_wecom.fail_send = [-1]
    make_client(fake_wecom, clock).send_markdown("alice", "x")
    assert fake_wecom.contents("alice") == ["x"]


def test_errmsg_echoing_a_token_is_redacted(clock: FakeClock) -> None:
    def handler(req: Any) -> Response:
        if req.path.endswith("gettoken"):
            return Response.of_json({"errcode": 0, "access_token": "SeCrEtToKeN", "expires_in": 7200})
        return Response.of_json(
            {"errcode": 40003, "errmsg": "invalid userid, url: ?access_token=SeCrEtToKeN"}
        )

    with LoopbackServer(handler) as server:
        client = AppClient(
            CORP_ID, SECRET, AGENT_ID, api_base=server.url, tokens=TokenCache(clock), wait=wait_none()
        )
        with pytest.raises(WeComError) as err:
            client.send_markdown("nobody", "x")
    assert err.value.errcode == 40003 and "SeCrEtToKeN" not in str(err.value)
    assert SECRET not in repr(client)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "short",
        "a\nb\n",
        "x" * 5000,
        "好" * 1000,
        "😀" * 1000,
        "line\n" * 1000,
        "混合 mixed 😀\n" * 300,
        "\n\n\n",
        "é" * 2047 + "\n",
    ],
    ids=[
        "empty",
        "short",
        "lines",
        "long-ascii",
        "cjk",
        "emoji",
        "many-lines",
        "mixed",
        "newlines",
        "boundary",
    ],
)
def test_split_utf8_invariants(text: str) -> None:
    parts = split_utf8(text, 2048)
    assert "".join(parts) == text
    assert all(0 < len(p.encode("utf-8")) <= 2048 for p in parts)


def test_split_utf8_prefers_line_boundaries_and_never_splits_a_character() -> None:
    text = "a" * 2000 + "\n" + "b" * 100
    assert split_utf8(text, 2048) == ["a" * 2000 + "\n", "b" * 100]
    parts = split_utf8("好" * 700, 2048)  # 2,100 bytes, one line
    assert [len(p) for p in parts] == [682, 18]  # 682*3 = 2046 ≤ 2048 < 2049
    with pytest.raises(ValueError):
        split_utf8("x", 3)


def test_requests_session_can_be_injected(fake_wecom: FakeWeCom, clock: FakeClock) -> None:
    session = requests.Session()
    client = make_client(fake_wecom, clock, session=session)
    client.send_text("alice", "plain")
    assert fake_wecom.sent["alice"][0].msgtype == "text"


def test_oauth_code_resolves_once_with_a_refetched_token(fake_wecom: FakeWeCom, clock: FakeClock) -> None:
    client = make_client(fake_wecom, clock)
    assert client.user_of_oauth_code(fake_wecom.oauth_code("alice")) == "alice"
    fake_wecom.invalidate_tokens()  # an early invalidation: refetched once, the call retried
    code = fake_wecom.oauth_code("bob")
    assert client.user_of_oauth_code(code) == "bob" and fake_wecom.gettoken_calls == 2
    with pytest.raises(WeComError, match="40029"):
        client.user_of_oauth_code(code)  # a code works once
    late = fake_wecom.oauth_code("carol")
    clock.advance(301)  # codes last 5 minutes
    with pytest.raises(WeComError, match="40029"):
        client.user_of_oauth_code(late)
    with pytest.raises(WeComError, match="not a member") as err:
        client.user_of_oauth_code(fake_wecom.oauth_code("guest", member=False))
    assert SECRET not in str(err.value)
