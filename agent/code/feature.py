"""Code question answering in the product: `search_code`, `get_code_context`, the symbol graph's
`find_callers`, `find_callees`, `find_references` and `call_chain`, the answer rules, follow-ups.

- Tools search the indexes of `code.yaml` `repos` (opened at install, kept under `index_dir`), through
  `LiveIndexes`, which locks around the non-thread-safe `CodeIndex`. When nothing relevant is found
  the result says the repository has no matching implementation.
- Jobs: a full reconcile at start-up (and hourly), so a missed webhook cannot leave an index stale,
  and a git-diff incremental update every few minutes. `POST /hooks/git` (GitLab token or GitHub
  HMAC signature, secret from the env variable code.yaml names) re-indexes the pushed paths.
- Answer rules: a reply check extracts the paths and symbols a final answer cites; missing ones are
  sent back to the model once with the list, then marked as unverified in the reply.
- Follow-ups: units retrieved earlier in the conversation are given back to the model (last two rounds
  whole, older ones as a one-line summary each), read from the task steps, so they survive restarts
  and work across replicas; parsed rounds are cached in memory by task id (finished steps never change).
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from xihe.agent.audit import AuditEvent
from xihe.agent.deps import Services
from xihe.agent.errors import ToolFailed
from xihe.agent.feature import Context, Feature, Installed, Job, Runtime
from xihe.agent.heap import give_back
from xihe.agent.hooks import Hooks
from xihe.agent.i18n import Catalog, say, text
from xihe.agent.registry import ToolContext, ToolSpec
from xihe.agent.tasks import FINISHED, StepStatus, Task
from xihe.agent.tool_names import CODE_TOOLS
from xihe.config.code import CODE_SECTION
from xihe.tools.codeindex import githook, navigate
from xihe.tools.codeindex.api import NOTHING_FOUND
from xihe.tools.codeindex.live import LiveIndexes
from xihe.tools.codeindex.searchserver import SearchServer

if TYPE_CHECKING:
    from xihe.agent.deps import Deps

log = logging.getLogger("xihe.code")
WHOLE_ROUNDS = 2  # rounds given back whole; older ones are summarised
SUMMARY_ROUNDS = 6
ROUND_CHARS = 6000
TEXTS: Catalog = {  # what people may read about code search (English is also what the model reads)
    "no_repos": {
        "en": "no repositories are configured for code search (code.yaml `repos`)",
        "zh": "代码搜索没有配置任何仓库（code.yaml 的 `repos`）",
    },
    "building": {
        "en": "the code index is still being built; try again in a minute",
        "zh": "代码索引还在建立中，请一分钟后再试",
    },
    "unverified": {"en": " (unverified)", "zh": "（未核实）"},
    "unverified_list": {
        "en": "⚠️ Unverified: not found in the indexed repository: {items}",
        "zh": "⚠️ 未核实：在已索引的仓库里找不到：{items}",
    },
}
_HEADER = re.compile(r"^## File: (\S+) \(lines (\d+)-(\d+)\) (\w+) (\S+)", re.M)


class SearchArgs(BaseModel):
    """Arguments of search_code."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(
        min_length=1,
        max_length=500,
        description="symbol names and keywords, e.g. 'OrderStateMachine timeout'",
    )
    k: int = Field(10, ge=1, le=30, description="how many hits to return")


class ContextArgs(BaseModel):
    """Arguments of get_code_context."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(
        min_length=1, max_length=1000, description="the user's question about the code, in their words"
    )
    units: int = Field(0, ge=0, le=5, description="how many code units to return (0 = the configured 3-5)")


class SymbolArgs(BaseModel):
    """Arguments of find_callers, find_callees and find_references."""

    model_config = ConfigDict(extra="forbid")

    symbol: str = Field(
        min_length=1,
        max_length=300,
        description="a function, method or class: `name`, `Class.method`, `package.module.function` "
        "or `path/to/file.py:Class.method`",
    )


class ChainArgs(BaseModel):
    """Arguments of call_chain."""

    model_config = ConfigDict(extra="forbid")

    start: str = Field(min_length=1, max_length=300, description="where the chain starts, e.g. `api.get`")
    goal: str = Field(
        min_length=1, max_length=300, description="where it should arrive, e.g. `HTTPAdapter.send`"
    )
    max_hops: int = Field(8, ge=1, le=12, description="the longest chain looked for")


def live(deps: Deps) -> LiveIndexes | None:
    """This process's indexes, or None when code.yaml is absent."""
    return deps.code if isinstance(deps.code, LiveIndexes) else None


def _need(deps: Deps) -> LiveIndexes:
    indexes = live(deps)
    if indexes is None or not indexes.repos:
        raise ToolFailed(text(TEXTS, "no_repos"))
    if not indexes.ready:
        raise ToolFailed(text(TEXTS, "building"))
    return indexes


def run_search(args: SearchArgs, ctx: ToolContext) -> dict[str, Any]:
    """search_code: symbols and keywords -> hits (path, 1-based inclusive lines, symbol, score)."""
    indexes = _need(ctx.deps)
    found = indexes.search(args.query, args.k)
    several = len(indexes.repos) > 1
    hits = [{**h.to_json(), **({"repo": r.name} if several else {})} for r, h in found]
    if not hits:
        return {
            "query": args.query,
            "hits": [],
            "note": f"{NOTHING_FOUND} for this query. Tell the user the repository has no matching "
            "implementation rather than guessing.",
        }
    return {"query": args.query, "hits": hits}


def run_context(args: ContextArgs, ctx: ToolContext) -> str:
    """get_code_context: a question -> the best units, each under `## File: path`."""
    indexes = _need(ctx.deps)
    n = args.units or indexes.cfg.context_units
    text, _ = indexes.context(args.question, n)
    return text


def run_callers(args: SymbolArgs, ctx: ToolContext) -> str:
    """find_callers: the definitions that call the symbol, each under `## File: path`."""
    return _need(ctx.deps).navigate(lambda idx: navigate.find_callers(idx, args.symbol))


def run_callees(args: SymbolArgs, ctx: ToolContext) -> str:
    """find_callees: what the symbol calls, each under `## File: path`."""
    return _need(ctx.deps).navigate(lambda idx: navigate.find_callees(idx, args.symbol))


def run_references(args: SymbolArgs, ctx: ToolContext) -> str:
    """find_references: every use of the symbol, grouped by the definition it is in."""
    return _need(ctx.deps).navigate(lambda idx: navigate.find_references(idx, args.symbol))


def run_chain(args: ChainArgs, ctx: ToolContext) -> str:
    """call_chain: the shortest call chains from `start` to `goal`."""
    return _need(ctx.deps).navigate(
        lambda idx: navigate.call_chain(idx, args.start, args.goal, args.max_hops)
    )


# ---- answer rules --------------------------------------------------------------------------------
@dataclass
class CodeAnswerCheck:
    """Cited paths and symbols must exist; applies to tasks whose conversation used the code tools."""

    deps: Deps
    followups: FollowUps

    def _applies(self, task: Task) -> bool:
        if task.kind != "chat":
            return False
        if any(s.tool_name in CODE_TOOLS for s in self.deps.tasks.steps(task.id)):
            return True
        return bool(self.followups.rounds(task))

    def _missing(self, task: Task, reply: str) -> list[str]:
        indexes = live(self.deps)
        if indexes is None or not self._applies(task):
            return []
        return indexes.missing(reply)

    def complaint(self, task: Task, reply: str) -> str | None:
        """The list of cited items that do not exist, as an instruction to the model."""
        missing = self._missing(task, reply)
        if not missing:
            return None
        listed = ", ".join(f"`{m}`" for m in missing)
        return (
            f"Your answer cites {listed}, which do not exist in the indexed repository. Check with "
            "search_code or get_code_context and answer again, citing only paths and symbols that a tool "
            "result showed; if the repository has no matching implementation, say so."
        )

    def mark(self, task: Task, reply: str) -> str:
        """Annotate the citations that still do not exist as unverified."""
        missing = self._missing(task, reply)
        lang = self.deps.lang(task.goal, task.conversation)
        for item in missing:
            word = item.split(": ")[-1]
            pos = reply.find(word)
            if pos >= 0:
                end = pos + len(word) + (reply[pos + len(word) : pos + len(word) + 1] == "`")
                reply = reply[:end] + say(TEXTS, "unverified", lang) + reply[end:]
        if missing:
            reply += "\n\n" + say(TEXTS, "unverified_list", lang, items=", ".join(missing))
        return reply


# ---- follow-up questions -------------------------------------------------------------------------
@dataclass(frozen=True)
class Round:
    """What one earlier message retrieved: the question, the units' headers and the full text."""

    task_id: int
    question: str
    units: tuple[str, ...]  # 'path:start-end symbol'
    text: str


class FollowUps:
    """Retrieved code per conversation, rebuilt from the task steps; parsed rounds cached by task id."""

    def __init__(self, deps: Deps, cache_size: int = 512) -> None:
        self.deps = deps
        self.cache: OrderedDict[int, Round | None] = OrderedDict()
        self.cache_size = cache_size
        self.lock = threading.Lock()

    def _round(self, task: Task) -> Round | None:
        with self.lock:
            if task.id in self.cache:
                self.cache.move_to_end(task.id)
                return self.cache[task.id]
        steps = [
            s
            for s in self.deps.tasks.latest(task.id).values()
            if s.tool_name in CODE_TOOLS and s.status == StepStatus.DONE and s.output_text
        ]
        found = _parse_round(task, steps) if steps else None
        if task.status in FINISHED:  # finished: its steps never change
            with self.lock:
                self.cache[task.id] = found
                while len(self.cache) > self.cache_size:
                    self.cache.popitem(last=False)
        return found

    def rounds(self, task: Task) -> list[Round]:
        """Earlier rounds of `task`'s conversation that retrieved code, newest first."""
        earlier = self.deps.tasks.recent(conversation=task.conversation, limit=20)
        out = []
        for t in earlier:
            if t.id >= task.id:
                continue
            r = self._round(t)
            if r is not None:
                out.append(r)
            if len(out) >= WHOLE_ROUNDS + SUMMARY_ROUNDS:
                break
        return out

    def provide(self, task: Task) -> str | None:
        """The context provider: recent retrieved units whole, older ones summarised."""
        rounds = self.rounds(task)
        if not rounds:
            return None
        lines = [
            "Code retrieved earlier in this conversation (use it to resolve follow-ups such as "
            "'that function'; cite only these paths or new tool results):"
        ]
        for r in reversed(rounds[WHOLE_ROUNDS:]):
            lines.append(f"- earlier, for {r.question[:100]!r}: " + "; ".join(r.units[:8]))
        for r in reversed(rounds[:WHOLE_ROUNDS]):
            lines.append(f"\n### For {r.question[:200]!r}\n{r.text}")
        return "\n".join(lines)


def _parse_round(task: Task, steps: list[Any]) -> Round | None:
    units: list[str] = []
    texts: list[str] = []
    for s in steps:
        body = s.output_text or ""
        if s.tool_name != "search_code":  # get_code_context and the graph tools: `## File:` headers
            found = [f"{m[0]}:{m[1]}-{m[2]} {m[4]}" for m in _HEADER.findall(body)]
            if found:
                units += found
                texts.append(body[:ROUND_CHARS])
        else:
            try:
                hits = json.loads(body).get("hits", [])
            except (ValueError, AttributeError):
                continue
            found = [f"{h['path']}:{h['start']}-{h['end']} {h['symbol']}" for h in hits[:10]]
            units += found
            if found:
                texts.append("search hits: " + "; ".join(found))
    if not units:
        return None
    return Round(task.id, task.goal, tuple(dict.fromkeys(units)), "\n\n".join(texts)[:ROUND_CHARS])


# ---- feature interface ---------------------------------------------------------------------------
_UNSURE = " Links that are not certain (dynamic dispatch, matched by name only) are marked: say so."


def tools() -> list[ToolSpec]:
    """search_code, get_code_context and the symbol graph's find_callers, find_callees, find_references
    and call_chain."""
    return [
        ToolSpec(
            name="search_code",
            description="Search the indexed repositories for symbols and keywords; returns hits with path, "
            "1-based line range, symbol and score, best first (an empty list means no matching code).",
            args=SearchArgs,
            run=run_search,
        ),
        ToolSpec(
            name="get_code_context",
            description="Answer-oriented retrieval: a question -> the 3-5 most relevant code units, each under "
            "a `## File: path (lines a-b)` header. Cite only paths and symbols it returns.",
            args=ContextArgs,
            run=run_context,
        ),
        ToolSpec(
            name="find_callers",
            description="Who calls a function, method or class: each calling definition under a "
            "`## File: path (lines a-b)` header with the call's line." + _UNSURE,
            args=SymbolArgs,
            run=run_callers,
        ),
        ToolSpec(
            name="find_callees",
            description="What a function or method calls: the definitions in the repository (each under "
            "`## File: path`), then the library and builtin names it calls." + _UNSURE,
            args=SymbolArgs,
            run=run_callees,
        ),
        ToolSpec(
            name="find_references",
            description="Every use of a function, method or class (calls and other references), grouped by "
            "the definition it is in, under `## File: path` headers." + _UNSURE,
            args=SymbolArgs,
            run=run_references,
        ),
        ToolSpec(
            name="call_chain",
            description='How one function reaches another ("how does a request get from api.get to the '
            "adapter?\"): the shortest call chains, each definition under `## File: path`, each call's line."
            + _UNSURE,
            args=ChainArgs,
            run=run_chain,
        ),
    ]


def install(ctx: Context) -> Installed:
    """When code.yaml exists: the tools, the saved indexes opened, the answer check and follow-ups,
    the index jobs, the git webhook, and the search socket `xihe search` asks while the bot runs."""
    cfg = ctx.settings.get(CODE_SECTION)
    if cfg is None:
        return Installed()
    if ctx.offline:
        return Installed(tools=tools())
    indexes = LiveIndexes(cfg)
    indexes.open()
    give_back()  # the load's temporaries
    followups = FollowUps(ctx.deps)
    sock = SearchServer(indexes)  # `xihe search` on this machine asks here (<index_dir>/search.sock)

    def listen(_app: Runtime) -> None:
        sock.start()

    def close(_app: Runtime) -> None:
        sock.stop()

    return Installed(
        tools=tools(),
        services=Services(code=indexes),
        startup=[listen],
        shutdown=[close],
        hooks=Hooks(
            reply_checks=(CodeAnswerCheck(ctx.deps, followups),), context_providers=(followups.provide,)
        ),
        jobs=[
            # a full reconcile at start-up (and hourly); git-diff incremental updates every 5 minutes
            Job("code_reconcile", reconcile_job, 3600, run_at_start=True),
            Job("code_incremental", incremental_job, 300),
        ],
        routes=[routes],
    )


FEATURE = Feature("code", CODE_SECTION, install, CODE_TOOLS)


def reconcile_job(app: Runtime) -> None:
    """Compare every file's hash with the index (builds a missing index)."""
    indexes = live(app.deps)
    if indexes is not None:
        for report in indexes.refresh_all(reconcile=True):
            log.info("code index %s: %s, %d changed", report.repo, report.mode, len(report.files_changed))
        give_back()  # an update's temporaries (texts, parses, row copies)


def incremental_job(app: Runtime) -> None:
    """Re-index files changed since the indexed commit (git diff)."""
    indexes = live(app.deps)
    if indexes is not None and any(r.mode != "unchanged" for r in indexes.refresh_all()):
        give_back()  # an update's temporaries


def routes(app: Runtime) -> list[BaseRoute]:
    """POST /hooks/git."""

    async def hook(request: Request) -> Response:
        return await git_hook(app, request)

    return [Route("/hooks/git", hook, methods=["POST"])]


async def git_hook(app: Runtime, request: Request) -> Response:
    """Verify a GitLab/GitHub push or merge webhook and re-index what it touched."""
    deps = app.deps
    indexes = live(deps)
    assert indexes is not None
    body = await request.body()
    headers = dict(request.headers)
    env = indexes.cfg.webhook_secret_env
    secret = deps.settings.secret(env) if env else None

    def audit(outcome: str, reason: str, detail: dict[str, Any] | None = None) -> None:
        deps.audit.record(
            AuditEvent(
                at=deps.clock(),
                kind="webhook",
                actor=request.client.host if request.client else "?",
                outcome=outcome,
                tool="/hooks/git",
                reason=reason,
                detail=detail or {},
            )
        )

    if not secret:
        audit("rejected", f"no webhook secret configured ({env or 'webhook_secret_env'} is empty)")
        return JSONResponse({"error": "webhook secret not configured"}, status_code=503)
    if not githook.verify(headers, body, secret):
        audit("rejected", "bad or missing signature")
        return JSONResponse({"error": "bad signature"}, status_code=401)
    event = githook.parse(headers, body)
    if event is None:
        audit("ignored", "not a push or merged merge request")
        return JSONResponse({"ignored": True})
    repos = indexes.for_remote(event.repo_url)
    # no configured checkout has this remote: refresh all from git (cheap, idempotent)
    paths = sorted(event.paths()) if repos and event.paths() else None
    reports = await run_in_threadpool(indexes.refresh_all, repos or None, paths=paths)
    result = [
        {"repo": r.repo, "mode": r.mode, "commit": r.commit, "files_changed": r.files_changed}
        for r in reports
    ]
    audit(
        "accepted",
        f"{event.provider} {event.kind} {event.ref}",
        {"after": event.after, "paths": len(event.paths()), "reindexed": result},
    )
    return JSONResponse({"reindexed": result})
