"""An action an MCP client asked for can be confirmed by its requester on /ui/pending/ID (the link the
client got), with the chat's rules; nobody else can, and a chat's own action keeps its chat-only yes."""

from __future__ import annotations

import json
from pathlib import Path

from tests.ui.conftest import MakeUiBot, csrf_of
from xihe.agent.mcp.server import McpGateway


def test_requester_confirms_an_mcp_action_on_its_page(ui_bot: MakeUiBot, tmp_path: Path) -> None:
    bot = ui_bot()
    gateway = McpGateway(bot.app)
    waiting = gateway.call("alice", "write_note", {"note": "from the IDE", "environment": "test"})
    action = waiting.structured_content["action_id"]  # type: ignore[index]
    assert waiting.structured_content["link"] == f"/ui/pending/{action}"  # type: ignore[index]

    bob = bot.login("bob")  # not his action: he does not see it, and the POST is refused
    assert bob.get(f"/ui/pending/{action}").status_code == 404
    page = bob.get("/ui/pending")
    assert f"/ui/pending/{action}/confirm" not in page.text
    refused = bob.post(
        f"/ui/pending/{action}/confirm", data={"csrf": csrf_of(page.text)}, follow_redirects=False
    )
    assert refused.status_code == 403
    assert not (tmp_path / "effects.jsonl").exists()

    alice = bot.login("alice")
    page = alice.get(f"/ui/pending/{action}")
    assert f'action="/ui/pending/{action}/confirm"' in page.text and "Asked by your MCP client" in page.text
    done = alice.post(
        f"/ui/pending/{action}/confirm", data={"csrf": csrf_of(page.text)}, follow_redirects=False
    )
    assert done.status_code == 303 and done.headers["location"] == f"/ui/pending/{action}"
    effects = [json.loads(line) for line in (tmp_path / "effects.jsonl").read_text().splitlines()]
    assert [e["user"] for e in effects] == ["alice"]
    status = gateway.call("alice", "xihe_action_status", {"action_id": action})
    assert status.structured_content["status"] == "executed"  # type: ignore[index]

    again = alice.post(
        f"/ui/pending/{action}/confirm", data={"csrf": csrf_of(page.text)}, follow_redirects=False
    )
    assert again.status_code == 303  # a second yes runs nothing
    assert len((tmp_path / "effects.jsonl").read_text().splitlines()) == 1


def test_a_chat_action_is_not_confirmed_on_the_web(ui_bot: MakeUiBot, tmp_path: Path) -> None:
    from xihe.integrations.fakes.llm_server import call, say

    bot = ui_bot([call("write_note", note="n", environment="test"), say("done")])
    reply = bot.ask("alice", "write the note n")
    action = int(reply.split("/confirm ")[1].split()[0].strip("`"))
    alice = bot.login("alice")
    page = alice.get(f"/ui/pending/{action}")
    assert f"/ui/pending/{action}/confirm" not in page.text
    refused = alice.post(
        f"/ui/pending/{action}/confirm", data={"csrf": csrf_of(page.text)}, follow_redirects=False
    )
    assert refused.status_code == 403
    assert not (tmp_path / "effects.jsonl").exists()


def test_a_calls_secret_arguments_are_not_stored_or_audited(ui_bot: MakeUiBot) -> None:
    bot = ui_bot()
    result = McpGateway(bot.app).call("alice", "echo", {"text": "hi", "api_token": "s3cr3t-value-91"})
    assert not result.is_error
    (task,) = bot.app.deps.tasks.recent(owner="alice", limit=5)
    assert "s3cr3t-value-91" not in task.goal and task.conversation == "mcp:alice"
    rows = bot.app.deps.audit.search(limit=50)
    assert rows and "s3cr3t-value-91" not in json.dumps(rows, default=str)


def test_wrong_tokens_lock_the_address_like_the_login_page(ui_bot: MakeUiBot) -> None:
    from starlette.testclient import TestClient

    from tests.ui.conftest import TOKENS

    bot = ui_bot(ui={"login_throttle": {"client_failures": 3, "lockout_minutes": 15}})
    http = TestClient(bot.server(), client=("203.0.113.7", 40000))
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    codes = [
        http.post("/mcp", json=body, headers={"Authorization": f"Bearer guess-{n}"}).status_code
        for n in range(4)
    ]
    assert codes == [401, 401, 401, 429]
    right = http.post("/mcp", json=body, headers={"Authorization": f"Bearer {TOKENS['alice']}"})
    assert right.status_code == 429 and int(right.headers["Retry-After"]) == 15 * 60  # even a right token
    rows = bot.app.deps.audit.search(limit=50)
    outcomes = [r["outcome"] for r in rows if r["kind"] == "mcp"]
    assert outcomes.count("unauthorized") == 3 and "locked_out" in outcomes
    assert "guess-" not in json.dumps(rows, default=str)
    other = TestClient(bot.server(), client=("198.51.100.8", 40000))  # another address is not locked
    assert other.post("/mcp", json=body, headers={"Authorization": "Bearer guess-x"}).status_code == 401


def test_a_refusal_and_a_failure_are_told_apart(ui_bot: MakeUiBot) -> None:
    bot = ui_bot()
    gateway = McpGateway(bot.app)
    failed = gateway.call("alice", "always_fail", {"reason": "disk full"})
    assert failed.is_error and failed.structured_content["status"] == "failed"  # type: ignore[index]
    assert "disk full" in failed.content[0].text  # type: ignore[union-attr]
    refused = gateway.call(
        "alice", "write_note", {"note": "n", "environment": "prod"}
    )  # developer: test only
    assert refused.is_error and refused.structured_content["status"] == "refused"  # type: ignore[index]
    assert "alice (developer) may use write_note but not on environment prod" in refused.content[0].text  # type: ignore[union-attr]
    invalid = gateway.call("alice", "echo", {})
    assert invalid.is_error and "text" in invalid.content[0].text  # type: ignore[union-attr]
    outcomes = [(r["outcome"], r["tool"]) for r in bot.app.deps.audit.search(limit=50) if r["kind"] == "mcp"]
    assert ("failed", "always_fail") in outcomes and ("refused", "write_note") in outcomes


def test_only_its_requester_confirms_an_mcp_action_in_chat(ui_bot: MakeUiBot, tmp_path: Path) -> None:
    bot = ui_bot()
    waiting = McpGateway(bot.app).call("alice", "write_note", {"note": "n", "environment": "test"})
    action = waiting.structured_content["action_id"]  # type: ignore[index]
    said = bot.ask("bob", f"/confirm {action}")  # another user, in his own chat
    assert not (tmp_path / "effects.jsonl").exists() and bot.app.deps.pending.get(action).status == "pending"  # type: ignore[union-attr]
    assert str(action) in said
    assert bot.ask("alice", "/confirm") != ""  # a bare /confirm in her chat does not pick the MCP action
    assert bot.app.deps.pending.get(action).status == "pending"  # type: ignore[union-attr]
    bot.ask("alice", f"/confirm {action}")  # alice, in her WeCom chat: runs
    assert bot.app.deps.pending.get(action).status == "executed"  # type: ignore[union-attr]
    assert len((tmp_path / "effects.jsonl").read_text().splitlines()) == 1
