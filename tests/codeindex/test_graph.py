"""The symbol graph: what a name resolves to, how sure, and updates that touch only the changed file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xihe.agent.cli.main import main
from xihe.config.code import CodeConfig
from xihe.tools.codeindex import graphstore, navigate
from xihe.tools.codeindex.api import get_code_context, missing_citations
from xihe.tools.codeindex.embed import Embedder
from xihe.tools.codeindex.graph import DYNAMIC, NAME, RESOLVED
from xihe.tools.codeindex.index import CodeIndex
from xihe.tools.codeindex.repomap import wants_map

FILES = {
    "shop/__init__.py": "from .orders import place_order as place\n",
    "shop/base.py": """
class Notifier:
    def send(self, text):
        raise NotImplementedError

    def notify(self, order):
        return self.send(order.summary())


class Store:
    def save(self, order):
        return order
""",
    "shop/mail.py": """
from shop.base import Notifier


class MailNotifier(Notifier):
    def send(self, text):
        return deliver(text)


def deliver(text):
    return text
""",
    "shop/orders.py": """
from . import base
from .base import Store as OrderStore
from .mail import MailNotifier


class Order:
    def summary(self) -> str:
        return "order"


def make_store() -> OrderStore:
    return OrderStore()


def place_order(order: Order, notifier):
    store = make_store()
    store.save(order)
    mailer = MailNotifier()
    mailer.notify(order)
    notifier.summary()
    return order.summary()


def audit(save):
    return save(1)


class Checkout(base.Store):
    def save(self, order):
        super().save(order)
        return place_order(order, None)
""",
    "app.py": """
import shop


def main():
    shop.place(None, None)
""",
}


def build(root: Path, files: dict[str, str], embedder: Embedder | None = None) -> CodeIndex:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    cfg = CodeConfig(index_dir=str(root / ".index"), embedding={"multilingual": False})
    idx = CodeIndex(root, root / ".index" / "repo", cfg, embedder)
    idx.build()
    idx.save()
    return idx


@pytest.fixture
def idx(tmp_path: Path) -> CodeIndex:
    return build(tmp_path / "repo", FILES)


def callees(idx: CodeIndex, symbol: str) -> dict[str, str]:
    graph = idx.symbol_graph()
    (d,) = graph.definitions(symbol)
    return {c.qualname: hop.certainty for c, hop, _ in graph.callees(d)}


def callers(idx: CodeIndex, symbol: str) -> dict[tuple[str, str], str]:
    graph = idx.symbol_graph()
    (d,) = graph.definitions(symbol)
    return {(u.path, u.scope): u.certainty for u in graph.callers(d)}


def test_imports_aliases_return_annotations_and_constructors_resolve(idx: CodeIndex) -> None:
    assert callees(idx, "place_order") == {
        "make_store": RESOLVED,  # same module
        "Store.save": RESOLVED,  # `store = make_store()`, annotated `-> OrderStore`, an import alias
        "MailNotifier": RESOLVED,  # a class called: its instantiation
        "Notifier.notify": RESOLVED,  # inherited by MailNotifier from a base in another module
        "Checkout.save": DYNAMIC,  # an override below Store: run-time dispatch, not a fact
        "Order.summary": RESOLVED,  # `order: Order`
    }


def test_self_calls_follow_the_hierarchy_and_overrides_are_dynamic(idx: CodeIndex) -> None:
    assert callees(idx, "Notifier.notify") == {
        "Notifier.send": RESOLVED,
        "MailNotifier.send": DYNAMIC,
        "Order.summary": NAME,  # `order` is an untyped parameter: the only `summary` is a guess
    }
    assert callers(idx, "MailNotifier.send") == {("shop/base.py", "Notifier.notify"): DYNAMIC}


def test_super_and_a_base_named_through_a_module(idx: CodeIndex) -> None:
    assert callees(idx, "Checkout.save") == {"Store.save": RESOLVED, "place_order": RESOLVED}


def test_a_parameter_hides_a_module_name_and_an_untyped_receiver_is_matched_by_name(idx: CodeIndex) -> None:
    assert callees(idx, "audit") == {}  # `save` is the parameter, not Store.save
    graph = idx.symbol_graph()
    (summary,) = graph.definitions("Order.summary")
    by_line = {u.line: u.certainty for u in graph.callers(summary)}
    assert NAME in by_line.values()  # `notifier.summary()`: notifier has no type
    assert RESOLVED in by_line.values()


def test_a_re_export_through_a_package_init_resolves(idx: CodeIndex) -> None:
    assert callers(idx, "place_order") == {
        ("app.py", "main"): RESOLVED,  # `shop.place(...)`: `place` is `place_order` re-exported
        ("shop/orders.py", "Checkout.save"): RESOLVED,
    }


def test_definitions_by_qualified_module_and_path(idx: CodeIndex) -> None:
    graph = idx.symbol_graph()
    assert [d.qualname for d in graph.definitions("shop.orders.place_order")] == ["place_order"]
    assert [d.path for d in graph.definitions("shop/mail.py:MailNotifier.send")] == ["shop/mail.py"]
    assert {d.path for d in graph.definitions("send")} == {"shop/base.py", "shop/mail.py"}


def test_a_changed_file_updates_its_edges_and_the_graph_file_only_grows_by_it(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    idx = build(root, FILES)
    before = (idx.directory / graphstore.FILE).read_bytes()
    count_before = json.loads((idx.directory / "meta.json").read_text(encoding="utf-8"))["graph_records"]
    assert {path for path, _ in graphstore.records(before, count_before)} >= {"app.py", "shop/orders.py"}
    assert ("app.py", "main") in callers(idx, "place_order")
    (root / "app.py").write_text("import shop\n\n\ndef main():\n    return None\n", encoding="utf-8")
    idx.update_files(["app.py"])
    assert ("app.py", "main") not in callers(idx, "place_order")
    idx.save()
    after = (idx.directory / graphstore.FILE).read_bytes()
    # the new facts of app.py are appended: the saved records are kept byte for byte
    assert after.startswith(before)
    meta = json.loads((idx.directory / "meta.json").read_text(encoding="utf-8"))
    assert (meta["graph_records"], meta["graph_bytes"]) == (count_before + 1, len(after))
    found = graphstore.records(after, count_before + 1)
    assert found[-1][0] == "app.py" and found[-1][1] is not None
    loaded = CodeIndex.load(root, idx.directory, idx.cfg, None)
    assert loaded is not None
    assert callers(loaded, "place_order") == callers(idx, "place_order")
    (root / "shop/mail.py").unlink()
    loaded.update_files(["shop/mail.py"])
    assert loaded.symbol_graph().definitions("MailNotifier") == []
    assert "MailNotifier" not in callees(loaded, "place_order")


def test_answers_carry_file_headers_that_the_citation_check_accepts(idx: CodeIndex) -> None:
    text = navigate.find_callers(idx, "MailNotifier.send")
    assert "## File: shop/base.py (lines" in text and "method Notifier.notify" in text
    assert "dynamic dispatch" in text and "not certain" in text
    assert missing_citations(idx, text) == []
    chain = navigate.call_chain(idx, "main", "deliver")
    assert [ln.split(") ", 1)[1] for ln in chain.splitlines() if ln.startswith("## File:")] == [
        "function main",
        "function place_order",
        "method Notifier.notify",
        "method MailNotifier.send",
        "function deliver",
    ]
    assert "1 uncertain hop" in chain and missing_citations(idx, chain) == []
    refs = navigate.find_references(idx, "Order")
    assert "refers to it" in refs
    assert "No definition named `Nope`" in navigate.find_callees(idx, "Nope")
    assert "No call chain" in navigate.call_chain(idx, "deliver", "main")


def test_java_bare_and_this_calls_are_methods_of_the_class(tmp_path: Path) -> None:
    java = """package a;
import b.Helper;

public class Worker extends Base {
  public void run() {
    prepare();
    this.finish();
    new Helper().help();
  }
  void prepare() {}
}
"""
    base = "package a;\n\npublic class Base {\n  void finish() {}\n}\n"
    helper = "package b;\n\npublic class Helper {\n  public void help() {}\n}\n"
    idx = build(tmp_path / "j", {"a/Worker.java": java, "a/Base.java": base, "b/Helper.java": helper})
    got = callees(idx, "Worker.run")
    assert got["Worker.prepare"] == RESOLVED and got["Base.finish"] == RESOLVED and got["Helper"] == RESOLVED
    assert got["Helper.help"] == NAME  # `new Helper().help()`: the receiver is an expression


def test_cli_callers_and_chain(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "repo"
    build(root, FILES)
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "code.yaml").write_text(
        f"index_dir: {tmp_path / 'idx'}\nembedding:\n  multilingual: false\n", encoding="utf-8"
    )
    assert main(["code", "callers", "deliver", "--repo", str(root), "--config", str(conf)]) == 0
    out = capsys.readouterr().out
    assert "# Callers of `deliver`" in out and "## File: shop/mail.py (lines" in out
    assert main(["code", "chain", "main", "deliver", "--repo", str(root), "--config", str(conf)]) == 0
    out = capsys.readouterr().out
    assert out.count("## File:") == 5 and "dynamic dispatch" in out


def test_how_does_it_work_questions_get_a_repository_map(tmp_path: Path, embedder: Embedder) -> None:
    idx = build(tmp_path / "repo", FILES, embedder)
    assert wants_map("how does placing an order work?") and wants_map("下单之后状态是怎么流转的")
    assert not wants_map("where is the mail notifier?")
    text = get_code_context(idx, "how does placing an order work with the store", 3)
    assert "## Repository map" in text
    line = next(ln for ln in text.splitlines() if ln.startswith("- shop/orders.py:"))
    assert line.split(": ", 1)[1].startswith("`place_order` (2 uses)")  # main and Checkout.save
    assert missing_citations(idx, text) == []
    assert "## Repository map" not in get_code_context(idx, "where is the order store", 3)


def test_javascript_require_and_import_lead_to_the_definition(tmp_path: Path) -> None:
    common = "function isNothing(x) {\n  return x == null;\n}\n\nmodule.exports.isNothing = isNothing;\n"
    error = "function ParseError(msg) {\n  this.msg = msg;\n}\n\nmodule.exports = ParseError;\n"
    other = "function isNothing(x) {\n  return !x;\n}\n\nexport { isNothing };\n"
    loader = """const common = require('./common');
var ParseError = require('./error.js');
const { isNothing: blank } = require('./common');
const fs = require('fs');
import { isNothing as empty } from '../other/util';

function load(text) {
  if (common.isNothing(text) || blank(text)) {
    throw new ParseError('empty');
  }
  fs.readFileSync(text);
  return empty(text);
}
"""
    idx = build(
        tmp_path / "js",
        {"lib/common.js": common, "lib/error.js": error, "other/util.js": other, "lib/loader.js": loader},
    )
    got = callees(idx, "load")
    assert got["ParseError"] == RESOLVED  # `module.exports = ParseError`, required under its name
    graph = idx.symbol_graph()
    (mine,) = graph.definitions("lib/common.js:isNothing")
    lines = {u.line: u.certainty for u in graph.uses(mine)}
    assert lines == {8: RESOLVED}  # `common.isNothing(...)` and `blank(...)`, both on line 8
    assert {u.name for u in graph.uses(mine)} >= {"isNothing", "blank"}
    (theirs,) = graph.definitions("other/util.js:isNothing")
    assert {u.line: u.certainty for u in graph.uses(theirs)} == {12: RESOLVED}  # the ES import
    assert "readFileSync" not in got  # a package from outside the repository links to nothing


def test_records_a_crashed_save_appended_are_ignored_on_load(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    idx = build(root, FILES)
    expected = callers(idx, "place_order")
    with open(idx.directory / graphstore.FILE, "ab") as fh:  # a save appended, then died before the swap
        fh.write(graphstore._record("app.py", None) + b"\x05\x00\x00")
    loaded = CodeIndex.load(root, idx.directory, idx.cfg, None)
    assert loaded is not None
    assert callers(loaded, "place_order") == expected  # app.py's facts are not dropped by the torn tail
    assert ("app.py", "main") in expected
