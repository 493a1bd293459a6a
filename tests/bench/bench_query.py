"""In-process query latency on a large index, BLAS held to one thread vs not; prints JSON.

Run: python -m tests.bench.bench_query [--cache var/eval-src] [--index-dir DIR] [--corpus react-native|jdk-ds]
The index is React Native 0.71.19 from npm (16k units) built with the shipped `config/code.yaml`
(multilingual channel on), into `--index-dir` (kept, so a second run only loads it). Each question
(300 docstring queries and the hand-written ones) is searched as shipped (the query inside
`blas.limited(1)`), then all of them again with the limit lifted (the anchor). The whole measurement runs twice, as child processes: with `OPENBLAS_NUM_THREADS` unset and
set to 1. Target: p50 ≤ 20 ms as shipped.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _timed(search: Any, text: str) -> tuple[float, float]:
    """(wall, CPU) milliseconds of one search (CPU: this process, all its threads)."""
    t, c = time.perf_counter(), time.process_time()
    search(text, 10)
    return (time.perf_counter() - t) * 1000, (time.process_time() - c) * 1000


def _figures(runs: list[tuple[float, float]]) -> dict[str, float]:
    ms = sorted(w for w, _ in runs)
    return {
        "p50_ms": round(statistics.median(ms), 2),
        "p95_ms": round(ms[int(0.95 * (len(ms) - 1))], 2),
        "min_ms": round(ms[0], 2),
        "cpu_p50_ms": round(statistics.median(c for _, c in runs), 2),
    }


def measure(cache: Path, index_root: Path, corpus: str = "react-native") -> dict[str, Any]:
    """Build or load the index, then time every question with and without the BLAS limit. `jdk-ds`:
    bench_build's DolphinScheduler-sized Java tree, asked its own Javadoc questions and the texts of
    the React Native set's hand-written ones (English and Chinese)."""
    from xihe.config.code import CodeConfig
    from xihe.tools.codeindex import blas, search
    from xihe.tools.codeindex.heldout import docstring_questions, fetch, hand_written, load_set
    from xihe.tools.codeindex.service import index_repo

    es = load_set("react-native-android")
    if corpus == "jdk-ds":
        from tests.bench.bench_build import jdk_sample

        repo = jdk_sample(ROOT / "var" / "bench-build")
    else:
        repo = fetch(es.source, cache)
    raw = yaml.safe_load((ROOT / "config" / "code.yaml").read_text(encoding="utf-8"))
    cfg = CodeConfig.model_validate(raw | {"index_dir": str(index_root)})
    idx, report = index_repo(repo, cfg)
    if corpus == "jdk-ds":
        texts = [q.text for q in docstring_questions(idx, ["java"], 300, skip=())]
        texts += [q["text"] for q in es.questions]
    else:
        asked = docstring_questions(idx, es.docstring_langs, 300, skip=("template/",)) + hand_written(es, idx)
        texts = [q.text for q in asked]
    idx.search("预热 warm up", 1)
    pinned: list[tuple[float, float]] = []
    free: list[tuple[float, float]] = []
    shipped = blas.limited
    # all shipped queries first, then the anchor: interleaved, the anchor's woken OpenBLAS threads
    # kept spinning into the next shipped query and were counted against it
    for text in texts:
        pinned.append(_timed(idx.search, text))
    search.blas.limited = lambda threads=1: contextlib.nullcontext()  # type: ignore[assignment,misc]
    try:
        for text in texts:
            free.append(_timed(idx.search, text))
    finally:
        search.blas.limited = shipped  # type: ignore[assignment]
    return {
        "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "unset"),
        "index": report.mode,
        "units": report.units,
        "corpus": corpus,
        "queries": len(texts),
        "one_blas_thread": _figures(pinned),
        "blas_unlimited_anchor": _figures(free),
        "p50_ratio": round(
            statistics.median(w for w, _ in pinned) / statistics.median(w for w, _ in free), 2
        ),
        "load": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", default="var/eval-src", type=Path)
    parser.add_argument("--index-dir", type=Path, help="default var/bench-index, or var/bench-index-jdk-ds")
    parser.add_argument("--corpus", default="react-native", choices=("react-native", "jdk-ds"))
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    index_dir = args.index_dir or Path(
        "var/bench-index" + ("" if args.corpus == "react-native" else "-jdk-ds")
    )
    if args.child:
        print(json.dumps(measure(args.cache, index_dir, args.corpus)))
        return
    runs = []
    for threads in (None, "1"):
        env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
        if threads:
            env["OPENBLAS_NUM_THREADS"] = threads
        cmd = [sys.executable, "-m", "tests.bench.bench_query", "--child", "--cache", str(args.cache)]
        cmd += ["--corpus", args.corpus]
        out = subprocess.run([*cmd, "--index-dir", str(index_dir)], env=env, check=True, capture_output=True)
        runs.append(json.loads(out.stdout.decode().strip().splitlines()[-1]))
    print(json.dumps(runs, indent=2))


if __name__ == "__main__":
    main()
