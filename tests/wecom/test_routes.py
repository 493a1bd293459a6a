"""/wecom/callback over real HTTP (uvicorn on loopback): verification, dispatch, and the bad-input matrix."""

from __future__ import annotations

import base64
import struct
import time
from collections.abc import Callable
from typing import Any

import pytest
import requests
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from tests.wecom.conftest import AES_KEY, AGENT_ID, CORP_ID, Gateway, load_vectors
from xihe.integrations.wecom.crypto import aes_key


def test_get_verification_answers_the_bare_plaintext_fast(gateway: Gateway) -> None:
    sender = gateway.app_sender()
    started = time.perf_counter()
    resp = sender.verify_url("1288432023552776189")
    elapsed = time.perf_counter() - started
    assert resp.status_code == 200
    assert resp.content == b"1288432023552776189"  # no quotes, BOM or newline
    assert elapsed < 1.0


def test_get_verification_of_the_official_vector_with_url_encoded_params(
    make_gateway: Callable[..., Gateway], clock: Any
) -> None:
    (v,) = [v for v in load_vectors() if v["id"] == "weworkapi_golang.verify_url"]
    gw = make_gateway(corp_id=v["receiveid"], token=v["token"], aes_key=v["encoding_aes_key"])
    clock.now = clock.now.fromtimestamp(int(v["timestamp"]), clock.now.tzinfo)
    raw_query = (
        f"msg_signature={v['msg_signature']}&timestamp={v['timestamp']}&nonce={v['nonce']}"
        f"&echostr={v['echostr_urlencoded_in_source']}"
    )
    resp = requests.get(f"{gw.url}/wecom/callback?{raw_query}", timeout=5)
    assert resp.status_code == 200
    assert resp.text == v["decrypted_echostr"]


def test_official_post_vector_is_dispatched_once(make_gateway: Callable[..., Gateway], clock: Any) -> None:
    (v,) = [v for v in load_vectors() if v["id"] == "weworkapi_python.post_xml"]
    gw = make_gateway()
    clock.now = clock.now.fromtimestamp(int(v["timestamp"]), clock.now.tzinfo)
    params = {"msg_signature": v["msg_signature"], "timestamp": v["timestamp"], "nonce": v["nonce"]}
    for _ in range(3):  # WeCom retries the same delivery
        resp = requests.post(
            f"{gw.url}/wecom/callback", params=params, data=v["post_body"].encode(), timeout=5
        )
        assert resp.status_code == 200 and resp.content == b""
    assert len(gw.dispatched) == 1
    msg = gw.dispatched[0]
    assert (msg.user, msg.text, msg.msg_id, msg.create_time, msg.agent_id, msg.channel) == (
        "ChenJiaShun",
        "你好",
        "1456453720",
        1476422779,
        "1000002",
        "wecom_app",
    )
    assert msg.conversation == "wecom:app:1000002:ChenJiaShun"


def test_text_message_round_trip_through_the_fake_sender(gateway: Gateway) -> None:
    resp = gateway.app_sender().post_app_text("alice", "/status 42 <&>", 7001, AGENT_ID)
    assert resp.status_code == 200
    assert [(m.user, m.text, m.msg_id) for m in gateway.dispatched] == [("alice", "/status 42 <&>", "7001")]


def test_events_are_deduplicated_by_sender_and_create_time(gateway: Gateway) -> None:
    sender = gateway.app_sender()
    ct = int(gateway.clock().timestamp())
    xml = (
        f"<xml><ToUserName>{CORP_ID}</ToUserName><FromUserName>bob</FromUserName><CreateTime>{ct}</CreateTime>"
        f"<MsgType>event</MsgType><Event>enter_agent</Event><AgentID>{AGENT_ID}</AgentID></xml>"
    )
    for _ in range(2):
        query, body = sender.app_envelope(xml, AGENT_ID)
        assert sender.post_app(query, body).status_code == 200
    assert [(m.msg_type, m.event, m.msg_id) for m in gateway.dispatched] == [
        ("event", "enter_agent", f"event:bob:{ct}")
    ]


def test_dispatch_failure_answers_500_and_lets_the_retry_through(
    make_gateway: Callable[..., Gateway],
) -> None:
    calls: list[str] = []

    def flaky(msg: Any) -> None:
        calls.append(msg.msg_id)
        if len(calls) == 1:
            raise RuntimeError("queue down")

    gw = make_gateway(dispatch=flaky)
    sender = gw.app_sender()
    assert sender.post_app_text("alice", "hi", 9, AGENT_ID).status_code == 500
    assert sender.post_app_text("alice", "hi", 9, AGENT_ID).status_code == 200
    assert calls == ["9", "9"]


# ---- the bad-input matrix ------------------------------------------------------------------------


def _raw_encrypt(plain: bytes) -> str:
    key = aes_key(AES_KEY)
    enc = Cipher(algorithms.AES(key), modes.CBC(key[:16])).encryptor()
    return base64.b64encode(enc.update(plain) + enc.finalize()).decode()


def _outer(encrypt: str) -> bytes:
    return f"<xml><ToUserName>{CORP_ID}</ToUserName><Encrypt><![CDATA[{encrypt}]]></Encrypt></xml>".encode()


def _signed_post(gw: Gateway, encrypt: str, **kw: Any) -> requests.Response:
    sender = gw.app_sender()
    return sender.post_app(sender.signed_query(encrypt, **kw), _outer(encrypt))


def _good_xml(gw: Gateway, msg_id: int = 1) -> str:
    return gw.app_sender().app_text_xml("mallory", "/run drop_everything", msg_id, AGENT_ID)


BILLION_LAUGHS = (
    '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
    + "".join(
        f'<!ENTITY lol{i} "{("&lol" + (str(i - 1) if i > 1 else "") + ";") * 10}">' for i in range(1, 10)
    )
    + "]><xml><Encrypt>&lol9;</Encrypt></xml>"
)
XXE = (
    '<?xml version="1.0"?><!DOCTYPE xml [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>'
    "<xml><Encrypt>&xxe;</Encrypt></xml>"
)


def _forged_signature(gw: Gateway) -> requests.Response:
    sender = gw.app_sender()
    query, body = sender.app_envelope(_good_xml(gw))
    query["msg_signature"] = "0" * 40
    return sender.post_app(query, body)


def _stale_timestamp(gw: Gateway) -> requests.Response:
    sender = gw.app_sender()
    stale = str(int(gw.clock().timestamp()) - 301)
    query, body = sender.app_envelope(_good_xml(gw), timestamp=stale)
    return sender.post_app(query, body)


def _future_timestamp(gw: Gateway) -> requests.Response:
    sender = gw.app_sender()
    query, body = sender.app_envelope(_good_xml(gw), timestamp=str(int(gw.clock().timestamp()) + 3600))
    return sender.post_app(query, body)


def _bad_base64(gw: Gateway) -> requests.Response:
    return _signed_post(gw, "!!!not-base64!!!")


def _bad_padding(gw: Gateway) -> requests.Response:
    msg = _good_xml(gw).encode()
    plain = b"r" * 16 + struct.pack(">I", len(msg)) + msg + CORP_ID.encode()
    plain += b"\x00" * (32 - len(plain) % 32)  # zero bytes are not PKCS#7
    return _signed_post(gw, _raw_encrypt(plain))


def _wrong_receiveid(gw: Gateway) -> requests.Response:
    sender = gw.app_sender(receiveid="wwSomeOtherCorp")
    query, body = sender.app_envelope(_good_xml(gw))
    return sender.post_app(query, body)


def _other_agent(gw: Gateway) -> requests.Response:
    sender = gw.app_sender()
    query, body = sender.app_envelope(sender.app_text_xml("mallory", "hi", 2, 999))
    return sender.post_app(query, body)


def _xxe_outer(gw: Gateway) -> requests.Response:
    return gw.app_sender().post_app(gw.app_sender().signed_query("x"), XXE.encode())


def _billion_laughs_outer(gw: Gateway) -> requests.Response:
    return gw.app_sender().post_app(gw.app_sender().signed_query("x"), BILLION_LAUGHS.encode())


def _xxe_inside_ciphertext(gw: Gateway) -> requests.Response:
    inner = (
        '<?xml version="1.0"?><!DOCTYPE xml [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>'
        "<xml><FromUserName>mallory</FromUserName><CreateTime>1</CreateTime><MsgType>text</MsgType>"
        "<Content>&xxe;</Content><MsgId>5</MsgId></xml>"
    )
    sender = gw.app_sender()
    query, body = sender.app_envelope(inner)
    return sender.post_app(query, body)


def _ten_megabytes(gw: Gateway) -> requests.Response:
    sender = gw.app_sender()
    query, _ = sender.app_envelope(_good_xml(gw))
    try:
        return sender.post_app(query, b"<xml>" + b"A" * (10 * 1024 * 1024) + b"</xml>")
    except requests.ConnectionError:
        pytest.fail("the server dropped the connection instead of answering 413")


def _non_utf8(gw: Gateway) -> requests.Response:
    sender = gw.app_sender()
    query, _ = sender.app_envelope(_good_xml(gw))
    return sender.post_app(query, "<xml><Encrypt>你好</Encrypt></xml>".encode("gbk"))


def _declared_gbk(gw: Gateway) -> requests.Response:
    sender = gw.app_sender()
    query, body = sender.app_envelope(_good_xml(gw))
    return sender.session.post(
        f"{gw.url}/wecom/callback",
        params=query,
        data=body,
        headers={"Content-Type": "text/xml; charset=gbk"},
        timeout=10,
    )


def _missing_params(gw: Gateway) -> requests.Response:
    _, body = gw.app_sender().app_envelope(_good_xml(gw))
    return requests.post(f"{gw.url}/wecom/callback", data=body, timeout=10)


def _no_encrypt(gw: Gateway) -> requests.Response:
    return gw.app_sender().post_app(
        gw.app_sender().signed_query("x"), b"<xml><ToUserName>a</ToUserName></xml>"
    )


def _malformed_xml(gw: Gateway) -> requests.Response:
    return gw.app_sender().post_app(gw.app_sender().signed_query("x"), b"<xml><Encrypt>")


MATRIX: list[tuple[str, Callable[[Gateway], requests.Response], int, str]] = [
    ("forged signature", _forged_signature, 401, "signature"),
    ("stale timestamp", _stale_timestamp, 403, "window"),
    ("future timestamp", _future_timestamp, 403, "window"),
    ("bad base64", _bad_base64, 400, "base64"),
    ("bad padding", _bad_padding, 400, "padding"),
    ("wrong receiveid", _wrong_receiveid, 403, "receiveid"),
    ("another app's AgentID", _other_agent, 403, "AgentID"),
    ("XML external entity", _xxe_outer, 400, "forbidden XML"),
    ("billion laughs", _billion_laughs_outer, 400, "forbidden XML"),
    ("external entity inside the ciphertext", _xxe_inside_ciphertext, 400, "forbidden XML"),
    ("10 MB body", _ten_megabytes, 413, "larger than"),
    ("non-UTF-8 body", _non_utf8, 415, "UTF-8"),
    ("declared non-UTF-8 charset", _declared_gbk, 415, "charset"),
    ("missing signature parameters", _missing_params, 400, "missing"),
    ("no Encrypt element", _no_encrypt, 400, "Encrypt"),
    ("malformed XML", _malformed_xml, 400, "malformed"),
]


@pytest.mark.parametrize(("case", "attack", "status", "reason"), MATRIX, ids=[m[0] for m in MATRIX])
def test_bad_input_is_rejected_with_its_status_and_nothing_is_dispatched(
    gateway: Gateway, case: str, attack: Callable[[Gateway], requests.Response], status: int, reason: str
) -> None:
    started = time.perf_counter()
    resp = attack(gateway)
    assert resp.status_code == status, (case, resp.text)
    assert reason in resp.text
    assert gateway.dispatched == []
    assert [r.status for r in gateway.rejected] == [status]
    assert time.perf_counter() - started < 5  # billion laughs included: no expansion happens
    # and the server still serves good traffic afterwards
    assert gateway.app_sender().post_app_text("alice", "ping", 424242, AGENT_ID).status_code == 200
    assert [m.text for m in gateway.dispatched] == ["ping"]


def test_replayed_msgid_is_acknowledged_but_not_dispatched_again(gateway: Gateway) -> None:
    sender = gateway.app_sender()
    first = sender.post_app_text("alice", "/run order_sync", 555, AGENT_ID)
    gateway.clock.advance(60)  # a replay re-signed later, still inside the window, same MsgId
    again = sender.post_app_text("alice", "/run order_sync", 555, AGENT_ID)
    assert (first.status_code, again.status_code) == (200, 200)  # 200 so WeCom's own retries stop
    assert len(gateway.dispatched) == 1


def test_get_verification_rejects_forged_and_stale(gateway: Gateway) -> None:
    sender = gateway.app_sender()
    echostr = sender.crypto.encrypt(b"123")
    forged = {**sender.signed_query(echostr), "echostr": echostr, "msg_signature": "f" * 40}
    assert requests.get(f"{gateway.url}/wecom/callback", params=forged, timeout=5).status_code == 401
    stale = {**sender.signed_query(echostr, timestamp="1000"), "echostr": echostr}
    assert requests.get(f"{gateway.url}/wecom/callback", params=stale, timeout=5).status_code == 403


def test_only_enabled_routes_are_served(make_gateway: Callable[..., Gateway]) -> None:
    gw = make_gateway(app_enabled=False, aibot=None)
    sender = gw.app_sender()
    assert sender.post_app_text("alice", "hi", 1, AGENT_ID).status_code == 404
    assert sender.verify_url("1", path="/wecom/aibot").status_code == 404
