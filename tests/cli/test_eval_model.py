"""`xihe eval model` against the project's model fake in each server family's mode, through the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from xihe.agent.cli.main import main
from xihe.integrations.fakes.llm_server import ScriptedLLM
from xihe.integrations.fakes.rules_llm import respond

PROFILES = ["openai", "deepseek", "qwen", "vllm", "ollama"]


def config_for(directory: Path, llm: ScriptedLLM, profile: str, **extra: Any) -> Path:
    directory.mkdir()
    section = {"base_url": llm.base_url, "model": "fake-rules", "profile": profile, "max_wait_seconds": 0}
    (directory / "xihe.yaml").write_text(yaml.safe_dump({"llm": {**section, **extra}}))
    return directory


@pytest.mark.parametrize("profile", PROFILES)
def test_every_scenario_passes_three_times_in_every_profile(
    profile: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A window of 8192 tokens (Ollama's num_ctx raised to it, as xihe's tool list needs)."""
    with ScriptedLLM(model="fake-rules", responder=respond, mode=profile, window=8192) as llm:
        cfg = config_for(tmp_path / "cfg", llm, profile, context_tokens=8192)
        code = main(["eval", "model", "--config", str(cfg), "--repeat", "3", "--json"])
        report = json.loads(capsys.readouterr().out)
    assert code == 0, report
    assert report["passed"] and report["pass_rate"] == 1.0 and report["pass_k"] == 1.0
    assert report["profile"] == profile and report["repeat"] == 3
    assert [(s["name"], s["passed"], s["runs"]) for s in report["scenarios"]] == [
        (name, 3, 3)
        for name in (
            "code_question_zh",
            "backfill_confirm",
            "run_status",
            "whitelisted_shell",
            "refused_write",
            "parallel_calls",
            "long_result",
        )
    ]
    assert llm.refused == [] and llm.truncated == []  # every request fitted and was valid
    assert not llm.unexpected


def test_a_profile_that_does_not_match_the_server_fails_with_reasons(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Qwen on vLLM without a tool parser, configured as if it were OpenAI: its text calls never run."""
    with ScriptedLLM(model="fake-rules", responder=respond, mode="qwen") as llm:
        cfg = config_for(tmp_path / "cfg", llm, "openai")
        code = main(["eval", "model", "--config", str(cfg), "--only", "code_question_zh,run_status"])
    out = capsys.readouterr().out
    assert code == 1
    assert "FAIL code_question_zh   0/1  — search_code never ran" in out
    assert "FAIL run_status" in out and "pass^1 0% (0/2 scenarios passed every repeat)" in out


def test_without_an_endpoint_or_with_an_unknown_scenario_it_says_what_is_wrong(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    (cfg / "xihe.yaml").write_text("llm:\n  base_url: ''\n")
    assert main(["eval", "model", "--config", str(cfg)]) == 1
    assert "xihe.yaml: llm.base_url: no model endpoint" in capsys.readouterr().err
    (cfg / "xihe.yaml").write_text("llm:\n  base_url: http://127.0.0.1:9/v1\n")
    assert main(["eval", "model", "--config", str(cfg), "--only", "nope"]) == 1
    assert "unknown scenario(s) nope" in capsys.readouterr().err
