"""Code search evaluation on the held-out packages (and, with --sets stdlib, the standard library).

Run: python -m tests.bench.bench_search [--sets react-native-android,apscheduler,stdlib] [--learn]
(the same as `xihe eval search`). Not collected by pytest: it fetches the packages once from npm and
PyPI, takes a few minutes, and measures rather than asserts.
"""

from __future__ import annotations

import sys

from xihe.agent.cli.main import main


def run(argv: list[str] | None = None) -> int:
    """Run `eval search` with the given extra arguments."""
    return main(["eval", "search", *(argv if argv is not None else sys.argv[1:])])


if __name__ == "__main__":
    raise SystemExit(run())
