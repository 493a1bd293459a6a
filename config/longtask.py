"""`config/longtask.yaml`: plans, memory, the context budget and recovery of long tasks."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from xihe.config.settings import Loc, Section


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ContextConfig(_Strict):
    """How each model request is sized (tokens by tiktoken when the encoding is available offline)."""

    budget_tokens: int = Field(16000, ge=1000, description="tokens one request may use, reply included")
    reply_tokens: int = Field(2000, ge=100, description="of those, kept free for the model's answer")
    summary_tokens: int = Field(400, ge=50, description="at most this for the summary of dropped turns")
    emergency_shrink: float = Field(
        0.5, gt=0.05, lt=1.0, description="after a 'too long' rejection, retry once within this share"
    )
    encoding: str | None = Field(
        None, description="tiktoken encoding to count with (e.g. cl100k_base) when the model name is unknown"
    )
    encodings_dir: str | None = Field(
        None,
        description="directory with <encoding>.tiktoken files (offline hosts); TIKTOKEN_CACHE_DIR also works",
    )
    facts: int = Field(12, ge=0, le=200, description="remembered facts offered per request at most")

    @model_validator(mode="after")
    def _reply_fits(self) -> ContextConfig:
        if self.reply_tokens >= self.budget_tokens:
            raise ValueError("reply_tokens must be smaller than budget_tokens")
        return self


class PlanConfig(_Strict):
    """Plan items and their claims."""

    claim_lease_seconds: int = Field(
        900, ge=10, description="a claimed item is reclaimable by another worker this long after its claim"
    )
    remind_after_turns: int = Field(
        0,
        ge=0,
        le=50,
        description="remind the model of open items after this many turns without a plan call; 0 = off",
    )


class RecoveryConfig(_Strict):
    """Retries of timed-out tool calls."""

    retry_budget: int = Field(
        6, ge=0, le=1000, description="retries one task may spend in all (stored with the task)"
    )
    attempts: int = Field(3, ge=1, le=10, description="tries of one tool call, the first included")
    call_limit_seconds: float = Field(
        60, gt=0, description="no retry of a call starts after this many seconds"
    )
    max_wait_seconds: float = Field(8, ge=0, description="longest back-off between tries")


class MemoryConfig(_Strict):
    """Which tool results may become remembered facts (documents never do)."""

    fact_tools: list[str] = Field(
        default_factory=lambda: ["query_ds_task_status", "ds_failed_tasks"],
        description="tools (names or globs) whose checked results may be remembered",
    )


class LongTaskConfig(_Strict):
    """Everything in longtask.yaml."""

    context: ContextConfig = Field(default_factory=ContextConfig)
    plan: PlanConfig = Field(default_factory=PlanConfig)
    recovery: RecoveryConfig = Field(default_factory=RecoveryConfig)
    memory: MemoryConfig = Field(default_factory=MemoryConfig)


def fact_tool_names(cfg: LongTaskConfig) -> list[tuple[Loc, list[str]]]:
    """The tool names in this file (each must name a tool)."""
    return [(("memory", "fact_tools"), cfg.memory.fact_tools)]


LONGTASK_SECTION = Section("longtask.yaml", "longtask", LongTaskConfig, tool_names=fact_tool_names)
