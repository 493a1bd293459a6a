"""units.jsonl is append-only between compactions; a crashed append is ignored on load."""

from __future__ import annotations

import json
from pathlib import Path

from tests.codeindex.conftest import MAILER_JAVA, ORDERS_PY
from xihe.tools.codeindex.index import CodeIndex
from xihe.tools.codeindex.service import index_dir, index_repo, open_index


def _units(idx: CodeIndex) -> list[tuple[str, str] | None]:
    return [None if u is None else (u.path, u.qualname) for u in idx.units]


def test_an_update_appends_new_units_and_keeps_the_old_lines(make_repo, cfg, embedder) -> None:
    root = make_repo({"shop/orders.py": ORDERS_PY, "mail/Mailer.java": MAILER_JAVA})
    idx, _ = index_repo(root, cfg, embedder=embedder)
    units_file = index_dir(root, cfg) / "units.jsonl"
    before = units_file.read_bytes()
    (root / "shop" / "orders.py").write_text(ORDERS_PY + "\n\ndef refund(order):\n    return order\n")
    idx.update_files(["shop/orders.py"])
    idx.save()
    after = units_file.read_bytes()
    assert after.startswith(before) and len(after) > len(before)  # appended, not rewritten
    loaded = open_index(root, cfg, embedder)
    assert loaded is not None and _units(loaded) == _units(idx)
    assert any(u and u[1] == "refund" for u in _units(loaded))
    assert loaded.search("refund", 3).hits[0].unit.qualname == "refund"
    assert not any(u and u[1] == "OrderStateMachine" for u in _units(loaded)[:3] if u)  # old slots dead


def test_lines_of_an_append_that_crashed_before_the_swap_are_ignored(make_repo, cfg, embedder) -> None:
    root = make_repo({"shop/orders.py": ORDERS_PY})
    idx, _ = index_repo(root, cfg, embedder=embedder)
    units_file: Path = index_dir(root, cfg) / "units.jsonl"
    with open(units_file, "ab") as fh:  # a save appended, then the process died before meta.json moved
        fh.write(b'{"half": \n')
    loaded = open_index(root, cfg, embedder)
    assert loaded is not None and _units(loaded) == _units(idx)
    (root / "shop" / "orders.py").write_text(ORDERS_PY + "\n\ndef refund(order):\n    return order\n")
    loaded.update_files(["shop/orders.py"])
    loaded.save()  # truncates the torn tail before appending
    again = open_index(root, cfg, embedder)
    assert again is not None and _units(again) == _units(loaded)


def test_compaction_rewrites_the_file(make_repo, cfg, embedder) -> None:
    root = make_repo({"shop/orders.py": ORDERS_PY})
    idx, _ = index_repo(root, cfg, embedder=embedder)
    idx.update_files(["shop/orders.py"])
    (root / "shop" / "orders.py").write_text(ORDERS_PY + "\n# changed\n")
    idx.update_files(["shop/orders.py"])
    idx.compact()
    idx.save()
    lines = (index_dir(root, cfg) / "units.jsonl").read_text().splitlines()
    assert len(lines) == len(idx.units) and "null" not in lines
    again = open_index(root, cfg, embedder)
    assert again is not None and _units(again) == _units(idx)


def test_each_line_is_the_units_json_as_json_dumps_writes_it(make_repo, cfg, embedder) -> None:
    chinese = (
        'def total(order):\n    """订单的总价，含税。 "quoted" \\\\ tab\\t."""\n    return order.sum()\n'
    )
    root = make_repo({"shop/orders.py": ORDERS_PY, "shop/price.py": chinese})
    idx, _ = index_repo(root, cfg, embedder=embedder)
    (root / "shop" / "price.py").write_text(chinese + "\n\ndef 税(x):\n    return x\n", encoding="utf-8")
    idx.update_files(["shop/price.py"])
    idx.save()  # appended after the lines of the build (a dead slot keeps its line)
    lines = (index_dir(root, cfg) / "units.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(idx.units) and any(u is None for u in idx.units)
    for line, u in zip(lines, idx.units, strict=True):
        assert u is None or line == json.dumps(u.to_json(), ensure_ascii=False)
    assert '"name": "税"' in lines[-1] and "订单" in lines[-2]
