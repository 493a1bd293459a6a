"""One cgroup per sandboxed command, so `memory_mb` and `processes` cap the whole command.

rlimits are per process (RLIMIT_AS) or per user (RLIMIT_NPROC): three forked children could each
use `memory_mb`. A cgroup caps their sum. What this host offers is detected once per process:

- v2: a cgroup2 hierarchy where the bot's own cgroup is writable (systemd `Delegate=yes`, a
  container with a writable cgroup namespace) and offers the memory and pids controllers. The bot
  moves its processes into `<own>/xihe-bot` (a cgroup with children may hold no processes) and creates
  `<own>/xihe-cmd-*` per command with memory.max, memory.swap.max=0, memory.oom.group=1, pids.max.
- v1: writable memory and pids hierarchies (the bot runs as root on a cgroup v1 or hybrid host):
  `xihe-cmd-*` under the bot's own cgroup in each, with memory.limit_in_bytes (and the
  memory+swap limit when swap accounting exists) and pids.max.
- none: only the per-process rlimits hold. `cgroup: required` in shell.yaml then refuses to run
  commands; `auto` runs them and says so in /help, the start-up log and `xihe config check`.

The child joins its cgroups itself (writes 0 to cgroup.procs) before it execs bubblewrap, so
every process of the command is inside from the start.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

log = logging.getLogger(__name__)

Version = Literal["v2", "v1", "none"]


@dataclass(frozen=True)
class Mount:
    """One cgroup mount from /proc/self/mountinfo."""

    root: str  # the hierarchy path mounted here
    point: Path
    fstype: str  # cgroup2 | cgroup
    options: frozenset[str]  # super options: the v1 controllers


def parse_mountinfo(text: str) -> list[Mount]:
    """The cgroup and cgroup2 mounts of a /proc/PID/mountinfo text."""
    out = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 5 or len(tail) < 3 or tail[0] not in ("cgroup", "cgroup2"):
            continue
        point = fields[4].replace("\\040", " ")
        out.append(Mount(fields[3], Path(point), tail[0], frozenset(tail[2].split(","))))
    return out


def parse_own(text: str) -> dict[str, str]:
    """Controller -> cgroup path from /proc/PID/cgroup; the v2 entry is keyed ''."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for controller in parts[1].split(",") if parts[1] else [""]:
                out[controller] = parts[2]
    return out


def _dir(mount: Mount, path: str) -> Path:
    rel = path[len(mount.root) :] if mount.root != "/" and path.startswith(mount.root) else path
    return mount.point / rel.lstrip("/")


def _writable(path: Path) -> bool:
    return path.is_dir() and os.access(path, os.W_OK | os.X_OK)


@dataclass(frozen=True)
class Support:
    """What this host offers: where per-command cgroups go, or why there are none."""

    version: Version
    memory: Path | None  # parent of the per-command memory cgroups (v2: of both controllers)
    pids: Path | None
    detail: str


def detect(mountinfo: str, own: str) -> Support:
    """Pure: the best cgroup support given /proc/self/mountinfo and /proc/self/cgroup."""
    mounts, paths = parse_mountinfo(mountinfo), parse_own(own)
    reasons = []
    v2 = next((m for m in mounts if m.fstype == "cgroup2"), None)
    if v2 is not None and "" in paths:
        base = _dir(v2, paths[""])
        try:
            controllers = set((base / "cgroup.controllers").read_text().split())
        except OSError:
            controllers = set()
        if not {"memory", "pids"} <= controllers:
            reasons.append(
                f"cgroup v2 at {base} offers {sorted(controllers) or 'no controllers'}, not memory+pids"
            )
        elif not _writable(base):
            reasons.append(f"cgroup v2 at {base} is not writable (delegate it to the bot's user)")
        else:
            return Support("v2", base, base, f"cgroup v2 under {base}")
    v1 = {c: m for m in mounts if m.fstype == "cgroup" for c in ("memory", "pids") if c in m.options}
    if "memory" in v1 and "pids" in v1 and "memory" in paths and "pids" in paths:
        mem, pids = _dir(v1["memory"], paths["memory"]), _dir(v1["pids"], paths["pids"])
        if _writable(mem) and _writable(pids):
            return Support("v1", mem, pids, f"cgroup v1 under {mem} and {pids}")
        reasons.append(f"cgroup v1 at {mem} / {pids} is not writable")
    elif not reasons:
        reasons.append("no cgroup hierarchy with the memory and pids controllers")
    return Support("none", None, None, "; ".join(reasons))


def _write(path: Path, value: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


class Cgroups:
    """Creates the per-command cgroups this host supports (detected once, prepared on first use)."""

    def __init__(self, support: Support) -> None:
        self.support = support
        self._prepared = support.version != "v2"

    @property
    def available(self) -> bool:
        """True when commands get their own cgroup."""
        return self.support.version != "none"

    def _prepare_v2(self) -> None:
        """Move the bot into a leaf and enable memory+pids for the per-command children."""
        base = self.support.memory
        assert base is not None
        enabled = set((base / "cgroup.subtree_control").read_text().split())
        if not {"memory", "pids"} <= enabled:
            leaf = base / "xihe-bot"
            leaf.mkdir(exist_ok=True)
            # the bot and whatever it runs right now (a delegated cgroup holds only the bot's processes)
            for pid in (base / "cgroup.procs").read_text().split():
                with contextlib.suppress(ProcessLookupError):
                    _write(leaf / "cgroup.procs", pid)
            _write(base / "cgroup.subtree_control", "+memory +pids")
        self._prepared = True

    def create(self, memory_bytes: int, processes: int) -> CommandCgroup:
        """A fresh cgroup (one per hierarchy) with the command's limits; OSError when that fails.

        When a v2 subtree cannot be prepared (e.g. other processes share the bot's cgroup), the
        support becomes `none` with that reason, so status and warnings tell the truth from then on.
        """
        if not self._prepared:
            try:
                self._prepare_v2()
            except OSError as exc:
                self.support = Support("none", None, None, f"{self.support.detail} cannot be prepared: {exc}")
                raise
        name = f"xihe-cmd-{uuid.uuid4().hex[:12]}"
        v = self.support.version
        assert v != "none" and self.support.memory is not None and self.support.pids is not None
        group = CommandCgroup(
            v, [self.support.memory / name] + ([self.support.pids / name] if v == "v1" else [])
        )
        try:
            for d in group.dirs:
                d.mkdir()
            mem = group.dirs[0]
            if v == "v2":
                _write(mem / "memory.max", str(memory_bytes))
                if (mem / "memory.swap.max").exists():
                    _write(mem / "memory.swap.max", "0")
                _write(mem / "memory.oom.group", "1")
                _write(mem / "pids.max", str(processes))
            else:
                _write(mem / "memory.limit_in_bytes", str(memory_bytes))
                if (mem / "memory.memsw.limit_in_bytes").exists():
                    _write(mem / "memory.memsw.limit_in_bytes", str(memory_bytes))
                _write(group.dirs[1] / "pids.max", str(processes))
        except OSError:
            group.close()
            raise
        return group


@dataclass
class CommandCgroup:
    """The cgroup(s) of one running command."""

    version: Version
    dirs: list[Path]

    @property
    def procs_files(self) -> list[str]:
        """The cgroup.procs files the child writes 0 to, joining before it execs."""
        return [str(d / "cgroup.procs") for d in self.dirs]

    def oom_kills(self) -> int:
        """How many processes the kernel killed for the memory limit."""
        name = "memory.events" if self.version == "v2" else "memory.oom_control"
        try:
            for line in (self.dirs[0] / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def kill(self) -> None:
        """SIGKILL every process still in the cgroup."""
        if self.version == "v2" and (self.dirs[0] / "cgroup.kill").exists():
            with contextlib.suppress(OSError):
                _write(self.dirs[0] / "cgroup.kill", "1")
            return
        for d in self.dirs:
            try:
                pids = (d / "cgroup.procs").read_text().split()
            except OSError:
                continue
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)

    def close(self) -> None:
        """Kill what is left and remove the cgroup (exiting processes may need a moment)."""
        for d in self.dirs:
            for attempt in range(2000):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if attempt == 0:
                        self.kill()
                    time.sleep(0.001)
            else:
                log.warning("could not remove the command cgroup %s", d)


_support: Support | None = None


def host_support() -> Support:
    """This process's cgroup support, detected once (the bot may move itself into a leaf later)."""
    global _support
    if _support is None:
        try:
            _support = detect(Path("/proc/self/mountinfo").read_text(), Path("/proc/self/cgroup").read_text())
        except OSError as exc:
            _support = Support("none", None, None, f"cannot read /proc/self: {exc}")
    return _support
