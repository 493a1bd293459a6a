"""BM25 (the Lucene variant bm25s uses by default) over a sparse term matrix that takes row updates.

bm25s precomputes every score at index time, so one changed file means re-indexing the whole
corpus (~0.8 s for 15k units here, more than a one-file update may cost). This keeps raw term
frequencies instead and applies IDF and length normalisation at query time over the few query
columns; scores equal bm25s's `method="lucene"` (a test checks it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import scipy.sparse as sp


Columns = tuple[np.ndarray, np.ndarray, np.ndarray]  # CSC indptr, indices, data


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
        self._raw: tuple[np.ndarray, np.ndarray, np.ndarray, tuple[int, int]] | None = None  # loaded CSR
        self._cols: Columns | None = None
        self.doc_len = np.zeros(0, dtype=np.float32)
        self.alive = np.zeros(0, dtype=bool)

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
        old_len = np.diff(m.indptr)
        new_len = old_len.copy()
        new_len[at] = np.diff(new.indptr)
        indptr = np.zeros(len(new_len) + 1, np.int64)
        np.cumsum(new_len, out=indptr[1:])
        indices = np.empty(int(indptr[-1]), m.indices.dtype)
        data = np.empty(int(indptr[-1]), np.float32)
        replaced = np.zeros(len(old_len), bool)
        replaced[at] = True
        row = np.repeat(np.arange(len(old_len)), old_len)  # the row of every stored entry
        keep = ~replaced[row]
        dest = indptr[row[keep]] + (np.arange(len(row))[keep] - m.indptr[row[keep]])
        indices[dest], data[dest] = m.indices[keep], m.data[keep]
        new_row = np.repeat(at, np.diff(new.indptr))
        dest = indptr[new_row] + (np.arange(len(new_row)) - np.repeat(new.indptr[:-1], np.diff(new.indptr)))
        indices[dest], data[dest] = new.indices, new.data
        self._matrix = _sparse().csr_matrix((data, indices, indptr), shape=m.shape)
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
                self._matrix = sparse.csr_matrix((data, indices, indptr), shape=shape)
                self._raw = None
            else:
                self._matrix = sparse.csr_matrix((0, width), dtype=np.float32)
        if self._rows:
            parts = [self._resize(self._matrix, width)] + [self._resize(r, width) for r in self._rows]
            self._matrix = sparse.vstack(parts, format="csr")
            self._rows = []
        return self._resize(self._matrix, width)

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

    def save(self, directory: Path, name: str = "bm25") -> None:
        """Write rows and columns, lengths, liveness and vocabulary as `<name>.npz` and `<name>_vocab.txt`."""
        m = self._merged()
        col_ptr, col_rows, col_tf = self._columns()
        np.savez(
            directory / f"{name}.npz",
            data=m.data,
            indices=m.indices,
            indptr=m.indptr,
            shape=np.asarray(m.shape),
            col_indptr=col_ptr,
            col_indices=col_rows,
            col_data=col_tf,
            doc_len=self.doc_len,
            alive=self.alive,
            params=np.asarray([self.k1, self.b]),
        )
        vocab = sorted(self.vocab, key=self.vocab.__getitem__)
        (directory / f"{name}_vocab.txt").write_text("\n".join(vocab), encoding="utf-8")

    @classmethod
    def load(cls, directory: Path, name: str = "bm25") -> Bm25Index:
        """Read what `save` wrote (an index saved without columns gets them on its first query)."""
        z = np.load(directory / f"{name}.npz")
        idx = cls(float(z["params"][0]), float(z["params"][1]))
        text = (directory / f"{name}_vocab.txt").read_text(encoding="utf-8")
        words = text.split("\n") if text else []
        idx.vocab = {w: i for i, w in enumerate(words)}
        shape = (int(z["shape"][0]), int(z["shape"][1]))
        idx._raw = (z["data"], z["indices"], z["indptr"], shape)
        if "col_indptr" in z.files:
            idx._cols = (z["col_indptr"], z["col_indices"], z["col_data"])
        idx.doc_len = z["doc_len"]
        idx.alive = z["alive"]
        return idx
