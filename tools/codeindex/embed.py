"""Dense vectors: the wordllama model shipped in its wheel, or an OpenAI-compatible embeddings endpoint."""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Sequence
from itertools import chain
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from xihe.agent.errors import IntegrationError
from xihe.agent.redact import excerpt

if TYPE_CHECKING:  # requests is imported where a remote endpoint is used: local search never needs it
    import requests

    from xihe.config.code import EmbeddingConfig, RerankConfig


class EmbeddingError(IntegrationError):
    """The embeddings or rerank endpoint failed (HTTP status, bad body, transport)."""

    service = "embeddings"

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = False) -> None:
        self.status = status
        super().__init__(message, retryable=retryable)


class Embedder(Protocol):
    """Turns texts into L2-normalised float32 rows; `name` identifies the vector space in the index."""

    name: str

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One normalised row per text, shape (len(texts), dim)."""
        ...


def distinct(texts: Sequence[str]) -> tuple[list[str], list[int]]:
    """Each text once, in first-seen order, and per text the row of its copy: a repository repeats
    many (React Native: 29% of its units' multilingual texts, "if. " 172 times), and a text's vector
    does not depend on what else is in its batch, so each is encoded once and its row repeated."""
    first: dict[str, int] = {}
    rows = [first.setdefault(t, len(first)) for t in texts]
    return list(first), rows


SEPARATOR = "\u2581"  # SentencePiece's word separator, as the wordllama tokenizer's normaliser writes it
NORMALIZER = {
    "type": "Sequence",
    "normalizers": [
        {"type": "Prepend", "prepend": SEPARATOR},
        {"type": "Replace", "pattern": {"String": " "}, "content": SEPARATOR},
    ],
}
_SEGMENT = re.compile(f"{SEPARATOR}+[^{SEPARATOR}]*")  # a run of separators and what follows it
_AFTER_WORD = re.compile(f"[^{SEPARATOR}]{SEPARATOR}")


def _normalise(m: np.ndarray) -> np.ndarray:
    m = np.asarray(m, dtype=np.float32)
    if m.ndim == 1:
        m = m[None, :]
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return m / np.where(norms == 0, 1, norms)


class WordLlamaEmbedder:
    """wordllama's 256-d static model, loaded from inside the installed package; never downloads."""

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.name = f"wordllama/l2_supercat/{dim}"
        self._model: Any = None
        self._unpadded: tuple[np.ndarray, Any] | None = None
        self._added = re.compile("(?!)")  # the tokenizer's added tokens, set when it loads

    def _load(self) -> Any:
        if self._model is None:
            root = logging.getLogger()
            handlers, level = list(root.handlers), root.level
            import wordllama
            from wordllama import WordLlama

            # importing wordllama calls logging.basicConfig(INFO); logging is the application's choice
            root.handlers[:], root.level = handlers, level

            # the wheel ships weights/ and tokenizers/ inside the package, but load() looks for the
            # tokenizer under the cache dir; the package directory as cache_dir resolves both locally
            pkg = os.path.dirname(wordllama.__file__)
            self._model = WordLlama.load(cache_dir=pkg, dim=self.dim, disable_download=True)
        return self._model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Normalised vectors for `texts`: the model's (the mean of a text's token rows, normalised),
        computed over the tokens alone. `WordLlama.embed` pads a batch to its longest text and pools
        the padded (batch, length, 256) block; a repository's texts run from a name to 600 characters
        of doc, so most of that block was padding. Here each text's token rows are summed by one sparse
        product (the sum points where the mean does: both are normalised); a text of no token keeps a
        zero row."""
        from scipy.sparse import csr_matrix

        if not texts:
            return np.zeros((0, self.dim), np.float32)
        table, _ = self._parts()
        ids = self.token_ids(texts)
        lens = np.fromiter(map(len, ids), np.int64, len(ids))
        flat = np.fromiter(chain.from_iterable(ids), np.int64, int(lens.sum()))
        np.clip(flat, 0, len(table) - 1, out=flat)  # as WordLlama.embed does
        indptr = np.zeros(len(ids) + 1, np.int64)
        np.cumsum(lens, out=indptr[1:])
        counts = csr_matrix((np.ones(len(flat), np.float32), flat, indptr), shape=(len(ids), len(table)))
        return _normalise(counts @ table)

    def _parts(self) -> tuple[np.ndarray, Any]:
        """The model's token matrix and a copy of its tokenizer without padding or normaliser (the
        segments given to it are normalised already)."""
        if self._unpadded is None:
            from tokenizers import Tokenizer

            model = self._load()
            spec = json.loads(model.tokenizer.to_str())
            if spec.get("normalizer") != NORMALIZER or spec.get("pre_tokenizer") is not None:
                raise ValueError("the wordllama tokenizer is not the one segments are cut for (embed.py)")
            added = spec.get("added_tokens", [])
            if any(t["normalized"] or t["lstrip"] or t["rstrip"] or t["single_word"] for t in added):
                raise ValueError("a wordllama added token is matched in a way segments do not follow")
            spec["normalizer"] = None
            tokenizer = Tokenizer.from_str(json.dumps(spec))
            tokenizer.no_padding()
            if any(_AFTER_WORD.search(piece) for piece in tokenizer.get_vocab()):
                raise ValueError("a wordllama token holds a word separator after a letter (embed.py)")
            self._added = re.compile("(" + "|".join(re.escape(t["content"]) for t in added) + ")")
            self._unpadded = (np.asarray(model.embedding, np.float32), tokenizer)
        return self._unpadded

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """The model's token ids of each text, exactly its tokenizer's. The tokenizer first splits
        out its added tokens (`<s>`, typed in a text) and normalises each piece between them: a
        separator before it and for each space. No token of the model's vocabulary holds a separator
        after anything but a separator (checked at load), so no merge crosses a cut before a run of
        separators that follows a letter: a piece's byte-pair merges are its segments'. A repository's
        texts share most segments (words), so each distinct one goes through the tokenizer once; the
        whole text had been one BPE word."""
        _, tokenizer = self._parts()
        cut = [self._segments(t) for t in texts]
        distinct = list(dict.fromkeys(chain.from_iterable(cut)))
        encoded = tokenizer.encode_batch(distinct, add_special_tokens=False) if distinct else []
        ids_of = {seg: e.ids for seg, e in zip(distinct, encoded, strict=True)}
        return [list(chain.from_iterable(ids_of[seg] for seg in segs)) for segs in cut]

    def _segments(self, text: str) -> list[str]:
        """The normalised segments of `text`, its added tokens as they are (a segment never starts
        with anything but a separator, so they cannot be taken for one)."""
        if not self._added.search(text):
            return _SEGMENT.findall(SEPARATOR + text.replace(" ", SEPARATOR)) if text else []
        out: list[str] = []
        for i, piece in enumerate(self._added.split(text)):
            if i % 2:
                out.append(piece)
            elif piece:
                out += _SEGMENT.findall(SEPARATOR + piece.replace(" ", SEPARATOR))
        return out


class OpenAIEmbedder:
    """POST {base_url}/embeddings as the OpenAI API defines it; the key comes from an env variable."""

    def __init__(self, cfg: EmbeddingConfig, session: requests.Session | None = None) -> None:
        if not cfg.base_url or not cfg.model:
            raise EmbeddingError("embedding.kind=openai needs base_url and model")
        self.cfg = cfg
        self.name = f"openai/{cfg.model}"
        self._session = session or _session()

    def _key(self) -> str:
        return os.environ.get(self.cfg.api_key_env, "") if self.cfg.api_key_env else ""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Normalised vectors for `texts`, requested in batches."""
        rows: list[list[float]] = []
        for i in range(0, len(texts), self.cfg.batch_size):
            batch = list(texts[i : i + self.cfg.batch_size])
            body = _post_json(
                self._session,
                self.cfg.base_url.rstrip("/") + "/embeddings",
                {"model": self.cfg.model, "input": batch},
                self._key(),
                self.cfg.timeout_seconds,
            )
            try:
                data = sorted(body["data"], key=lambda d: d["index"])
                got = [d["embedding"] for d in data]
            except (KeyError, TypeError) as exc:
                raise EmbeddingError(f"embeddings response lacks data[].embedding: {exc}") from None
            if len(got) != len(batch):
                raise EmbeddingError(f"asked for {len(batch)} embeddings, got {len(got)}")
            rows.extend(got)
        if not rows:
            return np.zeros((0, 1), np.float32)
        return _normalise(np.asarray(rows, dtype=np.float32))


def _requests() -> Any:
    import requests

    return requests


def _session() -> requests.Session:
    session: requests.Session = _requests().Session()
    return session


def _post_json(session: requests.Session, url: str, payload: dict[str, Any], key: str, timeout: float) -> Any:
    """POST JSON with the bearer `key` and return the decoded body; failures become EmbeddingError
    (retryable on 429/5xx) whose message never holds the key, even when the body echoes it."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        resp = session.post(url, json=payload, headers=headers, timeout=timeout)
    except _requests().RequestException as exc:
        raise EmbeddingError(f"{url}: {type(exc).__name__}", retryable=True) from None
    if resp.status_code >= 400:
        retry = resp.status_code == 429 or resp.status_code >= 500
        raise EmbeddingError(
            f"{url}: HTTP {resp.status_code}: {excerpt(resp.text, key)}",
            status=resp.status_code,
            retryable=retry,
        )
    try:
        return resp.json()
    except ValueError:
        raise EmbeddingError(f"{url}: response is not JSON") from None


class Reranker:
    """POST {base_url}/rerank (Cohere/Jina/vLLM shape): query + documents -> relevance per index."""

    def __init__(self, cfg: RerankConfig, session: requests.Session | None = None) -> None:
        self.cfg = cfg
        self._session = session or _session()

    def rerank(self, query: str, documents: Sequence[str]) -> list[tuple[int, float]]:
        """(document index, relevance) best first."""
        key = os.environ.get(self.cfg.api_key_env, "") if self.cfg.api_key_env else ""
        body = _post_json(
            self._session,
            self.cfg.base_url.rstrip("/") + "/rerank",
            {"model": self.cfg.model, "query": query, "documents": list(documents), "top_n": len(documents)},
            key,
            self.cfg.timeout_seconds,
        )
        try:
            pairs = [(int(r["index"]), float(r["relevance_score"])) for r in body["results"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise EmbeddingError(f"rerank response lacks results[].index/relevance_score: {exc}") from None
        return sorted(pairs, key=lambda p: -p[1])


def make_embedder(cfg: EmbeddingConfig) -> Embedder | None:
    """The configured embedder, or None for kind=none (BM25 only)."""
    if cfg.kind == "none":
        return None
    if cfg.kind == "openai":
        return OpenAIEmbedder(cfg)
    return WordLlamaEmbedder()
