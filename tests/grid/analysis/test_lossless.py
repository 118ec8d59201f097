"""The losslessness check on constructed request rows whose answers are worked out by hand:
fraction identical, first divergence in characters, the baseline's floor and the flag."""

from __future__ import annotations

import hashlib

import pandas as pd
import pytest

from grid.analysis.lossless import as_json, baseline_for, first_divergence, lossless_table


def h(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def cell(cell_id: str, variant: str, c: int, temperature: float = 0.0) -> dict:
    return {"cell_id": cell_id, "status": "done", "variant": variant, "workload": "coding",
            "concurrency": c, "rate": float("nan"), "temperature": temperature,
            "factors": "{}", "source": "SIMULATION"}


def reqs(cell_id: str, outputs: dict[str, str], t0: float = 0.0,
         status: str = "ok") -> list[dict]:
    return [{"cell_id": cell_id, "prompt_id": p, "status": status, "sent_at": t0 + i,
             "output_hash": h(text), "output_text": text}
            for i, (p, text) in enumerate(outputs.items())]


REF = {"p1": "abcdef", "p2": "hello world", "p3": "xyz"}


def test_fraction_identical_first_divergence_and_floor_by_hand():
    cells = pd.DataFrame([cell("b1", "baseline", 1), cell("b4", "baseline", 4),
                          cell("e1", "eagle3", 1), cell("e4", "eagle3", 4),
                          cell("e4hot", "eagle3", 4, temperature=0.7)])
    rows = (reqs("b4", REF, t0=10) + reqs("b1", REF)  # the c=1 cell is the reference
            + reqs("e1", {"p1": "abcXef", "p2": "hello world", "p3": "xy"})
            + reqs("e4", {"p1": "abcdef", "p2": "help", "p3": "q"})
            + reqs("e4", {"p1": "zzz"}, t0=5, status="error")  # failed: not compared
            + reqs("e4hot", {"p1": "anything"}))  # sampled: not compared
    (row,) = as_json(lossless_table(pd.DataFrame(rows), cells))
    assert (row["variant"], row["baseline"], row["reference_load"]) == ("eagle3", "baseline",
                                                                         "c=1")
    # identical: p2 at c=1 and p1 at c=4; diverged after "abc" (3), "xy" (2), "hel" (3), "" (0)
    assert (row["compared"], row["identical"]) == (6, 2)
    assert row["fraction_identical"] == pytest.approx(2 / 6)
    assert row["median_divergence_chars"] == 2.5
    # the floor: baseline c=4 against c=1, 3 of 3 identical
    assert (row["floor_compared"], row["floor_identical"], row["floor_fraction"]) == (3, 3, 1.0)
    assert row["floor_median_divergence_chars"] is None
    # Fisher one-sided, table [[2, 4], [3, 0]]: P(X <= 2) for X ~ Hypergeometric(N=9, K=5,
    # n=6), X >= 2, so P(X = 2) = C(5,2) C(4,4) / C(9,6) = 10 / 84: not beyond chance
    assert row["p_value"] == pytest.approx(10 / 84)
    assert row["flagged"] is False
    assert "2/6 identical (33%)" in row["statement"] and "within the floor" in row["statement"]


def test_a_variant_that_always_diverges_is_flagged_against_a_clean_floor():
    prompts = {f"p{i}": f"output number {i}" for i in range(6)}
    wrong = {p: t[:7] + "?" for p, t in prompts.items()}  # "output " then a wrong character
    cells = pd.DataFrame([cell("b1", "baseline", 1), cell("b8", "baseline", 8),
                          cell("e1", "eagle3", 1)])
    rows = reqs("b1", prompts) + reqs("b8", prompts, t0=10) + reqs("e1", wrong)
    (row,) = as_json(lossless_table(pd.DataFrame(rows), cells))
    assert (row["compared"], row["identical"], row["floor_identical"]) == (6, 0, 6)
    assert row["median_divergence_chars"] == 7.0
    # P(X = 0) for X ~ Hypergeometric(N=12, K=6, n=6) = 1 / C(12, 6) = 1 / 924
    assert row["p_value"] == pytest.approx(1 / 924)
    assert row["flagged"] is True and "FLAGGED" in row["statement"]


def test_without_a_floor_any_divergence_is_flagged_and_repeats_make_one():
    cells = pd.DataFrame([cell("b1", "baseline", 1), cell("e1", "eagle3", 1)])
    rows = reqs("b1", REF) + reqs("e1", {**REF, "p3": "xyZ"})
    (row,) = as_json(lossless_table(pd.DataFrame(rows), cells))
    assert row["floor_compared"] == 0 and row["floor_fraction"] is None
    assert row["flagged"] is True and row["p_value"] is None
    assert "no floor measured" in row["statement"]
    # the same prompts sent again in the baseline's cell: those repeats are its floor
    rows += reqs("b1", REF, t0=100)
    (row,) = as_json(lossless_table(pd.DataFrame(rows), cells))
    assert (row["floor_compared"], row["floor_identical"]) == (3, 3)


def test_each_setup_is_compared_with_its_own_baseline():
    variants = {"vllm · baseline", "vllm · draft", "sglang · baseline"}
    assert baseline_for("vllm · draft", variants, "baseline") == "vllm · baseline"
    assert baseline_for("sglang · baseline", variants, "baseline") is None
    assert baseline_for("vllm · baseline", variants, "baseline") is None
    # no baseline of its own setup: no comparison (another engine's is no reference)
    assert baseline_for("sim · eagle3", {"sim · eagle3", "vllm · baseline"}, "baseline") is None
    assert baseline_for("eagle3", {"eagle3", "baseline"}, "baseline") == "baseline"


def test_first_divergence_counts_characters_of_the_common_prefix():
    assert first_divergence("héllo", "hélp") == 3
    assert first_divergence("same", "same") == 4
    assert first_divergence("", "x") == 0
    assert first_divergence(None, "x") is None


def test_runs_without_output_columns_give_an_empty_table():
    cells = pd.DataFrame([cell("b1", "baseline", 1)])
    old = pd.DataFrame([{"cell_id": "b1", "prompt_id": "p", "status": "ok", "sent_at": 0.0}])
    assert lossless_table(old, cells).empty
