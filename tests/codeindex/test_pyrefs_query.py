"""A Python file's graph facts read from the nodes of one tree-sitter query (pyrefs.py) are exactly
those of the walk over every node they replaced (kept here as the reference): the same refs, locals,
types, returns and imports, in the same order, on real code (ten standard-library packages,
APScheduler, requests) and on samples of every construct the walk treated specially."""

from __future__ import annotations

import sysconfig
from pathlib import Path

import pytest
from tree_sitter import Node

from xihe.tools.codeindex import pyimports, pyrefs, treequery
from xihe.tools.codeindex.languages import Parsers, node_text
from xihe.tools.codeindex.refs import FileFacts, extract, module_name
from xihe.tools.codeindex.units import parse_tree, parse_units

_BINDING_PARENTS = {
    "for_statement": "left",
    "for_in_clause": "left",
    "named_expression": "name",
    "keyword_argument": "name",
}
_SPLAT = {"list_splat_pattern": ":tuple", "dictionary_splat_pattern": ":dict"}
_SKIP = frozenset({"comment", "integer", "float", "true", "false", "none", "ellipsis"})
Item = tuple[Node, str, str, str, bool]  # (node, scope, function scope or '', class or '', called)


class _Walk:
    """The walk refs.py used before the query: every node of the tree, in Python."""

    def __init__(self, path: str) -> None:
        self.facts = FileFacts("python", module_name(path))
        module = self.facts.module
        self.package = module if path.endswith("__init__.py") else module.rpartition(".")[0]

    def run(self, root: Node) -> FileFacts:
        refs = self.facts.refs
        stack: list[Item] = [(root, "", "", "", False)]
        while stack:
            node, scope, fn, cls, called = stack.pop()
            t = node.type
            if t in _SKIP:
                continue
            if t == "string":  # only an f-string's interpolations hold code
                stack.extend(
                    (c, scope, fn, cls, False) for c in node.named_children if c.type == "interpolation"
                )
                continue
            if t == "identifier":
                refs.append((scope, node.start_point[0] + 1, node_text(node), "", int(called)))
                continue
            if t == "attribute":
                attr = node.child_by_field_name("attribute")
                obj = node.child_by_field_name("object")
                if attr is not None:
                    refs.append(
                        (scope, attr.start_point[0] + 1, node_text(attr), pyrefs.receiver(obj), int(called))
                    )
                if obj is not None:
                    stack.append((obj, scope, fn, cls, False))
                continue
            if t in {"import_statement", "import_from_statement"}:
                pyimports.imports_of(node, self.facts, self.package)
                continue
            if t == "call":
                func = node.child_by_field_name("function")
                args = node.child_by_field_name("arguments")
                if args is not None:
                    stack.append((args, scope, fn, cls, False))
                if func is not None:
                    stack.append((func, scope, fn, cls, True))
                continue
            if t in {"function_definition", "class_definition"}:
                self._definition(node, scope, fn, cls, stack)
                continue
            if t == "lambda":
                body = node.child_by_field_name("body")
                if body is not None:
                    stack.append((body, scope, fn, cls, False))
                continue
            if t in {"assignment", "augmented_assignment"}:
                self._assignment(node, scope, fn, cls, stack)
                continue
            if t == "as_pattern":
                alias = node.child_by_field_name("alias")
                value = node.named_children[0] if node.named_children else None
                if alias is not None:
                    names = pyrefs.targets(alias)
                    pyrefs.bind(self.facts, fn, names, pyrefs.value_type(value) if len(names) == 1 else "")
                if value is not None:
                    stack.append((value, scope, fn, cls, False))
                continue
            if t in {"global_statement", "nonlocal_statement"}:
                continue
            if t == "except_clause":
                for c in node.named_children:
                    if c.type == "as_pattern":
                        alias = c.child_by_field_name("alias")
                        pyrefs.bind(self.facts, fn, pyrefs.targets(alias) if alias is not None else [])
                        stack.extend((x, scope, fn, cls, False) for x in c.named_children if x is not alias)
                    else:
                        stack.append((c, scope, fn, cls, False))
                continue
            binding = _BINDING_PARENTS.get(t)
            skip = node.child_by_field_name(binding) if binding else None
            if skip is not None and t != "keyword_argument":
                pyrefs.bind(self.facts, fn, pyrefs.targets(skip))
            for c in reversed(node.named_children):
                if skip is None or c.id != skip.id:
                    stack.append((c, scope, fn, cls, False))
        return self.facts

    def _definition(self, node: Node, scope: str, fn: str, cls: str, stack: list[Item]) -> None:
        name = node_text(node.child_by_field_name("name"))
        qual = f"{scope}.{name}" if scope else name
        pyrefs.bind(self.facts, fn, [n for n in [node.child_by_field_name("name")] if n is not None])
        body = node.child_by_field_name("body")
        if node.type == "class_definition":
            supers = node.child_by_field_name("superclasses")
            if supers is not None:
                stack.append((supers, scope, fn, cls, False))
            if body is not None:
                stack.append((body, qual, "", qual, False))
            return
        params = node.child_by_field_name("parameters")
        ret = node.child_by_field_name("return_type")
        if ret is not None:
            self.facts.returns[qual] = node_text(ret)
            stack.append((ret, scope, fn, cls, False))
        own_cls = cls if scope == cls and cls else ""
        if params is not None:
            for p in params.named_children:
                ident = p if p.type == "identifier" else p.child_by_field_name("name")
                if ident is None and p.named_children:
                    ident = p.named_children[0] if p.named_children[0].type == "identifier" else None
                typ = p.child_by_field_name("type")
                kind = ":" + node_text(typ) if typ is not None else _SPLAT.get(p.type, "")
                if ident is not None:
                    pyrefs.bind(self.facts, qual, [ident], kind)
                for sub in (typ, p.child_by_field_name("value")):
                    if sub is not None:
                        stack.append((sub, scope, fn, cls, False))
        if body is not None:
            stack.append((body, qual, qual, own_cls, False))

    def _assignment(self, node: Node, scope: str, fn: str, cls: str, stack: list[Item]) -> None:
        left = node.child_by_field_name("left")
        right = node.child_by_field_name("right")
        typ = node.child_by_field_name("type")
        kind = ":" + node_text(typ) if typ is not None else pyrefs.value_type(right)
        types = self.facts.types
        if left is not None:
            if left.type == "attribute":
                obj = left.child_by_field_name("object")
                if kind.startswith("=") and fn:
                    kind = types.get(fn, {}).get(kind[1:].split(".", 1)[0], "") if "." not in kind else ""
                if cls and kind and obj is not None and node_text(obj) == "self":
                    attr = node_text(left.child_by_field_name("attribute"))
                    pyrefs.add_type(types.setdefault(cls, {}), f"self.{attr}", kind)
                stack.append((left, scope, fn, cls, False))
            elif node.type == "augmented_assignment":
                stack.append((left, scope, fn, cls, False))
            elif left.type == "identifier" and cls and scope == cls and kind:
                pyrefs.add_type(types.setdefault(cls, {}), f"self.{node_text(left)}", kind)
            else:
                names = pyrefs.targets(left)
                pyrefs.bind(self.facts, fn, names, kind if len(names) == 1 else "")
                if not names:
                    stack.append((left, scope, fn, cls, False))
        for sub in (typ, right):
            if sub is not None:
                stack.append((sub, scope, fn, cls, False))


SAMPLE = '''
"""Doc."""
from __future__ import annotations
import os.path, json as j
from .models import Request as R, Response
from ..pkg import *
from . import sibling

X: int = 3
COUNT = len(os.environ) + j.loads("1")

@decorate(option=os.sep)
class Base(Parent, metaclass=Meta):
    conn: Adapter
    size = 10
    handler = Handler()

    def __init__(self, deps: Deps, *args: int, key=lambda v=default(): v.x, **kw) -> None:
        self.deps = deps
        self.items: list[R] = []
        self.a.b = make()
        self.x, other = pair()
        super().__init__(*args, **kw)

    def run(self, /, n, *, flag=True) -> Response:
        global COUNT
        for i, (a, b) in enumerate(self.items):
            if (m := match(a)) is not None:
                yield m.group(b)
        try:
            result = [f(y) for y in self.deps.read(n) if y]
        except (ValueError, KeyError) as err:
            log(err).strip()
        except OSError:
            raise
        with open(n) as fh, lock() as (p, q):
            data = fh.read()
        value = f"{data!r:>{width(n)}} {', '.join(result)}"
        value += str(n)
        items[0] = value
        counter.count += 1
        return R(value).send()

    class Inner:
        def deep(self):
            def nested():
                nonlocal x
                return Base().run(1)(2)
            return nested

def top(*args, **kwargs):
    match command.split():
        case [Point(x=px, y=0) as p, *rest]:
            handle(p, px, rest)
        case {"k": v} if v > 0:
            pass
    async with session() as s:
        await s.get(url)
    print(f"{undefined}" "plain" 1 .real, None, ..., True)
    return {k: v for k, v in kwargs.items()}, (lambda: top)()
'''
BROKEN = {
    "broken.py": "def f(:\n    return g(\nclass C:\n    def m(self) return h()\nx = [a.b(c for\n",
    "errors.py": "x = \ny = f(a,\nz = a.\ndef g(x=): pass\nfor in y: q(\nwith open(p) as: r\n",
    "missing.py": "def f():\n    for x in : g(x)\n    a = [y for y in ]\n    with f() as : pass\nwhile : x()\n",
    "partial.py": "class A(B:\n    def m(self, x: = 1):\n        self.y: = x\n        try: pass\n        except as e: e.f(\n",
}


def _both(rel: str, text: str, parsers: Parsers) -> tuple[list, list]:
    tree = parse_tree(text, "python", parsers)
    caps = treequery.captures("python", tree.root_node)
    units = parse_units(rel, text, "python", parsers, tree, caps)
    got = extract(rel, "python", tree.root_node, units, caps).to_json()
    want = _Walk(rel).run(tree.root_node).to_json()
    return got, want


def test_the_samples_give_the_walks_facts_in_its_order() -> None:
    parsers = Parsers()
    for rel, text in {"pkg/sub/mod.py": SAMPLE, "pkg/__init__.py": SAMPLE, **BROKEN}.items():
        got, want = _both(rel, text, parsers)
        assert got == want, rel
    got, _ = _both("pkg/sub/mod.py", SAMPLE, parsers)
    imports, refs, local, types = got[2], got[4], got[5], got[6]
    assert imports["R"] == "pkg.sub.models.Request" and got[3] == ["pkg.pkg"]
    assert ("Base.__init__", 19, "x", "()make", 0) not in refs and types["Base"]["self.deps"] == ":Deps"
    assert {"m", "i", "a", "b", "result", "fh", "p", "q", "data", "value"} <= set(local["Base.run"])
    assert ("Base.run", 31, "read", ".self.deps", 1) in refs and ("top", 60, "top", "", 0) in refs
    assert not [r for r in refs if r[2] in {"default", "COUNT"}]  # a lambda's defaults, `global`


def _corpora() -> list[Path]:
    lib = Path(sysconfig.get_paths()["stdlib"])
    roots = [lib / p for p in ("asyncio", "email", "http", "json", "logging", "unittest", "importlib")]
    roots += [lib / p for p in ("xml", "urllib", "concurrent", "dataclasses.py", "typing.py")]
    roots += [Path(__file__).resolve().parents[2] / "var/eval-src/pypi-APScheduler-3.10.4"]
    try:
        import requests

        roots.append(Path(requests.__file__).parent)
    except ImportError:
        pass
    return [r for r in roots if r.exists()]


@pytest.mark.parametrize("root", _corpora(), ids=lambda p: p.name)
def test_real_code_gives_the_walks_facts_in_its_order(root: Path) -> None:
    parsers = Parsers()
    files = [root] if root.is_file() else sorted(root.rglob("*.py"))
    assert files
    for path in files:
        rel = path.relative_to(root.parent).as_posix()
        got, want = _both(rel, path.read_text(encoding="utf-8", errors="replace"), parsers)
        assert got == want, rel
