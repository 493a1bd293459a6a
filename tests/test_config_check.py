"""`xihe config check` names file:line: key: problem and exits non-zero."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from xihe.agent.cli.main import main


def write(tmp_path: Path, name: str, text: str) -> Path:
    d = tmp_path / "cfg"
    d.mkdir(exist_ok=True)
    (d / name).write_text(text, encoding="utf-8")
    return d


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        (
            "xihe.yaml",
            "loop:\n  max_turns: 8\n  max_turn: 3\n",
            "xihe.yaml:3: loop.max_turn: Extra inputs are not permitted",
        ),
        (
            "xihe.yaml",
            "loop:\n  max_turns: lots\n",
            "xihe.yaml:2: loop.max_turns: Input should be a valid integer",
        ),
        ("xihe.yaml", "llm:\n  model: [unclosed\n", "xihe.yaml:3: invalid YAML"),
        (
            "access.yaml",
            "roles:\n  dev: {tools: ['*']}\nusers:\n  alice:\n    roles: [dev, ops]\n",
            "access.yaml:5: users.alice.roles.1: undefined role 'ops'",
        ),
        (
            "access.yaml",
            "roles:\n  dev:\n    tools: ['*']\n    environments: [staging]\n",
            "access.yaml:4: roles.dev.environments.0: undefined environment 'staging'",
        ),
        ("xihe.yml", "a: 1\n", "xihe.yml: unknown config file"),
        ("xihe.yaml", "tools: [echo_typo]\n", "xihe.yaml:1: tools.0: unknown tool 'echo_typo'"),
    ],
)
def test_broken_config_is_reported_with_file_line_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str, expected: str
) -> None:
    directory = write(tmp_path, name, text)
    assert main(["config", "check", str(directory)]) == 1
    err = capsys.readouterr().err
    assert expected in err, err


def test_shipped_config_is_valid() -> None:
    result = subprocess.run(  # --offline: the files; this machine is not the bot's host (no /srv/xihe)
        [sys.executable, "-m", "xihe.agent.cli.main", "config", "check", "--offline", str(REPO / "config")],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr
    assert "OK" in result.stdout


def test_a_workspace_or_repository_missing_on_this_host_fails_the_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = tmp_path / "cfg"
    d.mkdir()
    shutil.copy(REPO / "config" / "access.yaml", d / "access.yaml")  # the roles shell.yaml names
    shipped = (REPO / "config" / "shell.yaml").read_text(encoding="utf-8")
    line = shipped.splitlines().index("  repo: /srv/xihe/checkout") + 1
    checkout = tmp_path / "checkout"
    (d / "shell.yaml").write_text(shipped.replace("/srv/xihe/checkout", str(checkout)), encoding="utf-8")
    (d / "code.yaml").write_text(f"repos:\n  - {tmp_path / 'src'}\n", encoding="utf-8")
    assert main(["config", "check", str(d)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"{d / 'shell.yaml'}:{line}: workspaces.repo: workspace {checkout} does not exist on this host",
        f"{d / 'code.yaml'}:2: repos.0: repository {tmp_path / 'src'} is not a directory on this host",
    ]
    assert main(["config", "check", "--offline", str(d)]) == 0  # the files themselves are fine
    checkout.write_text("a file")
    (tmp_path / "src").mkdir()
    assert main(["config", "check", str(d)]) == 1
    assert f"workspace {checkout} is not a directory" in capsys.readouterr().err
    checkout.unlink()
    checkout.mkdir()
    assert main(["config", "check", str(d)]) == 0


def test_an_unknown_key_gets_a_did_you_mean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    directory = write(tmp_path, "xihe.yaml", "loop:\n  max_turn: 3\nlanguge: zh\nwhatever: 1\n")
    write(tmp_path, "access.yaml", "roles:\n  dev: {tools: ['*'], enviroments: [test]}\n")
    assert main(["config", "check", str(directory)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"{directory / 'xihe.yaml'}:2: loop.max_turn: Extra inputs are not permitted; did you mean `max_turns`?",
        f"{directory / 'xihe.yaml'}:3: languge: Extra inputs are not permitted; did you mean `language`?",
        f"{directory / 'xihe.yaml'}:4: whatever: Extra inputs are not permitted",  # nothing close: no guess
        f"{directory / 'access.yaml'}:2: roles.dev.enviroments: Extra inputs are not permitted; "
        "did you mean `environments`?",
    ]


def test_tools_prints_the_schemas_the_model_gets(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    assert main(["--config", str(REPO / "config"), "tools"]) == 0
    schemas = json.loads(capsys.readouterr().out)
    by_name = {s["function"]["name"]: s["function"] for s in schemas}
    assert by_name["read_artifact"]["parameters"]["required"] == ["artifact_id"]
    assert "artifact id" in by_name["read_artifact"]["parameters"]["properties"]["artifact_id"]["description"]
