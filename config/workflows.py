"""`config/workflows.yaml`: the DolphinScheduler workflows xihe knows, their aliases and alert tiers."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_BIZ_DATE_OFFSET = 1  # DolphinScheduler: ${system.biz.date} is scheduleTime minus one day


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
    team: str = Field(
        "", description="on-call team (a rotation in oncall.yaml) paged for this workflow; empty: `oncall`"
    )
    oncall: list[str] = Field(
        default_factory=list, description="WeCom userids to @ on P0 ([primary, secondary]) when no `team`"
    )
    channel: str = Field("default", description="alert channel name from alerts.yaml")
    biz_date_offset: int = Field(
        DEFAULT_BIZ_DATE_OFFSET,
        ge=0,
        le=31,
        description="days from the business date people name to the run's scheduleTime: 1 (default) for "
        "a workflow keyed on ${system.biz.date} (= scheduleTime - 1 day), 0 for ${system.biz.curdate}",
    )


class WorkflowsConfig(BaseModel):
    """All configured workflows."""

    model_config = ConfigDict(extra="forbid")

    timezone: str = Field("Asia/Shanghai", description="timezone for natural dates and DS schedule times")
    workflows: list[Workflow] = Field(default_factory=list)

    def biz_date_offset(self, project: str, name: str) -> int:
        """scheduleTime = business date + this many days; unconfigured workflows use DS's convention."""
        for wf in self.workflows:
            if wf.name == name and wf.project == project:
                return wf.biz_date_offset
        return DEFAULT_BIZ_DATE_OFFSET
