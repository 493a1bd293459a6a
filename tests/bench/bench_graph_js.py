"""The symbol graph on JavaScript against TypeScript's language service (the second language).

Part of `python -m tests.bench.bench_graph --js`. Each package is a pinned npm release fetched once
with `npm pack` into `<cache>/src` (its published source: `dist/` bundles, `.mjs` wrappers and
`.d.ts` typings left out, so every definition is in one plain `.js` file); the ground truth is
`findReferences` of TypeScript's language service (npm `typescript`, TS_VERSION, installed once with
`npm install` into `<cache>/node`) run by `ts_references.js` on the installed Node.js, at the name of
every function, method and class the index finds, plus the graph's uses that go-to-definition at
the use confirms (`adjudicate`: the reference search stops at a CommonJS `exports.X = X`). Scored as
the Python figures are (bench_graph.py `score`): a reference is a (file, line), a caller the
definition around a call; `require` and `import` lines and definitions left out. Nothing here runs
in the product.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from xihe.tools.codeindex.graph import Def, SymbolGraph
from xihe.tools.codeindex.heldout import fetch

TS_VERSION = "5.9.3"
PACKAGES = ("js-yaml@4.1.0", "commander@12.1.0")  # functions calling functions; a class's methods
SCRIPT = Path(__file__).with_name("ts_references.js")
_SKIP_DIRS = {"dist", "typings", "types", "node_modules"}


def typescript(cache: Path) -> Path:
    """The directory `typescript` is installed under (node_modules/typescript), installed once."""
    where = cache / "node"
    if not (where / "node_modules" / "typescript" / "package.json").exists():
        where.mkdir(parents=True, exist_ok=True)
        cmd = [
            "npm",
            "install",
            "--no-audit",
            "--no-fund",
            "--prefix",
            str(where),
            f"typescript@{TS_VERSION}",
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"npm install typescript@{TS_VERSION} failed: {done.stderr.strip()[-400:]}")
    return where


def copy_package(spec: str, cache: Path, work: Path) -> tuple[Path, str]:
    """The package's plain `.js` files copied to `work/<name>/`; (root, 'name version')."""
    name, _, version = spec.rpartition("@")
    src = fetch({"registry": "npm", "package": name, "version": version}, cache / "src")
    root = work / name
    for p in sorted(src.rglob("*.js")):
        rel = p.relative_to(src)
        if _SKIP_DIRS & set(rel.parts[:-1]) or p.name.endswith(".min.js"):
            continue
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(p, root / rel)
    return root, f"{name} {version}"


def name_position(root: Path, d: Def) -> tuple[int, int] | None:
    """(line, column) of a JS definition's name: `function name`, `class name` or a method `name(`."""
    lines = (root / d.path).read_text(encoding="utf-8").splitlines()
    n = re.escape(d.name)
    pats = [
        re.compile(rf"\b(?:function\s*\*?|class)\s*({n})\b"),
        re.compile(rf"^\s*(?:(?:static|async|get|set)\s+|\*\s*)*({n})\s*\("),
    ]
    for ln in range(d.start, min(d.end, len(lines)) + 1):
        for pat in pats:
            m = pat.search(lines[ln - 1])
            if m:
                return ln, m.start(1)
    return None


def ask(root: Path, ts_dir: Path, queries: list[list[Any]], mode: str = "references") -> list[list[Any]]:
    """The language service's answers to `queries` ([abs file, line, col]) over every `.js` of `root`."""
    request = {
        "root": str(root.resolve()),
        "files": sorted(str(p.resolve()) for p in root.rglob("*.js")),
        "queries": queries,
        "mode": mode,
    }
    done = subprocess.run(
        ["node", str(SCRIPT), str(ts_dir)],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"ts_references.js failed: {done.stderr.strip()[-600:]}")
    answers: list[list[Any]] = json.loads(done.stdout)
    return answers


def ts_truth(root: Path, graph: SymbolGraph, ts_dir: Path) -> dict[str, list[list[Any]]]:
    """For each JS definition ('path:qualname'): the language service's references [path, line, called]."""
    defs = sorted((d for d in graph.defs.values() if d.lang == "javascript"), key=lambda d: (d.path, d.start))
    keyed = [(d, pos) for d in defs if (pos := name_position(root, d)) is not None]
    answers = ask(root, ts_dir, [[str((root / d.path).resolve()), ln, col] for d, (ln, col) in keyed])
    texts: dict[str, list[str]] = {}
    base = root.resolve()
    out: dict[str, list[list[Any]]] = {}
    for (d, _pos), refs in zip(keyed, answers, strict=True):
        rows: dict[tuple[str, int], bool] = {}
        for file, line, col, is_def in refs:
            p = Path(file).resolve()
            if is_def or not p.is_relative_to(base):
                continue
            rel = p.relative_to(base).as_posix()
            lines = texts.setdefault(rel, (root / rel).read_text(encoding="utf-8").splitlines())
            text = lines[line - 1]
            if re.match(r"\s*(import|export\s+\{)", text) or "require(" in text:
                continue  # an import names it; not a use
            after = text[col + len(d.name) :].lstrip()
            before = text[:col].rstrip()
            called = after.startswith("(") or (before.endswith("new") and after.startswith(("(", ";")))
            rows[(rel, line)] = rows.get((rel, line), False) or called
        out[f"{d.path}:{d.qualname}"] = [[p, ln, c] for (p, ln), c in sorted(rows.items())]
    return out


def adjudicate(root: Path, graph: SymbolGraph, truth: dict[str, list[list[Any]]], ts_dir: Path) -> int:
    """Add to `truth` the graph's uses that `findReferences` left out but go-to-definition at the use
    lands on the definition's name (CommonJS `exports.X = X` then `require(...).X`: the reference
    search stops at the export); how many were added. As bench_graph.py does with jedi's `goto`."""
    asks: list[tuple[str, str, int, bool]] = []  # (key, path, line, called) per query
    queries: list[list[Any]] = []
    for key, refs in truth.items():
        path, _, qual = key.partition(":")
        d = graph.defs.get((path, qual))
        if d is None:
            continue
        have = {(p, ln) for p, ln, _ in refs}
        for u in graph.uses(d):
            if (u.path, u.line) in have:
                continue
            have.add((u.path, u.line))
            text = (root / u.path).read_text(encoding="utf-8").splitlines()[u.line - 1]
            for m in re.finditer(rf"\b{re.escape(u.name or d.name)}\b", text):
                called = text[m.end() :].lstrip().startswith("(")
                asks.append((key, u.path, u.line, called))
                queries.append([str((root / u.path).resolve()), u.line, m.start()])
    answers = ask(root, ts_dir, queries, "definitions") if queries else []
    base = root.resolve()
    added: set[tuple[str, str, int]] = set()
    for (key, path, line, called), lands in zip(asks, answers, strict=True):
        dpath, _, qual = key.partition(":")
        d = graph.defs[(dpath, qual)]
        pos = name_position(root, d)
        hit = any(Path(f).resolve() == (base / dpath) and (ln, col) == pos for f, ln, col in lands)
        if hit and (key, path, line) not in added:
            added.add((key, path, line))
            truth[key].append([path, line, called])
    return len(added)


def run_js(spec: str, cache: Path) -> dict[str, Any]:
    """Precision and recall of the graph's callers and references on one npm package."""
    from tests.bench.bench_graph import build, score

    ts_dir = typescript(cache)
    with tempfile.TemporaryDirectory(prefix="xihe-bench-graph-js-") as tmp:
        root, label = copy_package(spec, cache, Path(tmp))
        idx, build_s = build(root)
        graph = idx.symbol_graph()
        t0 = time.perf_counter()
        truth = ts_truth(root, graph, ts_dir)
        added = adjudicate(root, graph, truth, ts_dir)
        ts_s = time.perf_counter() - t0
        return {
            "package": label,
            "ground_truth": f"typescript {TS_VERSION} findReferences (allowJs)",
            "files": len(idx.files),
            "units": idx.unit_count,
            "build_s": round(build_s, 3),
            "typescript_s": round(ts_s, 1),
            "uses_confirmed_by_go_to_definition": added,
            **score(graph, truth),
        }
