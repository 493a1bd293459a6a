"""bubblewrap back end (Debian package `bubblewrap`, 0.8 or newer).

Layout: fresh PID/IPC/UTS/cgroup (and network unless the entry allows it) namespaces, /usr and the
/bin, /lib* links read-only, a few /etc files, the entry's workspaces read-only (or a throwaway copy
bound over the real path when the entry writes), a private size-capped /tmp, a read-only root,
`--die-with-parent`.

Each command runs as its own uid (= gid) from `run_as_uids`, in its own user namespace created
with `--disable-userns`, so it cannot create nested user namespaces (and gain capabilities there):

- bot is root: bwrap sets up the mounts as root, `setpriv` drops to the command's uid, and an
  inner unprivileged bwrap (`--bind / /`) adds the user namespace. RLIMIT_NPROC then counts that
  uid only (it is not enforced for uid 0 at all).
- bot is not root: bwrap runs unprivileged with `--unshare-user --uid N`; the uid is the command's
  inside its own namespace, which is where RLIMIT_NPROC is set (`prlimit`, after bwrap created the
  namespace), so the count is per command and not shared with the bot or other users' commands.

Where the host forbids user namespaces the probe falls back to the same layout without them
(as root: setpriv to the command's uid still keeps RLIMIT_NPROC per command). Memory and processes
of the whole command are capped by its cgroup when the host offers one (tools/shell/cgroup.py).
`warnings()` names every weaker mode in use (shown by /help, the log and `xihe config check`).

bubblewrap exits 1 when it cannot set the sandbox up (no free process under the uid's RLIMIT_NPROC,
a failed mount): the same code as a command saying "no". The innermost bwrap is given
`--json-status-fd`, which carries an `exit-code` record only once the command itself was started;
without one the result says `sandbox_error`, so a `check:` exit 1 is never read as "did not happen"
when the check never ran.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

from xihe.agent.errors import ToolFailed
from xihe.agent.i18n import text
from xihe.config.shell.sandbox import Limits
from xihe.tools.shell import uids
from xihe.tools.shell.cgroup import Cgroups, CommandCgroup, host_support
from xihe.tools.shell.execute import (
    BASE_ENV,
    RunPlan,
    SaveArtifact,
    ShellResult,
    execute,
    limits_preexec,
    throwaway_copy,
)
from xihe.tools.shell.messages import SH

log = logging.getLogger(__name__)

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
DISABLE_USERNS_SINCE = (0, 8)
STATUS_SINCE = (0, 5)  # --json-status-fd reports the command's exit code


def command_started(status: bytes) -> bool:
    """Whether bwrap's `--json-status-fd` output holds an `exit-code` record: the command itself ran."""
    for line in status.decode(errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            record = json.loads(line)
            if isinstance(record, dict) and "exit-code" in record:
                return True
    return False


def read_available(fd: int) -> bytes:
    """What the pipe `fd` holds now, without waiting for writers that may still have it open."""
    os.set_blocking(fd, False)
    chunks = []
    with contextlib.suppress(BlockingIOError):
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    return b"".join(chunks)


def setup_error(stderr: str) -> str:
    """bubblewrap's own complaint in the command's stderr (`bwrap: ...`), or a plain statement."""
    said = [line for line in stderr.splitlines() if line.startswith(("bwrap:", "setpriv:", "prlimit:"))]
    return said[-1][:300] if said else "the sandbox exited before starting the command"


def parse_version(text: str) -> tuple[int, ...] | None:
    """`bubblewrap 0.8.0` -> (0, 8, 0); None when the text names no version."""
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    return tuple(int(x) for x in m.groups() if x is not None) if m else None


def _parents(paths: list[str]) -> list[str]:
    """Ancestor directories of bind targets that bwrap must create, outside the system binds, shallow first."""
    out: set[str] = set()
    for p in paths:
        for parent in Path(p).parents:
            if str(parent) not in ("/", "/tmp") and not str(parent).startswith(("/usr", "/proc", "/dev")):
                out.add(str(parent))
    return sorted(out, key=lambda x: (x.count("/"), x))


def host_allows_userns() -> bool:
    """False when the host's sysctls forbid user namespaces to unprivileged users."""
    for path, off in (
        ("/proc/sys/user/max_user_namespaces", "0"),
        ("/proc/sys/kernel/unprivileged_userns_clone", "0"),
    ):
        try:
            if Path(path).read_text().strip() == off:
                return False
        except OSError:
            continue
    return True


def _real(path: str | None) -> str:
    """The resolved path of a helper program ('' when missing): /bin is only a link inside."""
    return os.path.realpath(path) if path else ""


class BwrapSandbox:
    """Runs plans in bubblewrap, each command with its own uid, user namespace and cgroup."""

    name = "bwrap"

    def __init__(
        self,
        bwrap: str | None = None,
        setpriv: str | None = None,
        prlimit: str | None = None,
        *,
        cgroups: Cgroups | None = None,
        cgroup: str = "auto",
        uid_range: tuple[int, int] = (61000, 1000),
    ) -> None:
        self.bwrap = _real(bwrap if bwrap is not None else shutil.which("bwrap"))
        self.setpriv = _real(setpriv if setpriv is not None else shutil.which("setpriv"))
        self.prlimit = _real(prlimit if prlimit is not None else shutil.which("prlimit"))
        self.root = os.geteuid() == 0
        self.cgroups = cgroups if cgroups is not None else Cgroups(host_support())
        self.cgroup_mode = cgroup  # shell.yaml `cgroup`: auto | required | none
        self.uid_range = uid_range
        self.version: tuple[int, ...] | None = None
        self.userns = True  # each command in its own user namespace; False where the host forbids them
        self._available: bool | None = None
        self._why = ""

    @property
    def disables_userns(self) -> bool:
        """Whether this bubblewrap can forbid nested user namespaces (`--disable-userns`, 0.8+)."""
        return self.version is not None and self.version >= DISABLE_USERNS_SINCE

    def available(self) -> bool:
        """bwrap exists and runs a probe command the way real commands run (probed once)."""
        if self._available is None:
            self._available = self._probe()
        return self._available

    def _probe(self) -> bool:
        if not self.bwrap:
            self._why = "bwrap not found"
            return False
        if self.root and not self.setpriv:
            self._why = "setpriv (util-linux) is needed to drop root"
            return False
        if self.cgroup_mode == "required" and not self.cgroups.available:
            self._why = f"cgroup: required, but {self.cgroups.support.detail}"
            return False
        try:
            out = subprocess.run([self.bwrap, "--version"], capture_output=True, text=True, timeout=10)
            self.version = parse_version(out.stdout)
            with uids.held(*self.uid_range) as uid:
                plan = RunPlan(
                    argv=("/usr/bin/true",),
                    entry="probe",
                    env={"PATH": BASE_ENV["PATH"]},
                    workspaces={},
                    writable=None,
                    cwd=None,
                    network=False,
                    timeout_s=10,
                    output_cap=1024,
                    limits=Limits.model_validate({}),
                    artifact_cap=0,
                    uid=uid,
                )
                for userns in (True, False):  # without: a host that forbids user namespaces
                    self.userns = userns
                    probe = subprocess.run(
                        self.command(plan), capture_output=True, timeout=10, env={"PATH": BASE_ENV["PATH"]}
                    )
                    if probe.returncode == 0:
                        break
        except (OSError, subprocess.SubprocessError, ToolFailed) as exc:
            self._why = str(exc)
            return False
        self._why = probe.stderr.decode(errors="replace").strip()[:300]
        if probe.returncode == 0 and not self.userns:
            log.warning("bubblewrap cannot create user namespaces here; commands run without their own")
        return probe.returncode == 0

    @property
    def why_unavailable(self) -> str:
        """What the probe found when bwrap cannot run commands here."""
        return self._why

    def warnings(self) -> list[str]:
        """Every way this host runs commands with weaker isolation than designed."""
        out = []
        if self.cgroup_mode == "none":
            out.append(
                "memory_mb and processes hold per process, not per command (cgroup: none in shell.yaml)"
            )
        elif not self.cgroups.available:
            out.append(
                "memory_mb and processes hold per process, not per command (no cgroup: "
                f"{self.cgroups.support.detail}); a command that forks can use more in total"
            )
        if not self.available():
            return out
        if not self.userns and not self.root:
            out.append(
                "bubblewrap cannot create user namespaces here: every command runs as the bot's uid, and "
                "RLIMIT_NPROC counts all commands together"
            )
        nested_possible = host_allows_userns() and (not self.userns or not self.disables_userns)
        if nested_possible:
            shown = ".".join(map(str, self.version)) if self.version else "unknown"
            why = (
                f"bubblewrap {shown} is older than 0.8"
                if self.userns
                else "the sandbox has no user namespace"
            )
            out.append(
                f"{why}: commands can create nested user namespaces (upgrade bubblewrap, or set the host "
                "sysctl user.max_user_namespaces=0 if the bot runs as root)"
            )
        if self.userns and not self.prlimit:
            out.append("prlimit not found: RLIMIT_NPROC is set before the command's user namespace exists")
        return out

    def _base_binds(self) -> list[str]:
        args = ["--ro-bind", "/usr", "/usr"]
        for top in TOP_LINKS:
            p = Path("/", top)
            if p.is_symlink():
                args += ["--symlink", os.readlink(p), str(p)]
            elif p.is_dir():
                args += ["--ro-bind", str(p), str(p)]
        return args

    def _userns(self, uid: int) -> list[str]:
        disable = ["--disable-userns"] if self.disables_userns else []
        return ["--unshare-user", *disable, "--uid", str(uid), "--gid", str(uid)]

    @property
    def reports_status(self) -> bool:
        """Whether this bubblewrap says, through `--json-status-fd`, that it started the command."""
        return self.version is not None and self.version >= STATUS_SINCE

    def command(
        self, plan: RunPlan, workspace_copy: Path | None = None, status_fd: int | None = None
    ) -> list[str]:
        """The full argv for a plan (pure apart from looking at which host paths exist).

        `status_fd` goes to the innermost bwrap, the one that starts the command."""
        inner = self.root and self.userns  # root: an inner unprivileged bwrap adds the user namespace
        status = ["--json-status-fd", str(status_fd)] if status_fd is not None else []
        cmd = [self.bwrap] + (self._userns(plan.uid) if self.userns and not self.root else [])
        cmd += [] if inner else status
        cmd += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
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
        helpers = [self.setpriv] if self.root else []  # run inside: bind them if not under /usr
        helpers += [self.bwrap] if inner else []
        helpers = [h for h in [*helpers, self.prlimit] if h and not h.startswith("/usr/")]
        binds = [*etc, *plan.ro_binds, *helpers]
        # parents of bind targets would otherwise be created root-only (0700) and block the sandbox user
        for parent in _parents([*binds, *map(str, plan.workspaces.values())]):
            cmd += ["--perms", "0755", "--dir", parent]
        for path in binds:
            cmd += ["--ro-bind-try", path, path]
        for root in plan.workspaces.values():
            if workspace_copy is not None and root == plan.writable:
                cmd += ["--bind", str(workspace_copy), str(root)]  # the copy shadows the real checkout
            else:
                cmd += ["--ro-bind", str(root), str(root)]
        cwd = str(plan.cwd or "/tmp")
        cmd += ["--remount-ro", "/", "--chdir", cwd]
        nproc = [self.prlimit, f"--nproc={plan.limits.processes}", "--"] if self.prlimit else []
        if self.root:
            drop = ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--"]
            uid = f"{plan.uid}"
            cmd += [
                *drop,
                self.setpriv,
                f"--reuid={uid}",
                f"--regid={uid}",
                "--clear-groups",
                "--no-new-privs",
            ]
            if inner:
                cmd += ["--", self.bwrap, *self._userns(plan.uid), *status, "--die-with-parent"]
                cmd += ["--bind", "/", "/"]
                cmd += ["--dev", "/dev"]  # device nodes of the outer /dev are unusable from the new namespace
                cmd += ["--chdir", cwd]
        return [*cmd, "--", *nproc, *plan.argv]

    def run(self, plan: RunPlan, save_artifact: SaveArtifact | None) -> ShellResult:
        """Run inside bubblewrap; a writing entry works on a throwaway copy removed afterwards."""
        use_cgroup = self.cgroup_mode != "none" and self.cgroups.available
        with uids.held(*plan.uids) as uid:
            plan = replace(plan, uid=uid)
            group: CommandCgroup | None = None
            copy = None
            status_r: int | None = None
            status_w: int | None = None
            try:
                if use_cgroup:
                    try:
                        group = self.cgroups.create(plan.limits.memory_mb << 20, plan.limits.processes)
                    except OSError as exc:
                        if self.cgroup_mode == "required":
                            why = text(SH, "no_cgroup", entry=repr(plan.entry), error=exc)
                            raise ToolFailed(why) from None
                        log.warning("%s runs with per-process limits only: no cgroup (%s)", plan.entry, exc)
                if plan.writable is not None:
                    owner = uid if self.root else None
                    copy = throwaway_copy(plan.writable, owner, owner)
                if self.reports_status:
                    status_r, status_w = os.pipe()
                result = execute(
                    self.command(plan, copy, status_w),
                    plan,
                    sandbox=self.name,
                    save_artifact=save_artifact,
                    signal_offset=True,
                    on_kill=group.kill if group is not None else None,
                    workspace_copy=copy is not None,
                    preexec=limits_preexec(
                        plan.limits,
                        nproc=self.root or not self.prlimit or not self.userns,
                        cgroup_procs=group.procs_files if group is not None else (),
                    ),
                    pass_fds=(status_w,) if status_w is not None else (),
                )
                started = status_r is None or command_started(read_available(status_r))
                if not started and result.killed_by is None:
                    result = replace(result, sandbox_error=setup_error(result.stderr))
                if group is not None and group.oom_kills() and result.killed_by != "timeout":
                    result = replace(result, killed_by="limit", limit="memory")
                return result
            finally:
                for fd in (status_r, status_w):
                    if fd is not None:
                        os.close(fd)
                if group is not None:
                    group.close()
                if copy is not None:
                    shutil.rmtree(copy.parent, ignore_errors=True)
