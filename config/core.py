"""`config/xihe.yaml`: the model endpoint, loop bounds, store and tool list."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LLMConfig(_Strict):
    """An OpenAI-compatible chat-completions endpoint."""

    base_url: str = Field("", description="e.g. https://api.openai.com/v1; empty = no LLM, commands only")
    model: str = Field("gpt-4o-mini", description="model name sent to the endpoint")
    api_key_env: str = Field("XIHE_LLM_API_KEY", description="environment variable holding the API key")
    timeout_seconds: float = Field(60, gt=0, description="per request")
    max_attempts: int = Field(4, ge=1, le=10, description="tries per request on timeouts, 429 and 5xx")
    retry_budget_seconds: float = Field(120, gt=0, description="total time spent retrying one request")
    max_wait_seconds: float = Field(20, ge=0, description="longest single back-off wait")
    temperature: float | None = Field(None, description="omit to use the endpoint's default")
    profile: Literal["openai", "deepseek", "qwen", "vllm", "ollama", "auto"] = Field(
        "auto",
        description="the server family (reasoning fields, think tags, text tool calls, 'too long' errors); "
        "auto: by model name and by what the server sends",
    )
    context_tokens: int | None = Field(
        None,
        ge=1024,
        description="the model's context window (vLLM --max-model-len, Ollama num_ctx); "
        "unset: the profile's default",
    )
    reply_tokens: int = Field(2000, ge=100, description="of the window, kept free for the answer")

    @model_validator(mode="after")
    def _reply_fits(self) -> LLMConfig:
        if self.context_tokens is not None and self.reply_tokens * 2 > self.context_tokens:
            raise ValueError("reply_tokens must be at most half of context_tokens")
        return self


class LoopConfig(_Strict):
    """Bounds of one message's work."""

    max_turns: int = Field(8, ge=1, le=50, description="LLM calls per message")
    max_tool_calls: int = Field(12, ge=1, le=100, description="tool calls per message")
    max_arg_retries: int = Field(3, ge=0, le=10, description="invalid tool calls tolerated per message")
    result_cap_chars: int = Field(8000, ge=500, description="tool result characters the model sees")
    history_tasks: int = Field(6, ge=0, le=50, description="earlier exchanges of the conversation to include")
    max_args_bytes: int = Field(65536, ge=1024, description="tool arguments larger than this never execute")


class StoreConfig(_Strict):
    """Where state lives; XIHE_DATABASE_URL overrides `url`."""

    url: str = Field("sqlite:///var/xihe.db", description="SQLAlchemy URL (sqlite:/// or postgresql://)")
    lease_seconds: int = Field(120, ge=5, description="how long a replica holds a task or job row")


class ConfirmConfig(_Strict):
    """Confirmation of risky actions."""

    ttl_minutes: int = Field(15, ge=1, le=1440, description="a pending action expires after this")
    phrases: list[str] = Field(
        default_factory=lambda: ["确认执行"], description="plain words that mean /confirm"
    )


class CoreConfig(_Strict):
    """Everything in xihe.yaml."""

    llm: LLMConfig = Field(default_factory=LLMConfig)
    loop: LoopConfig = Field(default_factory=LoopConfig)
    store: StoreConfig = Field(default_factory=StoreConfig)
    confirm: ConfirmConfig = Field(default_factory=ConfirmConfig)
    tools: list[str] = Field(default_factory=lambda: ["*"], description="enabled tools (names or globs)")
    plugins: list[str] = Field(
        default_factory=list, description="extra tool specs, 'module:ATTR' import paths"
    )
    system_prompt: str = Field("", description="extra rules appended to the built-in system prompt")
    timezone: str = Field("Asia/Shanghai", description="timezone for dates shown to people")
    language: Literal["en", "zh"] = Field(
        "en",
        description="the language of replies in a conversation that has not shown one yet "
        "(an approver's bare `/approve 2`); a message in zh or en is answered in its own language",
    )
