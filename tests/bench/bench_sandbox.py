"""Sandbox start-up overhead: the same short command plain and inside bubblewrap; prints JSON.

Run: python -m tests.bench.bench_sandbox [--runs 50]
Pairs: a bare `subprocess.run` of /usr/bin/true against bwrap running it with the exact
arguments the sandbox uses (as root: bwrap, setpriv, an inner unprivileged bwrap and prlimit), and
the whole ShellRunner path (limits, pipes, capture, the command's uid and cgroup) with
`sandbox: none` against `sandbox: bwrap`, also with `cgroup: none` to show what the per-command
cgroup costs. The target is a runner ratio of at most 3.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time
from collections.abc import Callable

from xihe.config.shell.file import load_shell_config
from xihe.tools.shell.sandbox import BwrapSandbox, ShellRunner, plan_for
from xihe.tools.shell.whitelist import Whitelist

CONFIG = """
sandbox: {sandbox}
cgroup: {cgroup}
entries:
  - name: noop
    description: do nothing
    argv: [/usr/bin/true]
"""


def _interleaved(fns: dict[str, Callable[[], object]], runs: int) -> dict[str, list[float]]:
    """Times of each function, taking turns, so a load change on the machine hits all of them alike."""
    for fn in fns.values():
        fn()  # warm caches (page cache, bwrap binary, Python imports)
    out: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(runs):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            out[name].append((time.perf_counter() - start) * 1000)
    return out


def _stats(ms: list[float]) -> dict[str, float]:
    ordered = sorted(ms)
    return {
        "median_ms": round(statistics.median(ordered), 3),
        "p95_ms": round(ordered[max(0, int(len(ordered) * 0.95) - 1)], 3),
    }


def run(runs: int) -> dict[str, object]:
    """Measure and return the report."""
    plain_cfg = load_shell_config(CONFIG.format(sandbox="none", cgroup="auto"))
    bwrap_cfg = load_shell_config(CONFIG.format(sandbox="bwrap", cgroup="auto"))
    no_cgroup_cfg = load_shell_config(CONFIG.format(sandbox="bwrap", cgroup="none"))
    match = Whitelist(bwrap_cfg).from_args("noop", {})
    sandbox = BwrapSandbox()
    if not sandbox.available():
        return {"error": "bubblewrap is not available on this host"}
    bwrap_cmd = sandbox.command(plan_for(match, bwrap_cfg))
    plain_runner = ShellRunner(plain_cfg, save_artifact=lambda b: "")
    bwrap_runner = ShellRunner(bwrap_cfg, save_artifact=lambda b: "")
    no_cgroup_runner = ShellRunner(no_cgroup_cfg, save_artifact=lambda b: "")

    times = _interleaved(
        {
            "raw_plain": lambda: subprocess.run(["/usr/bin/true"], check=True),
            "raw_bwrap": lambda: subprocess.run(bwrap_cmd, check=True, env={"PATH": "/usr/bin"}),
            "full_plain": lambda: plain_runner.run(match),
            "full_bwrap": lambda: bwrap_runner.run(match),
            "full_no_cgroup": lambda: no_cgroup_runner.run(match),
        },
        runs,
    )
    raw_plain, raw_bwrap = _stats(times["raw_plain"]), _stats(times["raw_bwrap"])
    full_plain, full_bwrap = _stats(times["full_plain"]), _stats(times["full_bwrap"])
    full_no_cgroup = _stats(times["full_no_cgroup"])
    return {
        "runs": runs,
        "command": "/usr/bin/true",
        "subprocess_plain": raw_plain,
        "subprocess_bwrap": raw_bwrap,
        "ratio_subprocess_median": round(raw_bwrap["median_ms"] / raw_plain["median_ms"], 2),
        "runner_none": full_plain,
        "runner_bwrap": full_bwrap,
        "ratio_runner_median": round(full_bwrap["median_ms"] / full_plain["median_ms"], 2),
        "ratio_runner_p95": round(full_bwrap["p95_ms"] / full_plain["p95_ms"], 2),
        "cgroup": bwrap_runner.backend.warnings() or "per command",
        "runner_bwrap_without_cgroup": full_no_cgroup,
        "target_ratio": 3.0,
    }


def main(argv: list[str] | None = None) -> int:
    """Print the JSON report."""
    parser = argparse.ArgumentParser(prog="bench_sandbox")
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args(argv)
    print(json.dumps(run(args.runs), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
