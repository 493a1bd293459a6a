"""The `openai` client is imported by the first model request, not by building the bot's client."""

from __future__ import annotations

import json
import subprocess
import sys


def test_making_the_client_does_not_import_openai() -> None:
    script = (
        "import json, sys\n"
        "from xihe.agent.llm import LLMClient\n"
        "from xihe.config.core import LLMConfig\n"
        "client = LLMClient(LLMConfig(base_url='http://127.0.0.1:9/v1', model='m'), None)\n"
        "before = 'openai' in sys.modules\n"
        "try:\n"
        "    client.complete([{'role': 'user', 'content': 'hi'}], [])\n"
        "except Exception as exc:\n"
        "    said = type(exc).__name__ + ': ' + str(exc)\n"
        "print(json.dumps({'before': before, 'after': 'openai' in sys.modules, 'said': said}))\n"
    )
    env_cfg = "LLMConfig(base_url='http://127.0.0.1:9/v1', model='m', max_attempts=1, max_wait_seconds=0)"
    script = script.replace("LLMConfig(base_url='http://127.0.0.1:9/v1', model='m')", env_cfg)
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report == {
        "before": False,
        "after": True,
        "said": "LLMError: the model endpoint could not be reached",
    }
