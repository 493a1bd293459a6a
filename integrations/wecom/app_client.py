"""Self-built app message API: cached access_token and markdown `message/send`.

Token rules: one cached token per (corpid, agent); a single-flight refetch when
WeCom says 40014/42001, then one retry; 40001 (bad secret) is never retried; 60020 names the IP
allow-list. WeCom reports failures as `errcode` under HTTP 200, so the body is always checked.
Transport failures (connection, timeout, 5xx, errcode -1) are retried with tenacity.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import requests
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential
from tenacity.wait import wait_base

from xihe.agent.clock import Clock, utc_now
from xihe.agent.errors import WeComError

APP_MARKDOWN_MAX_BYTES = 2048
TOKEN_INVALID = (40014, 42001)
_SECRET_QUERY = re.compile(r"(access_token|corpsecret)=[^&\s'\"]+")


def split_utf8(content: str, limit: int = APP_MARKDOWN_MAX_BYTES) -> list[str]:
    """Split into chunks of at most `limit` UTF-8 bytes, on line ends where possible, never inside a character.

    The chunks concatenate back to `content`.
    """
    if limit < 4:
        raise ValueError("limit must fit one UTF-8 character (4 bytes)")
    chunks: list[str] = []
    current: list[str] = []
    size = 0
    for line in content.splitlines(keepends=True):
        n = len(line.encode("utf-8"))
        if size + n <= limit:
            current.append(line)
            size += n
            continue
        if current:
            chunks.append("".join(current))
            current, size = [], 0
        if n <= limit:
            current, size = [line], n
            continue
        # one line longer than the limit: cut it by characters
        piece: list[str] = []
        psize = 0
        for ch in line:
            cn = len(ch.encode("utf-8"))
            if psize + cn > limit:
                chunks.append("".join(piece))
                piece, psize = [], 0
            piece.append(ch)
            psize += cn
        current, size = piece, psize
    if current:
        chunks.append("".join(current))
    return chunks


@dataclass(frozen=True)
class _Token:
    value: str
    expires_at: datetime


class TokenCache:
    """access_tokens per (corpid, agent), shared by every client of a process; single-flight refetch."""

    def __init__(self, clock: Clock = utc_now, margin: timedelta = timedelta(minutes=5)) -> None:
        self.clock = clock
        self.margin = margin
        self._tokens: dict[tuple[str, int], _Token] = {}
        self._locks: dict[tuple[str, int], threading.Lock] = {}
        self._guard = threading.Lock()

    def _lock(self, key: tuple[str, int]) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

    def get(self, key: tuple[str, int], fetch: Callable[[], tuple[str, int]]) -> str:
        """The cached token, or one fetched by exactly one caller while the others wait."""
        token = self._tokens.get(key)
        if token and self.clock() < token.expires_at:
            return token.value
        with self._lock(key):
            token = self._tokens.get(key)  # someone else may have fetched while we waited
            if token and self.clock() < token.expires_at:
                return token.value
            value, expires_in = fetch()
            self._tokens[key] = _Token(value, self.clock() + timedelta(seconds=expires_in) - self.margin)
            return value

    def known(self) -> list[str]:
        """Every cached token value (so error text can be scrubbed of them)."""
        return [t.value for t in self._tokens.values()]

    def invalidate(self, key: tuple[str, int], bad: str) -> None:
        """Drop the token only if it is still `bad` (another caller may have refreshed it already)."""
        with self._lock(key):
            token = self._tokens.get(key)
            if token and token.value == bad:
                del self._tokens[key]


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, WeComError) and exc.retryable and exc.errcode in (None, -1)


class AppClient:
    """Sends app messages for one (corpid, agent); errors never contain the secret or the token."""

    def __init__(
        self,
        corp_id: str,
        secret: str,
        agent_id: int,
        *,
        api_base: str = "https://qyapi.weixin.qq.com",
        session: requests.Session | None = None,
        tokens: TokenCache | None = None,
        timeout: float = 10.0,
        attempts: int = 3,
        wait: wait_base | None = None,
    ) -> None:
        self.corp_id = corp_id
        self._secret = secret
        self.agent_id = agent_id
        self.api_base = api_base.rstrip("/")
        self.session = session or requests.Session()
        self.tokens = tokens or TokenCache()
        self.timeout = timeout
        self.attempts = attempts
        self.wait = wait if wait is not None else wait_exponential(multiplier=0.5, max=8)

    def __repr__(self) -> str:
        return f"AppClient(corp_id={self.corp_id!r}, agent_id={self.agent_id})"

    # -- transport ----------------------------------------------------------------------------

    def _redact(self, text: str) -> str:
        text = _SECRET_QUERY.sub(r"\1=***", text)
        for secret in (self._secret, *self.tokens.known()):
            if secret:
                text = text.replace(secret, "***")
        return text

    def _call_once(self, method: str, path: str, params: dict[str, Any], body: Any = None) -> dict[str, Any]:
        url = f"{self.api_base}{path}"
        try:
            resp = self.session.request(method, url, params=params, json=body, timeout=self.timeout)
        except requests.RequestException as exc:
            # str(exc) carries the URL with its query (secret/token): keep only the kind
            raise WeComError(f"{path}: transport error {type(exc).__name__}", retryable=True) from None
        if resp.status_code >= 500:
            raise WeComError(f"{path}: HTTP {resp.status_code}", retryable=True)
        if resp.status_code != 200:
            raise WeComError(f"{path}: HTTP {resp.status_code}")
        try:
            data = resp.json()
        except ValueError:
            raise WeComError(f"{path}: answer is not JSON", retryable=True) from None
        if not isinstance(data, dict):
            raise WeComError(f"{path}: answer is not a JSON object")
        errcode = int(data.get("errcode", 0) or 0)
        if errcode:
            raise self._error(path, errcode, str(data.get("errmsg", "")))
        return data

    def _error(self, path: str, errcode: int, errmsg: str) -> WeComError:
        errmsg = self._redact(errmsg)
        if errcode == 60020:
            return WeComError(
                f"{path}: WeCom refused this server's IP (errcode 60020): add the egress IP to the app's "
                f"trusted IPs (企业可信IP) in the admin console. {errmsg}",
                errcode=errcode,
            )
        if errcode == 40001:
            return WeComError(
                f"{path}: invalid corpsecret for agent {self.agent_id} (errcode 40001); check the secret env var",
                errcode=errcode,
            )
        return WeComError(
            f"{path}: errcode {errcode} {errmsg}", errcode=errcode, retryable=errcode in (-1, 45009)
        )

    def _call(self, method: str, path: str, params: dict[str, Any], body: Any = None) -> dict[str, Any]:
        retrying = Retrying(
            stop=stop_after_attempt(self.attempts),
            wait=self.wait,
            retry=retry_if_exception(_retryable),
            reraise=True,
        )
        result: dict[str, Any] = retrying(self._call_once, method, path, params, body)
        return result

    # -- token ---------------------------------------------------------------------------------

    @property
    def _key(self) -> tuple[str, int]:
        return (self.corp_id, self.agent_id)

    def _fetch_token(self) -> tuple[str, int]:
        data = self._call("GET", "/cgi-bin/gettoken", {"corpid": self.corp_id, "corpsecret": self._secret})
        token = data.get("access_token")
        if not isinstance(token, str) or not token:
            raise WeComError("/cgi-bin/gettoken: answer has no access_token")
        return token, int(data.get("expires_in", 7200))

    def access_token(self) -> str:
        """The cached token for this app, fetched when missing or expired."""
        return self.tokens.get(self._key, self._fetch_token)

    def _with_token(
        self, method: str, path: str, body: Any, params: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        token = self.access_token()
        try:
            return self._call(method, path, {**(params or {}), "access_token": token}, body)
        except WeComError as exc:
            if exc.errcode not in TOKEN_INVALID:
                raise
        # WeCom may invalidate a token early: drop it (once, for everyone), refetch, retry once
        self.tokens.invalidate(self._key, token)
        return self._call(method, path, {**(params or {}), "access_token": self.access_token()}, body)

    # -- web login -----------------------------------------------------------------------------

    def user_of_oauth_code(self, code: str) -> str:
        """auth/getuserinfo: the WeCom userid an OAuth2 `snsapi_base` code stands for."""
        info = self._with_token("GET", "/cgi-bin/auth/getuserinfo", None, {"code": code})
        user = info.get("userid") or info.get("UserId")
        if not isinstance(user, str) or not user:
            raise WeComError("/cgi-bin/auth/getuserinfo: not a member of the company (no userid)")
        return user

    # -- messages ------------------------------------------------------------------------------

    def send(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST one message/send body (agentid filled in); returns WeCom's answer."""
        return self._with_token("POST", "/cgi-bin/message/send", {**body, "agentid": self.agent_id})

    def send_markdown(self, user: str, content: str) -> list[dict[str, Any]]:
        """Send markdown to `user`, split into ≤ 2,048-byte parts on line boundaries; one answer per part."""
        return [
            self.send({"touser": user, "msgtype": "markdown", "markdown": {"content": part}})
            for part in split_utf8(content, APP_MARKDOWN_MAX_BYTES)
        ]

    def send_text(self, user: str, content: str) -> list[dict[str, Any]]:
        """Send plain text to `user`, split like send_markdown."""
        return [
            self.send({"touser": user, "msgtype": "text", "text": {"content": part}})
            for part in split_utf8(content, APP_MARKDOWN_MAX_BYTES)
        ]

    def send_card(self, users: list[str], template_card: dict[str, Any]) -> str:
        """Send a template card to `users`; the single-use `response_code` of an interactive card ("" else)."""
        answer = self.send(
            {"touser": "|".join(users), "msgtype": "template_card", "template_card": template_card}
        )
        return str(answer.get("response_code", ""))

    def update_card(
        self, response_code: str, template_card: dict[str, Any], *, users: list[str] | None = None
    ) -> list[str]:
        """message/update_template_card with one single-use `response_code` (every recipient when
        `users` is None); the users WeCom could not update."""
        body: dict[str, Any] = {"agentid": self.agent_id, "response_code": response_code}
        body.update({"userids": users} if users else {"atall": 1})
        body["template_card"] = template_card
        answer = self._with_token("POST", "/cgi-bin/message/update_template_card", body)
        return [str(u) for u in answer.get("invaliduser") or []]
