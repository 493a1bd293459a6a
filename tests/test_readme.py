"""README's first command works on a fresh machine: a new virtual environment, install, demo."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO


def first_command(readme: str) -> str:
    """The first line of the first bash block, without its trailing comment."""
    block = re.search(r"```bash\n(.*?)```", readme, re.S)
    assert block, "README has no ```bash block"
    return block.group(1).splitlines()[0].split("  #", 1)[0].strip()


def test_first_command_is_the_venv_install_and_demo() -> None:
    command = first_command((REPO / "README.md").read_text(encoding="utf-8"))
    assert command.startswith("python3 -m venv .venv") and command.endswith("xihe demo")


@pytest.mark.slow
def test_first_command_runs_in_a_fresh_copy(tmp_path: Path) -> None:
    command = first_command((REPO / "README.md").read_text(encoding="utf-8"))
    copy = tmp_path / "xihe"
    shutil.copytree(
        REPO,
        copy,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "var", "__pycache__", "*.egg-info", ".*_cache", "build"
        ),
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PIP_USER")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    result = subprocess.run(
        ["bash", "-c", command], cwd=copy, env=env, capture_output=True, text=True, timeout=1200
    )
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-4000:]
    assert "Every reply above came through the real loop" in out, out[-4000:]
    assert (copy / ".venv" / "bin" / "xihe").exists()  # installed into the new environment, not the system
