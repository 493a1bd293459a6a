"""call_chain on hand-written questions about requests (pinned in constraints.txt), written before the graph.

Each question is how a reader would ask it ("how does a request get from `api.get` to the adapter?");
the expected chain is read off the requests source by hand. A hop that only dynamic dispatch makes
(`adapter.send(...)` on an adapter looked up at run time) must be marked uncertain, not presented as
resolved. The source is copied out of site-packages so the index is built on a plain directory.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import requests

from xihe.config.code import CodeConfig
from xihe.tools.codeindex.graph import SymbolGraph
from xihe.tools.codeindex.index import CodeIndex

# (from, to, expected chain of qualified names as "path:qualname", the hops that must be uncertain)
QUESTIONS: list[tuple[str, str, list[str] | None, set[int]]] = [
    # where does `requests.get` end up? the module function, its `request`, then the session
    (
        "requests.api.get",
        "Session.send",
        [
            "requests/api.py:get",
            "requests/api.py:request",
            "requests/sessions.py:Session.request",
            "requests/sessions.py:Session.send",
        ],
        set(),
    ),
    # how does a request get from `api.get` to the adapter? the last hop is `adapter.send(...)` on an
    # adapter picked from a dict at run time: only dynamic dispatch reaches HTTPAdapter.send
    (
        "api.get",
        "HTTPAdapter.send",
        [
            "requests/api.py:get",
            "requests/api.py:request",
            "requests/sessions.py:Session.request",
            "requests/sessions.py:Session.send",
            "requests/adapters.py:HTTPAdapter.send",
        ],
        {3},
    ),
    # how does Session.request reach the auth handling? through prepare_request and PreparedRequest
    (
        "Session.request",
        "PreparedRequest.prepare_auth",
        [
            "requests/sessions.py:Session.request",
            "requests/sessions.py:Session.prepare_request",
            "requests/models.py:PreparedRequest.prepare",
            "requests/models.py:PreparedRequest.prepare_auth",
        ],
        set(),
    ),
    # who follows redirects for Session.send? a method inherited from the mixin base class
    (
        "Session.send",
        "resolve_redirects",
        ["requests/sessions.py:Session.send", "requests/sessions.py:SessionRedirectMixin.resolve_redirects"],
        set(),
    ),
    # how do a response's cookies reach the jar? the adapter builds the response, which extracts them
    (
        "HTTPAdapter.send",
        "extract_cookies_to_jar",
        [
            "requests/adapters.py:HTTPAdapter.send",
            "requests/adapters.py:HTTPAdapter.build_response",
            "requests/cookies.py:extract_cookies_to_jar",
        ],
        set(),
    ),
    # a redirect re-authenticates: resolve_redirects -> rebuild_auth, a method of the same mixin
    (
        "SessionRedirectMixin.resolve_redirects",
        "rebuild_auth",
        [
            "requests/sessions.py:SessionRedirectMixin.resolve_redirects",
            "requests/sessions.py:SessionRedirectMixin.rebuild_auth",
        ],
        set(),
    ),
    # `requests.post` reaches Session.request the same way as get
    (
        "requests.api.post",
        "Session.request",
        ["requests/api.py:post", "requests/api.py:request", "requests/sessions.py:Session.request"],
        set(),
    ),
    # the adapter never calls back into the module-level helpers: no chain
    ("HTTPAdapter.send", "requests.api.get", None, set()),
]


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory) -> SymbolGraph:
    root = tmp_path_factory.mktemp("pinned")
    shutil.copytree(Path(requests.__file__).parent, root / "requests")
    cfg = CodeConfig(index_dir=str(root / ".index"), embedding={"multilingual": False})
    idx = CodeIndex(root, root / ".index" / "requests", cfg, None)
    idx.build()
    return idx.symbol_graph()


def test_requests_is_the_pinned_version() -> None:
    assert requests.__version__ == "2.34.2"  # the expected chains were read off this version


@pytest.mark.parametrize(("start", "goal", "expected", "uncertain"), QUESTIONS)
def test_call_chain_answers_the_hand_written_question(
    graph: SymbolGraph, start: str, goal: str, expected: list[str] | None, uncertain: set[int]
) -> None:
    chains = graph.call_chain(start, goal)
    if expected is None:
        assert chains == []
        return
    assert chains, f"no chain from {start} to {goal}"
    first = chains[0]
    assert [f"{d.path}:{d.qualname}" for d in first.nodes] == expected
    assert {i for i, hop in enumerate(first.hops) if not hop.certain} == uncertain
