"""`config/ui.yaml`: the web pages under /ui — who may log in, with what token, and the session cookie.

Tokens never live in the YAML: a user has either `token_env` (an environment variable holding the
token) or `token_sha256` (the hex sha256 of the token, so the YAML can be shared without the token).
Roles are not set here: a user's roles come from access.yaml, exactly as in chat.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from pydantic import BaseModel, ConfigDict, Field, model_validator

from xihe.config.semantic import unknown_name
from xihe.config.settings import Problem, Section, Settings

_HEX64 = re.compile(r"^[0-9a-f]{64}$")


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
        "", description="public base URL of this server, e.g. https://xihe.intra.example.com"
    )


class UiConfig(_Strict):
    """Everything in ui.yaml."""

    enabled: bool = Field(True, description="serve the pages under /ui")
    session_secret_env: str = Field(
        "XIHE_UI_SECRET", description="env var holding the cookie-signing secret (32+ random bytes)"
    )
    session_hours: float = Field(12, gt=0, le=24 * 30, description="how long a login lasts")
    cookie_secure: bool = Field(False, description="send the cookie only over HTTPS (set behind TLS)")
    page_size: int = Field(50, ge=5, le=500, description="rows per list page")
    users: dict[str, UiUser] = Field(default_factory=dict, description="user id (access.yaml) → token")
    wecom_oauth: WeComOAuth = Field(default_factory=lambda: WeComOAuth())


def user_problems(settings: Settings, cfg: UiConfig) -> Iterator[Problem]:
    """Logins for user ids that access.yaml does not define."""
    users = set(settings.access.users)
    for uid in cfg.users:
        if uid not in users:
            yield "ui.yaml", ("users", uid), unknown_name("user", uid, users, "access.yaml users")


UI_SECTION = Section("ui.yaml", "ui", UiConfig, checks=user_problems)
