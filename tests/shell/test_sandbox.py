"""Real bubblewrap: hostile commands are contained and reported, and the test process is unharmed."""

from __future__ import annotations

import hashlib
import logging
import os
import resource
import socket
import time
from pathlib import Path

import pytest

from tests.shell.conftest import bwrap_works, config_text
from xihe.agent.errors import ToolFailed
from xihe.config.shell.file import ShellConfig, load_shell_config
from xihe.tools.shell.capture import TempArtifacts
from xihe.tools.shell.sandbox import BwrapSandbox, DockerSandbox, ShellResult, ShellRunner, plan_for
from xihe.tools.shell.whitelist import Whitelist

pytestmark = pytest.mark.skipif(not bwrap_works(), reason="bubblewrap cannot create namespaces here")


@pytest.fixture
def fast_config(workspace: Path) -> ShellConfig:
    """The test whitelist with a 3-second wall clock for the python entries."""
    return load_shell_config(config_text(workspace, timeout=3), "test-shell.yaml")


@pytest.fixture
def runner(fast_config: ShellConfig, tmp_path: Path) -> ShellRunner:
    return ShellRunner(fast_config, save_artifact=TempArtifacts(tmp_path / "artifacts", max_bytes=1 << 20))


def run_py(config: ShellConfig, runner: ShellRunner, code: str, entry: str = "py") -> ShellResult:
    return runner.run(Whitelist(config).from_args(entry, {"code": code}))


def sandbox_user_processes() -> list[int]:
    """Processes of the sandbox user on the host (there should be none after a run)."""
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if os.stat(f"/proc/{pid}").st_uid == 61000:
                    out.append(int(pid))
            except FileNotFoundError:
                continue
    return out


def wait_no_sandbox_processes(timeout: float = 5) -> list[int]:
    deadline = time.monotonic() + timeout
    left = sandbox_user_processes()
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = sandbox_user_processes()
    return left


def test_a_whitelisted_command_runs_in_bwrap_and_is_reported(
    fast_config: ShellConfig, runner: ShellRunner
) -> None:
    res = run_py(fast_config, runner, "import os; print('hello', os.getuid(), os.getcwd())")
    assert res.ok and res.exit_code == 0 and res.killed_by is None
    assert res.sandbox == "bwrap"
    uid = 61000 if os.geteuid() == 0 else os.geteuid()
    assert res.stdout == f"hello {uid} {fast_config.workspaces['repo']}\n"
    assert res.stdout_sha256 == hashlib.sha256(res.stdout.encode()).hexdigest()
    assert res.argv[1:] == ("-c", "import os; print('hello', os.getuid(), os.getcwd())")
    assert res.artifact_ref is not None and Path(res.artifact_ref).read_bytes().startswith(
        b"--- stdout ---\nhello"
    )


def test_network_is_unreachable_without_network_and_reachable_with_it(
    fast_config: ShellConfig, runner: ShellRunner
) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(3)
    port = listener.getsockname()[1]
    code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2); print('connected')"
    try:
        blocked = run_py(fast_config, runner, code)
        assert blocked.exit_code != 0 and "connected" not in blocked.stdout
        assert "Connection refused" in blocked.stderr or "unreachable" in blocked.stderr
        allowed = run_py(fast_config, runner, code, entry="py_net")
        assert allowed.exit_code == 0 and allowed.stdout == "connected\n"
        conn, _ = listener.accept()  # exactly the one allowed connection arrived
        conn.close()
    finally:
        listener.close()


def test_writes_outside_the_workspace_fail_and_leave_the_host_untouched(
    fast_config: ShellConfig, runner: ShellRunner, workspace: Path, tmp_path: Path
) -> None:
    targets = [workspace / "agent" / "pwned.py", tmp_path / "outside.txt", Path("/usr/pwned"), Path("/pwned")]
    code = (
        "import sys\nfor p in sys.argv[1:] or %r:\n try:\n  open(p, 'w').write('x'); print('WROTE', p)\n"
        " except OSError as e:\n  print('DENIED', p, e.strerror)\nopen('/tmp/scratch', 'w').write('ok'); print('tmp ok')"
    ) % [str(t) for t in targets]
    res = run_py(fast_config, runner, f"exec({code!r})")
    assert res.exit_code == 0, res.stderr
    assert "WROTE" not in res.stdout
    assert res.stdout.count("DENIED") == len(targets)
    assert "tmp ok" in res.stdout  # the private /tmp is writable ...
    assert not Path("/tmp/scratch").exists()  # ... and is not the host's
    for t in targets:
        assert not t.exists()


def test_files_outside_the_binds_cannot_be_read(
    fast_config: ShellConfig, runner: ShellRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XIHE_TEST_SECRET", "s3cr3t-value")
    paths = [
        tmp_path / "secret.txt",
        Path("/etc/shadow"),
        Path("/root/.bash_history"),
        Path("/work"),
        fast_config.workspaces["repo"] + "/evil/shadow",
    ]
    code = (
        "import os\nfor p in %r:\n try:\n  open(p).read(); print('READ', p)\n except OSError as e:\n"
        "  print('DENIED', p, e.strerror)\nprint('ENV', sorted(os.environ))"
    ) % [str(p) for p in paths]
    res = run_py(fast_config, runner, f"exec({code!r})")
    assert res.exit_code == 0, res.stderr
    assert "READ" not in res.stdout and res.stdout.count("DENIED") == len(paths)
    assert "XIHE_TEST_SECRET" not in res.stdout and "s3cr3t" not in res.stdout
    # bwrap sets PWD after --chdir; GIT_CONFIG_* mark the workspace as a safe.directory
    expected = ["GIT_CONFIG_COUNT", "GIT_CONFIG_KEY_0", "GIT_CONFIG_VALUE_0", "HOME", "LANG", "PATH", "PWD"]
    assert f"ENV {expected}" in res.stdout


def test_a_fork_bomb_is_stopped_by_the_process_limit(fast_config: ShellConfig, runner: ShellRunner) -> None:
    code = (
        "import os\nn = 0\nwhile True:\n try:\n  pid = os.fork()\n except OSError as e:\n"
        "  print('fork refused after', n, flush=True); os._exit(3)\n if pid == 0:\n  while True:\n   try:\n"
        "    os.fork()\n   except OSError:\n    pass\n n += 1"
    )
    res = run_py(fast_config, runner, f"exec({code!r})")
    if os.geteuid() == 0:
        assert res.exit_code == 3 and "fork refused after" in res.stdout  # RLIMIT_NPROC held
        assert wait_no_sandbox_processes() == []  # the PID namespace took the loopers with it
    else:
        assert res.killed_by in ("timeout", None)
    again = run_py(fast_config, runner, "print('still serving')")
    assert again.stdout == "still serving\n"


def test_allocating_4_gb_fails_inside_the_sandbox_only(fast_config: ShellConfig, runner: ShellRunner) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    res = run_py(fast_config, runner, "x = bytearray(4 << 30); print('allocated')")
    assert res.exit_code == 1 and "MemoryError" in res.stderr and "allocated" not in res.stdout
    assert (
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100_000
    )  # KiB: the test grew < 100 MB


def test_sleeping_forever_is_killed_at_the_wall_clock(fast_config: ShellConfig, runner: ShellRunner) -> None:
    started = time.monotonic()
    res = run_py(fast_config, runner, "import time; print('sleeping', flush=True); time.sleep(3600)")
    assert res.killed_by == "timeout" and not res.ok
    assert 2.9 <= res.duration_s < 8 and time.monotonic() - started < 10
    assert res.stdout == "sleeping\n"  # output up to the kill is kept
    assert wait_no_sandbox_processes() == []


def test_printing_1_gb_is_capped_and_killed_without_buffering_it(
    fast_config: ShellConfig, runner: ShellRunner
) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    code = "import sys\nb = b'y' * (1 << 20)\nfor _ in range(1024):\n sys.stdout.buffer.write(b)"
    res = run_py(fast_config, runner, f"exec({code!r})")
    assert res.killed_by == "limit" and res.limit == "output"
    assert res.stdout_truncated and len(res.stdout) < 2000 + 200
    assert (4 << 20) <= res.stdout_bytes < (1 << 30)
    assert "bytes omitted" in res.stdout
    assert res.artifact_ref is not None and Path(res.artifact_ref).stat().st_size <= 1 << 20
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100_000


def test_cpu_limit_kills_a_busy_loop(fast_config: ShellConfig, runner: ShellRunner) -> None:
    res = run_py(fast_config, runner, "while True: pass", entry="py_cpu")
    assert res.killed_by == "limit" and res.limit == "cpu"
    assert res.duration_s < 10


def test_file_size_limit_stops_a_huge_file(fast_config: ShellConfig, runner: ShellRunner) -> None:
    res = run_py(fast_config, runner, "open('/tmp/big', 'wb').write(b'z' * (5 << 20))")
    assert res.exit_code == 1 and "File too large" in res.stderr  # Python ignores SIGXFSZ: write gets EFBIG


def test_writes_go_to_a_throwaway_copy_not_the_workspace(
    fast_config: ShellConfig, runner: ShellRunner, workspace: Path
) -> None:
    before = sorted(p.name for p in Path("/tmp").glob("xihe-ws-*"))
    code = (
        "import os\nopen('agent/new.py', 'w').write('new')\nopen('README.md', 'w').write('changed')\n"
        "print(sorted(os.listdir('agent')), open('README.md').read())"
    )
    res = run_py(fast_config, runner, f"exec({code!r})", entry="py_write")
    assert res.exit_code == 0, res.stderr
    assert res.workspace_copy
    assert res.stdout == "['loop.py', 'new.py'] changed\n"
    assert not (workspace / "agent" / "new.py").exists()
    assert (workspace / "README.md").read_text() == "readme\n"
    assert sorted(p.name for p in Path("/tmp").glob("xihe-ws-*")) == before  # the copy was removed


def test_env_values_never_appear_in_the_bwrap_command_line(
    fast_config: ShellConfig, whitelist: Whitelist
) -> None:
    match = whitelist.from_args("py_net", {"code": "pass"})
    plan = plan_for(match, fast_config, environ={})
    cmd = BwrapSandbox().command(plan)
    assert "--unshare-net" not in cmd and "--unshare-pid" in cmd and "--die-with-parent" in cmd
    closed = BwrapSandbox().command(
        plan_for(whitelist.from_args("py", {"code": "pass"}), fast_config, environ={})
    )
    assert "--unshare-net" in closed
    assert not any("C.UTF-8" in part for part in cmd)  # env goes through Popen(env=...), not --setenv


def test_unavailable_sandbox_refuses_to_run(fast_config: ShellConfig, whitelist: Whitelist) -> None:
    runner = ShellRunner(
        fast_config, backend=BwrapSandbox(bwrap="/nonexistent/bwrap"), save_artifact=lambda b: "unused"
    )
    assert not runner.status().available
    with pytest.raises(ToolFailed, match="not available"):
        runner.run(whitelist.from_args("py", {"code": "print(1)"}))
    docker = ShellRunner(
        fast_config,
        backend=DockerSandbox("debian", docker="/nonexistent/docker"),
        save_artifact=lambda b: "unused",
    )
    with pytest.raises(ToolFailed, match="docker"):
        docker.run(whitelist.from_args("py", {"code": "print(1)"}))


def test_docker_command_isolates_like_bwrap(fast_config: ShellConfig, whitelist: Whitelist) -> None:
    plan = plan_for(whitelist.from_args("py", {"code": "pass"}), fast_config, environ={})
    cmd = DockerSandbox("debian:bookworm-slim", docker="docker").command(plan, "xihe-shell-test")
    joined = " ".join(cmd)
    for part in (
        "--network none",
        "--read-only",
        "--pids-limit 64",
        "--cap-drop ALL",
        "--user 61000:61000",
        "no-new-privileges",
        f"{fast_config.workspaces['repo']}:{fast_config.workspaces['repo']}:ro",
    ):
        assert part in joined
    assert "--env PATH" in joined and "/usr/bin" not in joined.split("debian:bookworm-slim")[0]


def test_sandbox_none_runs_loudly(workspace: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    text = config_text(workspace, timeout=3).replace("workspaces:", "sandbox: none\nworkspaces:", 1)
    config = load_shell_config(text)
    with caplog.at_level(logging.WARNING):
        runner = ShellRunner(config, save_artifact=TempArtifacts(tmp_path / "a"))
    assert runner.unsandboxed and "SANDBOX DISABLED" in caplog.text
    assert runner.status().detail.startswith("WARNING")
    res = run_py(config, runner, "import os; print(os.getcwd())")
    assert res.sandbox == "none" and res.stdout == f"{workspace}\n"
    slow = run_py(config, runner, "import time; time.sleep(60)")
    assert slow.killed_by == "timeout"
