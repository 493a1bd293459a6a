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
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
XIHE = [sys.executable, "-m", "xihe.agent.cli.main"]


def _median_seconds(cmd: list[str], runs: int, cwd: Path, env: dict[str, str]) -> float:
    subprocess.run(cmd, cwd=cwd, env=env, check=True, capture_output=True)  # warm the page cache
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, cwd=cwd, env=env, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return round(statistics.median(times), 3)


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
        bare = _median_seconds([sys.executable, "-c", "pass"], runs, repo, env)
        help_s = _median_seconds([*XIHE, "--help"], runs, repo, env)
        search = _median_seconds(
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
