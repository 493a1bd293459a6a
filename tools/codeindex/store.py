"""An index's files on disk: written atomically (a new directory swapped in), units.jsonl append-only.

meta.json records the index version, the models and walk settings it was built with, and every
file's hash and slots; a saved index built with other settings is not loaded (it is built again).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import MutableSequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from xihe.agent.cachedir import shared_cache
from xihe.tools.codeindex import graphstore, quant, reuse, segments
from xihe.tools.codeindex.bm25 import Bm25Index
from xihe.tools.codeindex.graphstore import GraphFacts
from xihe.tools.codeindex.qvec import QueryVectors
from xihe.tools.codeindex.unitlines import UnitLines
from xihe.tools.codeindex.units import CodeUnit
from xihe.tools.codeindex.zhdict import ZhSource

if TYPE_CHECKING:  # only types: a query on a saved index never imports pydantic
    from xihe.config.code import CodeConfig
    from xihe.tools.codeindex.bridge import CjkBridge
    from xihe.tools.codeindex.embed import Embedder
    from xihe.tools.codeindex.multilingual import MultilingualVectors
    from xihe.tools.codeindex.tokens import Tokenizer

_UNIT = json.JSONEncoder(
    ensure_ascii=False, check_circular=False
)  # plain data: nothing to check (35% faster)
MAX_KNOWN = 4096  # units.jsonl lines kept from one save for the next (a re-indexed file's units)
MULTI = "multi_vectors"  # multilingual.FILE, without importing the model's module
# 8: neighbours.npz (the graph field), unit_keys.npy; 9: row files as base + delta (segments.py);
# 10: the query-word table as base + delta (qvec.py); 11: graph.bin (marshal records) for graph.jsonl;
# 12: BM25 bases keep their columns only (bm25.SavedRows makes the rows from them); 13: vectors as
# int8 mantissas with a power-of-two exponent per row (quant.py); 14: every delta in one delta.npys;
# 15: BM25 bases as named .npy records (segments.save_named), not zip archives
INDEX_VERSION = 15


@dataclass
class FileRecord:
    """What the index knows about one file: its content hash and its slots."""

    sha1: str
    slots: list[int]


class Stored(Protocol):
    """What is saved of an index (`CodeIndex` has it all)."""

    root: Path
    directory: Path
    cfg: CodeConfig
    embedder: Embedder | None
    tokenizer: Tokenizer
    bridge: CjkBridge
    bm25: Bm25Index
    names: Bm25Index
    neighbours: Bm25Index
    unit_keys: np.ndarray
    vectors: np.ndarray
    sent_vectors: np.ndarray
    sent_owner: np.ndarray
    query_vectors: QueryVectors | None
    multi: MultilingualVectors | None
    units: MutableSequence[CodeUnit | None]
    files: dict[str, FileRecord]
    commit: str | None
    dirty: list[str]
    built_at: float
    units_on_disk: tuple[int, int] | None
    row_bases: dict[str, segments.Base]
    graph_facts: GraphFacts
    files_json: dict[str, tuple[str, list[int], str]]  # path -> (sha1, slots, JSON) as last saved
    unit_lines: dict[CodeUnit, str]  # unit -> its units.jsonl line, of the units the last save appended

    def set_sentences(self, vectors: np.ndarray, owner: np.ndarray) -> None: ...


def save(idx: Stored) -> None:
    """Write the index atomically: a new directory is filled, then swapped in.

    units.jsonl is append-only: when the saved file still matches the slot numbering (no compaction
    since), it is hard-linked into the new directory and only the new units are appended. A dead
    slot needs no rewrite (its `alive` flag is in bm25.npys), and `meta.json` records how many lines
    and bytes are valid, so lines appended by a save that crashed before the swap are ignored.
    """
    tmp = idx.directory.with_name(idx.directory.name + f".tmp-{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    current = idx.directory if idx.directory.is_dir() else None  # its base files are linked (segments.py)
    delta = segments.Delta()  # every file's rows since its base, written as one file
    idx.bm25.save(tmp, "bm25", current, delta)
    idx.names.save(tmp, "names", current, delta)
    idx.neighbours.save(tmp, "neighbours", current, delta)
    bases = idx.row_bases
    segments.save_rows(current, tmp, reuse.FILE.removesuffix(".npy"), idx.unit_keys, bases, np.uint64, delta)
    # vectors as int8 mantissas and a power-of-two exponent per row (quant.py; rounded when made)
    segments.save_rows(current, tmp, "vectors", idx.vectors, bases, np.int8, delta, quant.pack)
    segments.save_rows(current, tmp, "sent_vectors", idx.sent_vectors, bases, np.int8, delta, quant.pack)
    segments.save_rows(current, tmp, "sent_owner", idx.sent_owner, bases, np.int64, delta)
    if idx.query_vectors is not None:
        idx.query_vectors.save(tmp, current, delta)
    if idx.multi is not None:
        segments.save_rows(current, tmp, MULTI, idx.multi.vectors, bases, np.int8, delta, quant.pack)
    delta.write(tmp)
    lines, size = _write_units(idx, tmp / "units.jsonl")
    graph_records, graph_bytes = idx.graph_facts.save(tmp, len(idx.files))
    meta = {
        "version": INDEX_VERSION,
        "root": str(idx.root),
        "commit": idx.commit,
        "dirty": idx.dirty,
        "embedder": idx.embedder.name if idx.embedder is not None else None,
        "multilingual": idx.multi.model.name if idx.multi is not None else None,
        "doc_sentences": idx.cfg.embedding.doc_sentences,
        "walk": idx.cfg.walk.model_dump(),
        "built_at": idx.built_at,
        "units_lines": lines,
        "units_bytes": size,
        "graph_records": graph_records,
        "graph_bytes": graph_bytes,
    }
    head = json.dumps(meta)[:-1]  # "files" last, from each file's JSON as last written (`_files_json`)
    (tmp / "meta.json").write_text(f'{head}, "files": {_files_json(idx)}}}', encoding="utf-8")
    old = idx.directory.with_name(idx.directory.name + f".old-{os.getpid()}")
    if idx.directory.exists():
        idx.directory.rename(old)
    try:
        tmp.rename(idx.directory)
    except OSError:  # a load moved the previous index back meanwhile (`_restore`): aside with it again
        if not (idx.directory / "meta.json").exists():
            raise
        idx.directory.rename(old)
        tmp.rename(idx.directory)
    if old.exists():
        shutil.rmtree(old)
    idx.units_on_disk = (lines, size)
    idx.graph_facts.moved(idx.directory)


def _files_json(idx: Stored) -> str:
    """`idx.files` as a JSON object (path -> {"sha1", "slots"}): each record's text kept in
    `idx.files_json` and made again only when its hash or slots differ (a save after a one-file
    update serialises that file, not the ~3,000 of a large index)."""
    cache, fresh = idx.files_json, {}
    for path, rec in idx.files.items():
        hit = cache.get(path)
        if hit is None or hit[0] != rec.sha1 or hit[1] != rec.slots:
            text = json.dumps(path) + ": " + json.dumps({"sha1": rec.sha1, "slots": rec.slots})
            hit = (rec.sha1, list(rec.slots), text)
        fresh[path] = hit
    idx.files_json = fresh
    return "{" + ", ".join(t for _, _, t in fresh.values()) + "}"


def _write_units(idx: Stored, target: Path) -> tuple[int, int]:
    """Fill `target` (append to a hard link of the saved file when possible); (lines, bytes)."""
    start, offset = 0, 0
    saved = idx.directory / "units.jsonl"
    if idx.units_on_disk is not None and idx.units_on_disk[0] <= len(idx.units) and saved.exists():
        try:
            os.link(saved, target)
            start, offset = idx.units_on_disk
        except OSError:
            start, offset = 0, 0
    with open(target, "r+b" if start else "wb") as fh:
        fh.truncate(offset)
        fh.seek(offset)
        fh.write("".join(f"{line}\n" for line in _lines(idx, start)).encode("utf-8"))
        return len(idx.units), fh.tell()


def _lines(idx: Stored, start: int) -> list[str]:
    """The units.jsonl lines of the slots from `start`. A re-indexed file appends all its units
    again, most as they were: a unit equal to one the last save appended reuses its line (equal units
    have equal lines: the text is not saved), kept for the next save when the lines are few."""
    encode = _UNIT.encode  # made once: `json.dumps` with an option builds an encoder per call
    known, lines = idx.unit_lines, []
    for u in idx.units[start:]:
        line = "null" if u is None else known.get(u) if known else None  # (a unit's hash reads every field)
        if line is None:
            line = encode(u.to_json())  # type: ignore[union-attr]
        lines.append(line)
    fresh = idx.units[start:]
    idx.unit_lines = (
        {u: line for u, line in zip(fresh, lines, strict=True) if u is not None}
        if len(lines) <= MAX_KNOWN
        else {}
    )
    return lines


def _restore(directory: Path) -> None:
    """Put back the previous index when a save died between moving it aside and moving the new one in."""
    if directory.exists():
        return
    for old in sorted(directory.parent.glob(directory.name + ".old-*")):
        if (old / "meta.json").exists():
            old.rename(directory)
            return


def load_into(idx: Stored) -> bool:
    """Fill the new `idx` from its directory; False when nothing is saved there, or it was built with
    another version, embedder, walk or doc-sentence config, or another multilingual model."""
    directory, cfg, root = idx.directory, idx.cfg, idx.root
    _restore(Path(directory))
    try:
        meta = json.loads((Path(directory) / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    want = idx.embedder.name if idx.embedder is not None else None
    if (
        meta.get("version") != INDEX_VERSION
        or meta.get("embedder") != want
        or meta.get("walk") != cfg.walk.model_dump()
        or meta.get("doc_sentences") != cfg.embedding.doc_sentences
        or meta.get("root") != str(Path(root).resolve())
    ):
        return False
    if meta.get("multilingual") != (idx.multi.model.name if idx.multi is not None else None):
        return False  # the channel was switched on or off, or the model changed: build again
    zh = ZhSource(shared_cache())  # a question's Chinese words read the prebuilt dictionaries
    idx.tokenizer.zh, idx.bridge.zh = zh, zh
    bases: dict[str, segments.Base] = {}
    d = Path(directory)
    delta = segments.read_delta(d)
    idx.bm25 = Bm25Index.load(d, "bm25", delta)
    if idx.multi is not None:
        try:
            rows = quant.unpack(segments.load_rows(d, MULTI, bases, delta))
        except (OSError, ValueError):
            return False
        if not idx.multi.set_rows(rows, len(idx.bm25.alive)):
            return False
    idx.names = Bm25Index.load(d, "names", delta)
    idx.neighbours = Bm25Index.load(d, "neighbours", delta)
    idx.unit_keys = segments.load_rows(d, reuse.FILE.removesuffix(".npy"), bases, delta)
    idx.vectors = quant.unpack(segments.load_rows(d, "vectors", bases, delta))
    if idx.query_vectors is not None:
        idx.query_vectors = QueryVectors.load(d, idx.query_vectors.dim, delta)
    idx.set_sentences(
        quant.unpack(segments.load_rows(d, "sent_vectors", bases, delta)),
        segments.load_rows(d, "sent_owner", bases, delta),
    )
    idx.row_bases = bases
    lines = int(meta.get("units_lines", len(idx.bm25.alive)))
    try:
        idx.units = UnitLines(Path(directory) / "units.jsonl", lines, idx.bm25.alive)
    except (OSError, ValueError):
        return False  # missing or torn: built again
    if "units_bytes" in meta:
        idx.units_on_disk = (lines, int(meta["units_bytes"]))
    if not (Path(directory) / graphstore.FILE).exists():
        return False
    idx.graph_facts = GraphFacts(Path(directory), (int(meta["graph_records"]), int(meta["graph_bytes"])))
    idx.files = {p: FileRecord(r["sha1"], list(r["slots"])) for p, r in meta["files"].items()}
    idx.commit, idx.dirty, idx.built_at = (
        meta.get("commit"),
        list(meta.get("dirty", [])),
        meta.get("built_at", 0.0),
    )
    return True
