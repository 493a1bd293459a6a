"""search_code, get_code_context and the citation check the answer rules rely on."""

from __future__ import annotations

import pytest

from tests.codeindex.conftest import MAILER_JAVA, ORDERS_PY
from xihe.tools.codeindex.api import (
    NOTHING_FOUND,
    exists,
    extract_citations,
    get_code_context,
    missing_citations,
    search_code,
)
from xihe.tools.codeindex.service import index_repo


@pytest.fixture
def idx(make_repo, cfg, embedder):
    repo = make_repo(
        {"app/orders.py": ORDERS_PY, "src/demo/Mailer.java": MAILER_JAVA, "README.md": "# Demo\n"}
    )
    return index_repo(repo, cfg, embedder=embedder)[0]


def test_search_code_finds_symbols_and_keywords(idx) -> None:
    hits = search_code(idx, "OrderStateMachine", 5)
    assert hits[0].path == "app/orders.py" and hits[0].symbol == "OrderStateMachine"
    assert (hits[0].start, hits[0].end) == (7, 13)
    hits = search_code(idx, "deliver a message to its recipients", 3)
    assert hits[0].symbol == "Mailer.deliver" and hits[0].path == "src/demo/Mailer.java"
    assert hits == sorted(hits, key=lambda h: -h.score)


def test_search_code_returns_nothing_for_unknown_symbol(idx) -> None:
    assert search_code(idx, "KubernetesPodAutoscaler", 5) == []


def test_get_code_context_puts_file_header_and_lines_before_each_unit(idx) -> None:
    text = get_code_context(idx, "what happens when an order times out and is not paid", n=3)
    assert text.startswith("## File: app/orders.py (lines ")
    assert text.count("## File: ") == 3
    assert 'order.state = "cancelled"' in text


def test_get_code_context_says_when_nothing_matches(idx) -> None:
    text = get_code_context(idx, "KubernetesPodAutoscaler", n=3)
    assert text.startswith(NOTHING_FOUND) and "## File:" not in text


def test_extract_citations_pairs_symbols_with_paths() -> None:
    answer = (
        "The timeout is handled in `app/orders.py` by `OrderStateMachine.on_timeout()` (line 10).\n"
        "Mail goes through src/demo/Mailer.java:6 `Mailer::deliver`.\n"
        "See also `notify_owner`, e.g. in the README.md.\n"
    )
    cites = extract_citations(answer)
    assert ("app/orders.py", "OrderStateMachine.on_timeout") in cites
    assert ("src/demo/Mailer.java", "Mailer.deliver") in cites
    assert ("README.md", "notify_owner") in cites or ("", "notify_owner") in cites
    assert ("app/orders.py", None) not in cites  # already cited with its symbol


def test_exists_checks_paths_and_symbols(idx) -> None:
    assert exists(idx, "app/orders.py")
    assert exists(idx, "./app/orders.py", "OrderStateMachine.on_timeout")
    assert exists(idx, "app/orders.py", "on_timeout")
    assert exists(idx, "app/orders.py", "TIMEOUT_SECONDS")  # a constant: found in the file text
    assert exists(idx, "", "Mailer.deliver")
    assert not exists(idx, "app/order_service.py")
    assert not exists(idx, "app/orders.py", "OrderService.expire")
    assert not exists(idx, "", "OrderService")
    assert not exists(idx, "../../etc/passwd")


def test_missing_citations_lists_invented_ones(idx) -> None:
    answer = (
        "See `app/orders.py` `OrderStateMachine.on_timeout` and `app/payments.py` `PaymentGateway.refund`."
    )
    assert missing_citations(idx, answer) == ["app/payments.py: PaymentGateway.refund"]
