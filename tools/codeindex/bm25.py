"""BM25 (the Lucene variant bm25s uses by default) over a sparse term matrix that takes row updates.

bm25s precomputes every score at index time, so one changed file means re-indexing the whole
corpus (~0.8 s for 15k units here, more than a one-file update may cost). This keeps raw term
frequencies instead and applies IDF and length normalisation at query time over the few query
columns; scores equal bm25s's `method="lucene"` (a test checks it).
"""

from __future__ import annotations

import itertools
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from xihe.tools.codeindex import segments

if TYPE_CHECKING:
    import scipy.sparse as sp


MAX_PENDING = 32  # appended row blocks kept apart before they are merged into the matrix
Csr = tuple[np.ndarray, np.ndarray, np.ndarray]  # CSR indptr, indices, data
Columns = tuple[np.ndarray, np.ndarray, np.ndarray]  # CSC indptr, indices, data
Rows = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # slots and their CSR indptr, indices, data


class SavedRows:
    """The CSR rows of a loaded base, made from its columns when the matrix is first changed or saved
    whole: a query reads the columns alone. The file keeps the columns only (the rows were a second
    copy of every posting, half of it: 7.6 of 15.3 MB on a DolphinScheduler-sized tree)."""

    def __init__(self, cols: Columns, shape: tuple[int, int]) -> None:
        self._cols: Columns | None = cols
        self.shape = shape

    def __iter__(self) -> Any:
        """(data, indices, indptr, shape), as `_merged` unpacks them."""
        assert self._cols is not None
        ptr, idx, data = self._cols
        self._cols = None
        rows = _sparse().csc_matrix((data, idx, ptr), shape=self.shape).tocsr()
        yield from (rows.data, rows.indices, rows.indptr, self.shape)


def _sparse() -> Any:
    """scipy.sparse, imported when the matrix changes (building); a query on a saved index never needs it."""
    import scipy.sparse

    return scipy.sparse


class Bm25Index:
    """Rows are slots (units); a removed slot stays as a dead row until `compact`.

    The term matrix is kept two ways: rows (CSR, for appends and compaction, through scipy) and
    columns (CSC arrays, for scoring with numpy alone). `save` writes both, so a loaded index answers
    queries without importing scipy (0.2 s of every `xihe search`).
    """

    def __init__(self, k1: float = 1.5, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.vocab: dict[str, int] = {}
        self._rows: list[sp.csr_matrix] = []  # pending appended rows, merged lazily
        self._matrix: sp.csr_matrix | None = None  # None: empty, or still only the raw arrays below
        self._raw: SavedRows | None = None  # the loaded CSR, read from its file when first needed
        self._cols: Columns | None = None
        self.doc_len = np.zeros(0, dtype=np.float32)
        self.alive = np.zeros(0, dtype=bool)
        # the saved base file (segments.py): its rows and vocabulary, and the rows replaced since it
        self._base: segments.Base | None = None
        self._base_vocab = 0
        self._changed: set[int] = set()
        self._delta: Rows | None = None  # loaded (slots, indptr, indices, data) not yet in `_raw`

    @property
    def size(self) -> int:
        """Number of slots, dead ones included."""
        return len(self.alive)

    def add(self, docs: Sequence[Sequence[str]]) -> None:
        """Append one row per document (token list)."""
        if not docs:
            return
        self._rows.append(self._rows_of(docs))
        self.doc_len = np.concatenate([self.doc_len, np.asarray([len(d) for d in docs], np.float32)])
        self.alive = np.concatenate([self.alive, np.ones(len(docs), bool)])
        self._cols = None

    def add_reusing(self, old: Sequence[int | None], fresh: Sequence[Sequence[str]]) -> None:
        """Append one row per entry of `old`: a copy of that (dropped) slot's row where given, else the
        next document of `fresh` (token lists, in order). The rows equal `add` of every document: a
        reused row's terms are already in the vocabulary, so the fresh ones get the same columns."""
        kept = [o for o in old if o is not None]
        if not kept:
            self.add(fresh)
            return
        new = self._rows_of(fresh) if fresh else None
        width = max(1, len(self.vocab))  # after _rows_of: the width includes the new terms
        parts = [self._take(np.asarray(kept, np.int64))]
        if new is not None:
            parts.append((new.indptr, new.indices, new.data))
        stacked = _joined(parts)
        perm, lens = np.empty(len(old), np.int64), np.empty(len(old), np.float32)
        k, f = 0, len(kept)
        for i, o in enumerate(old):
            if o is None:
                perm[i], lens[i] = f, len(fresh[f - len(kept)])
                f += 1
            else:
                perm[i], lens[i] = k, self.doc_len[o]
                k += 1
        ptr, idx, data = _gather(stacked, perm)
        self._rows.append(_sparse().csr_matrix((data, idx, ptr), shape=(len(old), width)))
        self.doc_len = np.concatenate([self.doc_len, lens])
        self.alive = np.concatenate([self.alive, np.ones(len(old), bool)])
        self._cols = None

    def _rows_of(self, docs: Sequence[Sequence[str]]) -> sp.csr_matrix:
        """One CSR row of term frequencies per document, new terms added to the vocabulary."""
        indptr = [0]
        indices: list[int] = []
        data: list[float] = []
        for doc in docs:
            for tok, n in Counter(doc).items():
                idx = self.vocab.setdefault(tok, len(self.vocab))
                indices.append(idx)
                data.append(float(n))
            indptr.append(len(indices))
        return _sparse().csr_matrix(
            (np.asarray(data, np.float32), np.asarray(indices, np.int32), np.asarray(indptr, np.int64)),
            shape=(len(docs), max(1, len(self.vocab))),
        )

    def set_rows(self, slots: Sequence[int], docs: Sequence[Sequence[str]]) -> None:
        """Replace the rows of existing `slots` by `docs`: the CSR arrays rebuilt in one numpy pass
        (no re-indexing, no sparse products)."""
        if not len(slots):
            return
        new = self._rows_of(docs)
        m = self._merged()  # after _rows_of: the width includes the new terms
        at = np.asarray(slots, np.int64)
        self._matrix = _replaced(m, at, new.indptr, new.indices, new.data)
        self._changed.update(int(x) for x in slots)
        doc_len = np.array(self.doc_len, np.float32)
        doc_len[at] = [len(d) for d in docs]
        self.doc_len = doc_len
        self._cols = None

    def remove(self, slots: Sequence[int]) -> None:
        """Mark slots dead; they stop counting for IDF and average length at once."""
        self.alive[np.asarray(slots, dtype=np.int64)] = False

    def _merged(self) -> sp.csr_matrix:
        """The whole row matrix, pending rows appended (imports scipy)."""
        sparse = _sparse()
        width = max(1, len(self.vocab))
        if self._matrix is None:
            if self._raw is not None:
                data, indices, indptr, shape = self._raw
                if self._delta is not None:  # the saved delta's rows over the base's (segments.py)
                    slots, d_ptr, d_idx, d_data = self._delta
                    n = shape[0] + int((slots >= shape[0]).sum())  # the rows as loaded (more may be pending)
                    grown = np.full(n - shape[0], indptr[-1], indptr.dtype)
                    shape = (n, max(shape[1], width))
                    base = sparse.csr_matrix((data, indices, np.concatenate([indptr, grown])), shape=shape)
                    self._matrix = _replaced(base, slots, d_ptr, d_idx, d_data)
                else:
                    self._matrix = sparse.csr_matrix((data, indices, indptr), shape=shape)
                self._raw, self._delta = None, None
            else:
                self._matrix = sparse.csr_matrix((0, width), dtype=np.float32)
        if self._rows:
            parts = [self._resize(self._matrix, width)] + [self._resize(r, width) for r in self._rows]
            self._matrix = sparse.vstack(parts, format="csr")
            self._rows = []
        return self._resize(self._matrix, width)

    def _take(self, slots: np.ndarray) -> Csr:
        """The CSR rows of `slots`, in their order, read from the merged rows and the pending ones
        without merging them: a one-file update copies its few rows, not the whole matrix (1-2 ms a
        field on a 5k-unit index), and a query merges them once when it next needs the columns. No
        slots read nothing: a loaded index's rows are not made from its columns for them (a save with
        no row changed made them, ~8 MB a field on a DolphinScheduler-sized tree)."""
        if not len(slots):
            return np.zeros(1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.float32)
        if self._matrix is None or len(self._rows) > MAX_PENDING:
            self._merged()
        parts = [(m.indptr, m.indices, m.data) for m in (self._matrix, *self._rows) if m is not None]
        bounds = np.cumsum([0] + [len(p[0]) - 1 for p in parts])
        part_of = np.searchsorted(bounds, slots, side="right") - 1
        pieces, order = [], []
        for k in np.unique(part_of):
            at = np.flatnonzero(part_of == k)
            pieces.append(_gather(parts[k], slots[at] - bounds[k]))
            order.append(at)
        if len(pieces) <= 1:
            return pieces[0] if pieces else _gather(parts[0], slots)
        back = np.empty(len(slots), np.int64)
        back[np.concatenate(order)] = np.arange(len(slots))
        return _gather(_joined(pieces), back)

    def _columns(self) -> Columns:
        if self._cols is None or self._rows:
            csc = self._merged().tocsc()
            self._cols = (csc.indptr, csc.indices, csc.data)
        return self._cols

    @staticmethod
    def _resize(m: sp.csr_matrix, width: int) -> sp.csr_matrix:
        if m.shape[1] == width:
            return m
        return _sparse().csr_matrix((m.data, m.indices, m.indptr), shape=(m.shape[0], width))

    def scores(self, query: Sequence[str] | Mapping[str, float]) -> np.ndarray:
        """BM25 score of every slot for the query tokens (each distinct token once, times its weight)."""
        out = np.zeros(self.size, dtype=np.float32)
        weights = dict(query) if isinstance(query, Mapping) else dict.fromkeys(query, 1.0)
        ids = sorted({self.vocab[t] for t in weights if t in self.vocab and weights[t] > 0})
        weight_of = {self.vocab[t]: w for t, w in weights.items() if t in self.vocab}
        n_alive = int(self.alive.sum())
        if not ids or n_alive == 0:
            return out
        col_ptr, col_rows, col_tf = self._columns()
        avgdl = float(self.doc_len[self.alive].mean()) or 1.0
        norm = self.k1 * (1 - self.b + self.b * self.doc_len / avgdl)
        for idx in ids:
            if idx + 1 >= len(col_ptr):
                continue  # a term added after the columns were read cannot be in them
            lo, hi = col_ptr[idx], col_ptr[idx + 1]
            rows = col_rows[lo:hi]
            tf = col_tf[lo:hi]
            live = self.alive[rows]
            df = int(live.sum())
            if df == 0:
                continue
            idf = weight_of[idx] * np.log(1 + (n_alive - df + 0.5) / (df + 0.5))
            out[rows] += np.where(live, idf * tf / (tf + norm[rows]), 0.0).astype(np.float32)
        return out

    def postings(self, term: str) -> np.ndarray:
        """The live slots whose rows hold `term` (empty when unknown)."""
        idx = self.vocab.get(term)
        col_ptr, col_rows, _ = self._columns()
        if idx is None or idx + 1 >= len(col_ptr):
            return np.zeros(0, np.int64)
        rows = col_rows[col_ptr[idx] : col_ptr[idx + 1]]
        return rows[self.alive[rows]]

    def top(self, query: Sequence[str] | Mapping[str, float], n: int) -> list[tuple[int, float]]:
        """The best `n` live slots with a positive score, best first."""
        s = self.scores(query)
        if not len(s):
            return []
        n = min(n, len(s))
        cand = np.argpartition(-s, n - 1)[:n]
        cand = cand[np.argsort(-s[cand], kind="stable")]
        return [(int(i), float(s[i])) for i in cand if s[i] > 0]

    def compact(self, keep: np.ndarray) -> None:
        """Drop all rows but `keep` (slot indices, in their new order)."""
        self._matrix = self._merged()[keep]
        self.doc_len = self.doc_len[keep]
        self.alive = self.alive[keep]
        self._cols = None
        self._base, self._changed = None, set()  # renumbered: the next save writes a new base

    def save(
        self,
        directory: Path,
        name: str = "bm25",
        current: Path | None = None,
        delta: segments.Delta | None = None,
    ) -> None:
        """Write the columns, lengths, liveness and vocabulary as `<name>.npys` and `<name>_vocab.txt`;
        or, while the rows changed since the base saved in `current` are few, link that base and put
        them in `delta`: slots, CSR rows, lengths, liveness and the new terms (segments.py)."""
        base = self._base
        if base is not None and base.rows <= self.size and delta is not None:
            changed = sorted(s for s in self._changed if s < base.rows)
            slots = np.asarray([*changed, *range(base.rows, self.size)], np.int64)
            if segments.small(base, len(slots)) and segments.link(current, directory, f"{name}.npys", base):
                os.link(current / f"{name}_vocab.txt", directory / f"{name}_vocab.txt")  # type: ignore[operator]
                rows = self._take(slots)
                # the terms since the base, in column order: the vocabulary's insertion order is its
                # column order (a term's column is its position when added; none is ever removed)
                added = len(self.vocab) - self._base_vocab  # read from the end: not past every term before
                vocab = list(itertools.islice(reversed(self.vocab), added))[::-1]
                delta.put(f"{name}.slots", slots)
                delta.put(f"{name}.indptr", rows[0])
                delta.put(f"{name}.indices", rows[1])
                delta.put(f"{name}.data", rows[2])
                delta.put(f"{name}.doc_len", self.doc_len)
                delta.put(f"{name}.alive", self.alive)
                delta.put_text(f"{name}.vocab", "\n".join(vocab))
                return
        m = self._merged()
        col_ptr, col_rows, col_tf = self._columns()
        segments.save_named(  # the columns only: SavedRows makes the rows from them when an update needs them
            directory / f"{name}.npys",
            {
                "shape": np.asarray(m.shape),
                "col_indptr": col_ptr,
                "col_indices": col_rows,
                "col_data": col_tf,
                "doc_len": self.doc_len,
                "alive": self.alive,
                "params": np.asarray([self.k1, self.b]),
            },
        )
        vocab = list(self.vocab)  # in column order: a term's column is its position when added
        (directory / f"{name}_vocab.txt").write_text("\n".join(vocab), encoding="utf-8")
        self._base = segments.remember(directory / f"{name}.npys", self.size)
        self._base_vocab, self._changed = len(vocab), set()

    @classmethod
    def load(
        cls, directory: Path, name: str = "bm25", delta: Mapping[str, np.ndarray] | None = None
    ) -> Bm25Index:
        """Read what `save` wrote: the base, and its rows in the directory's delta (`delta`, when read
        already: `segments.read_delta`) when there are any."""
        z = segments.load_named(directory / f"{name}.npys")
        idx = cls(float(z["params"][0]), float(z["params"][1]))
        text = (directory / f"{name}_vocab.txt").read_text(encoding="utf-8")
        words = text.split("\n") if text else []
        idx.vocab = {w: i for i, w in enumerate(words)}
        shape = (int(z["shape"][0]), int(z["shape"][1]))
        cols = (z["col_indptr"], z["col_indices"], z["col_data"])
        idx._raw = SavedRows(cols, shape)
        idx.doc_len = z["doc_len"]
        idx.alive = z["alive"]
        idx._base = segments.remember(directory / f"{name}.npys", shape[0])
        idx._base_vocab = len(words)
        delta = delta if delta is not None else segments.read_delta(directory)
        if f"{name}.slots" in delta:
            slots, d_ptr, d_idx, d_data, doc_len, alive = (
                delta[f"{name}.{part}"] for part in ("slots", "indptr", "indices", "data", "doc_len", "alive")
            )
            more = segments.text_of(delta[f"{name}.vocab"])
            for w in more.split("\n") if more else []:
                idx.vocab[w] = len(idx.vocab)
            idx.doc_len, idx.alive = doc_len, alive
            idx._delta = (slots, d_ptr, d_idx, d_data)
            idx._changed = {int(s) for s in slots if s < shape[0]}
            cols = _with_rows(cols, len(idx.vocab), idx._delta, idx.size)
        idx._cols = cols
        return idx


def _replaced(
    m: sp.csr_matrix, at: np.ndarray, indptr: np.ndarray, indices: np.ndarray, data: np.ndarray
) -> sp.csr_matrix:
    """`m` with its rows `at` replaced by the CSR rows (`indptr`, `indices`, `data`), in one numpy pass."""
    old_len = np.diff(m.indptr)
    new_len = old_len.copy()
    new_len[at] = np.diff(indptr)
    out_ptr = np.zeros(len(new_len) + 1, np.int64)
    np.cumsum(new_len, out=out_ptr[1:])
    out_idx = np.empty(int(out_ptr[-1]), m.indices.dtype)
    out_data = np.empty(int(out_ptr[-1]), np.float32)
    replaced = np.zeros(len(old_len), bool)
    replaced[at] = True
    row = np.repeat(np.arange(len(old_len)), old_len)  # the row of every stored entry
    keep = ~replaced[row]
    dest = out_ptr[row[keep]] + (np.arange(len(row))[keep] - m.indptr[row[keep]])
    out_idx[dest], out_data[dest] = m.indices[keep], m.data[keep]
    new_row = np.repeat(at, np.diff(indptr))
    dest = out_ptr[new_row] + (np.arange(len(new_row)) - np.repeat(indptr[:-1], np.diff(indptr)))
    out_idx[dest], out_data[dest] = indices, data
    return _sparse().csr_matrix((out_data, out_idx, out_ptr), shape=m.shape)


def _with_rows(cols: Columns, n_cols: int, delta: Rows, n_rows: int) -> Columns:
    """The base's columns with the delta's rows in place of theirs (numpy only: a query needs no scipy);
    every column's rows stay sorted, as a fresh build's."""
    col_ptr, col_rows, col_tf = cols
    slots, d_ptr, d_idx, d_data = delta
    counts = np.diff(col_ptr)
    col_of = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    shadow = np.zeros(n_rows, bool)
    shadow[slots] = True
    keep = ~shadow[col_rows]
    key = col_of[keep] * n_rows + col_rows[keep]
    d_rows = np.repeat(np.asarray(slots, np.int64), np.diff(d_ptr))
    d_key = d_idx.astype(np.int64) * n_rows + d_rows
    order = np.argsort(d_key, kind="stable")
    at = np.searchsorted(key, d_key[order])
    rows = np.insert(col_rows[keep], at, d_rows[order].astype(col_rows.dtype))
    tf = np.insert(col_tf[keep], at, d_data[order])
    col = np.insert(col_of[keep], at, d_idx[order].astype(np.int64))
    ptr = np.zeros(n_cols + 1, col_ptr.dtype)
    np.cumsum(np.bincount(col, minlength=n_cols), out=ptr[1:])
    return ptr, rows, tf


def _gather(rows: Csr, at: np.ndarray) -> Csr:
    """The CSR rows `at` of `rows`, in that order, in numpy alone (scipy's row indexing spent most of
    a small copy in its checks)."""
    indptr, indices, data = rows
    lens = indptr[1:][at] - indptr[:-1][at]
    ptr = np.zeros(len(at) + 1, np.int64)
    np.cumsum(lens, out=ptr[1:])
    src = np.repeat(indptr[:-1][at] - ptr[:-1], lens) + np.arange(ptr[-1])
    return ptr, indices[src], data[src]


def _joined(parts: list[Csr]) -> Csr:
    """CSR rows one part after another."""
    if len(parts) == 1:
        return parts[0]
    ptrs, shift = [np.zeros(1, np.int64)], 0
    for indptr, _, _ in parts:
        ptrs.append(indptr[1:] - indptr[0] + shift)
        shift += int(indptr[-1] - indptr[0])
    return (
        np.concatenate(ptrs),
        np.concatenate([idx[p[0] : p[-1]] for p, idx, _ in parts]),
        np.concatenate([d[p[0] : p[-1]] for p, _, d in parts]),
    )
