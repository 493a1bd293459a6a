"""Policy explain is the gate's own answer over the config: `xihe policy explain --user U` (what U may
do, where, with whose approval), `--tool T --env E` (who may), and `/policy` for admins in chat.

One table of (user, tool or shell entry, environment) → decision and approvers over the shipped
access.yaml and shell.yaml; both CLI views must agree with it, and with `gate.decide` itself."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, MakeApp
from xihe.agent.cli.main import main
from xihe.agent.gate import Confirm, decide, identify
from xihe.agent.inbound import Inbound

NONE = ""  # a tool that acts on no environment

# user, subject, environment, decision, approvers
TABLE = [
    ("alice", "trigger_dolphinscheduler", "test", "confirm", []),
    ("alice", "trigger_dolphinscheduler", "prod", "deny", []),  # developer: test only
    ("bob", "trigger_dolphinscheduler", "staging", "confirm", []),
    ("bob", "trigger_dolphinscheduler", "prod", "approve", ["carol", "dave"]),
    ("dave", "trigger_dolphinscheduler", "prod", "approve", ["carol"]),  # never their own approver
    ("dave", "stop_run", "staging", "deny", []),  # admin: test and prod
    ("carol", "trigger_dolphinscheduler", "prod", "deny", []),  # approver, viewer: reads only
    ("carol", "query_ds_task_status", NONE, "allow", []),  # reading a run names no environment
    ("carol", "rerun_failed", "prod", "deny", []),
    ("bob", "send_wecom_alert", NONE, "confirm", []),
    ("erin", "read_artifact", NONE, "deny", []),  # not in access.yaml: unknown_user_roles = []
    ("alice", "run_shell_command:git_log", NONE, "allow", []),
    ("alice", "run_shell_command:ruff_fix", NONE, "confirm", []),  # a write entry, developers only
    ("bob", "run_shell_command:ruff_fix", NONE, "deny", []),
    ("bob", "run_shell_command:kubectl_rollout_status", "staging", "allow", []),
    ("alice", "run_shell_command:kubectl_rollout_status", "test", "deny", []),  # operators only
    ("dave", "run_shell_command:pytest", NONE, "deny", []),  # entry roles: developer, operator
]


@pytest.fixture
def shipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cfg = tmp_path / "cfg"
    shutil.copytree(REPO / "config", cfg, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    monkeypatch.setenv("XIHE_DS_TOKEN", "t")  # DolphinScheduler on: its tools are enabled
    return cfg


def explain(cfg: Path, capsys: pytest.CaptureFixture[str], *flags: str) -> list[dict[str, Any]]:
    assert main(["--config", str(cfg), "policy", "explain", "--json", *flags]) == 0
    rows: list[dict[str, Any]] = json.loads(capsys.readouterr().out)
    return rows


@pytest.mark.parametrize(("user", "subject", "env", "decision", "approvers"), TABLE)
def test_both_views_give_the_table(
    shipped: Path,
    capsys: pytest.CaptureFixture[str],
    user: str,
    subject: str,
    env: str,
    decision: str,
    approvers: list[str],
) -> None:
    env_flag = ["--env", env] if env else []
    by_user = [r for r in explain(shipped, capsys, "--user", user, *env_flag) if r["subject"] == subject]
    assert [(r["environment"], r["decision"], r["approvers"]) for r in by_user] == [
        (env, decision, approvers)
    ]
    by_tool = [r for r in explain(shipped, capsys, "--tool", subject, *env_flag) if r["user"] == user]
    assert by_tool == by_user or user not in ("alice", "bob", "carol", "dave")
    if user == "erin":  # an unlisted user is the "anyone else" row of the tool view
        (anyone,) = [r for r in explain(shipped, capsys, "--tool", subject, *env_flag) if not r["known"]]
        assert anyone["decision"] == decision


def test_every_row_is_the_gates_decision(shipped: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from xihe.agent.app import load_config

    access = load_config(shipped).access
    rows = explain(shipped, capsys, "--user", "bob")
    assert len(rows) > 20
    for r in rows:
        if ":" in r["subject"]:
            continue  # shell entries add their scope: covered by the table
        risk = (
            "write"
            if r["tool"]
            in (
                "trigger_dolphinscheduler",
                "rerun_failed",
                "stop_run",
                "pause_run",
                "resume_run",
                "force_success",
                "set_schedule",
                "send_wecom_alert",
            )
            else "read"
        )
        gate = decide(r["tool"], risk, r["environment"], identify("bob", access), access)
        assert gate.reason == r["reason"]
        assert isinstance(gate, Confirm) == (r["decision"] in ("confirm", "approve"))


def test_text_and_unknown_names(shipped: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "--config",
                str(shipped),
                "policy",
                "explain",
                "--tool",
                "trigger_dolphinscheduler",
                "--env",
                "prod",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "Who may use `trigger_dolphinscheduler` on prod, as the gate decides:"
    assert "🟠 bob (operator): after the requester's /confirm and an /approve by carol or dave" in out
    assert "⛔ users not in access.yaml: no role of anyone else (no roles, unknown user) grants" in out
    assert main(["--config", str(shipped), "policy", "explain", "--user", "erin"]) == 0
    captured = capsys.readouterr()
    assert "erin is not in access.yaml" in captured.err and "no role grants: " in captured.out
    assert main(["--config", str(shipped), "policy", "explain", "--tool", "trigger_dolphinschedular"]) == 2
    assert "Did you mean `trigger_dolphinscheduler`?" in capsys.readouterr().err
    assert main(["--config", str(shipped), "policy", "explain", "--user", "bob", "--env", "qa"]) == 2
    assert "There is no environment qa (access.yaml has test, staging, prod)." in capsys.readouterr().err


def test_a_tool_that_is_off_is_nobodys(
    shipped: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("XIHE_DS_TOKEN")
    assert main(["--config", str(shipped), "policy", "explain", "--tool", "trigger_dolphinscheduler"]) == 0
    assert "trigger_dolphinscheduler is off in this config" in capsys.readouterr().out


def test_policy_in_chat_is_for_admins_in_their_language(make_app: MakeApp) -> None:
    app = make_app()

    def ask(user: str, text: str) -> str:
        return app.session.handle(Inbound(user, f"c-{user}", text))

    assert ask("alice", "/policy bob") == "/policy is for admins."
    en = ask("dave", "/policy write_note prod")
    assert en.startswith("Who may use `write_note` on prod")
    assert "🟠 bob (operator): after the requester's /confirm and an /approve by carol or dave" in en
    ask(
        "dave", "这个机器人能做什么"
    )  # the conversation is in Chinese from now on (the model is not scripted)
    zh = ask("dave", "/policy bob")
    assert (
        zh.startswith("bob（operator）能做什么（按门禁的判定）：")
        and "`write_note`（prod）：发起人 /confirm" in zh
    )
    assert "你是不是想找 `bob`" in ask("dave", "/policy bobb")
    assert "/policy" in ask("dave", "/help") and "/policy" not in ask("alice", "/help")
