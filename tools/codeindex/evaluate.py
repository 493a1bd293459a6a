"""Search evaluation on the Python standard library (reachable offline): recall, MRR, timings.

The "repository" is a copy of the stdlib (tests, IDLE, tkinter and the like left out), about 15k
units. Queries: (1) a docstring's first sentence -> its function, with the function's own name
words removed from the query; (2) hand-written questions, some in Chinese; (3) questions with no
answer in the repository, which should be judged not relevant.
"""

from __future__ import annotations

import random
import re
import shutil
import sysconfig
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xihe.config.code import CodeConfig
from xihe.tools.codeindex.index import CodeIndex
from xihe.tools.codeindex.service import index_repo
from xihe.tools.codeindex.tokens import split_identifier

SKIP_TOP = frozenset(
    {
        "test",
        "site-packages",
        "idlelib",
        "lib2to3",
        "tkinter",
        "turtledemo",
        "ensurepip",
        "encodings",
        "__pycache__",
        "pydoc_data",
    }
)
QUERY_MODULES = ("email", "asyncio", "logging", "json", "http", "urllib")


@dataclass(frozen=True)
class Query:
    """One evaluation question and the units that answer it (path, qualname)."""

    text: str
    targets: tuple[tuple[str, str], ...]
    source: str  # docstring | manual | manual-zh


MANUAL: list[tuple[str, list[tuple[str, str]]]] = [
    (
        "how does a logger decide whether a message of a given level will be processed",
        [("logging/__init__.py", "Logger.isEnabledFor")],
    ),
    (
        "rotate the log file when it grows past a maximum size",
        [
            ("logging/handlers.py", "RotatingFileHandler"),
            ("logging/handlers.py", "RotatingFileHandler.shouldRollover"),
            ("logging/handlers.py", "RotatingFileHandler.doRollover"),
        ],
    ),
    (
        "where is the status line of an HTTP response read and checked",
        [("http/client.py", "HTTPResponse._read_status")],
    ),
    (
        "send a request with method, url, body and headers over an http connection",
        [("http/client.py", "HTTPConnection.request"), ("http/client.py", "HTTPConnection._send_request")],
    ),
    ("deserialize a JSON document read from a file object", [("json/__init__.py", "load")]),
    (
        "turn a python object into a JSON formatted string",
        [("json/__init__.py", "dumps"), ("json/encoder.py", "JSONEncoder.encode")],
    ),
    ("decode RFC 2047 encoded words in a mail header", [("email/header.py", "decode_header")]),
    (
        "parse an email message from a bytes object",
        [("email/__init__.py", "message_from_bytes"), ("email/parser.py", "BytesParser.parsebytes")],
    ),
    ("add a file attachment to an email message", [("email/message.py", "MIMEPart.add_attachment")]),
    (
        "run a coroutine until it finishes and then close the event loop",
        [("asyncio/runners.py", "run"), ("asyncio/runners.py", "Runner.run")],
    ),
    (
        "wait for an awaitable with a timeout and cancel it when time runs out",
        [("asyncio/tasks.py", "wait_for")],
    ),
    (
        "run a blocking function in a thread so the event loop is not blocked",
        [("asyncio/base_events.py", "BaseEventLoop.run_in_executor"), ("asyncio/threads.py", "to_thread")],
    ),
    (
        "limit how many coroutines run at once with a counter",
        [("asyncio/locks.py", "Semaphore"), ("asyncio/locks.py", "BoundedSemaphore")],
    ),
    (
        "percent-encode special characters in a url component",
        [
            ("urllib/parse.py", "quote"),
            ("urllib/parse.py", "quote_plus"),
            ("urllib/parse.py", "quote_from_bytes"),
        ],
    ),
    (
        "split a url into scheme, network location, path, query and fragment",
        [("urllib/parse.py", "urlsplit"), ("urllib/parse.py", "urlparse")],
    ),
    (
        "follow a redirect response when opening a url",
        [
            ("urllib/request.py", "HTTPRedirectHandler.redirect_request"),
            ("urllib/request.py", "HTTPRedirectHandler.http_error_302"),
            ("urllib/request.py", "HTTPRedirectHandler"),
        ],
    ),
    (
        "configure logging handlers and formatters from a dictionary",
        [("logging/config.py", "dictConfig"), ("logging/config.py", "DictConfigurator.configure")],
    ),
    (
        "format exception traceback text for a log record",
        [("logging/__init__.py", "Formatter.formatException")],
    ),
    (
        "serve the files of the current directory over http",
        [
            ("http/server.py", "SimpleHTTPRequestHandler"),
            ("http/server.py", "SimpleHTTPRequestHandler.do_GET"),
        ],
    ),
    ("encode a dictionary of query parameters for a url", [("urllib/parse.py", "urlencode")]),
    (
        "怎么把 JSON 字符串解码成 Python 对象",
        [("json/__init__.py", "loads"), ("json/decoder.py", "JSONDecoder.decode")],
    ),
    (
        "日志文件按大小轮转",
        [
            ("logging/handlers.py", "RotatingFileHandler"),
            ("logging/handlers.py", "RotatingFileHandler.shouldRollover"),
            ("logging/handlers.py", "RotatingFileHandler.doRollover"),
        ],
    ),
    ("解码邮件头里的编码字符", [("email/header.py", "decode_header")]),
    (
        "给协程设置超时时间",
        [
            ("asyncio/tasks.py", "wait_for"),
            ("asyncio/timeouts.py", "timeout"),
            ("asyncio/timeouts.py", "Timeout"),
        ],
    ),
    (
        "发送 HTTP 请求",
        [("http/client.py", "HTTPConnection.request"), ("http/client.py", "HTTPConnection._send_request")],
    ),
    ("把查询参数编码成 URL 字符串", [("urllib/parse.py", "urlencode")]),
    ("取消事件循环中所有未完成的任务", [("asyncio/runners.py", "_cancel_all_tasks")]),
    ("判断日志记录器是否启用了某个级别", [("logging/__init__.py", "Logger.isEnabledFor")]),
    ("给邮件添加附件", [("email/message.py", "MIMEPart.add_attachment")]),
    (
        "解析 cookie 字符串",
        [("http/cookies.py", "BaseCookie.load"), ("http/cookies.py", "BaseCookie.__parse_string")],
    ),
    (
        "创建子进程并读取它的输出",
        [
            ("asyncio/subprocess.py", "create_subprocess_exec"),
            ("asyncio/subprocess.py", "Process.communicate"),
            ("asyncio/subprocess.py", "create_subprocess_shell"),
        ],
    ),
    ("队列为空时等待取出元素", [("asyncio/queues.py", "Queue.get")]),
    (
        "用户名密码基本认证",
        [
            ("urllib/request.py", "HTTPBasicAuthHandler"),
            ("urllib/request.py", "AbstractBasicAuthHandler"),
            ("urllib/request.py", "AbstractBasicAuthHandler.http_error_auth_reqed"),
        ],
    ),
    ("拆分 URL 的各个部分", [("urllib/parse.py", "urlsplit"), ("urllib/parse.py", "urlparse")]),
]

NEGATIVE = [
    "OrderStateMachine",
    "kafka consumer group rebalance offsets commit",
    "订单超时之后状态是怎么流转的",
    "train a convolutional neural network with gradient descent",
    "KubernetesPodAutoscaler",
    "DolphinScheduler 工作流补跑",
]


def stdlib_root() -> Path:
    """The running interpreter's standard library directory."""
    return Path(sysconfig.get_paths()["stdlib"])


def copy_stdlib(dest: Path, modules: Sequence[str] | None = None) -> Path:
    """Copy stdlib modules (all but SKIP_TOP when `modules` is None) into `dest` as a repository."""
    src = stdlib_root()
    dest.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns("__pycache__", "test", "tests", "*.pyc")
    for entry in sorted(src.iterdir()):
        name = entry.name
        if modules is not None and name.removesuffix(".py") not in modules:
            continue
        if modules is None and (name in SKIP_TOP or name.startswith((".", "config-"))):
            continue
        if entry.is_dir():
            shutil.copytree(entry, dest / name, ignore=ignore, dirs_exist_ok=True)
        elif entry.suffix == ".py":
            shutil.copy2(entry, dest / name)
    return dest


def first_sentence(doc: str) -> str:
    """A docstring's first sentence (up to '. ' or the first blank line)."""
    para = re.split(r"\n\s*\n", doc.strip(), maxsplit=1)[0]
    para = " ".join(para.split())
    m = re.match(r"(.+?[.!?])(\s|$)", para)
    return (m.group(1) if m else para).strip()


def docstring_queries(index: CodeIndex, modules: Sequence[str], limit: int, seed: int = 0) -> list[Query]:
    """Docstring first sentence -> its function/method, the function's own name words removed."""
    by_sentence: dict[str, list[tuple[str, str]]] = {}
    for u in index.live_units:
        if (
            u.kind not in {"function", "method"}
            or not u.doc
            or u.path.split("/", 1)[0].removesuffix(".py") not in modules
        ):
            continue
        sentence = first_sentence(u.doc)
        name_words = {w.lower() for w in split_identifier(u.name)} | {u.name.lower()}
        words = [w for w in re.findall(r"[A-Za-z0-9_']+", sentence) if w.lower().strip("_") not in name_words]
        if len(words) < 5:
            continue
        by_sentence.setdefault(" ".join(words), []).append((u.path, u.qualname))
    # a sentence shared by several functions ("Return self.") has no single right answer
    items = sorted((q, t[0]) for q, t in by_sentence.items() if len(t) == 1)
    random.Random(seed).shuffle(items)
    return [Query(q, (t,), "docstring") for q, t in items[:limit]]


def later_sentence_queries(
    index: CodeIndex, modules: Sequence[str], limit: int, seed: int = 1
) -> list[Query]:
    """Control set: a docstring's SECOND sentence -> its function (name words removed, >= 6 words left).

    The main set asks with first sentences, which a summary-line representation would match by
    construction; this set shows whether a retrieval change helps beyond that. Not part of "all".
    """
    by_sentence: dict[str, list[tuple[str, str]]] = {}
    for u in index.live_units:
        if (
            u.kind not in {"function", "method"}
            or not u.doc
            or u.path.split("/", 1)[0].removesuffix(".py") not in modules
        ):
            continue
        sentences = re.split(r"(?<=[.!?])\s+", " ".join(u.doc.split()))
        if len(sentences) < 2:
            continue
        name_words = {w.lower() for w in split_identifier(u.name)} | {u.name.lower()}
        words = [
            w for w in re.findall(r"[A-Za-z0-9_']+", sentences[1]) if w.lower().strip("_") not in name_words
        ]
        if len(words) < 6:
            continue
        by_sentence.setdefault(" ".join(words), []).append((u.path, u.qualname))
    items = sorted((q, t[0]) for q, t in by_sentence.items() if len(t) == 1)
    random.Random(seed).shuffle(items)
    return [Query(q, (t,), "docstring-later") for q, t in items[:limit]]


def manual_queries(index: CodeIndex) -> tuple[list[Query], list[str]]:
    """The hand-written questions whose targets exist in this index, and the ones that do not."""
    known = {(u.path, u.qualname) for u in index.live_units}
    out, missing = [], []
    for text, targets in MANUAL:
        present = tuple(t for t in targets if t in known)
        if present:
            src = "manual-zh" if re.search(r"[\u4e00-\u9fff]", text) else "manual"
            out.append(Query(text, present, src))
        else:
            missing.append(text)
    return out, missing


def rank_of(index: CodeIndex, q: Query | Any, mode: str) -> tuple[int | None, float]:
    """1-based rank of the first right unit in the top 10 (None if absent) and the query's seconds."""
    t0 = time.perf_counter()
    res = index.search(q.text, 10, mode=mode)
    dt = time.perf_counter() - t0
    for i, s in enumerate(res.hits, start=1):
        if (s.unit.path, s.unit.qualname) in q.targets:
            return i, dt
    return None, dt


def metrics(ranks: Sequence[int | None]) -> dict[str, float]:
    """Recall@1/5/10 and MRR@10 from 1-based ranks (None = not in the top 10)."""
    n = max(1, len(ranks))
    return {
        "n": len(ranks),
        "recall@1": round(sum(1 for r in ranks if r is not None and r <= 1) / n, 4),
        "recall@5": round(sum(1 for r in ranks if r is not None and r <= 5) / n, 4),
        "recall@10": round(sum(1 for r in ranks if r is not None and r <= 10) / n, 4),
        "mrr@10": round(sum(1 / r for r in ranks if r is not None) / n, 4),
    }


def _pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return round(s[min(len(s) - 1, round(p * (len(s) - 1)))] * 1000, 2) if s else 0.0


def evaluate(
    work: Path, cfg: CodeConfig | None = None, modules: Sequence[str] | None = None, limit: int = 300
) -> dict[str, Any]:
    """Build the stdlib repository index under `work`, run every query in every mode, return the report."""
    repo = work / "repo"
    if repo.exists():
        shutil.rmtree(repo)
    copy_stdlib(repo, modules)
    cfg = cfg or CodeConfig()
    cfg = cfg.model_copy(update={"index_dir": str(work / "index")})
    idx, report = index_repo(repo, cfg, full=True)
    build_s = report.seconds
    qmods = [m for m in QUERY_MODULES if modules is None or m in modules]
    queries = docstring_queries(idx, qmods, limit)
    manual, missing = manual_queries(idx)
    idx.search("预热 warm up", 1)  # load jieba and the dictionary once, outside the timings
    result: dict[str, Any] = {
        "repository": {"files": report.files, "units": report.units, "build_seconds": round(build_s, 2)},
        "embedder": idx.embedder.name if idx.embedder else None,
        "manual_targets_missing": missing,
    }
    groups = {
        "docstring": queries,
        "manual": [q for q in manual if q.source == "manual"],
        "manual-zh": [q for q in manual if q.source == "manual-zh"],
    }
    latencies: list[float] = []
    for mode in ("bm25", "vector", "hybrid"):
        per: dict[str, Any] = {}
        all_ranks: list[int | None] = []
        for name, qs in groups.items():
            ranks = []
            for q in qs:
                r, dt = rank_of(idx, q, mode)
                ranks.append(r)
                if mode == "hybrid":
                    latencies.append(dt)
            per[name] = metrics(ranks)
            all_ranks.extend(ranks)
        per["all"] = metrics(all_ranks)
        result[mode] = per
    later = later_sentence_queries(idx, qmods, limit)
    result["control_second_sentence"] = {
        mode: metrics([rank_of(idx, q, mode)[0] for q in later]) for mode in ("bm25", "vector", "hybrid")
    }
    # the CJK bridge, measured: Chinese questions with it switched off
    off = cfg.model_copy(update={"retrieval": cfg.retrieval.model_copy(update={"cjk_bridge": False})})
    idx.cfg = off
    result["hybrid_zh_without_bridge"] = metrics([rank_of(idx, q, "hybrid")[0] for q in groups["manual-zh"]])
    result["bm25_zh_without_bridge"] = metrics([rank_of(idx, q, "bm25")[0] for q in groups["manual-zh"]])
    idx.cfg = cfg
    neg = [idx.search(q, 10) for q in NEGATIVE]
    pos = [idx.search(q.text, 10) for q in manual]
    result["relevance"] = {
        "negatives_judged_irrelevant": sum(1 for r in neg if not r.relevant),
        "negatives": len(neg),
        "answerable_judged_relevant": sum(1 for r in pos if r.relevant),
        "answerable": len(pos),
        "negative_best_scores": [
            [q, round(r.best_bm25, 2), round(r.best_cosine, 3)] for q, r in zip(NEGATIVE, neg, strict=True)
        ],
        "answerable_best_scores_min": [
            round(min(r.best_bm25 for r in pos), 2),
            round(min(r.best_cosine for r in pos), 3),
        ],
    }
    result["query_ms"] = {"p50": _pct(latencies, 0.5), "p95": _pct(latencies, 0.95), "n": len(latencies)}
    result["incremental"] = _one_file_update(idx, build_s)
    h, b = result["hybrid"]["all"]["mrr@10"], result["bm25"]["all"]["mrr@10"]
    result["hybrid_vs_bm25_mrr_gain"] = round((h - b) / b, 4) if b else None
    return result


def _one_file_update(idx: CodeIndex, build_s: float) -> dict[str, Any]:
    """Time re-indexing one modified file (in memory, and with the save to disk)."""
    rel = "json/decoder.py" if "json/decoder.py" in idx.files else sorted(idx.files)[0]
    path = idx.root / rel
    original = path.read_text(encoding="utf-8")
    path.write_text(
        original + '\n\ndef added_for_eval(x):\n    """Added by the evaluation."""\n    return x\n',
        encoding="utf-8",
    )
    try:
        t0 = time.perf_counter()
        stats = idx.update_files([rel])
        upd = time.perf_counter() - t0
        t1 = time.perf_counter()
        idx.search("added for evaluation", 5)  # the first query after an update merges pending rows
        first_query = time.perf_counter() - t1
        t2 = time.perf_counter()
        idx.save()
        save = time.perf_counter() - t2
    finally:
        path.write_text(original, encoding="utf-8")
    return {
        "file": rel,
        "units_reindexed": stats.units_added,
        "update_seconds": round(upd, 4),
        "first_query_after_update_seconds": round(first_query, 4),
        "save_seconds": round(save, 4),
        "update_share_of_full_build": round(upd / build_s, 5) if build_s else None,
        "update_plus_save_share_of_full_build": round((upd + save) / build_s, 5) if build_s else None,
    }
