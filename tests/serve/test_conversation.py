"""Full conversations through a real `xihe serve` process, driven over HTTP as WeCom would.

The scripted LLM and the WeCom fake run in the test process; the bot runs in its own process with
`tests.support.tools` loaded through `plugins:`. Replies are read back from the fake's message/send.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from tests.serve.harness import AGENT_ID, SECRET, TOKEN, Replica, serve_config, wait_until
from xihe.integrations.fakes.llm_server import ScriptedLLM, call, say
from xihe.integrations.wecom.fake import FakeWeCom


def _replies(fake: FakeWeCom, user: str, n: int) -> list[str]:
    return wait_until(
        lambda: len(fake.contents(user)) >= n and fake.contents(user), what=f"{n} replies to {user}"
    )


def test_ask_confirm_result_with_progress_health_and_metrics(
    tmp_path: Path,
    db_url: str,
    llm: ScriptedLLM,
    fake_wecom: FakeWeCom,
    start_replica: Callable[..., Replica],
) -> None:
    llm.add(call("write_note", note="deploy window moved", environment="test"), say("Note written."))
    cfg = serve_config(tmp_path / "cfg", fake_wecom, llm_url=llm.base_url)
    bot = start_replica(cfg, db_url)
    sender = bot.app_sender()

    t0 = time.perf_counter()
    resp = sender.post_app_text("alice", "note that the deploy window moved", 1, AGENT_ID)
    ack = time.perf_counter() - t0
    assert resp.status_code == 200 and resp.content == b""
    assert ack < 5  # acknowledged at once; the work continues in the background
    (prompt,) = _replies(fake_wecom, "alice", 1)
    assert "/confirm" in prompt and "write_note" in prompt
    assert not (tmp_path / "effects.jsonl").exists()  # nothing ran before the yes

    assert sender.post_app_text("alice", "/confirm", 2, AGENT_ID).status_code == 200
    msgs = _replies(fake_wecom, "alice", 3)
    assert msgs[1].startswith("⏳ task 1: running `write_note`")  # progress
    assert msgs[2] == "Note written."
    effects = (tmp_path / "effects.jsonl").read_text().splitlines()
    assert len(effects) == 1 and json.loads(effects[0])["user"] == "alice"
    llm.assert_consumed()

    assert bot.http.get(bot.url + "/healthz").text == "ok"
    ready = bot.http.get(bot.url + "/readyz")
    assert ready.status_code == 200 and ready.json()["ready"] is True
    assert bot.metric("xihe_messages_total", channel="wecom_app", kind="chat") == 1
    assert bot.metric("xihe_messages_total", channel="wecom_app", kind="command") == 1
    assert bot.metric("xihe_messages_total", channel="wecom_app", kind="sent") >= 1
    assert bot.metric("xihe_message_seconds_count", channel="wecom_app") == 2
    assert bot.metric("xihe_tool_calls_total", tool="write_note", outcome="done") in (0, 1)
    assert bot.terminate() in (0, -15)  # uvicorn re-raises SIGTERM after a clean shutdown
    log = bot.log()
    assert "Application shutdown complete" in log
    handled = [json.loads(line) for line in log.splitlines() if '"wecom message handled"' in line]
    assert [h["task_id"] for h in handled] == [1, 1]  # structured logs carry the task id
    assert SECRET not in log and TOKEN not in log


def test_unknown_user_gets_only_what_unknown_users_may_do(
    tmp_path: Path,
    db_url: str,
    llm: ScriptedLLM,
    fake_wecom: FakeWeCom,
    start_replica: Callable[..., Replica],
) -> None:
    llm.add(call("write_note", note="x", environment="test"), say("I may not write notes for you."))
    bot = start_replica(serve_config(tmp_path / "cfg", fake_wecom, llm_url=llm.base_url), db_url)
    sender = bot.app_sender()
    assert sender.post_app_text("mallory", "write a note x", 1, AGENT_ID).status_code == 200
    (reply,) = _replies(fake_wecom, "mallory", 1)
    assert reply == "I may not write notes for you."
    denied = llm.messages[-1][-1]["content"]
    assert "DENIED" in denied and "mallory" in denied
    assert not (tmp_path / "effects.jsonl").exists()
    sender.post_app_text("mallory", "/help", 2, AGENT_ID)
    assert "You may not use any tools." in _replies(fake_wecom, "mallory", 2)[1]


def test_aibot_group_message_streams_the_answer(
    tmp_path: Path,
    db_url: str,
    llm: ScriptedLLM,
    fake_wecom: FakeWeCom,
    start_replica: Callable[..., Replica],
) -> None:
    llm.add(call("echo", text="pong"), say("echo says pong"))
    bot = start_replica(serve_config(tmp_path / "cfg", fake_wecom, llm_url=llm.base_url), db_url)
    sender = bot.bot_sender()
    resp, nonce = sender.post_aibot(
        sender.aibot_text(
            "alice", "@xihe echo pong", "m-1", chatid="ops", response_url=fake_wecom.new_response_url()
        )
    )
    first = sender.open_reply(resp.json(), nonce)["stream"]
    assert first["finish"] is False and first["content"] == "收到"

    def refreshed() -> dict | None:
        r, n = sender.post_aibot(sender.aibot_refresh(first["id"], f"r-{time.monotonic_ns()}", "alice"))
        frame = sender.open_reply(r.json(), n)["stream"]
        return frame if frame["finish"] else None

    frame = wait_until(refreshed, what="the stream to finish")
    assert frame == {"id": first["id"], "finish": True, "content": "echo says pong"}
    # WeCom delivers the same msgid again: same stream, no second run
    resp, nonce = sender.post_aibot(sender.aibot_text("alice", "@xihe echo pong", "m-1", chatid="ops"))
    assert sender.open_reply(resp.json(), nonce)["stream"] == frame
    llm.assert_consumed()
