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
