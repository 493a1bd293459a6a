"""The code index of one repository: units, BM25 rows and vectors in aligned slots, saved under a dir.

A slot is one unit's row in the BM25 matrix and the vector matrix. Re-indexing a file kills its old
slots and appends new ones, so an update costs that file's parse and embedding only; `compact`
reclaims dead slots once they pile up. Building and updating are here; searching is search.py's
part of the class, and saving and loading store.py's.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Iterable, MutableSequence, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from xihe.agent.cachedir import shared_cache
from xihe.tools.codeindex import gcpause, identifiers, inherit, quant, reuse, segments, statements, store
from xihe.tools.codeindex.bm25 import Bm25Index
from xihe.tools.codeindex.bridge import CjkBridge
from xihe.tools.codeindex.callermap import CALLER_KINDS, CallerMap
from xihe.tools.codeindex.embed import Embedder, Reranker, WordLlamaEmbedder, distinct
from xihe.tools.codeindex.fields import (
    bm25_text,
    doc_sentences,
    embed_text,
    name_text,
    neighbour_text,
)
from xihe.tools.codeindex.graph import SymbolGraph
from xihe.tools.codeindex.graphstore import GraphFacts
from xihe.tools.codeindex.languages import Parsers, language_of
from xihe.tools.codeindex.multilingual import Multilingual, MultilingualVectors
from xihe.tools.codeindex.progress import Progress, no_progress
from xihe.tools.codeindex.qvec import Bpe, QueryVectors, model_files, table_words, vocabulary_words
from xihe.tools.codeindex.refs import FileFacts, extract
from xihe.tools.codeindex.retree import RecentTrees
from xihe.tools.codeindex.search import Searching
from xihe.tools.codeindex.store import FileRecord
from xihe.tools.codeindex.tokens import Tokenizer
from xihe.tools.codeindex.treequery import captures
from xihe.tools.codeindex.units import CodeUnit, Earlier, copied, parse_units, window_units
from xihe.tools.codeindex.walk import IgnoreRules, indexable, read_source, walk_repo

if TYPE_CHECKING:  # only types: a query on a saved index never imports pydantic
    from xihe.config.code import CodeConfig

COMPACT_RATIO = 0.3  # compact when this share of slots is dead
Owner = tuple[str, str, int]  # (path, sha1, unit count) of a parsed file
Parsed = tuple[str, list[CodeUnit], FileFacts | None]  # (sha1, units, the symbol graph's facts)


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


class CodeIndex(Searching):
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
        self._trees = RecentTrees()  # the last trees of the files updates parsed (retree.py)
        self.units: MutableSequence[CodeUnit | None] = []
        self.files: dict[str, FileRecord] = {}
        self.bm25 = Bm25Index()
        self.names = Bm25Index()  # the name field: qualified name and file name only
        self.neighbours = Bm25Index()  # the graph field: callee names and callers' qualified names
        # the (caller qualname, callee name) edges of the units dropped since the graph field was written
        self._dropped_calls: Counter[tuple[str, str]] = Counter()
        self._dropped_callers: dict[int, str] = {}  # slot -> qualified name of such a dropped unit
        self.unit_keys = np.zeros(0, np.uint64)  # per slot: what its vectors are made from (reuse.py)
        self._recycled: dict[int, int] = {}  # key -> a slot dropped by this update, its rows still there
        self._recycled_calls: dict[int, tuple[str, ...]] = {}  # such a slot -> its unit's callee names
        self._shapes: dict[str, list[tuple[str, str, str, str, bool]]] = {}  # dropped files' inherit.shape
        # each file's shape as an update last indexed it: its next drop need not read it again
        self._known_shapes: dict[str, list[tuple[str, str, str, str, bool]]] = {}
        # unit and doc-sentence vectors as saved, float16: half the memory, and a search's products are
        # exact float32 products of those values (`blas.rows_dot`). Doc-sentence row i belongs to slot
        # sent_owner[i] (non-decreasing: appended in slot order)
        self.vectors = np.zeros((0, 0), np.float16)
        self.sent_vectors = np.zeros((0, 0), np.float16)
        self.sent_owner = np.zeros(0, np.int64)
        self._sent_groups: tuple[np.ndarray, np.ndarray] | None = None
        # the wordllama model's query vectors without loading it (qvec.py); None for other embedders
        self.query_vectors = QueryVectors(embedder.dim) if isinstance(embedder, WordLlamaEmbedder) else None
        # the multilingual channel (multilingual.py), when code.yaml turns it on; its model's unpacked
        # copy for queries is one per machine (agent/cachedir.py), not one per index directory
        self.multi = MultilingualVectors(Multilingual(shared_cache())) if cfg.embedding.multilingual else None
        self.commit: str | None = None
        self.dirty: list[str] = []  # paths that differed from `commit` when indexed
        self.built_at: float = 0.0
        # units.jsonl is append-only between compactions: (lines, bytes) of it that `meta.json` vouches for
        self.units_on_disk: tuple[int, int] | None = None
        # the row files' bases as saved (segments.py): a save links them and writes only the rows since
        self.row_bases: dict[str, segments.Base] = {}
        self.files_json: dict[str, tuple[str, list[int], str]] = {}  # each file's meta.json text (store.py)
        self.unit_lines: dict[CodeUnit, str] = {}  # the units.jsonl lines the last save appended (store.py)
        # the symbol graph's facts per file (graphstore.py), read from disk only when the graph is asked for
        self.graph_facts = GraphFacts()
        self._graph: SymbolGraph | None = None
        self._callermap: CallerMap | None = None  # read from the units on first need (callermap.py)
        self._table: inherit.Supertypes | None = None  # doc inheritance's, made on first need (`_supertypes`)

    # ---- building -------------------------------------------------------------------------

    @property
    def live_units(self) -> list[CodeUnit]:
        """Every unit currently in the index."""
        return [u for u in self.units if u is not None]

    @property
    def unit_count(self) -> int:
        """How many units the index holds (its live slots), without reading them."""
        return int(self.bm25.alive.sum())

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
        self.row_bases, self.units_on_disk, self._known_shapes = {}, None, {}
        self.bm25 = Bm25Index()
        self.names = Bm25Index()
        self.neighbours = Bm25Index()
        self._dropped_calls, self._dropped_callers, self._callermap = Counter(), {}, CallerMap()
        self._table = None
        self.unit_keys, self._recycled, self._recycled_calls = np.zeros(0, np.uint64), {}, {}
        self.vectors = np.zeros((0, 0), np.float16)
        self.set_sentences(np.zeros((0, 0), np.float16), np.zeros(0, np.int64))
        self.graph_facts, self._graph = GraphFacts(), None
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

    def _parse(self, rel: str, recent: bool = False) -> Parsed | None:
        """A file's hash, units and facts (None when unreadable); `recent`: an update's, parsed from
        the file's last tree when an update kept one (`retree.py`)."""
        text = read_source(self.root / rel, self.cfg.walk.max_file_bytes)
        if text is None:
            self._trees.forget(rel)
            return None
        w = self.cfg.walk
        lang = language_of(rel)
        facts: FileFacts | None = None
        try:
            if lang is None:
                units = window_units(rel, text, w.window_lines, w.window_overlap)
            else:  # one tree for the units and the graph's facts
                source = text.encode("utf-8", "replace")
                parser = self.parsers.get(lang)
                earlier, seen = None, None
                if recent:  # from the file's last tree, and the units and facts it made (retree.py)
                    tree, span, kept = self._trees.reparse(rel, lang, source, parser)
                    if lang == "python":  # a statement at a time (statements.py)
                        was = kept if isinstance(kept, statements.Kept) else None
                        units, facts, again = statements.parse(rel, text, source, tree, span, was)
                        self._trees.keep(rel, again)
                        return (
                            sha1_of(text),
                            units or window_units(rel, text, w.window_lines, w.window_overlap),
                            facts,
                        )
                    if span is not None and isinstance(kept, Earlier):
                        earlier = (span, kept)
                    seen = Earlier()
                else:
                    tree = parser.parse(source)
                caps = captures(lang, tree.root_node)  # one query for the units' nodes and the facts'
                names = identifiers.names(caps, source)  # read once for both
                units = parse_units(rel, text, lang, self.parsers, tree, caps, names, earlier, seen)
                facts = extract(rel, lang, tree.root_node, units, caps, names)
                if seen is not None:
                    self._trees.keep(rel, seen)
                # a script with no functions or classes is still searchable
                units = units or window_units(rel, text, w.window_lines, w.window_overlap)
        except (ValueError, RecursionError):  # a grammar choked: the file is still searchable as windows
            self._trees.forget(rel)
            units = window_units(rel, text, w.window_lines, w.window_overlap)
        return sha1_of(text), units, facts

    def _index_paths(self, paths: Sequence[str], progress: Progress) -> UpdateStats:
        stats = UpdateStats()
        new_units: list[CodeUnit] = []
        owners: list[tuple[str, str, int]] = []  # (path, sha1, unit count)
        for rel in progress(paths, "parsing", len(paths)):
            parsed = self._parse(rel)
            if parsed is None:
                continue
            sha, units, facts = parsed
            owners.append((rel, sha, len(units)))
            new_units.extend(units)
            if facts is not None:
                self.graph_facts.set(rel, facts)
            stats.files_indexed += 1
        self._append(new_units, owners, progress)
        stats.units_added = len(new_units)
        return stats

    def _append(self, units: list[CodeUnit], owners: list[tuple[str, str, int]], progress: Progress) -> None:
        if not units and not owners:
            if self._dropped_calls:  # files were only removed: their callees lost callers
                self._add_neighbours([], [])
            return  # nothing else changed: the query-word table is not rebuilt (a search's reconcile)
        self._graph = None
        base, units = len(self.units), inherit.resolve(units, self._supertypes)
        views = [inherit.searched(u) for u in units]  # an undocumented override: its supertype's doc
        keys = reuse.keys_of(views)
        # an unchanged unit of a re-indexed file keeps its dropped slot's vectors (reuse.py) and its
        # BM25 and name rows (its callee names, not in the key, compared too): not tokenized again
        old = [self._recycled.get(int(k)) for k in keys]
        rows = [
            o if o is not None and self._recycled_calls.get(o) == v.calls else None
            for o, v in zip(old, views, strict=True)
        ]
        self._recycled, self._recycled_calls = {}, {}
        tokens = self.tokenizer.tokens
        self.bm25.add_reusing(
            rows, [tokens(bm25_text(v)) for v, o in zip(views, rows, strict=True) if o is None]
        )
        self.names.add_reusing(
            rows, [tokens(name_text(u)) for u, o in zip(units, rows, strict=True) if o is None]
        )
        self._add_neighbours(units, rows)
        self.unit_keys = np.concatenate([self.unit_keys, keys])
        if self.embedder is not None:
            # the texts of the units not copied from an `old` slot: a copied one's words are in the
            # query-word table since it was first indexed
            texts = [embed_text(u, u.text) for u, o in zip(views, old, strict=True) if o is None]
            vecs = self._embed(texts, old, progress)
            self.vectors = vecs if self.vectors.size == 0 else np.concatenate([self.vectors, vecs])
            sentences = self._append_sentences(views, base, progress, old)
            if self.query_vectors is not None and isinstance(self.embedder, WordLlamaEmbedder):
                self.query_vectors.add(table_words([*texts, *sentences]), self.embedder)
        if self.multi is not None:
            self.multi.append(views, [u.text for u in units], old)
        # the search text is only needed to build rows; dropping it keeps memory and reloads equal
        kept = [_without_text(u) for u in units]
        self.units.extend(kept)
        if self._table is not None:
            self._table.add(kept)
        self._callers_map().add(base, units)
        slot = base
        for rel, sha, n in owners:
            self.files[rel] = FileRecord(sha, list(range(slot, slot + n)))
            slot += n

    def _supertypes(self) -> inherit.Supertypes:
        """The live units' classes and methods for doc inheritance (`inherit.Supertypes`), read from
        the units when unknown (a loaded index), then kept up to date by `_append` and `_drop`."""
        if self._table is None:
            self._table = inherit.Supertypes(u for u in self.units if u is not None)
        return self._table

    def _callers_map(self) -> CallerMap:
        """The slots by unit name and by callee name (`callermap.py`), read from the units when unknown
        (a loaded or compacted index)."""
        if self._callermap is None:
            self._callermap = CallerMap.of(self.units)
        return self._callermap

    def _add_neighbours(self, new: list[CodeUnit], reused: Sequence[int | None]) -> None:
        """The graph field's rows of the `new` units, and new rows for the live slots whose callers
        changed: those named by a call that a dropped unit made and no added unit makes again (or the
        reverse). Only the units those names concern are read (`callermap.py`), not every slot. A new
        unit whose BM25 row is `reused` from a dropped slot (same key, same calls) takes that slot's
        row here too unless its name's callers changed: its calls and callers are what they were."""
        cmap = self._callers_map()
        touched = self._touched_names(cmap, new)
        live = any(u is not None for u in self.units)
        keep = [
            o if o is not None and u.name not in touched else None for u, o in zip(new, reused, strict=True)
        ]
        fresh = [u for u, o in zip(new, keep, strict=True) if o is None]
        wanted = {u.name for u in fresh} | (touched if live else set())
        callers = cmap.callers(self.units, new, wanted)
        tokens = self.tokenizer.tokens
        self.neighbours.add_reusing(keep, [tokens(neighbour_text(u, callers.get(u.name, ()))) for u in fresh])
        if not touched or not live:
            return
        hit = cmap.slots_named(self.units, touched)
        docs = [tokens(neighbour_text(u, callers.get(u.name, ()))) for u in (self.units[s] for s in hit) if u]
        self.neighbours.set_rows(hit, docs)

    def _touched_names(self, cmap: CallerMap, new: list[CodeUnit]) -> set[str]:
        """The callee names whose callers' qualified names differ once `new` replaces the dropped
        units: a call edge dropped and not added again (or added anew), or a name with so many callers
        that the kept `fields.MAX_CALLERS` depend on the slots' order (a re-added unit moves last)
        when those kept before and after differ. A re-indexed file whose units call what they called
        keeps its callees' rows as they are."""
        dropped, self._dropped_calls = self._dropped_calls, Counter()
        was, self._dropped_callers = self._dropped_callers, {}
        added = Counter((u.qualname, c) for u in new if u.kind in CALLER_KINDS for c in u.calls)
        changed = {c for _, c in (dropped - added) + (added - dropped)}
        per_name = Counter(c for _, c in dropped) | Counter(c for _, c in added)
        crowded = {c for c, n in per_name.items() if c not in changed and cmap.crowded(self.units, c, n)}
        after = cmap.callers(self.units, new, crowded) if crowded else {}  # one pass over `new` for all
        changed.update(c for c in crowded if cmap.kept_before(self.units, c, was) != set(after.get(c, [])))
        return changed

    def _embed(
        self, texts: list[str], old: list[int | None], progress: Progress, label: str = "embedding"
    ) -> np.ndarray:
        """One vector per entry of `old`: the row of that slot where given, else the next of `texts`
        (those of the entries without one, in order), embedded in batches."""
        todo = [i for i, o in enumerate(old) if o is None]
        fresh = self._embed_once(texts, progress, label)
        if len(todo) == len(old) and fresh is not None:
            return fresh
        dim = self.vectors.shape[1] if self.vectors.size else (fresh.shape[1] if fresh is not None else 1)
        out = np.zeros((len(old), dim), np.float16)
        if fresh is not None:
            out[todo] = fresh
        kept = [i for i, o in enumerate(old) if o is not None]
        if kept:
            out[kept] = self.vectors[[o for o in old if o is not None]]
        return out

    def _embed_once(self, texts: list[str], progress: Progress, label: str) -> np.ndarray | None:
        """The (half-rounded) vectors of `texts`, each distinct text embedded once, in batches; None
        for no text."""
        assert self.embedder is not None
        if not texts:
            return None
        once, row_of = distinct(texts)
        batch = 2048
        chunks = [str(i) for i in range(0, len(once), batch)]
        rows = [
            self.embedder.embed(once[int(i) : int(i) + batch]) for i in progress(chunks, label, len(chunks))
        ]
        return half(np.concatenate(rows))[row_of]

    def _append_sentences(
        self, units: list[CodeUnit], base: int, progress: Progress, old: list[int | None]
    ) -> list[str]:
        """Embed the doc sentences of `units` (slots from `base`; an `old` slot's rows are copied), append
        them with their owners; the sentences embedded (those not copied)."""
        limit = self.cfg.embedding.doc_sentences
        assert self.embedder is not None
        texts: list[str] = []
        owners: list[int] = []
        copied: list[int | None] = []  # per sentence: the old row it is copied from
        spans = reuse.sentence_rows(self.sent_owner, old)
        for i, u in enumerate(units):
            if u.kind in {"function", "method", "class"}:
                mine = doc_sentences(u.doc, limit)
                span = spans[i]
                rows = range(*span) if span is not None and span[1] - span[0] == len(mine) else None
                for j, sentence in enumerate(mine):
                    texts.append(sentence)
                    owners.append(base + i)
                    copied.append(rows[j] if rows is not None else None)
        if not texts:
            return texts
        todo = [i for i, c in enumerate(copied) if c is None]
        embedded = [texts[j] for j in todo]
        fresh = self._embed_once(embedded, progress, "embedding doc sentences")
        if len(todo) == len(texts) and fresh is not None:
            vecs = fresh
        else:
            vecs = np.zeros((len(texts), self.sent_vectors.shape[1]), np.float16)
            if fresh is not None:
                vecs[todo] = fresh
            kept = [i for i, c in enumerate(copied) if c is not None]
            vecs[kept] = self.sent_vectors[[c for c in copied if c is not None]]
        if self.sent_vectors.size:
            vecs = np.concatenate([self.sent_vectors, vecs])
        self.set_sentences(vecs, np.concatenate([self.sent_owner, np.asarray(owners, np.int64)]))
        return embedded

    def set_sentences(self, vectors: np.ndarray, owner: np.ndarray) -> None:
        self.sent_vectors, self.sent_owner = vectors, owner
        self._sent_groups = None

    def _drop(self, rel: str) -> int:
        rec = self.files.pop(rel, None)
        if rec is None:
            return 0
        self.graph_facts.set(rel, None)
        self._graph = None
        old = [u for u in (self.units[s] for s in rec.slots) if u is not None]
        known = self._known_shapes.pop(rel, None)
        self._shapes[rel] = known if known is not None else inherit.shape(old)
        if self._table is not None:
            self._table.drop(old)
        for s in rec.slots:
            u = self.units[s]
            if u is not None and u.kind in CALLER_KINDS:  # the units it called lose a caller
                self._dropped_calls.update((u.qualname, c) for c in u.calls)
                self._dropped_callers[s] = u.qualname
            if s < len(self.unit_keys):
                self._recycled[int(self.unit_keys[s])] = s
                if u is not None:
                    self._recycled_calls[s] = u.calls
            self.units[s] = None
        if rec.slots:
            self.bm25.remove(rec.slots)
            self.names.remove(rec.slots)
            self.neighbours.remove(rec.slots)
        return len(rec.slots)

    def update_files(self, paths: Iterable[str]) -> UpdateStats:
        """Re-index exactly these repository-relative paths: changed ones re-parsed, gone ones dropped
        (the cyclic garbage collector paused meanwhile: `gcpause.py`)."""
        with gcpause.paused():
            return self._update_files(paths)

    def _update_files(self, paths: Iterable[str]) -> UpdateStats:
        t0 = time.perf_counter()
        stats = UpdateStats()
        named = sorted({normalise_path(p) for p in paths})
        # only the .gitignore files above the named paths can judge them: the tree is not walked
        rules = IgnoreRules(self.root, self.cfg.walk, named)
        store = self._storage()
        to_add: list[str] = []
        for rel in named:
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
        # (reading every unit of a saved index is the slow part of a search's check): only when a
        # changed file's classes or methods changed what others inherit from them
        shapes, self._shapes = self._shapes, {}
        now = self._shapes_of(stats.changed, new_units)
        if any(now[rel] != shapes.get(rel, []) for rel in stats.changed):
            stale = inherit.stale_files(self.live_units, new_units, set(stats.changed))
            self._reparse(sorted(stale), stats, new_units, owners, force=True)
            self._shapes = {}
        self._known_shapes.update(now)
        self._append(new_units, owners, no_progress)
        stats.units_added = len(new_units)
        dead = len(self.units) - self.unit_count
        if self.units and dead / len(self.units) > COMPACT_RATIO:
            self.compact()
        stats.seconds = time.perf_counter() - t0
        return stats

    @staticmethod
    def _shapes_of(
        changed: list[str], new: list[CodeUnit]
    ) -> dict[str, list[tuple[str, str, str, str, bool]]]:
        """The `inherit.shape` of each changed file's new units (a file gone: no units)."""
        by_path: dict[str, list[CodeUnit]] = {rel: [] for rel in changed}
        for u in new:
            if u.path in by_path:
                by_path[u.path].append(u)
        return {rel: inherit.shape(units) for rel, units in by_path.items()}

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
            parsed = self._parse(rel, recent=True)
            old = self.files.get(rel)
            if parsed is not None and old is not None and old.sha1 == parsed[0] and not force:
                continue  # same content: nothing to do
            stats.units_removed += self._drop(rel)
            stats.changed.append(rel)
            if parsed is None:
                stats.files_removed += old is not None
                continue
            sha, units, facts = parsed
            owners.append((rel, sha, len(units)))
            new.extend(units)
            self.graph_facts.set(rel, facts)
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
        self.neighbours.compact(keep)
        self.unit_keys = self.unit_keys[keep]
        if self.vectors.size:
            self.vectors = self.vectors[keep]
        if self.multi is not None:
            self.multi.compact(keep)
        if len(self.sent_owner):
            live = np.asarray([self.units[int(o)] is not None for o in self.sent_owner], dtype=bool)
            owner = np.asarray([remap[int(o)] for o in self.sent_owner[live]], dtype=np.int64)
            self.set_sentences(self.sent_vectors[live], owner)
        self.units = [self.units[int(i)] for i in keep]
        self._callermap = None  # renumbered: read again from the units when needed
        for rec in self.files.values():
            rec.slots = [remap[s] for s in rec.slots]
        self.units_on_disk = None  # renumbered: the next save rewrites units.jsonl
        self.row_bases = {}  # and every row file whole

    # ---- the symbol graph (graph.py) ---------------------------------------------------------

    def symbol_graph(self) -> SymbolGraph:
        """The symbol graph of the live units and every file's facts (built on first use, kept until
        the index changes)."""
        if self._graph is None:
            self._graph = SymbolGraph(self.live_units, self.graph_facts.all())
        return self._graph

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

    # ---- persistence (store.py) ------------------------------------------------------------

    def save(self) -> None:
        """Write the index atomically under its directory (`store.save`; the collector paused: `gcpause.py`)."""
        with gcpause.paused():
            store.save(self)

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
        idx = cls(root, directory, cfg, embedder, reranker=reranker)
        return idx if store.load_into(idx) else None


def half(vectors: np.ndarray) -> np.ndarray:
    """`vectors` as kept: rounded to 8-bit mantissas with a power-of-two scale per row, as float16
    (half the memory; a search widens them a block at a time, `blas.rows_dot`), exactly what is saved
    (quant.py), so an index built in memory ranks exactly as it will once loaded."""
    return quant.quantize(vectors)


def _without_text(u: CodeUnit) -> CodeUnit:
    return copied(u, text="")
