"""The wordllama embedder pools a text's tokens without padding, and tokenizes each distinct segment
once: the model's own token ids and vectors, faster."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from xihe.tools.codeindex.embed import WordLlamaEmbedder

TEXTS = [
    "hello world",
    "retry with backoff\nRetry a failed call, waiting longer after each failure. "
    * 8,  # long: others pad to it
    "résumé 中文 code",
    "x",
    "get_user_name\nReturn the user's name.",
    "  two  spaces   three    four     ",
    "\tif (x) {\n        return  y;\n    }\n",
    " ",
    "emoji 🚀 ☃\u200b and 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
    "a▁b ▁▁c",  # the separator itself, typed
    "a <s> b</s><unk>c <s>",  # the tokenizer's added tokens, typed
]


def test_the_vectors_are_the_models_own(embedder: WordLlamaEmbedder) -> None:
    model = embedder._load()
    theirs = model.embed(TEXTS, norm=True, batch_size=64)  # pads each batch to its longest text
    ours = embedder.embed(TEXTS)
    assert ours.shape == (len(TEXTS), embedder.dim) and ours.dtype == np.float32
    assert np.allclose(ours, theirs, atol=1e-6)
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


def test_token_ids_are_the_tokenizers_on_code_and_prose(embedder: WordLlamaEmbedder) -> None:
    model = embedder._load()
    sources = sorted(Path(__file__).parents[2].joinpath("tools", "codeindex").glob("*.py"))
    texts = TEXTS + [p.read_text(encoding="utf-8") for p in sources[:40]]  # indentation: runs of spaces
    texts += [line for p in sources[:10] for line in p.read_text(encoding="utf-8").splitlines()]
    theirs = model.tokenizer.encode_batch(texts, add_special_tokens=False)
    ours = embedder.token_ids(texts)
    for text, mine, e in zip(texts, ours, theirs, strict=True):
        assert mine == [i for i, m in zip(e.ids, e.attention_mask, strict=True) if m], text[:80]


def test_a_vector_does_not_depend_on_the_other_texts_and_no_token_is_a_zero_row(
    embedder: WordLlamaEmbedder,
) -> None:
    texts = [*TEXTS, "", *TEXTS]
    got = embedder.embed(texts)
    alone = np.vstack([embedder.embed([t]) for t in TEXTS])
    assert np.allclose(got[: len(TEXTS)], alone, atol=1e-6)
    assert not got[len(TEXTS)].any()  # the model's own pooling divides 0 by 0 here
    assert np.allclose(got[len(TEXTS) + 1 :], got[: len(TEXTS)], atol=1e-6)
