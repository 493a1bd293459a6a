"""`config/workflows.yaml`: the DolphinScheduler workflows xihe knows, their aliases and alert tiers."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Workflow(BaseModel):
    """One workflow definition as admins describe it."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="workflow definition name in DolphinScheduler, e.g. 'order_sync'")
    project: str = Field(description="DolphinScheduler project name")
    code: int | None = Field(None, description="definition code; filled by the name sync job when omitted")
    aliases: list[str] = Field(default_factory=list, description="names people use in chat, e.g. 订单同步")
    environment: str = Field("test", description="environment name from access.yaml, e.g. prod or test")
    tier: Literal["P0", "P1", "P2", "auto"] = Field(
        "auto", description="alert tier; auto = P0 for core production, P1 otherwise, P2 when retried"
    )
    core: bool = Field(False, description="a production core workflow: failures page the on-call")
    owner: str = Field("", description="WeCom userid of the owner")
    oncall: list[str] = Field(default_factory=list, description="WeCom userids to @ on P0")
    channel: str = Field("default", description="alert channel name from alerts.yaml")


class WorkflowsConfig(BaseModel):
    """All configured workflows."""

    model_config = ConfigDict(extra="forbid")

    timezone: str = Field("Asia/Shanghai", description="timezone for natural dates and DS schedule times")
    workflows: list[Workflow] = Field(default_factory=list)
