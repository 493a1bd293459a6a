"""The questions of the stdlib search benchmark: hand-written, generated from docstrings, and unanswerable.

(1) a docstring's first sentence -> its function, with the function's own name words removed from
the query (a second-sentence control set is built the same way); (2) hand-written questions, some
in Chinese, with the units that answer them; (3) questions with no answer in the repository, which
should be judged not relevant.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

from xihe.tools.codeindex.index import CodeIndex
from xihe.tools.codeindex.tokens import split_identifier

# the packages docstring queries are drawn from
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
