"""A saved index's units are read from units.jsonl only when a slot is asked for (unitlines.py)."""

from __future__ import annotations

from tests.codeindex.conftest import MAILER_JAVA, ORDERS_PY
from xihe.tools.codeindex.service import index_dir, index_repo, open_index
from xihe.tools.codeindex.unitlines import UnitLines


def _unread(units: object) -> int:
    assert isinstance(units, UnitLines)
    return sum(
        1 for i in range(len(units)) if units._items[i] is not None and not hasattr(units._items[i], "path")
    )


def test_a_search_reads_only_the_units_it_shows(make_repo, cfg, embedder) -> None:
    root = make_repo({"shop/orders.py": ORDERS_PY, "mail/Mailer.java": MAILER_JAVA})
    built, _ = index_repo(root, cfg, embedder=embedder)
    idx, report = index_repo(root, cfg, embedder=embedder)  # the CLI's path: load, check git, search
    assert report.mode == "unchanged" and report.units == built.unit_count
    total = _unread(idx.units)
    assert total == len(idx.units) > 3  # loading and the freshness check parsed nothing
    hit = idx.search("cancel an order that was not paid", 1).hits[0]
    assert hit.unit.path == "shop/orders.py"
    assert [u and u.qualname for u in idx.units] == [u and u.qualname for u in built.units]


def test_an_update_after_loading_appends_and_reloads_equal(make_repo, cfg, embedder) -> None:
    root = make_repo({"shop/orders.py": ORDERS_PY})
    index_repo(root, cfg, embedder=embedder)
    idx = open_index(root, cfg, embedder)
    assert idx is not None and isinstance(idx.units, UnitLines)
    (root / "shop" / "orders.py").write_text(ORDERS_PY + "\n\ndef refund_twice(order):\n    return order\n")
    idx.update_files(["shop/orders.py"])
    idx.save()  # appends to a hard link of the file this index has mapped
    again = open_index(root, cfg, embedder)
    assert again is not None
    assert [u and u.qualname for u in again.units] == [u and u.qualname for u in idx.units]
    assert again.search("refund_twice", 1).hits[0].unit.qualname == "refund_twice"


def test_a_units_file_shorter_than_meta_says_is_built_again(make_repo, cfg, embedder) -> None:
    root = make_repo({"shop/orders.py": ORDERS_PY})
    index_repo(root, cfg, embedder=embedder)
    units = index_dir(root, cfg) / "units.jsonl"
    units.write_bytes(units.read_bytes()[:10])  # torn: fewer lines than meta.json vouches for
    assert open_index(root, cfg, embedder) is None
    idx, report = index_repo(root, cfg, embedder=embedder)
    assert report.mode == "full" and idx.search("cancel an order", 1).hits


def test_no_page_of_the_units_file_stays_mapped(make_repo, cfg, embedder) -> None:
    """A served index reads its units with pread: the file's pages do not count in the serve's memory."""
    root = make_repo({"shop/orders.py": ORDERS_PY, "mail/Mailer.java": MAILER_JAVA})
    index_repo(root, cfg, embedder=embedder)
    idx = open_index(root, cfg, embedder)
    assert idx is not None
    assert idx.search("cancel an order that was not paid", 1).hits[0].unit.path == "shop/orders.py"
    units = str(index_dir(root, cfg) / "units.jsonl")
    with open("/proc/self/maps", encoding="utf-8") as maps:
        assert not [line for line in maps if line.rstrip().endswith(units)]
