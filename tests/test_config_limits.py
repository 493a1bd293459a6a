"""Inputs YAML accepts but a config must not: duplicate keys, deep nesting, huge files, alias bombs.

Each one gives `file:line: key: problem` or `file: problem` from `xihe config check`, never a
traceback. (How long they take is measured by tests/bench/bench_config_check.py.)
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from yaml.scanner import ScannerError

from tests.conftest import REPO
from xihe.agent.app import load_config, sections
from xihe.agent.cli.main import main
from xihe.agent.errors import ConfigErrors
from xihe.config.load import CORE_SECTIONS
from xihe.config.yamlmodel import MAX_BYTES, MAX_DEPTH, MAX_ERRORS, check_depth


def shipped(tmp_path: Path) -> Path:
    d = tmp_path / "cfg"
    shutil.copytree(REPO / "config", d, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    return d


def check(directory: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["config", "check", str(directory)]) == 1
    return capsys.readouterr().err


# every shipped file (mcp.yaml is not shipped: the MCP client is off until an admin writes one, and
# tests/mcp checks its errors)
SHIPPED = sorted(s.file for s in (*CORE_SECTIONS, *sections()) if (REPO / "config" / s.file).exists())


@pytest.mark.parametrize("file", SHIPPED)
def test_a_duplicate_top_level_key_names_both_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], file: str
) -> None:
    d = shipped(tmp_path)
    path = d / file
    lines = path.read_text(encoding="utf-8").splitlines()
    first = next(i for i, line in enumerate(lines) if line and not line[0].isspace() and line[0] != "#")
    key = lines[first].split(":")[0]
    lines.append(f"{key}: {{}}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    err = check(d, capsys)
    assert f"{file}:{len(lines)}: {key}: duplicate key (first on line {first + 1}" in err, err


def test_appending_enabled_false_to_wecom_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = shipped(tmp_path)
    text = (d / "wecom.yaml").read_text(encoding="utf-8")
    (d / "wecom.yaml").write_text(text + "enabled: false\n", encoding="utf-8")
    err = check(d, capsys)
    first = text.splitlines().index(next(x for x in text.splitlines() if x.startswith("enabled:"))) + 1
    assert f"wecom.yaml:{len(text.splitlines()) + 1}: enabled: duplicate key (first on line {first}" in err


def test_a_nested_duplicate_names_the_full_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "cfg"
    d.mkdir()
    (d / "xihe.yaml").write_text("loop:\n  max_turns: 8\n  max_tool_calls: 3\n  max_turns: 2\n")
    assert "xihe.yaml:4: loop.max_turns: duplicate key (first on line 2" in check(d, capsys)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("llm: " + "[" * 10_000 + "]" * 10_000 + "\n", "xihe.yaml:1: nesting"),
        ("llm: " + "{a: " * 10_000 + "1" + "}" * 10_000 + "\n", "xihe.yaml:1: nesting"),
        ("".join("  " * i + f"k{i}:\n" for i in range(500)) + "  " * 500 + "x: 1\n", "xihe.yaml:65: nesting"),
    ],
    ids=["flow-lists", "flow-maps", "block-maps"],
)
def test_deep_nesting_is_an_error_not_a_recursion_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, where: str
) -> None:
    d = tmp_path / "cfg"
    d.mkdir()
    (d / "xihe.yaml").write_text(text)
    err = check(d, capsys)
    assert where in err and f"nesting deeper than {MAX_DEPTH} levels" in err, err[:500]


class LibyamlDepthLimit(yaml.SafeLoader):
    """PyYAML's pure-Python loader with the nesting limit libyaml 0.2.6 enforces (PyYAML 6.0.4's wheels).

    libyaml raises "exceeded maximum nesting depth" from its scanner, which reads a flow collection's
    opening brackets ahead of the parser; so the error arrives before our own event count gets to 65.
    """

    LIMIT = 1000

    def _deeper(self) -> None:
        if self.flow_level >= self.LIMIT:
            mark = self.get_mark()
            raise ScannerError("while increasing flow level", mark, "exceeded maximum nesting depth", mark)

    def fetch_flow_sequence_start(self) -> None:
        self._deeper()
        super().fetch_flow_sequence_start()

    def fetch_flow_mapping_start(self) -> None:
        self._deeper()
        super().fetch_flow_mapping_start()


@pytest.mark.parametrize("loader", [yaml.SafeLoader, LibyamlDepthLimit], ids=["own-count", "libyaml-limit"])
@pytest.mark.parametrize(
    "text",
    ["llm: " + "[" * 2_000 + "]" * 2_000 + "\n", "llm:\n  x: " + "{a: " * 2_000 + "1" + "}" * 2_000 + "\n"],
    ids=["flow-lists", "flow-maps"],
)
def test_deep_nesting_reads_the_same_whichever_side_notices(loader: type, text: str) -> None:
    with pytest.raises(ConfigErrors) as caught:
        check_depth(text, "xihe.yaml", loader)
    line = text.count("\n", 0, text.index("[" if "[" in text else "{")) + 1
    assert [str(e) for e in caught.value.errors] == [
        f"xihe.yaml:{line}: nesting deeper than {MAX_DEPTH} levels"
    ]


def test_the_simulated_limit_is_what_the_installed_libyaml_may_do() -> None:
    """The simulation raises the scanner error libyaml does: before our count sees 65 levels."""
    text = "llm: " + "[" * 2_000 + "]" * 2_000 + "\n"
    opened = 0
    with pytest.raises(ScannerError, match="exceeded maximum nesting depth"):
        for event in yaml.parse(text, Loader=LibyamlDepthLimit):
            opened += isinstance(event, yaml.CollectionStartEvent)
    assert opened < MAX_DEPTH


def test_a_file_over_the_cap_is_refused_by_size(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "cfg"
    d.mkdir()
    (d / "xihe.yaml").write_text("".join(f"unknown_{i}: {i}\n" for i in range(400_000)))  # ~5.6 MB
    err = check(d, capsys)
    assert "xihe.yaml: file is " in err and f"limited to {MAX_BYTES:,}" in err, err


def test_many_unknown_keys_are_listed_up_to_a_cap(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "cfg"
    d.mkdir()
    (d / "xihe.yaml").write_text("".join(f"unknown_{i}: {i}\n" for i in range(10_000)))
    err = check(d, capsys).splitlines()
    assert err[0].endswith("xihe.yaml:1: unknown_0: Extra inputs are not permitted")
    assert err[MAX_ERRORS - 1].endswith(
        f"xihe.yaml:{MAX_ERRORS}: unknown_{MAX_ERRORS - 1}: Extra inputs are not permitted"
    )
    assert err[MAX_ERRORS].endswith(f"xihe.yaml: ... and {10_000 - MAX_ERRORS} more problem(s) not shown")


def test_an_alias_bomb_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    d = tmp_path / "cfg"
    d.mkdir()
    (d / "xihe.yaml").write_text("\n".join(lines) + "\n")
    assert "xihe.yaml: the document expands to more than" in check(d, capsys)


def test_a_recursive_alias_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "cfg"
    d.mkdir()
    (d / "xihe.yaml").write_text("tools: &t [read_artifact, *t]\n")
    assert "xihe.yaml: invalid YAML: an alias refers to the node that contains it" in check(d, capsys)


def test_merge_keys_still_override_without_a_duplicate_error(tmp_path: Path) -> None:

    d = tmp_path / "cfg"
    d.mkdir()
    (d / "xihe.yaml").write_text("loop:\n  <<: {max_turns: 3, max_tool_calls: 4}\n  max_turns: 5\n")
    loop = load_config(d).core.loop
    assert (loop.max_turns, loop.max_tool_calls) == (5, 4)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("? [a]: b\n", "xihe.yaml:1: invalid YAML: found unhashable key"),
        (
            "tools: !!python/object:os.system x\n",
            "xihe.yaml:1: invalid YAML: could not determine a constructor",
        ),
        ('system_prompt: !!binary "zz"\n', "xihe.yaml:1: invalid YAML: failed to decode base64 data"),
        (
            "a: 1\nb: \x00\n",
            "xihe.yaml:2: invalid YAML: control characters are not allowed (character #x0000)",
        ),
        ("a: &x 1\nb: *y\n", "xihe.yaml:2: invalid YAML: found undefined alias"),
        ("- - -\n", "xihe.yaml:1: the top level must be a mapping"),
    ],
)
def test_odd_yaml_is_a_config_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, expected: str
) -> None:
    d = tmp_path / "cfg"
    d.mkdir()
    (d / "xihe.yaml").write_text(text)
    assert expected in check(d, capsys)


def test_the_command_never_prints_a_traceback(tmp_path: Path) -> None:
    d = tmp_path / "cfg"
    d.mkdir()
    (d / "xihe.yaml").write_text("llm: " + "[" * 10_000 + "]" * 10_000 + "\n")
    (d / "access.yaml").write_bytes(b"roles: \xff\xfe\n")
    result = subprocess.run(
        [sys.executable, "-m", "xihe.agent.cli.main", "config", "check", str(d)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and "access.yaml: not UTF-8" in result.stderr, result.stderr
