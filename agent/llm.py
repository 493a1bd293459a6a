"""The model endpoint: the `openai` client against any OpenAI-compatible server.

What differs between server families is the configured `Profile` (`xihe.agent.profiles`), applied
here and nowhere else: requests leave through `outgoing` (reasoning echoed or dropped), answers come
back through `read_answer` (reasoning out of the content, tool calls written as text), and an error
in any "prompt too long" shape of the family is an `LLMError` with `too_long`.

Timeouts, 429 and 5xx are retried with tenacity inside a budget (attempts and seconds), honouring
Retry-After; anything else is an `LLMError` right away. Under pytest the guard refuses any
endpoint that is not on loopback, so no test can reach a real model.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from xihe.agent.errors import LLMError
from xihe.agent.model_text import read_answer
from xihe.agent.profiles import Profile, outgoing, reported_sizes, resolve
from xihe.agent.redact import excerpt
from xihe.config.core import LLMConfig

if TYPE_CHECKING:  # the client (and tenacity) are imported on the first request: `import openai` was 44%
    import openai  # of chat start-up
    from tenacity import RetryCallState

GUARD_ENV = "XIHE_FORBID_REMOTE_LLM"
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True)
class Completion:
    """One assistant turn: the message as plain data and why generation stopped."""

    message: dict[str, Any]
    finish_reason: str
    usage: dict[str, int]


def _openai() -> Any:
    """The `openai` package, imported when the first request is made."""
    import openai

    return openai


def _retryable(exc: BaseException) -> bool:
    openai = _openai()
    if isinstance(exc, openai.APITimeoutError | openai.APIConnectionError | openai.RateLimitError):
        return True
    return isinstance(exc, openai.APIStatusError) and exc.status_code >= 500


def _completion_type() -> Any:
    """`openai.types.chat.ChatCompletion`, what `chat.completions.create` parses an answer into."""
    from openai.types.chat import ChatCompletion

    return ChatCompletion


def _retry_after(exc: BaseException | None) -> float | None:
    response = getattr(exc, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


class LLMClient:
    """Chat completions with bounded retries; `complete()` returns a Completion or raises LLMError."""

    def __init__(
        self, cfg: LLMConfig, api_key: str | None, *, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        host = urlsplit(cfg.base_url).hostname or ""
        if os.environ.get(GUARD_ENV) and host not in _LOOPBACK:
            raise LLMError(f"model requests to {host or cfg.base_url!r} are forbidden under tests")
        self.cfg = cfg
        self.profile: Profile = resolve(cfg.profile, cfg.model, cfg.base_url)
        self._sleep = sleep
        self._key = api_key or ""
        self._client: openai.OpenAI | None = None
        self._making = threading.Lock()  # one client (and HTTP pool) for every thread of the replica
        self.calls = 0  # HTTP attempts, for metrics and tests

    def _api(self) -> openai.OpenAI:
        """The one client, made on first use: without the lock, every worker that came first at once
        made its own (an HTTP pool and a TLS context each, ~30 ms of CPU apiece), and all but one
        were thrown away."""
        client = self._client
        if client is None:
            with self._making:
                client = self._client
                if client is None:
                    cfg = self.cfg
                    client = self._client = _openai().OpenAI(
                        base_url=cfg.base_url,
                        api_key=self._key or "not-set",
                        timeout=cfg.timeout_seconds,
                        max_retries=0,
                    )
        return client

    def warm(self) -> None:
        """Import `openai` and make the client now (a replica calls this at start-up, in the background):
        else the first turns of a burst pay for it (~1 s of CPU while the import lock is held), and the
        commands beside them wait. Nothing is sent to the endpoint."""
        self._api()

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        hinted = _retry_after(exc)
        backoff = min(self.cfg.max_wait_seconds, 0.5 * 2 ** (state.attempt_number - 1))
        return min(self.cfg.max_wait_seconds, hinted) if hinted is not None else backoff

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion:
        """One completion, retried within the configured budget."""
        kwargs: dict[str, Any] = {"model": self.cfg.model, "messages": outgoing(self.profile, messages)}
        if tools:
            kwargs["tools"] = tools
        if self.cfg.temperature is not None:
            kwargs["temperature"] = self.cfg.temperature
        from tenacity import (  # by the first turn
            Retrying,
            retry_if_exception,
            stop_after_attempt,
            stop_after_delay,
        )

        retrying = Retrying(
            retry=retry_if_exception(_retryable),
            stop=stop_after_attempt(self.cfg.max_attempts) | stop_after_delay(self.cfg.retry_budget_seconds),
            wait=self._wait,
            sleep=self._sleep,
            reraise=True,
        )
        client, openai = self._api(), _openai()
        try:
            for attempt in retrying:
                with attempt:
                    self.calls += 1
                    # `chat.completions.create` less its `maybe_transform` pass over the body (a fifth of
                    # a turn's CPU: a walk through the typed-dict annotations of every message and tool
                    # schema), which changes nothing in our plain JSON: the same POST, retries and errors
                    resp = client.post("/chat/completions", body=kwargs, cast_to=_completion_type())
        except openai.APIStatusError as exc:
            body = _error_body(exc)
            code = excerpt(str(body.get("code") or ""), self._key, limit=80)
            said = (
                excerpt(str(body.get("message") or ""), self._key, limit=200)
                if exc.status_code == 400
                else ""
            )
            raise LLMError(
                f"the model endpoint answered HTTP {exc.status_code}{f' ({code})' if code else ''}"
                + (f": {said}" if said else ""),
                status=exc.status_code,
                retryable=_retryable(exc),
                too_long=(too_long := self.profile.is_too_long(exc.status_code, body)),
                sizes=reported_sizes(body) if too_long else (None, None),
            ) from None
        except openai.APITimeoutError:
            raise LLMError(
                f"the model endpoint timed out after {self.cfg.timeout_seconds:g}s", retryable=True
            ) from None
        except openai.APIConnectionError:
            raise LLMError("the model endpoint could not be reached", retryable=True) from None
        choice = resp.choices[0]
        raw = choice.message.model_dump(exclude_none=False)  # extra fields (reasoning) included
        message, finish = read_answer(self.profile, raw, choice.finish_reason or "stop")
        usage = (
            {"prompt_tokens": resp.usage.prompt_tokens, "completion_tokens": resp.usage.completion_tokens}
            if resp.usage
            else {}  # Ollama (some versions) and some proxies send none (docs.ollama.com)
        )
        return Completion(message, finish, usage)


def _error_body(exc: openai.APIStatusError) -> dict[str, Any]:
    """The error object: OpenAI's `error` (the client already unwrapped it) or vLLM's top level."""
    body = exc.body if isinstance(exc.body, dict) else {}
    inner = body.get("error")
    return inner if isinstance(inner, dict) else body
