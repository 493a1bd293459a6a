"""Held-out search evaluation on repositories the project has never seen, fetched from package registries.

Each set in `evalsets/` names a pinned package (npm or PyPI) whose published files are the repository,
hand-written English and Chinese questions (written before any tuning) with the units that answer
them, and questions with no answer. Docstring queries are generated from the repository itself (a doc
comment's first sentence -> its function, the function's own name words removed).

Every question falls in the `dev` or `test` split by a hash of its text, so settings can be chosen
on `dev` and reported on `test`. Results are reported per group: all questions, docstring queries,
hand-written English, hand-written Chinese.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

from xihe.config.code import CodeConfig
from xihe.tools.codeindex.evalmetrics import metrics, rank_of
from xihe.tools.codeindex.index import CodeIndex
from xihe.tools.codeindex.question import GROUPS, Question, split_of
from xihe.tools.codeindex.service import index_repo
from xihe.tools.codeindex.tokens import has_cjk, split_identifier

SETS = ("react-native-android", "apscheduler")
_LINK = re.compile(r"\{@(link|linkplain|code|literal)\s+([^}]*)\}")


@dataclass(frozen=True)
class EvalSet:
    """A question set and the package it is asked against."""

    name: str
    source: dict[str, str]
    questions: list[dict[str, Any]]
    negatives: list[str]
    docstring_langs: tuple[str, ...]


def load_set(name: str) -> EvalSet:
    """Read `evalsets/<name>.json` (shipped in the package)."""
    if name not in SETS:
        raise ValueError(f"unknown evaluation set {name!r}; known: {', '.join(SETS)}")
    raw = json.loads(
        (files("xihe.tools.codeindex") / "evalsets" / f"{name}.json").read_text(encoding="utf-8")
    )
    return EvalSet(
        raw["name"], raw["source"], raw["questions"], raw.get("negatives", []), tuple(raw["docstring_langs"])
    )


def fetch(source: dict[str, str], cache: Path) -> Path:
    """The unpacked package named by `source`, fetched once into `cache` with npm or pip."""
    reg, pkg, version = source["registry"], source["package"], source["version"]
    dest = cache / f"{reg}-{pkg}-{version}"
    if (dest / ".complete").exists():
        return dest / "repo"
    if dest.exists():
        shutil.rmtree(dest)
    (dest / "dl").mkdir(parents=True)
    if reg == "npm":
        cmd = ["npm", "pack", f"{pkg}@{version}", "--pack-destination", str(dest / "dl")]
    elif reg == "pypi":
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:"]
        cmd += [f"{pkg}=={version}", "-d", str(dest / "dl")]
    else:
        raise ValueError(f"registry {reg!r} is not supported (npm or pypi)")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    archives = sorted((dest / "dl").glob("*.tgz")) + sorted((dest / "dl").glob("*.tar.gz"))
    if done.returncode != 0 or not archives:
        raise RuntimeError(f"fetching {pkg}=={version} from {reg} failed: {done.stderr.strip()[-400:]}")
    with tarfile.open(archives[0]) as tar:
        tar.extractall(dest / "x", filter="data")
    tops = [p for p in (dest / "x").iterdir() if p.is_dir()]
    (tops[0] if len(tops) == 1 else dest / "x").rename(dest / "repo")
    (dest / ".complete").write_text(f"{reg} {pkg} {version}\n", encoding="utf-8")
    return dest / "repo"


def _link_text(m: re.Match[str]) -> str:
    """`{@link Type#member(args) label}` reads as its label, or as the member (or type) name."""
    if m.group(1) in {"code", "literal"}:
        return m.group(2).strip()
    ref, _, label = m.group(2).strip().partition(" ")
    if label.strip():
        return label.strip()
    return ref.split("#")[-1].split("(")[0] or ref


def first_sentence(doc: str) -> str:
    """A doc comment's first sentence, Javadoc inline tags reduced to their text."""
    text = _LINK.sub(_link_text, doc)
    para = re.split(r"\n\s*\n|\s@[a-z]+\s", text.strip(), maxsplit=1)[0]
    para = " ".join(para.split())
    m = re.match(r"(.+?[.!?])(\s|$)", para)
    return (m.group(1) if m else para).strip()


def docstring_questions(
    index: CodeIndex, langs: Sequence[str], limit: int, skip: Iterable[str]
) -> list[Question]:
    """Doc first sentence -> its function or method, own name words removed; sentences shared by two units dropped."""
    skipped = tuple(skip)
    by_sentence: dict[str, list[tuple[str, str]]] = {}
    for u in index.live_units:
        if u.kind not in {"function", "method"} or not u.doc or u.lang not in langs:
            continue
        if u.path.startswith(skipped) or "inheritDoc" in u.doc:
            continue
        name_words = {w.lower() for w in split_identifier(u.name)} | {u.name.lower()}
        words = [
            w
            for w in re.findall(r"[A-Za-z0-9_']+", first_sentence(u.doc))
            if w.lower().strip("_") not in name_words
        ]
        if len(words) >= 5:
            by_sentence.setdefault(" ".join(words), []).append((u.path, u.qualname))
    items = sorted((q, t[0]) for q, t in by_sentence.items() if len(t) == 1)
    # a stable spread over the repository rather than the first files alphabetically
    items.sort(key=lambda p: hashlib.sha1(p[0].encode("utf-8")).hexdigest())
    return [Question(q, (t,), "docstring", split_of(q)) for q, t in items[:limit]]


def hand_written(es: EvalSet, index: CodeIndex) -> list[Question]:
    """The set's hand-written questions; a target missing from the index is an error in the set."""
    known = {(u.path, u.qualname) for u in index.live_units}
    out = []
    for q in es.questions:
        targets = tuple((p, n) for p, n in q["targets"])
        missing = [t for t in targets if t not in known]
        if missing:
            raise ValueError(f"{es.name}: question {q['text']!r}: targets not in the index: {missing}")
        group = "manual-zh" if has_cjk(q["text"]) else "manual"
        out.append(Question(q["text"], targets, group, split_of(q["text"])))
    return out


def report(ranked: list[tuple[Question, int | None]], split: str) -> dict[str, Any]:
    """Metrics per group and for all questions of one split (`all` = both splits)."""
    rows = [(q, r) for q, r in ranked if split == "all" or q.split == split]
    out = {g: metrics([r for q, r in rows if q.group == g]) for g in GROUPS}
    out["all"] = metrics([r for _, r in rows])
    return out


def percentile_ms(values: list[float], p: float) -> float:
    """The p-th percentile of `values` (seconds) in milliseconds."""
    s = sorted(values)
    return round(s[min(len(s) - 1, round(p * (len(s) - 1)))] * 1000, 2) if s else 0.0


@dataclass
class Prepared:
    """One set fetched, indexed and turned into questions."""

    es: EvalSet
    index: CodeIndex
    files: int
    units: int
    build_seconds: float
    questions: list[Question]


def prepare(name: str, cache: Path, work: Path, cfg: CodeConfig, limit: int) -> Prepared:
    """Fetch and index the set's package, and generate its questions."""
    es = load_set(name)
    repo = fetch(es.source, cache)
    cfg = cfg.model_copy(update={"index_dir": str(work / "index")})
    idx, rep = index_repo(repo, cfg, full=True)
    questions = docstring_questions(idx, es.docstring_langs, limit, skip=("template/",)) + hand_written(
        es, idx
    )
    idx.search("预热 warm up", 1)  # jieba and the dictionary load once, outside the timings
    return Prepared(es, idx, rep.files, rep.units, round(rep.seconds, 2), questions)


def measure(p: Prepared, modes: Sequence[str] = ("bm25", "vector", "hybrid")) -> dict[str, Any]:
    """Per mode: dev, test and all splits by group; query latency of the hybrid mode; negatives."""
    out: dict[str, Any] = {
        "set": p.es.name,
        "source": p.es.source,
        "repository": {"files": p.files, "units": p.units, "build_seconds": p.build_seconds},
        "embedder": p.index.embedder.name if p.index.embedder else None,
    }
    latencies: list[float] = []
    for mode in modes:
        ranked = []
        for q in p.questions:
            r, dt = rank_of(p.index, q, mode)
            ranked.append((q, r))
            if mode == "hybrid":
                latencies.append(dt)
        out[mode] = {s: report(ranked, s) for s in ("dev", "test", "all")}
    neg = [p.index.search(q, 10) for q in p.es.negatives]
    out["negatives_judged_irrelevant"] = f"{sum(1 for r in neg if not r.relevant)}/{len(neg)}"
    out["query_ms"] = {
        "p50": percentile_ms(latencies, 0.5),
        "p95": percentile_ms(latencies, 0.95),
        "n": len(latencies),
    }
    return out


def evaluate_sets(
    names: Sequence[str],
    cache: Path,
    work: Path,
    cfg: CodeConfig | None = None,
    limit: int = 300,
    learn_weights: bool = False,
) -> dict[str, Any]:
    """Measure each set with `cfg`; with `learn_weights`, also learn fusion weights on the dev split
    of all sets together and measure the hybrid mode again with them (report their test split)."""
    cfg = cfg or CodeConfig()
    prepared = [prepare(n, cache, work / n, cfg, limit) for n in names]
    out: dict[str, Any] = {p.es.name: measure(p) for p in prepared}
    if learn_weights:
        from xihe.tools.codeindex.learn import learn

        learned = learn([(p.es.name, p.index, p.questions) for p in prepared], cfg.retrieval)
        retrieval = cfg.retrieval.model_copy(update=learned["weights"])
        for p in prepared:
            p.index.cfg = p.index.cfg.model_copy(update={"retrieval": retrieval})
            learned[p.es.name] = measure(p, ("hybrid",))["hybrid"]
        out["learned"] = learned
    return out


def summary(sets: dict[str, Any], split: str = "test") -> dict[str, Any]:
    """Per set and mode: MRR@10 of all questions, docstring and hand-written English; Recall@10 of Chinese."""
    out: dict[str, Any] = {"split": split}
    for name, rep in sets.items():
        if name == "learned":
            out["learned"] = {"weights": rep["weights"]} | {
                n: {
                    "all_mrr@10": r[split]["all"]["mrr@10"],
                    "manual_mrr@10": r[split]["manual"]["mrr@10"],
                    "manual_zh_recall@10": r[split]["manual-zh"]["recall@10"],
                }
                for n, r in rep.items()
                if isinstance(r, dict) and split in r
            }
            continue
        row: dict[str, Any] = {}
        for mode in ("bm25", "vector", "hybrid"):
            if mode in rep:
                r = rep[mode][split]
                row[mode] = {
                    "all_mrr@10": r["all"]["mrr@10"],
                    "docstring_mrr@10": r["docstring"]["mrr@10"],
                    "manual_mrr@10": r["manual"]["mrr@10"],
                    "manual_zh_recall@10": r["manual-zh"]["recall@10"],
                    "manual_zh_mrr@10": r["manual-zh"]["mrr@10"],
                }
        row["build_seconds"] = rep["repository"]["build_seconds"]
        row["query_ms_p50"] = rep["query_ms"]["p50"]
        out[name] = row
    return out
