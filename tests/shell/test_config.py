"""shell.yaml validation: the sample loads, and every cross-check fails with file:line: key: problem."""

from __future__ import annotations

from pathlib import Path

import pytest

from xihe.agent.errors import ConfigErrors
from xihe.config.shell.file import load_shell_config, load_shell_file

BASE = """\
workspaces: {repo: /srv/repo}
entries:
  - name: git_log
    description: recent commits
    workspace: repo
    argv: [git, log, -n, "{count}", --, "{path}"]
    args:
      count: {type: integer, min: 1, max: 50, description: how many}
      path: {type: path, description: where}
"""


def test_the_shipped_sample_is_valid() -> None:
    config = load_shell_file(Path(__file__).parents[2] / "config" / "shell.yaml")
    assert config.sandbox == "bwrap"
    assert {e.name for e in config.entries} >= {"pytest", "git_log", "kubectl_rollout_status", "ls"}
    assert any(e.writes and e.risk == "write" for e in config.entries)


def test_a_valid_minimal_whitelist_loads() -> None:
    config = load_shell_config(BASE, "shell.yaml")
    assert config.entries[0].args["count"].max == 50
    assert config.limits.processes == 128  # defaults apply


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            '"{count}"',
            '"{cnt}"',
            "shell.yaml:6: entries[name=git_log].argv.3: placeholder {cnt} has no entry in 'args'",
        ),
        (
            '"{count}", ',
            "",
            "shell.yaml:8: entries[name=git_log].args.count: argument is declared but not used in argv",
        ),
        (
            "[git, log,",
            '["{path}", log,',
            "entries[name=git_log].argv: argv[0] must be a literal program name",
        ),
        ('"{count}"', '"{count}{path}"', "has 2 placeholders; at most one per item"),
        ('"{count}"', '"{count"', "has a brace that is not a placeholder"),
        (
            "workspace: repo",
            "workspace: nope",
            "shell.yaml:5: entries[name=git_log].workspace: unknown workspace 'nope'",
        ),
        (
            "min: 1, max: 50",
            "min: 9, max: 5",
            "shell.yaml:8: entries[name=git_log].args.count: Value error, min 9 is greater than max 5",
        ),
        (
            "{type: integer, min: 1, max: 50,",
            "{type: integer,",
            "an integer argument needs both 'min' and 'max'",
        ),
        ("{type: path,", "{type: string,", "a string argument needs a 'pattern'"),
        ("{type: path,", "{type: enum,", "an enum argument needs a non-empty 'choices' list"),
        ("{type: path,", "{type: string, pattern: '(',", "pattern does not compile"),
        ("{type: path,", "{type: shellcode,", "entries[name=git_log].args.path.type: Input should be"),
        (
            "description: recent commits",
            "description: recent commits\n    colour: red",
            "shell.yaml:5: entries[name=git_log].colour: Extra inputs are not permitted",
        ),
        (
            "workspace: repo",
            "workspace: repo\n    env: {LD_PRELOAD: /tmp/x.so}",
            "entries[name=git_log].env.LD_PRELOAD: LD_PRELOAD cannot be set",
        ),
        (
            "workspace: repo",
            "workspace: repo\n    env: {PYTHONPATH: /tmp}",
            "entries[name=git_log].env.PYTHONPATH: PYTHONPATH cannot be set",
        ),
        (
            "workspace: repo",
            "workspace: repo\n    env_pass: [GIT_SSH_COMMAND]",
            "entries[name=git_log].env_pass: GIT_SSH_COMMAND cannot be passed",
        ),
        (
            "workspace: repo",
            "workspace: repo\n    writes: true",
            "entries[name=git_log].risk: an entry that writes must have risk: write",
        ),
        (
            "workspace: repo",
            "workspace: repo\n    cwd: ../..",
            "entries[name=git_log].cwd: cwd must be relative",
        ),
        (
            "workspace: repo",
            "workspace: repo\n    flags: [-x]",
            "entries[name=git_log].flags: entries with flags need exactly one {flags} item",
        ),
        ("workspace: repo", "workspace: repo\n    flags: ['x; rm']", "flag 'x; rm' must look like -x"),
        ("    workspace: repo\n", "", "a path argument needs 'root' or an entry workspace"),
        ("/srv/repo", "srv/repo", "shell.yaml:1: workspaces.repo: a workspace path must be absolute"),
        ("name: git_log", "name: Git Log", "entries[name=Git Log].name: String should match pattern"),
        (
            "entries:",
            "sandbox: chroot\nentries:",
            "shell.yaml:2: sandbox: Input should be 'bwrap', 'docker' or 'none'",
        ),
        ('"{path}"]', '["-k", "{path}"]]', "an argument inside an optional group needs required: false"),
        (
            "entries:",
            "production_environments: [prod]\nentries:",
            "shell.yaml:2: production_environments: Value error, moved to access.yaml: mark an environment "
            "`production: true`",
        ),
        (
            "entries:",
            "run_as_uid: 65534\nentries:",
            "shell.yaml:2: run_as_uid: Value error, replaced by `run_as_uids",
        ),
        (
            "    args:",
            '    check: [test, -e, "{file}"]\n    args:',
            "entries[name=git_log].check.2: placeholder {file} has no entry in the entry's 'args'",
        ),
        (
            "    args:",
            '    check: ["{path}", x]\n    args:',
            "entries[name=git_log].check: check[0] must be a literal program",
        ),
        (
            "    args:",
            '    check: [test, "{flags}"]\n    args:',
            "entries[name=git_log].check.1: {flags} cannot be used",
        ),
        (
            "    args:",
            "    check: []\n    args:",
            "entries[name=git_log].check: List should have at least 1 item",
        ),
    ],
)
def test_problems_are_reported_with_file_line_and_key(old: str, new: str, expected: str) -> None:
    text = BASE.replace(old, new, 1)
    assert text != BASE
    with pytest.raises(ConfigErrors) as info:
        load_shell_config(text, "shell.yaml")
    assert expected in str(info.value)


def test_a_check_command_uses_the_entry_arguments() -> None:
    text = BASE.replace("    args:", '    check: [git, cat-file, -e, "{path}"]\n    args:', 1)
    entry = load_shell_config(text, "shell.yaml").entries[0]
    assert entry.check == ["git", "cat-file", "-e", "{path}"]


def test_duplicate_entry_names_are_refused() -> None:
    text = BASE + BASE.split("entries:\n", 1)[1]
    with pytest.raises(
        ConfigErrors, match=r"shell.yaml:10: entries\[name=git_log\].name: duplicate entry name 'git_log'"
    ):
        load_shell_config(text, "shell.yaml")


def test_reload_keeps_the_last_good_whitelist(tmp_path: Path) -> None:
    from xihe.tools.shell.reload import ReloadingWhitelist

    path = tmp_path / "shell.yaml"
    path.write_text(BASE)
    holder = ReloadingWhitelist(path)
    path.write_text(BASE.replace("git_log", "git_history"))
    assert holder.reload() is None and "git_history" in holder.current.entries
    path.write_text(BASE.replace('"{count}"', '"{cnt}"'))
    error = holder.reload()
    assert error is not None and "placeholder {cnt}" in str(error)
    assert "git_history" in holder.current.entries  # still serving the previous version
