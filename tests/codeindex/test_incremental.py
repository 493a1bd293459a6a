"""Incremental updates from git (add, modify, delete, rename, uncommitted), reconcile, persistence, walking."""

from __future__ import annotations

from pathlib import Path

from tests.codeindex.conftest import MAILER_JAVA, ORDERS_PY, git
from xihe.config.code import CodeConfig
from xihe.tools.codeindex.index import CodeIndex
from xihe.tools.codeindex.service import index_dir, index_repo, open_index, reindex_changed


def quals(idx: CodeIndex, path: str) -> set[str]:
    return {u.qualname for u in idx.live_units if u.path == path}


def test_first_run_builds_and_records_commit(make_repo, cfg, embedder) -> None:
    repo = make_repo({"app/orders.py": ORDERS_PY, "src/Mailer.java": MAILER_JAVA})
    idx, rep = index_repo(repo, cfg, embedder=embedder)
    assert rep.mode == "full" and rep.commit == git(repo, "rev-parse", "HEAD").strip()
    assert quals(idx, "app/orders.py") >= {
        "OrderStateMachine",
        "OrderStateMachine.on_timeout",
        "notify_owner",
    }
    assert (index_dir(repo, cfg) / "meta.json").exists()


def test_restart_loads_instead_of_rebuilding(make_repo, cfg, embedder) -> None:
    repo = make_repo({"app/orders.py": ORDERS_PY})
    first, _ = index_repo(repo, cfg, embedder=embedder)
    _again, rep = index_repo(repo, cfg, embedder=embedder)
    assert rep.mode == "unchanged" and rep.files_changed == []
    loaded = open_index(repo, cfg, embedder)
    assert loaded is not None
    assert [u.qualname for u in loaded.live_units] == [u.qualname for u in first.live_units]
    assert loaded.search("cancel unpaid order", 3).hits[0].unit.qualname == "OrderStateMachine.on_timeout"


def test_add_modify_delete_rename_reparse_only_those_files(make_repo, cfg, embedder) -> None:
    repo = make_repo(
        {
            "app/orders.py": ORDERS_PY,
            "src/Mailer.java": MAILER_JAVA,
            "app/old.py": "def legacy():\n    pass\n",
            "app/keep.py": "def untouched():\n    return 1\n",
        }
    )
    index_repo(repo, cfg, embedder=embedder)
    (repo / "app/new.py").write_text('def refund(order):\n    """Give the money back."""\n', encoding="utf-8")
    (repo / "app/orders.py").write_text(
        ORDERS_PY.replace("def notify_owner", "def notify_customer"), encoding="utf-8"
    )
    (repo / "src/Mailer.java").unlink()
    git(repo, "mv", "app/old.py", "app/renamed.py")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "change")
    idx, rep = index_repo(repo, cfg, embedder=embedder)
    assert rep.mode == "incremental"
    assert set(rep.files_changed) == {
        "app/new.py",
        "app/orders.py",
        "src/Mailer.java",
        "app/old.py",
        "app/renamed.py",
    }
    assert "app/keep.py" not in rep.files_changed
    assert quals(idx, "app/new.py") == {"refund"}
    assert "notify_customer" in quals(idx, "app/orders.py") and "notify_owner" not in quals(
        idx, "app/orders.py"
    )
    assert quals(idx, "src/Mailer.java") == set() and "src/Mailer.java" not in idx.files
    assert quals(idx, "app/renamed.py") == {"legacy"} and "app/old.py" not in idx.files
    assert rep.commit == git(repo, "rev-parse", "HEAD").strip()
    # what was saved is what a restart sees
    loaded = open_index(repo, cfg, embedder)
    assert (
        loaded is not None and quals(loaded, "app/new.py") == {"refund"} and "app/old.py" not in loaded.files
    )
    assert loaded.search("refund give money back", 1).hits[0].unit.qualname == "refund"


def test_uncommitted_and_untracked_changes_and_their_revert(make_repo, cfg, embedder) -> None:
    repo = make_repo({"app/orders.py": ORDERS_PY})
    index_repo(repo, cfg, embedder=embedder)
    (repo / "app/scratch.py").write_text("def draft():\n    pass\n", encoding="utf-8")
    (repo / "app/orders.py").write_text(ORDERS_PY + "\ndef extra():\n    pass\n", encoding="utf-8")
    idx, rep = index_repo(repo, cfg, embedder=embedder)
    assert set(rep.files_changed) == {"app/scratch.py", "app/orders.py"}
    assert "extra" in quals(idx, "app/orders.py") and quals(idx, "app/scratch.py") == {"draft"}
    # back to HEAD: git diff shows nothing now, yet the index must drop what it took from the dirty tree
    (repo / "app/scratch.py").unlink()
    (repo / "app/orders.py").write_text(ORDERS_PY, encoding="utf-8")
    idx, rep = index_repo(repo, cfg, embedder=embedder)
    assert "extra" not in quals(idx, "app/orders.py") and "app/scratch.py" not in idx.files


def test_reconcile_without_git_compares_hashes(make_repo, cfg, embedder) -> None:
    repo = make_repo({"a.py": "def one():\n    pass\n", "b.py": "def two():\n    pass\n"}, use_git=False)
    index_repo(repo, cfg, embedder=embedder)
    (repo / "a.py").write_text("def uno():\n    pass\n", encoding="utf-8")
    (repo / "b.py").unlink()
    (repo / "c.go").write_text("package c\n\nfunc Three() {}\n", encoding="utf-8")
    idx, rep = index_repo(repo, cfg, embedder=embedder)
    assert rep.mode == "reconcile" and set(rep.files_changed) == {"a.py", "b.py", "c.go"}
    assert {u.qualname for u in idx.live_units if u.kind != "module"} == {"uno", "Three"}


def test_reindex_changed_for_webhook_paths(make_repo, cfg, embedder) -> None:
    repo = make_repo({"a.py": "def one():\n    pass\n"})
    index_repo(repo, cfg, embedder=embedder)
    (repo / "a.py").write_text("def one_renamed():\n    pass\n", encoding="utf-8")
    rep = reindex_changed(repo, ["a.py", "gone.py"], cfg, embedder)
    assert rep.files_changed == ["a.py"]
    loaded = open_index(repo, cfg, embedder)
    assert loaded is not None and {u.qualname for u in loaded.live_units} == {"one_renamed"}


def test_compaction_after_many_updates_keeps_results(make_repo, cfg, embedder) -> None:
    repo = make_repo({"a.py": "def alpha():\n    pass\n", "b.py": "def beta():\n    pass\n"}, use_git=False)
    idx, _ = index_repo(repo, cfg, embedder=embedder)
    for i in range(5):
        (repo / "a.py").write_text(f"def alpha_{i}():\n    pass\n", encoding="utf-8")
        idx.update_files(["a.py"])
    assert len(idx.units) == len(idx.live_units)  # dead slots were reclaimed
    assert idx.search("beta", 1).hits[0].unit.qualname == "beta"
    assert idx.search("alpha_4", 1).hits[0].unit.qualname == "alpha_4"


def test_walk_respects_gitignore_vendor_binary_generated_and_size(
    make_repo, tmp_path: Path, embedder
) -> None:
    big = "x = 1\n" * 200_000
    repo = make_repo(
        {
            ".gitignore": "build_out/\n*.log.py\n",
            "pkg/.gitignore": "secret.py\n",
            "pkg/ok.py": "def ok():\n    pass\n",
            "pkg/secret.py": "def hidden():\n    pass\n",
            "build_out/gen.py": "def gen():\n    pass\n",
            "node_modules/lib/index.js": "function vendored() {}\n",
            "vendor/x.go": "package x\nfunc V() {}\n",
            "api_pb2.py": "def generated():\n    pass\n",
            "gen.go": "// Code generated by protoc. DO NOT EDIT.\npackage gen\nfunc G() {}\n",
            "big.py": big,
            "notes.md": "# Notes\nhow we deploy\n",
            "debug.log.py": "def noise():\n    pass\n",
        },
        use_git=False,
    )
    (repo / "blob.py").write_bytes(b"\x00\x01binary")
    cfg = CodeConfig(index_dir=str(tmp_path / "index"))
    idx, _ = index_repo(repo, cfg, embedder=embedder)
    assert set(idx.files) == {".gitignore", "pkg/ok.py", "notes.md"} - {".gitignore"}
