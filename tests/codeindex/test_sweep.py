"""`units._sweep` paints each byte with its innermost unit instead of walking every node: it must
give each unit the same identifiers and calls, in the same order, as the walk it replaced
(`_sweep_walk`), on real files of each language and on the nestings where a node's first byte lies
in a unit that does not hold the node."""

from __future__ import annotations

import sysconfig
from pathlib import Path

import pytest

from xihe.tools.codeindex import identifiers, treequery, units
from xihe.tools.codeindex.languages import Parsers

NESTED = {
    "javascript": (
        "(function outer(a) { return inner(a); }).call(this, 1);\n"
        "function f() { return function () { g(); }.call(x); }\n"
        "const h = () => k(() => m());\n"
    ),
    "java": (
        "class A {\n  void run() { new Thread(() -> work()).start(); }\n"
        "  class B { int go() { return A.this.run2(); } }\n  void run2() {}\n}\n"
    ),
    "python": (
        "class A:\n    def f(self):\n        return [g(x) for x in h()]\n"
        "    class B:\n        def k(self): return (lambda: m())()\n"
    ),
}


def _both(lang: str, text: str) -> tuple[list[list[int]], list[list[int]]]:
    src = text.encode("utf-8")
    tree = Parsers().get(lang).parse(src)
    caps = treequery.captures(lang, tree.root_node)
    names = identifiers.names(caps, src)
    found = units._candidates(caps.get("unit", []))
    calls = caps.get("call", [])
    return units._sweep(found, names, calls), units._sweep_walk(found, names, calls)


@pytest.mark.parametrize("lang", sorted(NESTED))
def test_nestings_where_a_node_starts_inside_another_unit(lang: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(units, "SMALL_SWEEP", 0)  # painted, however few the nodes
    painted, walked = _both(lang, NESTED[lang])
    assert painted == walked
    assert any(painted)  # the units did get nodes


def test_the_standard_librarys_email_and_xml_packages_sweep_as_the_walk_did(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(units, "SMALL_SWEEP", 0)
    lib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted([*(lib / "email").rglob("*.py"), *(lib / "xml").rglob("*.py")])
    assert len(files) > 40
    for f in files:
        painted, walked = _both("python", f.read_text(encoding="utf-8"))
        assert painted == walked, f


def test_a_node_of_no_width_is_placed_by_the_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(units, "SMALL_SWEEP", 0)
    """Between a unit's end and the next one's start, painted bytes cannot tell which unit holds
    it (the walk gives it to the unit ending there): such a file is swept by the walk."""
    text = NESTED["python"] + "def after():\n    return 1\n"
    src = text.encode("utf-8")
    tree = Parsers().get("python").parse(src)
    caps = treequery.captures("python", tree.root_node)
    found = units._candidates(caps.get("unit", []))
    seam = next(n.end_byte for n in found if n.end_byte < len(src))
    real = identifiers.names(caps, src)
    names = identifiers.Names([*real.starts, seam], [*real.ends, seam], [*real.texts, ""])
    calls = caps.get("call", [])
    swept = units._sweep(found, names, calls)
    assert swept == units._sweep_walk(found, names, calls)
    assert any(len(real.starts) in mine for mine in swept)  # the node of no width has a unit
