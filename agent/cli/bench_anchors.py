"""The anchors `xihe bench core` times beside xihe's own call, on the same machine in the same loop.

- LangGraph's durable step: a one-node graph (the same bare echo) compiled with `SqliteSaver` on a
  file database with xihe's SQLite settings (WAL, `synchronous=NORMAL`), invoked with a thread id
  and `durability="sync"` (every checkpoint written before `invoke` returns). Needs the `bench`
  extra (`pip install -e '.[bench]'`); without it the anchor is skipped and the report says why.
- The floor: plain `sqlite3` on a file with the same settings, two row inserts and one commit.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

Step = Callable[[int], object]


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def sqlite_floor(path: Path) -> Step:
    """Two inserts and a commit on a WAL, `synchronous=NORMAL` file: what any durable step costs at least."""
    conn = _connect(path)
    conn.execute("CREATE TABLE step (id INTEGER PRIMARY KEY, k TEXT, status TEXT, digest TEXT)")
    conn.execute("CREATE TABLE audit (id INTEGER PRIMARY KEY, k TEXT, tool TEXT, args TEXT)")
    conn.commit()

    def step(i: int) -> None:
        conn.execute("INSERT INTO step (k, status, digest) VALUES (?, 'done', ?)", (f"tool:{i}", "0" * 64))
        conn.execute(
            "INSERT INTO audit (k, tool, args) VALUES (?, 'bench_echo', ?)", (f"tool:{i}", '{"text":"hello"}')
        )
        conn.commit()

    return step


def langgraph_step(path: Path) -> tuple[Step | None, str]:
    """One durable LangGraph step on `path`, and the versions used (or why it is skipped)."""
    try:
        from importlib.metadata import version

        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.graph import END, START, StateGraph
        from typing_extensions import TypedDict
    except ImportError as exc:
        return None, f"skipped: {exc.name} is not installed (pip install -e '.[bench]')"

    class State(TypedDict, total=False):
        text: str
        echo: str

    def echo(state: State) -> dict[str, Any]:
        return {"echo": state["text"]}

    saver = SqliteSaver(_connect(path))
    saver.setup()
    builder = StateGraph(State)
    builder.add_node("echo", echo)
    builder.add_edge(START, "echo")
    builder.add_edge("echo", END)
    graph = builder.compile(checkpointer=saver)
    config: Any = {"configurable": {"thread_id": "bench"}}

    def step(i: int) -> object:
        return graph.invoke({"text": "hello"}, config, durability="sync")

    found = f"langgraph {version('langgraph')}, langgraph-checkpoint-sqlite {version('langgraph-checkpoint-sqlite')}"
    return step, found
