"""A config reload's audit row says what changed and who asked: the files, the keys (never a value),
the new files' digest and the trigger (the job, SIGHUP, or a person's `xihe config reload`)."""

from __future__ import annotations

import hashlib
import json
import signal
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import MakeApp
from xihe.agent.cli.main import main
from xihe.agent.ops.reload import changed_keys, on_sighup, reload_config

FILES = ("xihe.yaml", "access.yaml", "ops.yaml")


def edit(path: Path, change: Any) -> None:
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, allow_unicode=True))


def rows(app: Any) -> list[dict[str, Any]]:
    return app.deps.audit.search(kind="config", limit=20)


def digest_of(directory: Path) -> str:
    files = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in directory.glob("*.y*ml")}
    return hashlib.sha256("".join(f"{n}\0{files[n]}\0" for n in sorted(files)).encode()).hexdigest()


def test_an_applied_reload_names_files_keys_digest_and_trigger(make_app: MakeApp) -> None:
    app = make_app(files=FILES)
    d = app.settings.directory
    edit(
        d / "access.yaml",
        lambda a: a["users"].update(erin={"roles": ["viewer"], "email": "erin@corp.example"}),
    )
    edit(d / "access.yaml", lambda a: a["users"].pop("bob"))
    edit(d / "xihe.yaml", lambda c: c["loop"].update(max_turns=5, max_tool_calls=7))
    assert reload_config(app) == "applied"
    (row,) = rows(app)
    assert row["outcome"] == "reloaded" and row["actor"] == app.deps.holder
    detail = row["detail"]
    assert detail["trigger"] == row["tool"] == "config_reload job"
    assert detail["files"] == ["access.yaml", "xihe.yaml"]
    assert detail["keys"] == {
        "access.yaml": ["-users.bob", "+users.erin"],
        "xihe.yaml": ["loop.max_tool_calls", "loop.max_turns"],
    }
    assert detail["digest"] == row["result_digest"] == digest_of(d)
    assert row["reason"].startswith("access.yaml, xihe.yaml")
    text = json.dumps(row, default=str)
    assert "erin@corp.example" not in text and "12345" not in text  # keys, never values


def test_a_refused_reload_says_the_same_and_why(make_app: MakeApp) -> None:
    app = make_app(files=FILES)
    d = app.settings.directory
    (d / "xihe.yaml").write_text((d / "xihe.yaml").read_text() + "\nloop_typo: 1\n")
    assert reload_config(app) == "refused"
    (row,) = rows(app)
    assert row["outcome"] == "reload_refused" and "loop_typo: Extra inputs" in row["reason"]
    assert row["detail"]["files"] == ["xihe.yaml"] and row["detail"]["keys"] == {"xihe.yaml": ["+loop_typo"]}
    assert row["result_digest"] == digest_of(d)


def test_xihe_config_reload_names_the_person_who_asked(
    make_app: MakeApp, sqlite_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    app = make_app(files=FILES)
    d = app.settings.directory
    monkeypatch.setenv("XIHE_DATABASE_URL", sqlite_url)  # the CLI finds the replicas' store
    edit(d / "access.yaml", lambda a: a["users"]["alice"].update(roles=["operator"]))
    assert main(["config", "reload", str(d), "--user", "erin"]) == 0
    out = capsys.readouterr().out
    assert "reload requested by erin" in out and "within 30 s" in out
    assert reload_config(app) == "applied"  # the next tick of the job on a replica
    applied, requested = rows(app)
    assert requested["outcome"] == "reload_requested" and requested["actor"] == "erin"
    assert applied["actor"] == "erin" and applied["detail"]["trigger"] == "xihe config reload"
    assert applied["detail"]["keys"] == {"access.yaml": ["users.alice.roles"]}
    assert applied["detail"]["replica"] == app.deps.holder

    (d / "access.yaml").write_text("roles: {x: {tools: ['*'], environments: [nowhere]}}\n")
    assert main(["config", "reload", str(d), "--user", "erin"]) == 1  # a broken directory is not requested
    assert "Nothing was requested" in capsys.readouterr().err
    assert len(rows(app)) == 2


def test_sighup_reloads_now(make_app: MakeApp) -> None:
    app = make_app(files=FILES)
    edit(app.settings.directory / "xihe.yaml", lambda c: c["loop"].update(max_turns=3))
    previous = signal.getsignal(signal.SIGHUP)
    try:
        on_sighup(app)
        signal.raise_signal(signal.SIGHUP)
        for thread in threading.enumerate():
            if thread.name == "xihe-sighup-reload":
                thread.join(timeout=30)
    finally:
        signal.signal(signal.SIGHUP, previous)
    assert app.settings.core.loop.max_turns == 3
    (row,) = rows(app)
    assert row["detail"]["trigger"] == "SIGHUP" and row["detail"]["keys"] == {"xihe.yaml": ["loop.max_turns"]}


@pytest.mark.parametrize(
    ("old", "new", "keys"),
    [
        ("a: 1\n", "a: 1\n", []),
        ("entries: [{name: ls, t: 1}, {name: git, t: 2}]\n", "entries: [{name: git, t: 3}]\n",
         ["entries[name=git].t", "-entries[name=ls]"]),
        ("tools: [a, b]\n", "tools: [a]\n", ["tools"]),
        ("a: {b: 1}\n", "a: 2\n", ["a"]),
        (None, "x: 1\n", ["+x"]),
        ("a: 1\n", "a: [unclosed\n", ["(unreadable)"]),
    ],
)  # fmt: skip
def test_changed_keys(old: str | None, new: str, keys: list[str]) -> None:
    assert changed_keys(old, new) == keys
