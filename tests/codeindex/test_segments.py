"""A one-file update's save links the row files' bases and writes only the rows since (segments.py):
the loaded index answers as a fresh build does, through several updates and the delta's compaction,
and a save that dies midway leaves the previous index loadable."""

from __future__ import annotations

import email
from pathlib import Path

import numpy as np
import pytest

from xihe.tools.codeindex import quant, segments, store
from xihe.tools.codeindex.index import CodeIndex
from xihe.tools.codeindex.service import index_dir, index_repo, open_index

QUERIES = [
    "parse a header value",
    "encode base64 body",
    "message payload attachment",
    "charset conversion",
    "quoted printable decode",
    "generator flatten message",
    "address list parser",
    "refund the order",
]
ROW_FILES = ["bm25.npys", "names.npys", "neighbours.npys", "vectors.npy", "sent_vectors.npy", "unit_keys.npy"]


def _corpus() -> dict[str, str]:
    """The standard library's email package: a real corpus of ~30 modules."""
    src = Path(email.__file__).parent
    return {f"email/{p.name}": p.read_text(encoding="utf-8") for p in sorted(src.glob("*.py"))}


def _answers(idx: CodeIndex) -> list[list[tuple[str, str, float]]]:
    return [
        [(h.unit.path, h.unit.qualname, round(h.score, 5)) for h in idx.search(q, 10).hits] for q in QUERIES
    ]


def _same(got: list[list[tuple[str, str, float]]], want: list[list[tuple[str, str, float]]]) -> None:
    """The same hits in the same order, scores within 0.02: an index updated in memory, never saved,
    differs from a fresh build as much (terms and slots numbered otherwise: float32 sums in another
    order; the email corpus's "charset conversion" moves one hit by 0.01), segments or not."""
    assert [[h[:2] for h in hits] for hits in got] == [[h[:2] for h in hits] for hits in want]
    for g, w in zip(got, want, strict=True):
        assert np.abs(np.subtract([h[2] for h in g], [h[2] for h in w])).max() <= 0.02, (g, w)


def _fresh(root: Path, cfg, embedder, tmp: Path) -> CodeIndex:
    idx = CodeIndex(root, tmp, cfg, embedder)
    idx.build()
    return idx


def _inodes(directory: Path) -> dict[str, int]:
    return {name: (directory / name).stat().st_ino for name in ROW_FILES}


def test_successive_updates_write_deltas_and_load_as_a_fresh_build(
    make_repo, cfg, embedder, tmp_path: Path
) -> None:
    files = _corpus()
    root = make_repo(files, use_git=False)
    idx, _ = index_repo(root, cfg, embedder=embedder)
    directory = index_dir(root, cfg)
    bases = _inodes(directory)
    assert not (directory / segments.FILE).exists()  # a build writes every file whole
    edits = [
        ("email/base64mime.py", files["email/base64mime.py"] + "\n\ndef refund(order):\n    return order\n"),
        ("email/charset.py", files["email/charset.py"].replace("def ", "def renamed_", 2)),
        ("email/quoprimime.py", None),  # deleted
        ("email/base64mime.py", files["email/base64mime.py"] + "\n\ndef refund_order(o):\n    return o\n"),
    ]
    for n, (rel, text) in enumerate(edits):
        if text is None:
            (root / rel).unlink()
        else:
            (root / rel).write_text(text, encoding="utf-8")
        idx.update_files([rel])
        idx.save()
        assert _inodes(directory) == bases, n  # the bases are linked, never rewritten
        delta = segments.read_delta(directory)  # one file holds every delta
        assert {"bm25.slots", "neighbours.slots", "vectors", "unit_keys"} <= set(delta), n
        assert sorted(p.name for p in directory.iterdir() if "delta" in p.name) == [segments.FILE], n
        loaded = open_index(root, cfg, embedder)
        assert loaded is not None
        fresh = _fresh(root, cfg, embedder, tmp_path / f"fresh-{n}")
        assert _answers(loaded) == _answers(idx), n  # exactly what the process that saved it answers
        _same(_answers(loaded), _answers(fresh))
        for name in ("bm25", "names", "neighbours"):  # every term's postings, slot for slot
            a, b = getattr(loaded, name), getattr(idx, name)
            assert a.vocab == b.vocab and np.array_equal(a.alive, b.alive), name
            assert np.array_equal(a.doc_len, b.doc_len), name
            for term in b.vocab:
                assert np.array_equal(a.postings(term), b.postings(term)), (name, term)
        for name in ("bm25", "names"):  # and as a fresh build's, dead slots aside
            a, b = getattr(loaded, name), getattr(fresh, name)
            for term in b.vocab:
                live = [(loaded.units[s].path, loaded.units[s].qualname) for s in a.postings(term)]
                want = [(fresh.units[s].path, fresh.units[s].qualname) for s in b.postings(term)]
                assert sorted(live) == sorted(want), (name, term)
        idx = loaded  # the next update starts from what was loaded: its bases, its delta
    assert any(h.unit.qualname == "refund_order" for h in idx.search("refund order", 3).hits)


def test_a_delta_past_its_share_is_folded_into_new_bases(make_repo, cfg, embedder, tmp_path: Path) -> None:
    files = _corpus()
    root = make_repo(files, use_git=False)
    idx, _ = index_repo(root, cfg, embedder=embedder)
    directory = index_dir(root, cfg)
    bases = _inodes(directory)
    big = sorted(files, key=lambda p: -len(files[p]))[:4]  # well over SHARE of the units
    for rel in big:
        (root / rel).write_text(files[rel] + "\n# changed\n\ndef folded():\n    return 1\n", encoding="utf-8")
    stats = idx.update_files(big)
    assert stats.units_added > segments.SHARE * len(idx.units)
    idx.save()
    assert all(_inodes(directory)[n] != bases[n] for n in ("bm25.npys", "vectors.npy"))
    assert not {"bm25.slots", "vectors"} & set(segments.read_delta(directory))
    # the new bases copy the old ones' rows and convert only the rows since: as a whole write would
    assert np.array_equal(np.load(directory / "vectors.npy"), quant.pack(idx.vectors))
    assert np.array_equal(np.load(directory / "sent_vectors.npy"), quant.pack(idx.sent_vectors))
    assert np.array_equal(np.load(directory / "unit_keys.npy"), idx.unit_keys)
    loaded = open_index(root, cfg, embedder)
    assert loaded is not None
    _same(_answers(loaded), _answers(_fresh(root, cfg, embedder, tmp_path / "fresh")))
    loaded.compact()  # renumbered slots: the next save writes the row files whole too
    loaded.save()
    assert list(segments.read_delta(directory)) == ["query_words"]  # no slots in it
    again = open_index(root, cfg, embedder)
    assert again is not None and _answers(again) == _answers(loaded)


@pytest.mark.parametrize("step", [segments.FILE, "meta.json", "swap"])
def test_a_save_that_dies_midway_leaves_the_previous_index(
    make_repo, cfg, embedder, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    files = _corpus()
    root = make_repo(files, use_git=False)
    idx, _ = index_repo(root, cfg, embedder=embedder)
    rel = "email/base64mime.py"
    (root / rel).write_text(files[rel] + "\n\ndef refund(order):\n    return order\n", encoding="utf-8")
    idx.update_files([rel])
    idx.save()  # a first delta on disk
    saved = open_index(root, cfg, embedder)
    assert saved is not None
    before = _answers(saved)
    (root / rel).write_text(files[rel] + "\n\ndef chargeback(order):\n    return order\n", encoding="utf-8")
    saved.update_files([rel])

    class Killed(BaseException):
        """The process dying at `step`."""

    real_save, real_savez, real_rename = np.save, np.savez, Path.rename

    def crash_at(path: object) -> None:
        if Path(str(getattr(path, "name", path))).name == step:  # a path or a file open on it
            raise Killed

    def np_save(path, *a, **k):
        crash_at(path)
        return real_save(path, *a, **k)

    def np_savez(path, *a, **k):
        crash_at(path)
        return real_savez(path, *a, **k)

    def rename(self: Path, target):
        if step == "swap" and ".tmp-" in self.name:
            raise Killed  # after the old directory moved aside, before the new one moved in
        return real_rename(self, target)

    monkeypatch.setattr(np, "save", np_save)
    monkeypatch.setattr(np, "savez", np_savez)
    monkeypatch.setattr(Path, "rename", rename)
    real_write_text = Path.write_text

    def write_text(self: Path, *a, **k):
        crash_at(self)
        return real_write_text(self, *a, **k)

    monkeypatch.setattr(Path, "write_text", write_text)
    with pytest.raises(Killed):
        store.save(saved)
    monkeypatch.undo()
    if step == "swap":  # killed with the index moved aside: the next load moves it back
        assert not index_dir(root, cfg).exists()
    reloaded = open_index(root, cfg, embedder)
    assert reloaded is not None and _answers(reloaded) == before  # the previous index, whole
    reloaded.update_files([rel])
    reloaded.save()
    final = open_index(root, cfg, embedder)
    assert final is not None
    assert any(h.unit.qualname == "chargeback" for h in final.search("chargeback", 3).hits)


def test_the_query_word_table_is_linked_and_new_words_go_to_its_delta(
    make_repo, cfg, embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = _corpus()
    root = make_repo(files, use_git=False)
    idx, _ = index_repo(root, cfg, embedder=embedder)
    table = index_dir(root, cfg) / "query_words.tsv"

    def delta() -> str | None:
        got = segments.read_delta(index_dir(root, cfg)).get("query_words")
        return None if got is None else segments.text_of(got)

    first = table.stat().st_ino
    rel = "email/charset.py"
    (root / rel).write_text(files[rel] + "\n# charset\n", encoding="utf-8")  # no new word
    idx.update_files([rel])
    idx.save()
    assert table.stat().st_ino == first and delta() is None  # linked, not rewritten
    (root / rel).write_text(files[rel] + "\n\ndef zebrafinch():\n    return 1\n", encoding="utf-8")
    idx.update_files([rel])
    idx.save()
    assert table.stat().st_ino == first  # the base still linked ...
    assert "zebrafinch()\t" in (delta() or "")  # ... the new words beside it
    assert "\nzebrafinch()\t" not in table.read_text(encoding="utf-8")
    loaded = open_index(root, cfg, embedder)
    assert loaded is not None and loaded.query_vectors is not None
    want = idx.query_vectors.ids("zebrafinch()")  # type: ignore[union-attr]
    assert want is not None and loaded.query_vectors.ids("zebrafinch()") == want
    assert loaded.query_vectors.vector("zebrafinch()") is not None
    # the loaded index adds a word: the delta keeps the loaded one too
    (root / rel).write_text(files[rel] + "\n\ndef okapibird():\n    return zebrafinch()\n", encoding="utf-8")
    loaded.update_files([rel])
    loaded.save()
    assert table.stat().st_ino == first
    again = open_index(root, cfg, embedder)
    assert again is not None and again.query_vectors is not None
    assert again.query_vectors.ids("zebrafinch()") == want
    assert again.query_vectors.ids("okapibird()") == loaded.query_vectors.ids("okapibird()") is not None
    assert len(again.query_vectors) == len(loaded.query_vectors)
    # past the delta's share of the base the table is written whole again, without a delta
    monkeypatch.setattr(segments, "SHARE", 0.0)
    (root / rel).write_text(files[rel] + "\n\ndef quokkaling():\n    return 1\n", encoding="utf-8")
    again.update_files([rel])
    again.save()
    assert table.stat().st_ino != first and delta() is None
    assert all(f"\n{w}\t" in table.read_text(encoding="utf-8") for w in ("zebrafinch()", "quokkaling()"))
    last = open_index(root, cfg, embedder)
    assert last is not None and last.query_vectors is not None
    assert len(last.query_vectors) == len(again.query_vectors)


def test_a_load_during_the_swap_puts_the_index_back_and_the_save_still_lands(
    make_repo, cfg, embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = _corpus()
    root = make_repo(files, use_git=False)
    idx, _ = index_repo(root, cfg, embedder=embedder)
    rel = "email/base64mime.py"
    (root / rel).write_text(files[rel] + "\n\ndef chargeback(order):\n    return order\n", encoding="utf-8")
    idx.update_files([rel])
    real_rename = Path.rename
    seen: list[bool] = []

    def rename(self: Path, target):
        if ".tmp-" in self.name and not seen:  # another process loads in the window
            seen.append(open_index(root, cfg, embedder) is not None)
        return real_rename(self, target)

    monkeypatch.setattr(Path, "rename", rename)
    idx.save()
    monkeypatch.undo()
    assert seen == [True]  # the loader found the previous index, moved back
    final = open_index(root, cfg, embedder)
    assert final is not None and any(
        h.unit.qualname == "chargeback" for h in final.search("chargeback", 3).hits
    )
    assert not list(index_dir(root, cfg).parent.glob("*.old-*"))


def test_an_index_of_the_previous_version_is_built_again_not_misread(make_repo, cfg, embedder) -> None:
    """Version 14 kept BM25 bases as zip archives (13: a delta file per row file): a save of the
    previous version is not loaded, and indexing it builds it again."""
    import json

    files = _corpus()
    root = make_repo(files, use_git=False)
    index_repo(root, cfg, embedder=embedder)
    directory = index_dir(root, cfg)
    meta = json.loads((directory / "meta.json").read_text(encoding="utf-8"))
    assert meta["version"] == store.INDEX_VERSION == 15
    meta["version"] = 14
    (directory / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    assert open_index(root, cfg, embedder) is None
    idx, report = index_repo(root, cfg, embedder=embedder)
    assert report.mode == "full" and len(idx.files) == len(files)
    assert json.loads((directory / "meta.json").read_text(encoding="utf-8"))["version"] == 15
