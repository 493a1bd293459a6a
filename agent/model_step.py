"""The model's turn n as the step `llm:n`: replayed when it is done, else asked for real.

The whole answer (message and finish reason) is stored, so a resumed task never asks the model again
for a turn it already had. A model call has no side effect: one a crash interrupted is asked again.
A request the server refuses as too long (in any shape its profile knows) is compacted once
(`xihe.agent.request`, sized by the window the server reported) and retried; refused again, the
task stops (`ContextOverflow`) and says so plainly.
"""

from __future__ import annotations

import json
import time
from typing import Any

from xihe.agent.context import ContextTooLarge
from xihe.agent.cpushare import waiting
from xihe.agent.deps import Deps
from xihe.agent.errors import LLMError
from xihe.agent.frontier import INTERRUPTED
from xihe.agent.llm import Completion, LLMClient
from xihe.agent.registry import Registry
from xihe.agent.request import Requests
from xihe.agent.tasks import StepStatus
from xihe.agent.walk import Walk


class ContextOverflow(Exception):
    """The request does not fit the model even after compacting once."""


def too_long(exc: LLMError) -> bool:
    """The API refused the request for its length (in any shape the profile knows)."""
    return exc.too_long


class ModelSteps:
    """Takes the model's turns of a walk, each as one durable step."""

    def __init__(self, deps: Deps, registry: Registry, llm: LLMClient | None, requests: Requests) -> None:
        self.deps = deps
        self.registry = registry
        self.llm = llm
        self.requests = requests

    def _complete(self, messages: list[dict[str, Any]]) -> Completion:
        """One model request, its time and tokens counted (`xihe_model_seconds`, `xihe_model_tokens`)."""
        assert self.llm is not None
        metrics = self.deps.metrics
        started = time.monotonic()
        try:
            schemas = self.requests.schemas(messages)
            with waiting():  # seconds on the model server: other turns may run meanwhile
                completion = self.llm.complete(messages, schemas)
        finally:
            metrics.model_latency.observe(time.monotonic() - started)
        for kind in ("prompt_tokens", "completion_tokens"):
            if kind in completion.usage:
                metrics.model_tokens.labels(kind.removesuffix("_tokens")).observe(completion.usage[kind])
        return completion

    def take(self, run: Walk, turn: int, messages: list[dict[str, Any]]) -> dict[str, Any]:
        """Turn `turn`'s answer: the stored one, or the model's (stored before it is returned)."""
        key = f"llm:{turn}"
        prior = run.latest.get(key)
        if prior is not None and prior.status == StepStatus.DONE:
            return json.loads(prior.output_text or "{}")
        assert self.llm is not None, "a chat task needs a model"
        deps = self.deps
        now = deps.clock()
        if prior is not None and prior.status == StepStatus.RUNNING:  # a model call has no side effect: rerun
            deps.tasks.finish_step(prior, StepStatus.FAILED, now, error=INTERRUPTED)
        begun = deps.tasks.begin_step(run.task.id, key, self.llm.cfg.model, now)
        api_messages: list[dict[str, Any]] = []
        try:
            api_messages = self.requests.build(run.task, messages)
            completion = self._complete(api_messages)
        except (LLMError, ContextTooLarge) as exc:
            deps.tasks.finish_step(begun, StepStatus.FAILED, deps.clock(), error=str(exc))
            if not isinstance(exc, LLMError) or not too_long(exc):
                raise
            # Compact once (within a share of what was refused and the window the server reported:
            # fewer turns, older results as previews, the newest cut to fit), retry once.
            begun = deps.tasks.begin_step(run.task.id, key, self.llm.cfg.model, deps.clock())
            try:
                smaller = self.requests.build(run.task, messages, rejected=api_messages, sizes=exc.sizes)
                completion = self._complete(smaller)
            except (LLMError, ContextTooLarge) as again:
                deps.tasks.finish_step(begun, StepStatus.FAILED, deps.clock(), error=str(again))
                if isinstance(again, LLMError) and too_long(again):
                    window = again.sizes[0] or exc.sizes[0]
                    raise ContextOverflow(
                        "the model refused it as too long"
                        + (f" (its context window is {window} tokens)" if window else "")
                        + ", and again after compacting it to the rules, the tool list, your message and "
                        "what fitted of the latest results"
                    ) from None
                raise
        stored = json.dumps(
            {"message": completion.message, "finish_reason": completion.finish_reason}, ensure_ascii=False
        )
        deps.tasks.finish_step(begun, StepStatus.DONE, deps.clock(), output_text=stored)
        return {"message": completion.message, "finish_reason": completion.finish_reason}
