"""xihe as an MCP server: the SDK's own client against a real `xihe serve` (Streamable HTTP at /mcp).

Tools are listed with hints from their specs; a read answers at once; a write waits until its user
says `/confirm ID` in chat (here: WeCom's app callback, played by the fake); a user the gate refuses
gets the gate's reason; a request without a valid token gets 401; the audit shows every call (kind mcp).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import requests
import yaml
from sqlalchemy import create_engine, text

from tests.mcp import sdk_client as sdk
from tests.serve.harness import AGENT_ID, Replica, serve_config, wait_until
from xihe.integrations.wecom.fake import FakeWeCom

ALICE, CAROL = "alice-mcp-token-5b1e0c", "carol-mcp-token-93a7d2"


def _config(directory: Path, fake: FakeWeCom) -> Path:
    serve_config(directory, fake)
    ui = {
        "users": {
            "alice": {"token_env": "XIHE_UI_TOKEN_ALICE"},
            "carol": {"token_env": "XIHE_UI_TOKEN_CAROL"},
        }
    }
    (directory / "ui.yaml").write_text(yaml.safe_dump(ui))
    return directory


def _audit(db_url: str) -> list[dict]:
    engine = create_engine(db_url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT kind, actor, outcome, tool, detail FROM audit_event ORDER BY id"))
        out = [dict(r._mapping) for r in rows]
    engine.dispose()
    for row in out:
        if isinstance(row["detail"], str):
            row["detail"] = json.loads(row["detail"])
    return out


@pytest.fixture
def bot(tmp_path: Path, db_url: str, fake_wecom: FakeWeCom, start_replica: Callable[..., Replica]) -> Replica:
    env = {"XIHE_UI_TOKEN_ALICE": ALICE, "XIHE_UI_TOKEN_CAROL": CAROL}
    return start_replica(_config(tmp_path / "cfg", fake_wecom), db_url, env=env)


def test_sdk_client_lists_reads_and_a_write_waits_for_the_chat_confirm(
    bot: Replica, tmp_path: Path, db_url: str, fake_wecom: FakeWeCom
) -> None:
    url = bot.url + "/mcp"
    tools = {t.name: t for t in sdk.list_tools(url, ALICE)}
    assert {"echo", "write_note", "xihe_action_status"} <= set(tools)
    assert tools["echo"].annotations.read_only_hint is True
    assert tools["write_note"].annotations.read_only_hint is False
    assert tools["write_note"].annotations.destructive_hint is True
    assert tools["write_note"].input_schema["properties"]["note"]["type"] == "string"  # the registry's schema

    read = sdk.call(url, ALICE, "echo", text="hello over MCP")
    assert not read.is_error and "hello over MCP" in sdk.text_of(read)

    write = sdk.call(url, ALICE, "write_note", note="from my IDE", environment="test")
    assert not write.is_error
    said = sdk.text_of(write)
    data = write.structured_content
    assert data["status"] == "waiting_for_confirmation" and f"/ui/pending/{data['action_id']}" in data["link"]
    action = data["action_id"]
    assert f"/confirm {action}" in said and "write_note" in data["words"]
    assert not (tmp_path / "effects.jsonl").exists()  # the client's call ran nothing

    waiting = sdk.call(url, ALICE, "xihe_action_status", action_id=action)
    assert waiting.structured_content["status"] == "pending"
    # carol cannot see (or learn anything about) alice's action
    assert sdk.call(url, CAROL, "xihe_action_status", action_id=action).is_error

    # alice confirms in her WeCom chat: an MCP action can be confirmed from any of her chats
    sender = bot.app_sender()
    assert sender.post_app_text("alice", f"/confirm {action}", 1, AGENT_ID).status_code == 200
    done = wait_until(
        lambda: (
            (r := sdk.call(url, ALICE, "xihe_action_status", action_id=action)).structured_content["status"]
            == "executed"
            and r
        ),
        what="the confirmed write to run",
    )
    assert done.structured_content["result_ok"] is True
    effects = (tmp_path / "effects.jsonl").read_text().splitlines()
    assert len(effects) == 1 and json.loads(effects[0])["user"] == "alice"

    rows = [r for r in _audit(db_url) if r["kind"] == "mcp"]
    outcomes = [(r["actor"], r["outcome"], r["tool"]) for r in rows]
    assert ("alice", "done", "echo") in outcomes
    assert ("alice", "awaiting_confirmation", "write_note") in outcomes
    assert ("alice", "status", "xihe_action_status") in outcomes
    assert all(r["detail"]["channel"] == "mcp" for r in rows)
    confirm = [r for r in _audit(db_url) if r["kind"] == "confirm"]
    assert confirm[-1]["actor"] == "alice" and confirm[-1]["detail"]["asked_in"] == "mcp:alice"


def test_refused_user_gets_the_gates_reason_and_no_token_gets_401(bot: Replica, db_url: str) -> None:
    url = bot.url + "/mcp"
    listed = {t.name for t in sdk.list_tools(url, CAROL)}
    assert "echo" not in listed and "write_note" not in listed  # carol's roles grant neither
    refused = sdk.call(url, CAROL, "write_note", note="x", environment="test")
    assert refused.is_error
    assert "no role of carol (approver, viewer) grants the tool write_note" in sdk.text_of(refused)

    for headers in ({}, {"Authorization": "Bearer not-a-token"}, {"Authorization": f"Basic {ALICE}"}):
        got = requests.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers=headers)
        assert got.status_code == 401 and got.headers["WWW-Authenticate"].startswith("Bearer")

    rows = [r for r in _audit(db_url) if r["kind"] == "mcp"]
    assert ("carol", "refused", "write_note") in [(r["actor"], r["outcome"], r["tool"]) for r in rows]
    assert sum(r["outcome"] == "unauthorized" for r in rows) == 3
    assert ALICE not in json.dumps(rows) and "not-a-token" not in json.dumps(rows)
    assert ALICE not in bot.log() and CAROL not in bot.log()


def test_stdio_server_runs_as_the_user_of_its_token(tmp_path: Path, sqlite_url: str) -> None:
    """`xihe mcp serve` started by a client (here: xihe's own SDK client over stdio)."""
    import sys

    from tests.child_env import pythonpath
    from tests.conftest import write_config
    from xihe.integrations.mcp.client import Endpoint, McpClient, McpError

    cfg = write_config(tmp_path / "cfg")
    (cfg / "ui.yaml").write_text(yaml.safe_dump({"users": {"alice": {"token_env": "XIHE_UI_TOKEN_ALICE"}}}))
    env = {
        "XIHE_UI_TOKEN_ALICE": ALICE,
        "XIHE_MCP_TOKEN": ALICE,
        "XIHE_DATABASE_URL": sqlite_url,
        "PYTHONPATH": pythonpath(),
        "XIHE_TEST_EFFECTS": str(tmp_path / "effects.jsonl"),
    }
    command = (sys.executable, "-m", "xihe.agent.cli.main", "--config", str(cfg), "mcp", "serve")
    client = McpClient(Endpoint("xihe", "stdio", command, env=env, timeout=60))
    assert {"echo", "write_note", "xihe_action_status"} <= {t.name for t in client.list_tools()}
    assert '"echo": "hi"' in client.call_tool("echo", {"text": "hi"}).text
    waiting = client.call_tool("write_note", {"note": "n", "environment": "test"}).text
    assert waiting.startswith("Waiting for confirmation: action 1: write_note on test.")
    assert not (tmp_path / "effects.jsonl").exists()

    wrong = McpClient(Endpoint("xihe", "stdio", command, env={**env, "XIHE_MCP_TOKEN": "nope"}, timeout=60))
    with pytest.raises(McpError):
        wrong.list_tools()  # the process refuses to serve at all
    rows = _audit(sqlite_url)
    assert [r["outcome"] for r in rows if r["kind"] == "mcp"][-1] == "unauthorized"
