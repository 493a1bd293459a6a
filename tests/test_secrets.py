"""Every `*_env` key at any depth of every config file names a secret the redactor masks, and log
records mask them in tracebacks too. (The end-to-end canary run is tests/test_secret_canaries.py.)"""

from __future__ import annotations

import logging
import re
import shutil
from pathlib import Path

import pytest

from tests.conftest import REPO
from xihe.agent.app import load_config, secrets_of
from xihe.agent.redact import RedactingFilter, Redactor, excerpt


def env_names_in(directory: Path) -> set[str]:
    """Every `something_env: NAME` in the YAML text, commented-out examples included once uncommented."""
    found = set()
    for path in directory.glob("*.yaml"):
        found |= set(
            re.findall(r"^\s*#?\s*\w+_env:\s*([A-Z][A-Z0-9_]+)", path.read_text(encoding="utf-8"), re.M)
        )
    return found


def test_every_env_key_of_the_shipped_config_is_registered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = tmp_path / "cfg"
    shutil.copytree(REPO / "config", d, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    code = (d / "code.yaml").read_text(
        encoding="utf-8"
    )  # switch on the commented remote embeddings and rerank
    code = code.replace("  kind: wordllama ", "  # kind: wordllama ").replace(
        "  # kind: openai ", "  kind: openai "
    )
    for key in ("base_url", "model", "api_key_env"):
        code = code.replace(f"  # {key}:", f"  {key}:")
    code = code.replace("rerank:\n  enabled: false", "rerank:\n  enabled: true")
    (d / "code.yaml").write_text(code, encoding="utf-8")
    dolphin = (d / "dolphin.yaml").read_text(encoding="utf-8")  # and DolphinScheduler's session login
    dolphin = dolphin.replace("# user: xihe_bot", "user: xihe_bot").replace(
        "# password_env:", "password_env:"
    )
    (d / "dolphin.yaml").write_text(dolphin, encoding="utf-8")
    names = env_names_in(d)
    assert {
        "XIHE_EMBEDDINGS_API_KEY",
        "XIHE_RERANK_API_KEY",
        "XIHE_UI_TOKEN_DAVE",
        "XIHE_WECOM_AIBOT_SECRET",
    } <= names
    for name in names:
        monkeypatch.setenv(name, f"canary-{name.lower()}")
    registered = set(secrets_of(load_config(d)))
    missing = {n for n in names if f"canary-{n.lower()}" not in registered}
    assert not missing, f"not registered with the redactor: {sorted(missing)}"


def test_a_traceback_in_a_log_record_is_masked(caplog: pytest.LogCaptureFixture) -> None:
    redactor = Redactor(["sk-canary-123456"])
    handler = logging.StreamHandler()
    handler.addFilter(RedactingFilter(redactor))
    record = None
    try:
        raise RuntimeError("upstream said: bad key sk-canary-123456")
    except RuntimeError:
        record = logging.LogRecord(
            "x", logging.ERROR, __file__, 1, "failed", None, __import__("sys").exc_info()
        )
    assert handler.filter(record)
    assert "sk-canary-123456" not in logging.Formatter().format(record)
    assert "bad key ***" in logging.Formatter().format(record)


def test_an_upstream_excerpt_masks_the_key_in_plain_and_url_encoded_form() -> None:
    body = '{"error": "Incorrect API key provided: k+y/1234==", "url": "/x?key=k%2By%2F1234%3D%3D"}'
    out = excerpt(body, "k+y/1234==")
    assert "1234" not in out and out.count("***") == 2
