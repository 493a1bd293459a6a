"""What the sandbox finds on a host (cgroups, bubblewrap version) and reports, and what it leaves behind."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from tests.shell.conftest import bwrap_works, config_text
from xihe.agent.cli.main import main as xihe
from xihe.config.shell.file import load_shell_config
from xihe.tools.shell.bwrap import BwrapSandbox, parse_version
from xihe.tools.shell.cgroup import Cgroups, detect, parse_mountinfo, parse_own
from xihe.tools.shell.sandbox import ShellRunner
from xihe.tools.shell.whitelist import Whitelist

V2_MOUNTINFO = (
    "30 23 0:26 / {point} rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"
)
V1_MOUNTINFO = (
    "25 24 0:22 / {point}/memory rw,relatime - cgroup cgroup rw,memory\n"
    "26 24 0:23 / {point}/pids rw,relatime - cgroup cgroup rw,pids\n"
    "27 24 0:24 / {point}/cpu rw,relatime - cgroup cgroup rw,cpu\n"
)


def test_mountinfo_and_own_cgroup_are_parsed() -> None:
    (v2,) = parse_mountinfo(V2_MOUNTINFO.format(point="/sys/fs/cgroup"))
    assert v2.fstype == "cgroup2" and v2.point == Path("/sys/fs/cgroup") and v2.root == "/"
    assert parse_own("12:pids:/a\n4:memory:/b/c\n1:name=systemd:/\n0::/user.slice/xihe.service\n") == {
        "pids": "/a",
        "memory": "/b/c",
        "name=systemd": "/",
        "": "/user.slice/xihe.service",
    }


def test_a_delegated_v2_cgroup_with_memory_and_pids_is_used(tmp_path: Path) -> None:
    own = tmp_path / "system.slice" / "xihe.service"
    own.mkdir(parents=True)
    (own / "cgroup.controllers").write_text("cpu io memory pids\n")
    support = detect(V2_MOUNTINFO.format(point=tmp_path), "0::/system.slice/xihe.service\n")
    assert support.version == "v2" and support.memory == own and support.pids == own


def test_a_v2_cgroup_without_the_memory_controller_is_named_in_the_reason(tmp_path: Path) -> None:
    (tmp_path / "cgroup.controllers").write_text("hugetlb\n")
    support = detect(V2_MOUNTINFO.format(point=tmp_path), "0::/\n")
    assert support.version == "none" and "offers ['hugetlb'], not memory+pids" in support.detail


def test_writable_v1_memory_and_pids_hierarchies_are_used(tmp_path: Path) -> None:
    for d in ("memory/bot", "pids"):
        (tmp_path / d).mkdir(parents=True)
    support = detect(V1_MOUNTINFO.format(point=tmp_path), "5:pids:/\n4:memory:/bot\n0::/\n")
    assert support.version == "v1"
    assert support.memory == tmp_path / "memory" / "bot" and support.pids == tmp_path / "pids"


def test_no_cgroup_hierarchy_means_none_with_a_reason() -> None:
    support = detect("", "0::/\n")
    assert (
        support.version == "none"
        and support.detail == "no cgroup hierarchy with the memory and pids controllers"
    )


def test_bubblewrap_versions_are_parsed() -> None:
    assert parse_version("bubblewrap 0.8.0\n") == (0, 8, 0)
    assert parse_version("bubblewrap 0.11.0") == (0, 11, 0)
    assert parse_version("") is None


@pytest.mark.skipif(not bwrap_works(), reason="bubblewrap cannot create namespaces here")
def test_a_bubblewrap_older_than_0_8_is_reported_and_not_given_disable_userns(tmp_path: Path) -> None:
    real = BwrapSandbox()
    assert real.available() and real.disables_userns
    old = tmp_path / "bwrap"  # the real bwrap, claiming to be 0.7.0 and refusing --disable-userns
    old.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = --version ]; then echo "bubblewrap 0.7.0"; exit 0; fi\n'
        'for a in "$@"; do [ "$a" = --disable-userns ] && { echo "unknown option" >&2; exit 1; }; done\n'
        f'exec {real.bwrap} "$@"\n'
    )
    old.chmod(0o755)
    sandbox = BwrapSandbox(bwrap=str(old))
    assert sandbox.available() and not sandbox.disables_userns
    assert any("bubblewrap 0.7.0 is older than 0.8" in w for w in sandbox.warnings())


def test_a_runner_leaves_no_empty_artifact_directory(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the stdlib's temp dir, not our code
    config = load_shell_config(config_text(workspace))
    for _ in range(3):
        ShellRunner(config)
    assert list(tmp_path.glob("xihe-shell-artifacts-*")) == []
    if not bwrap_works():
        return
    runner = ShellRunner(config)
    runner.run(Whitelist(config).from_args("py", {"code": "print('saved')"}))
    (made,) = tmp_path.glob("xihe-shell-artifacts-*")  # made when there is something to keep
    assert len(list(made.iterdir())) == 1


def test_config_check_names_the_weaker_memory_mode(
    tmp_path: Path, workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.conftest import write_config

    cfg = write_config(tmp_path / "cfg")
    (cfg / "shell.yaml").write_text(
        config_text(workspace).replace("workspaces:", "cgroup: none\nworkspaces:", 1)
    )
    assert xihe(["config", "check", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert (
        "WARNING shell.yaml: memory_mb and processes hold per process, not per command (cgroup: none" in out
    )


@pytest.mark.skipif(not bwrap_works(), reason="bubblewrap cannot create namespaces here")
def test_a_v2_subtree_that_cannot_be_prepared_falls_back_and_says_so(workspace: Path, tmp_path: Path) -> None:
    own = tmp_path / "cg"
    own.mkdir()
    (own / "cgroup.controllers").write_text("memory pids\n")
    (own / "cgroup.subtree_control").write_text("")  # a plain directory: moving the bot in fails
    cgroups = Cgroups(detect(V2_MOUNTINFO.format(point=own), "0::/\n"))
    assert cgroups.available
    config = load_shell_config(config_text(workspace))
    runner = ShellRunner(config, backend=BwrapSandbox(cgroups=cgroups), save_artifact=lambda b: "")
    result = runner.run(Whitelist(config).from_args("py", {"code": "print('ran')"}))
    assert result.ok and result.stdout == "ran\n"  # auto: runs with per-process limits
    assert not cgroups.available and "cannot be prepared" in cgroups.support.detail
    assert any("per process, not per command" in w for w in runner.status().warnings)
    strict = BwrapSandbox(cgroups=cgroups, cgroup="required")
    assert not ShellRunner(config, backend=strict, save_artifact=lambda b: "").status().available


@pytest.mark.skipif(not bwrap_works(), reason="bubblewrap cannot create namespaces here")
def test_a_host_without_user_namespaces_still_runs_commands_and_says_what_is_weaker(
    workspace: Path, tmp_path: Path
) -> None:
    real = BwrapSandbox()
    no_userns = tmp_path / "bwrap"  # the real bwrap on a host that refuses user namespaces
    no_userns.write_text(
        "#!/bin/sh\n"
        'for a in "$@"; do [ "$a" = --unshare-user ] && { echo "No permission to create user namespace" >&2; exit 1; }; done\n'
        f'exec {real.bwrap} "$@"\n'
    )
    no_userns.chmod(0o755)
    config = load_shell_config(config_text(workspace))
    sandbox = BwrapSandbox(bwrap=str(no_userns))
    runner = ShellRunner(config, backend=sandbox, save_artifact=lambda b: "")
    assert sandbox.available() and not sandbox.userns
    result = runner.run(Whitelist(config).from_args("py", {"code": "import os; print(os.getuid())"}))
    assert result.ok and result.stdout == f"{61000 if os.geteuid() == 0 else os.geteuid()}\n"
    assert any("commands can create nested user namespaces" in w for w in sandbox.warnings())
