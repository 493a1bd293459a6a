"""A bot process for sandbox tests: runs one scenario with a real ShellRunner and prints JSON.

    python -m tests.shell.bot_proc < {"config": SHELL_YAML_TEXT, "scenario": NAME}

Tests start it as root or, through `as_user`, as an unprivileged uid (the shipped Dockerfile,
systemd unit and k8s manifests run the bot as non-root).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from xihe.config.shell.file import load_shell_config
from xihe.tools.shell.sandbox import ShellResult, ShellRunner
from xihe.tools.shell.whitelist import Whitelist

MARKER = "xihe-bomb-marker"
BOMB = (
    f"import os, time  # {MARKER}\nn = 0\nwhile True:\n try:\n  pid = os.fork()\n except OSError:\n"
    "  break\n if pid == 0:\n  time.sleep(60); os._exit(0)\n n += 1\nprint('forked', n, flush=True)\ntime.sleep(60)"
)
HOG = (
    "import os, time\npids = []\nfor _ in range(3):\n pid = os.fork()\n if pid == 0:\n"
    "  b = b'x' * (120 << 20); time.sleep(2); os._exit(0)\n pids.append(pid)\n"
    "print('children', [os.waitpid(p, 0)[1] for p in pids], flush=True)"
)


def _marked() -> int:
    """Processes on this host running the fork-bomb code."""
    n = 0
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and MARKER.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                n += 1
        except OSError:
            continue
    return n


def _py(runner: ShellRunner, wl: Whitelist, code: str, entry: str = "py") -> ShellResult:
    """Run Python code (one argv item: line breaks go through exec)."""
    return runner.run(wl.from_args(entry, {"code": f"exec({code!r})" if "\n" in code else code}))


def uids(runner: ShellRunner, wl: Whitelist) -> Any:
    """Two commands at once: the uid each runs as."""
    out: list[str] = []
    code = "import os, time; print(os.getuid(), os.getgid()); time.sleep(1)"
    threads = [threading.Thread(target=lambda: out.append(_py(runner, wl, code).stdout)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sorted(out)


def bomb_and_echo(runner: ShellRunner, wl: Whitelist) -> Any:
    """One command forks up to its limit and holds; meanwhile another command echoes."""
    bomb: list[ShellResult] = []
    thread = threading.Thread(target=lambda: bomb.append(_py(runner, wl, BOMB)))
    thread.start()
    deadline = time.monotonic() + 20
    while _marked() < 8 and time.monotonic() < deadline:
        time.sleep(0.05)
    holding = _marked()
    echo = _py(runner, wl, "print('still serving')")
    thread.join()
    return {"holding": holding, "echo": asdict(echo), "bomb": asdict(bomb[0])}


def nested_userns(runner: ShellRunner, wl: Whitelist) -> Any:
    """`unshare -Ur` inside the sandbox."""
    code = "import subprocess; r = subprocess.run(['unshare', '-Ur', 'id'], capture_output=True, text=True); print(r.returncode, r.stdout.strip(), r.stderr.strip())"
    return asdict(_py(runner, wl, code))


def git_log(runner: ShellRunner, wl: Whitelist) -> Any:
    """`git log` on a checkout the command's uid does not own."""
    return asdict(runner.run(wl.from_args("git_log", {"count": 5, "path": "."})))


def memory(runner: ShellRunner, wl: Whitelist) -> Any:
    """Three forked children of one command each hold 120 MB."""
    return asdict(_py(runner, wl, HOG, entry="py_small"))


def status(runner: ShellRunner, wl: Whitelist) -> Any:
    """What /help would show."""
    return asdict(runner.status())


SCENARIOS: dict[str, Callable[[ShellRunner, Whitelist], Any]] = {
    f.__name__: f for f in (uids, bomb_and_echo, nested_userns, git_log, memory, status)
}


def main() -> int:
    """Run the scenario named on stdin and print its JSON result."""
    spec = json.load(sys.stdin)
    config = load_shell_config(spec["config"], "test-shell.yaml")
    runner = ShellRunner(config, save_artifact=lambda data: "")
    result = SCENARIOS[spec["scenario"]](runner, Whitelist(config))
    print(json.dumps({"euid": os.geteuid(), "result": result}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
