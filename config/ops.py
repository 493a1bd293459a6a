"""`config/ops.yaml`: operations of `xihe serve`: retention of old rows, config reload, log format."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from xihe.config.settings import Section


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RetentionConfig(_Strict):
    """How long rows are kept; older ones are deleted by the `retention` job (every replica may run it)."""

    enabled: bool = Field(True, description="run the pruning job")
    tasks_days: int = Field(
        90,
        ge=1,
        description="finished tasks (done/failed/cancelled) with their steps, confirmations, artifacts; "
        "messages for a terminal chat that was never opened again",
    )
    audit_days: int = Field(365, ge=1, description="audit events")
    outbox_days: int = Field(30, ge=1, description="delivered alert outbox rows")
    inbox_days: int = Field(7, ge=1, description="WeCom MsgId/inbox rows and AI-bot streams")
    sessions_days: int = Field(
        7,
        ge=2,
        description="ended web sessions, login tries and lockouts (2+: a throttle window is up to a day)",
    )
    batch: int = Field(1000, ge=10, le=100000, description="rows deleted per statement (short locks)")
    interval_minutes: int = Field(60, ge=1, description="how often the job runs")


class ReloadConfig(_Strict):
    """Re-reading the config directory while serving."""

    enabled: bool = Field(True, description="run the reload job")
    interval_seconds: int = Field(30, ge=1, description="how often the directory is checked for changes")


class LoggingConfig(_Strict):
    """Logs of `xihe serve`."""

    format: Literal["json", "text"] = Field("json", description="json: one object per line with task ids")
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field("INFO", description="root log level")


class OpsConfig(_Strict):
    """The whole ops.yaml."""

    retention: RetentionConfig = Field(default_factory=lambda: RetentionConfig.model_validate({}))
    config_reload: ReloadConfig = Field(default_factory=lambda: ReloadConfig.model_validate({}))
    logging: LoggingConfig = Field(default_factory=lambda: LoggingConfig.model_validate({}))


OPS_SECTION = Section("ops.yaml", "ops", OpsConfig)
