"""A loopback WeCom: the app API (gettoken, message/send, the web login's auth/getuserinfo), the AI
bot's response_url, and a sender that builds correctly encrypted and signed callbacks to POST at our
own server.

Contracts follow WeCom's API: errcodes under HTTP 200, token expiry and early invalidation
(40014/42001), bad secret (40001), IP allow-list (60020), 2,048-byte app content (40058), OAuth
codes that work once and for 5 minutes (40029), non-members answered with an openid, not a userid.
"""

from __future__ import annotations

import itertools
import json
import os
import secrets
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from xml.sax.saxutils import escape

import requests

from xihe.agent.clock import Clock, utc_now
from xihe.integrations.fakes.loopback import LoopbackServer, Request, Response
from xihe.integrations.wecom.crypto import MsgCrypto
from xihe.integrations.wecom.fake_bot_cards import FakeBotCards
from xihe.integrations.wecom.fake_cards import FakeCards

APP_CONTENT_MAX_BYTES = 2048
AIBOT_CONTENT_MAX_BYTES = 20480
# WeCom does not document the errcode for a reused or unknown response_code; the fake picks this.
RESPONSE_CODE_INVALID = 93020
OAUTH_CODE_TTL = timedelta(minutes=5)


def _ok() -> Response:
    return Response.of_json({"errcode": 0, "errmsg": "ok"})


def _err(errcode: int, errmsg: str) -> Response:
    return Response.of_json({"errcode": errcode, "errmsg": f"{errmsg}, hint: [fake], from ip: 127.0.0.1"})


@dataclass
class _IssuedToken:
    corp_id: str
    agent_id: int
    expires_at: datetime


@dataclass(frozen=True)
class SentMessage:
    """One message/send the fake accepted, per recipient."""

    agent_id: int
    msgtype: str
    content: str


class FakeWeCom:
    """WeCom's app API and AI-bot response_url on 127.0.0.1; state is inspectable by tests."""

    def __init__(self, clock: Clock = utc_now, *, expires_in: int = 7200) -> None:
        self.clock = clock
        self.expires_in = expires_in
        self.apps: dict[tuple[str, str], int] = {}
        self.tokens: dict[str, _IssuedToken] = {}
        self.sent: dict[str, list[SentMessage]] = {}
        self.responses: list[dict[str, Any]] = []
        self.cards = FakeCards(clock)
        self.response_codes: dict[str, bool] = {}
        self.bot_cards = FakeBotCards()  # cards the AI bot posted to a 1:1 response_url
        self.response_chats: dict[str, str] = {}  # response code → the 1:1 chat it answers ("" = group)
        self.oauth_codes: dict[str, tuple[str, bool, datetime]] = {}  # code → (user, member, expires)
        self.gettoken_calls = 0
        self.send_calls = 0
        self.ip_blocked = False
        self.fail_send: list[int] = []  # errcodes to answer to the next message/send calls, in order
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self.server = LoopbackServer(self.handle)

    # -- lifecycle -------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """Base URL to give the clients as api_base."""
        return self.server.url

    def start(self) -> FakeWeCom:
        """Start serving."""
        self.server.start()
        return self

    def stop(self) -> None:
        """Stop serving."""
        self.server.stop()

    def __enter__(self) -> FakeWeCom:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- test controls ---------------------------------------------------------------------------

    def add_app(self, corp_id: str, secret: str, agent_id: int) -> None:
        """Register a self-built app the fake will issue tokens for."""
        self.apps[(corp_id, secret)] = agent_id

    def invalidate_tokens(self) -> None:
        """Invalidate every issued token early (WeCom may do this "for operational reasons")."""
        with self._lock:
            self.tokens.clear()

    def new_response_url(self, single_user: str = "") -> str:
        """A fresh one-shot response_url pointing at this fake; `single_user`: it answers a 1:1 chat
        with that user (only then may it carry a template_card)."""
        code = secrets.token_hex(8)
        with self._lock:
            self.response_codes[code] = False
            self.response_chats[code] = single_user
        return f"{self.url}/cgi-bin/aibot/response?response_code={code}"

    def oauth_code(self, user: str, *, member: bool = True) -> str:
        """The code WeCom would hand the browser after `user` agreed to log in (usable once, 5 minutes)."""
        code = secrets.token_hex(8)
        with self._lock:
            self.oauth_codes[code] = (user, member, self.clock() + OAUTH_CODE_TTL)
        return code

    def contents(self, user: str) -> list[str]:
        """The contents sent to `user`, in order."""
        return [m.content for m in self.sent.get(user, [])]

    # -- HTTP ------------------------------------------------------------------------------------

    def handle(self, req: Request) -> Response:
        """Route one request like qyapi.weixin.qq.com."""
        if self.ip_blocked and req.path.startswith("/cgi-bin/"):
            return _err(60020, "not allow to access from your ip")
        if req.method == "GET" and req.path == "/cgi-bin/gettoken":
            return self._gettoken(req)
        if req.method == "POST" and req.path == "/cgi-bin/message/send":
            return self._send(req)
        if req.method == "POST" and req.path == "/cgi-bin/message/update_template_card":
            return self._update_card(req)
        if req.method == "POST" and req.path == "/cgi-bin/aibot/response":
            return self._aibot_response(req)
        if req.method == "GET" and req.path == "/cgi-bin/auth/getuserinfo":
            return self._getuserinfo(req)
        return Response(404, b"not found")

    def _token_error(self, token: str) -> Response | None:
        if not token:
            return _err(41001, "access_token missing")
        issued = self.tokens.get(token)
        if issued is None:
            return _err(40014, "invalid access_token")
        if self.clock() >= issued.expires_at:
            return _err(42001, "access_token expired")
        return None

    def _getuserinfo(self, req: Request) -> Response:
        form = req.form()
        with self._lock:
            refused = self._token_error(form.get("access_token", ""))
            if refused is not None:
                return refused
            code = form.get("code", "")
            if not code:
                return _err(41008, "missing oauth code")
            found = self.oauth_codes.pop(code, None)  # a code works once
        if found is None or self.clock() >= found[2]:
            return _err(40029, "invalid code")
        user, member, _expires = found
        if not member:
            return Response.of_json({"errcode": 0, "errmsg": "ok", "openid": f"o-{user}"})
        return Response.of_json(
            {"errcode": 0, "errmsg": "ok", "userid": user, "user_ticket": secrets.token_hex(8)}
        )

    def _gettoken(self, req: Request) -> Response:
        form = req.form()
        with self._lock:
            self.gettoken_calls += 1
            agent = self.apps.get((form.get("corpid", ""), form.get("corpsecret", "")))
            if agent is None:
                return _err(40001, "invalid credential")
            token = f"tok-{next(self._ids)}-{uuid.uuid4().hex}"
            self.tokens[token] = _IssuedToken(
                form["corpid"], agent, self.clock() + timedelta(seconds=self.expires_in)
            )
        return Response.of_json(
            {"errcode": 0, "errmsg": "ok", "access_token": token, "expires_in": self.expires_in}
        )

    def _send(self, req: Request) -> Response:
        token = req.form().get("access_token", "")
        with self._lock:
            self.send_calls += 1
            if not token:
                return _err(41001, "access_token missing")
            issued = self.tokens.get(token)
            if issued is None:
                return _err(40014, "invalid access_token")
            if self.clock() >= issued.expires_at:
                return _err(42001, "access_token expired")
            if self.fail_send:
                code = self.fail_send.pop(0)
                return _err(code, "injected failure")
        try:
            body = req.json()
        except ValueError:
            return _err(44004, "wrong json format. empty content")
        msgtype = body.get("msgtype")
        if msgtype not in ("text", "markdown", "template_card"):
            return _err(40008, "invalid message type")
        if body.get("agentid") != issued.agent_id:
            return _err(301002, "not allow operate another agent with this accesstoken")
        if msgtype == "template_card":
            return self._send_card(issued.agent_id, body)
        content = (body.get(msgtype) or {}).get("content", "")
        if not content:
            return _err(44004, "empty content")
        if len(content.encode("utf-8")) > APP_CONTENT_MAX_BYTES:
            return _err(
                40058,
                f"{msgtype}.content exceed max length {APP_CONTENT_MAX_BYTES}. invalid Request Parameter",
            )
        users = [u for u in str(body.get("touser", "")).split("|") if u]
        if not users:
            return _err(81013, "user & party & tag all invalid")
        with self._lock:
            for user in users:
                self.sent.setdefault(user, []).append(SentMessage(issued.agent_id, msgtype, content))
        return Response.of_json({"errcode": 0, "errmsg": "ok", "invaliduser": "", "msgid": uuid.uuid4().hex})

    def _send_card(self, agent_id: int, body: dict[str, Any]) -> Response:
        users = [u for u in str(body.get("touser", "")).split("|") if u]
        if not users:
            return _err(81013, "user & party & tag all invalid")
        errcode, errmsg, code = self.cards.send(agent_id, users, body.get("template_card"))
        if errcode:
            return _err(errcode, errmsg)
        answer = {"errcode": 0, "errmsg": "ok", "invaliduser": "", "msgid": uuid.uuid4().hex}
        return Response.of_json({**answer, "response_code": code} if code else answer)

    def _update_card(self, req: Request) -> Response:
        with self._lock:
            token = req.form().get("access_token", "")
            refused = self._token_error(token)
            if refused is not None:
                return refused
            agent_id = self.tokens[token].agent_id
        try:
            body = req.json()
        except ValueError:
            return _err(44004, "wrong json format. empty content")
        errcode, errmsg, invalid = self.cards.update(agent_id, body)
        if errcode:
            return _err(errcode, errmsg)
        return Response.of_json({"errcode": 0, "errmsg": "ok", "invaliduser": invalid})

    def _aibot_response(self, req: Request) -> Response:
        code = req.form().get("response_code", "")
        with self._lock:
            if self.response_codes.get(code, True):  # unknown or already used: one call per code
                return _err(RESPONSE_CODE_INVALID, "response_code invalid or used")
            self.response_codes[code] = True
        body = req.json()
        if body.get("msgtype") == "template_card":  # WeCom: only when the callback was a 1:1 chat
            chat = self.response_chats.get(code, "")
            errcode, errmsg = self.bot_cards.send(chat, body.get("template_card")) if chat else (40008, "")
            return _err(errcode, errmsg or "template_card only answers a single chat") if errcode else _ok()
        if body.get("msgtype") != "markdown":
            return _err(40008, "invalid message type")
        content = (body.get("markdown") or {}).get("content", "")
        if len(content.encode("utf-8")) > AIBOT_CONTENT_MAX_BYTES:
            return _err(40058, "markdown.content exceed max length 20480")
        with self._lock:
            self.responses.append(body)
        return Response.of_json({"errcode": 0, "errmsg": "ok"})


class CallbackSender:
    """Plays WeCom's side of callbacks: encrypts, signs and POSTs them at our server, opens replies."""

    def __init__(
        self,
        base_url: str,
        token: str,
        encoding_aes_key: str,
        receiveid: str,
        clock: Clock = utc_now,
        *,
        random: Callable[[int], bytes] = os.urandom,
        session: requests.Session | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.crypto = MsgCrypto.create(token, encoding_aes_key, receiveid, random)
        self.clock = clock
        self.session = session or requests.Session()
        self._nonces = itertools.count(100000)

    def nonce(self) -> str:
        """A fresh nonce."""
        return str(next(self._nonces))

    def signed_query(
        self, ciphertext: str, timestamp: str | None = None, nonce: str | None = None
    ) -> dict[str, str]:
        """msg_signature, timestamp and nonce for `ciphertext`."""
        ts = timestamp if timestamp is not None else str(int(self.clock().timestamp()))
        nn = nonce if nonce is not None else self.nonce()
        return {"msg_signature": self.crypto.sign(ts, nn, ciphertext), "timestamp": ts, "nonce": nn}

    # -- URL verification ------------------------------------------------------------------------

    def verify_url(self, echo: str, path: str = "/wecom/callback") -> requests.Response:
        """GET the verification request with an encrypted `echo`."""
        echostr = self.crypto.encrypt(echo.encode("utf-8"))
        params = {**self.signed_query(echostr), "echostr": echostr}
        return self.session.get(self.base_url + path, params=params, timeout=10)

    # -- self-built app (XML) --------------------------------------------------------------------

    def app_text_xml(
        self, user: str, text: str, msg_id: int | str, agent_id: int, create_time: int | None = None
    ) -> str:
        """The decrypted XML of one text message from `user`."""
        ct = create_time if create_time is not None else int(self.clock().timestamp())
        return (
            f"<xml><ToUserName><![CDATA[{self.crypto.receiveid}]]></ToUserName>"
            f"<FromUserName><![CDATA[{escape(user)}]]></FromUserName><CreateTime>{ct}</CreateTime>"
            f"<MsgType><![CDATA[text]]></MsgType><Content>{escape(text)}</Content>"
            f"<MsgId>{msg_id}</MsgId><AgentID>{agent_id}</AgentID></xml>"
        )

    def app_card_click_xml(
        self,
        user: str,
        task_id: str,
        key: str,
        response_code: str,
        agent_id: int,
        create_time: int | None = None,
    ) -> str:
        """The decrypted XML of one `template_card_event` (a button click), as WeCom documents it."""
        ct = create_time if create_time is not None else int(self.clock().timestamp())
        return (
            f"<xml><ToUserName><![CDATA[{self.crypto.receiveid}]]></ToUserName>"
            f"<FromUserName><![CDATA[{escape(user)}]]></FromUserName><CreateTime>{ct}</CreateTime>"
            "<MsgType><![CDATA[event]]></MsgType><Event><![CDATA[template_card_event]]></Event>"
            f"<EventKey><![CDATA[{key}]]></EventKey><TaskId><![CDATA[{task_id}]]></TaskId>"
            "<CardType><![CDATA[button_interaction]]></CardType>"
            f"<ResponseCode><![CDATA[{response_code}]]></ResponseCode><AgentID>{agent_id}</AgentID></xml>"
        )

    def app_envelope(
        self, plaintext: str | bytes, agent_id: int | str = "", timestamp: str | None = None
    ) -> tuple[dict[str, str], bytes]:
        """Encrypt `plaintext` into the outer XML body; return (query, body)."""
        raw = plaintext.encode("utf-8") if isinstance(plaintext, str) else plaintext
        encrypted = self.crypto.encrypt(raw)
        body = (
            f"<xml><ToUserName><![CDATA[{self.crypto.receiveid}]]></ToUserName>"
            f"<AgentID><![CDATA[{agent_id}]]></AgentID><Encrypt><![CDATA[{encrypted}]]></Encrypt></xml>"
        )
        return self.signed_query(encrypted, timestamp), body.encode("utf-8")

    def post_app(
        self, query: dict[str, str], body: bytes, path: str = "/wecom/callback"
    ) -> requests.Response:
        """POST a prepared app callback."""
        return self.session.post(
            self.base_url + path, params=query, data=body, headers={"Content-Type": "text/xml"}, timeout=30
        )

    def post_app_text(self, user: str, text: str, msg_id: int | str, agent_id: int) -> requests.Response:
        """Build, encrypt, sign and POST one text message from `user`."""
        query, body = self.app_envelope(self.app_text_xml(user, text, msg_id, agent_id), agent_id)
        return self.post_app(query, body)

    # -- AI bot (JSON) ---------------------------------------------------------------------------

    def aibot_text(
        self,
        user: str,
        text: str,
        msgid: str,
        *,
        aibotid: str = "bot1",
        chatid: str = "",
        response_url: str = "",
    ) -> dict[str, Any]:
        """The decrypted JSON of one AI-bot text callback (group when `chatid` is set)."""
        payload: dict[str, Any] = {
            "msgid": msgid,
            "aibotid": aibotid,
            "chattype": "group" if chatid else "single",
            "from": {"userid": user},
            "response_url": response_url,
            "msgtype": "text",
            "text": {"content": text},
        }
        if chatid:
            payload["chatid"] = chatid
        return payload

    def aibot_refresh(
        self, stream_id: str, msgid: str, user: str = "", aibotid: str = "bot1"
    ) -> dict[str, Any]:
        """The decrypted JSON of one stream refresh callback."""
        return {
            "msgid": msgid,
            "aibotid": aibotid,
            "chattype": "single",
            "from": {"userid": user},
            "msgtype": "stream",
            "stream": {"id": stream_id},
        }

    def post_aibot(
        self, payload: dict[str, Any], path: str = "/wecom/aibot", timestamp: str | None = None
    ) -> tuple[requests.Response, str]:
        """Encrypt and POST an AI-bot callback; return the response and the nonce used."""
        encrypted = self.crypto.encrypt(json.dumps(payload, ensure_ascii=False).encode("utf-8"))
        query = self.signed_query(encrypted, timestamp)
        resp = self.session.post(
            self.base_url + path,
            params=query,
            data=json.dumps({"encrypt": encrypted}),
            headers={"Content-Type": "application/json"},
            timeout=30,
        )
        return resp, query["nonce"]

    def open_reply(self, reply: dict[str, Any], nonce: str) -> dict[str, Any]:
        """Check a passive reply's signature and nonce like WeCom would, and decrypt it."""
        if reply.get("nonce") != nonce:
            raise ValueError("reply nonce differs from the callback's")
        plain = self.crypto.verify_and_decrypt(
            reply["msgsignature"], reply["timestamp"], nonce, reply["encrypt"]
        )
        data: dict[str, Any] = json.loads(plain)
        return data
