"""The alignment check: separates matched from mismatched prompts on a constructed training file
and on the shipped prompt sets; leave-one-out arithmetic checked against a dense recomputation."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from workloads import PROMPTS_DIR
from workloads.alignment import ALIGNED_THRESHOLD, ReferenceIndex
from workloads.loaders import iter_rows, read_prompt_file
from workloads.reference import drafter_reference

CODE_WORDS = ("function", "python", "return", "list", "dict", "pytest", "refactor", "class",
              "exception", "async", "await", "parser", "regex", "module", "import", "compile",
              "variable", "loop", "index", "cache", "handler", "endpoint", "json", "schema",
              "tool_call", "arguments", "repository", "traceback", "stack", "unittest")
PROSE_WORDS = ("empire", "century", "river", "dynasty", "painter", "revolution", "ancient",
               "mountain", "kingdom", "treaty", "cathedral", "explorer", "harvest", "climate",
               "volcano", "poet", "battle", "museum", "migration", "coastline", "monarchy",
               "festival", "glacier", "philosopher", "trade", "province", "colony", "legend")


def _texts(words: tuple[str, ...], n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(words, k=rng.randint(12, 40))) for _ in range(n)]


@pytest.fixture(scope="module")
def coding_training_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("train") / "train.jsonl"
    path.write_text("".join(
        json.dumps({"conversations": [{"from": "human", "value": t},
                                      {"from": "gpt", "value": "answer"}],
                    "source": "magicoder"}) + "\n"
        for t in _texts(CODE_WORDS, 400, seed=1)))
    return path


def test_constructed_training_file_separates_matched_from_mismatched(coding_training_file):
    ref = drafter_reference(coding_training_file, None)
    index = ReferenceIndex.from_rows(ref.rows, ref.description)
    matched = index.align(_texts(CODE_WORDS, 50, seed=2))
    mismatched = index.align(_texts(PROSE_WORDS, 50, seed=3))
    assert matched.ok and matched.value >= 0.9
    assert not mismatched.ok and mismatched.value <= 0.1
    assert min(matched.similarity) > max(mismatched.similarity)
    assert "train.jsonl" in matched.reference and "400 rows" in matched.reference


def test_a_sample_from_the_training_file_is_not_its_own_neighbour(coding_training_file):
    rows = list(iter_rows(coding_training_file))
    index = ReferenceIndex.from_rows(rows, "train")
    sims = index.similarity([r.text for r in rows[:20]])
    assert (sims < 0.999).all()  # verbatim rows are compared with the others (leave-one-out)


def test_leave_one_out_matches_a_dense_recomputation():
    texts = _texts(CODE_WORDS, 30, seed=5) + _texts(PROSE_WORDS, 20, seed=6)
    strata = ["code"] * 30 + ["prose"] * 20
    index = ReferenceIndex(texts, strata, "mixed")
    queries = texts[:5] + texts[30:33] + _texts(CODE_WORDS, 3, seed=9)
    got = index.similarity(queries)
    ref = index.vectors(texts).toarray().astype(np.float64)
    q = index.vectors(queries).toarray().astype(np.float64)
    labels = np.array(strata)
    expected = []
    for j, text in enumerate(queries):
        others = np.array([t != text for t in texts])
        nearest = (ref[others] @ q[j]).max()
        centroids = []
        for label in ("code", "prose"):
            members = ref[others & (labels == label)]
            centre = members.sum(axis=0)
            centroids.append(centre @ q[j] / np.linalg.norm(centre))
        expected.append(max(nearest, *centroids))
    assert np.allclose(got, expected, atol=1e-4)


def _shipped(domain: str):
    path = PROMPTS_DIR / f"{domain}.jsonl"
    if not path.is_file():
        pytest.skip(f"{path.name} is not shipped")
    return [r.text for r in read_prompt_file(path)[0]]


def test_shipped_prompts_against_a_coding_agentic_mix():
    ref = drafter_reference(None, {"coding": 0.6, "agentic": 0.4})
    index = ReferenceIndex.from_rows(ref.rows, ref.description)
    coding = index.align(_shipped("coding"))
    agentic = index.align(_shipped("agentic"))
    encyclopedic = index.align(_shipped("encyclopedic"))
    assert coding.ok and agentic.ok
    assert not encyclopedic.ok
    assert min(coding.value, agentic.value) - encyclopedic.value >= 0.3
    assert coding.value >= ALIGNED_THRESHOLD > encyclopedic.value


def test_shipped_prompts_against_an_encyclopedic_drafter():
    ref = drafter_reference(None, {"encyclopedic": 1.0})
    index = ReferenceIndex.from_rows(ref.rows, ref.description)
    assert index.align(_shipped("encyclopedic")).ok
    assert not index.align(_shipped("coding")).ok


def test_the_one_prompt_path_equals_the_batch_path(coding_training_file):
    rows = list(iter_rows(coding_training_file))
    index = ReferenceIndex.from_rows(rows, "train")
    texts = (_texts(CODE_WORDS, 10, seed=11) + _texts(PROSE_WORDS, 10, seed=12)
             + [r.text for r in rows[:5]] + ["", "a b c"])
    batch = index.similarity(texts)
    one = [index.similarity_one(t) for t in texts]
    assert np.allclose(batch, one, atol=1e-5)
