"""Run one wrapped command: the plan, the limits applied in the child, timeout, capped capture.

Each back end (bwrap.py, docker.py, sandbox.py's Unsandboxed) turns a RunPlan into an argv and
calls `execute`. The environment is built from scratch and handed over through `Popen(env=...)`,
so values never appear in the host's process list.
"""

from __future__ import annotations

import contextlib
import logging
import os
import resource
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from xihe.config.shell.entry import Entry
from xihe.config.shell.file import ShellConfig
from xihe.config.shell.sandbox import Limits
from xihe.tools.shell.capture import StreamCapture, pump
from xihe.tools.shell.whitelist import Match

log = logging.getLogger(__name__)

SaveArtifact = Callable[[bytes], str]
KilledBy = Literal["timeout", "limit"]

BASE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8"}


@dataclass(frozen=True)
class ShellResult:
    """The outcome of one sandboxed command, with output capped (head and tail kept)."""

    argv: tuple[str, ...]
    entry: str
    exit_code: int | None
    duration_s: float
    stdout: str
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool
    stdout_bytes: int
    stderr_bytes: int
    stdout_sha256: str
    stderr_sha256: str
    sandbox: str
    killed_by: KilledBy | None = None
    limit: str | None = None  # which limit: cpu | file_size | output | memory
    artifact_ref: str | None = None
    workspace_copy: bool = False
    # set when the sandbox failed before the command started (its exit code is then the sandbox's)
    sandbox_error: str | None = None

    @property
    def ok(self) -> bool:
        """True when the command exited 0 and was not killed."""
        return self.exit_code == 0 and self.killed_by is None

    @property
    def output_sha256(self) -> str:
        """One digest over both streams (sha256 of the two stream digests), for the audit record."""
        import hashlib

        return hashlib.sha256(f"{self.stdout_sha256}\n{self.stderr_sha256}".encode()).hexdigest()


@dataclass(frozen=True)
class RunPlan:
    """Everything a back end needs to run one matched command."""

    argv: tuple[str, ...]
    entry: str
    env: Mapping[str, str]
    workspaces: Mapping[str, Path]  # resolved real paths bound into the sandbox
    writable: Path | None  # the workspace that gets a throwaway copy
    cwd: Path | None
    network: bool
    timeout_s: float
    output_cap: int
    limits: Limits
    artifact_cap: int
    ro_binds: tuple[str, ...] = ()
    uid: int = 61000  # the command's own uid (= gid); the bwrap back end takes one from `uids`
    uids: tuple[int, int] = (61000, 1000)  # run_as_uids: first, count


def plan_for(match: Match, config: ShellConfig, environ: Mapping[str, str] | None = None) -> RunPlan:
    """Build the run plan of a matched command from the config (env allow-list, binds, limits)."""
    entry: Entry = match.entry
    environ = os.environ if environ is None else environ
    env = {**BASE_ENV, **entry.env, **{k: environ[k] for k in entry.env_pass if k in environ}}
    names = {entry.workspace} if entry.workspace else set()
    for spec in entry.args.values():
        root = spec.root or entry.workspace
        if spec.type == "path" and root:
            names.add(root)
    roots = {n: Path(config.workspaces[n]).resolve() for n in sorted(x for x in names if x)}
    env.update(safe_directories(env, [str(r) for r in roots.values()]))
    main = roots.get(entry.workspace) if entry.workspace else None
    return RunPlan(
        argv=match.argv,
        entry=entry.name,
        env=env,
        workspaces=roots,
        writable=main if entry.writes else None,
        cwd=(main / entry.cwd) if main else None,
        network=entry.network,
        timeout_s=entry.timeout_seconds,
        output_cap=entry.output_cap_bytes,
        limits=entry.limits or config.limits,
        artifact_cap=config.artifact_cap_mb << 20,
        ro_binds=tuple(config.ro_binds),
        uid=config.run_as_uids.first,
        uids=(config.run_as_uids.first, config.run_as_uids.count),
    )


def safe_directories(env: Mapping[str, str], paths: list[str]) -> dict[str, str]:
    """GIT_CONFIG_* entries marking the workspaces safe for git (after any the entry sets itself).

    The command's uid is not the checkout's owner, and git refuses a repository owned by someone
    else ("dubious ownership") unless `safe.directory` names it in a protected (here: command) scope.
    """
    if not paths:
        return {}
    n = int(env.get("GIT_CONFIG_COUNT", "0") or 0)
    out = {f"GIT_CONFIG_KEY_{n + i}": "safe.directory" for i in range(len(paths))}
    out.update({f"GIT_CONFIG_VALUE_{n + i}": p for i, p in enumerate(paths)})
    out["GIT_CONFIG_COUNT"] = str(n + len(paths))
    return out


def limits_preexec(
    limits: Limits, *, nproc: bool = True, cgroup_procs: Sequence[str] = ()
) -> Callable[[], None]:
    """A preexec_fn run in the child before exec: join the command's cgroups, then set the rlimits
    (inherited by everything the command starts; RLIMIT_NPROC only when `nproc`)."""
    cpu, mem = limits.cpu_seconds, limits.memory_mb << 20
    procs, fsize = limits.processes, limits.file_size_mb << 20

    def apply() -> None:
        for path in cgroup_procs:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, b"0")  # 0 = the writing process
            finally:
                os.close(fd)
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))  # SIGXCPU, then SIGKILL a second later
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        if nproc:
            resource.setrlimit(resource.RLIMIT_NPROC, (procs, procs))
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


@dataclass
class _Run:
    """Mutable bookkeeping of one execution, shared with the reader threads."""

    killed_by: KilledBy | None = None
    limit: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


def execute(
    cmd: list[str],
    plan: RunPlan,
    *,
    sandbox: str,
    save_artifact: SaveArtifact | None,
    signal_offset: bool,
    on_kill: Callable[[], None] | None = None,
    workspace_copy: bool = False,
    cwd: Path | None = None,
    preexec: Callable[[], None] | None = None,
    pass_fds: Sequence[int] = (),
) -> ShellResult:
    """Spawn `cmd` (already wrapped by a back end), enforce timeout and output caps, capture output.

    `preexec` defaults to the plan's rlimits; `on_kill` runs after a timeout or limit kill."""
    cap = plan.output_cap
    max_output = plan.limits.max_output_mb << 20
    out = StreamCapture(cap // 2, cap - cap // 2, plan.artifact_cap // 2)
    err = StreamCapture(cap // 2, cap - cap // 2, plan.artifact_cap // 2)
    state = _Run()
    started = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(plan.env),
        cwd=str(cwd or "/"),
        start_new_session=True,
        close_fds=True,
        pass_fds=tuple(pass_fds),
        preexec_fn=preexec or limits_preexec(plan.limits),
    )

    def kill(reason: KilledBy, limit: str | None = None) -> None:
        with state.lock:
            if state.killed_by is None:
                state.killed_by, state.limit = reason, limit
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        if on_kill is not None:
            on_kill()

    def check_output(_n: int) -> None:
        if out.total + err.total > max_output and state.killed_by is None:
            kill("limit", "output")

    assert proc.stdout is not None and proc.stderr is not None
    threads = [pump(proc.stdout.fileno(), out, check_output), pump(proc.stderr.fileno(), err, check_output)]
    # A blocking wait plus a watchdog timer: Popen.wait(timeout=...) polls with growing sleeps, which
    # added up to ~10 ms of latency to every short command.
    watchdog = threading.Timer(plan.timeout_s, kill, args=("timeout",))
    watchdog.daemon = True
    watchdog.start()
    try:
        proc.wait()
    finally:
        watchdog.cancel()
    for t in threads:
        t.join(timeout=5)
    if any(t.is_alive() for t in threads):  # a descendant kept the pipe open: stop listening
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    proc.stdout.close()
    proc.stderr.close()
    duration = time.monotonic() - started
    code = proc.returncode
    killed_by, limit = state.killed_by, state.limit
    sig = -code if code < 0 else (code - 128 if signal_offset and code > 128 else 0)
    if killed_by is None and sig in (signal.SIGXCPU, signal.SIGKILL):
        killed_by, limit = "limit", "cpu"
    elif killed_by is None and sig == signal.SIGXFSZ:
        killed_by, limit = "limit", "file_size"
    artifact_ref = None
    if save_artifact is not None and (out.total or err.total):
        blob = b"--- stdout ---\n" + bytes(out.spool)
        if out.total > len(out.spool):
            blob += f"\n[... cut at {len(out.spool)} of {out.total} bytes ...]".encode()
        blob += b"\n--- stderr ---\n" + bytes(err.spool)
        if err.total > len(err.spool):
            blob += f"\n[... cut at {len(err.spool)} of {err.total} bytes ...]".encode()
        artifact_ref = save_artifact(blob)
    return ShellResult(
        argv=plan.argv,
        entry=plan.entry,
        exit_code=code,
        duration_s=duration,
        stdout=out.text(),
        stderr=err.text(),
        stdout_truncated=out.truncated,
        stderr_truncated=err.truncated,
        stdout_bytes=out.total,
        stderr_bytes=err.total,
        stdout_sha256=out.sha256,
        stderr_sha256=err.sha256,
        sandbox=sandbox,
        killed_by=killed_by,
        limit=limit,
        artifact_ref=artifact_ref,
        workspace_copy=workspace_copy,
    )


def throwaway_copy(src: Path, uid: int | None, gid: int | None) -> Path:
    """Copy a workspace to a temp dir (symlinks kept as links) owned by the sandbox user."""
    tmp = Path(tempfile.mkdtemp(prefix="xihe-ws-"))
    dest = tmp / "ws"
    shutil.copytree(src, dest, symlinks=True)
    if uid is not None and gid is not None:
        for dirpath, dirnames, filenames in os.walk(dest):
            for name in (*dirnames, *filenames):
                os.lchown(os.path.join(dirpath, name), uid, gid)
        os.lchown(dest, uid, gid)
    return dest
