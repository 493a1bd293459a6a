"""The code index of one repository: units, BM25 rows and vectors in aligned slots, saved under a dir.

A slot is one unit's row in the BM25 matrix and the vector matrix. Re-indexing a file kills its old
slots and appends new ones, so an update costs that file's parse and embedding only; `compact`
reclaims dead slots once they pile up.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from xihe.tools.codeindex import inherit
from xihe.tools.codeindex.bm25 import Bm25Index
from xihe.tools.codeindex.bridge import CjkBridge
from xihe.tools.codeindex.embed import Embedder, Reranker, WordLlamaEmbedder
from xihe.tools.codeindex.fuse import linear, rrf
from xihe.tools.codeindex.multilingual import Multilingual, MultilingualVectors
from xihe.tools.codeindex.prior import is_test_path
from xihe.tools.codeindex.query import QueryPlan, plan
from xihe.tools.codeindex.qvec import Bpe, QueryVectors, model_files, table_words, vocabulary_words
from xihe.tools.codeindex.tokens import Tokenizer, has_cjk, split_identifier
from xihe.tools.codeindex.units import CodeUnit, Parsers, units_for_file
from xihe.tools.codeindex.walk import IgnoreRules, indexable, read_source, walk_repo

if TYPE_CHECKING:  # only types: a query on a saved index never imports pydantic
    from xihe.config.code import CodeConfig, RetrievalConfig

INDEX_VERSION = 6
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
COMPACT_RATIO = 0.3  # compact when this share of slots is dead
Owner = tuple[str, str, int]  # (path, sha1, unit count) of a parsed file


@dataclass
class FileRecord:
    """What the index knows about one file: its content hash and its slots."""

    sha1: str
    slots: list[int]


@dataclass(frozen=True)
class Scored:
    """One search result: the unit and its scores (fused, and each retriever's raw score)."""

    unit: CodeUnit
    score: float
    bm25: float = 0.0
    cosine: float = 0.0


@dataclass(frozen=True)
class SearchResult:
    """Ranked results plus whether anything cleared the relevance floors."""

    hits: list[Scored]
    best_bm25: float
    best_cosine: float
    relevant: bool


@dataclass
class UpdateStats:
    """What an update did."""

    files_indexed: int = 0
    files_removed: int = 0
    units_added: int = 0
    units_removed: int = 0
    seconds: float = 0.0
    changed: list[str] = field(default_factory=list)


def normalise_path(rel: str) -> str:
    """Repository-relative, '/'-separated, without a leading './' or '/'."""
    rel = rel.strip().replace("\\", "/")
    while rel.startswith("./"):
        rel = rel[2:]
    return rel.lstrip("/")


def sha1_of(text: str) -> str:
    """Content hash used to tell whether a file changed."""
    return hashlib.sha1(text.encode("utf-8", "replace")).hexdigest()


def embed_text(unit: CodeUnit, body: str = "") -> str:
    """What is embedded per unit: the name's words and qualified name, then the doc (or signature).

    Measured on the stdlib benchmark: adding the path, callee names or code to this text lowered
    vector MRR@10 from 0.60 to 0.42 with the static wordllama model (averaging dilutes the doc).
    """
    words = " ".join(split_identifier(unit.qualname.replace(".", "_")))
    if unit.kind in {"window", "module"}:
        return f"{unit.path} {words}\n{unit.doc[:600] or body[:600]}"
    return f"{words}\n{unit.doc[:600] or unit.signature}"


def doc_sentences(doc: str, limit: int) -> list[str]:
    """The first `limit` sentences of a doc comment (three words or more), each embedded on its own.

    A static model averages its tokens, so one vector for a whole docstring blurs it; a question
    usually restates one sentence. Measured on the stdlib benchmark (dev split of other modules):
    max-pooling these with the name+doc vector lifted hybrid MRR@10 from 0.87 to 0.94 on docstring
    queries and from 0.91 to 0.96 on queries made from a doc's second sentence.
    """
    if limit <= 0 or not doc:
        return []
    text = " ".join(doc.split())
    out = [s for s in _SENTENCE_END.split(text) if len(s.split()) >= 3]
    return [s[:300] for s in out[:limit]]


def bm25_text(unit: CodeUnit) -> str:
    """What BM25 indexes per unit: path and qualified name, doc, the unit's own code and callee names."""
    return "\n".join([unit.path, unit.qualname, unit.signature, unit.doc, unit.text, " ".join(unit.calls)])


def name_text(unit: CodeUnit) -> str:
    """The name field: the unit's qualified name and its file's name (without the extension).

    A question names what it looks for in words ("copy text to the clipboard"); those words in a
    unit's name (ClipboardModule.setString) say more than the same words anywhere in its body.
    """
    return f"{unit.qualname} {unit.path.rsplit('/', 1)[-1].split('.', 1)[0]}"


Progress = Callable[[Iterable[str], str, int], Iterable[str]]


def no_progress(items: Iterable[str], desc: str, total: int) -> Iterable[str]:
    """A progress wrapper that shows nothing."""
    return items


def tqdm_progress(items: Iterable[str], desc: str, total: int) -> Iterable[str]:
    """A tqdm bar on stderr (stdout stays clean for JSON)."""
    from tqdm import tqdm

    return tqdm(items, desc=desc, total=total, file=sys.stderr, unit="file", leave=False)


class CodeIndex:
    """Search structures for one repository root, persisted under `directory`."""

    def __init__(
        self,
        root: Path,
        directory: Path,
        cfg: CodeConfig,
        embedder: Embedder | None,
        tokenizer: Tokenizer | None = None,
        reranker: Reranker | None = None,
    ) -> None:
        self.root = Path(root).resolve()
        self.directory = Path(directory)
        self.cfg = cfg
        self.embedder = embedder
        self.tokenizer = tokenizer or Tokenizer()
        self.bridge = CjkBridge()
        self.reranker = reranker
        self.parsers = Parsers()
        self.units: list[CodeUnit | None] = []
        self.files: dict[str, FileRecord] = {}
        self.bm25 = Bm25Index()
        self.names = Bm25Index()  # the name field: qualified name and file name only
        self.vectors = np.zeros((0, 0), np.float32)
        # doc-sentence vectors: row i belongs to slot sent_owner[i] (non-decreasing: appended in slot order)
        self.sent_vectors = np.zeros((0, 0), np.float32)
        self.sent_owner = np.zeros(0, np.int64)
        self._sent_groups: tuple[np.ndarray, np.ndarray] | None = None
        # the wordllama model's query vectors without loading it (qvec.py); None for other embedders
        self.query_vectors = QueryVectors(embedder.dim) if isinstance(embedder, WordLlamaEmbedder) else None
        # the multilingual channel (multilingual.py), when code.yaml turns it on
        self.multi = (
            MultilingualVectors(Multilingual(self.directory.parent)) if cfg.embedding.multilingual else None
        )
        self.commit: str | None = None
        self.dirty: list[str] = []  # paths that differed from `commit` when indexed
        self.built_at: float = 0.0
        # units.jsonl is append-only between compactions: (lines, bytes) of it that `meta.json` vouches for
        self._units_on_disk: tuple[int, int] | None = None

    # ---- building -------------------------------------------------------------------------

    @property
    def live_units(self) -> list[CodeUnit]:
        """Every unit currently in the index."""
        return [u for u in self.units if u is not None]

    def _rules(self) -> IgnoreRules:
        return IgnoreRules(self.root, self.cfg.walk)

    def _storage(self) -> str | None:
        """Where indexes are kept, relative to the root and ending in '/', when inside the repository."""
        store = self.directory.parent.resolve()
        if store != self.root and store.is_relative_to(self.root):
            return store.relative_to(self.root).as_posix() + "/"
        return None

    def walk(self) -> list[str]:
        """The repository's indexable files, the index's own files left out (an index_dir inside it)."""
        store = self._storage()
        found = walk_repo(self.root, self.cfg.walk)
        return [p for p in found if not p.startswith(store)] if store else found

    def build(self, progress: Progress = no_progress) -> UpdateStats:
        """Index every file of the repository from scratch."""
        t0 = time.perf_counter()
        self.units, self.files = [], {}
        self.bm25 = Bm25Index()
        self.names = Bm25Index()
        self.vectors = np.zeros((0, 0), np.float32)
        self._set_sentences(np.zeros((0, 0), np.float32), np.zeros(0, np.int64))
        if self.multi is not None:
            self.multi = MultilingualVectors(self.multi.model)
        if isinstance(self.embedder, WordLlamaEmbedder):
            self.query_vectors = QueryVectors(self.embedder.dim)
            files = model_files(self.embedder.dim)
            if files is not None:  # common words a question may use that the repository lacks
                self.query_vectors.add(vocabulary_words(files[0]), self.embedder)
                self.query_vectors.bpe = Bpe.from_tokenizer(files[0])
        paths = self.walk()
        stats = self._index_paths(paths, progress)
        stats.seconds = time.perf_counter() - t0
        self.built_at = time.time()
        return stats

    def _parse(self, rel: str) -> tuple[str, list[CodeUnit]] | None:
        text = read_source(self.root / rel, self.cfg.walk.max_file_bytes)
        if text is None:
            return None
        w = self.cfg.walk
        try:
            units = units_for_file(rel, text, self.parsers, w.window_lines, w.window_overlap)
        except (ValueError, RecursionError):  # a grammar choked: the file is still searchable as windows
            from xihe.tools.codeindex.units import window_units

            units = window_units(rel, text, w.window_lines, w.window_overlap)
        return sha1_of(text), units

    def _index_paths(self, paths: Sequence[str], progress: Progress) -> UpdateStats:
        stats = UpdateStats()
        new_units: list[CodeUnit] = []
        owners: list[tuple[str, str, int]] = []  # (path, sha1, unit count)
        for rel in progress(paths, "parsing", len(paths)):
            parsed = self._parse(rel)
            if parsed is None:
                continue
            sha, units = parsed
            owners.append((rel, sha, len(units)))
            new_units.extend(units)
            stats.files_indexed += 1
        self._append(new_units, owners, progress)
        stats.units_added = len(new_units)
        return stats

    def _append(self, units: list[CodeUnit], owners: list[tuple[str, str, int]], progress: Progress) -> None:
        if not units and not owners:
            return  # nothing changed: the query-word table is not rebuilt (a search's reconcile)
        base, units = len(self.units), inherit.resolve(units, self.live_units)
        views = [inherit.searched(u) for u in units]  # an undocumented override: its supertype's doc
        self.bm25.add([self.tokenizer.tokens(bm25_text(u)) for u in views])
        self.names.add([self.tokenizer.tokens(name_text(u)) for u in units])
        if self.embedder is not None:
            texts = [embed_text(u, u.text) for u in views]
            batch = 2048
            chunks = [str(i) for i in range(0, len(texts), batch)]
            rows = [
                self.embedder.embed(texts[int(i) : int(i) + batch])
                for i in progress(chunks, "embedding", len(chunks))
            ]
            vecs = np.concatenate(rows) if rows else np.zeros((0, self.vectors.shape[1] or 1), np.float32)
            self.vectors = vecs if self.vectors.size == 0 else np.concatenate([self.vectors, vecs])
            sentences = self._append_sentences(views, base, progress)
            if self.query_vectors is not None and isinstance(self.embedder, WordLlamaEmbedder):
                self.query_vectors.add(table_words([*texts, *sentences]), self.embedder)
        if self.multi is not None:
            self.multi.append(views, [u.text for u in units])
        # the search text is only needed to build rows; dropping it keeps memory and reloads equal
        self.units.extend(_without_text(u) for u in units)
        slot = base
        for rel, sha, n in owners:
            self.files[rel] = FileRecord(sha, list(range(slot, slot + n)))
            slot += n

    def _append_sentences(self, units: list[CodeUnit], base: int, progress: Progress) -> list[str]:
        """Embed the doc sentences of `units` (slots from `base`), append them with their owners; the sentences."""
        limit = self.cfg.embedding.doc_sentences
        assert self.embedder is not None
        texts: list[str] = []
        owners: list[int] = []
        for i, u in enumerate(units):
            if u.kind in {"function", "method", "class"}:
                for sentence in doc_sentences(u.doc, limit):
                    texts.append(sentence)
                    owners.append(base + i)
        if not texts:
            return texts
        batch = 2048
        chunks = [str(i) for i in range(0, len(texts), batch)]
        rows = [
            self.embedder.embed(texts[int(i) : int(i) + batch])
            for i in progress(chunks, "embedding doc sentences", len(chunks))
        ]
        vecs = np.concatenate(rows)
        if self.sent_vectors.size:
            vecs = np.concatenate([self.sent_vectors, vecs])
        self._set_sentences(vecs, np.concatenate([self.sent_owner, np.asarray(owners, np.int64)]))
        return texts

    def _set_sentences(self, vectors: np.ndarray, owner: np.ndarray) -> None:
        self.sent_vectors, self.sent_owner = vectors, owner
        self._sent_groups = None

    def _groups(self) -> tuple[np.ndarray, np.ndarray]:
        """(first row of each owner's run, that owner's slot): max-pooling by np.maximum.reduceat."""
        if self._sent_groups is None:
            o = self.sent_owner
            starts = np.flatnonzero(np.r_[True, o[1:] != o[:-1]]) if len(o) else np.zeros(0, np.int64)
            self._sent_groups = (starts, o[starts])
        return self._sent_groups

    def _drop(self, rel: str) -> int:
        rec = self.files.pop(rel, None)
        if rec is None:
            return 0
        for s in rec.slots:
            self.units[s] = None
        if rec.slots:
            self.bm25.remove(rec.slots)
            self.names.remove(rec.slots)
        return len(rec.slots)

    def update_files(self, paths: Iterable[str]) -> UpdateStats:
        """Re-index exactly these repository-relative paths: changed ones re-parsed, gone ones dropped."""
        t0 = time.perf_counter()
        stats = UpdateStats()
        rules: IgnoreRules | None = None  # read .gitignore files only when a path is to be judged
        store = self._storage()
        to_add: list[str] = []
        for rel in sorted(set(paths)):
            rel = normalise_path(rel)
            rules = rules or self._rules()
            if indexable(self.root, rel, self.cfg.walk, rules) and not (store and rel.startswith(store)):
                to_add.append(rel)
            elif rel in self.files:
                stats.units_removed += self._drop(rel)
                stats.files_removed += 1
                stats.changed.append(rel)
        new_units: list[CodeUnit] = []
        owners: list[tuple[str, str, int]] = []
        self._reparse(to_add, stats, new_units, owners)
        # files whose inherited docs the changed ones alter (inherit.py) are re-indexed with them
        stale = inherit.stale_files(self.live_units, new_units, set(stats.changed))
        self._reparse(sorted(stale), stats, new_units, owners, force=True)
        self._append(new_units, owners, no_progress)
        stats.units_added = len(new_units)
        dead = sum(1 for u in self.units if u is None)
        if self.units and dead / len(self.units) > COMPACT_RATIO:
            self.compact()
        stats.seconds = time.perf_counter() - t0
        return stats

    def _reparse(
        self,
        paths: list[str],
        stats: UpdateStats,
        new: list[CodeUnit],
        owners: list[Owner],
        force: bool = False,
    ) -> None:
        """Parse `paths` into `new` and `owners`, dropping their old slots; unchanged files skipped unless `force`."""
        for rel in paths:
            parsed = self._parse(rel)
            old = self.files.get(rel)
            if parsed is not None and old is not None and old.sha1 == parsed[0] and not force:
                continue  # same content: nothing to do
            stats.units_removed += self._drop(rel)
            stats.changed.append(rel)
            if parsed is None:
                stats.files_removed += old is not None
                continue
            sha, units = parsed
            owners.append((rel, sha, len(units)))
            new.extend(units)
            stats.files_indexed += 1

    def reconcile(self) -> UpdateStats:
        """Compare every file's hash with the index and fix any difference (start-up safety net)."""
        on_disk = set(self.walk())
        suspects = set(self.files) - on_disk
        for rel in on_disk:
            rec = self.files.get(rel)
            if rec is None:
                suspects.add(rel)
                continue
            text = read_source(self.root / rel, self.cfg.walk.max_file_bytes)
            if text is None or sha1_of(text) != rec.sha1:
                suspects.add(rel)
        return self.update_files(suspects)

    def compact(self) -> None:
        """Drop dead slots and renumber the live ones."""
        keep = np.asarray([i for i, u in enumerate(self.units) if u is not None], dtype=np.int64)
        remap = {int(old): new for new, old in enumerate(keep)}
        self.bm25.compact(keep)
        self.names.compact(keep)
        if self.vectors.size:
            self.vectors = self.vectors[keep]
        if self.multi is not None:
            self.multi.compact(keep)
        if len(self.sent_owner):
            live = np.asarray([self.units[int(o)] is not None for o in self.sent_owner], dtype=bool)
            owner = np.asarray([remap[int(o)] for o in self.sent_owner[live]], dtype=np.int64)
            self._set_sentences(self.sent_vectors[live], owner)
        self.units = [self.units[int(i)] for i in keep]
        for rec in self.files.values():
            rec.slots = [remap[s] for s in rec.slots]
        self._units_on_disk = None  # renumbered: the next save rewrites units.jsonl

    # ---- searching ------------------------------------------------------------------------

    def query_plan(self, query: str) -> QueryPlan:
        """The weighted terms and embedding text this index searches for `query`."""
        return self._query(query)

    def _query(self, query: str) -> QueryPlan:
        vocab = self.bm25.vocab
        r = self.cfg.retrieval
        return plan(query, self.tokenizer, self.bridge, vocab.__contains__, r, self.bm25.postings)

    def is_test(self, slot: int) -> bool:
        """Whether the unit in `slot` is test code (prior.py)."""
        u = self.units[slot]
        return u is not None and is_test_path(u.path)

    def inherits(self, slot: int) -> bool:
        """Whether the unit in `slot` is searched by a doc inherited from the method it overrides."""
        u = self.units[slot]
        return u is not None and bool(u.inherited_doc)

    def vector_scores(self, text: str) -> np.ndarray | None:
        """Cosine of every slot with the text's embedding (-inf for dead slots); None without vectors."""
        if self.embedder is None or not self.vectors.size:
            return None
        q = self.query_vectors.vector(text) if self.query_vectors is not None else None
        if q is None:
            q = self.embedder.embed([text])[0]
        sims = self.vectors @ q
        if len(self.sent_owner):
            starts, slots = self._groups()
            best = np.maximum.reduceat(self.sent_vectors @ q, starts)
            sims[slots] = np.maximum(sims[slots], best)
        sims[~self.bm25.alive] = -np.inf
        return sims

    def multilingual_scores(self, query: str) -> tuple[np.ndarray | None, float]:
        """The multilingual channel's cosine per slot for `query` and its weight for the query's language."""
        r = self.cfg.retrieval
        weight = r.multilingual_weight_zh if has_cjk(query) else r.multilingual_weight
        if self.multi is None or weight <= 0 or not len(self.units):
            return None, 0.0
        return self.multi.scores(query, self.bm25.alive), weight

    def search(self, query: str, k: int = 10, mode: str = "hybrid") -> SearchResult:
        """Rank units for `query`; mode is hybrid, bm25 or vector."""
        r = self.cfg.retrieval
        q = self._query(query)
        toks, text = q.terms, q.text
        bm_all = self.bm25.scores(toks) if mode in {"hybrid", "bm25"} else None
        vec_all = self.vector_scores(text) if mode in {"hybrid", "vector"} else None
        names_all = self.names.scores(toks) if mode == "hybrid" and r.name_weight > 0 else None
        multi, multi_weight = self.multilingual_scores(query) if mode == "hybrid" else (None, 0.0)
        prior = None if q.tests else self.is_test
        ranked = fuse(bm_all, vec_all, names_all, r, mode, prior, multi, multi_weight, self.inherits)
        bm = top_slots(bm_all, 1, positive=True) if bm_all is not None else []
        vec = top_slots(vec_all, 1) if vec_all is not None else []
        bm_s = {i: float(bm_all[i]) for i, _ in ranked[:k]} if bm_all is not None else {}
        vec_s = {i: float(vec_all[i]) for i, _ in ranked[:k]} if vec_all is not None else {}
        if self.reranker is not None and self.cfg.rerank.enabled and ranked:
            head = ranked[: self.cfg.rerank.top_n]
            docs = [embed_text(u, "") for u in (self.units[i] for i, _ in head) if u is not None]
            order = self.reranker.rerank(query, docs)
            ranked = [(head[i][0], s) for i, s in order] + ranked[len(head) :]
        hits = []
        for slot, score in ranked[:k]:
            unit = self.units[slot]
            if unit is not None:
                hits.append(Scored(unit, float(score), bm_s.get(slot, 0.0), vec_s.get(slot, 0.0)))
        best_bm = bm[0][1] if bm else 0.0
        best_cos = vec[0][1] if vec else 0.0
        # the floor is for unweighted terms: a question whose terms weigh more must not clear it by that
        scale = max(1.0, max(toks.values(), default=1.0))
        relevant = bool(hits) and (best_bm / scale >= r.min_bm25_score or best_cos >= r.min_vector_score)
        symbol = query.strip().rsplit(".", 1)[-1]
        if _IDENT.fullmatch(symbol) and len(split_identifier(symbol)) > 1:
            # a compound identifier asks for that symbol: its parts matching elsewhere is not a hit
            relevant = bool(hits) and symbol.lower().strip("_") in self.bm25.vocab
        return SearchResult(hits, best_bm, best_cos, relevant)

    # ---- lookups for citation checks -----------------------------------------------------

    def has_path(self, rel: str) -> bool:
        """Whether the repository-relative path is indexed (or is a real file inside the repo)."""
        if rel in self.files:
            return True
        target = (self.root / rel).resolve()
        return target.is_file() and target.is_relative_to(self.root)

    def has_symbol(self, symbol: str, path: str | None = None) -> bool:
        """Whether a unit is named `symbol` (name, qualified name or its dotted tail), optionally in `path`."""
        slots: Iterable[int]
        if path:
            rec = self.files.get(path)
            if rec is None:
                return False
            slots = rec.slots
        else:
            slots = range(len(self.units))
        for s in slots:
            u = self.units[s]
            if u is not None and (
                u.name == symbol or u.qualname == symbol or u.qualname.endswith("." + symbol)
            ):
                return True
        return False

    # ---- persistence ---------------------------------------------------------------------

    def save(self) -> None:
        """Write the index atomically: a new directory is filled, then swapped in.

        units.jsonl is append-only: when the saved file still matches the slot numbering (no compaction
        since), it is hard-linked into the new directory and only the new units are appended. A dead
        slot needs no rewrite (its `alive` flag is in bm25.npz), and `meta.json` records how many lines
        and bytes are valid, so lines appended by a save that crashed before the swap are ignored.
        """
        tmp = self.directory.with_name(self.directory.name + f".tmp-{os.getpid()}")
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)
        self.bm25.save(tmp)
        self.names.save(tmp, "names")
        np.save(tmp / "vectors.npy", self.vectors)
        np.save(tmp / "sent_vectors.npy", self.sent_vectors)
        np.save(tmp / "sent_owner.npy", self.sent_owner)
        if self.query_vectors is not None:
            self.query_vectors.save(tmp)
        if self.multi is not None:
            self.multi.save(tmp)
        lines, size = self._write_units(tmp / "units.jsonl")
        meta = {
            "version": INDEX_VERSION,
            "root": str(self.root),
            "commit": self.commit,
            "dirty": self.dirty,
            "embedder": self.embedder.name if self.embedder is not None else None,
            "multilingual": self.multi.model.name if self.multi is not None else None,
            "doc_sentences": self.cfg.embedding.doc_sentences,
            "walk": self.cfg.walk.model_dump(),
            "built_at": self.built_at,
            "units_lines": lines,
            "units_bytes": size,
            "files": {p: {"sha1": r.sha1, "slots": r.slots} for p, r in self.files.items()},
        }
        (tmp / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
        old = self.directory.with_name(self.directory.name + f".old-{os.getpid()}")
        if self.directory.exists():
            self.directory.rename(old)
        tmp.rename(self.directory)
        if old.exists():
            shutil.rmtree(old)
        self._units_on_disk = (lines, size)

    def _write_units(self, target: Path) -> tuple[int, int]:
        """Fill `target` (append to a hard link of the saved file when possible); (lines, bytes)."""
        start, offset = 0, 0
        saved = self.directory / "units.jsonl"
        if self._units_on_disk is not None and self._units_on_disk[0] <= len(self.units) and saved.exists():
            try:
                os.link(saved, target)
                start, offset = self._units_on_disk
            except OSError:
                start, offset = 0, 0
        with open(target, "r+b" if start else "wb") as fh:
            fh.truncate(offset)
            fh.seek(offset)
            for u in self.units[start:]:
                line = "null" if u is None else json.dumps(u.to_json(), ensure_ascii=False)
                fh.write(line.encode("utf-8") + b"\n")
            return len(self.units), fh.tell()

    @classmethod
    def load(
        cls,
        root: Path,
        directory: Path,
        cfg: CodeConfig,
        embedder: Embedder | None,
        reranker: Reranker | None = None,
    ) -> CodeIndex | None:
        """The saved index, or None when missing or built with another version/embedder/walk config."""
        try:
            meta = json.loads((Path(directory) / "meta.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        want = embedder.name if embedder is not None else None
        if (
            meta.get("version") != INDEX_VERSION
            or meta.get("embedder") != want
            or meta.get("walk") != cfg.walk.model_dump()
            or meta.get("doc_sentences") != cfg.embedding.doc_sentences
            or meta.get("root") != str(Path(root).resolve())
        ):
            return None
        idx = cls(root, directory, cfg, embedder, reranker=reranker)
        if meta.get("multilingual") != (idx.multi.model.name if idx.multi is not None else None):
            return None  # the channel was switched on or off, or the model changed: build again
        idx.bm25 = Bm25Index.load(Path(directory))
        if idx.multi is not None and not idx.multi.load(Path(directory), len(idx.bm25.alive)):
            return None
        idx.names = Bm25Index.load(Path(directory), "names")
        idx.vectors = np.load(Path(directory) / "vectors.npy")
        if idx.query_vectors is not None:
            idx.query_vectors = QueryVectors.load(Path(directory), idx.query_vectors.dim)
        idx._set_sentences(
            np.load(Path(directory) / "sent_vectors.npy"), np.load(Path(directory) / "sent_owner.npy")
        )
        lines = int(meta.get("units_lines", len(idx.bm25.alive)))
        with open(Path(directory) / "units.jsonl", encoding="utf-8") as fh:
            raw = [line for _, line in zip(range(lines), fh, strict=False)]
        alive = idx.bm25.alive
        idx.units = [
            None if line.strip() == "null" or not alive[i] else CodeUnit.from_json(json.loads(line))
            for i, line in enumerate(raw)
        ]
        if "units_bytes" in meta:
            idx._units_on_disk = (lines, int(meta["units_bytes"]))
        idx.files = {p: FileRecord(r["sha1"], list(r["slots"])) for p, r in meta["files"].items()}
        idx.commit, idx.dirty, idx.built_at = (
            meta.get("commit"),
            list(meta.get("dirty", [])),
            meta.get("built_at", 0.0),
        )
        return idx


def fuse(
    bm_all: np.ndarray | None,
    vec_all: np.ndarray | None,
    names_all: np.ndarray | None,
    r: RetrievalConfig,
    mode: str = "hybrid",
    is_test: Callable[[int], bool] | None = None,
    multi: np.ndarray | None = None,
    multi_weight: float = 0.0,
    inherits: Callable[[int], bool] | None = None,
) -> list[tuple[int, float]]:
    """One ranking from every slot's keyword, vector, name-field and multilingual scores, best first.

    Candidates are the top `r.candidates` of each list; linear fusion scores them as
    bm25/max + vector_weight * cosine + name_weight * names/max + multi_weight * multilingual cosine,
    less `r.test_penalty` for a slot `is_test` says is test code (prior.py) and `inherit.PENALTY` for
    one searched by an inherited doc (`inherits`).
    """
    bm = top_slots(bm_all, r.candidates, positive=True) if bm_all is not None else []
    vec = top_slots(vec_all, r.candidates) if vec_all is not None else []
    if mode == "bm25":
        return bm
    if mode == "vector":
        return vec
    if r.fusion == "rrf" or bm_all is None or vec_all is None:
        return rrf([[i for i, _ in bm], [i for i, _ in vec]], r.rrf_k, [r.bm25_weight, r.vector_weight])
    nm = top_slots(names_all, r.candidates, positive=True) if names_all is not None else []
    use_multi = multi is not None and multi_weight > 0
    ml = top_slots(multi, r.candidates) if multi is not None and use_multi else []
    cands = list(
        dict.fromkeys([i for i, _ in bm] + [i for i, _ in vec] + [i for i, _ in nm] + [i for i, _ in ml])
    )
    names = {i: float(names_all[i]) for i in cands} if names_all is not None else None
    ranked = linear(
        {i: float(bm_all[i]) for i in cands},
        {i: float(vec_all[i]) for i in cands},
        r.vector_weight,
        names,
        r.name_weight,
        {i: float(multi[i]) for i in cands} if multi is not None and use_multi else None,
        multi_weight,
    )
    test = is_test if is_test is not None and r.test_penalty else None
    if test is None and inherits is None:
        return ranked
    ranked = [
        (
            i,
            s
            - (r.test_penalty if test and test(i) else 0.0)
            - (inherit.PENALTY if inherits and inherits(i) else 0.0),
        )
        for i, s in ranked
    ]
    return sorted(ranked, key=lambda p: -p[1])


def top_slots(scores: np.ndarray, n: int, positive: bool = False) -> list[tuple[int, float]]:
    """The best `n` (slot, score) pairs, best first; finite (and positive) scores only."""
    if not len(scores):
        return []
    n = min(n, len(scores))
    cand = np.argpartition(-scores, n - 1)[:n]
    cand = cand[np.argsort(-scores[cand], kind="stable")]
    return [
        (int(i), float(scores[i])) for i in cand if np.isfinite(scores[i]) and (scores[i] > 0 or not positive)
    ]


def _without_text(u: CodeUnit) -> CodeUnit:
    from dataclasses import replace

    return replace(u, text="")
