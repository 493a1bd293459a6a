"""A scripted OpenAI-compatible chat-completions server on loopback, as strict as the real ones.

The real `openai` client talks to it over HTTP. Each request consumes the next scripted step:
`say(text)`, `call(name, **args)`, `calls(...)` for several tool calls in one turn, `raw(name, text)`
for malformed arguments, `truncated(name, text)` for a cut-off response, `fail(status)` for HTTP
errors. A request past the end of the script is an error the test sees (`unexpected`), and
`assert_consumed()` catches steps that were never used.

`mode` plays one server family (`xihe.integrations.fakes.model_modes`: openai, deepseek, qwen, vllm,
ollama): every request is validated the way that family's API does and refused with its HTTP 400
(kept in `refused`, no step consumed); answers carry reasoning and tool calls where that family puts
them. With `window`, a longer prompt is refused in the family's "too long" shape (Ollama: truncated
silently, kept in `truncated`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from xihe.integrations.fakes.loopback import LoopbackServer, Request, Response
from xihe.integrations.fakes.model_modes import (
    MODES,
    Refused,
    answer,
    check_messages,
    check_tools,
    prompt_tokens,
    too_long,
    truncate,
)


@dataclass(frozen=True)
class Step:
    """One scripted answer."""

    content: str = ""
    tool_calls: tuple[tuple[str, str], ...] = ()  # (name, raw arguments)
    finish_reason: str = ""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    error_code: str = ""
    delay: float = 0.0  # seconds the server stalls before answering (a slow model, or time to kill a client)
    reasoning: str = ""  # the model's thinking, where the mode puts it (a default when empty)


def say(text: str) -> Step:
    """A plain reply."""
    return Step(content=text)


def call(name: str, **args: Any) -> Step:
    """One tool call with JSON arguments."""
    return Step(tool_calls=((name, json.dumps(args, ensure_ascii=False)),))


def slow(step: Step, seconds: float) -> Step:
    """The same answer, given only after `seconds`."""
    return replace(step, delay=seconds)


def calls(*items: tuple[str, dict[str, Any]]) -> Step:
    """Several tool calls in one assistant turn."""
    return Step(tool_calls=tuple((n, json.dumps(a, ensure_ascii=False)) for n, a in items))


def raw(name: str, arguments: str) -> Step:
    """A tool call whose arguments text is sent verbatim (malformed on purpose)."""
    return Step(tool_calls=((name, arguments),))


def truncated(name: str, arguments: str) -> Step:
    """A tool call cut off by the output limit (finish_reason=length)."""
    return Step(tool_calls=((name, arguments),), finish_reason="length")


def fail(status: int, *, retry_after: float | None = None, code: str = "") -> Step:
    """An HTTP error answer (429, 500, 503, 400 ...)."""
    headers = {"retry-after": str(retry_after)} if retry_after is not None else {}
    return Step(status=status, headers=headers, error_code=code)


class ScriptedLLM:
    """The server. `calls` keeps every request body (messages and tools) the client sent."""

    def __init__(
        self,
        script: list[Step] | None = None,
        *,
        model: str = "scripted",
        responder: Callable[[dict[str, Any]], Step] | None = None,
        mode: str = "openai",
        window: int | None = None,
        token_scale: float = 1.0,
    ) -> None:
        self.script = list(script or [])
        self.model = model
        self.mode = MODES[mode]
        self.window = window  # context tokens; None = no limit
        self.token_scale = token_scale  # the server's tokenizer against cl100k
        self.refused: list[dict[str, Any]] = []  # the 400 bodies sent for invalid or too long requests
        self.truncated: list[int] = []  # messages dropped silently per request (ollama)
        self.answers: list[dict[str, Any]] = []  # every assistant message sent, as the mode wrote it
        self.responder = (
            responder  # answers past the end of the script (`xihe fakes up`); tests leave it None
        )
        self.requests: list[dict[str, Any]] = []
        self.unexpected: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server = LoopbackServer(self._handle)
        self._n = 0

    @property
    def base_url(self) -> str:
        return self._server.url + "/v1"

    def add(self, *steps: Step) -> None:
        with self._lock:
            self.script.extend(steps)

    @property
    def messages(self) -> list[list[dict[str, Any]]]:
        """The `messages` list of every request, in order."""
        return [r.get("messages", []) for r in self.requests]

    def _handle(self, req: Request) -> Response:
        if not req.path.endswith("/chat/completions"):
            return Response.of_json({"error": {"message": f"no route {req.path}"}}, 404)
        body = req.json()
        with self._lock:
            self.requests.append(body)
            try:
                self._check(body)
            except Refused as exc:
                self.refused.append(exc.body)
                return Response.of_json(exc.body, 400)
            if not self.script and self.responder is not None:
                self.script.append(self.responder(body))
            if not self.script:
                self.unexpected.append(body)
                return Response.of_json(
                    {
                        "error": {
                            "message": "ScriptedLLM: unexpected extra call",
                            "type": "scripted_exhausted",
                        }
                    },
                    400,
                )
            step = self.script.pop(0)
            self._n += 1
            n = self._n
        if step.status != 200:
            return Response.of_json(
                {"error": {"message": f"scripted HTTP {step.status}", "code": step.error_code}},
                step.status,
                headers=step.headers,
            )
        message = answer(self.mode, step.content, step.tool_calls, step.reasoning, n)
        self.answers.append(message)
        native = bool(step.tool_calls) and self.mode.calls == "native"
        finish = step.finish_reason or ("tool_calls" if native else "stop")
        data: dict[str, Any] = {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion",
            "created": 0,
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        }
        if self.mode.usage:
            data["usage"] = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        return Response.of_json(data, delay=step.delay)

    def _check(self, body: dict[str, Any]) -> None:
        """Refuse what the real family refuses; over the window, refuse or (ollama) truncate."""
        check_tools(self.mode, body.get("tools"))
        check_messages(self.mode, body.get("messages"))
        if self.window is None:
            return
        tokens = prompt_tokens(body, self.token_scale)
        if tokens <= self.window:
            return
        if self.mode.overflow == "truncate":
            self.truncated.append(truncate(body, self.window, self.token_scale))
            return
        raise too_long(self.mode, self.window, tokens)

    def assert_consumed(self) -> None:
        """Every scripted step was used and no request came past the end."""
        assert not self.unexpected, f"{len(self.unexpected)} unexpected model call(s)"
        assert not self.refused, f"requests the real server would refuse: {self.refused}"
        assert not self.script, f"{len(self.script)} scripted step(s) never used"

    def start(self) -> ScriptedLLM:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()

    def __enter__(self) -> ScriptedLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
