"""Decisions (table), the `xihe shell check` dry run, and the tool function the lead registers."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from agent.cli_shell import main, register
from agent.errors import ToolDenied, ToolFailed
from config.access import AccessConfig
from config.shell import ShellConfig
from tests.shell.conftest import config_text
from tools.shell.policy import decide, roles_of
from tools.shell.sandbox import BwrapSandbox, ShellRunner
from tools.shell.tool import Args, args_model, audit_fields, result_text, run_shell_command
from tools.shell.whitelist import ShellRefused, Whitelist

ACCESS = AccessConfig.model_validate(
    {
        "roles": {"developer": {"environments": ["test"]}, "operator": {"environments": ["test", "prod"]}},
        "users": {"alice": {"roles": ["developer"]}, "bob": {"roles": ["operator"]}},
    }
)


@pytest.mark.parametrize(
    ("user", "line", "env", "outcome", "reason"),
    [
        ("alice", "git log --oneline -n 5 -- agent", None, "allowed", "open to every user"),
        ("nobody", "git log --oneline -n 5 -- agent", None, "allowed", "open to every user"),
        (
            "bob",
            "kubectl rollout status deployment/order-api --namespace test",
            "test",
            "allowed",
            "has role 'operator'",
        ),
        (
            "alice",
            "kubectl rollout status deployment/order-api --namespace test",
            "test",
            "denied",
            "needs one of: operator",
        ),
        (
            "bob",
            "kubectl rollout status deployment/order-api --namespace test",
            "prod",
            "denied",
            "enabled only in test",
        ),
        ("alice", "git log --oneline -n 5 -- agent", "prod", "denied", "may not act on environment 'prod'"),
        ("bob", "git log --oneline -n 5 -- agent", "prod", "needs_confirmation", "is production"),
    ],
)
def test_decision_table(
    shell_config: ShellConfig,
    whitelist: Whitelist,
    user: str,
    line: str,
    env: str | None,
    outcome: str,
    reason: str,
) -> None:
    d = decide(
        whitelist.match_line(line),
        user=user,
        roles=roles_of(ACCESS, user),
        config=shell_config,
        access=ACCESS,
        environment=env,
    )
    assert d.outcome == outcome
    assert any(reason in r for r in d.reasons), d.reasons


def test_write_entries_need_confirmation(shell_config: ShellConfig, whitelist: Whitelist) -> None:
    d = decide(
        whitelist.from_args("py_write", {"code": "pass"}),
        user="alice",
        roles={"developer"},
        config=shell_config,
    )
    assert d.outcome == "needs_confirmation" and any("risk: write" in r for r in d.reasons)


def test_missing_sandbox_denies(shell_config: ShellConfig, whitelist: Whitelist) -> None:
    d = decide(
        whitelist.from_args("ls", {"path": "agent"}),
        user="a",
        roles=set(),
        config=shell_config,
        sandbox_available=False,
    )
    assert d.outcome == "denied" and "sandbox 'bwrap' is not available on this host" in d.reasons


@pytest.fixture
def config_dir(workspace: Path, tmp_path: Path) -> Path:
    d = tmp_path / "cfg"
    d.mkdir()
    (d / "shell.yaml").write_text(config_text(workspace))
    (d / "access.yaml").write_text(
        "roles: {operator: {environments: [test]}, developer: {environments: [test]}}\n"
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
    assert code == 1 and "decision: denied" in out and "needs one of: operator" in out


def test_cli_check_bad_config_exits_2(config_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (config_dir / "shell.yaml").write_text("entries: [{name: x}]\n")
    assert main(["shell", "check", "--config", str(config_dir), "--", "ls"]) == 2
    assert "shell.yaml:1: entries.0.description: Field required" in capsys.readouterr().out


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


def test_run_shell_command_runs_and_audits(
    shell_config: ShellConfig, whitelist: Whitelist, tmp_path: Path
) -> None:
    runner = ShellRunner(shell_config, save_artifact=lambda b: "artifact-1")
    if not runner.status().available:
        pytest.skip("bubblewrap not available")
    result = run_shell_command(
        "py", {"code": "print(6 * 7)"}, whitelist=whitelist, runner=runner, user="alice"
    )
    assert result.stdout == "42\n"
    record = audit_fields(whitelist.from_args("py", {"code": "print(6 * 7)"}), result, "alice")
    assert record["exit_code"] == 0 and record["sandbox"] == "bwrap" and record["user"] == "alice"
    assert len(record["output_sha256"]) == 64
    assert "exit code 0" in result_text(result) and "42" in result_text(result)


def test_run_shell_command_refuses_before_running(shell_config: ShellConfig, whitelist: Whitelist) -> None:
    runner = ShellRunner(
        shell_config, backend=BwrapSandbox(bwrap="/nonexistent"), save_artifact=lambda b: "x"
    )
    with pytest.raises(ShellRefused):
        run_shell_command("ls", {"path": "../.."}, whitelist=whitelist, runner=runner, user="alice")
    with pytest.raises(ToolDenied, match="needs one of: operator"):
        run_shell_command(
            "rollout",
            {"deployment": "order-api", "namespace": "test"},
            whitelist=whitelist,
            runner=runner,
            user="alice",
            roles={"developer"},
        )
    with pytest.raises(ToolFailed, match="not available"):
        run_shell_command("ls", {"path": "agent"}, whitelist=whitelist, runner=runner, user="alice")
