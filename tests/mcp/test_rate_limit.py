"""MCP tool calls are limited per user (ui.yaml `mcp_calls_per_minute`, the chat channels' token bucket on
the injected clock): past the limit a call is not run, answers "try again in N s" and is audited as
`rate_limited`; another user and the status tool are not held back, and the bucket refills with time."""

from __future__ import annotations

from tests.ui.conftest import MakeUiBot
from xihe.agent.mcp.server import McpGateway


def test_a_user_over_the_limit_is_told_when_to_retry_and_it_is_audited(ui_bot: MakeUiBot) -> None:
    bot = ui_bot(ui={"mcp_calls_per_minute": 2})
    gateway = McpGateway(bot.app)
    args = {"note": "n", "environment": "test"}
    first = gateway.call("alice", "write_note", args)
    assert first.structured_content["status"] == "waiting_for_confirmation"  # type: ignore[index]
    gateway.call("alice", "write_note", args)

    third = gateway.call("alice", "write_note", args)
    assert third.is_error
    assert third.structured_content == {"status": "rate_limited", "retry_after_seconds": 30}
    text = third.content[0].text  # type: ignore[union-attr]
    assert "at most 2 tool calls a minute per user" in text and "try again in 30 s" in text
    waiting = bot.app.deps.audit.search(kind="mcp", outcome="awaiting_confirmation", actor="alice")
    assert len(waiting) == 2  # the third call made no pending action
    rows = bot.app.deps.audit.search(kind="mcp", outcome="rate_limited")
    assert [(r["actor"], r["tool"]) for r in rows] == [("alice", "write_note")]
    assert rows[0]["detail"]["retry_after_seconds"] == 30

    action = first.structured_content["action_id"]  # type: ignore[index]
    status = gateway.call("alice", "xihe_action_status", {"action_id": action})
    assert not status.is_error  # polling one's own action is not counted
    assert gateway.call("bob", "write_note", args).structured_content["status"] != "rate_limited"  # type: ignore[index]

    bot.clock.advance(seconds=30)  # one call's worth refilled
    again = gateway.call("alice", "write_note", args)
    assert again.structured_content["status"] == "waiting_for_confirmation"  # type: ignore[index]
    assert gateway.call("alice", "write_note", args).structured_content["status"] == "rate_limited"  # type: ignore[index]
