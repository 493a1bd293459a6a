"""A repository map for "how does … work" questions: the most used definitions of the files found.

Units answer "where is it"; a question about how something works also needs the parts those units
lean on. After the units get_code_context shows, it lists, per file among them, the definitions the
rest of the repository uses most (resolved uses in the symbol graph), as aider's repository map
does, so the model can ask find_callees or call_chain about the right names.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from xihe.tools.codeindex.graph import RESOLVED

if TYPE_CHECKING:
    from xihe.tools.codeindex.index import CodeIndex

PER_FILE = 6
FILES = 4
_HOW = re.compile(
    r"\bhow\b.*\bworks?\b|\bhow\s+(does|do|is|are)\b.*\b(flow|happen|handled|reach|get)|怎么|如何|怎样|流程|流转",
    re.I,
)


def wants_map(question: str) -> bool:
    """Whether a question asks how something works (English or Chinese)."""
    return _HOW.search(question) is not None


def repository_map(index: CodeIndex, paths: list[str]) -> str:
    """`## Repository map` lines for `paths` (first `FILES` distinct), or '' when nothing is used."""
    graph = index.symbol_graph()
    lines: list[str] = []
    for path in list(dict.fromkeys(paths))[:FILES]:
        counted = []
        for d in graph.defs.values():
            if d.path != path:
                continue
            n = sum(1 for u in graph.uses(d) if u.certainty == RESOLVED and u.scope != d.qualname)
            if n:
                counted.append((n, d.start, d.qualname))
        counted.sort(key=lambda c: (-c[0], c[1]))
        if counted:
            shown = ", ".join(f"`{q}` ({n} uses)" for n, _, q in counted[:PER_FILE])
            lines.append(f"- {path}: {shown}")
    if not lines:
        return ""
    head = (
        "## Repository map (the most used definitions of these files; find_callees and call_chain "
        "follow them)"
    )
    return "\n".join([head, *lines])
