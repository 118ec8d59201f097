"""How close prompts are to a drafter's training data: TF-IDF similarity to the nearest training
row and stratum centroid, scaled by the reference's typical similarity (docs/workloads.md,
"The alignment figure", gives the method, its formula and why it was chosen)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import scipy.sparse as sp  # type: ignore[import-untyped]

from workloads.records import TextRow, row_key, unit_hash

TEXT_CHARS = 800
"""Characters of each text that are vectorised."""
N_FEATURES = 2**18
MAX_REFERENCE_ROWS = 20_000
"""A bigger reference is subsampled deterministically (lowest row-key ranks) to this many."""
SELF_SAMPLE = 400
"""Reference rows used to measure the reference's typical similarity."""
FLOOR_RATIO = 0.4
"""Similarity, as a fraction of the reference's typical one, at which alignment is 0. Chosen on
the shipped prompt sets (docs/workloads.md): unrelated domains score s/typical ~0.2-0.5,
matched ones ~0.9-1.2."""
ALIGNED_THRESHOLD = 0.6
"""Workload alignment at or above this = on the drafter's distribution."""
DENSE_CELLS = 8_000_000
"""Prompt x reference-row similarities held at once (bounds memory: 32 MB of float32)."""

@cache
def _vectorizer() -> Any:
    # scikit-learn is imported on first use, not with the module: it (and the scipy.stats it
    # loads) is ~1 s of every CLI start, and `--help` or a bad flag needs none of it.
    from sklearn.feature_extraction.text import HashingVectorizer  # type: ignore[import-untyped]

    return HashingVectorizer(
        n_features=N_FEATURES, ngram_range=(1, 1), stop_words="english", alternate_sign=False,
        norm=None, token_pattern=r"(?u)\b\w\w+\b", dtype=np.float32)


def _cut(texts: Iterable[str]) -> list[str]:
    return [t[:TEXT_CHARS] for t in texts]


@dataclass(frozen=True)
class Alignment:
    """A workload's alignment against one reference."""

    value: float
    """Mean prompt alignment in [0, 1]."""
    ok: bool
    """value >= ALIGNED_THRESHOLD."""
    similarity: tuple[float, ...]
    """Per prompt: similarity s to the training data (nearest row or stratum centroid)."""
    per_prompt: tuple[float, ...]
    """Per prompt: alignment in [0, 1]."""
    typical: float
    """The reference's typical similarity."""
    reference: str
    """What the prompts were compared with (for plans, cell rows and reports)."""


class ReferenceIndex:
    """TF-IDF vectors of reference texts (a drafter's training rows) and their strata centroids,
    ready for similarity queries. Pure: no files, deterministic."""

    def __init__(self, texts: Sequence[str], strata: Sequence[str], description: str) -> None:
        keys = [row_key(t) for t in texts]
        if not texts:
            raise ValueError(f"{description}: no reference rows to compare with")
        if len(texts) > MAX_REFERENCE_ROWS:
            order = sorted(range(len(texts)), key=lambda i: unit_hash("reference", keys[i]))
            keep = sorted(order[:MAX_REFERENCE_ROWS])
            texts, keys, strata = ([seq[i] for i in keep] for seq in (texts, keys, strata))
        self.description = description
        from sklearn.feature_extraction.text import TfidfTransformer

        counts = _vectorizer().transform(_cut(texts))
        self.idf = TfidfTransformer(sublinear_tf=True).fit(counts).idf_.astype(np.float32)
        matrix = self._weigh(counts)
        # Features x rows (CSR): a query costs the posting lists of its own terms only.
        self.by_feature = matrix.T.tocsr()
        self.keys = list(keys)
        self.position: dict[str, int] = {}
        for i, key in enumerate(self.keys):
            self.position.setdefault(key, i)
        labels = sorted(set(strata))
        self.strata = labels
        self.row_stratum = np.array([labels.index(s) for s in strata], dtype=np.int64)
        member = sp.csr_matrix((np.ones(len(strata), dtype=np.float32),
                                (self.row_stratum, np.arange(len(strata)))),
                               shape=(len(labels), len(strata)))
        sums = (member @ matrix).tocsr()  # strata x features: sum of the rows' unit vectors
        self.sums_by_feature = sums.T.tocsr()
        self.sum_sq = np.asarray(sums.multiply(sums).sum(axis=1)).ravel()
        self.sizes = np.bincount(self.row_stratum, minlength=len(labels))
        self.typical = self._typical(matrix)
        from sklearn.utils import murmurhash3_32  # type: ignore[import-untyped]

        self._analyzer = _vectorizer().build_analyzer()
        self._hash = murmurhash3_32

    @classmethod
    def from_rows(cls, rows: Sequence[TextRow], description: str) -> ReferenceIndex:
        return cls([r.text for r in rows], [r.source or r.domain or "unknown" for r in rows],
                   description)

    def __len__(self) -> int:
        return len(self.keys)

    def _weigh(self, counts: sp.csr_matrix) -> sp.csr_matrix:
        """Sublinear tf x idf, rows L2-normalised: what TfidfTransformer(sublinear_tf=True)
        .transform computes, written out because its per-call checks cost ~1.4 ms, more than
        the whole query for one prompt (the simulator scores prompts one at a time)."""
        x = sp.csr_matrix(counts, dtype=np.float32, copy=True)
        np.log(x.data, out=x.data)
        x.data += 1.0
        x.data *= self.idf[x.indices]
        rows = np.repeat(np.arange(x.shape[0]), np.diff(x.indptr))
        norms = np.sqrt(np.bincount(rows, weights=x.data * x.data, minlength=x.shape[0]))
        x.data /= np.maximum(norms, 1e-12)[rows].astype(np.float32)
        return x

    def vectors(self, texts: Sequence[str]) -> sp.csr_matrix:
        """L2-normalised TF-IDF rows of `texts` (the reference's idf)."""
        return self._weigh(_vectorizer().transform(_cut(texts)))

    def _similarity(self, q: sp.csr_matrix, keys: Sequence[str]) -> np.ndarray:
        """Per query row: max(nearest-row cosine, nearest-centroid cosine), leave-one-out."""
        step = max(1, DENSE_CELLS // max(len(self), 1))
        if q.shape[0] > step:
            return np.concatenate([self._similarity(q[i:i + step], keys[i:i + step])
                                   for i in range(0, q.shape[0], step)])
        rows = (q @ self.by_feature).toarray()
        dots = (q @ self.sums_by_feature).toarray()  # q . (sum of stratum unit vectors)
        return self._combine(rows, dots, keys)

    def _combine(self, rows: np.ndarray, dots: np.ndarray, keys: Sequence[str]) -> np.ndarray:
        """Per query: max(nearest-row cosine, nearest-centroid cosine) from its cosines to the
        rows and dot products with the strata sums, leaving out a query found in the reference."""
        sum_sq = np.broadcast_to(self.sum_sq, dots.shape).copy()
        sizes = np.broadcast_to(self.sizes, dots.shape).copy()
        for j, key in enumerate(keys):
            i = self.position.get(key)
            if i is None:
                continue
            rows[j, i] = 0.0
            k = self.row_stratum[i]
            # The stratum without this row: (S - v); q == v, so q.v = 1 and |v| = 1.
            dots[j, k] -= 1.0
            sum_sq[j, k] += 1.0 - 2.0 * (dots[j, k] + 1.0)
            sizes[j, k] -= 1
        norms = np.sqrt(np.maximum(sum_sq, 1e-12))
        centroid = np.where(sizes > 0, dots / norms, 0.0)
        return np.maximum(rows.max(axis=1), centroid.max(axis=1)).clip(0.0, 1.0)

    def similarity_one(self, text: str) -> float:
        """`similarity([text])[0]` on the simulator's per-request path: the same arithmetic
        with numpy on the posting lists of the prompt's own terms instead of scipy's generic
        sparse product and sklearn's per-call checks (~0.1 ms instead of ~1 ms per prompt;
        bench/workloads_throughput.py)."""
        analyzed = self._analyzer(text[:TEXT_CHARS])
        if not analyzed:
            return 0.0
        # sklearn's feature hashing: |signed murmurhash3_32(token, seed 0)| mod n_features.
        hashed = np.abs(np.fromiter((self._hash(t, 0) for t in analyzed), dtype=np.int64,
                                    count=len(analyzed))) % N_FEATURES
        terms, tf = np.unique(hashed, return_counts=True)
        weights = (1.0 + np.log(tf)) * self.idf[terms]
        weights /= max(float(np.sqrt(weights @ weights)), 1e-12)
        rows = self._scatter(self.by_feature, terms, weights, len(self))
        dots = self._scatter(self.sums_by_feature, terms, weights, len(self.strata))
        return float(self._combine(rows[None, :], dots[None, :], [row_key(text)])[0])

    @staticmethod
    def _scatter(by_feature: sp.csr_matrix, terms: np.ndarray, weights: np.ndarray,
                 size: int) -> np.ndarray:
        """Σ_t weight_t x row t of a features-major CSR matrix, as a dense vector."""
        starts = by_feature.indptr[terms]
        lengths = by_feature.indptr[terms + 1] - starts
        total = int(lengths.sum())
        if not total:
            return np.zeros(size)
        # Positions of every posting of every term, without a Python loop over the terms.
        offsets = np.repeat(starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
        index = np.arange(total) + offsets
        scale = np.repeat(weights, lengths)
        return np.bincount(by_feature.indices[index], weights=by_feature.data[index] * scale,
                           minlength=size)

    def similarity(self, texts: Sequence[str]) -> np.ndarray:
        """Similarity s of each text to the reference (see the module docstring)."""
        if not texts:
            return np.zeros(0)
        return self._similarity(self.vectors(texts), [row_key(t) for t in texts])

    def _typical(self, matrix: sp.csr_matrix) -> float:
        if len(self) < 2:
            return 1.0
        order = sorted(range(len(self)), key=lambda i: unit_hash("self", self.keys[i]))
        order = order[:SELF_SAMPLE]
        sims = self._similarity(matrix[order], [self.keys[i] for i in order])
        return float(np.median(sims))

    def scale(self, similarity: np.ndarray) -> np.ndarray:
        """Similarities -> alignment in [0, 1] (see the module docstring)."""
        ratio = similarity / max(self.typical, 1e-6)
        return np.clip((ratio - FLOOR_RATIO) / (1.0 - FLOOR_RATIO), 0.0, 1.0)

    def align(self, texts: Sequence[str]) -> Alignment:
        similarity = self.similarity(texts)
        per_prompt = self.scale(similarity)
        value = float(per_prompt.mean()) if len(per_prompt) else 0.0
        return Alignment(value=value, ok=value >= ALIGNED_THRESHOLD,
                         similarity=tuple(float(x) for x in similarity),
                         per_prompt=tuple(float(x) for x in per_prompt),
                         typical=self.typical, reference=self.description)
