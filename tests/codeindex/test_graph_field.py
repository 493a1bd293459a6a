"""The graph field: a unit's callee names and its callers' names, kept current by incremental updates."""

from __future__ import annotations

import numpy as np

from xihe.tools.codeindex.bm25 import Bm25Index
from xihe.tools.codeindex.index import CodeIndex
from xihe.tools.codeindex.service import index_repo, open_index

SCHEDULER = '''
def process_due_jobs():
    """Run what is due."""
    return wakeup_thread()


def wakeup_thread():
    return 1
'''


def field_score(idx: CodeIndex, qualname: str, word: str) -> float:
    """The graph field's BM25 score of the unit `qualname` for `word`."""
    scores = idx.neighbours.scores([word])
    slot = next(i for i, u in enumerate(idx.units) if u is not None and u.qualname == qualname)
    return float(scores[slot])


def test_callee_is_found_by_its_callers_name_and_caller_by_its_callees(make_repo, cfg, embedder) -> None:
    repo = make_repo({"app/sched.py": SCHEDULER})
    idx, _ = index_repo(repo, cfg, embedder=embedder)
    assert field_score(idx, "wakeup_thread", "process_due_jobs") > 0  # its caller's name
    assert field_score(idx, "process_due_jobs", "wakeup_thread") > 0  # the name it calls
    assert field_score(idx, "wakeup_thread", "wakeup_thread") == 0  # not its own name


def test_a_new_caller_in_another_file_reaches_the_callee_after_an_update(make_repo, cfg, embedder) -> None:
    repo = make_repo({"app/sched.py": SCHEDULER, "app/other.py": "def unrelated():\n    return 2\n"})
    index_repo(repo, cfg, embedder=embedder)
    (repo / "app/other.py").write_text("def drain_mailbox():\n    return wakeup_thread()\n", encoding="utf-8")
    idx, rep = index_repo(repo, cfg, embedder=embedder)
    assert rep.files_changed == ["app/other.py"]  # sched.py was not re-parsed ...
    assert field_score(idx, "wakeup_thread", "drain_mailbox") > 0  # ... yet its unit has the new caller
    loaded = open_index(repo, cfg, embedder)
    assert loaded is not None and field_score(loaded, "wakeup_thread", "drain_mailbox") > 0
    (repo / "app/other.py").unlink()
    idx, _ = index_repo(repo, cfg, embedder=embedder)
    assert field_score(idx, "wakeup_thread", "drain_mailbox") == 0  # the caller is gone
    assert field_score(idx, "wakeup_thread", "process_due_jobs") > 0


def test_set_rows_scores_as_if_built_with_those_rows() -> None:
    docs = [["a", "b"], ["b", "c", "c"], ["d"]]
    edited = Bm25Index()
    edited.add(docs)
    edited.set_rows([1], [["e", "a", "a", "a"]])
    fresh = Bm25Index()
    fresh.add([docs[0], ["e", "a", "a", "a"], docs[2]])
    for q in (["a"], ["c"], ["e"], ["b", "d"]):
        assert np.allclose(edited.scores(q), fresh.scores(q)), q
    assert edited.scores(["c"]).max() == 0  # the replaced row's old terms are gone
    edited.set_rows([2, 0], [["x", "x"], ["c"]])  # several rows, in any order
    fresh = Bm25Index()
    fresh.add([["c"], ["e", "a", "a", "a"], ["x", "x"]])
    for q in (["a"], ["c"], ["x"], ["d"]):
        assert np.allclose(edited.scores(q), fresh.scores(q)), q


CALLERS = "def caller_one():\n    return target()\n\n\ndef other():\n    return helper()\n"
CALLEES = "def target():\n    return 1\n\n\ndef helper():\n    return 2\n\n\ndef spare():\n    return 3\n"


def neighbour_rows(idx: CodeIndex) -> dict[str, dict[str, float]]:
    """Per unit: its graph-field row as term -> count."""
    words = {j: w for w, j in idx.neighbours.vocab.items()}
    m = idx.neighbours._merged()
    out = {}
    for s, u in enumerate(idx.units):
        if u is not None:
            r = m[s]
            out[u.qualname] = {words[int(j)]: float(v) for j, v in zip(r.indices, r.data, strict=True)}
    return out


def built_with_row_spy(tmp_path, repo) -> tuple[CodeIndex, list[str]]:  # type: ignore[no-untyped-def]
    """A BM25-only index of `repo`, built, and the qualified names whose graph-field rows it rewrites."""
    from xihe.config.code import CodeConfig

    cfg = CodeConfig(index_dir=str(tmp_path / "index"), embedding={"multilingual": False})
    idx = CodeIndex(repo, tmp_path / "index" / "x", cfg, None)
    idx.build()
    rewritten: list[str] = []
    real = idx.neighbours.set_rows

    def spy(slots, docs):  # type: ignore[no-untyped-def]
        rewritten.extend(idx.units[s].qualname for s in slots)  # type: ignore[union-attr]
        real(slots, docs)

    idx.neighbours.set_rows = spy  # type: ignore[method-assign]
    return idx, rewritten


def test_an_update_rewrites_only_the_rows_of_callees_whose_callers_changed(tmp_path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.py").write_text(CALLERS, encoding="utf-8")
    (repo / "b.py").write_text(CALLEES, encoding="utf-8")
    idx, rewritten = built_with_row_spy(tmp_path, repo)
    tokenized: list[str] = []
    real_tokens = idx.tokenizer.tokens

    def counting(text: str) -> list[str]:
        tokenized.append(text)
        return real_tokens(text)

    idx.tokenizer.tokens = counting  # type: ignore[method-assign]

    def fresh() -> dict[str, dict[str, float]]:
        other = CodeIndex(repo, tmp_path / "index" / "y", idx.cfg, None)
        other.build()
        return neighbour_rows(other)

    (repo / "a.py").write_text("# a comment\n" + CALLERS, encoding="utf-8")  # same calls, new slots
    idx.update_files(["a.py"])
    assert rewritten == []  # target's and helper's callers are what they were
    assert tokenized == []  # a.py's units keep their BM25, name and graph-field rows
    assert neighbour_rows(idx) == fresh()
    (repo / "a.py").write_text(CALLERS.replace("target()", "spare()"), encoding="utf-8")
    idx.update_files(["a.py"])
    assert sorted(rewritten) == ["spare", "target"]  # helper keeps its caller
    assert "caller_one" in neighbour_rows(idx)["spare"] and neighbour_rows(idx)["target"] == {}
    assert neighbour_rows(idx) == fresh()
    (repo / "a.py").unlink()
    rewritten.clear()
    idx.update_files(["a.py"])
    assert sorted(rewritten) == ["helper", "spare"]
    assert neighbour_rows(idx) == fresh()


def test_the_caller_map_names_the_callers_a_scan_of_every_unit_does(tmp_path) -> None:
    from xihe.tools.codeindex.callermap import CallerMap
    from xihe.tools.codeindex.fields import MAX_CALLERS
    from xihe.tools.codeindex.units import CodeUnit

    def unit(q: str, calls: tuple[str, ...], kind: str = "function") -> CodeUnit:
        return CodeUnit("p.py", 1, 2, kind, q.rsplit(".", 1)[-1], q, "python", calls=calls)

    units: list[CodeUnit | None] = [unit(f"f{i}", ("get", "put") if i % 2 else ("get",)) for i in range(40)]
    units += [unit("M", ("put",), "module"), unit("C.m", ("put", "get")), unit("f3", ("put",))]
    units[5] = units[7] = None  # dropped slots
    new = [unit("g", ("put", "rare")), unit("h", ("rare",))]
    cmap = CallerMap.of(units)
    wanted = {"get", "put", "rare", "none"}
    live = [u for u in units if u is not None]
    assert cmap.callers(units, new, wanted) == callers_by_name([*live, *new], wanted)
    assert len(cmap.callers(units, new, wanted)["get"]) == MAX_CALLERS
    assert cmap.slots_named(units, {"f3", "m"}) == [3, 41, 42]
    assert cmap.crowded(units, "get", 0) and cmap.crowded(units, "put", 4)  # 20 live callers
    assert not cmap.crowded(units, "put", 3) and not cmap.crowded(units, "rare", 2)


def current_rows(idx: CodeIndex) -> dict[int, dict[str, float]]:
    """Per live slot: the graph-field row a scan of every live unit gives it now (`callers_by_name`)."""
    from collections import Counter

    from xihe.tools.codeindex.fields import neighbour_text

    live = [(s, u) for s, u in enumerate(idx.units) if u is not None]
    callers = callers_by_name([u for _, u in live], {u.name for _, u in live})
    return {
        s: {
            k: float(v)
            for k, v in Counter(idx.tokenizer.tokens(neighbour_text(u, callers.get(u.name, ())))).items()
        }
        for s, u in live
    }


def test_a_name_with_more_callers_than_kept_is_rewritten_when_the_kept_ones_change_only(tmp_path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "c.py").write_text("def target():\n    return 1\n", encoding="utf-8")
    for i in range(30):  # more callers than fields.MAX_CALLERS (24) keeps, in slot order
        (repo / f"m{i:02d}.py").write_text(f"def caller_{i}():\n    return target()\n", encoding="utf-8")
    idx, rewritten = built_with_row_spy(tmp_path, repo)
    rows = neighbour_rows(idx)
    assert "caller_0" in rows["target"] and "caller_24" not in rows["target"]
    (repo / "m00.py").write_text("# moved\ndef caller_0():\n    return target()\n", encoding="utf-8")
    idx.update_files(["m00.py"])  # caller_0 now has the last slot: caller_24 is kept instead
    assert rewritten == ["target"]
    assert "caller_0" not in neighbour_rows(idx)["target"] and "caller_24" in neighbour_rows(idx)["target"]
    assert _rows_by_slot(idx) == current_rows(idx)
    rewritten.clear()
    (repo / "m29.py").write_text("# moved\ndef caller_29():\n    return target()\n", encoding="utf-8")
    idx.update_files(["m29.py"])  # not kept before, not kept after
    assert rewritten == []
    assert _rows_by_slot(idx) == current_rows(idx)


def _rows_by_slot(idx: CodeIndex) -> dict[int, dict[str, float]]:
    words = {j: w for w, j in idx.neighbours.vocab.items()}
    m = idx.neighbours._merged()
    out = {}
    for s, u in enumerate(idx.units):
        if u is not None:
            r = m[s]
            out[s] = {words[int(j)]: float(v) for j, v in zip(r.indices, r.data, strict=True)}
    return out


def callers_by_name(units, wanted):  # type: ignore[no-untyped-def]
    """The reference the caller map is checked against: name (of those `wanted`) -> the qualified
    names of the function, method and class units whose calls name it, by a scan of every unit."""
    from xihe.tools.codeindex.fields import MAX_CALLERS

    out: dict[str, dict[str, None]] = {}
    for u in units:
        if u.kind in {"function", "method", "class"}:
            for c in u.calls:
                if c not in wanted:
                    continue
                names = out.setdefault(c, {})
                if len(names) < MAX_CALLERS:
                    names[u.qualname] = None
    return {k: list(v) for k, v in out.items()}
