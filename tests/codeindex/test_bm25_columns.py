"""A saved BM25 index answers queries from its stored columns: same scores, and no scipy import."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from xihe.tools.codeindex.bm25 import Bm25Index

DOCS = [["resume", "task", "step"], ["confirm", "pending", "action"], ["resume", "resume", "alert"]]


def _saved_and_loaded(tmp_path: Path, dirs: str) -> tuple[Bm25Index, Bm25Index]:
    """`DOCS` built and saved in `tmp_path/a` (the directories `dirs` made), and loaded from there."""
    for name in dirs:
        (tmp_path / name).mkdir()
    built = Bm25Index()
    built.add(DOCS)
    built.save(tmp_path / "a")
    return built, Bm25Index.load(tmp_path / "a")


def test_loaded_index_scores_like_the_built_one(tmp_path: Path) -> None:
    built = Bm25Index()
    built.add(DOCS)
    built.remove([2])
    built.save(tmp_path)
    loaded = Bm25Index.load(tmp_path)
    for query in (["resume"], ["confirm", "task"], {"resume": 2.0, "alert": 1.0}):
        assert np.allclose(built.scores(query), loaded.scores(query))
    loaded.add([["resume", "new", "words"]])  # appending after a load still works (through scipy)
    assert loaded.top(["new"], 3) == [(3, loaded.scores(["new"])[3])]


def test_a_query_on_a_saved_index_never_imports_scipy(tmp_path: Path) -> None:
    built = Bm25Index()
    built.add(DOCS)
    built.save(tmp_path)
    code = (
        "import sys; from pathlib import Path; from xihe.tools.codeindex.bm25 import Bm25Index; "
        f"i = Bm25Index.load(Path({str(tmp_path)!r})); assert i.top(['resume'], 2); "
        "print('scipy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_rows_come_from_the_file_as_loaded_even_when_it_is_replaced(tmp_path: Path) -> None:
    """A loaded field keeps only its columns; its rows are read from the still-open file on the first
    change, so a later save over the same directory does not change them."""
    built, loaded = _saved_and_loaded(tmp_path, "abc")
    assert loaded._matrix is None and not isinstance(loaded._raw, tuple)  # the rows not read yet
    other = Bm25Index()
    other.add([["unrelated", "words"]] * 5)
    other.save(tmp_path / "b")
    (tmp_path / "b" / "bm25.npys").replace(tmp_path / "a" / "bm25.npys")  # another process saved here
    loaded.add([["resume", "new", "words"]])
    built.add([["resume", "new", "words"]])
    loaded.save(tmp_path / "c")
    again = Bm25Index.load(tmp_path / "c")
    for query in (["resume"], ["confirm", "task"], ["new"], ["unrelated"]):
        assert np.allclose(built.scores(query), again.scores(query)), query


def test_a_save_with_no_row_changed_leaves_the_rows_unmade(tmp_path: Path) -> None:
    """A loaded field saved again with nothing changed (a serve's start-up refresh that found no
    file to re-index) links its base and makes no rows from its columns: they were ~8 MB a field
    on a DolphinScheduler-sized tree, kept for the serve's life."""
    from xihe.tools.codeindex import segments

    built, loaded = _saved_and_loaded(tmp_path, "ab")
    delta = segments.Delta()
    loaded.save(tmp_path / "b", "bm25", tmp_path / "a", delta)
    assert loaded._matrix is None and loaded._raw is not None  # the rows not made
    assert (tmp_path / "b" / "bm25.npys").stat().st_ino == (tmp_path / "a" / "bm25.npys").stat().st_ino
    delta.write(tmp_path / "b")
    again = Bm25Index.load(tmp_path / "b")
    assert np.allclose(again.scores(["resume"]), built.scores(["resume"]))
