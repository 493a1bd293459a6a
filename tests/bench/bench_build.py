"""Full index build CPU on a DolphinScheduler-sized Java tree (issue 30: ≤ 20 s CPU); prints JSON.

Run: python -m tests.bench.bench_build [--runs 3] [--base DIR] [--cache var/bench-build]

DolphinScheduler itself (4,513 files, 24,553 units, 10.9 MB of sources when the issue measured it)
is not on a registry this machine reaches. The stand-in is Java of the same shape from Debian's
`openjdk-17-source` (`apt-get install openjdk-17-source`; its `src.zip`): the JDK's .java files of at
most 4,000 bytes outside the generated `jdk.localedata`, in the order of their paths' SHA-1, the
first 4,513: 4,513 files, 10.9 MB, ~24,000 units.

Each build is a fresh process (`--child`) that loads the models first, then builds and saves the
index once: the report gives the build's CPU and wall seconds and the whole process's CPU (imports
and model loads included, what `xihe index` costs). Three configurations, in alternating rounds:
`shipped` (config/code.yaml: BM25, the name and graph fields, wordllama vectors with doc sentences,
the multilingual channel), `static` (the same without the multilingual channel) and `bm25` (no
vectors) - the issue's anchors were BM25 alone 5 s and BM25 + static vectors 10 s on DolphinScheduler.
`--base DIR`: an export of an earlier xihe (`DIR/xihe/tools/...`, e.g. `git archive` of its `agent`,
`tools`, `integrations` and `config` under `DIR/xihe`) builds `shipped` in the same rounds, alternately.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SRC_ZIP = Path("/usr/lib/jvm/openjdk-17/src.zip")
FILES, MAX_BYTES = 4_513, 4_000
MODES = ("shipped", "static", "bm25")


def jdk_sample(cache: Path) -> Path:
    """The DolphinScheduler-shaped sample of the JDK's sources, extracted once under `cache`."""
    dest = cache / f"jdk17-ds-{FILES}"
    if (dest / ".complete").exists():
        return dest / "repo"
    if not SRC_ZIP.is_file():
        raise SystemExit(f"{SRC_ZIP} is missing: apt-get install openjdk-17-source (Debian's JDK sources)")
    with zipfile.ZipFile(SRC_ZIP) as z:
        java = [
            i
            for i in z.infolist()
            if i.filename.endswith(".java")
            and not i.filename.startswith("jdk.localedata/")
            and i.file_size <= MAX_BYTES
        ]
        java.sort(key=lambda i: hashlib.sha1(i.filename.encode()).hexdigest())
        for info in java[:FILES]:
            z.extract(info, dest / "repo")
    (dest / ".complete").write_text(f"{SRC_ZIP} {FILES} files <= {MAX_BYTES} bytes\n", encoding="utf-8")
    return dest / "repo"


def child(repo: Path, out: Path, mode: str) -> dict[str, Any]:
    """One build of `repo` in this process, the models loaded first (not timed)."""
    from xihe.config.code import CodeConfig, load_file
    from xihe.tools.codeindex.embed import make_embedder
    from xihe.tools.codeindex.index import CodeIndex

    if mode == "bm25":
        cfg, embedder = (
            CodeConfig(index_dir=str(out), embedding={"kind": "none", "multilingual": False}),
            None,
        )
    else:
        cfg = load_file(ROOT / "config")
        if mode == "static":
            cfg = cfg.model_copy(
                update={"embedding": cfg.embedding.model_copy(update={"multilingual": False})}
            )
        cfg = cfg.model_copy(update={"index_dir": str(out)})
        embedder = make_embedder(cfg.embedding)
    idx = CodeIndex(repo, out / "bench", cfg, embedder)
    if embedder is not None:
        embedder.embed(["load the model outside the timing"])
    if idx.multi is not None:
        idx.multi.model.encode(["加载模型 load the model"])
    t, c = time.perf_counter(), time.process_time()
    stats = idx.build()
    idx.save()
    return {"cpu": time.process_time() - c, "wall": time.perf_counter() - t, "units": stats.units_added}


def _run_child(repo: Path, mode: str, base: str | None) -> dict[str, Any]:
    """A fresh process building once; its report plus the whole process's CPU seconds."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if base:
        env["PYTHONPATH"] = base
    with tempfile.TemporaryDirectory(prefix="xihe-bench-build-") as tmp:
        cmd = [sys.executable, str(Path(__file__)), "--child", mode, str(repo), tmp]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env, cwd=tmp)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    report["process_cpu"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return report


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"units": runs[0]["units"]}
    for key in ("cpu", "wall", "process_cpu"):
        values = [r[key] for r in runs]
        out[key] = {
            "median": round(statistics.median(values), 2),
            "min": round(min(values), 2),
            "max": round(max(values), 2),
        }
    return out


def run(cache: Path, runs: int, base: str | None, modes: tuple[str, ...] = MODES) -> dict[str, Any]:
    """`runs` alternating rounds of every mode (and the base's shipped build); medians and spreads."""
    repo = jdk_sample(cache)
    got: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    if base:
        got["base_shipped"] = []
    load = [round(os.getloadavg()[0], 2)]
    for _ in range(runs):
        for mode in modes:
            got[mode].append(_run_child(repo, mode, None))
            if base and mode == "shipped":
                got["base_shipped"].append(_run_child(repo, "shipped", base))
    load.append(round(os.getloadavg()[0], 2))
    report: dict[str, Any] = {
        "corpus": f"{FILES} .java files of <= {MAX_BYTES} bytes from {SRC_ZIP} (openjdk-17-source)",
        "files": sum(1 for p in repo.rglob("*.java")),
        "source_bytes": sum(p.stat().st_size for p in repo.rglob("*.java")),
        "target_cpu_seconds": 20.0,
        "load_average_before_after": load,
        "cores": os.cpu_count(),
    }
    report |= {mode: _summary(values) for mode, values in got.items()}
    if "shipped" in got and "bm25" in got:
        report["shipped_to_bm25_cpu"] = round(
            report["shipped"]["cpu"]["median"] / report["bm25"]["cpu"]["median"], 2
        )
    if base:
        report["speed_up_over_base_cpu"] = round(
            report["base_shipped"]["cpu"]["median"] / report["shipped"]["cpu"]["median"], 2
        )
    return report


def main(argv: list[str] | None = None) -> int:
    """Parse the options, run, print the report (or, as `--child`, one build's)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--child"]:
        mode, repo, out = args[1], Path(args[2]), Path(args[3])
        print(json.dumps(child(repo, out, mode)))
        return 0
    p = argparse.ArgumentParser(prog="bench_build")
    p.add_argument("--runs", type=int, default=3, help="alternating rounds of every configuration")
    p.add_argument("--base", help="an earlier xihe exported to BASE/xihe, built the same way")
    p.add_argument("--cache", default="var/bench-build", help="where the sample is extracted")
    p.add_argument("--modes", default=",".join(MODES), help="comma-separated: shipped, static, bm25")
    opts = p.parse_args(args)
    modes = tuple(m for m in opts.modes.split(",") if m)
    print(json.dumps(run(Path(opts.cache).resolve(), opts.runs, opts.base, modes), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
