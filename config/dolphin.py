"""`config/dolphin.yaml`: how xihe reaches DolphinScheduler and how it watches runs."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Mapping
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from xihe.agent.errors import ConfigError
from xihe.config.settings import Section
from xihe.config.yamlmodel import load_model


class PollConfig(BaseModel):
    """Watch polling cadence."""

    model_config = ConfigDict(extra="forbid")

    interval_seconds: float = Field(
        15.0, gt=0, description="seconds between polls right after a state change"
    )
    max_interval_seconds: float = Field(300.0, gt=0, description="back off up to this while nothing changes")
    backoff: float = Field(2.0, ge=1.0, description="interval multiplier per unchanged poll")
    max_pages: int = Field(20, gt=0, description="instance-list pages read per project and cycle")
    discovery_timeout_seconds: float = Field(
        3600.0, gt=0, description="give up on a started run whose instance never appears"
    )
    log_tail_lines: int = Field(50, gt=0, description="log lines kept per failed task")


class UserTokens(BaseModel):
    """Where an engineer's own DolphinScheduler token comes from (writes then run as that engineer)."""

    model_config = ConfigDict(extra="forbid")

    env_pattern: str | None = Field(
        None,
        description="per-user environment variable; {user} is the user id upper-cased with non-alphanumerics "
        "as _, e.g. XIHE_DS_TOKEN_{user} → XIHE_DS_TOKEN_ALICE",
    )
    file: str | None = Field(
        None, description="YAML file mapping user id → token; must be readable by its owner only (mode 0600)"
    )

    @model_validator(mode="after")
    def _one_source(self) -> UserTokens:
        if self.env_pattern is not None and "{user}" not in self.env_pattern:
            raise ValueError("env_pattern must contain {user}")
        if not self.env_pattern and not self.file:
            raise ValueError("set env_pattern or file")
        return self


class DolphinConfig(BaseModel):
    """Connection, auth and polling settings for DolphinScheduler."""

    model_config = ConfigDict(extra="forbid")

    base_url: str = Field(
        description="API base URL ending in /dolphinscheduler, e.g. http://ds:12345/dolphinscheduler"
    )
    version: Literal["auto", "3.1", "3.2", "3.3"] = Field(
        "auto", description="API profile; auto probes once (404 on workflow-definition = pre-3.3)"
    )
    token_env: str | None = Field(
        "XIHE_DS_TOKEN", description="environment variable holding the access token (header `token`)"
    )
    user: str | None = Field(None, description="user for session login, used when no token is set")
    password_env: str | None = Field(None, description="environment variable holding that user's password")
    server_timezone: str = Field("UTC", description="spring.jackson.time-zone of the DS API server")
    timeout_seconds: float = Field(10.0, gt=0, description="connect and read timeout of every request")
    retries: int = Field(
        3, ge=0, le=10, description="retries for connect errors, timeouts and 5xx (never business errors)"
    )
    page_size: int = Field(100, gt=0, le=1000, description="page size for list endpoints")
    projects: list[str] = Field(
        default_factory=list, description="projects the name sync scans; empty = all visible"
    )
    worker_group: str = Field("default", description="workerGroup sent on start")
    tenant_code: str = Field("default", description="tenantCode sent on start (3.2+)")
    failure_strategy: Literal["END", "CONTINUE"] = Field("END", description="failureStrategy sent on start")
    poll: PollConfig = Field(default_factory=PollConfig, description="watch polling cadence")
    user_tokens: UserTokens | None = Field(
        None, description="per-user tokens for writes; a user without one writes with the bot's credentials"
    )
    schedule_off_reminder_minutes: float = Field(
        120.0,
        gt=0,
        description="remind the one who took a schedule offline after this long if it is still off",
    )

    @model_validator(mode="after")
    def _auth_named(self) -> DolphinConfig:
        if not self.token_env and not (self.user and self.password_env):
            raise ValueError("set token_env, or user and password_env")
        return self


def load_dolphin(text: str, name: str = "config/dolphin.yaml") -> DolphinConfig:
    """Validate dolphin.yaml text; ConfigErrors read `file:line: key: problem`."""
    return load_model(text, name, DolphinConfig)


def credentials(cfg: DolphinConfig, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Read the secrets the config names: {"token": …} or {"user": …, "password": …}."""
    env = os.environ if env is None else env
    if cfg.token_env and env.get(cfg.token_env):
        return {"token": env[cfg.token_env]}
    if cfg.user and cfg.password_env and env.get(cfg.password_env):
        return {"user": cfg.user, "password": env[cfg.password_env]}
    names = " or ".join(n for n in (cfg.token_env, cfg.password_env) if n)
    raise ConfigError(
        f"no DolphinScheduler credentials: set {names}", "config/dolphin.yaml", None, "token_env"
    )


def env_name(pattern: str, user: str) -> str:
    """The environment variable `pattern` names for `user` (alice → XIHE_DS_TOKEN_ALICE)."""
    return pattern.replace("{user}", re.sub(r"[^A-Za-z0-9]", "_", user).upper())


def user_tokens(
    cfg: DolphinConfig, users: Iterable[str], env: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Each listed user's own token from the configured source (the file wins over the environment).

    ConfigError (naming the file, never a token) when the file is missing, unreadable, not owner-only
    or not a map of user → token.
    """
    env = os.environ if env is None else env
    source = cfg.user_tokens
    if source is None:
        return {}
    out: dict[str, str] = {}
    if source.env_pattern:
        for user in users:
            value = env.get(env_name(source.env_pattern, user), "")
            if value:
                out[user] = value
    if source.file:
        out.update(_token_file(source.file))
    return out


def token_notes(cfg: DolphinConfig, users: Iterable[str], env: Mapping[str, str] | None = None) -> list[str]:
    """`xihe config check`: which users write with their own token and which with the bot's (no tokens)."""
    listed = sorted(users)
    own = user_tokens(cfg, listed, env)
    mine = [u for u in listed if u in own] + sorted(u for u in own if u not in listed)
    others = [u for u in listed if u not in own]
    return [
        f"users with their own DolphinScheduler token: {', '.join(mine) or 'none'}",
        f"users whose writes use the bot's credentials: {', '.join(others) or 'none'}",
    ]


def _token_file(path: str) -> dict[str, str]:
    where = "config/dolphin.yaml"
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise ConfigError(
            f"user_tokens.file {path}: {exc.strerror}", where, None, "user_tokens.file"
        ) from None
    if mode & 0o077:
        raise ConfigError(
            f"user_tokens.file {path} is mode {stat.S_IMODE(mode):04o}; it must be readable by its owner only "
            f"(chmod 600 {path})",
            where,
            None,
            "user_tokens.file",
        )
    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(
            f"user_tokens.file {path}: cannot read it ({type(exc).__name__})", where, None, "user_tokens.file"
        ) from None
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in data.items()
    ):
        raise ConfigError(
            f"user_tokens.file {path}: expected a map of user id → token", where, None, "user_tokens.file"
        )
    return {k: v for k, v in data.items() if v}


DOLPHIN_SECTION = Section("dolphin.yaml", "dolphin", DolphinConfig)
