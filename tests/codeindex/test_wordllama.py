"""The wordllama embedder pools a text's tokens without padding: the model's own vectors, faster."""

from __future__ import annotations

import numpy as np

from xihe.tools.codeindex.embed import WordLlamaEmbedder

TEXTS = [
    "hello world",
    "retry with backoff\nRetry a failed call, waiting longer after each failure. "
    * 8,  # long: others pad to it
    "résumé 中文 code",
    "x",
    "get_user_name\nReturn the user's name.",
]


def test_the_vectors_are_the_models_own(embedder: WordLlamaEmbedder) -> None:
    model = embedder._load()
    theirs = model.embed(TEXTS, norm=True, batch_size=64)  # pads each batch to its longest text
    ours = embedder.embed(TEXTS)
    assert ours.shape == (len(TEXTS), embedder.dim) and ours.dtype == np.float32
    assert np.allclose(ours, theirs, atol=1e-6)
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


def test_batches_do_not_change_a_vector_and_a_text_of_no_token_is_a_zero_row(
    embedder: WordLlamaEmbedder,
) -> None:
    small = WordLlamaEmbedder(batch_size=2)
    small._model = embedder._load()  # the same model, cut into batches of two
    texts = [*TEXTS, "", *TEXTS]
    got = small.embed(texts)
    assert np.allclose(got[: len(TEXTS)], embedder.embed(TEXTS), atol=1e-6)
    assert not got[len(TEXTS)].any()  # the model's own pooling divides 0 by 0 here
    assert np.allclose(got[len(TEXTS) + 1 :], got[: len(TEXTS)], atol=1e-6)
