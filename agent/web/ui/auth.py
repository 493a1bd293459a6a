"""Who is looking: token login, the signed session cookie, CSRF tokens, and what a viewer may do.

The session is a stateless cookie `payload.hmac` (HMAC-SHA256 over base64 JSON) so any replica can
read it. It carries the user, a per-session CSRF token, the expiry and a fingerprint of the token the
user logged in with: changing that user's token in ui.yaml (or the environment) ends their sessions,
and changing the signing secret ends everyone's. Roles are never stored in the cookie; they are read
from access.yaml on every request, exactly as chat does.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from xihe.agent.gate import Who, identify, is_admin
from xihe.config.load import Settings
from xihe.config.ui import UI_SECTION, UiConfig

log = logging.getLogger("xihe.ui")

COOKIE = "xihe_ui"
PRELOGIN_COOKIE = "xihe_ui_pre"  # double-submit CSRF token of the login form (no session yet)
FLASH_COOKIE = "xihe_ui_flash"


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

    @property
    def sees_all(self) -> bool:
        """Approvers and admins see everyone's tasks and audit; others see their own."""
        return self.approver or self.admin

    @property
    def roles_text(self) -> str:
        return ", ".join(self.who.roles) or "no roles"


def viewer_of(settings: Settings, user: str, csrf: str, via: str) -> Viewer:
    """Roles read fresh from access.yaml."""
    access = settings.access
    who = identify(user, access)
    approver = any(r in access.roles and access.roles[r].approver for r in who.roles)
    return Viewer(user, who, csrf, via, approver, is_admin(who, access))


def new_session(user: str, fp: str, via: str, now: datetime, hours: float) -> dict[str, Any]:
    """A session payload: user, CSRF token, expiry, token fingerprint, login method."""
    return {
        "u": user,
        "c": secrets.token_urlsafe(24),
        "x": int(now.timestamp() + hours * 3600),
        "k": fp,
        "v": via,
    }


def session_viewer(
    settings: Settings, config: UiConfig, payload: dict[str, Any] | None, now: datetime
) -> Viewer | None:
    """The viewer of a verified session payload, or None (expired, token changed, login method off)."""
    if not payload:
        return None
    user, csrf, exp, fp, via = (payload.get(k) for k in ("u", "c", "x", "k", "v"))
    if not isinstance(user, str) or not isinstance(csrf, str) or not isinstance(exp, int):
        return None
    if exp <= now.timestamp():
        return None
    if via == "token":
        want = expected_hash(settings, config, user)
        if want is None or not hmac.compare_digest(str(fp), fingerprint(want)):
            return None
    elif via == "wecom":
        if not config.wecom_oauth.enabled:
            return None
    else:
        return None
    return viewer_of(settings, user, csrf, via)


def csrf_ok(expected: str | None, given: str | None) -> bool:
    """Constant-time comparison of a form's CSRF field with the session's (or pre-login cookie's)."""
    if not expected or not given:
        return False
    return hmac.compare_digest(expected.encode(), given.encode())
