"""mcp.yaml is checked like every config file (file:line: key: problem), its secrets are registered with
the redactor, and the feature is off unless configured: no mcp.yaml, no MCP client; no ui.yaml token,
no /mcp route."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import yaml

from tests.conftest import write_config
from xihe.agent.app import build_app, load_config, secrets_of
from xihe.agent.cli.main import main
from xihe.agent.clock import FakeClock
from xihe.agent.errors import ConfigError
from xihe.agent.web.server import create_server

BAD = """\
servers:
  - name: prom
    transport: http
    url: http://127.0.0.1:9/mcp
    token_env: XIHE_MCP_PROM_TOKEN
    environment: production
    tools:
      - name: query
        allowed: true
        risk: read
        roles: [opertor]
  - name: k8s
    transport: stdio
    command: [kubectl-mcp]
    env:
      - {name: KUBECONFIG, value_env: XIHE_KUBECONFIG}
    tools:
      - {name: get_pods, allowed: true, risk: read, environments: [tst]}
"""


def test_config_check_names_file_line_and_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = write_config(tmp_path / "cfg")
    (cfg / "mcp.yaml").write_text(BAD)
    assert main(["config", "check", str(cfg)]) == 1
    err = capsys.readouterr().err
    path = cfg / "mcp.yaml"
    assert f"{path}:6: servers[name=prom].environment: unknown environment 'production'" in err
    assert (
        f"{path}:11: servers[name=prom].tools[name=query].roles.0: unknown role 'opertor' (did you mean 'operator'?)"
        in err
    )
    assert (
        f"{path}:18: servers[name=k8s].tools[name=get_pods].environments.0: unknown environment 'tst'" in err
    )

    (cfg / "mcp.yaml").write_text("servers:\n  - name: Prom\n    transport: stdio\n    url: http://x/mcp\n")
    assert main(["config", "check", str(cfg)]) == 1
    err = capsys.readouterr().err
    assert f"{path}:2: servers[name=Prom].name: Value error, a server name is 1-20 lowercase letters" in err


def test_a_write_must_say_its_risk_and_nothing_is_allowed_by_default(tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "cfg")
    (cfg / "mcp.yaml").write_text(
        "servers:\n  - name: ops\n    transport: http\n    url: http://127.0.0.1:9/mcp\n"
        "    tools:\n      - {name: restart}\n"
    )
    with pytest.raises(
        ConfigError, match=r"mcp.yaml:6: servers\[name=ops\].tools\[name=restart\].risk: Field required"
    ):
        load_config(cfg)
    (cfg / "mcp.yaml").write_text(
        "servers:\n  - name: ops\n    transport: http\n    url: http://127.0.0.1:9/mcp\n"
        "    tools:\n      - {name: restart, risk: write}\n"
    )
    tool = load_config(cfg).extra["mcp"].servers[0].tools[0]  # type: ignore[attr-defined]
    assert tool.allowed is False  # listed is not allowed


def test_its_secrets_are_registered_with_the_redactor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = write_config(tmp_path / "cfg")
    (cfg / "mcp.yaml").write_text(
        BAD.replace("production", "prod").replace("opertor", "operator").replace("tst", "test")
    )
    monkeypatch.setenv("XIHE_MCP_PROM_TOKEN", "canary-prom-token")
    monkeypatch.setenv("XIHE_KUBECONFIG", "canary-kubeconfig")
    assert {"canary-prom-token", "canary-kubeconfig"} <= set(secrets_of(load_config(cfg)))


def test_off_unless_configured(tmp_path: Path, sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = write_config(tmp_path / "cfg")
    app = build_app(cfg, clock=FakeClock(), database_url=sqlite_url)
    assert "mcp" not in app.states or not app.states["mcp"].verdicts  # type: ignore[attr-defined]
    assert not [n for n in app.registry.names() if n.startswith("mcp_")]
    paths = {getattr(r, "path", "") for r in create_server(app, with_scheduler=False).routes}
    assert "/mcp" not in paths  # no ui.yaml token: no MCP server at all

    digest = hashlib.sha256(b"some-token").hexdigest()
    (cfg / "ui.yaml").write_text(yaml.safe_dump({"users": {"alice": {"token_sha256": digest}}}))
    app = build_app(cfg, clock=FakeClock(), database_url=sqlite_url)
    paths = {getattr(r, "path", "") for r in create_server(app, with_scheduler=False).routes}
    assert "/mcp" in paths
