"""`xihe --help` stays fast: it imports none of the heavy libraries a command needs when it runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

HEAVY = {"sqlalchemy", "pydantic", "openai", "numpy", "starlette", "yaml", "requests", "apscheduler"}


def test_help_imports_no_heavy_library() -> None:
    code = (
        "import contextlib, io, json, sys\n"
        "from xihe.agent.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    main(['--help'])\n"
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({sorted(HEAVY)!r}))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=dict(os.environ)
    ).stdout
    assert json.loads(out) == []


def test_a_chat_imports_nothing_its_conversation_has_not_asked_for(tmp_path) -> None:
    """`xihe chat` on the shipped core config, quitting at once: no model client, no web framework, no
    retry library (its first timeout imports it), no fuzzy matcher (a mistyped command does)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    config = tmp_path / "config"
    config.mkdir()
    (config / "access.yaml").write_text((root / "config" / "access.yaml").read_text(encoding="utf-8"))
    text = (root / "config" / "xihe.yaml").read_text(encoding="utf-8")
    (config / "xihe.yaml").write_text(
        text.replace('\n  base_url: ""', '\n  base_url: "http://127.0.0.1:9/v1"', 1)
    )
    code = (
        "import json, sys\n"
        "from xihe.agent.cli.main import main\n"
        f"code = main(['chat', '--config', {str(config)!r}, '--user', 'alice'])\n"
        "print(json.dumps([code, sorted({m.split('.')[0] for m in sys.modules})]))\n"
    )
    env = dict(os.environ, XIHE_DATABASE_URL=f"sqlite:///{tmp_path / 'chat.db'}")
    run = subprocess.run(
        [sys.executable, "-c", code], input="/quit\n", capture_output=True, text=True, check=True, env=env
    )
    code, modules = json.loads(run.stdout.splitlines()[-1])
    assert code == 0 and "sqlalchemy" in modules  # it did start: the store is open
    assert {"openai", "starlette", "tenacity", "rapidfuzz"} & set(modules) == set()
