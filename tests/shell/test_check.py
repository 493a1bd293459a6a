"""An entry's `check:` command, run in the real sandbox, answers whether an interrupted write happened."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import write_config
from tests.shell.conftest import PYTHON, bwrap_works, config_text
from xihe.agent.app import build_app
from xihe.agent.clock import FakeClock
from xihe.agent.errors import OutcomeUnknown
from xihe.agent.registry import ToolContext
from xihe.agent.shell.feature import service
from xihe.integrations.fakes.llm_server import ScriptedLLM

ENTRY = f"""
  - name: marked
    description: a write whose check exits with the given code (test only)
    workspace: repo
    risk: write
    argv: [{PYTHON}, -c, "pass", "{{code}}"]
    check: [{PYTHON}, -c, "import sys; sys.exit(int(sys.argv[1]))", "{{code}}"]
    args:
      code: {{type: integer, min: 0, max: 3, description: the check's exit code}}
"""


@pytest.mark.skipif(not bwrap_works(), reason="bubblewrap cannot create namespaces here")
def test_check_exit_codes_mean_happened_not_happened_and_cannot_tell(
    tmp_path: Path, llm: ScriptedLLM, clock: FakeClock, sqlite_url: str, workspace: Path
) -> None:
    cfg = write_config(tmp_path / "cfg", llm_url=llm.base_url)
    (cfg / "shell.yaml").write_text(config_text(workspace) + ENTRY)
    app = build_app(cfg, clock=clock, database_url=sqlite_url, holder="test")
    svc = service(app.deps)
    assert svc is not None
    task = app.deps.tasks.create(kind="chat", owner="alice", conversation="c", goal="g", now=clock())
    ctx = ToolContext(app.deps, task.id, "tool:1:0", "alice", "c", clock())
    spec = app.registry.get("run_shell_command")
    assert spec.lookup is not None

    def look(command: str, **args: object) -> object:
        return spec.lookup(spec.args.model_validate({"command": command, "args": args}), ctx)  # type: ignore[misc]

    found = look("marked", code=0)
    assert (
        isinstance(found, str)
        and "its check says it already happened" in found
        and "[sandbox: bwrap]" in found
    )
    assert look("marked", code=1) is None  # did not happen: safe to run
    with pytest.raises(OutcomeUnknown, match="its check exited 2"):
        look("marked", code=2)
    with pytest.raises(OutcomeUnknown, match="'py_write' has no check: command"):
        look("py_write", code="print(1)")
    checks = [e for e in app.deps.audit.search(kind="shell") if e["outcome"] == "check"]
    assert sorted(e["detail"]["exit_code"] for e in checks) == [0, 1, 2]  # every check run is audited


STARVED_UID = 61977  # a command uid no other test uses
STARVED = f"""
  - name: starved
    description: a write whose check runs under a uid with no process left (test only)
    workspace: repo
    risk: write
    argv: [{PYTHON}, -c, "pass"]
    check: [{PYTHON}, -c, "import sys; sys.exit(0)"]
    limits: {{cpu_seconds: 20, memory_mb: 1024, processes: 4, file_size_mb: 4, tmp_size_mb: 16, max_output_mb: 4}}
run_as_uids: {{first: {STARVED_UID}, count: 1}}
cgroup: none
"""


@pytest.fixture
def starved_uid() -> Iterator[int]:
    """STARVED_UID already running as many processes as the entry's limit allows (RLIMIT_NPROC)."""
    holders = [
        subprocess.Popen(
            ["setpriv", f"--reuid={STARVED_UID}", f"--regid={STARVED_UID}", "--clear-groups", "sleep", "60"]
        )
        for _ in range(4)
    ]
    try:
        yield STARVED_UID
    finally:
        for p in holders:
            p.kill()
            p.wait()


@pytest.mark.skipif(
    not bwrap_works() or os.geteuid() != 0,
    reason="needs bubblewrap, and root to run processes as the command uid",
)
def test_a_check_the_sandbox_never_started_is_unknown_not_did_not_happen(
    tmp_path: Path, llm: ScriptedLLM, clock: FakeClock, sqlite_url: str, workspace: Path, starved_uid: int
) -> None:
    # bwrap cannot clone under the exhausted uid and exits 1 itself: the code a check uses for "did not
    # happen". Reading it that way would run the write a second time.
    cfg = write_config(tmp_path / "cfg", llm_url=llm.base_url)
    (cfg / "shell.yaml").write_text(config_text(workspace) + STARVED)
    app = build_app(cfg, clock=clock, database_url=sqlite_url, holder="test")
    task = app.deps.tasks.create(kind="chat", owner="alice", conversation="c", goal="g", now=clock())
    ctx = ToolContext(app.deps, task.id, "tool:1:0", "alice", "c", clock())
    spec = app.registry.get("run_shell_command")
    assert spec.lookup is not None
    with pytest.raises(
        OutcomeUnknown, match=r"the sandbox did not start it .*Resource temporarily unavailable"
    ):
        spec.lookup(spec.args.model_validate({"command": "starved", "args": {}}), ctx)
    shown = spec.run(spec.args.model_validate({"command": "starved", "args": {}}), ctx)
    assert "the command did not run: the sandbox failed before starting it" in shown
    (record,) = [e for e in app.deps.audit.search(kind="shell") if e["outcome"] == "sandbox_failed"]
    assert "Resource temporarily unavailable" in record["detail"]["sandbox_error"]
