"""`xihe search` as a fresh process vs ripgrep over the same tree, English and Chinese; prints JSON.

Run: python -m tests.bench.bench_cli_search [--cache var/eval-src] [--runs 10]
Needs `rg` (apt-get install -y ripgrep). The tree is React Native 0.71.19 from npm (2,973 indexed
files, 16k units), copied into a temporary git repository and indexed once with the shipped
`config/code.yaml` (`xihe index`, which also prebuilds the Chinese dictionaries in the shared cache).
Runs are interleaved (xihe, rg, xihe, rg...) so both see the same load; the report gives each
command's median, min and max wall seconds and the ratio of the medians (target: xihe ≤ rg).
"""

from __future__ import annotations

import argparse
import contextlib
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

from xihe.tools.codeindex.heldout import fetch, load_set

ROOT = Path(__file__).resolve().parents[2]
XIHE = [sys.executable, "-m", "xihe.agent.cli.main"]
QUESTIONS = {
    # question -> what a person would grep for instead
    "english": ("where do we retry a failed job", ["rg", "-n", "-i", "retry|failed|job"]),
    "chinese": ("弹出警告对话框", ["rg", "-n", "-i", "alert|dialog|警告"]),
}


def _git(repo: Path, *args: str) -> None:
    cmd = ["git", "-C", str(repo), "-c", "user.name=b", "-c", "user.email=b@example.invalid", *args]
    subprocess.run(cmd, check=True, capture_output=True)


def _setup(tmp: Path, cache: Path, env: dict[str, str]) -> tuple[Path, list[str]]:
    """A git copy of the corpus indexed with the shipped code.yaml; (repo, config args). Kept in a
    `--workdir` from an earlier run: only updated."""
    repo, config = tmp / "repo", tmp / "config"
    if (repo / ".git").is_dir() and (config / "code.yaml").is_file():
        cmd = [*XIHE, "--config", str(config), "index", "--quiet", "--repo", str(repo)]
        subprocess.run(cmd, cwd=repo, env=env, check=True)
        return repo, ["--config", str(config)]
    shutil.copytree(fetch(load_set("react-native-android").source, cache), repo)
    (repo / ".gitignore").write_text("var/\n", encoding="utf-8")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "corpus")
    config.mkdir()
    shutil.copy(ROOT / "config" / "code.yaml", config / "code.yaml")
    args = ["--config", str(config)]
    subprocess.run([*XIHE, *args, "index", "--quiet", "--repo", str(repo)], cwd=repo, env=env, check=True)
    return repo, args


def _wall(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one run; CPU (user + system) is steadier on a loaded machine."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def _summary(runs: list[tuple[float, float]]) -> dict[str, float]:
    times = [w for w, _ in runs]
    return {
        "median_s": round(statistics.median(times), 3),
        "min_s": round(min(times), 3),
        "max_s": round(max(times), 3),
        "cpu_median_s": round(statistics.median(c for _, c in runs), 3),
    }


def run(cache: Path, runs: int, workdir: Path | None) -> dict[str, object]:
    """Index once, then time each question's `xihe search` interleaved with its ripgrep anchor."""
    if shutil.which("rg") is None:
        raise SystemExit("ripgrep (rg) is not installed: apt-get install -y ripgrep")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # as installed: .pyc kept
    out: dict[str, object] = {"runs": runs, "load_before": round(os.getloadavg()[0], 2)}
    with contextlib.ExitStack() as stack:
        tmp = workdir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="xihe-bench-cli-")))
        tmp.mkdir(parents=True, exist_ok=True)
        repo, config = _setup(tmp, cache, env)
        for name, (question, grep) in QUESTIONS.items():
            xihe = [*XIHE, *config, "search", "--repo", str(repo), question]
            _wall(xihe, repo, env), _wall(grep, repo, env)  # warm the page cache
            ours, theirs = [], []
            for _ in range(runs):
                ours.append(_wall(xihe, repo, env))
                theirs.append(_wall(grep, repo, env))
            out[name] = {
                "question": question,
                "xihe_search": _summary(ours),
                "ripgrep": _summary(theirs) | {"command": " ".join(grep)},
                "ratio_of_medians": round(
                    statistics.median(w for w, _ in ours) / statistics.median(w for w, _ in theirs), 2
                ),
                "cpu_ratio_of_medians": round(
                    statistics.median(c for _, c in ours) / statistics.median(c for _, c in theirs), 2
                ),
            }
    out["load_after"] = round(os.getloadavg()[0], 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", default="var/eval-src", type=Path)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--workdir", type=Path, help="keep the indexed copy here for later runs")
    args = parser.parse_args()
    workdir = args.workdir.resolve() if args.workdir else None
    print(json.dumps(run(args.cache.resolve(), args.runs, workdir), indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
