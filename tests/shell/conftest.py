"""Fixtures for the whitelisted shell: a workspace with traps, a test whitelist and a Python entry for sandbox tests."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import write_config
from xihe.agent.app import App, build_app
from xihe.agent.clock import FakeClock
from xihe.config.shell.file import ShellConfig, load_shell_config
from xihe.integrations.fakes.llm_server import ScriptedLLM
from xihe.tools.shell.sandbox import BwrapSandbox
from xihe.tools.shell.whitelist import Whitelist

PYTHON = os.path.realpath(sys.executable)

WHITELIST = """
workspaces: {{repo: {repo}, other: {other}}}
ro_binds: [{prefix}]
limits: {{cpu_seconds: 20, memory_mb: 1024, processes: 64, file_size_mb: 4, tmp_size_mb: 16, max_output_mb: 4}}
artifact_cap_mb: 1
entries:
  - name: pytest
    description: run tests
    workspace: repo
    argv: [python3, -m, pytest, "{{flags}}", "{{path}}", ["-k", "{{expr}}"]]
    flags: [-x, -q]
    args:
      path: {{type: path, description: tests}}
      expr: {{type: string, pattern: "^[A-Za-z0-9_ ]+$", max_length: 60, required: false, description: -k}}
  - name: git_log
    description: recent commits
    workspace: repo
    argv: [git, log, --oneline, -n, "{{count}}", --, "{{path}}"]
    args:
      count: {{type: integer, min: 1, max: 200, description: how many}}
      path: {{type: path, description: file or dir}}
  - name: git_since
    description: commits since a date
    workspace: repo
    argv: [git, log, "--since={{date}}"]
    args:
      date: {{type: string, pattern: "^[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}$", description: ISO date}}
  - name: rollout
    description: rollout status
    argv: [kubectl, rollout, status, "deployment/{{deployment}}", --namespace, "{{namespace}}"]
    args:
      deployment: {{type: enum, choices: [order-api, report-worker], description: deployment}}
      namespace: {{type: enum, choices: [test, staging], description: namespace}}
    roles: [operator]
    environments: [test]
  - name: ls
    description: list a directory
    workspace: repo
    argv: [ls, -la, --, "{{path}}"]
    args:
      path: {{type: path, kind: dir, description: directory}}
  - name: grep
    description: search text
    workspace: repo
    argv: [grep, -rn, --, "{{needle}}", "{{path}}"]
    args:
      needle: {{type: text, max_length: 50, description: what to look for}}
      path: {{type: path, description: where}}
  - name: deploy_token
    description: uses a secret
    argv: [curl, -H, "Authorization: Bearer {{token}}", https://example.invalid/]
    args:
      token: {{type: string, pattern: "^[A-Za-z0-9]+$", secret: true, description: token}}
    network: true
  - name: py
    description: run test code in the sandbox (test only)
    workspace: repo
    argv: [{python}, -c, "{{code}}"]
    args:
      code: {{type: text, max_length: 4000, allow_shell_chars: true, allow_glob: true, description: code}}
    timeout_seconds: {timeout}
    output_cap_bytes: 2000
  - name: py_cpu
    description: run test code with a 1 s CPU limit (test only)
    workspace: repo
    argv: [{python}, -c, "{{code}}"]
    args:
      code: {{type: text, max_length: 4000, allow_shell_chars: true, allow_glob: true, description: code}}
    limits: {{cpu_seconds: 1, memory_mb: 1024, processes: 64, file_size_mb: 4, tmp_size_mb: 16, max_output_mb: 4}}
    timeout_seconds: 20
  - name: py_write
    description: run test code on a writable copy (test only)
    workspace: repo
    writes: true
    risk: write
    argv: [{python}, -c, "{{code}}"]
    args:
      code: {{type: text, max_length: 4000, allow_shell_chars: true, allow_glob: true, description: code}}
    timeout_seconds: {timeout}
  - name: py_net
    description: run test code with network (test only)
    argv: [{python}, -c, "{{code}}"]
    args:
      code: {{type: text, max_length: 4000, allow_shell_chars: true, allow_glob: true, description: code}}
    network: true
    timeout_seconds: {timeout}
"""


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A repository-like tree with symlinks that lead outside it."""
    repo = tmp_path / "repo"
    (repo / "agent").mkdir(parents=True)
    (repo / "tests" / "shell").mkdir(parents=True)
    (repo / "agent" / "loop.py").write_text("print('loop')\n")
    (repo / "README.md").write_text("readme\n")
    (repo / "evil").symlink_to("/etc")
    (repo / "up").symlink_to("..")
    (repo / "inside_link").symlink_to("agent")
    (tmp_path / "secret.txt").write_text("top secret\n")
    (tmp_path / "other").mkdir()
    return repo


def config_text(workspace: Path, timeout: float = 10) -> str:
    """The test whitelist YAML pointing at `workspace`."""
    return WHITELIST.format(
        repo=workspace,
        other=workspace.parent / "other",
        prefix=sys.base_prefix,
        python=PYTHON,
        timeout=timeout,
    )


@pytest.fixture
def shell_config(workspace: Path) -> ShellConfig:
    """The validated test whitelist."""
    return load_shell_config(config_text(workspace), "test-shell.yaml")


@pytest.fixture
def whitelist(shell_config: ShellConfig) -> Whitelist:
    """The compiled test whitelist."""
    return Whitelist(shell_config)


def bwrap_works() -> bool:
    """True when bubblewrap can create namespaces on this host."""
    return BwrapSandbox().available()


@pytest.fixture
def shell_app(
    tmp_path: Path, llm: ScriptedLLM, clock: FakeClock, db_url: str, workspace: Path
) -> Callable[..., App]:
    """Build a bot whose shell.yaml is the test whitelist over `workspace` (sqlite and postgres)."""
    counter = {"n": 0}

    def make(text: str | None = None) -> App:
        counter["n"] += 1
        cfg = write_config(tmp_path / f"config{counter['n']}", llm_url=llm.base_url)
        (cfg / "shell.yaml").write_text(text if text is not None else config_text(workspace))
        return build_app(cfg, clock=clock, database_url=db_url, holder=f"test-{counter['n']}")

    return make
