"""constraints.txt is the lock CI tests: it pins every dependency inside pyproject's ranges, README's
install commands use it, and .ci/lockdiff.py names what an unconstrained install moved."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.conftest import REPO

LOCKDIFF = REPO / ".ci" / "lockdiff.py"


def locked() -> dict[str, str]:
    out = {}
    for line in (REPO / "constraints.txt").read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            out[canonicalize_name(name)] = version
    return out


def requirements() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    return [Requirement(r) for r in (*project["dependencies"], *extras["test"], *extras["bench"])]


@pytest.mark.parametrize("req", requirements(), ids=str)
def test_every_dependency_is_pinned_inside_its_range(req: Requirement) -> None:
    pins = locked()
    name = canonicalize_name(req.name)
    assert name in pins, f"{req.name} is in pyproject.toml but not in constraints.txt: run .ci/lock"
    assert req.specifier.contains(pins[name], prereleases=True), f"{req.name}=={pins[name]} is outside {req}"


def test_both_readme_commands_install_from_the_lock() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    first = readme.split("```bash\n", 1)[1].splitlines()[0]
    assert "pip install . -c constraints.txt" in first  # as deployed: a wheel, not editable
    assert "-c constraints.txt" in (REPO / ".ci" / "setup").read_text(encoding="utf-8")
    assert "bash .ci/upgrade-check" in (REPO / ".ci" / "run").read_text(encoding="utf-8")


def lockdiff(tmp_path: Path, lock: str, freeze: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "constraints.txt").write_text(lock)
    (tmp_path / "freeze.txt").write_text(freeze)
    return subprocess.run(
        [sys.executable, str(LOCKDIFF), str(tmp_path / "constraints.txt"), str(tmp_path / "freeze.txt")],
        capture_output=True,
        text=True,
        check=False,
    )


def test_lockdiff_names_each_moved_package(tmp_path: Path) -> None:
    # the shapes `pip freeze` writes: mixed case, underscores, an editable line, a comment
    lock = "# the lock\nPyYAML==6.0.3\ntyping_extensions==4.15.0\nrequests==2.34.2\nsix==1.16.0\n"
    freeze = (
        "pyyaml==6.0.4\ntyping-extensions==4.15.0\nrequests==2.34.2\nnew-thing==1.0\n"
        "# Editable Git install with no remote (xihe==0.1.0)\n-e /work/main\n"
    )
    result = lockdiff(tmp_path, lock, freeze)
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        "new-thing: new dependency 1.0",
        "pyyaml: locked 6.0.3 -> installed 6.0.4",
        "six: locked 1.16.0, no longer installed",
    ]


def test_lockdiff_is_quiet_when_the_install_is_the_lock(tmp_path: Path) -> None:
    result = lockdiff(tmp_path, "PyYAML==6.0.4\n", "pyyaml==6.0.4\n")
    assert (result.returncode, result.stdout.strip()) == (0, "")
