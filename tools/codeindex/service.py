"""Opening, building and updating the index of a repository: what the CLI, jobs and webhook call."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from xihe.tools.codeindex import gitdiff
from xihe.tools.codeindex.embed import Embedder, Reranker, make_embedder
from xihe.tools.codeindex.index import CodeIndex, UpdateStats
from xihe.tools.codeindex.progress import Progress, no_progress
from xihe.tools.codeindex.settings import repo_key

if TYPE_CHECKING:  # only types: a query on a saved index never imports pydantic
    from xihe.config.code import CodeConfig


@dataclass(frozen=True)
class IndexReport:
    """What `index_repo` did, for the CLI and logs."""

    repo: str
    mode: str  # full | incremental | reconcile | unchanged
    commit: str | None
    files: int
    units: int
    files_changed: list[str] = field(default_factory=list)
    units_added: int = 0
    units_removed: int = 0
    seconds: float = 0.0
    directory: str = ""


def index_dir(root: Path, cfg: CodeConfig) -> Path:
    """Where the index of `root` lives: <cfg.index_dir>/<repo-key>."""
    return Path(cfg.index_dir) / repo_key(root)


def _embedder(cfg: CodeConfig, embedder: Embedder | None) -> Embedder | None:
    return embedder if embedder is not None else make_embedder(cfg.embedding)


def _reranker(cfg: CodeConfig) -> Reranker | None:
    return Reranker(cfg.rerank) if cfg.rerank.enabled and cfg.rerank.base_url else None


def open_index(root: Path, cfg: CodeConfig, embedder: Embedder | None = None) -> CodeIndex | None:
    """The saved index of `root` as it is on disk (no freshness check), or None."""
    root = Path(root)
    return CodeIndex.load(root, index_dir(root, cfg), cfg, _embedder(cfg, embedder), _reranker(cfg))


def _report(idx: CodeIndex, mode: str, stats: UpdateStats, t0: float) -> IndexReport:
    return IndexReport(
        repo=str(idx.root),
        mode=mode,
        commit=idx.commit,
        files=len(idx.files),
        units=idx.unit_count,
        files_changed=sorted(stats.changed),
        units_added=stats.units_added,
        units_removed=stats.units_removed,
        seconds=round(time.perf_counter() - t0, 3),
        directory=str(idx.directory),
    )


def stamp_of(root: Path, st: gitdiff.Status | None = None) -> tuple[str | None, list[str]]:
    """(the commit HEAD points at, the paths that differ from it), from one `git status` (`st` when
    already read); without git, no commit and nothing dirty."""
    st = st if st is not None else gitdiff.status(root)
    if st is None:
        return None, []
    return st.head, (st.paths if st.head else [])


def _stamp(idx: CodeIndex, st: gitdiff.Status | None = None) -> None:
    """Record the commit indexed and the paths that differed from it."""
    idx.commit, idx.dirty = stamp_of(idx.root, st)


def suspects_since(idx: CodeIndex) -> tuple[set[str] | None, gitdiff.Status | None]:
    """The paths that may differ from the index (None: git cannot say, compare every file's hash),
    and the `git status` read, to stamp the index with when HEAD is still the indexed commit.

    While HEAD is the indexed commit, one `git status` says it all: what differs from HEAD, plus
    what differed when the index was stamped (a file edited and reverted since). Otherwise `git diff`
    from the indexed commit to the work tree.
    """
    if not idx.commit:
        return None, None
    st = gitdiff.status(idx.root)
    if st is not None and st.head == idx.commit:
        return set(st.paths) | set(idx.dirty), st
    changes = gitdiff.changes_since(idx.root, idx.commit)
    return (changes.paths() | set(idx.dirty) if changes is not None else None), None


def index_repo(
    root: Path,
    cfg: CodeConfig,
    *,
    full: bool = False,
    reconcile: bool = False,
    progress: Progress = no_progress,
    embedder: Embedder | None = None,
) -> tuple[CodeIndex, IndexReport]:
    """Bring the index of `root` up to date: build if missing, else re-parse only what changed.

    Changes come from `git diff` between the recorded commit and the work tree (plus untracked files
    and paths that were dirty last time); without git, or with `reconcile=True`, every file's hash is
    compared instead. Saves only when something changed.
    """
    t0 = time.perf_counter()
    root = Path(root)
    emb = _embedder(cfg, embedder)
    idx = None if full else CodeIndex.load(root, index_dir(root, cfg), cfg, emb, _reranker(cfg))
    if idx is None:
        idx = CodeIndex(root, index_dir(root, cfg), cfg, emb, reranker=_reranker(cfg))
        stats = idx.build(progress)
        _stamp(idx)
        idx.save()
        return idx, _report(idx, "full", stats, t0)
    suspects, st = (None, None) if reconcile else suspects_since(idx)
    if suspects is None:
        stats = idx.reconcile()
        mode = "reconcile"
    else:
        stats = idx.update_files(suspects)
        mode = "incremental"
    old_commit, old_dirty = idx.commit, idx.dirty
    _stamp(idx, st)  # the status read before the update, when HEAD had not moved: no second call
    if stats.changed or idx.commit != old_commit or idx.dirty != old_dirty:
        idx.save()
    elif mode == "incremental":
        mode = "unchanged"
    return idx, _report(idx, mode, stats, t0)


def reindex_changed(
    root: Path, paths: Iterable[str], cfg: CodeConfig, embedder: Embedder | None = None
) -> IndexReport:
    """Re-index the given paths (from a push webhook, after the work tree was pulled) and save."""
    t0 = time.perf_counter()
    root = Path(root)
    idx = open_index(root, cfg, embedder)
    if idx is None:
        return index_repo(root, cfg, embedder=embedder)[1]
    stats = idx.update_files(paths)
    _stamp(idx)
    idx.save()
    return _report(idx, "incremental", stats, t0)


def reconcile_all(cfg: CodeConfig, embedder: Embedder | None = None) -> list[IndexReport]:
    """Start-up job: compare every configured repository with its index by file hash and fix drift."""
    return [index_repo(Path(r), cfg, reconcile=True, embedder=embedder)[1] for r in cfg.repos]
