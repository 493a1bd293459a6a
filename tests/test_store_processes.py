"""Several `xihe` processes opening one fresh SQLite store at the same moment all succeed.

`xihe serve` and `xihe chat` started together on a new store used to race on the migrations
(`UNIQUE constraint failed: schema_migrations.version`, `table ... already exists`).

Each worker is a real OS process that has already imported the CLI and waits on its stdin; the
test hands every worker the same fresh database file at once, each runs `xihe audit search`
(which opens and migrates the store) and answers with its exit code and error output. Keeping
the workers alive across rounds lines the processes up closer than fresh interpreter starts
would, which is what makes the race show.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from sqlalchemy import func, select

from tests.conftest import write_config
from xihe.agent.db import make_engine
from xihe.agent.migrations import MIGRATIONS, schema_migrations

WORKERS, ROUNDS = 3, 20

WORKER = """
import contextlib, io, json, os, sys
import xihe.agent.app, xihe.agent.cli.main
print("ready", flush=True)
for line in sys.stdin:
    os.environ["XIHE_DATABASE_URL"] = line.strip()
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = xihe.agent.cli.main.main(["--config", sys.argv[1], "audit", "search", "--limit", "1"])
    except BaseException as exc:
        code, err = 1, io.StringIO(f"{type(exc).__name__}: {exc}")
    print(json.dumps({"code": code, "err": err.getvalue()[-300:]}), flush=True)
"""


def test_processes_opening_a_fresh_sqlite_store_at_once_all_succeed(tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "cfg")
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(cfg)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(WORKERS)
    ]
    try:
        for w in workers:
            assert w.stdout is not None and w.stdout.readline().strip() == "ready"
        for n in range(ROUNDS):
            url = f"sqlite:///{tmp_path / f'round{n}.db'}"
            for w in workers:
                assert w.stdin is not None
                w.stdin.write(url + "\n")
                w.stdin.flush()
            answers = [json.loads(w.stdout.readline()) for w in workers if w.stdout is not None]
            failures = [(n, a["err"]) for a in answers if a["code"] != 0]
            assert failures == [], f"round {n}: {len(failures)} of {WORKERS} opens failed: {failures}"
            engine = make_engine(url)
            with engine.connect() as conn:
                rows = conn.execute(select(func.count()).select_from(schema_migrations)).scalar()
            engine.dispose()
            assert rows == len(MIGRATIONS), f"round {n}: {rows} migrations recorded"
    finally:
        for w in workers:
            assert w.stdin is not None
            w.stdin.close()
            w.wait(timeout=30)
