"""The built wheel carries every template, stylesheet, YAML file and question set the product reads."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = {
    "xihe/config": REPO / "config",
    "xihe/agent/alerts/templates": REPO / "agent/alerts/templates",
    "xihe/agent/web/ui/templates": REPO / "agent/web/ui/templates",
    "xihe/agent/web/ui/static": REPO / "agent/web/ui/static",
    "xihe/tools/codeindex/evalsets": REPO / "tools/codeindex/evalsets",
}


def test_the_wheel_ships_the_data_files_without_packaging_warnings(tmp_path):
    src = tmp_path / "src"  # a copy: building in the checkout would leave build/ there, stale files and all
    for folder in ("agent", "tools", "integrations", "config"):
        shutil.copytree(REPO / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(tmp_path), str(src)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "absent from the `packages` configuration" not in build.stdout + build.stderr
    (wheel,) = tmp_path.glob("xihe-*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    for prefix, folder in DATA.items():
        files = [
            p
            for p in folder.iterdir()
            if p.is_file() and p.suffix in {".yaml", ".j2", ".html", ".css", ".json"}
        ]
        assert files, folder
        for f in files:
            assert f"{prefix}/{f.name}" in shipped, f"{f.name} is missing from the wheel"
    assert "xihe/agent/app.py" in shipped
