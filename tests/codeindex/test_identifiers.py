"""A file's identifiers read once for units and facts (identifiers.py) are each node's own text, in
the capture's order, in ASCII files and in files with other characters before and inside names."""

from __future__ import annotations

from xihe.tools.codeindex import treequery
from xihe.tools.codeindex.identifiers import names
from xihe.tools.codeindex.languages import Parsers, node_text
from xihe.tools.codeindex.units import parse_tree

SOURCES = {
    "python": [
        "\n\n\nimport os\n\ndef total(order, rate=0.2):\n    return order.sum() * (1 + rate)\n",
        '# 价格\ndef 总价(订单):\n    """含税。"""\n    return 订单.sum() + tax(订单, "é")\n',
        "def f(:\n    return g(\nx = a.\n",  # broken: missing nodes of no width
    ],
    "javascript": ["// café\nconst café = (x) => helper(x).then(y => y.naïve);\n"],
    "java": ["class A { /* ü */ void m() { Map<String, Integer> b = f(größe); } }\n"],
}


def test_each_identifier_is_its_nodes_text_in_capture_order() -> None:
    parsers = Parsers()
    for lang, sources in SOURCES.items():
        for source in sources:
            src = source.encode("utf-8", "replace")
            tree = parse_tree(source, lang, parsers)
            caps = treequery.captures(lang, tree.root_node)
            got = names(caps, src)
            nodes = caps.get("name", [])
            assert got.texts == [node_text(n) for n in nodes], source
            assert got.starts == [n.start_byte for n in nodes] and got.ends == [n.end_byte for n in nodes]
            assert len(nodes) > 2
