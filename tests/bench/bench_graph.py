"""The symbol graph against jedi: precision and recall of find_callers and find_references.

    python -m tests.bench.bench_graph [--packages requests,apscheduler] [--limit N] [--cache DIR] [--speed 2]
                                      [--speed-corpus stdlib|react-native|jdk-ds]
                                      [--js] [--js-packages js-yaml@4.1.0,commander@12.1.0]

Each package is the installed one (pinned in constraints.txt), copied out of site-packages so both
tools read the same plain directory. For every Python function, method and class, jedi's
`get_references` at its name (imports and definitions left out) is the ground truth: a reference is
a (file, line); a caller is the definition around a reference that is called (`name(`). The graph's
answers are scored three ways: its resolved links only (what it states as fact), with dynamic
dispatch added, and with by-name guesses added. jedi's answers are cached under --cache (keyed by
package and jedi version): they take minutes.

Also measured: the index build with and without the graph's facts (the facts' share of a build:
extraction and the graph.bin write) and an incremental update of one file; `--speed ROUNDS` adds
both on ten standard-library packages (or React Native 0.71.19 from npm, `--speed-corpus
react-native`, 16k units; or bench_build's DolphinScheduler-sized Java tree, `jdk-ds`), BM25 only and with the shipped config/code.yaml (vectors), in one
process after a warm-up build that is not counted: builds with and without the facts interleaved,
best of ROUNDS (BM25 only: at least `--pairs`, 5, and the median of each pair's growth with its
spread; and, steadier on a busy machine, the facts' extraction and JSON timed inside each build
with them, over the rest of it), wall and CPU; and after each build with the facts, eight successive
edits (a function appended each time) of the largest file and of a median one, each re-indexed and
saved: per round the median edit's CPU as a share of the build just before it (a machine whose
speed drifts over minutes moves both alike), the median over rounds and its spread; the last
round's edits also as shares of the best build with the facts (the smallest denominator), and each
round's first edit apart (it parses the file afresh: later edits parse from its last tree,
`retree.py`).
`--js` adds the second language: JavaScript packages from npm against TypeScript's language service
(bench_graph_js.py; npm installs `typescript` and the packages once under --cache).
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import os
import re
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.bench.bench_graph_js import PACKAGES, run_js
from xihe.config.code import CodeConfig
from xihe.tools.codeindex import graphstore, treequery
from xihe.tools.codeindex import index as index_module
from xihe.tools.codeindex.graph import DYNAMIC, NAME, RESOLVED, Def, SymbolGraph
from xihe.tools.codeindex.graphstore import GraphFacts
from xihe.tools.codeindex.index import CodeIndex

BUILD_CPU: list[float] = []  # CPU seconds of each build(), in order
FACTS_CPU: list[float] = []  # of each build() with the facts: the CPU seconds spent making them, inside it
LEVELS = {"resolved": {RESOLVED}, "+dynamic": {RESOLVED, DYNAMIC}, "+name": {RESOLVED, DYNAMIC, NAME}}


def copy_package(name: str, work: Path) -> tuple[Path, str]:
    """The installed package `name` copied to `work/<name>/`; (root, version)."""
    mod = importlib.import_module(name)
    src = Path(mod.__file__ or "").parent
    root = work / name
    shutil.copytree(src, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    return root, str(getattr(mod, "__version__", "?"))


def build(root: Path, with_graph: bool = True, shipped: Any = None) -> tuple[CodeIndex, float]:
    """An index of `root`; (index, wall seconds; the CPU seconds are in BUILD_CPU[-1]). BM25 only (the graph's share at its largest), or with
    `shipped` = (config, embedder) as a deployment builds it (vectors, multilingual channel)."""
    if shipped is None:
        cfg = CodeConfig(index_dir=str(root / ".index"), embedding={"multilingual": False})
        embedder = None
    else:
        cfg, embedder = shipped
    idx = CodeIndex(root, root / ".index" / "bench", cfg, embedder)
    saved = index_module.extract, index_module.captures, GraphFacts.set
    spent = [0.0]
    if not with_graph:  # no facts extracted, and the shared tree query without the facts' node types
        index_module.extract = lambda *a: None  # type: ignore[assignment,misc]
        index_module.captures = functools.partial(treequery.captures, facts=False)
    else:  # the facts' extraction and JSON line timed inside the build (their query captures are not)
        index_module.extract = _timed(saved[0], spent)  # type: ignore[assignment]
        GraphFacts.set = _timed(saved[2], spent)  # type: ignore[method-assign]
    try:
        t0, c0 = time.perf_counter(), time.process_time()
        idx.build()
        idx.save()
        BUILD_CPU.append(time.process_time() - c0)
        if with_graph:
            FACTS_CPU.append(spent[0])
        return idx, time.perf_counter() - t0
    finally:
        index_module.extract, index_module.captures, GraphFacts.set = saved


def _timed(fn: Any, spent: list[float]) -> Any:
    """`fn`, adding the CPU seconds of each call to spent[0]."""

    def timed(*args: Any) -> Any:
        c0 = time.process_time()
        try:
            return fn(*args)
        finally:
            spent[0] += time.process_time() - c0

    return timed


def name_position(root: Path, d: Def) -> tuple[int, int] | None:
    """(line, column) of the definition's name (its unit may start at a decorator)."""
    lines = (root / d.path).read_text(encoding="utf-8").splitlines()
    pat = re.compile(rf"\b(?:def|class)\s+({re.escape(d.name)})\b")
    for ln in range(d.start, min(d.end, len(lines)) + 1):
        m = pat.search(lines[ln - 1])
        if m:
            return ln, m.start(1)
    return None


def _innermost(graph: SymbolGraph) -> dict[str, list[Def]]:
    by_file: dict[str, list[Def]] = {}
    for d in graph.defs.values():
        by_file.setdefault(d.path, []).append(d)
    return by_file


def scope_at(by_file: dict[str, list[Def]], path: str, line: int) -> str:
    """The qualified name of the innermost definition holding `line` ('' at module level)."""
    best: Def | None = None
    for d in by_file.get(path, []):
        if d.start <= line <= d.end and (best is None or d.end - d.start < best.end - best.start):
            best = d
    return best.qualname if best is not None else ""


def _project(root: Path) -> Any:
    """A jedi project that reads the copy: the installed package (site-packages) left off its path,
    so `from apscheduler.events import X` means the copy's file; the standard library kept."""
    import sysconfig

    import jedi

    stdlib = sysconfig.get_paths()["stdlib"]
    return jedi.Project(root, smart_sys_path=False, sys_path=[str(root), stdlib])


def jedi_truth(root: Path, graph: SymbolGraph, limit: int) -> dict[str, list[list[Any]]]:
    """For each Python definition ('path:qualname'): jedi's references [path, line, called]."""
    import jedi

    project = _project(root)
    out: dict[str, list[list[Any]]] = {}
    defs = [d for d in graph.defs.values() if d.lang == "python"]
    for d in sorted(defs, key=lambda d: (d.path, d.start))[: limit or None]:
        pos = name_position(root, d)
        if pos is None:
            continue
        script = jedi.Script(path=str(root / d.path), project=project)
        refs = []
        for n in script.get_references(pos[0], pos[1], include_builtins=False, scope="project"):
            if n.module_path is None or n.is_definition():
                continue
            path = Path(n.module_path).resolve()
            if not path.is_relative_to(root.resolve()) or n.line is None:
                continue
            rel = path.relative_to(root.resolve()).as_posix()
            text = (root / rel).read_text(encoding="utf-8").splitlines()[n.line - 1]
            if re.match(r"\s*(from|import)\s", text):
                continue  # an import statement names it; not a use
            after = text[n.column + len(n.name) :].lstrip()
            refs.append([rel, n.line, after.startswith("(")])
        out[f"{d.path}:{d.qualname}"] = refs
    return out


def adjudicate(root: Path, graph: SymbolGraph, truth: dict[str, list[list[Any]]]) -> int:
    """Add to `truth` the graph's uses jedi's `get_references` left out but jedi's `goto` (which
    follows `import ... as` aliases that the reference search, a search by name, misses) lands on
    the definition; how many were added."""
    import jedi

    project = _project(root)
    added = 0
    for key, refs in truth.items():
        path, _, qual = key.partition(":")
        d = graph.defs.get((path, qual))
        pos = name_position(root, d) if d is not None else None
        if d is None or pos is None:
            continue
        have = {(p, ln) for p, ln, _ in refs}
        for u in graph.uses(d):
            if (u.path, u.line) in have:
                continue
            text = (root / u.path).read_text(encoding="utf-8").splitlines()[u.line - 1]
            script = jedi.Script(path=str(root / u.path), project=project)
            for m in re.finditer(rf"\b{re.escape(u.name)}\b", text):
                hits = script.goto(u.line, m.start(), follow_imports=True)
                if any(
                    h.module_path is not None
                    and Path(h.module_path).resolve() == (root / d.path).resolve()
                    and (h.line, h.column) == pos
                    for h in hits
                ):
                    after = text[m.end() :].lstrip()
                    refs.append([u.path, u.line, after.startswith("(")])
                    have.add((u.path, u.line))
                    added += 1
                    break
    return added


def score(graph: SymbolGraph, truth: dict[str, list[list[Any]]]) -> dict[str, Any]:
    """Micro precision and recall of references and callers, per certainty level."""
    by_file = _innermost(graph)
    report: dict[str, Any] = {}
    misses: list[str] = []
    extras: list[str] = []
    ref_extras: list[str] = []
    for level, allowed in LEVELS.items():
        tp_r = fp_r = fn_r = tp_c = fp_c = fn_c = 0
        for key, refs in truth.items():
            path, _, qual = key.partition(":")
            d = graph.defs.get((path, qual))
            if d is None:
                continue
            want_refs = {(p, ln) for p, ln, _ in refs}
            want_callers = {(p, scope_at(by_file, p, ln)) for p, ln, called in refs if called}
            uses = [u for u in graph.uses(d) if u.certainty in allowed]
            got_refs = {(u.path, u.line) for u in uses}
            got_callers = {(u.path, u.scope) for u in uses if u.called}
            tp_r += len(want_refs & got_refs)
            fp_r += len(got_refs - want_refs)
            fn_r += len(want_refs - got_refs)
            tp_c += len(want_callers & got_callers)
            fp_c += len(got_callers - want_callers)
            fn_c += len(want_callers - got_callers)
            if level == "resolved":
                ref_extras += [f"{key} @ {p}:{ln}" for p, ln in sorted(got_refs - want_refs)]
                misses += [f"{key} <- {p}:{s}" for p, s in sorted(want_callers - got_callers)]
                extras += [f"{key} <- {p}:{s}" for p, s in sorted(got_callers - want_callers)]
        report[level] = {
            "callers": _pr(tp_c, fp_c, fn_c),
            "references": _pr(tp_r, fp_r, fn_r),
        }
    report["missed_callers_sample"] = misses[:25]
    report["extra_callers_sample"] = extras[:25]
    report["extra_references_sample"] = ref_extras[:40]
    report["definitions"] = len(truth)
    report["truth_callers"] = sum(len({(p, ln) for p, ln, c in r if c}) for r in truth.values())
    return report


def _pr(tp: int, fp: int, fn: int) -> dict[str, float | int]:
    return {
        "precision": round(tp / (tp + fp), 3) if tp + fp else 1.0,
        "recall": round(tp / (tp + fn), 3) if tp + fn else 1.0,
        "tp": tp,
        "fp": fp,
        "fn": fn,
    }


EDITS = 8  # successive edits timed per file


def _added(target: str, i: int) -> str:
    """The text the i-th edit appends: a new function (a comment in Java and Go, where a function
    cannot stand at the end of the file)."""
    if target.endswith(".py"):
        return f"\n\ndef _bench_added_{i}(value):\n    return helper_{i}(value)\n"
    if target.endswith((".js", ".ts", ".jsx", ".tsx")):
        return f"\nfunction benchAdded{i}(value) {{\n  return helper{i}(value);\n}}\n"
    return f"\n// bench {i}\n"


def incremental(idx: CodeIndex, root: Path, which: str = "largest", edits: int = EDITS) -> dict[str, Any]:
    """Wall and CPU seconds to re-index and save one changed file (the largest source file, or the
    file of median unit count), each of `edits` successive edits appending a function: the median
    and the spread (min, max); the graph rebuilt after."""
    sources = sorted(
        (len(r.slots), p) for p, r in idx.files.items() if p.endswith((".py", ".java", ".js", ".ts"))
    )
    target = sources[-1][1] if which == "largest" else sources[len(sources) // 2][1]
    path = root / target
    original = path.read_text(encoding="utf-8")
    walls, cpus = [], []
    for i in range(edits):
        path.write_text(path.read_text(encoding="utf-8") + _added(target, i), encoding="utf-8")
        t0, c0 = time.perf_counter(), time.process_time()
        idx.update_files([target])
        idx.save()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    path.write_text(original, encoding="utf-8")  # the corpus as it was for the next build
    t0 = time.perf_counter()
    idx._graph = None
    idx.symbol_graph()
    return {
        "update_one_file_s": round(statistics.median(walls), 4),
        "update_one_file_cpu_s": round(statistics.median(cpus), 4),
        "update_wall_min_max_s": [round(min(walls), 4), round(max(walls), 4)],
        "update_cpu_min_max_s": [round(min(cpus), 4), round(max(cpus), 4)],
        "update_cpu_each_s": [round(c, 4) for c in cpus],
        "edits": edits,
        "updated_file_units": len(idx.files[target].slots),
        "graph_rebuild_after_update_s": round(time.perf_counter() - t0, 4),
        "updated_file": target,
    }


def run(package: str, cache: Path, limit: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="xihe-bench-graph-") as tmp:
        root, version = copy_package(package, Path(tmp))
        bare, bare_s = build(root, with_graph=False)
        shutil.rmtree(root / ".index")
        idx, full_s = build(root)
        shutil.rmtree(root / ".index")
        bare2, bare2_s = build(root, with_graph=False)
        shutil.rmtree(root / ".index")
        idx, full2_s = build(root)
        t0 = time.perf_counter()
        graph = idx.symbol_graph()
        load_s = time.perf_counter() - t0
        import jedi

        cached = cache / f"{package}-{version}-jedi-{jedi.__version__}-{limit}.json"
        if cached.exists():
            truth = json.loads(cached.read_text(encoding="utf-8"))
            jedi_s = None
        else:
            t0 = time.perf_counter()
            truth = jedi_truth(root, graph, limit)
            adjudicated = adjudicate(root, graph, truth)
            truth["__adjudicated__"] = [[adjudicated]]
            jedi_s = round(time.perf_counter() - t0, 1)
            cache.mkdir(parents=True, exist_ok=True)
            cached.write_text(json.dumps(truth), encoding="utf-8")
        added = truth.pop("__adjudicated__", [[0]])[0][0]
        report = {
            "package": f"{package} {version}",
            "files": len(idx.files),
            "units": idx.unit_count,
            "build_without_graph_s": round(min(bare_s, bare2_s), 3),
            "build_with_graph_s": round(min(full_s, full2_s), 3),
            "graph_first_query_load_s": round(load_s, 3),
            "graph_file_bytes": (idx.directory / graphstore.FILE).stat().st_size,
            "jedi_seconds": jedi_s,
            "uses_confirmed_by_jedi_goto": added,
            **score(graph, truth),
        }
        report.update(incremental(idx, root))
        del bare, bare2
        return report


STDLIB = (
    "asyncio",
    "email",
    "http",
    "json",
    "logging",
    "concurrent",
    "xml",
    "unittest",
    "importlib",
    "urllib",
)


def corpus(name: str, tmp: Path, cache: Path) -> Path:
    """The speed corpus copied under `tmp`: ten standard-library packages, or React Native 0.71.19
    (the held-out evaluation's npm package, 2,973 files, fetched once into `cache`)."""
    if name == "jdk-ds":  # the DolphinScheduler-sized Java tree of bench_build (openjdk-17-source)
        from tests.bench.bench_build import jdk_sample

        shutil.copytree(jdk_sample(Path("var/bench-build").resolve()), tmp / name)
        return tmp / name
    if name == "react-native":
        from xihe.tools.codeindex.heldout import fetch, load_set

        src = fetch(load_set("react-native-android").source, cache)
        shutil.copytree(src, tmp / name)
        return tmp / name
    import sysconfig

    lib = Path(sysconfig.get_paths()["stdlib"])
    for pkg in STDLIB:
        shutil.copytree(lib / pkg, tmp / name / pkg, ignore=shutil.ignore_patterns("__pycache__", "test*"))
    return tmp / name


def speed(
    rounds: int, name: str = "stdlib", cache: Path = Path("var/eval-src"), pairs: int = 5
) -> dict[str, Any]:
    """Build time with and without the graph's facts (BM25 only, and with the shipped config's
    vectors), interleaved, best of `rounds` (BM25 only: of at least `pairs`), after an uncounted
    warm-up build; then one file's update (the largest and a median one, median of `EDITS` edits) as
    a share of the build, wall and CPU."""
    from xihe.config.code import load_file
    from xihe.tools.codeindex.embed import make_embedder

    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="xihe-bench-graph-") as tmp:
        root = corpus(name, Path(tmp), cache)
        shipped_cfg = load_file("config").model_copy(update={"index_dir": str(root / ".index")})
        shipped = (shipped_cfg, make_embedder(shipped_cfg.embedding))
        build(root, True, shipped)  # warm-up, not counted: the first build pays the process's one-time loads
        shutil.rmtree(root / ".index", ignore_errors=True)
        for label, how in (("bm25_only", None), ("shipped_config", shipped)):
            times: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
            shares: list[float] = []  # per build with the facts: their CPU over the rest of it
            n = max(rounds, pairs) if how is None else rounds  # the cheap builds: enough pairs for a median
            updates: dict[str, list[dict[str, Any]]] = {"largest": [], "median": []}
            for r in range(n):
                for with_graph in (False, True) if r % 2 == 0 else (True, False):
                    shutil.rmtree(root / ".index", ignore_errors=True)
                    idx, seconds = build(root, with_graph, how)
                    times[with_graph].append((seconds, BUILD_CPU[-1]))
                    if with_graph:
                        shares.append(FACTS_CPU[-1] / (BUILD_CPU[-1] - FACTS_CPU[-1]))
                        built = len(idx.files), idx.unit_count  # before the edits add theirs
                        for which, got in updates.items():  # right after the build they are a share of
                            update = incremental(idx, root, which)
                            update["cpu_share_of_this_build"] = (
                                update["update_one_file_cpu_s"] / BUILD_CPU[-1]
                            )
                            got.append(update)
            before = min(t[0] for t in times[False]), min(t[1] for t in times[False])
            after = min(t[0] for t in times[True]), min(t[1] for t in times[True])
            row: dict[str, Any] = {
                "corpus": name,
                "files": built[0],
                "units": built[1],
                "rounds": n,
                "build_without_graph_s": round(before[0], 2),
                "build_with_graph_s": round(after[0], 2),
                "build_without_graph_cpu_s": round(before[1], 2),
                "build_with_graph_cpu_s": round(after[1], 2),
                "build_cpu_each_s": {str(k): [round(t[1], 2) for t in v] for k, v in times.items()},
                "growth": round(after[0] / before[0] - 1, 3),
                "growth_cpu": round(after[1] / before[1] - 1, 3),
                **pair_growth(times),
                # inside each build with the facts (so a disturbance hits both parts alike): the CPU of
                # their extraction and JSON over the rest of that build, their query captures not counted
                "facts_cpu_share_in_build_median": round(statistics.median(shares), 3),
                "facts_cpu_share_in_build_min_max": [round(min(shares), 3), round(max(shares), 3)],
            }
            for which, got in updates.items():
                update = got[-1]  # the last round's edits, and every round's share of the build before them
                each = sorted(u["cpu_share_of_this_build"] for u in got)
                update["cpu_share_of_this_build"] = round(update["cpu_share_of_this_build"], 4)
                update["cpu_share_of_build_before_median"] = round(statistics.median(each), 4)
                update["cpu_share_of_build_before_min_max"] = [round(each[0], 4), round(each[-1], 4)]
                update["first_edit_cpu_s_each_round"] = [u["update_cpu_each_s"][0] for u in got]
                update["share_of_build"] = round(update["update_one_file_s"] / after[0], 4)
                update["cpu_share_of_build"] = round(update["update_one_file_cpu_s"] / after[1], 4)
                update["cpu_share_min_max"] = [round(c / after[1], 4) for c in update["update_cpu_min_max_s"]]
                row[f"update_{which}_file"] = update
            out[label] = row
        out["load_average"] = [round(x, 2) for x in os.getloadavg()]
    return out


def pair_growth(times: dict[bool, list[tuple[float, float]]]) -> dict[str, Any]:
    """The growth of each pair of builds run back to back (with and without the facts, CPU): their
    median and spread, steadier than the ratio of two bests when one build of a pair is disturbed."""
    ratios = sorted(w[1] / b[1] - 1 for w, b in zip(times[True], times[False], strict=True))
    return {
        "growth_cpu_pairs_median": round(statistics.median(ratios), 3),
        "growth_cpu_pairs_min_max": [round(ratios[0], 3), round(ratios[-1], 3)],
        "growth_cpu_pairs": [round(r, 3) for r in ratios],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--packages", default="requests,apscheduler")
    ap.add_argument("--cache", default="var/bench-graph")
    ap.add_argument("--limit", type=int, default=0, help="definitions per package (0 = all)")
    ap.add_argument("--speed", type=int, default=0, metavar="ROUNDS", help="also time builds and updates")
    ap.add_argument(
        "--speed-corpus", default="stdlib", choices=("stdlib", "react-native", "jdk-ds"), help="for --speed"
    )
    ap.add_argument(
        "--pairs", type=int, default=5, help="for --speed: BM25-only build pairs at least (median growth)"
    )
    ap.add_argument("--js", action="store_true", help="also JavaScript against TypeScript's findReferences")
    ap.add_argument("--js-packages", default=",".join(PACKAGES), help="pinned npm packages (name@version)")
    args = ap.parse_args()
    out: dict[str, Any] = {p: run(p, Path(args.cache), args.limit) for p in args.packages.split(",") if p}
    if args.js:
        out["javascript"] = {p: run_js(p, Path(args.cache)) for p in args.js_packages.split(",") if p}
    if args.speed:
        out["speed"] = speed(args.speed, args.speed_corpus, pairs=args.pairs)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
