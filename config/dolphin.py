"""`config/dolphin.yaml`: how xihe reaches DolphinScheduler and how it watches runs."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal

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


DOLPHIN_SECTION = Section("dolphin.yaml", "dolphin", DolphinConfig)
