"""CLI start-up: wall time of `xihe --help` and of one `xihe search` on a built index; prints JSON.

Run: python -m tests.bench.bench_startup [--runs 10]
Each command runs as a fresh process (what a user waits for), against a bare `python -c pass` in the
same run as the baseline, so the report shows both the absolute medians (targets: `--help` ≤ 0.25 s,
`search` ≤ 0.4 s) and how much xihe adds to the interpreter's own start-up.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
XIHE = [sys.executable, "-m", "xihe.agent.cli.main"]


def _median_seconds(cmd: list[str], runs: int, cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Median (wall, CPU) seconds of a fresh process; CPU (user + system) is steadier on a loaded machine."""
    subprocess.run(cmd, cwd=cwd, env=env, check=True, capture_output=True)  # warm the page cache
    times, cpu = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(cmd, cwd=cwd, env=env, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return round(statistics.median(times), 3), round(statistics.median(cpu), 3)


def run(runs: int) -> dict[str, object]:
    """Build a small index of xihe's own agent/ folder, then time the three commands."""
    env = dict(os.environ)  # PYTHONPATH (a worktree's root) is kept: the xihe being measured
    with tempfile.TemporaryDirectory(prefix="xihe-bench-startup-") as tmp:
        repo = Path(tmp) / "repo"
        shutil.copytree(ROOT / "agent", repo / "agent", ignore=shutil.ignore_patterns("__pycache__"))
        config = ["--config", str(ROOT / "config")]
        subprocess.run(
            [*XIHE, *config, "index", "--quiet", "--repo", str(repo)],
            cwd=repo,
            env=env,
            check=True,
            capture_output=True,
        )
        (bare, bare_cpu) = _median_seconds([sys.executable, "-c", "pass"], runs, repo, env)
        (help_s, help_cpu) = _median_seconds([*XIHE, "--help"], runs, repo, env)
        (search, search_cpu) = _median_seconds(
            [*XIHE, *config, "search", "--repo", str(repo), "resume the first unfinished step"],
            runs,
            repo,
            env,
        )
    return {
        "runs": runs,
        "python_bare_s": bare,
        "xihe_help_s": help_s,
        "xihe_search_s": search,
        "python_bare_cpu_s": bare_cpu,
        "xihe_help_cpu_s": help_cpu,
        "xihe_search_cpu_s": search_cpu,
        "help_target_s": 0.25,
        "search_target_s": 0.4,
        "help_over_bare": round(help_s / bare, 1),
        "search_over_bare": round(search / bare, 1),
        "load": os.getloadavg()[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    print(json.dumps(run(parser.parse_args().runs), indent=2))


if __name__ == "__main__":
    main()
