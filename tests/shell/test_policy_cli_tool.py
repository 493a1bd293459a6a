"""The gate's decisions on shell entries (table), the `xihe shell check` dry run, and audit fields."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from tests.shell.conftest import config_text
from xihe.agent.cli.main import main
from xihe.agent.cli.shell import register
from xihe.agent.errors import ToolFailed
from xihe.agent.gate import Allow, Confirm, Deny, identify
from xihe.config.access import AccessConfig
from xihe.config.shell.file import ShellConfig
from xihe.tools.shell.policy import gate_decision
from xihe.tools.shell.sandbox import BwrapSandbox, ShellRunner
from xihe.tools.shell.tool import Args, args_model, audit_fields, result_text
from xihe.tools.shell.whitelist import Whitelist

ACCESS = AccessConfig.model_validate(
    {
        "environments": {"test": {}, "prod": {"production": True}},
        "roles": {
            "developer": {"tools": ["*"], "environments": ["test"]},
            "operator": {"tools": ["*"], "environments": ["test", "prod"]},
            "viewer": {"tools": ["read_artifact"], "environments": ["test", "prod"]},
        },
        "users": {
            "alice": {"roles": ["developer"]},
            "bob": {"roles": ["operator"]},
            "carol": {"roles": ["viewer"]},
        },
    }
)
GIT_LOG = "git log --oneline -n 5 -- agent"
ROLLOUT = "kubectl rollout status deployment/order-api --namespace test"


@pytest.mark.parametrize(
    ("user", "line", "env", "outcome", "reason"),
    [
        ("alice", GIT_LOG, "", Allow, "read tool run_shell_command allowed by role developer"),
        ("nobody", GIT_LOG, "", Deny, "no role of nobody (no roles, unknown user) grants the tool"),
        ("carol", GIT_LOG, "", Deny, "no role of carol (viewer) grants the tool run_shell_command"),
        ("bob", ROLLOUT, None, Allow, "on test allowed by role operator"),
        ("alice", ROLLOUT, None, Deny, "may not run entry 'rollout': it needs one of the roles operator"),
        ("bob", ROLLOUT, "prod", Deny, "entry 'rollout' is enabled only in test, not prod"),
        ("alice", GIT_LOG, "prod", Deny, "may use run_shell_command but not on environment prod"),
        ("bob", GIT_LOG, "prod", Confirm, "writes to production environment prod"),
        ("bob", GIT_LOG, "staging", Deny, "unknown environment 'staging'"),
    ],
)
def test_decision_table_is_the_gates(
    whitelist: Whitelist, user: str, line: str, env: str | None, outcome: type, reason: str
) -> None:
    d = gate_decision(whitelist.match_line(line), identify(user, ACCESS), ACCESS, env)
    assert isinstance(d, outcome) and reason in d.reason, d


def test_write_entries_need_confirmation(whitelist: Whitelist) -> None:
    d = gate_decision(whitelist.from_args("py_write", {"code": "pass"}), identify("alice", ACCESS), ACCESS)
    assert isinstance(d, Confirm) and not d.needs_approval and "is a write" in d.reason


@pytest.fixture
def config_dir(workspace: Path, tmp_path: Path) -> Path:
    d = tmp_path / "cfg"
    d.mkdir()
    (d / "shell.yaml").write_text(config_text(workspace))
    (d / "access.yaml").write_text(
        "roles: {operator: {tools: ['*'], environments: [test]}, developer: {tools: ['*'], environments: [test]}}\n"
        "users: {bob: {roles: [operator]}, alice: {roles: [developer]}}\n"
    )
    return d


def test_cli_check_allowed_prints_json_and_exits_0(
    config_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "shell",
            "check",
            "--config",
            str(config_dir),
            "--user",
            "bob",
            "--json",
            "--",
            "kubectl",
            "rollout",
            "status",
            "deployment/order-api",
            "--namespace",
            "test",
        ]
    )
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["decision"] == "allowed" and report["entry"] == "rollout"
    assert report["argv"][-1] == "test" and report["roles"] == ["operator"]


def test_cli_check_refused_names_closest_entry_and_exits_1(
    config_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "shell",
            "check",
            "--config",
            str(config_dir),
            "--json",
            "--",
            "python3",
            "-m",
            "pytest",
            "--rootdir=/",
            "agent",
        ]
    )
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and report["decision"] == "denied"
    assert report["closest"] == "pytest" and report["argument"] == "flags"
    assert "--rootdir=/" in report["reasons"][0]


def test_cli_check_role_denial_and_chat_line(config_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "shell",
            "check",
            "--config",
            str(config_dir),
            "--user",
            "alice",
            "--line",
            "kubectl rollout status deployment/order-api --namespace test",
        ]
    )
    out = capsys.readouterr().out
    assert code == 1 and "decision: denied" in out and "needs one of the roles operator" in out


def test_cli_check_bad_config_exits_2(config_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (config_dir / "shell.yaml").write_text("entries: [{name: x}]\n")
    assert main(["shell", "check", "--config", str(config_dir), "--", "ls"]) == 2
    assert "shell.yaml:1: entries[name=x].description: Field required" in capsys.readouterr().out


def test_register_follows_the_cli_convention() -> None:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["shell", "list"])
    assert callable(args.func)


def test_args_model_lists_entries_for_the_model(whitelist: Whitelist) -> None:
    model = args_model(whitelist)
    schema = model.model_json_schema()
    assert set(schema["properties"]["command"]["enum"]) == set(whitelist.entries)
    assert (
        "git_log: recent commits `git log --oneline -n <count> -- <path>`"
        in schema["properties"]["command"]["description"]
    )
    assert issubclass(model, Args)
    with pytest.raises(ValueError):
        model.model_validate({"command": "rm", "args": {}})


def test_a_run_is_audited_with_digest_and_sandbox(shell_config: ShellConfig, whitelist: Whitelist) -> None:
    runner = ShellRunner(shell_config, save_artifact=lambda b: "artifact-1")
    if not runner.status().available:
        pytest.skip("bubblewrap not available")
    match = whitelist.from_args("py", {"code": "print(6 * 7)"})
    result = runner.run(match)
    assert result.stdout == "42\n"
    record = audit_fields(match, result, "alice")
    assert record["exit_code"] == 0 and record["sandbox"] == "bwrap" and record["user"] == "alice"
    assert len(record["output_sha256"]) == 64
    assert "exit code 0" in result_text(result) and "42" in result_text(result)


def test_a_missing_sandbox_refuses_before_running(shell_config: ShellConfig, whitelist: Whitelist) -> None:
    runner = ShellRunner(
        shell_config, backend=BwrapSandbox(bwrap="/nonexistent"), save_artifact=lambda b: "x"
    )
    with pytest.raises(ToolFailed, match="not available"):
        runner.run(whitelist.from_args("ls", {"path": "agent"}))
