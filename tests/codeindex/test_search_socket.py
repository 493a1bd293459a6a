"""`xihe search` through a running serve's `<index_dir>/search.sock`: the same output as the local path
(through the fast path that reads the common arguments itself, and through argparse), the fallback when
the socket is missing, dead, another user's or answers badly, the socket's permissions, and `git status`."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from tests.codeindex.conftest import MAILER_JAVA, ORDERS_PY, git
from tests.conftest import write_config
from xihe.agent.app import App, build_app
from xihe.agent.cli.code import search_parser
from xihe.agent.cli.main import main
from xihe.agent.cli.searchfast import read_args
from xihe.agent.clock import FakeClock
from xihe.agent.code.feature import live, reconcile_job
from xihe.agent.web.server import create_server
from xihe.integrations.fakes.llm_server import ScriptedLLM
from xihe.tools.codeindex import gitdiff, searchsock
from xihe.tools.codeindex.searchserver import SearchServer
from xihe.tools.codeindex.searchsock import SOCKET_NAME, VERSION, framed, json_string, request_line
from xihe.tools.codeindex.treewatch import TreeWatch

QUESTIONS = ["cancel an order that was not paid in time", "deliver mail", "KubernetesPodAutoscaler"]


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A short directory: a Unix socket's path holds at most 107 bytes (pytest's tmp paths are long)."""
    d = Path(tempfile.mkdtemp(prefix="xs-", dir="/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def repo(make_repo: Callable[..., Path]) -> Path:
    return make_repo({"shop/orders.py": ORDERS_PY, "mail/Mailer.java": MAILER_JAVA})


@pytest.fixture
def served(
    tmp_path: Path, short_dir: Path, llm: ScriptedLLM, clock: FakeClock, db_url: str, repo: Path
) -> Iterator[tuple[App, Path]]:
    """A bot with the code feature, its server's lifespan running (which opens the socket); its config dir."""
    cfg = write_config(tmp_path / "config", llm_url=llm.base_url)
    (cfg / "code.yaml").write_text(f"index_dir: {short_dir / 'index'}\nrepos: [{repo}]\n")
    app = build_app(cfg, clock=clock, database_url=db_url, holder="test-sock")
    reconcile_job(app)
    with TestClient(create_server(app, with_scheduler=False)):
        yield app, cfg


def _search(capsys: pytest.CaptureFixture[str], cfg: Path, repo: Path, *args: str) -> str:
    assert main(["search", "--config", str(cfg), "--repo", str(repo), *args]) == 0
    return capsys.readouterr().out


def _answered(monkeypatch: pytest.MonkeyPatch) -> Callable[[], int]:
    """How many searches the serve answered over the socket (counted around SearchServer.answer)."""
    count = {"n": 0}
    real = SearchServer.answer

    def counting(self: SearchServer, line: bytes | None, uid: int | None) -> dict[str, object]:
        reply = real(self, line, uid)
        count["n"] += "hits" in reply
        return reply

    monkeypatch.setattr(SearchServer, "answer", counting)
    return lambda: count["n"]


def test_the_socket_answers_as_the_local_path_does(served, repo, capsys, monkeypatch) -> None:
    app, cfg = served
    sock = Path(live(app.deps).cfg.index_dir) / SOCKET_NAME  # type: ignore[union-attr]
    assert stat.S_ISSOCK(os.stat(sock).st_mode)
    assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600
    assert os.stat(sock).st_uid == os.getuid()
    _search(capsys, cfg, repo, "--local", "warm")  # validates code.yaml once: the snapshot a client reads
    answered = _answered(monkeypatch)
    for q in QUESTIONS:
        for extra in ([], ["--json"], ["-k", "1"]):
            local = _search(capsys, cfg, repo, "--local", *extra, q)
            before = answered()
            assert _search(capsys, cfg, repo, *extra, q) == local, (q, extra)
            assert answered() == before + 1, "the serve did not answer"
    assert "shop/orders.py" in _search(capsys, cfg, repo, QUESTIONS[0])
    before = answered()  # arguments the fast path leaves to argparse: the serve is asked from there
    assert _search(capsys, cfg, repo, "--js", QUESTIONS[1]) == _search(
        capsys, cfg, repo, "--local", "--json", QUESTIONS[1]
    )
    assert answered() == before + 1


def test_a_changed_tree_is_searched_as_it_is_now(served, repo, capsys) -> None:
    _, cfg = served
    _search(capsys, cfg, repo, "--local", "warm")
    (repo / "shop" / "refunds.py").write_text(
        'def refund_payment(payment):\n    """Give money back to the card."""\n    return payment\n'
    )
    through_serve = _search(capsys, cfg, repo, "--json", "refund_payment money back")
    assert "shop/refunds.py" in through_serve
    assert through_serve == _search(capsys, cfg, repo, "--json", "--local", "refund_payment money back")


def test_a_fresh_process_asks_the_serve_importing_little(served, repo, capsys) -> None:
    _, cfg = served
    local = _search(capsys, cfg, repo, "--local", QUESTIONS[0])
    script = (
        "import sys; from xihe.agent.cli.main import main; "
        f"code = main(['search', '--config', {str(cfg)!r}, '--repo', {str(repo)!r}, {QUESTIONS[0]!r}]); "
        "sys.stdout.flush(); "
        "heavy = ('numpy', 'pydantic', 'xihe.agent.errors', 'xihe.agent.cli.chat', 'xihe.tools.codeindex.index'); "
        "print('LOADED', sorted(m for m in heavy if m in sys.modules), file=sys.stderr); "
        "sys.exit(code)"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == local
    assert "LOADED []" in proc.stderr


def test_a_served_search_imports_nothing_the_interpreter_had_not(served, repo, capsys) -> None:
    """The fast path: beyond what the interpreter loads at start-up, only the socket client."""
    _, cfg = served
    _search(capsys, cfg, repo, "--local", "warm")
    heavy = ["argparse", "json", "socket", "typing", "pathlib", "hashlib", "xihe.agent.cli.code"]
    heavy += ["xihe.agent.cli.terminal", "xihe.tools.codeindex.settings", "xihe.agent.errors"]
    show = f"import sys; print(sorted(m for m in {heavy!r} if m in sys.modules), file=sys.stderr)"
    bare = subprocess.run([sys.executable, "-c", show], capture_output=True, text=True, timeout=60)
    search = (
        "import sys; from xihe.agent.cli.main import main; "
        f"code = main(['--config', {str(cfg)!r}, 'search', '--repo', {str(repo)!r}, '-k', '3', 'order']); "
        f"sys.stdout.flush(); {show}; sys.exit(code)"
    )
    proc = subprocess.run([sys.executable, "-c", search], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == _search(capsys, cfg, repo, "--local", "-k", "3", "order")
    assert proc.stderr.splitlines()[-1] == bare.stderr.strip(), "the fast path imported more"


def test_the_console_command_prints_the_served_answer_whole_and_exits_0(
    served, repo, capsys, monkeypatch
) -> None:
    """As the console script, a served search ends the process at once after flushing (searchfast.leave)."""
    _, cfg = served
    answered = _answered(monkeypatch)
    for extra in ([], ["--json"]):
        local = _search(capsys, cfg, repo, "--local", *extra, "-k", "3", "order")
        cmd = [
            sys.executable,
            "-m",
            "xihe.agent.cli.main",
            "--config",
            str(cfg),
            "search",
            "--repo",
            str(repo),
        ]
        proc = subprocess.run([*cmd, *extra, "-k", "3", "order"], capture_output=True, text=True, timeout=120)
        assert (proc.returncode, proc.stdout, proc.stderr) == (0, local, "")
    assert answered() == 2


def test_the_fast_path_reads_the_arguments_as_argparse_does() -> None:
    common = [
        ["order"],
        ["cancel", "an", "order"],
        ["--json", "-k", "3", "order"],
        ["order", "--json"],
        ["--repo", "r", "--config=c", "where", "is", "it", "-k", "30"],
        ["--config", "a", "--config", "b", "--repo=x", "--repo", "y", "q"],
        ["订单 超时", "--json"],
    ]
    for argv in common:
        got, args = read_args(argv), search_parser().parse_args(argv)
        assert got == (args.config, args.repo, args.json, args.k, " ".join(args.query)), argv
    left_to_argparse = [
        [],
        ["--json"],
        ["--local", "order"],
        ["-h"],
        ["--js", "order"],  # argparse's abbreviation
        ["a", "--json", "b"],  # words split by an option: argparse refuses
        ["-k", "x", "order"],
        ["-k", "-1", "order"],
        ["-k5", "order"],
        ["--repo", "", "order"],
        ["--repo", "--json", "order"],
        ["--", "-order"],
        ["order", "-k"],
    ]
    for argv in left_to_argparse:
        assert read_args(argv) is None, argv


def test_the_request_is_json_as_the_encoder_writes_it() -> None:
    for text in ["plain", 'quote " and \\ back', "tab\tnew\nline\x00\x1f\x7f", "中文 ünï 😀", "\u2028"]:
        assert json_string(text) == json.dumps(text, ensure_ascii=False)
        line = request_line("/r", text, 3, True, "var/index", text)
        assert line is not None and line.endswith(b"\n")
        assert json.loads(line) == {
            "v": VERSION,
            "repo": "/r",
            "query": text,
            "k": 3,
            "json": True,
            "index_dir": "var/index",
            "code_yaml": text,
        }
    assert request_line("/r", "bad \udcff", 3, False, "i", "") is None  # not UTF-8 on the command line
    assert request_line("/r", "q", 3, False, "i", "x" * searchsock.MAX_REQUEST) is None


def test_the_client_refuses_a_serve_of_another_user(served, repo: Path, capsys) -> None:
    app, cfg = served
    index_dir = live(app.deps).cfg.index_dir  # type: ignore[union-attr]
    request = request_line(str(repo.resolve()), "order", 3, False, index_dir, (cfg / "code.yaml").read_text())
    assert request is not None
    printed = _search(capsys, cfg, repo, "--local", "-k", "3", "order")
    assert searchsock.ask(index_dir, request) == printed.encode()
    assert searchsock.ask(index_dir, request, uid=os.getuid() + 1) is None  # its listener is not that user


def test_a_dead_or_lying_socket_falls_back_to_the_local_path(
    tmp_path: Path, short_dir: Path, repo: Path, capsys
) -> None:
    cfg = tmp_path / "conf"
    cfg.mkdir()
    index_dir = short_dir / "index"
    (cfg / "code.yaml").write_text(f"index_dir: {index_dir}\n")
    local = _search(capsys, cfg, repo, "--local", QUESTIONS[0])
    assert "shop/orders.py" in local
    sock = index_dir / SOCKET_NAME
    assert not sock.exists()
    assert _search(capsys, cfg, repo, QUESTIONS[0]) == local  # no serve at all
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # a crashed serve's file: nobody listens
    dead.bind(str(sock))
    dead.close()
    assert sock.exists()
    assert _search(capsys, cfg, repo, QUESTIONS[0]) == local
    sock.unlink()
    lies = [
        b"not json\n",
        b'{"hits": []}\n',
        b"error x\n",
        b"",
        b"ok 5\nabc",
        b"ok 2\nabc",
        b"ok\n",
        b"ok 1\n\xff",
    ]
    for reply in lies:
        liar = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        liar.bind(str(sock))
        liar.listen(1)

        def lie(server: socket.socket = liar, answer: bytes = reply) -> None:
            conn, _ = server.accept()
            conn.recv(65536)
            conn.sendall(answer)
            conn.close()

        t = threading.Thread(target=lie)
        t.start()
        assert _search(capsys, cfg, repo, QUESTIONS[0]) == local, reply
        t.join(5)
        liar.close()
        sock.unlink()


def test_requests_the_serve_refuses(served, repo: Path, tmp_path: Path) -> None:
    app, cfg = served
    indexes = live(app.deps)
    assert indexes is not None
    server = SearchServer(indexes)
    code_yaml = (cfg / "code.yaml").read_text()
    good = {
        "v": VERSION,
        "repo": str(repo.resolve()),
        "query": "order",
        "k": 3,
        "json": False,
        "index_dir": indexes.cfg.index_dir,
        "code_yaml": code_yaml,
    }

    def answer(change: dict[str, object], uid: int | None = os.getuid()) -> dict[str, object]:
        return server.answer(json.dumps(good | change).encode(), uid)

    assert "hits" in answer({})
    assert answer({}, uid=os.getuid() + 1) == {"error": "peer is another user"}
    assert answer({}, uid=None) == {"error": "peer is another user"}
    other = code_yaml + "retrieval:\n  candidates: 7\n"
    assert answer({"code_yaml": other}) == {"error": "code.yaml settings differ from this serve's"}
    assert answer({"code_yaml": "index_dir: [\n"}) == {"error": "code.yaml does not validate"}
    assert answer({"index_dir": "elsewhere"}) == {"error": "code.yaml names another index_dir"}
    assert answer({"json": 1}) == {"error": "json: missing or not a bool"}
    assert answer({"code_yaml": code_yaml.replace(str(repo), str(tmp_path))})["hits"]  # repos aside
    assert server.reply(json.dumps(good | {"k": 0}).encode(), os.getuid()) == b"error k: not in 1..1000\n"
    shown = server.reply(json.dumps(good | {"json": True}).encode(), os.getuid())
    assert json.loads(framed(shown) or b"") == answer({})["hits"]
    assert answer({"repo": str(tmp_path)}) == {"error": "repository not served here"}
    assert answer({"k": 0}) == {"error": "k: not in 1..1000"}
    assert answer({"k": True}) == {"error": "k: missing or not a int"}
    assert answer({"query": " "}) == {"error": "query: empty or over 1000 characters"}
    assert answer({"v": 1}) == {"error": f"protocol version: want {VERSION}"}  # the earlier protocol
    assert server.answer(b"{", os.getuid()) == {"error": "not JSON"}
    (repo / "shop" / "orders.py").write_text(ORDERS_PY + "\n")  # the tree changed: the index needs git
    with indexes.repos[0].build_lock:  # a job refreshing the index: the client should not wait
        assert answer({}) == {"error": "index being refreshed"}
    assert "hits" in answer({})  # the next search checks the tree again (no watch survived the refusal)
    assert server.answer(None, os.getuid()) == {"error": "no request line"}


def test_stopping_removes_only_its_own_socket(served, short_dir: Path) -> None:
    app, _ = served
    indexes = live(app.deps)
    assert indexes is not None
    path = Path(indexes.cfg.index_dir) / SOCKET_NAME
    first_inode = os.stat(path).st_ino
    second = SearchServer(indexes)  # another serve on the same index_dir takes the name over
    assert second.start()
    assert os.stat(path).st_ino != first_inode
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir() if p.name.startswith(".sock-")] == []
    second.stop()
    assert not path.exists()


def test_an_answer_is_used_only_whole() -> None:
    assert framed(b"ok 3\nabc") == b"abc"
    assert framed(b"ok 0\n") == b""
    for bad in (b"ok 4\nabc", b"ok 2\nabc", b"ok\nabc", b"ok -1\n", b"error why\n", b"ok 3", b""):
        assert framed(bad) is None, bad


def test_git_status_gives_head_and_what_differs(make_repo: Callable[..., Path]) -> None:
    root = make_repo({"a.py": "x = 1\n", "b.py": "y = 2\n", "c d.py": "z = 3\n"})
    head = git(root, "rev-parse", "HEAD").strip()
    assert gitdiff.status(root) == gitdiff.Status(head, [])
    (root / "a.py").write_text("x = 2\n")
    git(root, "mv", "b.py", "moved.py")
    (root / "c d.py").unlink()
    (root / "new dir").mkdir()
    (root / "new dir" / "n.py").write_text("n = 1\n")
    (root / ".gitignore").write_text("ignored.py\n")
    (root / "ignored.py").write_text("i = 1\n")
    st = gitdiff.status(root)
    assert st is not None and st.head == head
    assert st.paths == sorted(gitdiff.changes_since(root, head).paths())  # type: ignore[union-attr]
    assert st.paths == [".gitignore", "a.py", "b.py", "c d.py", "moved.py", "new dir/n.py"]
    assert gitdiff.status(root.parent / "nowhere") is None


def test_git_status_before_the_first_commit(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    (tmp_path / "a.py").write_text("x = 1\n")
    assert gitdiff.status(tmp_path) == gitdiff.Status(None, ["a.py"])


def test_the_tree_watch_sees_edits_new_directories_and_commits(make_repo: Callable[..., Path]) -> None:
    root = make_repo({"a.py": "x = 1\n", "pkg/b.py": "y = 2\n"})
    watch = TreeWatch(root)
    assert watch.watching
    assert watch.changed()  # the first look: nobody has checked yet
    assert not watch.changed()
    with open(root / "pkg" / "b.py", "a") as fh:  # an edit in place: no directory entry changes
        fh.write("z = 3\n")
    assert watch.changed()
    assert not watch.changed()
    (root / "new").mkdir()
    assert watch.changed()  # the new directory is watched from here on
    (root / "new" / "c.py").write_text("c = 1\n")
    assert watch.changed()
    assert not watch.changed()
    git(root, "add", "-A")
    git(root, "commit", "-qm", "more")
    assert watch.changed()
    (root / "a.py").unlink()
    assert watch.changed()
    watch.close()
    assert watch.changed() and not watch.watching  # no watch: every look says "maybe", git decides


def test_a_tree_whose_git_is_a_file_is_never_called_unchanged(tmp_path: Path) -> None:
    (tmp_path / ".git").write_text("gitdir: /elsewhere\n")
    watch = TreeWatch(tmp_path)
    assert not watch.watching
    assert watch.changed() and watch.changed()


def test_an_edit_after_a_served_search_is_seen_by_the_next(served, repo: Path, capsys) -> None:
    _, cfg = served
    _search(capsys, cfg, repo, "--local", "warm")
    question = ["--json", "cancel an order that was not paid in time"]
    assert "OrderStateMachine.on_timeout" in _search(capsys, cfg, repo, *question)  # the serve watches now
    (repo / "shop" / "orders.py").write_text("# emptied\n")
    (repo / "shop" / "late.py").write_text('def cancel_unpaid_order(order):\n    """Cancel it."""\n')
    served_now = _search(capsys, cfg, repo, *question)
    assert "OrderStateMachine.on_timeout" not in served_now and "cancel_unpaid_order" in served_now
    assert served_now == _search(capsys, cfg, repo, "--local", *question)
