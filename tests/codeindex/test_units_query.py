"""The units and their identifiers and calls, found by one tree-sitter query (treequery.py), are
exactly those of a Python walk over every node (the walk they replaced, kept here as the reference),
in the same order: nested units, anonymous and arrow functions, Go receivers, a broken file."""

from __future__ import annotations

from tree_sitter import Node

from xihe.tools.codeindex import units as units_module
from xihe.tools.codeindex.languages import LANGS, LangSpec, Parsers, node_text, unit_kind
from xihe.tools.codeindex.units import MAX_CALLS, MAX_IDENTIFIERS, parse_tree, parse_units

SAMPLES = {
    "a.py": '''
import os

class Outer(Base):
    """Doc."""
    def method(self, x):
        def inner(y):
            return helper(y) + os.path.join(x, y)
        return inner(x).strip()

    class Nested:
        def deep(self):
            return Outer().method(1)(2)

def top(*args):
    return [f(a) for a in args if g(a)]
''',
    "A.java": """
package p;
import java.util.List;
/** Jobs. */
public class Jobs extends Base {
    private final List<String> names = new ArrayList<>();
    /** Runs. */
    public void run(Job j) { j.start(); helper(new Thing(j.name())).go(); }
    class Inner { void x() { Jobs.this.run(null); } }
    interface Cb { void call(); }
}
""",
    "a.go": """
package main
import "fmt"
type Server struct { name string }
type Handler interface { Serve() }
// Start starts.
func (s *Server) Start(port int) error { return fmt.Errorf("x %d", s.port(port)) }
func main() { s := &Server{}; s.Start(1); func() { fmt.Println(1) }() }
""",
    "a.ts": """
export class Store<T> implements Base {
  private items: T[] = [];
  add(item: T): void { this.items.push(item); notify(this).then((x) => log(x)); }
}
export const handler = async (req: Req) => { return new Response(await body(req)); };
const obj = { method() { return inner()(); }, arrow: () => call() };
function outer() { function inner2() { return a.b.c(d(e)); } return inner2; }
interface Shape { area(): number; }
""",
    "a.js": """
const Foo = class { bar() { return baz(); } };
let f = function named() { return g(h(i)); }, k = () => new Thing;
module.exports = function exported() { return require('x')(y); };
class A extends B { constructor() { super(); this.x = y.z(w); } static s() {} }
(function () { iife(); })();
""",
    "a.tsx": """
export function App({ name }: Props) { const [s, setS] = useState(0); return <div onClick={() => setS(s + 1)}>{name}</div>; }
export const Row = () => <span>{fmt(x)}</span>;
""",
    "broken.js": "function ok() { return a(; }\nclass { m() { x( } \nconst z = () => y(",
    "broken.py": "def f(:\n    return g(\nclass C:\n    def m(self) return h()\n",
}


def _walk_units(path: str, source: str, lang: str, parsers: Parsers) -> list[tuple[str, str, tuple, tuple]]:
    """(kind, qualname, identifiers, calls) per unit, by the walk that units.py used before the query."""
    spec = LANGS[lang]
    tree = parse_tree(source, lang, parsers)
    found: list[tuple[Node, str, str]] = []
    stack: list[tuple[Node, str, str | None]] = [(tree.root_node, "", None)]
    while stack:
        node, prefix, parent_kind = stack.pop()
        kind = unit_kind(node, spec)
        child_prefix, child_parent = prefix, parent_kind
        if kind is not None:
            name = units_module._name_of(node, spec)
            if name:
                if lang == "go" and node.type == "method_declaration":
                    recv = units_module._go_receiver(node)
                    qual, ukind = (f"{recv}.{name}" if recv else name), "method"
                else:
                    qual = f"{prefix}.{name}" if prefix else name
                    ukind = "method" if kind == "function" and parent_kind == "class" else kind
                found.append((node, ukind, qual))
                child_prefix, child_parent = qual, kind
        for child in reversed(node.named_children):
            stack.append((child, child_prefix, child_parent))
    skip = {n.id for n, _, _ in found}
    return [(kind, qual, *_collect(node, spec, skip)) for node, kind, qual in found]


def _collect(node: Node, spec: LangSpec, skip: set[int]) -> tuple[tuple, tuple]:
    ids: dict[str, None] = {}
    calls: dict[str, None] = {}
    stack = [node]
    while stack:
        n = stack.pop()
        if n.id in skip and n is not node:
            continue
        if n.type in spec.identifiers and len(ids) < MAX_IDENTIFIERS:
            ids.setdefault(node_text(n), None)
        elif n.type in spec.calls and len(calls) < MAX_CALLS:
            c = units_module._callee(n)
            if c:
                calls.setdefault(c, None)
        stack.extend(n.named_children)
    return tuple(ids), tuple(calls)


def test_the_query_finds_the_units_identifiers_and_calls_of_the_walk_in_its_order() -> None:
    parsers = Parsers()
    for path, source in SAMPLES.items():
        lang = {"py": "python", "java": "java", "go": "go", "ts": "typescript", "js": "javascript"}.get(
            path.rsplit(".", 1)[-1], "tsx"
        )
        got = [
            (u.kind, u.qualname, u.identifiers, u.calls)
            for u in parse_units(path, source, lang, parsers)
            if u.kind != "module"
        ]
        want = _walk_units(path, source, lang, parsers)
        assert got == want, path
        assert path.startswith("broken") or (len(want) >= 2 and any(w[3] for w in want)), path


def test_a_unit_keeps_the_first_identifiers_and_calls_the_walk_meets_up_to_the_caps() -> None:
    body = "\n".join(f"    v{i} = call{i}(a{i})" for i in range(150))
    source = f"def big():\n{body}\n"
    (unit,) = [u for u in parse_units("b.py", source, "python", Parsers()) if u.kind == "function"]
    want = _walk_units("b.py", source, "python", Parsers())[0]
    assert (unit.identifiers, unit.calls) == want[2:]
    assert len(unit.identifiers) == MAX_IDENTIFIERS and len(unit.calls) == MAX_CALLS
