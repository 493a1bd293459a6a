"""Priors on units before any question: test code is rarely what a question about the code asks for.

"Where do we retry a failed job" means the implementation; a test exercising it repeats its words
(names, calls, asserts) and often outranks it. Test units lose `RetrievalConfig.test_penalty` from their
fused score (learned on the dev split of the held-out sets with the other fusion weights), except for a
question that names tests ("tests that a paused job...") or a symbol (`get_next_fire_time`): those
ask for the places that say it, tests included (`QueryPlan.tests`, query.py).
"""

from __future__ import annotations

import functools
import re

# directories that hold tests, and file names of tests in the languages indexed
_TEST_DIR = re.compile(r"(^|/)(tests?|__tests__|testing|androidTest|spec|specs)/", re.I)
_TEST_FILE = re.compile(
    r"(^|/)(test_[^/]*\.py|[^/]*_test\.(py|go)|[^/]*(Test|Tests|TestCase)\.(java|kt)|[^/]*\.(test|spec)\.[jt]sx?|conftest\.py)$"
)


@functools.lru_cache(maxsize=1 << 16)  # asked for every candidate of every query a serve answers
def is_test_path(path: str) -> bool:
    """Whether a repository-relative path is test code (by directory or file name)."""
    return bool(_TEST_DIR.search(path) or _TEST_FILE.search(path))
