"""How one family of OpenAI-compatible servers differs, as data: one `Profile` per family.

`llm.profile` in xihe.yaml names one (`openai | deepseek | qwen | vllm | ollama`), or `auto`: the
family by model name, else a tolerant profile that reads what the server sends. The `LLMClient`
applies the profile at the edge (`xihe.agent.model_text` reads answers, `outgoing` shapes requests);
the loop never branches on a vendor. Each quirk below names where it is documented; a behaviour
known only from issue threads is marked "reported", i.e. likely, not guaranteed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Literal

PROFILES = ("openai", "deepseek", "qwen", "vllm", "ollama", "auto")
ProfileName = Literal["openai", "deepseek", "qwen", "vllm", "ollama", "auto"]
TextFormat = Literal["hermes", "json"]

# "This model's maximum context length is N tokens. However, you requested M tokens" — the text
# OpenAI, DeepSeek and vLLM share (chathub-dev/chathub#126, evalstate/fast-agent#621, vllm-project/vllm#20409).
_TOO_LONG_TEXT = re.compile(r"maximum context length|context length is \d+|prompt is too long", re.I)


_SIZES = re.compile(r"maximum context length is (\d+) tokens.*?However,[^\d]*(\d+)", re.I | re.S)


def reported_sizes(body: dict[str, Any]) -> tuple[int | None, int | None]:
    """(window, prompt) from "maximum context length is N tokens. However, you requested M tokens"
    (OpenAI writes "your messages resulted in M tokens"), else (None, None)."""
    inner = body.get("error")
    message = str((inner if isinstance(inner, dict) else body).get("message") or "")
    found = _SIZES.search(message)
    if found:
        return int(found.group(1)), int(found.group(2))
    window = re.search(r"maximum context length is (\d+)", message, re.I)
    return (int(window.group(1)) if window else None), None


@dataclass(frozen=True)
class Overflow:
    """One error shape that means "the prompt is longer than the context window"."""

    name: str
    code: str = ""  # the error's `code` (in `error` or at the top level)
    type: str = ""  # the error's `type`
    text: bool = True  # the message must read like "maximum context length is N"

    def matches(self, status: int | None, body: dict[str, Any]) -> bool:
        if status != 400:
            return False
        inner = body.get("error")
        err = inner if isinstance(inner, dict) else body
        code, kind, message = (str(err.get(k) or "") for k in ("code", "type", "message"))
        if self.code and code != self.code:
            return False
        if self.type and kind != self.type:
            return False
        return not self.text or bool(_TOO_LONG_TEXT.search(message))


# OpenAI: code context_length_exceeded, param messages (OpenAI API reference; chathub-dev/chathub#126)
OPENAI_TOO_LONG = Overflow("openai", code="context_length_exceeded", text=False)
# DeepSeek: the same message, code invalid_request_error (reported: evalstate/fast-agent#621)
DEEPSEEK_TOO_LONG = Overflow("deepseek", code="invalid_request_error")
# vLLM (--max-model-len): a top-level {"object":"error","type":"BadRequestError","code":400,...}
# (reported: ogx-ai/ogx#4534, vllm-project/vllm#20409)
VLLM_TOO_LONG = Overflow("vllm", type="BadRequestError")
# any gateway in front of these (LiteLLM, one-api) may re-wrap the error: the message text decides
ANY_TOO_LONG = Overflow("message")
ALL_TOO_LONG = (OPENAI_TOO_LONG, DEEPSEEK_TOO_LONG, VLLM_TOO_LONG, ANY_TOO_LONG)


@dataclass(frozen=True)
class Profile:
    """What one server family does differently."""

    name: str
    # message fields that carry reasoning apart from the answer: `reasoning_content` (DeepSeek API docs,
    # "Reasoning Model"; vLLM with --reasoning-parser, docs.vllm.ai "reasoning outputs"), `reasoning`
    # (newer vLLM and Ollama's OpenAI compatibility, some routers)
    reasoning_fields: tuple[str, ...] = ()
    # reasoning inline as <think>…</think> at the start of content: Qwen3 and R1 distills on vLLM
    # without --reasoning-parser (docs.vllm.ai, qwen3 reasoning parser), Ollama for some models
    # (reported: huggingface.co/allenai/SERA-8B discussion 2)
    think_tags: bool = False
    # echo `reasoning_content` of the assistant turns that made tool calls, within the current user
    # turn only (api-docs.deepseek.com/guides/thinking_mode, "tool calls": a missing one is a 400
    # "Missing `reasoning_content` field in the assistant message at message index N"; sent back for
    # an earlier user turn it must not be: DeepSeek API docs, "Reasoning Model (deepseek-reasoner)")
    echo_reasoning: bool = False
    # a tool call written as text in content (finish_reason "stop"): vLLM without
    # --enable-auto-tool-choice --tool-call-parser (docs.vllm.ai, tool calling), Ollama
    # (reported: ollama/ollama-vscode#20), llama.cpp (reported: ggml-org/llama.cpp#14697)
    text_tools: tuple[TextFormat, ...] = ()
    too_long: tuple[Overflow, ...] = ALL_TOO_LONG
    # Ollama does not refuse a long prompt: it truncates it to num_ctx silently (docs.ollama.com,
    # OpenAI compatibility and context length), so only our own budget keeps the goal in
    silent_truncation: bool = False
    window: int = 8192  # context tokens when llm.context_tokens is not set

    def is_too_long(self, status: int | None, body: dict[str, Any]) -> bool:
        """Whether an error answer means the prompt did not fit, in any shape this family sends."""
        return any(shape.matches(status, body) for shape in self.too_long)


OPENAI = Profile("openai", window=128000)  # gpt-4o / gpt-4.1 class windows (OpenAI model docs)
DEEPSEEK = Profile(
    "deepseek", reasoning_fields=("reasoning_content",), echo_reasoning=True, window=128000
)  # 128K: DeepSeek V3.2 (api-docs.deepseek.com, models & pricing)
QWEN = Profile(
    "qwen",
    reasoning_fields=("reasoning_content", "reasoning"),
    think_tags=True,
    text_tools=("hermes", "json"),  # Qwen's chat template writes <tool_call>{…}</tool_call> (Hermes style)
    window=32768,  # Qwen3's native context (its model card); vLLM's --max-model-len may be smaller
)
VLLM = Profile(
    "vllm",
    reasoning_fields=("reasoning_content", "reasoning"),
    think_tags=True,
    text_tools=("hermes", "json"),
    window=8192,  # --max-model-len varies per deployment: set llm.context_tokens
)
OLLAMA = Profile(
    "ollama",
    reasoning_fields=("reasoning",),
    think_tags=True,
    text_tools=("json", "hermes"),
    silent_truncation=True,
    window=4096,  # Ollama's default num_ctx (docs.ollama.com, context length)
)
# auto, for a model name it does not know: read reasoning and tool calls wherever the server puts
# them, echo reasoning_content only where the server itself sent it, recognise every "too long" shape
TOLERANT = Profile(
    "auto",
    reasoning_fields=("reasoning_content", "reasoning"),
    think_tags=True,
    echo_reasoning=True,
    text_tools=("hermes", "json"),
    window=32768,  # a guess: a smaller window is learned from the server's "maximum context length is N"
)
BY_NAME = {p.name: p for p in (OPENAI, DEEPSEEK, QWEN, VLLM, OLLAMA)}

# auto: which family a model name belongs to (first match wins). Ollama first: it serves Qwen and
# DeepSeek distills too, as name:tag (e.g. qwen3:8b), and truncates where they would refuse.
_FAMILIES = (
    (re.compile(r"^[\w.-]+:[\w.-]+$"), "ollama"),
    (re.compile(r"deepseek", re.I), "deepseek"),
    (re.compile(r"qwen|qwq", re.I), "qwen"),
    (re.compile(r"^(gpt-|o\d|chatgpt)", re.I), "openai"),
)


def resolve(name: str, model: str, base_url: str = "") -> Profile:
    """The profile configured as `name` (`auto`: Ollama's port, the model name, else tolerant)."""
    if name != "auto":
        return BY_NAME[name]
    if ":11434" in base_url:  # Ollama's default port
        return replace(OLLAMA, name="auto:ollama")
    for pattern, family in _FAMILIES:
        if pattern.search(model):
            return replace(BY_NAME[family], name=f"auto:{family}")
    return TOLERANT


def outgoing(profile: Profile, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages as this family must receive them: `reasoning_content` kept only on the assistant
    tool-call turns after the last user message when the family needs it echoed, dropped elsewhere."""
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    out = []
    for i, m in enumerate(messages):
        if "reasoning_content" not in m:
            out.append(m)
            continue
        keep = profile.echo_reasoning and i > last_user and bool(m.get("tool_calls"))
        out.append(m if keep else {k: v for k, v in m.items() if k != "reasoning_content"})
    return out
