"""Code Q&A through the product: the tools on a temp git repo, the answer rules, follow-ups, /hooks/git."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from tests.codeindex.conftest import ORDERS_PY, git
from tests.conftest import write_config
from xihe.agent.app import App, build_app
from xihe.agent.clock import FakeClock
from xihe.agent.code.feature import live, reconcile_job
from xihe.agent.inbound import Inbound
from xihe.agent.web.server import create_server
from xihe.integrations.fakes.llm_server import ScriptedLLM, call, say

SECRET = "hook-secret-123"
PAYMENTS_PY = '''"""Payments."""


def refund_payment(payment, amount):
    """Give money back to the customer's card."""
    payment.refunded += amount
    return payment
'''


@pytest.fixture
def repo(make_repo: Callable[..., Path]) -> Path:
    root = make_repo({"shop/orders.py": ORDERS_PY, "README.md": "# Shop\n"})
    git(root, "remote", "add", "origin", "git@gitlab.example:team/shop.git")
    return root


@pytest.fixture
def code_app(
    tmp_path: Path,
    llm: ScriptedLLM,
    clock: FakeClock,
    db_url: str,
    repo: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Callable[[], App]:
    """A bot with code.yaml naming the temp repository; the start-up reconcile job builds the index."""
    monkeypatch.setenv("XIHE_GIT_WEBHOOK_SECRET", SECRET)
    counter = {"n": 0}

    def make() -> App:
        counter["n"] += 1
        cfg = write_config(tmp_path / f"config{counter['n']}", llm_url=llm.base_url)
        (cfg / "code.yaml").write_text(
            f"index_dir: {tmp_path / 'index'}\nrepos: [{repo}]\nwebhook_secret_env: XIHE_GIT_WEBHOOK_SECRET\n"
        )
        app = build_app(cfg, clock=clock, database_url=db_url, holder=f"test-{counter['n']}")
        reconcile_job(app)
        return app

    return make


def ask(app: App, text: str, conv: str = "c1") -> str:
    return app.session.handle(Inbound("alice", conv, text))


def test_question_to_tools_to_an_answer_citing_a_real_path(
    code_app: Callable[[], App], llm: ScriptedLLM
) -> None:
    app = code_app()
    answer = "`OrderStateMachine.on_timeout` in `shop/orders.py` cancels the order and calls `notify_owner`."
    llm.add(
        call("search_code", query="order timeout"),
        call("get_code_context", question="what happens when an order is not paid in time?"),
        say(answer),
    )
    assert ask(app, "what happens when an order is not paid in time?") == answer
    search_result = llm.messages[1][-1]["content"]
    assert search_result.startswith("[Tool Result: search_code]")
    hits = json.loads(search_result.split("\n", 1)[1])["hits"]
    assert hits[0]["path"] == "shop/orders.py" and hits[0]["symbol"].endswith("on_timeout")
    context = llm.messages[2][-1]["content"]
    assert "## File: shop/orders.py (lines" in context and "def on_timeout" in context
    llm.assert_consumed()  # no answer check round trip


def test_who_calls_a_function_through_the_graph_tools(code_app: Callable[[], App], llm: ScriptedLLM) -> None:
    app = code_app()
    answer = "`notify_owner` is called by `OrderStateMachine.on_timeout` in `shop/orders.py`."
    llm.add(
        call("find_callers", symbol="notify_owner"),
        call("call_chain", start="on_timeout", goal="notify_owner"),
        say(answer),
    )
    assert ask(app, "who calls notify_owner?") == answer
    callers = llm.messages[1][-1]["content"]
    assert callers.startswith("[Tool Result: find_callers]")
    assert "## File: shop/orders.py (lines 10-13) method OrderStateMachine.on_timeout" in callers
    assert "- line 13: calls it (resolved)" in callers
    chain = llm.messages[2][-1]["content"]
    assert "## File: shop/orders.py (lines 16-18) function notify_owner" in chain
    llm.assert_consumed()  # the answer cites what the tools showed: no answer check round trip
    # a follow-up sees the definitions the graph tools showed, as it sees get_code_context's
    llm.add(say("It is in `shop/orders.py`."))
    ask(app, "and where is that caller?")
    system = [m["content"] for m in llm.messages[3] if m["role"] == "system"]
    earlier = next(s for s in system if s.startswith("Code retrieved earlier"))
    assert "method OrderStateMachine.on_timeout" in earlier


def test_answer_citing_a_missing_path_goes_back_once_then_is_marked(
    code_app: Callable[[], App], llm: ScriptedLLM
) -> None:
    app = code_app()
    llm.add(
        call("get_code_context", question="how are refunds done?"),
        say("Refunds are in `shop/payments.py` (`refund_payment`)."),
        say("Refunds are in `shop/payments.py`."),
    )
    reply = ask(app, "how are refunds done?")
    check = llm.messages[2][-1]
    assert check["role"] == "user" and check["content"].startswith("[Answer check]")
    assert "`shop/payments.py: refund_payment`" in check["content"]
    assert "shop/payments.py` (unverified)" in reply
    assert reply.endswith("⚠️ Unverified: not found in the indexed repository: shop/payments.py")
    llm.assert_consumed()


def test_the_mark_on_an_unverified_citation_follows_the_language(
    code_app: Callable[[], App], llm: ScriptedLLM
) -> None:
    app = code_app()
    llm.add(
        call("get_code_context", question="退款是怎么做的？"),
        say("退款在 `shop/payments.py`（`refund_payment`）。"),
        say("退款在 `shop/payments.py`。"),
    )
    reply = ask(app, "退款是怎么做的？")
    assert "shop/payments.py`（未核实）" in reply
    assert reply.endswith("⚠️ 未核实：在已索引的仓库里找不到：shop/payments.py")
    assert "Unverified" not in reply
    check = llm.messages[2][-1]["content"]  # the model is told in English
    assert check.startswith("[Answer check] Your answer cites")
    llm.assert_consumed()


def test_a_fixed_answer_after_the_check_is_not_marked(code_app: Callable[[], App], llm: ScriptedLLM) -> None:
    app = code_app()
    llm.add(
        call("get_code_context", question="order timeout"),
        say("See `shop/order.py`."),
        say("See `shop/orders.py` (`notify_owner`)."),
    )
    assert ask(app, "order timeout?") == "See `shop/orders.py` (`notify_owner`)."
    llm.assert_consumed()


def test_no_matching_implementation_is_said_plainly(code_app: Callable[[], App], llm: ScriptedLLM) -> None:
    app = code_app()
    llm.add(
        call("get_code_context", question="kubernetes helm chart rendering pipeline"),
        call("search_code", query="HelmChartRenderer"),
        say("The repository has no matching implementation."),
    )
    assert ask(app, "where do we render helm charts?") == "The repository has no matching implementation."
    assert "No matching implementation in the repository" in llm.messages[1][-1]["content"]
    found = json.loads(llm.messages[2][-1]["content"].split("\n", 1)[1])
    assert found["hits"] == [] and "no matching implementation" in found["note"]


def test_follow_up_questions_see_earlier_units(code_app: Callable[[], App], llm: ScriptedLLM) -> None:
    app = code_app()
    llm.add(
        call("get_code_context", question="order timeout"),
        say("`OrderStateMachine.on_timeout` in `shop/orders.py` handles it."),
        say("It calls `notify_owner` in `shop/orders.py`."),
    )
    ask(app, "what handles an order timeout?")
    assert (
        ask(app, "what does that function you mentioned call?")
        == "It calls `notify_owner` in `shop/orders.py`."
    )
    system = [m["content"] for m in llm.messages[2] if m["role"] == "system"]
    earlier = next(s for s in system if s.startswith("Code retrieved earlier"))
    assert "what handles an order timeout?" in earlier and "def on_timeout" in earlier
    # another conversation does not see it
    llm.add(say("Which function?"))
    ask(app, "what does that function call?", conv="c2")
    assert not any(
        m["content"].startswith("Code retrieved earlier") for m in llm.messages[3] if m["role"] == "system"
    )


def test_older_rounds_become_a_summary(code_app: Callable[[], App], llm: ScriptedLLM) -> None:
    app = code_app()
    for q in ("order timeout", "notify owner", "order states"):
        llm.add(call("search_code", query=q), say("ok"))
        ask(app, q)
    llm.add(say("done"))
    ask(app, "and the first one?")
    earlier = next(
        m["content"]
        for m in llm.messages[-1]
        if m["role"] == "system" and "Code retrieved earlier" in m["content"]
    )
    assert "- earlier, for 'order timeout': shop/orders.py:" in earlier
    assert "### For 'notify owner'" in earlier and "### For 'order states'" in earlier


class ServerThread:
    """uvicorn serving the bot's ASGI app on 127.0.0.1:<free port>."""

    def __init__(self, asgi: Any) -> None:
        self.server = uvicorn.Server(
            uvicorn.Config(asgi, host="127.0.0.1", port=0, log_level="error", lifespan="off")
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture
def served(code_app: Callable[[], App]) -> Iterator[tuple[App, str]]:
    app = code_app()
    with ServerThread(create_server(app, with_scheduler=False)) as url:
        yield app, url


def _push(paths: list[str]) -> dict[str, Any]:
    return {
        "object_kind": "push",
        "ref": "refs/heads/main",
        "before": "0" * 40,
        "after": "1" * 40,
        "project": {"git_http_url": "https://gitlab.example/team/shop.git"},
        "commits": [{"added": paths, "modified": [], "removed": []}],
    }


def test_git_hook_with_good_signatures_updates_the_index(served: tuple[App, str], repo: Path) -> None:
    app, url = served
    indexes = live(app.deps)
    assert indexes is not None
    assert indexes.search("refund_payment", 5) == []
    (repo / "shop" / "payments.py").write_text(PAYMENTS_PY)
    body = json.dumps(_push(["shop/payments.py"])).encode()
    r = httpx.post(
        f"{url}/hooks/git", content=body, headers={"X-Gitlab-Token": SECRET, "X-Gitlab-Event": "Push Hook"}
    )
    assert r.status_code == 200 and r.json()["reindexed"][0]["files_changed"] == ["shop/payments.py"]
    assert indexes.search("refund_payment", 5)[0][1].path == "shop/payments.py"
    # GitHub: HMAC-SHA256 of the body; the file is gone again
    (repo / "shop" / "payments.py").unlink()
    gh = {
        "ref": "refs/heads/main",
        "before": "1" * 40,
        "after": "2" * 40,
        "repository": {"clone_url": "https://github.com/team/shop.git"},
        "commits": [{"added": [], "modified": [], "removed": ["shop/payments.py"]}],
    }
    body = json.dumps(gh).encode()
    sig = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    r = httpx.post(
        f"{url}/hooks/git", content=body, headers={"X-Hub-Signature-256": sig, "X-GitHub-Event": "push"}
    )
    assert r.status_code == 200 and r.json()["reindexed"][0]["files_changed"] == ["shop/payments.py"]
    assert all(h.path != "shop/payments.py" for _, h in indexes.search("refund_payment", 5))
    assert [e["outcome"] for e in app.deps.audit.search(kind="webhook")] == ["accepted", "accepted"]


def test_git_hook_with_bad_signatures_changes_nothing(served: tuple[App, str], repo: Path) -> None:
    app, url = served
    indexes = live(app.deps)
    assert indexes is not None
    (repo / "shop" / "payments.py").write_text(PAYMENTS_PY)
    body = json.dumps(_push(["shop/payments.py"])).encode()
    for headers in (
        {"X-Gitlab-Token": "wrong", "X-Gitlab-Event": "Push Hook"},
        {"X-Hub-Signature-256": "sha256=" + "0" * 64, "X-GitHub-Event": "push"},
        {},
    ):
        r = httpx.post(f"{url}/hooks/git", content=body, headers=headers)
        assert r.status_code == 401
    assert indexes.search("refund_payment", 5) == []
    assert [e["outcome"] for e in app.deps.audit.search(kind="webhook")] == ["rejected"] * 3


def test_index_survives_a_restart_without_rebuilding(code_app: Callable[[], App], tmp_path: Path) -> None:
    app = code_app()
    indexes = live(app.deps)
    assert indexes is not None and indexes.ready
    stamp = (tmp_path / "index").stat().st_mtime_ns
    again = code_app()  # install opens the saved index; the reconcile finds nothing to do
    assert live(again.deps).ready  # type: ignore[union-attr]
    assert (tmp_path / "index").stat().st_mtime_ns == stamp
