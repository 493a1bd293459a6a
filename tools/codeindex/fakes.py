"""Loopback fakes of an OpenAI-compatible embeddings endpoint and a rerank endpoint (tests, demo)."""

from __future__ import annotations

import hashlib
import json

import numpy as np

from xihe.integrations.fakes.loopback import LoopbackServer, Request, Response


def _vector(text: str, dim: int) -> list[float]:
    """A deterministic bag-of-words vector: texts sharing words point the same way."""
    v = np.zeros(dim, np.float32)
    for word in text.lower().split():
        h = int.from_bytes(hashlib.sha1(word.encode()).digest()[:4], "little")
        v[h % dim] += 1.0
    return [float(x) for x in v]


class FakeEmbeddings:
    """POST /v1/embeddings like OpenAI: {"model","input"} -> {"data":[{"index","embedding"}]}.

    Errors as the real API gives them: 401 without the expected bearer key, 400 for a bad body,
    and `fail_next` queued statuses (e.g. 429, 500) returned before normal answers. Like some real
    gateways, error bodies echo the Authorization header they received, so a client that copies a
    body into its error leaks the key.
    """

    def __init__(self, dim: int = 64, api_key: str = "", model: str = "fake-embed") -> None:
        self.dim, self.api_key, self.model = dim, api_key, model
        self.fail_next: list[int] = []
        self.server = LoopbackServer(self.handle)

    def handle(self, req: Request) -> Response:
        """Answer one request."""
        auth = req.headers.get("authorization", "")
        if self.fail_next:
            status = self.fail_next.pop(0)
            message = f"injected failure for request with authorization {auth!r}"
            return Response.of_json({"error": {"message": message, "code": status}}, status)
        if self.api_key and auth != f"Bearer {self.api_key}":
            key = auth.removeprefix("Bearer ")
            return Response.of_json({"error": {"message": f"Incorrect API key provided: {key}"}}, 401)
        try:
            body = req.json()
        except json.JSONDecodeError:
            return Response.of_json({"error": {"message": "invalid JSON"}}, 400)
        if req.path.endswith("/rerank"):
            docs = body.get("documents") or []
            q = set(str(body.get("query", "")).lower().split())
            scores = [len(q & set(str(d).lower().split())) / (1 + len(q)) for d in docs]
            results = sorted(
                ({"index": i, "relevance_score": s} for i, s in enumerate(scores)),
                key=lambda r: -r["relevance_score"],
            )
            return Response.of_json({"results": results})
        if not req.path.endswith("/embeddings"):
            return Response.of_json({"error": {"message": "not found"}}, 404)
        inputs = body.get("input")
        if isinstance(inputs, str):
            inputs = [inputs]
        if not isinstance(inputs, list) or body.get("model") != self.model:
            return Response.of_json({"error": {"message": "bad input or unknown model"}}, 400)
        data = [
            {"object": "embedding", "index": i, "embedding": _vector(t, self.dim)}
            for i, t in enumerate(inputs)
        ]
        return Response.of_json(
            {
                "object": "list",
                "data": data,
                "model": self.model,
                "usage": {"prompt_tokens": 0, "total_tokens": 0},
            }
        )

    @property
    def url(self) -> str:
        """Base URL ending in /v1."""
        return self.server.url + "/v1"

    def __enter__(self) -> FakeEmbeddings:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()
