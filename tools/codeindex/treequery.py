"""One tree-sitter query per parsed file for every node the index reads: the nodes that may be units,
the identifiers and calls of units (units.py) and the symbol graph's call and import facts (refs.py).

A query walks the whole tree in C (~5-7 ms for a 10,000-line file, whatever it captures); one query
with a capture name per reader costs one walk instead of three. Each capture's nodes come in file
order; their readers sort them into the order they need.
"""

from __future__ import annotations

from tree_sitter import Language, Node, Query, QueryCursor

from xihe.tools.codeindex import jsimports, pyrefs
from xihe.tools.codeindex.languages import LANGS

Captures = dict[str, list[Node]]  # capture name -> nodes: "unit", "name", "call", "fact", "called"

_QUERIES: dict[tuple[str, bool], Query] = {}


def fact_types(lang: str) -> set[str]:
    """The node types refs.py reads beside identifiers: for Python `pyrefs.FACT_TYPES`, else calls,
    and Java's or JavaScript's imports."""
    if lang == "python":
        return set(pyrefs.FACT_TYPES)
    types = set(LANGS[lang].calls)
    types |= {"import_declaration"} if lang == "java" else set()
    types |= {"import_statement", "variable_declarator"} if lang in jsimports.JS_LANGS else set()
    return types


def captures(lang: str, root: Node, facts: bool = True) -> Captures:
    """The nodes under `root` by capture: "unit" (a type `languages.unit_kind` may accept), "name"
    (identifiers), "call" (calls), and with `facts` "fact" (`fact_types`; for Python one capture per
    type, "fact.<type>", so their reader asks no node its type) and for Python "called" (the identifier
    or attribute a call calls)."""
    key = (lang, facts)
    query = _QUERIES.get(key)
    if query is None:
        spec = LANGS[lang]
        language = Language(spec.load())
        groups = {
            "unit": spec.classes | spec.functions | {"variable_declarator"},
            "name": spec.identifiers,
            "call": spec.calls,
            "fact": fact_types(lang) if key[1] else set(),
        }
        types = sorted(set().union(*groups.values()))
        known = [t for t in types if language.id_for_node_kind(t, True) is not None]
        patterns = [
            f"({t}) " + " ".join(_capture(g, t, lang) for g, members in groups.items() if t in members)
            for t in known
        ]
        if facts and lang == "python":
            patterns += pyrefs.PATTERNS
        query = _QUERIES[key] = Query(language, "\n".join(patterns))
    return QueryCursor(query).captures(root)


def _capture(group: str, node_type: str, lang: str) -> str:
    """The capture of `group` for a node of `node_type`: a Python fact's names its type."""
    return f"@fact.{node_type}" if group == "fact" and lang == "python" else f"@{group}"
