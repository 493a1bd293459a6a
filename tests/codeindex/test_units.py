"""Parsing per language into code units (path, lines, qualified name, signature, doc, calls)."""

from __future__ import annotations

from xihe.tools.codeindex.languages import Parsers
from xihe.tools.codeindex.units import units_for_file


def by_qual(path: str, src: str) -> dict:
    return {u.qualname: u for u in units_for_file(path, src, Parsers())}


def test_python_units_have_lines_signature_docstring_and_calls() -> None:
    src = '''"""Mod doc."""
import os
X = 1


class Order:
    """An order."""

    @property
    def total(self) -> int:
        """Sum of lines."""
        return sum(l.price for l in self.lines)


def top(a, b=2):
    return helper(a)
'''
    units = by_qual("pkg/m.py", src)
    assert units["Order"].kind == "class" and (units["Order"].start, units["Order"].end) == (6, 12)
    total = units["Order.total"]
    assert total.kind == "method" and (total.start, total.end) == (9, 12)  # decorator included
    assert total.signature == "def total(self) -> int" and total.doc == "Sum of lines."
    assert "sum" in total.calls
    assert units["top"].kind == "function" and units["top"].calls == ("helper",)
    assert units["m.py"].kind == "module" and units["m.py"].doc == "Mod doc."


def test_java_methods_are_qualified_by_class_and_take_javadoc() -> None:
    src = """package a;
/** Order state machine. */
public class OrderStateMachine {
    /** Move to timeout. */
    public void onTimeout(Order o) { o.setState(State.TIMEOUT); notifyOwner(o); }
}
"""
    units = by_qual("A.java", src)
    assert units["OrderStateMachine"].doc == "Order state machine."
    m = units["OrderStateMachine.onTimeout"]
    assert (m.kind, m.start, m.end, m.doc) == ("method", 5, 5, "Move to timeout.")
    assert m.signature == "public void onTimeout(Order o)"
    assert set(m.calls) == {"setState", "notifyOwner"}


def test_go_methods_are_qualified_by_receiver_type() -> None:
    src = """package main

// Server serves.
type Server struct { addr string }

// Start starts listening.
func (s *Server) Start() error { return listen(s.addr) }

func helper() {}
"""
    units = by_qual("s.go", src)
    assert units["Server"].kind == "class" and units["Server"].doc == "Server serves."
    start = units["Server.Start"]
    assert (start.kind, start.start, start.doc, start.calls) == (
        "method",
        7,
        "Start starts listening.",
        ("listen",),
    )
    assert units["helper"].signature == "func helper()"


def test_typescript_classes_methods_and_arrow_functions() -> None:
    src = """/** Handles requests. */
export class Api {
  /** fetch users */
  async getUsers(id: number): Promise<User[]> { return this.http.get(`/u/${id}`); }
}
// makes a thing
export const makeThing = (x: string) => { return new Thing(x); };
"""
    units = by_qual("src/api.ts", src)
    assert units["Api"].doc == "Handles requests." and units["Api"].start == 2
    assert units["Api.getUsers"].kind == "method" and units["Api.getUsers"].doc == "fetch users"
    thing = units["makeThing"]
    assert (
        thing.kind == "function"
        and thing.start == 7
        and thing.signature == "const makeThing = (x: string) =>"
    )
    assert "Thing" in thing.calls


def test_tsx_and_javascript_parse() -> None:
    tsx = "export function App(): JSX.Element { return <div onClick={() => go()} />; }\n"
    assert by_qual("ui/App.tsx", tsx)["App"].kind == "function"
    js = "class A { run() { return b(); } }\nfunction c() {}\n"
    units = by_qual("x.js", js)
    assert set(units) == {"A", "A.run", "c"}


def test_files_without_grammar_become_overlapping_line_windows() -> None:
    src = "".join(f"select {i};\n" for i in range(130))
    units = units_for_file("db/q.sql", src, Parsers(), 60, 15)
    assert [(u.start, u.end) for u in units] == [(1, 60), (46, 105), (91, 130)]
    assert all(u.kind == "window" for u in units)
