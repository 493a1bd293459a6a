"""Run a matched argv without a shell inside a sandbox: bubblewrap by default, Docker when configured.

bwrap layout: fresh PID/IPC/UTS (and network unless the entry allows it) namespaces, /usr and the
/bin, /lib* links read-only, a few /etc files, the entry's workspaces read-only (or a throwaway copy
bound over the real path when the entry writes), a private size-capped /tmp, a read-only root, and
`--die-with-parent`. When the bot is root, the command itself runs as `run_as_uid` through
`setpriv`, because RLIMIT_NPROC is not enforced for uid 0 and a fork bomb would not be stopped.
Resource limits are set with `resource.setrlimit` in the child before exec; a wall-clock timeout
kills the whole process group (the PID namespace dies with bwrap). The environment is built from
scratch and handed to bwrap through `Popen(env=...)` rather than `--setenv`, so values never
appear in the host's process list.
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
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from agent.errors import ToolFailed
from config.shell import Entry, Limits, ShellConfig
from tools.shell.capture import StreamCapture, TempArtifacts, pump
from tools.shell.whitelist import Match

log = logging.getLogger(__name__)

SaveArtifact = Callable[[bytes], str]
KilledBy = Literal["timeout", "limit"]
BASE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8"}
# Only what common tools need: each bind mount costs start-up time (about 0.3 ms each).
ETC_FILES = (
    "ld.so.cache",
    "alternatives",
    "localtime",
    "passwd",
    "group",
    "nsswitch.conf",
    "ssl",
    "gitconfig",
)
NET_ETC_FILES = ("resolv.conf", "hosts", "gai.conf", "host.conf")
TOP_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")


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
    uid: int = 65534
    gid: int = 65534


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
        gid=config.run_as_uids.first,
    )


def _limits_preexec(limits: Limits) -> Callable[[], None]:
    """A preexec_fn that applies the rlimits in the child before exec (inherited by bwrap's children)."""
    cpu, mem = limits.cpu_seconds, limits.memory_mb << 20
    nproc, fsize = limits.processes, limits.file_size_mb << 20

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))  # SIGXCPU, then SIGKILL a second later
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
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
) -> ShellResult:
    """Spawn `cmd` (already wrapped by a back end), enforce timeout and output caps, capture output."""
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
        preexec_fn=_limits_preexec(plan.limits),
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


class Backend(Protocol):
    """A way to run a RunPlan; `available()` says whether it works on this host."""

    name: str

    def available(self) -> bool:
        """True when this back end can run commands here."""
        ...

    def run(self, plan: RunPlan, save_artifact: SaveArtifact | None) -> ShellResult:
        """Run the plan and return its result; never raises for the command's own failure."""
        ...


def _throwaway_copy(src: Path, uid: int | None, gid: int | None) -> Path:
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


def _parents(paths: list[str]) -> list[str]:
    """Ancestor directories of bind targets that bwrap must create, outside the system binds, shallow first."""
    out: set[str] = set()
    for p in paths:
        for parent in Path(p).parents:
            if str(parent) not in ("/", "/tmp") and not str(parent).startswith(("/usr", "/proc", "/dev")):
                out.add(str(parent))
    return sorted(out, key=lambda x: (x.count("/"), x))


class BwrapSandbox:
    """bubblewrap back end (Debian package `bubblewrap`, 0.8 or newer)."""

    name = "bwrap"

    def __init__(self, bwrap: str | None = None, setpriv: str | None = None) -> None:
        self.bwrap = bwrap or shutil.which("bwrap") or ""
        self.setpriv = setpriv if setpriv is not None else (shutil.which("setpriv") or "")
        self.root = os.geteuid() == 0
        self._available: bool | None = None

    def available(self) -> bool:
        """bwrap exists and can create namespaces here (probed once)."""
        if self._available is None:
            ok = bool(self.bwrap)
            if ok:
                try:
                    probe = subprocess.run(
                        [
                            self.bwrap,
                            *self._base_binds(),
                            "--unshare-pid",
                            "--unshare-net",
                            "--",
                            "/usr/bin/true",
                        ],
                        capture_output=True,
                        timeout=10,
                        env={"PATH": BASE_ENV["PATH"]},
                    )
                    ok = probe.returncode == 0
                except (OSError, subprocess.SubprocessError):
                    ok = False
            self._available = ok
        return self._available

    def _base_binds(self) -> list[str]:
        args = ["--ro-bind", "/usr", "/usr"]
        for top in TOP_LINKS:
            p = Path("/", top)
            if p.is_symlink():
                args += ["--symlink", os.readlink(p), str(p)]
            elif p.is_dir():
                args += ["--ro-bind", str(p), str(p)]
        return args

    def command(self, plan: RunPlan, workspace_copy: Path | None = None) -> list[str]:
        """The full bwrap argv for a plan (pure apart from looking at which host paths exist)."""
        cmd = [self.bwrap, "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        if not plan.network:
            cmd.append("--unshare-net")
        cmd += ["--die-with-parent", "--new-session", *self._base_binds()]
        etc = [
            f"/etc/{n}"
            for n in ETC_FILES + (NET_ETC_FILES if plan.network else ())
            if os.path.lexists(f"/etc/{n}")
        ]
        cmd += ["--proc", "/proc", "--dev", "/dev"]
        cmd += ["--perms", "1777", "--size", str(plan.limits.tmp_size_mb << 20), "--tmpfs", "/tmp"]
        # parents of bind targets would otherwise be created root-only (0700) and block the sandbox user
        for parent in _parents([*etc, *plan.ro_binds, *map(str, plan.workspaces.values())]):
            cmd += ["--perms", "0755", "--dir", parent]
        for path in [*etc, *plan.ro_binds]:
            cmd += ["--ro-bind-try", path, path]
        for root in plan.workspaces.values():
            if workspace_copy is not None and root == plan.writable:
                cmd += ["--bind", str(workspace_copy), str(root)]  # the copy shadows the real checkout
            else:
                cmd += ["--ro-bind", str(root), str(root)]
        cmd += ["--remount-ro", "/", "--chdir", str(plan.cwd or "/tmp")]
        if self.root and self.setpriv:
            cmd += [
                "--cap-drop",
                "ALL",
                "--cap-add",
                "CAP_SETUID",
                "--cap-add",
                "CAP_SETGID",
                "--",
                self.setpriv,
                f"--reuid={plan.uid}",
                f"--regid={plan.gid}",
                "--clear-groups",
                "--no-new-privs",
                "--",
            ]
        elif self.root:
            cmd += ["--cap-drop", "ALL", "--"]
        else:
            cmd += ["--"]
        return cmd + list(plan.argv)

    def run(self, plan: RunPlan, save_artifact: SaveArtifact | None) -> ShellResult:
        """Run inside bubblewrap; a writing entry works on a throwaway copy removed afterwards."""
        if self.root and not self.setpriv:
            log.warning(
                "setpriv not found: sandboxed commands run as root inside bwrap; RLIMIT_NPROC is not enforced"
            )
        copy = None
        try:
            if plan.writable is not None:
                copy = _throwaway_copy(
                    plan.writable, plan.uid if self.root and self.setpriv else None, plan.gid
                )
            return execute(
                self.command(plan, copy),
                plan,
                sandbox=self.name,
                save_artifact=save_artifact,
                signal_offset=True,
                workspace_copy=copy is not None,
            )
        finally:
            if copy is not None:
                shutil.rmtree(copy.parent, ignore_errors=True)


class DockerSandbox:
    """Docker back end: used only when configured and `docker info` answers."""

    name = "docker"

    def __init__(self, image: str, docker: str | None = None) -> None:
        self.image = image
        self.docker = docker or shutil.which("docker") or ""
        self._available: bool | None = None

    def available(self) -> bool:
        """The docker client exists and its engine answers `docker info` (probed once)."""
        if self._available is None:
            ok = bool(self.docker)
            if ok:
                try:
                    ok = (
                        subprocess.run([self.docker, "info"], capture_output=True, timeout=10).returncode == 0
                    )
                except (OSError, subprocess.SubprocessError):
                    ok = False
            self._available = ok
        return self._available

    def command(self, plan: RunPlan, name: str, workspace_copy: Path | None = None) -> list[str]:
        """The `docker run` argv for a plan; env values come from the client's environment (`-e NAME`)."""
        lim = plan.limits
        cmd = [
            self.docker,
            "run",
            "--rm",
            "--name",
            name,
            "--network",
            "bridge" if plan.network else "none",
            "--read-only",
            "--tmpfs",
            f"/tmp:rw,size={lim.tmp_size_mb}m,mode=1777",
            "--pids-limit",
            str(lim.processes),
            "--memory",
            f"{lim.memory_mb}m",
            "--ulimit",
            f"cpu={lim.cpu_seconds}:{lim.cpu_seconds + 1}",
            "--ulimit",
            f"fsize={lim.file_size_mb << 20}:{lim.file_size_mb << 20}",
            "--cap-drop",
            "ALL",
            "--security-opt",
            "no-new-privileges",
            "--user",
            f"{plan.uid}:{plan.gid}",
            "--workdir",
            str(plan.cwd or "/tmp"),
        ]
        for root in plan.workspaces.values():
            if workspace_copy is not None and root == plan.writable:
                cmd += ["--volume", f"{workspace_copy}:{root}:rw"]
            else:
                cmd += ["--volume", f"{root}:{root}:ro"]
        for key in plan.env:
            cmd += ["--env", key]
        return [*cmd, self.image, *plan.argv]

    def run(self, plan: RunPlan, save_artifact: SaveArtifact | None) -> ShellResult:
        """Run in a throwaway container; on timeout the container is killed by name."""
        name = f"xihe-shell-{uuid.uuid4().hex[:12]}"
        copy = _throwaway_copy(plan.writable, plan.uid, plan.gid) if plan.writable is not None else None

        def kill_container() -> None:
            subprocess.run([self.docker, "kill", name], capture_output=True, timeout=10, check=False)

        env = {**plan.env, "PATH": os.environ.get("PATH", BASE_ENV["PATH"])}
        try:
            return execute(
                self.command(plan, name, copy),
                _with_env(plan, env),
                sandbox=self.name,
                save_artifact=save_artifact,
                signal_offset=True,
                on_kill=kill_container,
                workspace_copy=copy is not None,
            )
        finally:
            if copy is not None:
                shutil.rmtree(copy.parent, ignore_errors=True)


def _with_env(plan: RunPlan, env: Mapping[str, str]) -> RunPlan:
    from dataclasses import replace

    return replace(plan, env=dict(env))


class Unsandboxed:
    """`sandbox: none`: the admin's explicit opt-out. Still no shell, rlimits and process-group kill."""

    name = "none"

    def available(self) -> bool:
        """Always available."""
        return True

    def run(self, plan: RunPlan, save_artifact: SaveArtifact | None) -> ShellResult:
        """Run directly in the workspace (a writing entry still gets a throwaway copy as its cwd)."""
        copy = _throwaway_copy(plan.writable, None, None) if plan.writable is not None else None
        try:
            cwd = plan.cwd or Path(tempfile.gettempdir())
            if copy is not None and plan.writable is not None and plan.cwd is not None:
                cwd = copy / plan.cwd.relative_to(plan.writable)
            return execute(
                list(plan.argv),
                plan,
                sandbox=self.name,
                save_artifact=save_artifact,
                signal_offset=False,
                workspace_copy=copy is not None,
                cwd=cwd,
            )
        finally:
            if copy is not None:
                shutil.rmtree(copy.parent, ignore_errors=True)


def make_backend(config: ShellConfig) -> Backend:
    """The back end the config names (availability is checked when used, not here)."""
    if config.sandbox == "bwrap":
        return BwrapSandbox()
    if config.sandbox == "docker":
        return DockerSandbox(config.docker_image)
    return Unsandboxed()


@dataclass(frozen=True)
class SandboxStatus:
    """What `/help` and start-up logging show about the sandbox."""

    backend: str
    available: bool
    unsandboxed: bool
    detail: str


class ShellRunner:
    """Runs matched commands in the configured sandbox; refuses when that sandbox is missing."""

    def __init__(
        self,
        config: ShellConfig,
        *,
        save_artifact: SaveArtifact | None = None,
        backend: Backend | None = None,
    ) -> None:
        self.config = config
        self.save_artifact = (
            save_artifact
            if save_artifact is not None
            else TempArtifacts(max_bytes=config.artifact_cap_mb << 20)
        )
        self.backend: Backend = backend if backend is not None else make_backend(config)
        if self.backend.name == "none":
            log.warning(
                "SHELL SANDBOX DISABLED (sandbox: none in shell.yaml): whitelisted commands run directly "
                "on this host with the bot's privileges"
            )

    @property
    def unsandboxed(self) -> bool:
        """True when the admin opted out of sandboxing; the lead shows this in /help."""
        return self.backend.name == "none"

    def status(self) -> SandboxStatus:
        """Back end name, whether it works here, and a sentence for /help."""
        ok = self.backend.available()
        if self.unsandboxed:
            detail = "WARNING: shell commands run without a sandbox (sandbox: none)"
        elif ok:
            detail = f"shell commands run in {self.backend.name}"
        else:
            detail = f"shell commands are refused: sandbox {self.backend.name} is not available on this host"
        return SandboxStatus(self.backend.name, ok, self.unsandboxed, detail)

    def run(self, match: Match, save_artifact: SaveArtifact | None = None) -> ShellResult:
        """Run one matched command (artifact callback per call if given); ToolFailed when no sandbox."""
        if not self.backend.available():
            raise ToolFailed(
                f"refusing to run {match.entry.name!r}: sandbox {self.backend.name!r} is not available on this host "
                "(install bubblewrap, start Docker, or have an admin set sandbox: none)"
            )
        return self.backend.run(plan_for(match, self.config), save_artifact or self.save_artifact)
