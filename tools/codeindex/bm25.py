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

import numpy as np
import scipy.sparse as sp


class Bm25Index:
    """Rows are slots (units); a removed slot stays as a dead row until `compact`."""

    def __init__(self, k1: float = 1.5, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.vocab: dict[str, int] = {}
        self._rows: list[sp.csr_matrix] = []  # pending appended rows, merged lazily
        self._matrix = sp.csr_matrix((0, 0), dtype=np.float32)
        self._csc: sp.csc_matrix | None = None
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
        indptr = [0]
        indices: list[int] = []
        data: list[float] = []
        for doc in docs:
            for tok, n in Counter(doc).items():
                idx = self.vocab.setdefault(tok, len(self.vocab))
                indices.append(idx)
                data.append(float(n))
            indptr.append(len(indices))
        self._rows.append(
            sp.csr_matrix(
                (np.asarray(data, np.float32), np.asarray(indices, np.int32), np.asarray(indptr, np.int64)),
                shape=(len(docs), max(1, len(self.vocab))),
            )
        )
        self.doc_len = np.concatenate([self.doc_len, np.asarray([len(d) for d in docs], np.float32)])
        self.alive = np.concatenate([self.alive, np.ones(len(docs), bool)])
        self._csc = None

    def remove(self, slots: Sequence[int]) -> None:
        """Mark slots dead; they stop counting for IDF and average length at once."""
        self.alive[np.asarray(slots, dtype=np.int64)] = False

    def _columns(self) -> sp.csc_matrix:
        if self._csc is None:
            width = max(1, len(self.vocab))
            parts = [self._resize(self._matrix, width)] + [self._resize(r, width) for r in self._rows]
            self._matrix = sp.vstack(parts, format="csr") if len(parts) > 1 else parts[0]
            self._rows = []
            self._csc = self._matrix.tocsc()
        return self._csc

    @staticmethod
    def _resize(m: sp.csr_matrix, width: int) -> sp.csr_matrix:
        if m.shape[1] == width:
            return m
        return sp.csr_matrix((m.data, m.indices, m.indptr), shape=(m.shape[0], width))

    def scores(self, query: Sequence[str] | Mapping[str, float]) -> np.ndarray:
        """BM25 score of every slot for the query tokens (each distinct token once, times its weight)."""
        out = np.zeros(self.size, dtype=np.float32)
        weights = dict(query) if isinstance(query, Mapping) else dict.fromkeys(query, 1.0)
        ids = sorted({self.vocab[t] for t in weights if t in self.vocab and weights[t] > 0})
        weight_of = {self.vocab[t]: w for t, w in weights.items() if t in self.vocab}
        n_alive = int(self.alive.sum())
        if not ids or n_alive == 0:
            return out
        csc = self._columns()
        avgdl = float(self.doc_len[self.alive].mean()) or 1.0
        norm = self.k1 * (1 - self.b + self.b * self.doc_len / avgdl)
        for idx in ids:
            lo, hi = csc.indptr[idx], csc.indptr[idx + 1]
            rows = csc.indices[lo:hi]
            tf = csc.data[lo:hi]
            live = self.alive[rows]
            df = int(live.sum())
            if df == 0:
                continue
            idf = weight_of[idx] * np.log(1 + (n_alive - df + 0.5) / (df + 0.5))
            out[rows] += np.where(live, idf * tf / (tf + norm[rows]), 0.0).astype(np.float32)
        return out

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
        csc = self._columns()  # merges pending rows
        del csc
        self._matrix = self._matrix[keep]
        self.doc_len = self.doc_len[keep]
        self.alive = self.alive[keep]
        self._csc = None

    def save(self, directory: Path, name: str = "bm25") -> None:
        """Write the matrix, lengths, liveness and vocabulary as `<name>.npz` and `<name>_vocab.txt`."""
        self._columns()
        m = self._matrix
        np.savez(
            directory / f"{name}.npz",
            data=m.data,
            indices=m.indices,
            indptr=m.indptr,
            shape=np.asarray(m.shape),
            doc_len=self.doc_len,
            alive=self.alive,
            params=np.asarray([self.k1, self.b]),
        )
        vocab = sorted(self.vocab, key=self.vocab.__getitem__)
        (directory / f"{name}_vocab.txt").write_text("\n".join(vocab), encoding="utf-8")

    @classmethod
    def load(cls, directory: Path, name: str = "bm25") -> Bm25Index:
        """Read what `save` wrote."""
        z = np.load(directory / f"{name}.npz")
        idx = cls(float(z["params"][0]), float(z["params"][1]))
        text = (directory / f"{name}_vocab.txt").read_text(encoding="utf-8")
        words = text.split("\n") if text else []
        idx.vocab = {w: i for i, w in enumerate(words)}
        idx._matrix = sp.csr_matrix((z["data"], z["indices"], z["indptr"]), shape=tuple(z["shape"]))
        idx.doc_len = z["doc_len"]
        idx.alive = z["alive"]
        return idx
