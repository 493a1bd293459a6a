"""`config/ui.yaml`: the web pages under /ui — who may log in, with what token, sessions and cookies.

Tokens never live in the YAML: a user has either `token_env` (an environment variable holding the
token) or `token_sha256` (the hex sha256 of the token, so the YAML can be shared without the token).
Roles are not set here: a user's roles come from access.yaml, exactly as in chat.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, model_validator

from xihe.config.semantic import unknown_name
from xihe.config.settings import Problem, Section, Settings

_HEX64 = re.compile(r"^[0-9a-f]{64}$")
LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class UiUser(_Strict):
    """One login: a user id from access.yaml and where their token is."""

    token_env: str = Field("", description="environment variable holding this user's token")
    token_sha256: str = Field("", description="hex sha256 of this user's token (echo -n TOKEN | sha256sum)")

    @model_validator(mode="after")
    def _one_source(self) -> UiUser:
        if bool(self.token_env) == bool(self.token_sha256):
            raise ValueError("give exactly one of token_env or token_sha256")
        if self.token_sha256 and not _HEX64.match(self.token_sha256):
            raise ValueError("token_sha256 must be 64 lowercase hex characters")
        return self


class WeComOAuth(_Strict):
    """Optional WeCom web login (OAuth2 snsapi_base): the user id WeCom verifies becomes the login."""

    enabled: bool = Field(False, description="offer 'log in with WeCom' on the login page")
    corp_id_env: str = Field("XIHE_WECOM_CORP_ID", description="env var holding the CorpID (appid)")
    secret_env: str = Field("XIHE_WECOM_APP_SECRET", description="env var holding the app's Secret")
    agent_id: int | None = Field(None, description="the self-built app's AgentId")
    authorize_url: str = Field(
        "https://open.weixin.qq.com/connect/oauth2/authorize", description="WeCom OAuth authorize page"
    )
    api_base: str = Field("https://qyapi.weixin.qq.com", description="WeCom API base (a fake in tests)")
    redirect_base: str = Field(
        "",
        description="public base URL of this server, e.g. https://xihe.intra.example.com (required when "
        "enabled: the callback address is never taken from the request's Host header)",
    )

    @model_validator(mode="after")
    def _redirect_base(self) -> WeComOAuth:
        if not self.redirect_base:
            if self.enabled:
                raise ValueError(
                    "redirect_base is required when enabled: the public base URL WeCom sends the browser "
                    "back to, e.g. https://xihe.intra.example.com"
                )
            return self
        parts = urlsplit(self.redirect_base)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
            raise ValueError(
                "redirect_base must be an http(s) URL without query, e.g. https://xihe.example.com"
            )
        return self


class LoginThrottle(_Strict):
    """Failed logins per user and per client address: a sliding window, then a lockout with an expiry.

    Counted in the store, so every replica refuses the same client and user."""

    window_minutes: float = Field(15, gt=0, le=24 * 60, description="the sliding window failures count in")
    user_failures: int = Field(
        5, ge=1, le=1000, description="failed logins for one user id before its lockout"
    )
    client_failures: int = Field(
        20, ge=1, le=10000, description="failed logins from one client address before its lockout"
    )
    lockout_minutes: float = Field(15, gt=0, le=7 * 24 * 60, description="how long a lockout lasts")


class UiConfig(_Strict):
    """Everything in ui.yaml."""

    enabled: bool = Field(True, description="serve the pages under /ui")
    session_secret_env: str = Field(
        "XIHE_UI_SECRET", description="env var holding the cookie-signing secret (32+ random bytes)"
    )
    session_hours: float = Field(12, gt=0, le=24 * 30, description="a session's absolute lifetime")
    session_idle_minutes: float = Field(
        60, gt=0, le=24 * 60, description="a session ends after this long without a request"
    )
    cookie_secure: bool | Literal["auto"] = Field(
        "auto",
        description="send the cookies only over HTTPS (named __Host-…); auto: yes unless `xihe serve` "
        "listens on a loopback address",
    )
    hsts_seconds: int = Field(
        0, ge=0, le=2 * 365 * 86400, description="Strict-Transport-Security max-age on /ui pages (0: off)"
    )
    page_size: int = Field(50, ge=5, le=500, description="rows per list page")
    login_throttle: LoginThrottle = Field(default_factory=lambda: LoginThrottle())
    mcp_calls_per_minute: float = Field(
        30,
        ge=0,
        le=6000,
        description="MCP tools/call per user per minute (/mcp and xihe mcp serve), per replica; 0: no limit",
    )
    users: dict[str, UiUser] = Field(default_factory=dict, description="user id (access.yaml) → token")
    wecom_oauth: WeComOAuth = Field(default_factory=lambda: WeComOAuth())

    def secure_for(self, listen_host: str) -> bool:
        """Whether cookies are Secure when `xihe serve` listens on `listen_host`."""
        if self.cookie_secure == "auto":
            return not is_loopback(listen_host)
        return self.cookie_secure


def is_loopback(host: str) -> bool:
    """A loopback listen address (127.0.0.0/8, ::1, localhost); 0.0.0.0 and real addresses are not."""
    name = host.strip("[]").lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def config_notes(config: UiConfig) -> list[str]:
    """What `xihe config check` says about ui.yaml's cookies and transport (why, not only what)."""
    notes = []
    if config.cookie_secure == "auto":
        notes.append(
            "cookie_secure: auto: the cookies are Secure (HTTPS only, named __Host-xihe_ui) unless "
            "`xihe serve --host` is a loopback address; on loopback they also travel over plain HTTP"
        )
    elif not config.cookie_secure:
        notes.append(
            "cookie_secure: false: the session cookie also travels over plain HTTP, where anyone on the "
            "path can read it; keep this only when xihe serve listens on loopback"
        )
    if config.hsts_seconds and config.cookie_secure is False:
        notes.append("hsts_seconds is set but cookie_secure is false: browsers ignore HSTS over plain HTTP")
    return notes


def user_problems(settings: Settings, cfg: UiConfig) -> Iterator[Problem]:
    """Logins for user ids that access.yaml does not define."""
    users = set(settings.access.users)
    for uid in cfg.users:
        if uid not in users:
            yield "ui.yaml", ("users", uid), unknown_name("user", uid, users, "access.yaml users")


UI_SECTION = Section("ui.yaml", "ui", UiConfig, checks=user_problems)
