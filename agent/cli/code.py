"""`xihe index`, `xihe search`, `xihe code ...` and `xihe eval search`: the code index for people and
for evaluation."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def _config_dir(args: argparse.Namespace) -> str:
    return str(getattr(args, "config", "config"))


def _config(args: argparse.Namespace) -> Any:
    from xihe.config.code import load_file

    return load_file(_config_dir(args))


def _repo(args: argparse.Namespace) -> Path:
    repo = getattr(args, "repo", None) or getattr(args, "path", None) or "."
    return Path(repo)


def _config_and_repo(args: argparse.Namespace) -> tuple[Any, Path] | int:
    """The code config and the repository path, or exit code 2 after saying what is wrong."""
    from xihe.agent.errors import ConfigError  # (not imported by a search a serve answers)

    try:
        cfg = _config(args)
    except ConfigError as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return 2
    repo = _repo(args)
    if not repo.is_dir():
        print(f"not a directory: {repo}", file=sys.stderr)
        return 2
    return cfg, repo


def cmd_index(args: argparse.Namespace) -> int:
    """Build or incrementally update the index of a repository and print what was done."""
    from xihe.agent.cachedir import shared_cache
    from xihe.tools.codeindex import zhdict
    from xihe.tools.codeindex.progress import no_progress, tqdm_progress
    from xihe.tools.codeindex.service import index_repo
    from xihe.tools.codeindex.settings import remember

    opened = _config_and_repo(args)
    if isinstance(opened, int):
        return opened
    cfg, repo = opened
    progress = tqdm_progress if sys.stderr.isatty() and not args.quiet else no_progress
    _, report = index_repo(repo, cfg, full=args.full, reconcile=args.reconcile, progress=progress)
    zhdict.ensure(shared_cache())  # a Chinese question reads these instead of loading jieba and CC-CEDICT
    remember(_config_dir(args), repo, cfg)
    if args.json:
        print(json.dumps(report.__dict__, ensure_ascii=False))
    else:
        print(
            f"{report.mode}: {report.files} files, {report.units} units, "
            f"{len(report.files_changed)} changed (+{report.units_added}/-{report.units_removed} units), "
            f"commit {report.commit or '-'}, {report.seconds:.2f}s -> {report.directory}"
        )
    return 0


def _fresh_index(args: argparse.Namespace) -> Any:
    """The repository's index brought up to date (config reused as `xihe search` does), or an exit code."""
    from xihe.tools.codeindex.progress import no_progress
    from xihe.tools.codeindex.service import index_repo
    from xihe.tools.codeindex.settings import cached, remember

    repo = _repo(args)
    cfg = cached(_config_dir(args), repo) if repo.is_dir() else None
    if cfg is None:
        opened = _config_and_repo(args)
        if isinstance(opened, int):
            return opened
        cfg, repo = opened
        remember(_config_dir(args), repo, cfg)
    return index_repo(repo, cfg, progress=no_progress)[0]


def cmd_graph(args: argparse.Namespace) -> int:
    """`xihe code callers|callees|refs SYMBOL` and `xihe code chain FROM TO`: the symbol graph's answers."""
    from xihe.agent.cli.terminal import shown  # a file name or symbol may carry escape sequences
    from xihe.tools.codeindex import navigate

    idx = _fresh_index(args)
    if isinstance(idx, int):
        return idx
    if args.graph == "chain":
        text = navigate.call_chain(idx, args.start, args.goal, args.max_hops)
    else:
        answer = {
            "callers": navigate.find_callers,
            "callees": navigate.find_callees,
            "refs": navigate.find_references,
        }[args.graph]
        text = answer(idx, args.symbol)
    print(shown(text))
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    """Search a repository (indexing or updating it first) and print hits, best first.

    A `xihe serve` on this machine with the same index_dir and settings answers when there is one
    (unless `--local`; searchfast.py): no index is loaded here then. With the same code.yaml as last time, the config
    validated then is reused (settings.py): a search does not import pydantic.
    """
    from xihe.agent.cli.searchfast import served_output

    query = " ".join(args.query)
    # main() has asked the serve already when the arguments were of the common form (`asked`)
    ask = not (args.local or getattr(args, "asked", False))
    answered = served_output(_config_dir(args), args.repo, query, args.k, args.json) if ask else None
    if answered is not None:
        sys.stdout.write(answered)
        return 0
    from xihe.tools.codeindex.settings import cached

    repo = _repo(args)
    cfg = cached(_config_dir(args), repo) if repo.is_dir() else None
    from xihe.tools.codeindex.api import search_code
    from xihe.tools.codeindex.progress import no_progress
    from xihe.tools.codeindex.service import index_repo
    from xihe.tools.codeindex.settings import remember

    if cfg is None:
        opened = _config_and_repo(args)
        if isinstance(opened, int):
            return opened
        cfg, repo = opened
        remember(_config_dir(args), repo, cfg)
    idx, _ = index_repo(repo, cfg, progress=no_progress)
    from xihe.tools.codeindex.hitstext import hits_text

    sys.stdout.write(hits_text([h.to_json() for h in search_code(idx, query, args.k)], args.json))
    return 0


def cmd_eval_search(args: argparse.Namespace) -> int:
    """Run the search evaluation (held-out sets, or the stdlib benchmark) and print its JSON report."""
    import tempfile

    from xihe.agent.errors import ConfigError

    try:
        cfg = _config(args)
    except ConfigError as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return 2
    names = [n.strip() for n in args.sets.split(",") if n.strip()]
    with tempfile.TemporaryDirectory(prefix="xihe-eval-") as tmp:
        work = Path(args.workdir or tmp)
        report: dict[str, Any] = {}
        if "stdlib" in names:
            from xihe.tools.codeindex.evaluate import evaluate

            modules = [m.strip() for m in args.modules.split(",")] if args.modules else None
            report["stdlib"] = evaluate(work / "stdlib", cfg, modules, args.limit)
        held = [n for n in names if n != "stdlib"]
        if held:
            from xihe.tools.codeindex.heldout import evaluate_sets, summary

            try:
                sets = evaluate_sets(held, Path(args.cache), work, cfg, args.limit, args.learn)
            except (ValueError, RuntimeError) as exc:
                print(f"eval search: {exc}", file=sys.stderr)
                return 2
            report.update(sets)
            report["summary"] = summary(sets)
    print(json.dumps(report, ensure_ascii=False, indent=2))
    return 0


def _config_option(p: argparse.ArgumentParser) -> None:
    # SUPPRESS: a --config given to the top-level parser is not overwritten by this default
    p.add_argument("--config", default=argparse.SUPPRESS, help="YAML config directory (default: config)")


def register(sub: Any) -> None:
    """Add `index`, `search` and `code` to the xihe sub-parsers."""
    p = sub.add_parser("index", help="build or update the code index of a repository")
    p.add_argument("path", nargs="?", help="repository path (same as --repo)")
    p.add_argument("--repo", help="repository path (default: current directory)")
    p.add_argument("--full", action="store_true", help="rebuild from scratch")
    p.add_argument("--reconcile", action="store_true", help="compare every file's hash instead of git diff")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    _config_option(p)
    p.set_defaults(func=cmd_index)

    s = sub.add_parser("search", help="search a repository's code index")
    _search_arguments(s)
    _config_option(s)

    c = sub.add_parser("code", help="callers, callees, references and call chains from the symbol graph")
    graph = c.add_subparsers(dest="graph", required=True)
    for name, helptext in (
        ("callers", "who calls SYMBOL"),
        ("callees", "what SYMBOL calls"),
        ("refs", "every use of SYMBOL"),
    ):
        g = graph.add_parser(name, help=helptext)
        g.add_argument("symbol", help="name, Class.method, package.module.function or path:Class.method")
        _graph_options(g)
    ch = graph.add_parser("chain", help="the shortest call chains from FROM to TO")
    ch.add_argument("start", metavar="FROM", help="where the chain starts")
    ch.add_argument("goal", metavar="TO", help="where it should arrive")
    ch.add_argument("--max-hops", type=int, default=8, help="the longest chain looked for (default 8)")
    _graph_options(ch)


def _search_arguments(s: argparse.ArgumentParser) -> None:
    s.add_argument("query", nargs="+", help="symbols, keywords or a question")
    s.add_argument("--repo", default=".", help="repository path (default: current directory)")
    s.add_argument("--json", action="store_true", help='print [{"path","start","end","symbol","score"}]')
    s.add_argument("-k", type=int, default=10, help="number of hits (default 10)")
    s.add_argument(
        "--local", action="store_true", help="search in this process even when a running serve could answer"
    )
    s.set_defaults(func=cmd_search)


def search_parser() -> argparse.ArgumentParser:
    """`xihe search` alone, as `xihe [--config DIR] search ...` parses it: what main() uses for a search,
    so a search that a serve answers imports no other command's module."""
    p = argparse.ArgumentParser(prog="xihe search", description="search a repository's code index")
    _search_arguments(p)
    p.add_argument("--config", default="config", help="YAML config directory (default: config)")
    return p


def _graph_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--repo", default=".", help="repository path (default: current directory)")
    _config_option(p)
    p.set_defaults(func=cmd_graph)


def register_eval(evals: Any) -> None:
    """Add `eval search` to the `xihe eval` sub-parsers."""
    es = evals.add_parser("search", help="code search evaluation on held-out repositories")
    es.add_argument(
        "--sets",
        default="react-native-android,apscheduler",
        help="comma-separated sets: react-native-android, apscheduler, stdlib (default: the first two)",
    )
    es.add_argument("--cache", default="var/eval-src", help="where fetched packages are kept")
    es.add_argument("--modules", default="", help="stdlib set only: comma-separated modules")
    es.add_argument("--limit", type=int, default=300, help="docstring queries to sample per set")
    es.add_argument("--workdir", default="", help="keep the indexes here")
    es.add_argument(
        "--learn", action="store_true", help="learn fusion weights on the dev split, report them on test"
    )
    _config_option(es)
    es.set_defaults(func=cmd_eval_search)
