"""The indexes a running bot serves: opened once, searched under a lock, refreshed in place.

`CodeIndex` is not thread-safe, and the bot searches from request threads while jobs and the git
webhook update it. Each repository therefore has a read lock (every search, citation check and
update of the in-memory index) and a build lock (one refresh at a time). A refresh does the slow
parts outside the read lock (git diff, hashing files, or a first build into a separate object) and
holds it only to apply the changed files, stamp the commit and save.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from xihe.config.code import CodeConfig
from xihe.tools.codeindex import gitdiff
from xihe.tools.codeindex.api import NOTHING_FOUND, Hit, extract_citations, get_code_context, search_code
from xihe.tools.codeindex.api import exists as cited_exists
from xihe.tools.codeindex.embed import Embedder, make_embedder
from xihe.tools.codeindex.index import CodeIndex, UpdateStats, sha1_of
from xihe.tools.codeindex.service import (
    IndexReport,
    _report,
    index_repo,
    open_index,
    stamp_of,
    suspects_since,
)
from xihe.tools.codeindex.walk import read_source

log = logging.getLogger("xihe.codeindex")


@dataclass
class LiveRepo:
    """One configured repository: its index (None until built) and its locks."""

    root: Path
    index: CodeIndex | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    build_lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def name(self) -> str:
        """The folder name, used to label hits when several repositories are configured."""
        return self.root.name


def _remote_key(url: str) -> str:
    """'owner/name' of a git URL (https, ssh or scp form), lower-case, without '.git'."""
    url = url.strip().lower().removesuffix("/").removesuffix(".git")
    url = re.sub(r"^[a-z+]+://", "", url)
    url = re.sub(r"^[^@/]+@", "", url).replace(":", "/")
    parts = [p for p in url.split("/") if p]
    return "/".join(parts[-2:])


class LiveIndexes:
    """Every configured repository's index, safe to use from several threads."""

    def __init__(self, cfg: CodeConfig, embedder: Embedder | None = None) -> None:
        self.cfg = cfg
        self.embedder = embedder if embedder is not None else make_embedder(cfg.embedding)
        self.repos = [LiveRepo(Path(r).resolve()) for r in cfg.repos]

    def open(self) -> None:
        """Load the saved indexes (no build: the start-up reconcile job builds what is missing)."""
        for repo in self.repos:
            idx = open_index(repo.root, self.cfg, self.embedder)
            with repo.lock:
                repo.index = idx

    @property
    def ready(self) -> list[LiveRepo]:
        """Repositories whose index is loaded."""
        return [r for r in self.repos if r.index is not None]

    # ---- refreshing ---------------------------------------------------------------------------
    def _drift(self, idx: CodeIndex) -> set[str]:
        """Paths whose content differs from the index (by hash), read without holding the read lock."""
        files = dict(idx.files)
        on_disk = set(idx.walk())
        suspects = set(files) - on_disk
        for rel in on_disk:
            rec = files.get(rel)
            text = read_source(idx.root / rel, self.cfg.walk.max_file_bytes) if rec is not None else None
            if rec is None or text is None or sha1_of(text) != rec.sha1:
                suspects.add(rel)
        return suspects

    def refresh(
        self, repo: LiveRepo, *, paths: Iterable[str] | None = None, reconcile: bool = False
    ) -> IndexReport:
        """Bring one repository's index up to date: given paths, git changes, or a full hash compare."""
        with repo.build_lock:
            t0 = time.perf_counter()
            idx = repo.index
            if idx is None:
                built, report = index_repo(repo.root, self.cfg, reconcile=reconcile, embedder=self.embedder)
                with repo.lock:
                    repo.index = built
                return report
            mode, st = "incremental", None
            if paths is not None:
                suspects = set(paths) | set(idx.dirty)
            else:
                found, st = (None, None) if reconcile else suspects_since(idx)
                if found is None:
                    suspects, mode = self._drift(idx), "reconcile"
                else:
                    suspects = found
            commit, dirty = stamp_of(idx.root, st)  # HEAD unchanged: the status read above
            with repo.lock:
                stats = idx.update_files(suspects) if suspects else UpdateStats()
                stamp_changed = (idx.commit, idx.dirty) != (commit, dirty)
                idx.commit, idx.dirty = commit, dirty
                if stats.changed or stamp_changed:
                    idx.save()
                elif mode == "incremental":
                    mode = "unchanged"
                return _report(idx, mode, stats, t0)

    def refresh_all(
        self,
        repos: Iterable[LiveRepo] | None = None,
        *,
        paths: Iterable[str] | None = None,
        reconcile: bool = False,
    ) -> list[IndexReport]:
        """Refresh several repositories; one failing does not stop the others (it is logged)."""
        reports = []
        wanted = list(paths) if paths is not None else None
        for repo in self.repos if repos is None else repos:
            try:
                reports.append(self.refresh(repo, paths=wanted, reconcile=reconcile))
            except Exception:
                log.exception("refreshing the code index of %s failed", repo.root)
        return reports

    def for_remote(self, url: str) -> list[LiveRepo]:
        """Configured repositories whose `origin` remote is the webhook's repository."""
        want = _remote_key(url) if url else ""
        out = []
        for repo in self.repos:
            remote = gitdiff._git(repo.root, "remote", "get-url", "origin")
            if want and remote and _remote_key(remote) == want:
                out.append(repo)
        return out

    # ---- reading ------------------------------------------------------------------------------
    def search(self, query: str, k: int = 10) -> list[tuple[LiveRepo, Hit]]:
        """Hits from every ready repository, best first."""
        found: list[tuple[LiveRepo, Hit]] = []
        for repo in self.ready:
            with repo.lock:
                assert repo.index is not None
                found += [(repo, h) for h in search_code(repo.index, query, k)]
        found.sort(key=lambda rh: -rh[1].score)
        return found[:k]

    def search_repo(self, repo: LiveRepo, query: str, k: int = 10) -> list[Hit]:
        """One repository's hits, as `xihe search` prints them (empty while its index is not built)."""
        with repo.lock:
            return search_code(repo.index, query, k) if repo.index is not None else []

    def context(self, question: str, n: int) -> tuple[str, bool]:
        """(text under `## File:` headers, whether anything relevant was found)."""
        parts = []
        for repo in self.ready:
            with repo.lock:
                assert repo.index is not None
                text = get_code_context(repo.index, question, n)
            if not text.startswith(NOTHING_FOUND):
                parts.append(f"# Repository: {repo.name}\n{text}" if len(self.repos) > 1 else text)
        if not parts:
            return f"{NOTHING_FOUND} for: {question!r}. Say so rather than guessing.", False
        return "\n\n".join(parts), True

    def navigate(self, answer: Callable[[CodeIndex], str]) -> str:
        """A symbol-graph answer (navigate.py) from every ready repository, each under its name when
        several are configured; the first repository's answer alone when none knows the symbol."""
        parts, first = [], ""
        for repo in self.ready:
            with repo.lock:
                assert repo.index is not None
                text = answer(repo.index)
            first = first or text
            if "## File:" in text:
                parts.append(f"# Repository: {repo.name}\n{text}" if len(self.repos) > 1 else text)
        return "\n\n".join(parts) if parts else first

    def _exists(self, path: str, symbol: str | None) -> bool:
        for repo in self.ready:
            with repo.lock:
                idx = repo.index
                assert idx is not None
                if cited_exists(idx, path, symbol):
                    return True
                if not path and symbol:
                    # a name used in the code (a constant, a field, a string) is not an invention
                    last = symbol.rsplit(".", 1)[-1].lower().strip("_")
                    if last in idx.bm25.vocab:
                        return True
        return False

    def missing(self, text: str) -> list[str]:
        """Cited paths and symbols in `text` that exist in no configured repository."""
        if not self.ready:
            return []
        out = []
        for path, symbol in extract_citations(text):
            if not self._exists(path, symbol):
                out.append(f"{path}: {symbol}" if path and symbol else (path or str(symbol)))
        return out
