"""Doc comments: a unit's documentation read from its tree, its comment markers and quotes stripped.

Python units are documented by the docstring first in their body; Java, Go and JS/TS units by the
comment block directly above the declaration (no blank line between). A file's header doc is the
docstring or comment block at its top.
"""

from __future__ import annotations

import re

from tree_sitter import Node

from xihe.tools.codeindex.languages import node_text


def clean_comment(raw: str) -> str:
    """Strip comment markers from a doc comment block."""
    lines = []
    for line in raw.splitlines():
        s = line.strip()
        s = re.sub(r"^(/\*\*?|\*/|\*|//+|#)", "", s).strip()
        s = re.sub(r"\*/$", "", s).strip()
        if s:
            lines.append(s)
    return "\n".join(lines)


def _clean_docstring(raw: str) -> str:
    s = raw.strip()
    s = re.sub(r"^[rRbBuUfF]*('''|\"\"\"|'|\")", "", s)
    s = re.sub(r"('''|\"\"\"|'|\")$", "", s)
    lines = [ln.strip() for ln in s.strip().splitlines()]
    return "\n".join(lines).strip()


def leading_comments(node: Node) -> str:
    """Doc comments directly above a declaration (Java/JS /** */, Go // blocks)."""
    anchor = node
    # the comment sits above `export ...` / annotations, not above the inner declaration
    while anchor.parent is not None and anchor.parent.type in {"export_statement", "decorated_definition"}:
        anchor = anchor.parent
    comments: list[str] = []
    prev = anchor.prev_named_sibling
    line = anchor.start_point[0]
    while prev is not None and prev.type in {"comment", "block_comment", "line_comment"}:
        if prev.end_point[0] < line - 1:  # a blank line separates it: not this declaration's doc
            break
        comments.append(node_text(prev))
        line = prev.start_point[0]
        prev = prev.prev_named_sibling
    return clean_comment("\n".join(reversed(comments)))


def python_docstring(node: Node) -> str:
    """The docstring first in a Python definition's body, or ''."""
    body = node.child_by_field_name("body")
    if body is None or not body.named_children:
        return ""
    first = body.named_children[0]
    if (
        first.type == "expression_statement"
        and first.named_children
        and first.named_children[0].type == "string"
    ):
        return _clean_docstring(node_text(first.named_children[0]))
    return ""


def module_doc(text: str, lang: str) -> str:
    """The doc at the top of a file's header `text`: a Python docstring, else a leading comment block."""
    if lang == "python":
        m = re.match(r'\s*(?:#[^\n]*\n\s*)*[rRuU]?("""|\'\'\')(.*?)\1', text, re.S)
        return m.group(2).strip() if m else ""
    m = re.match(r"\s*(/\*.*?\*/|(?://[^\n]*\n\s*)+)", text, re.S)
    return clean_comment(m.group(1)) if m else ""
