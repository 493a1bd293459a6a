"""An update embeds only the units that changed: the others keep their slots' vectors (reuse.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from xihe.config.code import CodeConfig
from xihe.tools.codeindex.bm25 import Bm25Index
from xihe.tools.codeindex.embed import WordLlamaEmbedder
from xihe.tools.codeindex.index import CodeIndex

JOBS = '''
def run_due_jobs(store):
    """Run every job whose time has come and reschedule it."""
    return [job.run() for job in store.due()]


def pause_job(job):
    """Stop a job from running until resumed. 暂停任务。"""
    job.paused = True


class Scheduler:
    """Keeps jobs and wakes up when the next one is due."""

    def wakeup(self):
        """Wake the main loop early."""
        return run_due_jobs(self)
'''


class Counting(WordLlamaEmbedder):
    """The real embedder, counting the texts it is asked to embed."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def embed(self, texts):  # type: ignore[no-untyped-def]
        self.texts += list(texts)
        return super().embed(texts)


def rows_by_qualname(idx: CodeIndex) -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
    out = {}
    for s, u in enumerate(idx.units):
        if u is not None:
            multi = idx.multi.vectors[s].astype(np.float32) if idx.multi is not None else None
            out[u.qualname] = (idx.vectors[s], multi)
    return out


def test_adding_a_function_embeds_that_function_only(tmp_path) -> None:
    repo = tmp_path / "repo"
    (repo / "app").mkdir(parents=True)
    (repo / "app/jobs.py").write_text(JOBS, encoding="utf-8")
    cfg = CodeConfig(index_dir=str(tmp_path / "index"))
    embedder = Counting()
    idx = CodeIndex(repo, tmp_path / "index" / "x", cfg, embedder)
    idx.build()
    idx.save()
    before = rows_by_qualname(idx)
    loaded = CodeIndex.load(repo, tmp_path / "index" / "x", cfg, embedder)
    assert loaded is not None
    added = '\n\ndef resume_job(job):\n    """Let a paused job run again."""\n    job.paused = False\n'
    (repo / "app/jobs.py").write_text(JOBS + added, encoding="utf-8")
    embedder.texts = []
    loaded.update_files(["app/jobs.py"])
    embedded = [t for t in embedder.texts if not t.isalpha()]  # query-table words are single words
    assert embedded  # the new unit's text and doc sentence, nothing of the unchanged four
    assert all("resume" in t or "paused job run" in t for t in embedded), embedded
    after = rows_by_qualname(loaded)
    for qual in ("run_due_jobs", "pause_job", "Scheduler", "Scheduler.wakeup"):
        np.testing.assert_array_equal(after[qual][0], before[qual][0])
        if before[qual][1] is not None:
            np.testing.assert_array_equal(after[qual][1], before[qual][1])
    fresh = CodeIndex(repo, tmp_path / "index" / "y", cfg, WordLlamaEmbedder())
    fresh.build()
    rebuilt = rows_by_qualname(fresh)
    for qual, (vec, multi) in rebuilt.items():  # exactly what a full build makes
        np.testing.assert_allclose(after[qual][0], vec, atol=1e-6)
        if multi is not None:
            np.testing.assert_allclose(after[qual][1], multi, atol=1e-3)
    q = "let a paused job run again"
    assert [h.unit.qualname for h in loaded.search(q, 3).hits] == [
        h.unit.qualname for h in fresh.search(q, 3).hits
    ]


def test_a_changed_doc_is_embedded_again(tmp_path) -> None:
    repo = tmp_path / "repo"
    (repo / "app").mkdir(parents=True)
    (repo / "app/jobs.py").write_text(JOBS, encoding="utf-8")
    cfg = CodeConfig(index_dir=str(tmp_path / "index"), embedding={"multilingual": False})
    embedder = Counting()
    idx = CodeIndex(repo, tmp_path / "index" / "x", cfg, embedder)
    idx.build()
    (repo / "app/jobs.py").write_text(
        JOBS.replace("Wake the main loop early", "Interrupt the sleep"), "utf-8"
    )
    embedder.texts = []
    idx.update_files(["app/jobs.py"])
    assert any("Interrupt the sleep" in t for t in embedder.texts)
    assert not any("Run every job" in t for t in embedder.texts)


def term_rows(idx: CodeIndex) -> dict[str, tuple[dict[str, float], dict[str, float], float]]:
    """Per unit: its BM25 and name rows as term -> count, and its BM25 length."""

    def row(field: Bm25Index, s: int) -> dict[str, float]:
        words = {j: w for w, j in field.vocab.items()}
        r = field._merged()[s]
        return {words[int(j)]: float(v) for j, v in zip(r.indices, r.data, strict=True)}

    return {
        u.qualname: (row(idx.bm25, s), row(idx.names, s), float(idx.bm25.doc_len[s]))
        for s, u in enumerate(idx.units)
        if u is not None
    }


def test_an_update_tokenizes_only_the_changed_units_and_keeps_the_rows_exact(tmp_path) -> None:
    repo = tmp_path / "repo"
    (repo / "app").mkdir(parents=True)
    (repo / "app/jobs.py").write_text(JOBS, encoding="utf-8")
    cfg = CodeConfig(index_dir=str(tmp_path / "index"), embedding={"multilingual": False})
    idx = CodeIndex(repo, tmp_path / "index" / "x", cfg, None)
    idx.build()
    idx.save()
    loaded = CodeIndex.load(repo, tmp_path / "index" / "x", cfg, None)
    assert loaded is not None
    seen: list[str] = []
    real = loaded.tokenizer.tokens

    def counting(text: str) -> list[str]:
        seen.append(text)
        return real(text)

    loaded.tokenizer.tokens = counting  # type: ignore[method-assign]
    edited = JOBS.replace("Wake the main loop early", "Interrupt the sleep") + (
        '\n\ndef resume_job(job):\n    """Let a paused job run again."""\n    job.paused = False\n'
    )
    (repo / "app/jobs.py").write_text(edited, encoding="utf-8")
    loaded.update_files(["app/jobs.py"])
    bm25_texts = [t for t in seen if t.startswith("app/jobs.py\n")]  # fields.bm25_text starts with the path
    assert len(bm25_texts) == 2, bm25_texts  # the edited method and the new function only
    assert any("Interrupt the sleep" in t for t in bm25_texts)
    assert any("resume_job" in t for t in bm25_texts)
    assert not any("Run every job" in t for t in bm25_texts)
    fresh = CodeIndex(repo, tmp_path / "index" / "y", cfg, None)
    fresh.build()
    assert term_rows(loaded) == term_rows(fresh)  # exactly what a full build makes
    q = "interrupt the sleep of the scheduler"
    assert [h.unit.qualname for h in loaded.search(q, 5).hits] == [
        h.unit.qualname for h in fresh.search(q, 5).hits
    ]


def test_the_unit_vectors_embed_each_distinct_text_once(make_repo, cfg) -> None:
    same = "def run(job):\n    return job\n"
    repo = make_repo({"a.py": same, "b.py": same, "jobs.py": 'def other(x):\n    """Something else."""\n'})
    counting = Counting()
    idx = CodeIndex(repo, Path(cfg.index_dir) / "x", cfg, counting)
    idx.build()
    assert len(counting.texts) == len(set(counting.texts))  # nothing embedded twice
    runs = [s for s, u in enumerate(idx.units) if u is not None and u.name == "run"]
    assert len(runs) == 2 and np.array_equal(idx.vectors[runs[0]], idx.vectors[runs[1]])
    assert len([t for t in counting.texts if t.startswith("run\n")]) == 1
