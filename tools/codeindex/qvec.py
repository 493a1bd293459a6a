"""Query vectors without loading the embedding model: a word -> token ids table saved with the index.

wordllama's vector of a text is the mean of its tokens' rows in a (32000, 256) matrix, normalised.
Its tokenizer (SentencePiece-style BPE: spaces become `▁`, no pre-tokenizer) has no token with `▁`
after its first character, so a text's tokens are those of each space-separated word on its own.
The index keeps the token ids of every word it embedded (and of the vocabulary's whole-word
pieces); a query whose words are all in that table gets the model's exact vector from the weights
file read in place (np.memmap of the safetensors tensor), without importing wordllama or building
its tokenizer (~0.3 s of a `xihe search`). A word the table lacks is split by `Bpe`, the
tokenizer's own merges applied as its BPE model does (a test holds it to the tokenizer's output on
tens of thousands of words); without the merges file the model itself embeds the query.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import struct
from collections.abc import Iterable, Mapping, Sequence
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from xihe.tools.codeindex import segments

FILE = "query_words.tsv"
DELTA = "query_words"  # the words added since FILE was written, in the delta file (segments.py)
BPE_FILES = ("bpe_merges.txt", "bpe_vocab.tsv")
TOKENIZER = ("tokenizers", "l2_supercat_tokenizer_config.json")
WEIGHTS = ("weights", "l2_supercat_{dim}.safetensors")
TENSOR = "embedding.weight"
# a word the table may hold: no spaces or control characters (the normaliser only rewrites " "),
# no angle brackets (special tokens such as <s> are matched in the raw text)
FOUND_WORDS = 4096  # words a loaded table remembers having looked up
_TABLE_WORD = re.compile(r"[^\s<>]{1,64}")


class TokenSource(Protocol):
    """What the table is built from: the embedder's own tokenizer."""

    def token_ids(self, words: Sequence[str]) -> list[list[int]]:
        """The token ids of each word embedded on its own."""
        ...


def model_files(dim: int) -> tuple[Path, Path] | None:
    """(tokenizer json, weights) inside the installed wordllama package, found without importing it."""
    spec = find_spec("wordllama")
    if spec is None or not spec.origin:
        return None
    pkg = Path(spec.origin).parent
    return pkg.joinpath(*TOKENIZER), pkg / WEIGHTS[0] / WEIGHTS[1].format(dim=dim)


def _stamp(files: tuple[Path, Path]) -> str:
    """Sizes and modification times of the model files: a reinstalled model invalidates the table."""
    return ";".join(f"{p.name}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in files)


def weights_matrix(path: Path) -> np.ndarray:
    """The embedding tensor of a safetensors file, memory-mapped (rows are read when indexed)."""
    with open(path, "rb") as fh:
        (size,) = struct.unpack("<Q", fh.read(8))
        header = json.loads(fh.read(size))
    info = header[TENSOR]
    dtype = {"F16": np.float16, "F32": np.float32, "BF16": None}[info["dtype"]]
    if dtype is None:
        raise ValueError(f"{path}: {TENSOR} is bfloat16, which numpy cannot map")
    start = info["data_offsets"][0]
    shape = tuple(info["shape"])
    return np.memmap(path, dtype=dtype, mode="r", offset=8 + size + start, shape=shape)


def table_words(texts: Iterable[str]) -> set[str]:
    """The space-separated words of `texts` the table can hold."""
    out: set[str] = set()
    for text in texts:
        out.update(w for w in text.split(" ") if _TABLE_WORD.fullmatch(w))
    return out


class Bpe:
    """The tokenizer's BPE model on one space-free word: lowest-ranked adjacent pair merged first
    (leftmost on ties), characters outside the vocabulary as their UTF-8 byte tokens.

    Merges and vocabulary stay text (`bpe_merges.txt`, `bpe_vocab.tsv` in the index directory) and
    are searched with `str.find`: a merge's offset in the rank-ordered file orders it like its rank,
    and nothing is parsed on a query (parsing them took 0.1-0.2 s).
    """

    def __init__(self, merges: str, vocab: str) -> None:
        self.merges = merges  # "\na b\n..." in rank order
        self.vocab = vocab  # "\npiece\tid\n..."

    @classmethod
    def from_tokenizer(cls, tokenizer_json: Path) -> Bpe | None:
        """From the model's tokenizer file; None when a piece could not be stored as a line."""
        model = json.loads(tokenizer_json.read_text(encoding="utf-8"))["model"]
        merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
        vocab: dict[str, int] = model["vocab"]
        if any("\n" in m or "\t" in m for m in [*merges, *vocab]):
            return None
        return cls("\n" + "\n".join(merges) + "\n", "\n" + "".join(f"{p}\t{i}\n" for p, i in vocab.items()))

    def save(self, directory: Path) -> None:
        """Write both files under `directory`."""
        (directory / "bpe_merges.txt").write_text(self.merges[1:], encoding="utf-8")
        (directory / "bpe_vocab.tsv").write_text(self.vocab[1:], encoding="utf-8")

    @classmethod
    def load(cls, directory: Path) -> Bpe | None:
        """The saved files, or None."""
        try:
            merges = (directory / "bpe_merges.txt").read_text(encoding="utf-8")
            vocab = (directory / "bpe_vocab.tsv").read_text(encoding="utf-8")
        except OSError:
            return None
        return cls("\n" + merges, "\n" + vocab)

    def _id(self, piece: str) -> int | None:
        at = self.vocab.find(f"\n{piece}\t")
        if at < 0:
            return None
        start = at + len(piece) + 2
        return int(self.vocab[start : self.vocab.index("\n", start)])

    def ids(self, word: str) -> list[int] | None:
        """Token ids of `word` as the model tokenizes it on its own (after the leading `▁`)."""
        symbols = list("\u2581" + word)
        seen: dict[tuple[str, str], int] = {}  # pair -> its offset (-1: no merge); each pair searched once
        while len(symbols) > 1:
            best, at = -1, -1
            for i in range(len(symbols) - 1):
                pair = (symbols[i], symbols[i + 1])
                pos = seen.get(pair)
                if pos is None:
                    pos = seen[pair] = self.merges.find(f"\n{pair[0]} {pair[1]}\n")
                if pos >= 0 and (best < 0 or pos < best):
                    best, at = pos, i
            if best < 0:
                break
            symbols[at : at + 2] = [symbols[at] + symbols[at + 1]]
        out: list[int] = []
        for s in symbols:
            got = self._id(s)
            if got is not None:
                out.append(got)
                continue
            for b in s.encode("utf-8"):
                byte = self._id(f"<0x{b:02X}>")
                if byte is None:
                    return None
                out.append(byte)
        return out


class QueryVectors:
    """word -> token ids, saved as `query_words.tsv` in the index directory (first line: model stamp).

    A loaded table stays one string of UTF-8 bytes until it changes: a query looks its few words up
    with `bytes.find` instead of parsing ~100k lines (bytes: a `str` holding one character outside
    the BMP takes four bytes a character, 8.5 MB instead of 2.1 MB for React Native). Words are only
    added: a save links the table file as last written (the base) and writes the words added since
    in the save's delta (`segments.Delta`), until they pass `segments.SHARE` of the base's words and the table is
    written whole again.
    """

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._ids: dict[str, str] | None = {}  # word -> "id id ..."; None while only `_text` holds them
        self._text = b"\n"  # the saved lines, each "\nword\tids", UTF-8
        self._weights: np.ndarray | None = None
        self._files = model_files(dim)
        self.bpe: Bpe | None = None  # for words the table lacks; set by the index (built or loaded)
        self._saved: segments.Base | None = None  # the base file as last written (rows: its words)
        self._delta = b""  # the lines after the base, as loaded, while the table is still `_text`
        self._found: dict[str, str | None] = {}  # words looked up in `_text` (a serve asks for the same ones)

    def _table(self) -> dict[str, str]:
        if self._ids is None:  # the base's words first, then the delta's: `_since_base` counts on it
            self._ids = dict(line.split("\t", 1) for line in self._text.decode("utf-8").splitlines() if line)
            self._text, self._delta = b"\n", b""
            self._found.clear()
        return self._ids

    def __len__(self) -> int:
        return len(self._table())

    def ids(self, word: str) -> list[int] | None:
        """The token ids of `word` (a table-able word): from the table, else from `Bpe`."""
        if self._ids is not None:
            raw = self._ids.get(word)
        elif word in self._found:
            raw = self._found[word]
        else:
            key = f"\n{word}\t".encode()
            at = self._text.find(key)
            raw = None if at < 0 else self._text[at + len(key) : self._text.find(b"\n", at + 1)].decode()
            if len(self._found) >= FOUND_WORDS:
                self._found.clear()
            self._found[word] = raw
        if raw is not None:
            return [int(n) for n in raw.split()]
        return self.bpe.ids(word) if self.bpe is not None else None

    def add(self, words: Iterable[str], source: TokenSource) -> None:
        """Tokenize the words not yet in the table (with the model's tokenizer) and keep them."""
        table = self._table()
        new = sorted({w for w in words if w not in table and _TABLE_WORD.fullmatch(w)})
        for word, ids in zip(new, source.token_ids(new), strict=True):
            table[word] = " ".join(map(str, ids))

    def vector(self, text: str) -> np.ndarray | None:
        """The model's normalised vector of `text`, or None when it must be left to the model itself."""
        ids: list[int] = []
        for w in text.split(" "):
            got = self.ids(w) if _TABLE_WORD.fullmatch(w) else None
            if got is None:
                return None
            ids.extend(got)
        if not ids or self._files is None:
            return None
        if self._weights is None:
            self._weights = weights_matrix(self._files[1])
        rows = np.asarray(self._weights[np.asarray(ids, np.int64)], dtype=np.float32)
        mean = rows.sum(axis=0, dtype=np.float32) / np.float32(len(ids))
        norm = float(np.linalg.norm(mean))
        return mean / norm if norm else None

    def _since_base(self) -> tuple[str, int]:
        """The lines ("word\tids\n") of the words added after the base, and how many."""
        if self._saved is None:
            return "", 0
        if self._ids is None:
            return self._delta.decode("utf-8"), self._delta.count(b"\n")
        count = (
            len(self._ids) - self._saved.rows
        )  # the last words added (from the end: no walk past the base)
        added = list(itertools.islice(reversed(self._ids.items()), max(count, 0)))[::-1]
        return "".join(f"{w}\t{i}\n" for w, i in added), len(added)

    def save(self, directory: Path, current: Path | None = None, delta: segments.Delta | None = None) -> None:
        """Write the table (one `word<TAB>id id ...` line per word) under `directory`: the base
        hard-linked from `current` where it was saved or loaded, and the words since in `delta`,
        while they are few (segments.py); else written whole."""
        if self._files is None:
            return
        target = Path(directory)
        names = [FILE, *(BPE_FILES if self.bpe is not None else ())]
        lines, count = self._since_base()
        if (
            delta is not None
            and segments.small(self._saved, count)
            and segments.link(current, target, FILE, self._saved)
        ):
            assert current is not None
            for name in names[1:]:
                os.link(current / name, target / name)
            if count:
                delta.put_text(DELTA, lines)
            return
        table = self._table()
        body = "".join(f"{w}\t{i}\n" for w, i in table.items())
        (target / FILE).write_text(f"{_stamp(self._files)}\n{body}", encoding="utf-8")
        if self.bpe is not None:
            self.bpe.save(target)
        self._saved = segments.remember(target / FILE, len(table))

    @classmethod
    def load(
        cls, directory: Path, dim: int, delta: Mapping[str, np.ndarray] | None = None
    ) -> QueryVectors | None:
        """The saved table (its base, and its words in the directory's delta: `delta` when read
        already, `segments.read_delta`), or None when missing or made with other model files."""
        try:
            raw = (Path(directory) / FILE).read_bytes()
        except OSError:
            return None
        table = cls(dim)
        head, _, body = raw.partition(b"\n")
        if table._files is None or head.decode("utf-8", "replace") != _stamp(table._files):
            return None
        delta = delta if delta is not None else segments.read_delta(Path(directory))
        table._delta = delta[DELTA].tobytes() if DELTA in delta else b""
        table._ids, table._text = None, b"\n" + body + table._delta
        table.bpe = Bpe.load(Path(directory))
        table._saved = segments.remember(Path(directory) / FILE, body.count(b"\n"))
        return table


def vocabulary_words(tokenizer_json: Path) -> list[str]:
    """The whole-word pieces of the tokenizer's vocabulary (`▁word` -> `word`): words a repository lacks."""
    vocab: dict[str, Any] = json.loads(tokenizer_json.read_text(encoding="utf-8"))["model"]["vocab"]
    return [p[1:] for p in vocab if p.startswith("\u2581") and _TABLE_WORD.fullmatch(p[1:])]
