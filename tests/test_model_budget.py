"""Requests kept under the model's window, and a "too long" answer in any family's shape recovered from.

Through the real loop and the real `openai` client against the strict fake: the fake counts the prompt
with cl100k (times `token_scale`, a server tokenizer that counts more than ours), refuses it over
`window` in its family's shape, or (Ollama) truncates it silently.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import MakeApp
from xihe.agent.app import App
from xihe.agent.inbound import Inbound
from xihe.integrations.fakes.llm_server import ScriptedLLM, call, say

PROFILES = ["openai", "deepseek", "qwen", "vllm", "ollama"]
REFUSING = ["openai", "deepseek", "qwen", "vllm"]
GOAL = "produce the long output and tell me its last line"


@pytest.fixture
def profile() -> str:
    return "openai"


@pytest.fixture
def window() -> int:
    return 4096


@pytest.fixture
def scale() -> float:
    return 1.0


@pytest.fixture
def llm(profile: str, window: int, scale: float) -> Iterator[ScriptedLLM]:
    with ScriptedLLM(mode=profile, window=window, token_scale=scale) as server:
        yield server


def ask(app: App, text: str, conv: str = "c1") -> str:
    return app.session.handle(Inbound("alice", conv, text))


def bot(make_app: MakeApp, profile: str, **llm: object) -> App:
    return make_app(overrides={"llm": {"profile": profile, **llm}, "loop": {"result_cap_chars": 12000}})


def result_kept(request: list[dict]) -> bool:
    """The call and its result both in the request, in order, the result not emptied."""
    i = next(i for i, m in enumerate(request) if m.get("tool_calls"))
    return request[i + 1]["role"] == "tool" and request[i + 1]["content"].startswith(
        "[Tool Result: big_output]"
    )


@pytest.mark.parametrize("profile", PROFILES)
def test_a_result_too_long_for_the_window_is_cut_to_fit_not_dropped(
    make_app: MakeApp, llm: ScriptedLLM, profile: str
) -> None:
    app = bot(make_app, profile, context_tokens=4096, reply_tokens=500)
    llm.add(call("big_output", size=30000), say("The last line is line 001071."))
    assert ask(app, GOAL) == "The last line is line 001071."
    assert llm.refused == [] and not any(llm.truncated)  # never over the window
    answered_from = llm.messages[-1]
    assert answered_from[1]["content"] == GOAL and result_kept(answered_from)
    assert "artifact" in answered_from[-1]["content"]  # where the rest of the result is
    llm.assert_consumed()


@pytest.mark.parametrize("profile", REFUSING)
@pytest.mark.parametrize("scale", [1.6])
def test_too_long_in_each_familys_shape_is_shrunk_and_sent_again(
    make_app: MakeApp, llm: ScriptedLLM, profile: str
) -> None:
    """The server counts more than we do: its refusal, in its own shape, is recognised; the request
    is compacted (call and result kept together) and sent once more."""
    app = bot(make_app, profile, context_tokens=4096, reply_tokens=500)
    llm.add(call("big_output", size=30000), say("The last line is line 001071."))
    assert ask(app, GOAL) == "The last line is line 001071."
    assert len(llm.refused) == 1 and "maximum context length is 4096" in str(llm.refused[0])
    assert result_kept(llm.messages[-1]) and llm.messages[-1][1]["content"] == GOAL
    assert app.deps.tasks.get(1).status == "done"
    llm.refused.clear()
    llm.assert_consumed()


@pytest.mark.parametrize("profile", REFUSING)
def test_a_window_the_config_does_not_know_is_learned_from_the_refusal(
    make_app: MakeApp, llm: ScriptedLLM, profile: str
) -> None:
    """context_tokens unset: the profile's default window is larger than this server's; the number
    in its "maximum context length is N" sizes the second try."""
    app = bot(make_app, profile)
    llm.add(call("big_output", size=30000), say("The last line is line 001071."))
    assert ask(app, GOAL) == "The last line is line 001071."
    assert len(llm.refused) == 1 and result_kept(llm.messages[-1])
    llm.refused.clear()
    llm.assert_consumed()


@pytest.mark.parametrize(("profile", "window"), [(p, 1500) for p in REFUSING])
def test_what_never_fits_is_said_plainly(make_app: MakeApp, llm: ScriptedLLM, profile: str) -> None:
    app = bot(make_app, profile)
    reply = ask(app, "x" * 9000)
    assert "does not fit the model's context" in reply and "1500" in reply
    assert "HTTP 400" not in reply and app.deps.tasks.get(1).status == "failed"
    assert len(llm.refused) == 2  # the first try and the one after compacting: no more
    llm.refused.clear()


@pytest.mark.parametrize("profile", ["ollama"])
def test_ollama_never_has_to_truncate_because_the_request_already_fits(
    make_app: MakeApp, llm: ScriptedLLM
) -> None:
    """Ollama cuts an overlong prompt silently (the goal first); xihe keeps under num_ctx itself."""
    app = bot(make_app, "ollama")  # the profile's default window is Ollama's default num_ctx, 4096
    for n in range(4):
        llm.add(call("big_output", size=9000 + n), say(f"answer {n}"))
        assert ask(app, f"{GOAL} #{n}") == f"answer {n}"
    assert llm.truncated == []
    llm.assert_consumed()
