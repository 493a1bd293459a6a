"""Search evaluation on the Python standard library (reachable offline): recall, MRR, timings.

The "repository" is a copy of the stdlib (tests, IDLE, tkinter and the like left out), about 15k
units. The questions are `xihe.tools.codeindex.stdlibqueries`; each runs in every search mode, and
the report adds the CJK bridge switched off, relevance judgements, query latency and the cost of
re-indexing one file.
"""

from __future__ import annotations

import shutil
import sysconfig
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from xihe.config.code import CodeConfig
from xihe.tools.codeindex.evalmetrics import metrics, percentile_ms, rank_of
from xihe.tools.codeindex.index import CodeIndex
from xihe.tools.codeindex.service import index_repo
from xihe.tools.codeindex.stdlibqueries import (
    NEGATIVE,
    QUERY_MODULES,
    docstring_queries,
    later_sentence_queries,
    manual_queries,
)

SKIP_TOP = frozenset(
    {
        "test",
        "site-packages",
        "idlelib",
        "lib2to3",
        "tkinter",
        "turtledemo",
        "ensurepip",
        "encodings",
        "__pycache__",
        "pydoc_data",
    }
)


def stdlib_root() -> Path:
    """The running interpreter's standard library directory."""
    return Path(sysconfig.get_paths()["stdlib"])


def copy_stdlib(dest: Path, modules: Sequence[str] | None = None) -> Path:
    """Copy stdlib modules (all but SKIP_TOP when `modules` is None) into `dest` as a repository."""
    src = stdlib_root()
    dest.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns("__pycache__", "test", "tests", "*.pyc")
    for entry in sorted(src.iterdir()):
        name = entry.name
        if modules is not None and name.removesuffix(".py") not in modules:
            continue
        if modules is None and (name in SKIP_TOP or name.startswith((".", "config-"))):
            continue
        if entry.is_dir():
            shutil.copytree(entry, dest / name, ignore=ignore, dirs_exist_ok=True)
        elif entry.suffix == ".py":
            shutil.copy2(entry, dest / name)
    return dest


def evaluate(
    work: Path, cfg: CodeConfig | None = None, modules: Sequence[str] | None = None, limit: int = 300
) -> dict[str, Any]:
    """Build the stdlib repository index under `work`, run every query in every mode, return the report."""
    repo = work / "repo"
    if repo.exists():
        shutil.rmtree(repo)
    copy_stdlib(repo, modules)
    cfg = cfg or CodeConfig()
    cfg = cfg.model_copy(update={"index_dir": str(work / "index")})
    idx, report = index_repo(repo, cfg, full=True)
    build_s = report.seconds
    qmods = [m for m in QUERY_MODULES if modules is None or m in modules]
    queries = docstring_queries(idx, qmods, limit)
    manual, missing = manual_queries(idx)
    idx.search("预热 warm up", 1)  # load jieba and the dictionary once, outside the timings
    result: dict[str, Any] = {
        "repository": {"files": report.files, "units": report.units, "build_seconds": round(build_s, 2)},
        "embedder": idx.embedder.name if idx.embedder else None,
        "manual_targets_missing": missing,
    }
    groups = {
        "docstring": queries,
        "manual": [q for q in manual if q.source == "manual"],
        "manual-zh": [q for q in manual if q.source == "manual-zh"],
    }
    latencies: list[float] = []
    for mode in ("bm25", "vector", "hybrid"):
        per: dict[str, Any] = {}
        all_ranks: list[int | None] = []
        for name, qs in groups.items():
            ranks = []
            for q in qs:
                r, dt = rank_of(idx, q, mode)
                ranks.append(r)
                if mode == "hybrid":
                    latencies.append(dt)
            per[name] = metrics(ranks)
            all_ranks.extend(ranks)
        per["all"] = metrics(all_ranks)
        result[mode] = per
    later = later_sentence_queries(idx, qmods, limit)
    result["control_second_sentence"] = {
        mode: metrics([rank_of(idx, q, mode)[0] for q in later]) for mode in ("bm25", "vector", "hybrid")
    }
    # the CJK bridge, measured: Chinese questions with it switched off
    off = cfg.model_copy(update={"retrieval": cfg.retrieval.model_copy(update={"cjk_bridge": False})})
    idx.cfg = off
    result["hybrid_zh_without_bridge"] = metrics([rank_of(idx, q, "hybrid")[0] for q in groups["manual-zh"]])
    result["bm25_zh_without_bridge"] = metrics([rank_of(idx, q, "bm25")[0] for q in groups["manual-zh"]])
    idx.cfg = cfg
    neg = [idx.search(q, 10) for q in NEGATIVE]
    pos = [idx.search(q.text, 10) for q in manual]
    result["relevance"] = {
        "negatives_judged_irrelevant": sum(1 for r in neg if not r.relevant),
        "negatives": len(neg),
        "answerable_judged_relevant": sum(1 for r in pos if r.relevant),
        "answerable": len(pos),
        "negative_best_scores": [
            [q, round(r.best_bm25, 2), round(r.best_cosine, 3)] for q, r in zip(NEGATIVE, neg, strict=True)
        ],
        "answerable_best_scores_min": [
            round(min(r.best_bm25 for r in pos), 2),
            round(min(r.best_cosine for r in pos), 3),
        ],
    }
    result["query_ms"] = {
        "p50": percentile_ms(latencies, 0.5),
        "p95": percentile_ms(latencies, 0.95),
        "n": len(latencies),
    }
    result["incremental"] = _one_file_update(idx, build_s)
    h, b = result["hybrid"]["all"]["mrr@10"], result["bm25"]["all"]["mrr@10"]
    result["hybrid_vs_bm25_mrr_gain"] = round((h - b) / b, 4) if b else None
    return result


def _one_file_update(idx: CodeIndex, build_s: float) -> dict[str, Any]:
    """Time re-indexing one modified file (in memory, and with the save to disk)."""
    rel = "json/decoder.py" if "json/decoder.py" in idx.files else sorted(idx.files)[0]
    path = idx.root / rel
    original = path.read_text(encoding="utf-8")
    path.write_text(
        original + '\n\ndef added_for_eval(x):\n    """Added by the evaluation."""\n    return x\n',
        encoding="utf-8",
    )
    try:
        t0 = time.perf_counter()
        stats = idx.update_files([rel])
        upd = time.perf_counter() - t0
        t1 = time.perf_counter()
        idx.search("added for evaluation", 5)  # the first query after an update merges pending rows
        first_query = time.perf_counter() - t1
        t2 = time.perf_counter()
        idx.save()
        save = time.perf_counter() - t2
    finally:
        path.write_text(original, encoding="utf-8")
    return {
        "file": rel,
        "units_reindexed": stats.units_added,
        "update_seconds": round(upd, 4),
        "first_query_after_update_seconds": round(first_query, 4),
        "save_seconds": round(save, 4),
        "update_share_of_full_build": round(upd / build_s, 5) if build_s else None,
        "update_plus_save_share_of_full_build": round((upd + save) / build_s, 5) if build_s else None,
    }
