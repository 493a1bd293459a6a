"""find_callers, find_callees, call_chain and find_references: the symbol graph's answers as text.

Each place is under a `## File: path (lines a-b) kind symbol` header, the format get_code_context
uses, so the answer check (which paths and symbols a reply cites) and follow-up questions read them
the same way. A link that is not certain says so in the line: `dynamic dispatch` (an override
reached through a base class's method; which runs is decided at run time) or `by name only` (the
receiver's type is unknown; every method of that name is a candidate).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xihe.tools.codeindex.graph import DYNAMIC, NAME, RESOLVED, Chain, Def, SymbolGraph, Use

if TYPE_CHECKING:
    from xihe.tools.codeindex.index import CodeIndex

MAX_DEFS = 5
MAX_USES = 40
_HOW = {
    RESOLVED: "resolved",
    DYNAMIC: "dynamic dispatch: an override reached through its base method, decided at run time",
    NAME: "by name only: the receiver's type is unknown",
}


def header(d: Def) -> str:
    """`## File: path (lines a-b) kind qualname`."""
    return f"## File: {d.path} (lines {d.start}-{d.end}) {d.kind} {d.qualname}"


def _module_header(path: str, line: int) -> str:
    return f"## File: {path} (lines {line}-{line}) module {path.rsplit('/', 1)[-1]}"


def _targets(graph: SymbolGraph, symbol: str) -> tuple[list[Def], str]:
    defs = graph.definitions(symbol)
    if not defs:
        return [], (
            f"No definition named `{symbol}` in the indexed repository (functions, methods and classes). "
            "Try search_code, or a qualified name (`Class.method`, `path:Class.method`)."
        )
    note = ""
    if len(defs) > MAX_DEFS:
        note = f"`{symbol}` names {len(defs)} definitions; the first {MAX_DEFS} are shown, name one with its class.\n"
    elif len(defs) > 1:
        note = f"`{symbol}` names {len(defs)} definitions; each is answered.\n"
    return defs[:MAX_DEFS], note


def _uses_text(graph: SymbolGraph, target: Def, uses: list[Use], what: str) -> str:
    lines = [f"# {what} of `{target.qualname}` ({target.path}:{target.start})"]
    if not uses:
        lines.append(
            "None found in the indexed repository (it may be called from outside it, by reflection, or not at all)."
        )
        return "\n".join(lines)
    sure = [u for u in uses if u.certainty == RESOLVED]
    unsure = [u for u in uses if u.certainty != RESOLVED]
    if unsure:
        lines.append(
            f"{len(sure)} resolved; {len(unsure)} uncertain (dynamic dispatch or matched by name only), "
            "marked below: say they are possible, not certain."
        )
    by_scope: dict[tuple[str, str], list[Use]] = {}
    for u in uses[:MAX_USES]:
        by_scope.setdefault((u.path, u.scope), []).append(u)
    for (path, scope), group in by_scope.items():
        d = graph.scope_def(path, scope)
        lines.append(header(d) if d is not None else _module_header(path, group[0].line))
        for u in group:
            verb = "calls it" if u.called else "refers to it"
            conf = f", confidence {u.confidence:.2f}" if u.certainty == NAME else ""
            lines.append(f"- line {u.line}: {verb} ({_HOW[u.certainty]}{conf})")
    if len(uses) > MAX_USES:
        lines.append(f"... and {len(uses) - MAX_USES} more.")
    return "\n".join(lines)


def find_callers(index: CodeIndex, symbol: str) -> str:
    """Who calls `symbol` (a class: who instantiates it), grouped by the calling definition."""
    graph = index.symbol_graph()
    defs, note = _targets(graph, symbol)
    if not defs:
        return note
    return note + "\n\n".join(_uses_text(graph, d, graph.callers(d), "Callers") for d in defs)


def find_references(index: CodeIndex, symbol: str) -> str:
    """Every use of `symbol` (calls, and the name passed or read without a call), imports left out."""
    graph = index.symbol_graph()
    defs, note = _targets(graph, symbol)
    if not defs:
        return note
    return note + "\n\n".join(_uses_text(graph, d, graph.uses(d), "References") for d in defs)


def find_callees(index: CodeIndex, symbol: str) -> str:
    """What `symbol` calls: the definitions in the repository, then the names it calls outside it."""
    graph = index.symbol_graph()
    defs, note = _targets(graph, symbol)
    if not defs:
        return note
    blocks = []
    for d in defs:
        lines = [f"# Callees of `{d.qualname}` ({d.path}:{d.start})"]
        callees = graph.callees(d)
        if any(h.certainty != RESOLVED for _, h, _ in callees):
            lines.append("Uncertain links are marked: say they are possible, not certain.")
        for callee, hop, conf in callees[:MAX_USES]:
            lines.append(header(callee))
            extra = f", confidence {conf:.2f}" if hop.certainty == NAME else ""
            lines.append(f"- called at {d.path}:{hop.line} ({_HOW[hop.certainty]}{extra})")
        if not callees:
            lines.append("It calls no definition of the indexed repository.")
        outside = graph.unresolved_calls(d)
        if outside:
            lines.append(
                "Also calls, not resolved to a definition here (libraries, builtins, values of unknown type): "
                + ", ".join(f"`{n}`" for n in outside[:30])
            )
        blocks.append("\n".join(lines))
    return note + "\n\n".join(blocks)


def chain_text(chains: list[Chain], start: str, goal: str) -> str:
    """Chains as text: each definition under its header, each hop's line and certainty."""
    if not chains:
        return (
            f"No call chain from `{start}` to `{goal}` within the indexed repository (searched up to "
            "8 calls deep, following resolved calls, dynamic dispatch and calls matched by name)."
        )
    out = []
    for n, c in enumerate(chains, 1):
        unsure = sum(not h.certain for h in c.hops)
        tail = (
            f"; {unsure} uncertain hop(s), marked: say the chain is possible, not certain" if unsure else ""
        )
        lines = [f"# Chain {n}: {len(c.hops)} call(s){tail}"]
        for i, d in enumerate(c.nodes):
            lines.append(header(d))
            if i < len(c.hops):
                hop = c.hops[i]
                lines.append(
                    f"- calls `{c.nodes[i + 1].qualname}` at line {hop.line} ({_HOW[hop.certainty]})"
                )
        out.append("\n".join(lines))
    return "\n\n".join(out)


def call_chain(index: CodeIndex, start: str, goal: str, max_hops: int = 8) -> str:
    """How `start` reaches `goal`: the shortest call chains (resolved calls preferred), best first."""
    graph = index.symbol_graph()
    for symbol in (start, goal):
        if not graph.definitions(symbol):
            return _targets(graph, symbol)[1]
    return chain_text(graph.call_chain(start, goal, max_hops), start, goal)
