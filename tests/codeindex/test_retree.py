"""Re-parsing from a file's last tree (retree.py): the span handed to tree-sitter brackets the change
exactly, the tree is the one a fresh parse makes, and an index updated edit after edit holds what a
fresh build of the final files holds."""

from __future__ import annotations

from pathlib import Path

import pytest
from tree_sitter import Node

from xihe.config.code import CodeConfig
from xihe.tools.codeindex.index import CodeIndex
from xihe.tools.codeindex.languages import Parsers
from xihe.tools.codeindex.retree import RecentTrees, changed_span

SOURCE = '''"""Orders."""
import json


class Order:
    """An order."""

    def __init__(self, oid):
        self.oid = oid

    def total(self, items):
        return sum(i.price for i in items)


def load(path):
    with open(path) as fh:
        return [Order(o["id"]) for o in json.load(fh)]
'''

# each edit: (old text, new text), applied to the file in turn
EDITS = [
    (
        "\n\ndef load(path):",
        "\n\ndef save(order, path):\n    json.dump(order.oid, open(path, 'w'))\n\n\ndef load(path):",
    ),
    ("return sum(i.price for i in items)", "return sum(i.price * i.count for i in items)  # 合计 ünits"),
    ('    """An order."""\n', ""),
    ("class Order:", "class Order(dict):"),
    ("import json\n", "import json\nimport os\n"),
    ("  # 合计 ünits", ""),
    ("    def total(self, items):\n        return sum(i.price * i.count for i in items)\n", ""),
]


def _point(text: bytes, offset: int) -> tuple[int, int]:
    lines = text[:offset].split(b"\n")
    return len(lines) - 1, len(lines[-1])


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("abc\ndef\n", "abc\nXdef\n"),  # insert inside a line
        ("abc\ndef\nghi\n", "abc\nghi\n"),  # delete a line
        ("a = 'x'\nb = 1\n", "a = '中文é'\nb = 1\n"),  # replace with multi-byte characters
        ("abc\n", "abc\ndef\n"),  # append
        ("abc\n", "# c\nabc\n"),  # prepend
        ("aaaa\n", "aaaaa\n"),  # prefix and suffix would overlap
        ("same\n", "same\n"),  # no change
        ("", "x = 1\n"),
        ("x = 1\n", ""),
    ],
)
def test_changed_span_brackets_exactly_the_change(before: str, after: str) -> None:
    a, b = before.encode(), after.encode()
    span = changed_span(a, b)
    start, old_end, new_end = span.start_byte, span.old_end_byte, span.new_end_byte
    assert start <= old_end <= len(a) and start <= new_end <= len(b)
    assert a[:start] == b[:start] and a[old_end:] == b[new_end:]  # outside the span nothing changed
    # the span is the smallest: its first bytes differ, and so do its last ones (unless one side is empty)
    assert start == min(len(a), len(b)) or a[start] != b[start]
    assert start in (old_end, new_end) or a[old_end - 1] != b[new_end - 1]
    assert (a == b) == (start == old_end == new_end)
    assert span.start_point == _point(a, start)
    assert span.old_end_point == _point(a, old_end)
    assert span.new_end_point == _point(b, new_end)


def _shape(node: Node) -> list[tuple[str, int, int, tuple[int, int], tuple[int, int]]]:
    """Every node in pre-order with its type, bytes and points."""
    out, stack = [], [node]
    while stack:
        n = stack.pop()
        out.append((n.type, n.start_byte, n.end_byte, tuple(n.start_point), tuple(n.end_point)))
        stack.extend(reversed(n.children))
    return out


@pytest.mark.parametrize("lang", ["python", "javascript"])
def test_a_tree_parsed_from_the_last_one_is_the_fresh_tree(lang: str) -> None:
    parsers, trees = Parsers(), RecentTrees()
    text = SOURCE if lang == "python" else "function a(x) {\n  return x + 1;\n}\n\nconst b = a(2);\n"
    edits = (
        EDITS
        if lang == "python"
        else [("x + 1", "x + 2 /* 二 */"), ("const b", "let b"), ("\n\nlet", "\nlet")]
    )
    trees.parse("f", lang, text.encode(), parsers.get(lang))
    for old, new in edits:
        assert old in text
        text = text.replace(old, new, 1)
        source = text.encode()
        tree = trees.parse("f", lang, source, parsers.get(lang))
        fresh = parsers.get(lang).parse(source)
        assert _shape(tree.root_node) == _shape(fresh.root_node)
        assert not tree.root_node.has_error


def test_only_the_last_files_are_kept() -> None:
    parsers, trees = Parsers(), RecentTrees(size=2)
    for name in ("a", "b", "c"):
        trees.parse(name, "python", b"x = 1\n", parsers.get("python"))
    assert list(trees._kept) == ["b", "c"]
    trees.forget("b")
    assert list(trees._kept) == ["c"]


def _state(idx: CodeIndex) -> tuple[list[dict[str, object]], dict[str, object]]:
    units = sorted(
        (u.to_json() for u in idx.live_units), key=lambda u: (u["path"], u["start"], u["qualname"])
    )
    facts = {p: f.to_json() for p, f in sorted(idx.graph_facts.all().items())}
    return units, facts


def test_updates_from_kept_trees_hold_what_a_fresh_build_holds(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "orders.py").write_text(SOURCE, encoding="utf-8")
    (root / "other.py").write_text(
        "from orders import load\n\n\ndef run():\n    return load('x')\n", encoding="utf-8"
    )
    cfg = CodeConfig(index_dir=str(tmp_path / "index"), embedding={"multilingual": False})
    idx = CodeIndex(root, tmp_path / "index" / "a", cfg, None)
    idx.build()
    assert "orders.py" not in idx._trees._kept  # a build keeps no tree
    text = SOURCE
    for old, new in EDITS:
        text = text.replace(old, new, 1)
        (root / "orders.py").write_text(text, encoding="utf-8")
        idx.update_files(["orders.py"])
        assert "orders.py" in idx._trees._kept  # the next edit parses from this tree
        fresh = CodeIndex(root, tmp_path / "index" / "b", cfg, None)
        fresh.build()
        assert _state(idx) == _state(fresh)


JAVA = """package a.b;

import java.util.List;

/** Orders, kept. */
public class Orders {
  /** The store. */
  private final Store store;

  /**
   * Loads an order.
   * @param id the order
   */
  public Order load(String id) {
    return store.get(id).map(o -> o.copy()).orElse(null);
  }

  // totals
  int total(List<Item> items) { int t = 0; for (Item i : items) { t += i.price(); } return t; }

  static class Item {
    /** The price. */
    int price() { return 1; }
  }

  @Override
  public String toString() { return "Orders"; }
}
"""

JS = """// orders
import { store } from './store';

/** Loads an order. */
export function load(id) {
  return store.get(id).then((o) => o.copy());
}

const total = (items) => items.reduce((t, i) => t + i.price, 0);

export default class Orders {
  /** The size. */
  size() { return store.size(); }
  static of(x) { return new Orders(x); }
}
"""


def _units(
    trees: RecentTrees, parsers: Parsers, lang: str, text: str
) -> tuple[list[object], list[object], int]:
    """The units and facts of `text` parsed from the kept tree taking what the last parse kept (a
    Python file a statement at a time: statements.py), those made afresh, and how many units and
    statements' facts were the last parse's own."""
    from xihe.tools.codeindex import identifiers, statements, treequery
    from xihe.tools.codeindex.refs import extract
    from xihe.tools.codeindex.units import Earlier, parse_units

    src = text.encode("utf-8")
    tree, span, kept = trees.reparse("f.py", lang, src, parsers.get(lang))
    old: set[int] = set()
    if lang == "python":
        was = kept if isinstance(kept, statements.Kept) else None
        got, facts, again = statements.parse("f.py", text, src, tree, span, was)
        trees.keep("f.py", again)
        if was is not None:
            old = {id(u) for u in was.units.units.values()} | {id(f) for _, f in was.facts.facts.values()}
        taken = sum(1 for u in got if id(u) in old)
        taken += sum(1 for _, f in again.facts.facts.values() if id(f) in old)
    else:
        earlier = (span, kept) if span is not None and isinstance(kept, Earlier) else None
        caps = treequery.captures(lang, tree.root_node)
        names = identifiers.names(caps, src)
        seen = Earlier()
        got = parse_units("f.py", text, lang, parsers, tree, caps, names, earlier, seen)
        facts = extract("f.py", lang, tree.root_node, got, caps, names)
        trees.keep("f.py", seen)
        if earlier is not None:
            old = {id(u) for u in earlier[1].units.values()}
        taken = sum(1 for u in got if id(u) in old)
    fresh = parse_units("f.py", text, lang, parsers)
    fresh_facts = extract("f.py", lang, parsers.get(lang).parse(src).root_node, fresh)
    return (
        [*((u, u.text) for u in got), facts.to_json()],
        [*((u, u.text) for u in fresh), fresh_facts.to_json()],
        taken,
    )


@pytest.mark.parametrize("lang", ["python", "java", "javascript"])
def test_units_taken_from_the_last_parse_are_those_a_fresh_parse_makes(lang: str) -> None:
    """Random edits (insertions of code, comments, blank lines, line breaks other than '\\n',
    imports and functions named again; deletions; duplicated lines; renames) of real and made-up
    files: the units (and Python statements' facts) an update takes from the file's last parse,
    moved, and those it makes again are exactly a fresh parse's."""
    import random
    import re
    import sysconfig

    rng = random.Random(7)
    if lang == "python":
        lib = Path(sysconfig.get_paths()["stdlib"])
        texts = [p.read_text(encoding="utf-8") for p in sorted((lib / "email").glob("*.py"))[:8]]
    else:
        texts = [JAVA if lang == "java" else JS]
    snippets = ["\n", "x", "  ", "# c\n", "// c\n", "/** d */\n", "\n\ndef added(v):\n    return g(v)\n",
                "\nfunction added(v) { return g(v); }\n", "\n  void added() { g(); }\n", "\r", "\x0c",
                "@deco\n", "é中", "{", "}", '"""', "import os\n", "from . import x as os\n",
                "def f():\n    pass\n"]  # fmt: skip
    parsers, reused = Parsers(), 0
    for text in texts:
        trees = RecentTrees()
        _units(trees, parsers, lang, text)
        for _ in range(25):
            n, op = len(text), rng.random()
            if op < 0.45:
                pos = (
                    text.rfind("\n", 0, rng.randrange(n + 1)) + 1
                    if rng.random() < 0.6
                    else rng.randrange(n + 1)
                )
                text = text[:pos] + rng.choice(snippets) + text[pos:]
            elif op < 0.7:
                a = rng.randrange(n + 1)
                text = text[:a] + text[min(n, a + rng.randrange(1, 80)) :]
            elif op < 0.85:
                lines = text.split("\n")
                i = rng.randrange(len(lines))
                text = "\n".join(lines[: i + 1] + lines[i : i + 3] + lines[i + 1 :])
            else:
                word = rng.choice(re.findall(r"\b[a-zA-Z_]{4,}\b", text))
                text = text.replace(word, word + "X", 1)
            got, fresh, taken = _units(trees, parsers, lang, text)
            assert got == fresh
            reused += taken
    assert reused > 0  # units were taken from the last parse
