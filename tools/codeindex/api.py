"""The functions the agent's tools call: search_code, get_code_context, and the citation check."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from xihe.tools.codeindex import repomap
from xihe.tools.codeindex.index import CodeIndex, normalise_path
from xihe.tools.codeindex.languages import EXTENSIONS
from xihe.tools.codeindex.search import Scored
from xihe.tools.codeindex.walk import TEXT_EXTENSIONS, TEXT_NAMES, read_source

NOTHING_FOUND = "No matching implementation in the repository"
MAX_UNIT_LINES = 80


@dataclass(frozen=True)
class Hit:
    """One search hit as the CLI and tools print it (path relative to the repo, 1-based inclusive lines)."""

    path: str
    start: int
    end: int
    symbol: str
    score: float

    def to_json(self) -> dict[str, object]:
        """The public JSON shape: {"path", "start", "end", "symbol", "score"}."""
        return asdict(self)


def _hit(s: Scored) -> Hit:
    return Hit(s.unit.path, s.unit.start, s.unit.end, s.unit.qualname, round(s.score, 6))


def search_code(index: CodeIndex, query: str, k: int = 10) -> list[Hit]:
    """Symbols or keywords -> the best `k` units, best first (empty when nothing is relevant)."""
    result = index.search(query, k)
    if not result.relevant:
        return []
    return [_hit(s) for s in result.hits]


def get_code_context(index: CodeIndex, question: str, n: int = 4) -> str:
    """A question -> the best `n` (3-5) units as text, each under `## File: path` with its lines."""
    n = max(1, min(n, 10))
    result = index.search(question, n)
    if not result.relevant or not result.hits:
        return f"{NOTHING_FOUND} for: {question!r}. Say so rather than guessing."
    blocks = []
    cache: dict[str, list[str]] = {}
    for s in result.hits[:n]:
        u = s.unit
        if u.path not in cache:
            text = read_source(index.root / u.path, index.cfg.walk.max_file_bytes)
            cache[u.path] = text.splitlines() if text is not None else []
        lines = cache[u.path][u.start - 1 : u.end]
        shown_end = u.end
        if len(lines) > MAX_UNIT_LINES:
            lines = lines[:MAX_UNIT_LINES]
            shown_end = u.start + MAX_UNIT_LINES - 1
        header = f"## File: {u.path} (lines {u.start}-{u.end}) {u.kind} {u.qualname}"
        body = "\n".join(lines)
        more = f"\n... ({u.end - shown_end} more lines)" if shown_end < u.end else ""
        calls = f"\ncalls: {', '.join(u.calls[:15])}" if u.calls else ""
        blocks.append(f"{header}{calls}\n```{u.lang}\n{body}{more}\n```")
    if repomap.wants_map(question):  # "how does … work": what the files found lean on
        found = repomap.repository_map(index, [s.unit.path for s in result.hits[:n]])
        if found:
            blocks.append(found)
    return "\n\n".join(blocks)


# a path: segments of word characters, dots, dashes, ending in an extension; optional :line or #Lline
_PATH = re.compile(
    r"(?<![\w/.-])((?:[\w.-]+/)*[\w-][\w.-]*\.[A-Za-z][A-Za-z0-9]{0,9})(?::\d+(?:-\d+)?|#L\d+)?(?![\w/])"
)
_CODE = re.compile(r"`([^`\n]+)`")
_SYMBOL = re.compile(r"^[A-Za-z_][\w]*(?:(?:\.|::|#)[A-Za-z_]\w*)*(?:\(\))?$")
_NOT_FILES = frozenset({"e.g", "i.e", "etc"})
# `Class.method` looks like `name.ext`: only known file extensions make a bare name a path
_FILE_EXTENSIONS = (
    frozenset(EXTENSIONS) | TEXT_EXTENSIONS | {".json", ".lock", ".env", ".csv", ".ipynb", ".j2"}
)


def _is_path(p: str) -> bool:
    name = p.rsplit("/", 1)[-1]
    if name in TEXT_NAMES:
        return True
    dot = name.rfind(".")
    return dot > 0 and name[dot:].lower() in _FILE_EXTENSIONS


def _symbol(code: str) -> str | None:
    code = code.strip()
    if not _SYMBOL.match(code):
        return None
    return re.sub(r"\(\)$", "", code).replace("::", ".").replace("#", ".")


def extract_citations(text: str) -> list[tuple[str, str | None]]:
    """(path, symbol) pairs cited in an answer; path "" means a symbol cited without a file.

    A backticked symbol on the same line as a path is paired with the nearest path before it
    (or the only path on the line); other backticked symbols are checked repository-wide.
    """
    out: dict[tuple[str, str | None], None] = {}
    for line in text.splitlines():
        paths = [
            (m.start(), m.group(1)) for m in _PATH.finditer(line) if m.group(1).lower() not in _NOT_FILES
        ]
        paths = [(pos, p) for pos, p in paths if _is_path(p)]
        code_spans = [(m.start(), m.group(1)) for m in _CODE.finditer(line)]
        path_values = {p for _, p in paths}
        symbols: list[tuple[int, str]] = []
        for pos, code in code_spans:
            if code.strip() in path_values or _is_path(code.strip()):
                continue
            sym = _symbol(code)
            if sym and not _looks_like_path(sym, path_values):
                symbols.append((pos, sym))
        for _, p in paths:
            out.setdefault((p, None), None)
        for pos, sym in symbols:
            before = [p for ppos, p in paths if ppos < pos]
            path = before[-1] if before else (paths[0][1] if paths else "")
            out.setdefault((path, sym), None)
    # a path cited with a symbol need not be listed again alone
    with_symbol = {p for p, s in out if s is not None}
    return [(p, s) for p, s in out if s is not None or p not in with_symbol]


def _looks_like_path(sym: str, paths: set[str]) -> bool:
    return any(p.endswith(sym) for p in paths)


def exists(index: CodeIndex, path: str, symbol: str | None = None) -> bool:
    """Whether a cited path (and symbol in it) is real; path "" checks the symbol anywhere."""
    if path:
        rel = normalise_path(path)
        if not index.has_path(rel):
            return False
        if symbol is None:
            return True
        if rel in index.files:
            return index.has_symbol(symbol, rel) or _symbol_in_file(index, rel, symbol)
        return _symbol_in_file(index, rel, symbol)
    return symbol is not None and index.has_symbol(symbol)


def _symbol_in_file(index: CodeIndex, rel: str, symbol: str) -> bool:
    """Fallback for symbols that are not units (constants, fields): the last name appears in the file."""
    text = read_source(index.root / rel, index.cfg.walk.max_file_bytes)
    last = symbol.rsplit(".", 1)[-1]
    return text is not None and re.search(rf"\b{re.escape(last)}\b", text) is not None


def missing_citations(index: CodeIndex, text: str) -> list[str]:
    """Citations in `text` that do not exist, as readable strings ('path', 'path: symbol', 'symbol')."""
    missing = []
    for path, symbol in extract_citations(text):
        if not exists(index, path, symbol):
            missing.append(f"{path}: {symbol}" if path and symbol else (path or str(symbol)))
    return missing
