"""xihe as an MCP client of the loopback fake server (integrations/mcp/fake.py, built with the SDK).

Only the tools mcp.yaml lists and allows join the registry, with the risk mcp.yaml gives (the server's
annotations are never trusted); a write waits for /confirm; an oversize result becomes an artifact; a
malformed schema is refused with its reason; a server that is down at start, too slow, or goes away
mid-call is reported and the bot keeps serving.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.conftest import write_config
from xihe.agent.app import App, build_app
from xihe.agent.cli.main import main
from xihe.agent.clock import FakeClock
from xihe.agent.inbound import Inbound
from xihe.agent.mcp.feature import McpState
from xihe.agent.tasks import StepStatus
from xihe.integrations.fakes.llm_server import ScriptedLLM, call, say
from xihe.integrations.mcp.fake import FakeMcpServer

TOKEN = "fake-mcp-bearer-7c2f9e"


@pytest.fixture
def fake() -> Iterator[FakeMcpServer]:
    with FakeMcpServer(token=TOKEN) as server:
        yield server


def _mcp_yaml(fake: FakeMcpServer, dead_url: str, sluggish_url: str) -> dict:
    ops_tools = [
        {"name": "get_metric", "allowed": True, "risk": "read"},
        {"name": "restart_service", "allowed": True, "risk": "write"},
        {"name": "dump_logs", "allowed": True, "risk": "read"},
        {"name": "broken_schema", "allowed": True, "risk": "read"},
        {"name": "drop_tables", "allowed": True, "risk": "write"},  # the server claims readOnlyHint
    ]  # slow_query is not listed here: refused
    return {
        "servers": [
            {"name": "ops", "transport": "http", "url": fake.url, "token_env": "XIHE_MCP_OPS_TOKEN",
             "timeout_seconds": 20, "tools": ops_tools},
            {"name": "slow", "transport": "http", "url": fake.url, "token_env": "XIHE_MCP_OPS_TOKEN",
             "timeout_seconds": 1, "tools": [{"name": "slow_query", "allowed": True, "risk": "read"}]},
            {"name": "lag", "transport": "http", "url": fake.url, "token_env": "XIHE_MCP_OPS_TOKEN",
             "timeout_seconds": 20, "tools": [{"name": "slow_query", "allowed": True, "risk": "read"}]},
            {"name": "gone", "transport": "http", "url": dead_url, "timeout_seconds": 5,
             "tools": [{"name": "anything", "allowed": True, "risk": "read"}]},
            {"name": "sluggish", "transport": "http", "url": sluggish_url, "list_timeout_seconds": 1,
             "tools": [{"name": "get_metric", "allowed": True, "risk": "read"}]},
        ]
    }  # fmt: skip


@pytest.fixture
def sluggish() -> Iterator[FakeMcpServer]:
    with FakeMcpServer(slow_list=True) as server:
        yield server
        server.release_slow()


@pytest.fixture
def config(
    tmp_path: Path,
    llm: ScriptedLLM,
    fake: FakeMcpServer,
    sluggish: FakeMcpServer,
    monkeypatch: pytest.MonkeyPatch,
) -> Path:
    monkeypatch.setenv("XIHE_MCP_OPS_TOKEN", TOKEN)
    with FakeMcpServer() as closed:  # a port that answered once and is gone now
        dead = closed.url
    cfg = write_config(tmp_path / "cfg", llm_url=llm.base_url)
    (cfg / "mcp.yaml").write_text(yaml.safe_dump(_mcp_yaml(fake, dead, sluggish.url)))
    return cfg


@pytest.fixture
def app(config: Path, clock: FakeClock, sqlite_url: str) -> App:
    built = build_app(config, clock=clock, database_url=sqlite_url)
    state = built.states["mcp"]
    assert isinstance(state, McpState) and state.listed.wait(30)  # every listing has arrived (or failed)
    return built


def ask(app: App, text: str, user: str = "alice") -> str:
    return app.session.handle(Inbound(user, "c1", text))


def test_only_listed_tools_join_with_the_yamls_risk_and_the_rest_is_reported(
    app: App, llm: ScriptedLLM, fake: FakeMcpServer, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mcp_tools = {n for n in app.registry.names() if n.startswith("mcp_")}
    assert mcp_tools == {
        "mcp_gone_anything",  # down: stand-ins that answer "unavailable"
        "mcp_sluggish_get_metric",
        "mcp_ops_get_metric",
        "mcp_ops_restart_service",
        "mcp_ops_dump_logs",
        "mcp_ops_drop_tables",
        "mcp_slow_slow_query",
        "mcp_lag_slow_query",
    }
    specs = app.registry.specs
    assert specs["mcp_ops_drop_tables"].risk == "write"  # readOnlyHint from the server changes nothing
    assert specs["mcp_ops_get_metric"].risk == "read" and specs["mcp_ops_restart_service"].risk == "write"
    schema = app.registry.schemas(["mcp_ops_restart_service"])[0]["function"]["parameters"]
    assert schema["properties"]["service"] == {"type": "string", "maxLength": 64}  # the server's own schema

    state = app.states["mcp"]
    assert isinstance(state, McpState)
    decided = {(v.server, v.tool): v.decision for v in state.verdicts}
    assert decided[("ops", "slow_query")] == "refused: not listed in mcp.yaml"
    assert decided[("ops", "broken_schema")].startswith(
        "refused: input schema is not valid JSON Schema at properties/when/type"
    )
    assert "gone" in state.down and "unreachable" in state.down["gone"]  # down at start: reported, not fatal
    assert "mcp gone" in app.installed.warnings and "mcp ops" not in app.installed.warnings
    assert "mcp_gone_anything" in app.registry  # a stand-in that says why
    llm.add(call("mcp_gone_anything"), say("It is down."))
    assert ask(app, "anything?") == "It is down."
    step = app.deps.tasks.latest(1)["tool:1:0"]
    assert step.status == StepStatus.FAILED
    assert "MCP server gone is unavailable: MCP server gone is unreachable" in (step.error or "")
    assert (
        state.down["sluggish"] == "MCP server sluggish: no answer within 1 s (listing tools)"
    )  # slow at start

    assert main(["--config", str(config), "mcp", "list"]) == 1  # two servers are unavailable
    out = capsys.readouterr().out
    assert "xihe's MCP server: off (no ui.yaml user has a token)" in out
    assert "broken_schema            refused: input schema is not valid JSON Schema" in out
    assert "drop_tables              allowed: write  [server says: read_only_hint=True]" in out
    assert "registry name mcp_ops_get_metric" in out
    assert "gone (http" in out and "unavailable: MCP server gone is unreachable" in out
    assert TOKEN not in out


def test_a_read_runs_and_a_write_needs_confirm(app: App, llm: ScriptedLLM, fake: FakeMcpServer) -> None:
    llm.add(call("mcp_ops_get_metric", metric="cpu"), say("cpu is 42."))
    assert ask(app, "what is the cpu metric?") == "cpu is 42."
    assert fake.calls == [("get_metric", {"metric": "cpu"})]

    llm.add(call("mcp_ops_restart_service", service="api"), say("Restarted api."))
    prompt = ask(app, "restart the api service")
    assert "/confirm" in prompt and "mcp_ops_restart_service" in prompt
    assert [c for c in fake.calls if c[0] == "restart_service"] == []  # nothing ran before the yes
    assert ask(app, "/confirm") == "Restarted api."
    assert fake.calls[-1] == ("restart_service", {"service": "api"})
    llm.assert_consumed()


def test_bad_arguments_never_reach_the_server(app: App, llm: ScriptedLLM, fake: FakeMcpServer) -> None:
    llm.add(call("mcp_ops_get_metric", series="cpu"), say("I could not ask."))
    assert ask(app, "cpu?") == "I could not ask."
    assert fake.calls == []
    step = app.deps.tasks.latest(1)["tool:1:0"]
    assert step.status == StepStatus.FAILED and "'metric' is a required property" in (step.error or "")


def test_an_oversize_result_is_capped_and_stored_as_an_artifact(
    app: App, llm: ScriptedLLM, fake: FakeMcpServer
) -> None:
    llm.add(call("mcp_ops_dump_logs"), say("The logs are long."))
    assert ask(app, "show me all the logs") == "The logs are long."
    step = app.deps.tasks.latest(1)["tool:1:0"]
    assert step.status == StepStatus.DONE and step.output_ref
    stored = app.deps.artifacts.get(step.output_ref)
    assert stored is not None and len(stored[1]) == fake.big_chars
    sent = llm.requests[-1]["messages"][-1]["content"]  # what the model got back: capped, with the pointer
    cap = app.settings.core.loop.result_cap_chars
    assert len(sent) < cap + 400 and f"the full output is artifact {step.output_ref}" in sent


def test_a_slow_server_times_out_and_one_going_away_mid_call_is_a_clear_error(
    app: App, llm: ScriptedLLM, fake: FakeMcpServer
) -> None:
    llm.add(call("mcp_slow_slow_query", sql="select 1"), say("It was too slow."))
    assert ask(app, "run the slow query") == "It was too slow."
    step = app.deps.tasks.latest(1)["tool:1:0"]
    assert step.status == StepStatus.FAILED
    assert "MCP server slow: no answer within 1 s" in (step.error or "")
    fake.release_slow()

    # the server goes away while a call is in flight
    fake.slow_started.clear()
    fake._slow_release.clear()
    llm.add(call("mcp_lag_slow_query", sql="select 2"), say("The server went away."))
    replies: list[str] = []
    worker = threading.Thread(target=lambda: replies.append(ask(app, "again please")))
    worker.start()
    assert fake.slow_started.wait(20)
    fake.stop()
    worker.join(30)
    assert replies == ["The server went away."]
    step = app.deps.tasks.latest(2)["tool:1:0"]
    assert step.status == StepStatus.FAILED
    assert "MCP server lag failed or went away during the call (HTTP 500, calling slow_query)" in (
        step.error or ""
    ), step.error
    assert TOKEN not in (step.error or "")

    llm.add(say("Still here."))  # the bot keeps serving
    assert ask(app, "are you there?") == "Still here."
    llm.assert_consumed()


def test_wrong_credentials_are_named_without_the_token(fake: FakeMcpServer) -> None:
    from xihe.integrations.mcp.client import Endpoint, McpClient, McpProtocolError

    with pytest.raises(McpProtocolError) as refused:
        McpClient(Endpoint("ops", "http", url=fake.url, token="not-the-token", timeout=10)).list_tools()
    assert str(refused.value) == (
        "MCP server ops refused our credentials (HTTP 401, listing tools): check its token_env"
    )
