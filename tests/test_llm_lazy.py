"""The `openai` client is imported by the first model request, not by building the bot's client, and
made once however many workers ask first."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

from xihe.agent.llm import LLMClient
from xihe.config.core import LLMConfig
from xihe.integrations.fakes.llm_server import ScriptedLLM, say


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


def test_workers_that_ask_at_once_share_one_client(llm: ScriptedLLM) -> None:
    """The first requests of a replica come from many workers at once: they make one client (one HTTP
    pool and TLS context), not one each, and every one of their requests is answered."""
    client = LLMClient(LLMConfig(base_url=llm.base_url, model="m", max_wait_seconds=0), None)
    llm.add(*[say(f"answer {i}") for i in range(8)])
    start = threading.Barrier(8)
    made: list[object] = []
    said: list[str] = []

    def ask() -> None:
        start.wait()
        made.append(client._api())
        said.append(client.complete([{"role": "user", "content": "hi"}], []).message["content"])

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(c) for c in made}) == 1
    assert sorted(said) == [f"answer {i}" for i in range(8)]
    llm.assert_consumed()
