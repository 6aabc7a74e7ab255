"""A synthetic corpus of any size whose postings and vectors behave like a real one (bench part `million`).

Copies of a real collection (``bench/scale.py``) cannot stand for a million chunks: every term's
postings are ten copies of SciFact's, and every vector has ten near-twins, which is no corpus's
neighbourhood structure. This module generates one instead, from a seed, the way topic models
describe text:

* **Words.** ``VOCAB`` pseudo-words made of syllables, each kept only if kbctl's analyzer leaves it
  unchanged (not a stop word, its own Snowball stem), so the text a chunk holds, the postings
  written for it and the terms of a query typed against it agree.
* **Term distribution.** Each token is drawn from a background Zipf law over the whole vocabulary
  (exponent ``ZIPF``, Mandelbrot offset 2.7: the shape of English word frequencies) with probability
  ``BACKGROUND``, else from one of the chunk's topics. ``TOPICS`` topics, their sizes Zipfian too (a
  corpus has large and small subjects), each a Zipfian distribution over ``TOPIC_WORDS`` words
  drawn from the middle of the frequency range, so a topic's words are rare overall and frequent
  together: the co-occurrence that makes BM25's idf and block-max pruning behave as on real text.
  A chunk has a main topic and, with weight ``1 - MAIN``, a second; its length is log-normal
  (median ``LENGTH`` analyzed terms, SciFact's chunks' shape).
* **Vectors.** An averaged-word-embedding model: each word has a vector, the sum of its topics'
  centroids (each topic's centroid near its field's: ``FIELDS`` fields, so neighbourhoods nest) and
  a word-specific direction; a text's vector is the normalised sum of its words' vectors weighted
  by (1 + log tf) * idf. Chunks of one topic cluster, chunks sharing a field sit nearer than
  strangers, and within a cluster the words a chunk happened to draw place it: the multi-scale
  neighbourhood structure HNSW works against in real embeddings, not exact copies. ``synth``
  registers it as kbctl's ``synth`` embedder (in the benchmark process only), so a query is
  embedded through kbctl's own query path.
* **Queries.** A query picks a chunk and draws 4 to 14 words, half from the chunk itself and half
  from its main topic: related to one chunk, answered by its topic's.

``calibrate`` compares the generated statistics with a real namespace (document frequencies, the
cosine of each chunk to its nearest neighbour and to a random chunk): the figures are printed by
the bench part and written to docs/benchmarks.md.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass

import numpy as np

SEED = 20261125
VOCAB = 200_000
ZIPF = 1.05
BACKGROUND = 0.35
TOPICS = 3_000
TOPIC_WORDS = 300
FIELDS = 60
MAIN = 0.8
LENGTH = 67  # median analyzed terms of a chunk (mean 78: SciFact's chunks under MiniLM's chunking)
DIM = 384
# Word vector = TOPIC_W · (its topics' centroids) + WORD_W · (its own direction); centroid = FIELD_W ·
# field + (1 - FIELD_W) · own. Tuned so that a chunk's nearest neighbour and a random chunk sit at the
# cosines of MiniLM's SciFact chunks (``calibrate``).
TOPIC_W = 1.0
WORD_W = 0.7
FIELD_W = 0.55
# Averaged word vectors share a common direction (every text has common words); real sentence
# embeddings are less anisotropic (MiniLM's SciFact chunks: random pairs at cosine ~0.1). Texts'
# vectors have CENTER times the mean of a sample of texts' vectors removed (as "all-but-the-top"
# post-processing does).
CENTER = 0.6

#: Names this generator's output: a namespace built by another version is rebuilt (bench/million.py).
VERSION = "2"  # the texts and vectors; queries are drawn at measurement time

_SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in ("a", "e", "i", "o", "u", "ai", "ou")]
_WORD = re.compile(r"[a-z]+")


@dataclass
class Model:
    words: list[str]
    index: dict[str, int]
    bg_cum: np.ndarray  # cumulative background probabilities (VOCAB)
    topic_pop_cum: np.ndarray  # cumulative topic sizes (TOPICS)
    topic_words: np.ndarray  # (TOPICS, TOPIC_WORDS) word ids
    topic_cum: np.ndarray  # cumulative within-topic probabilities (TOPIC_WORDS)
    idf: np.ndarray  # (VOCAB) from the generative probabilities: what the embedder weighs words by
    vectors: np.ndarray  # (VOCAB, DIM) float32 word vectors
    center: np.ndarray | None = None  # (DIM) subtracted from every text's vector before normalising
    dfn: np.ndarray | None = None  # (VOCAB) expected document frequency / chunks of each word


def _zipf(n: int, s: float, q: float = 2.7) -> np.ndarray:
    p = 1.0 / (np.arange(1, n + 1) + q) ** s
    return p / p.sum()


def _pseudo_words(rng: np.random.Generator, n: int) -> list[str]:
    from kbctl.textutil.analyze import Analyzer

    a = Analyzer("english")
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < n:
        k = rng.integers(2, 5, size=4 * (n - len(out)) + 100)
        picks = rng.integers(0, len(_SYLLABLES), size=(len(k), 4))
        for length, row in zip(k, picks):
            w = "".join(_SYLLABLES[i] for i in row[:length])
            if w in seen or a.terms(w) != [w]:
                continue
            seen.add(w)
            out.append(w)
            if len(out) == n:
                break
    return out


@functools.lru_cache(maxsize=1)
def model(seed: int = SEED) -> Model:
    """The generative model (words, distributions, word vectors) of ``seed``: the same every time."""
    rng = np.random.default_rng(seed)
    words = _pseudo_words(rng, VOCAB)
    bg = _zipf(VOCAB, ZIPF)
    pop = _zipf(TOPICS, 0.6, 10.0)
    # A topic's words come from the middle of the frequency range (ranks ~300 on): rare overall.
    mid = _zipf(VOCAB, 0.6, 300.0)
    mid[:300] = 0
    mid /= mid.sum()
    mid_cum = np.cumsum(mid)
    topic_words = np.empty((TOPICS, TOPIC_WORDS), dtype=np.int64)
    for k in range(TOPICS):  # TOPIC_WORDS distinct words, drawn by ``mid``
        pick = np.unique(_draw(mid_cum, rng.random(3 * TOPIC_WORDS)))
        topic_words[k] = rng.permutation(pick)[:TOPIC_WORDS]
    within = _zipf(TOPIC_WORDS, 1.0, 1.0)
    # Overall probability of each word (for idf): background plus every topic's share.
    p = BACKGROUND * bg
    np.add.at(p, topic_words.ravel(), ((1 - BACKGROUND) * pop[:, None] * within[None, :]).ravel())
    dfn = 1.0 - np.exp(-p * LENGTH * 1.16)  # a chunk of mean length holds the word at least once
    idf = np.log(1.0 / np.maximum(p, 1e-12)).astype(np.float32)
    idf -= idf.min() - 0.5
    fields = _unit(rng.standard_normal((FIELDS, DIM)))
    field_of = rng.integers(0, FIELDS, size=TOPICS)
    centroids = _unit(FIELD_W * fields[field_of] + (1 - FIELD_W) * _unit(rng.standard_normal((TOPICS, DIM))))
    from scipy import sparse

    member = sparse.csr_matrix(
        (np.ones(topic_words.size), (topic_words.ravel(), np.repeat(np.arange(TOPICS), TOPIC_WORDS))),
        shape=(VOCAB, TOPICS),
    )
    vec = WORD_W * _unit(rng.standard_normal((VOCAB, DIM)).astype(np.float32)) + TOPIC_W * (member @ centroids)
    m = Model(
        words,
        {w: i for i, w in enumerate(words)},
        np.cumsum(bg),
        np.cumsum(pop),
        topic_words,
        np.cumsum(within),
        idf,
        _unit(vec).astype(np.float32),
    )
    m.dfn = dfn
    m.center = (CENTER * embed_batch(m, batch(m, 5000, seed + 1)).mean(axis=0)).astype(np.float32)
    return m


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


def _draw(cum: np.ndarray, u: np.ndarray) -> np.ndarray:
    return np.minimum(np.searchsorted(cum, u * cum[-1]), len(cum) - 1)


@dataclass
class Batch:
    """``n`` generated chunks: their tokens (word ids, concatenated, ``starts`` into them), main topic
    and postings (chunk index, word id, tf) with each chunk's length."""

    n: int
    tokens: np.ndarray
    starts: np.ndarray
    topic: np.ndarray
    post_chunk: np.ndarray
    post_word: np.ndarray
    post_tf: np.ndarray
    length: np.ndarray

    def texts(self, m: Model) -> list[str]:
        words = np.asarray(m.words, dtype=object)[self.tokens]
        return [" ".join(words[a:b]) for a, b in zip(self.starts[:-1], self.starts[1:])]


def batch(m: Model, n: int, seed: int) -> Batch:
    """``n`` chunks from the model (the same for the same ``seed``)."""
    rng = np.random.default_rng(seed)
    length = np.clip(np.round(rng.lognormal(math.log(LENGTH), 0.55, n)), 12, 600).astype(np.int64)
    starts = np.concatenate([[0], np.cumsum(length)])
    total = int(starts[-1])
    main = _draw(m.topic_pop_cum, rng.random(n))
    second = _draw(m.topic_pop_cum, rng.random(n))
    owner = np.repeat(np.arange(n), length)
    u = rng.random(total)
    topic = np.where(rng.random(total) < MAIN, main[owner], second[owner])
    from_topic = m.topic_words[topic, _draw(m.topic_cum, rng.random(total))]
    tokens = np.where(u < BACKGROUND, _draw(m.bg_cum, rng.random(total)), from_topic)
    key = owner * VOCAB + tokens
    uniq, tf = np.unique(key, return_counts=True)
    return Batch(n, tokens, starts, main, uniq // VOCAB, uniq % VOCAB, tf, length)


def embed_batch(m: Model, b: Batch) -> np.ndarray:
    """The chunks' vectors: normalised sum of word vectors weighted by (1 + log tf) · idf."""
    from scipy import sparse

    w = (1.0 + np.log(b.post_tf)) * m.idf[b.post_word]
    mat = sparse.csr_matrix((w.astype(np.float32), (b.post_chunk, b.post_word)), shape=(b.n, VOCAB))
    x = _unit(np.asarray(mat @ m.vectors))
    return (x if m.center is None else _unit(x - m.center)).astype(np.float32)


def embed_text(m: Model, text: str) -> np.ndarray:
    ids = [m.index[w] for w in _WORD.findall(text.lower()) if w in m.index]
    if not ids:
        v = np.zeros(DIM, dtype=np.float32)
        v[0] = 1.0
        return v
    uniq, tf = np.unique(np.asarray(ids), return_counts=True)
    w = (1.0 + np.log(tf)) * m.idf[uniq]
    x = _unit(w @ m.vectors[uniq])
    return (x if m.center is None else _unit(x - m.center)).astype(np.float32)


def topical_queries(m: Model, b: Batch, count: int, seed: int) -> list[tuple[int, str]]:
    """(chunk index in ``b``, query text): 4 to 14 words, half from the chunk itself and half from its
    main topic; a query about one subject, whose vector lies in its topic's cluster as a real query's
    lies near the passages that answer it. The dense lane's recall is measured on these: the
    SciFact-shaped ``queries`` mix in so many common words that their vectors fall between clusters,
    HNSW's worst case (docs/benchmarks.md has both)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in rng.choice(b.n, size=count, replace=False):
        own = b.tokens[b.starts[i] : b.starts[i + 1]]
        size = int(rng.integers(4, 15))
        half = size // 2
        picked = list(rng.choice(own, size=half))
        picked += list(m.topic_words[b.topic[i], _draw(m.topic_cum, rng.random(size - half))])
        out.append((int(i), " ".join(dict.fromkeys(m.words[w] for w in picked))))
    return out


# SciFact's test queries, analyzed (300 claims): distinct terms per query 4 / 8 / 16 at the 5th, 50th
# and 95th percentiles, and each term's document frequency over the chunks (df/N) log-normal:
# log10 quantiles -3.06, -2.34, -1.64, -1.16, -0.79 at 10, 25, 50, 75, 90 %. A median query's terms
# hold 0.45 N postings, the 95th percentile's 1.04 N: long claims with common scientific words.
QUERY_TERMS = (8.0, 0.42)  # log-normal: median, sigma
QUERY_DFN = (-1.68, 0.75, -0.3)  # log10 df/N: mean, sd, upper bound
SPECIFIC = 0.003  # a term rarer than this (df/N) is one of the chunk's own words


def queries(m: Model, b: Batch, count: int, seed: int) -> list[tuple[int, str]]:
    """(chunk index in ``b``, query text) for ``count`` queries about chunks of ``b``, shaped as
    SciFact's: as many distinct terms, with document frequencies drawn from SciFact's queries'.
    A rare term slot takes one of the chunk's own words of its main topic (what the query is about),
    a common one the word whose expected df/N is nearest (what a claim says around it: "increase")."""
    assert m.dfn is not None
    rng = np.random.default_rng(seed)
    by_dfn = np.argsort(m.dfn)
    sorted_dfn = m.dfn[by_dfn]
    out = []
    for i in rng.choice(b.n, size=count, replace=False):
        own = np.unique(b.tokens[b.starts[i] : b.starts[i + 1]])
        # What the query is about: the chunk's words of its main topic, rarest first (a chunk's rarest
        # words overall are the background's long tail, which says nothing of its subject).
        own = np.intersect1d(own, m.topic_words[b.topic[i]])
        own = own[np.argsort(m.dfn[own])]
        size = int(np.clip(round(rng.lognormal(math.log(QUERY_TERMS[0]), QUERY_TERMS[1])), 3, 20))
        mean, sd, top = QUERY_DFN
        target = np.minimum(10 ** rng.normal(mean, sd, size), 10**top)
        picked: list[int] = []
        rare = [w for w in own.tolist()]
        for r in sorted(target.tolist()):
            if r < SPECIFIC and rare:
                picked.append(rare.pop(int(rng.integers(0, min(len(rare), 8)))))
            else:
                j = int(np.clip(np.searchsorted(sorted_dfn, r), 0, len(by_dfn) - 1))
                j = int(np.clip(j + rng.integers(-3, 4), 0, len(by_dfn) - 1))  # not always the same word
                picked.append(int(by_dfn[j]))
        out.append((int(i), " ".join(dict.fromkeys(m.words[w] for w in picked))))
    return out


# --- kbctl's `synth` embedder (registered by ``register`` in the benchmark process) ------------


class SynthEmbedder:
    def __init__(self, profile) -> None:
        self.profile = profile
        self.dimension = DIM
        self.model = model()

    def embed_documents(self, texts):
        return np.stack([embed_text(self.model, t) for t in texts]) if texts else np.zeros((0, DIM), np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return embed_text(self.model, text)


class SynthPlugin:
    def __call__(self, profile, *, cache_dir=None, purpose: str = "throughput") -> SynthEmbedder:
        return SynthEmbedder(profile)

    def tokenizer(self, profile):
        from kbctl.embed.tokens import WordTokenizer

        return WordTokenizer()


factory = SynthPlugin()


def register() -> None:
    """Make ``embedder = "synth"`` resolve in this process (kbctl finds embedders by entry point;
    the benchmark's is not installed, so it is added to the process's table of built-ins)."""
    from kbctl import plugins

    plugins.BUILTIN[plugins.EMBEDDERS]["synth"] = "synth:factory"


def calibrate(real: np.ndarray, fake: np.ndarray, seed: int = 0, sample: int = 500) -> dict:
    """Neighbourhood statistics of two sets of unit vectors (rows): the median cosine of a sampled
    vector to its nearest neighbour (among all) and to a random other vector."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, x in (("real", real), ("synthetic", fake)):
        idx = rng.choice(len(x), size=min(sample, len(x)), replace=False)
        sims = x[idx] @ x.T
        sims[np.arange(len(idx)), idx] = -1
        nn = sims.max(axis=1)
        rand = sims[np.arange(len(idx)), rng.integers(0, len(x), len(idx))]
        tenth = np.sort(sims, axis=1)[:, -10]
        out[name] = {
            "nn_cos_median": float(np.median(nn)),
            "10th_nn_cos_median": float(np.median(tenth)),
            "random_cos_median": float(np.median(rand)),
        }
    return out
