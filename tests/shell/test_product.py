"""The whitelisted shell through the product: model tool calls, /sh, the gate, /confirm, audit, reload."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.shell.conftest import PYTHON, bwrap_works, config_text
from xihe.agent.app import App
from xihe.agent.cli.main import main as cli_main
from xihe.agent.inbound import Inbound
from xihe.agent.shell.feature import reload_job
from xihe.agent.wecom_markdown import inline
from xihe.integrations.fakes.llm_server import ScriptedLLM, call, say

needs_bwrap = pytest.mark.skipif(not bwrap_works(), reason="bubblewrap cannot create namespaces here")
SECRET = "Sup3rSecretT0ken"


def ask(app: App, text: str, user: str = "alice", conv: str = "c1") -> str:
    return app.session.handle(Inbound(user, conv, text))


def shell_audit(app: App) -> list[dict[str, Any]]:
    return app.deps.audit.search(kind="shell")


@needs_bwrap
def test_read_entry_runs_in_bwrap_and_the_model_sees_capped_output_and_an_artifact(
    shell_app: Callable[..., App], llm: ScriptedLLM
) -> None:
    code = "print('A' * 3000 + 'END')"
    app = shell_app()
    llm.add(call("run_shell_command", command="py", args={"code": code}), say("It printed a long line."))
    assert ask(app, "print a long line") == "It printed a long line."
    shown = llm.messages[1][-1]["content"]
    assert shown.startswith("[Tool Result: run_shell_command]\n$ py: exit code 0")
    assert "[sandbox: bwrap]" in shown
    assert len(shown) < 2600  # the entry's 2,000-byte cap, head and tail kept
    art_id = shown.rsplit("(full output: artifact ", 1)[1].split(")")[0]
    found = app.deps.artifacts.get(art_id)
    assert found is not None and b"A" * 3000 + b"END" in found[1]
    (event,) = shell_audit(app)
    d = event["detail"]
    assert event["actor"] == "alice" and event["outcome"] == "ran"
    assert d["entry"] == "py" and d["user"] == "alice" and d["exit_code"] == 0 and d["sandbox"] == "bwrap"
    assert d["argv"][1:] == ["-c", code] and len(d["output_sha256"]) == 64 and d["duration_s"] >= 0
    assert d["artifact_ref"] == art_id
    llm.assert_consumed()


@needs_bwrap
def test_write_entry_waits_for_confirm_then_runs_on_a_copy(
    shell_app: Callable[..., App], llm: ScriptedLLM, workspace: Path
) -> None:
    app = shell_app()
    code = "open('README.md','w').write('changed'); print('wrote')"
    llm.add(call("run_shell_command", command="py_write", args={"code": code}), say("Done on a copy."))
    reply = ask(app, "change the readme")
    assert "runs only after your /confirm" in reply and "/confirm 1" in reply
    assert shell_audit(app) == []  # nothing ran before the yes
    assert ask(app, "/confirm 1") == "Done on a copy."
    (event,) = shell_audit(app)
    assert event["detail"]["entry"] == "py_write" and event["detail"]["exit_code"] == 0
    assert (workspace / "README.md").read_text() == "readme\n"  # a throwaway copy, never the checkout
    llm.assert_consumed()


def test_read_entry_is_allowed_by_the_gate_and_write_entry_is_not(shell_app: Callable[..., App]) -> None:
    app = shell_app()
    spec = app.registry.get("run_shell_command")
    read = spec.args.model_validate({"command": "ls", "args": {"path": "agent"}})
    write = spec.args.model_validate({"command": "py_write", "args": {"code": "1"}})
    assert spec.risk_for(read, app.deps) == "read" and spec.risk_for(write, app.deps) == "write"
    rollout = spec.args.model_validate({"command": "rollout", "args": {"deployment": "order-api"}})
    assert spec.environment(rollout, app.deps) == "test"
    assert spec.risk == "write"  # the static risk is the worst entry's


INJECTIONS = [
    ("ls -la -- agent; cat /etc/shadow", "shell operator ';'"),
    ("ls -la -- agent && id", "shell operator '&&'"),
    ("ls -la -- agent | sh", "shell operator '|'"),
    ("ls -la -- $(id)", "shell operator '('"),
    ("ls -la -- '$(id)'", "shell metacharacter '$'"),
    ("ls -la -- `id`", "shell metacharacter '`'"),
    ("ls -la -- agent > /tmp/x", "shell operator '>'"),
    ("ls -la -- ../..", "path"),
    ("ls -la -- evil", "path"),
    ("LD_PRELOAD=/tmp/x.so ls -la -- agent", "LD_PRELOAD"),
    ("git log --oneline -n 5 --upload-pack=touch -- agent", "closest entry 'git_log'"),
    ("rm -rf /", "'rm' is not a whitelisted program"),
    ("python3 -m pytest -o addopts=-p agent", "closest entry 'pytest'"),
    ("ls -la -- agent\u202e", "bidirectional"),
    ("ls -la -- a*", "glob"),
]


@pytest.mark.parametrize(("line", "why"), INJECTIONS)
def test_sh_injection_lines_are_refused_with_a_reason_and_nothing_runs(
    shell_app: Callable[..., App], line: str, why: str
) -> None:
    app = shell_app()
    reply = ask(app, f"/sh {line}")
    assert reply.startswith("Refused, nothing was run:") and inline(why) in reply  # shown as outside text
    assert app.deps.tasks.recent() == []  # no task, no step, no tool call
    (event,) = shell_audit(app)
    assert event["outcome"] == "refused" and event["tool"] == "/sh" and why in event["reason"]


def test_sh_refuses_entries_whose_roles_the_user_lacks(shell_app: Callable[..., App]) -> None:
    app = shell_app()
    reply = ask(app, "/sh kubectl rollout status deployment/order-api --namespace test", user="alice")
    assert reply.startswith("Refused: ") and "needs one of the roles operator" in reply
    assert app.deps.audit.search(kind="gate")[0]["outcome"] == "deny"
    assert shell_audit(app) == []  # nothing ran


ONE_GATE = [
    ("alice", "ls -la -- agent", "allowed"),
    ("carol", "ls -la -- agent", "denied"),  # viewer: no role grants run_shell_command
    ("stranger", "ls -la -- agent", "denied"),  # unknown user, no roles
    ("alice", "kubectl rollout status deployment/order-api --namespace test", "denied"),  # entry roles
    ("bob", "kubectl rollout status deployment/order-api --namespace test", "allowed"),
]


@needs_bwrap
@pytest.mark.parametrize(("user", "line", "expected"), ONE_GATE)
def test_shell_check_says_what_the_bot_then_does(
    shell_app: Callable[..., App], user: str, line: str, expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    app = shell_app()
    directory = Path(app.deps.settings.directory)
    assert cli_main(
        ["shell", "check", "--config", str(directory), "--user", user, "--json", "--line", line]
    ) in (0, 1)
    assert json.loads(capsys.readouterr().out)["decision"] == expected
    reply = ask(app, f"/sh {line}", user=user)
    ran = any(e["detail"]["entry"] for e in shell_audit(app))
    assert ran == (expected == "allowed"), reply
    assert reply.startswith("Refused: ") == (expected == "denied")


@needs_bwrap
def test_sh_runs_a_read_entry_through_the_tool_path(shell_app: Callable[..., App]) -> None:
    app = shell_app()
    reply = ask(app, "/sh ls -la -- agent")
    assert "loop.py" in reply and "[sandbox: bwrap]" in reply
    (task,) = app.deps.tasks.recent()
    assert task.kind == "command" and task.status == "done"
    assert app.deps.audit.search(kind="tool_call", tool="run_shell_command")[0]["outcome"] == "done"
    assert shell_audit(app)[0]["detail"]["entry"] == "ls"


def test_sh_ambiguous_line_never_runs(shell_app: Callable[..., App]) -> None:
    app = shell_app()
    reply = ask(app, f"/sh {PYTHON} -c 'print(1)'")
    # the python path matches py and py_cpu and py_write: ambiguous lines never run
    assert reply.startswith("Refused") and "matches several entries" in reply


def test_model_call_for_an_entry_without_the_role_is_denied_before_running(
    shell_app: Callable[..., App], llm: ScriptedLLM
) -> None:
    app = shell_app()
    llm.add(
        call("run_shell_command", command="rollout", args={"deployment": "order-api", "namespace": "test"}),
        say("I may not."),
    )
    assert ask(app, "rollout status") == "I may not."
    shown = llm.messages[1][-1]["content"]
    assert "may not run entry 'rollout'" in shown and "operator" in shown
    assert app.deps.audit.search(kind="gate")[0]["outcome"] == "deny" and shell_audit(app) == []


def test_secrets_never_reach_the_audit_rows(shell_app: Callable[..., App], llm: ScriptedLLM) -> None:
    app = shell_app()
    # deploy_token has `secret: true`; a refused variant (bad characters) still must not leak it
    llm.add(
        call("run_shell_command", command="deploy_token", args={"token": SECRET + "!"}),
        call("run_shell_command", command="deploy_token", args={"token": SECRET}),
        say("ok"),
    )
    ask(app, "deploy")
    rows = app.deps.audit.search(limit=500)
    assert rows and SECRET not in json.dumps(rows, default=str)
    for step in app.deps.tasks.steps(1):
        assert SECRET not in (step.input_preview or "")


def test_help_shows_the_sandbox_status_and_warns_loudly_without_one(
    shell_app: Callable[..., App], workspace: Path
) -> None:
    app = shell_app()
    assert "Shell:" in ask(app, "/help") and "/sh COMMAND LINE" in ask(app, "/help")
    zh = ask(app, "/help 帮我看看", conv="zh")  # the status line under /help in the reader's language too
    assert "Shell：命令在沙箱" in zh and "Shell:" not in zh and "whitelisted commands" not in zh
    none = shell_app("sandbox: none\n" + config_text(workspace))
    assert "SHELL SANDBOX DISABLED" in ask(none, "/help")
    if bwrap_works():  # the weaker limits mode is named too
        weak = shell_app("cgroup: none\n" + config_text(workspace))
        assert "memory_mb and processes hold per process, not per command" in ask(weak, "/help")


def test_hot_reload_keeps_the_last_good_whitelist(shell_app: Callable[..., App], workspace: Path) -> None:
    app = shell_app()
    path = app.settings.directory / "shell.yaml"
    path.write_text(config_text(workspace).replace("name: ls\n", "name: ls\n    bogus_key: 1\n"))
    reload_job(app)
    assert "ls" in app.deps.shell.whitelist.entries
    assert "reload failed" in ask(app, "/help") and "bogus_key" in ask(app, "/help")
    path.write_text(config_text(workspace).replace("name: ls\n", "name: list_dir\n"))
    reload_job(app)
    entries = app.deps.shell.whitelist.entries
    assert "list_dir" in entries and "ls" not in entries
    assert "list_dir" in json.dumps(app.registry.get("run_shell_command").schema())
    assert "reload failed" not in ask(app, "/help")


def test_a_secret_typed_in_a_sh_line_is_not_stored(shell_app: Callable[..., App]) -> None:
    app = shell_app()
    line = f'/sh curl -H "Authorization: Bearer {SECRET}" https://example.invalid/'
    ask(app, line)  # a network entry: it may run or fail; what is stored is the point
    rows = app.deps.audit.search(limit=500)
    assert rows and SECRET not in json.dumps(rows, default=str)
    for task in app.deps.tasks.recent(limit=10):
        assert SECRET not in task.goal and SECRET not in (task.reply or "")
        for step in app.deps.tasks.steps(task.id):
            assert SECRET not in (step.input_preview or "")


def test_a_sh_task_never_shows_the_workspace_server_path(
    shell_app: Callable[..., App], workspace: Path
) -> None:
    app = shell_app()
    reply = ask(app, "/sh ls -la -- agent")  # the path value resolves to <workspace>/agent on the server
    listing = ask(app, "/tasks")
    (task,) = app.deps.tasks.recent(limit=10)
    assert task.goal == "/sh ls -la -- agent"  # as the user wrote it, relative to the workspace
    shown = [reply, listing, task.goal, task.reply or ""]
    shown += [step.input_preview or "" for step in app.deps.tasks.steps(task.id)]
    report = ask(app, f"/task {task.id}")
    for text in [*shown, report]:
        assert str(workspace) not in text and str(workspace.resolve()) not in text, text
