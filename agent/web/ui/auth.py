"""Who is looking: token check, the signed cookies, CSRF tokens, and what a viewer may do.

Sessions live in the store (agent/web/ui/sessions.py); the session cookie carries only a signed
random id, and the session's CSRF token is an HMAC of that id. Whether a session's user may still
be in is decided here from the configuration on every request (and on every config reload): a
changed token, a user gone from access.yaml or a login method turned off ends it. Roles are never
stored; they are read from access.yaml on every request, exactly as chat does.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from xihe.agent.gate import Who, identify, is_admin
from xihe.config.load import Settings
from xihe.config.ui import UI_SECTION, UiConfig

log = logging.getLogger("xihe.ui")

COOKIE = "xihe_ui"
PRELOGIN_COOKIE = "xihe_ui_pre"  # signed double-submit CSRF token of the login form (no session yet)
FLASH_COOKIE = "xihe_ui_flash"
PRELOGIN_SECONDS = 3600


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class Signer:
    """HMAC-signed JSON values with a purpose, so a flash cookie can never pass as a session."""

    def __init__(self, secret: bytes) -> None:
        self._key = hashlib.sha256(b"xihe-ui:" + secret).digest()

    def dumps(self, purpose: str, payload: dict[str, Any]) -> str:
        body = _b64(json.dumps(payload, separators=(",", ":"), sort_keys=True).encode())
        mac = hmac.new(self._key, f"{purpose}.{body}".encode(), hashlib.sha256).digest()
        return f"{body}.{_b64(mac)}"

    def loads(self, purpose: str, text: str | None) -> dict[str, Any] | None:
        """The payload, or None when absent, malformed or not signed by us for this purpose."""
        if not text or text.count(".") != 1:
            return None
        body, mac = text.split(".")
        want = hmac.new(self._key, f"{purpose}.{body}".encode(), hashlib.sha256).digest()
        try:
            if not hmac.compare_digest(_unb64(mac), want):
                return None
            value = json.loads(_unb64(body))
        except (ValueError, TypeError):
            return None
        return value if isinstance(value, dict) else None

    def mac(self, purpose: str, text: str) -> str:
        """A token derived from `text` that only the holder of the secret can compute."""
        return _b64(hmac.new(self._key, f"{purpose}:{text}".encode(), hashlib.sha256).digest())


def secret_of(settings: Settings, config: UiConfig) -> bytes:
    """The signing secret from the environment; a random per-process one (with a warning) when unset."""
    value = settings.secret(config.session_secret_env)
    if value:
        return value.encode()
    if settings.get(UI_SECTION) is None:
        return secrets.token_bytes(32)  # no ui.yaml: nobody can log in anyway
    log.warning(
        "%s is not set: UI sessions use a random secret and end when this process restarts "
        "(and do not work across replicas)",
        config.session_secret_env,
    )
    return secrets.token_bytes(32)


def expected_hash(settings: Settings, config: UiConfig, user: str) -> str | None:
    """The sha256 of the user's configured token, or None when they have no (available) token."""
    entry = config.users.get(user)
    if entry is None:
        return None
    if entry.token_sha256:
        return entry.token_sha256
    token = settings.secret(entry.token_env)
    return sha256_hex(token) if token else None


def check_token(settings: Settings, config: UiConfig, user: str, token: str) -> str | None:
    """The session fingerprint when `token` is the user's token, else None (constant-time compare)."""
    want = expected_hash(settings, config, user)
    got = sha256_hex(token)
    if want is None:
        hmac.compare_digest(got, got)  # spend the same time for unknown users
        return None
    if not hmac.compare_digest(got, want):
        return None
    return fingerprint(want)


def fingerprint(token_hash: str) -> str:
    """A short value bound to the token (not enough to recover or test it)."""
    return sha256_hex("fp:" + token_hash)[:16]


@dataclass(frozen=True)
class Viewer:
    """A logged-in user with roles from access.yaml."""

    user: str
    who: Who
    csrf: str
    via: str
    approver: bool
    admin: bool
    session_id: int = 0

    @property
    def sees_all(self) -> bool:
        """Approvers and admins see everyone's tasks and audit; others see their own."""
        return self.approver or self.admin

    @property
    def roles_text(self) -> str:
        return ", ".join(self.who.roles) or "no roles"


def viewer_of(settings: Settings, user: str, csrf: str, via: str, session_id: int = 0) -> Viewer:
    """Roles read fresh from access.yaml."""
    access = settings.access
    who = identify(user, access)
    approver = any(r in access.roles and access.roles[r].approver for r in who.roles)
    return Viewer(user, who, csrf, via, approver, is_admin(who, access), session_id)


def login_refusal(settings: Settings, config: UiConfig, user: str, via: str, token_fp: str) -> str | None:
    """Why the configuration no longer lets `user` hold a session of this kind, or None."""
    access = settings.access
    if user not in access.users and not access.unknown_user_roles:
        return "not in access.yaml"
    if via == "token":
        want = expected_hash(settings, config, user)
        if want is None:
            return "no token in ui.yaml"
        if not hmac.compare_digest(token_fp, fingerprint(want)):
            return "token changed"
        return None
    if via == "wecom":
        return None if config.wecom_oauth.enabled else "WeCom login turned off"
    return "unknown login method"


def csrf_ok(expected: str | None, given: str | None) -> bool:
    """Constant-time comparison of a form's CSRF field with the session's (or pre-login cookie's)."""
    if not expected or not given:
        return False
    return hmac.compare_digest(expected.encode(), given.encode())


def prelogin_pair(signer: Signer, now: datetime) -> tuple[str, str]:
    """(cookie, form field) of a login form: a random nonce, and in the cookie that nonce signed with
    its expiry, so a cookie made anywhere but here (a sibling host, a script) is not accepted."""
    nonce = secrets.token_urlsafe(24)
    return signer.dumps("prelogin", {"n": nonce, "x": int(now.timestamp()) + PRELOGIN_SECONDS}), nonce


def prelogin_ok(signer: Signer, cookie: str | None, given: str | None, now: datetime) -> bool:
    """The login form's CSRF field matches a pre-login cookie we signed that has not expired."""
    payload = signer.loads("prelogin", cookie) or {}
    nonce, expires = payload.get("n"), payload.get("x")
    if not isinstance(nonce, str) or not isinstance(expires, int) or expires <= now.timestamp():
        return False
    return csrf_ok(nonce, given)


def cross_site(headers: Mapping[str, str]) -> bool:
    """A browser says this POST came from another site or origin (Sec-Fetch-Site, else Origin vs Host).

    A request without either header (curl, an old browser) is not refused here; its CSRF token is
    still checked."""
    site = headers.get("sec-fetch-site")
    if site is not None:
        return site not in ("same-origin", "none")
    origin = headers.get("origin")
    if origin is None:
        return False
    return origin == "null" or urlsplit(origin).netloc.lower() != headers.get("host", "").lower()
