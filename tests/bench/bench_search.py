"""Code search benchmark on the Python standard library; prints the JSON report.

Run: python -m tests.bench.bench_search [--modules email,json] [--limit 300]
(the same as `xihe eval search`). Not collected by pytest: it takes ~30 s and measures, not asserts.
"""

from __future__ import annotations

import sys

from agent.cli_code import main


def run(argv: list[str] | None = None) -> int:
    """Run `eval search` with the given extra arguments."""
    return main(["eval", "search", *(argv if argv is not None else sys.argv[1:])])


if __name__ == "__main__":
    raise SystemExit(run())
