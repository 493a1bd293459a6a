"""`xihe demo` is the shop window: it must keep working, end to end, on the loopback fakes."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO


def test_demo_plays_every_scene() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "agent.cli", "demo"], capture_output=True, text=True, cwd=REPO, timeout=300
    )
    out = result.stdout
    assert result.returncode == 0, out[-3000:] + result.stderr[-3000:]
    assert "agent/pending.py" in out  # a cited path that exists
    assert 'complementStartDate":"20' in out and "ended SUCCESS" in out  # backfill followed to the end
    assert "waiting for an approver" in out and "ended FAILURE" in out and "<@bob>" in out  # P0 alert
    assert "[sandbox: " in out and "path traversal" in out and "not a whitelisted program" in out
    assert "interrupted: the process stopped during this step" in out and "task 5 done" in out
    assert "tool:1:0 #1 done    run_shell_command" in out and "tool:1:0 #2" not in out  # not redone
    assert "Traceback" not in out + result.stderr
