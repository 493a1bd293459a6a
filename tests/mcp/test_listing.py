"""Listing the mcp.yaml servers never delays building the bot, and a config reload lists again.

The listing runs in the background: until a server's listing arrives, each tool mcp.yaml allows is a
stand-in that answers "not listed yet"; then the server's real tool replaces it. A reload takes servers
added, changed or removed in mcp.yaml into account without a restart.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.conftest import write_config
from xihe.agent.app import App, build_app
from xihe.agent.clock import FakeClock
from xihe.agent.inbound import Inbound
from xihe.agent.mcp.feature import McpState
from xihe.agent.ops.reload import reload_config
from xihe.agent.tasks import StepStatus
from xihe.integrations.fakes.llm_server import ScriptedLLM, call, say
from xihe.integrations.mcp.fake import FakeMcpServer


@pytest.fixture
def sluggish() -> Iterator[FakeMcpServer]:
    with FakeMcpServer(slow_list=True) as server:
        yield server
        server.release_slow()


@pytest.fixture
def quick() -> Iterator[FakeMcpServer]:
    with FakeMcpServer() as server:
        yield server


def _server(name: str, url: str, *tools: tuple[str, str]) -> dict:
    return {
        "name": name,
        "transport": "http",
        "url": url,
        "list_timeout_seconds": 60,  # far longer than the test: only the fake decides when it answers
        "tools": [{"name": t, "allowed": True, "risk": risk} for t, risk in tools],
    }


def _write(cfg: Path, *servers: dict) -> None:
    (cfg / "mcp.yaml").write_text(yaml.safe_dump({"servers": list(servers)}))


def _state(app: App) -> McpState:
    state = app.states["mcp"]
    assert isinstance(state, McpState)
    return state


def _last_step_error(app: App) -> str:
    step = app.deps.tasks.latest(1)["tool:1:0"]
    assert step.status == StepStatus.FAILED
    return step.error or ""


def test_build_app_returns_while_a_server_is_still_listing(
    tmp_path: Path, llm: ScriptedLLM, sluggish: FakeMcpServer, clock: FakeClock, sqlite_url: str
) -> None:
    cfg = write_config(tmp_path / "cfg", llm_url=llm.base_url)
    _write(cfg, _server("prom", sluggish.url, ("get_metric", "read"), ("slow_query", "read")))
    app = build_app(cfg, clock=clock, database_url=sqlite_url)  # the server has not answered: no wait
    state = _state(app)
    assert sluggish.list_started.wait(30)  # the listing reached the server, which holds it
    assert not state.listed.is_set() and state.listing == {"prom"}
    assert app.installed.warnings["mcp prom"] == "listing its tools"  # /readyz: still ready, with a warning
    assert "not available yet" in app.registry.get("mcp_prom_get_metric").description

    llm.add(call("mcp_prom_get_metric", metric="cpu"), say("Not yet."))
    assert app.session.handle(Inbound("alice", "c1", "cpu?")) == "Not yet."
    assert "MCP server prom has not listed its tools yet" in _last_step_error(app)
    assert sluggish.calls == []  # a stand-in never calls the server

    sluggish.release_slow()
    assert state.listed.wait(30)
    assert "mcp prom" not in app.installed.warnings and state.listing == set()
    assert app.registry.get("mcp_prom_get_metric").description == "[MCP prom] Current value of a metric."
    schema = app.registry.schemas(["mcp_prom_get_metric"])[0]["function"]["parameters"]
    assert schema["required"] == ["metric"]  # the server's own schema replaced the stand-in's
    llm.add(call("mcp_prom_get_metric", metric="cpu"), say("cpu is 42."))
    assert app.session.handle(Inbound("alice", "c1", "cpu now?")) == "cpu is 42."
    assert sluggish.calls == [("get_metric", {"metric": "cpu"})]


def test_a_reload_adds_changes_and_removes_servers(
    tmp_path: Path, llm: ScriptedLLM, quick: FakeMcpServer, clock: FakeClock, sqlite_url: str
) -> None:
    cfg = write_config(tmp_path / "cfg", llm_url=llm.base_url)
    _write(cfg, _server("ops", quick.url, ("get_metric", "read"), ("restart_service", "write")))
    app = build_app(cfg, clock=clock, database_url=sqlite_url)
    state = _state(app)
    assert state.listed.wait(30)
    assert {n for n in app.registry.names() if n.startswith("mcp_")} == {
        "mcp_ops_get_metric",
        "mcp_ops_restart_service",
    }

    # ops loses restart_service; a new server k8s arrives; nothing restarts
    _write(
        cfg,
        _server("ops", quick.url, ("get_metric", "read")),
        _server("k8s", quick.url, ("dump_logs", "read")),
    )
    assert reload_config(app) == "applied"
    row = app.deps.audit.search(kind="config", outcome="reloaded")[0]
    assert "restart needed" not in (row["reason"] or "")  # mcp.yaml is live
    assert "mcp_ops_restart_service" not in app.registry  # gone at once, before any listing
    assert state.listed.wait(30)
    assert {n for n in app.registry.names() if n.startswith("mcp_")} == {
        "mcp_ops_get_metric",
        "mcp_k8s_dump_logs",
    }
    assert app.registry.get("mcp_k8s_dump_logs").description.startswith("[MCP k8s] ")
    assert "not available" not in app.registry.get("mcp_k8s_dump_logs").description
    assert {v.server for v in state.verdicts} == {"ops", "k8s"}

    # the server ops is removed: its tools leave the registry and /readyz forgets it
    _write(cfg, _server("k8s", quick.url, ("dump_logs", "read")))
    assert reload_config(app) == "applied"
    assert state.listed.wait(30)
    assert {n for n in app.registry.names() if n.startswith("mcp_")} == {"mcp_k8s_dump_logs"}
    assert {v.server for v in state.verdicts} == {"k8s"}
    assert not any(k.startswith("mcp ") for k in app.installed.warnings)
