"""An update judges the paths it is given by the .gitignore files above them only (no walk of the
tree), with the verdicts of the whole tree's rules; a directory's name is never read as a pattern."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from xihe.config.code import CodeConfig
from xihe.tools.codeindex.walk import IgnoreRules, walk_repo

FILES = {
    ".gitignore": "*.tmp.py\nbuild_out/\n!keep.tmp.py\n",
    "a/.gitignore": "secret.py\n/top_only.py\n!b/again.tmp.py\n",
    "a/secret.py": "x = 1\n",
    "a/top_only.py": "x = 1\n",
    "a/b/top_only.py": "x = 1\n",
    "a/b/secret.py": "x = 1\n",
    "a/b/again.tmp.py": "x = 1\n",
    "a/b/other.tmp.py": "x = 1\n",
    "a/b/.gitignore": "!secret.py\nlocal.py\n",
    "a/b/local.py": "x = 1\n",
    "a/b/c/local.py": "x = 1\n",
    "a/keep.tmp.py": "x = 1\n",
    "x[1]/.gitignore": "foo.py\n",
    "x[1]/foo.py": "x = 1\n",
    "x1/foo.py": "x = 1\n",
    "#d/.gitignore": "bar.py\n",
    "#d/bar.py": "x = 1\n",
    "bar.py": "x = 1\n",
    "build_out/gen.py": "x = 1\n",
    "node_modules/.gitignore": "!*\n",
    "node_modules/m.py": "x = 1\n",
    "plain.py": "x = 1\n",
}


def test_rules_of_the_named_paths_judge_them_as_the_whole_trees_do(
    make_repo: Callable[..., Path], tmp_path: Path
) -> None:
    repo = make_repo(FILES, use_git=False)
    (repo / "ln").symlink_to(repo / "a", target_is_directory=True)
    cfg = CodeConfig(index_dir=str(tmp_path / "index")).walk
    whole = IgnoreRules(repo, cfg)
    everything = sorted(
        os.path.relpath(os.path.join(d, f), repo).replace(os.sep, "/")
        for d, _, fs in os.walk(repo)
        for f in fs
    )
    verdicts = {rel: whole.ignored(rel) for rel in everything}
    assert verdicts == {rel: IgnoreRules(repo, cfg, [rel]).ignored(rel) for rel in everything}
    assert verdicts == {rel: IgnoreRules(repo, cfg, everything).ignored(rel) for rel in everything}
    # the cases the tree holds, so the comparison above covers them
    assert verdicts["a/secret.py"] and not verdicts["a/b/secret.py"]  # re-included below
    assert verdicts["a/top_only.py"] and not verdicts["a/b/top_only.py"]  # anchored to a/
    assert verdicts["a/b/other.tmp.py"] and not verdicts["a/b/again.tmp.py"]
    assert verdicts["a/b/local.py"] and verdicts["a/b/c/local.py"] and not verdicts["a/keep.tmp.py"]
    assert verdicts["node_modules/m.py"] and verdicts["build_out/gen.py"]
    assert IgnoreRules(repo, cfg, ["ln/secret.py"]).ignored("ln/secret.py") == whole.ignored("ln/secret.py")
    assert not IgnoreRules(repo, cfg, ["../x.py"]).ignored("plain.py")  # nothing above the root is read


def test_a_directory_name_is_not_a_pattern(make_repo: Callable[..., Path], tmp_path: Path) -> None:
    """`x[1]/.gitignore` applies under `x[1]/`, not under `x1/`; `#d/.gitignore` is not a comment."""
    repo = make_repo(FILES, use_git=False)
    found = set(walk_repo(repo, CodeConfig(index_dir=str(tmp_path / "index")).walk))
    assert "x1/foo.py" in found and "x[1]/foo.py" not in found
    assert "bar.py" in found and "#d/bar.py" not in found
    assert "plain.py" in found
