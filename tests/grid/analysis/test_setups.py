"""A grid with an engine or a model axis (grid/analysis/setups.py): every variant is compared
with the baseline of its own setup, and the setups with each other baseline to baseline. The
frames are built by hand (per-stream speeds chosen below), so every expected ratio is the
ratio of two of those speeds."""

from __future__ import annotations

import pandas as pd
import pytest

from grid.analysis import analyse_cells, decide
from grid.analysis.domains import domain_table, workload_speedups
from grid.analysis.setups import baseline_of, label_setups, split
from tests.grid.analysis.synthetic import grid, on_setup


def _setups(speeds: dict[tuple[str, str], dict[str, dict[int, float]]]
            ) -> tuple[pd.DataFrame, pd.DataFrame]:
    frames = [on_setup(*grid(by_variant), engine, model)
              for (engine, model), by_variant in speeds.items()]
    return (pd.concat([c for c, _ in frames], ignore_index=True),
            pd.concat([r for _, r in frames], ignore_index=True))


# Two engines, one model: SGLang's baseline streams at 100 tok/s, vLLM's at 160 (+60 %).
# vLLM's EAGLE-3: 192 at c=1 (+20 % over vLLM's baseline), 128 at c=4 (-20 %); SGLang's
# EAGLE-3: 130 at c=1 (+30 % over SGLang's). Against SGLang's baseline, vLLM's EAGLE-3 would
# read +92 % and +28 %: the engine, not speculation.
ENGINES = {("sglang", "llama3.1-8b"): {"baseline": {1: 100.0, 4: 100.0},
                                       "eagle3": {1: 130.0}},
           ("vllm", "llama3.1-8b"): {"baseline": {1: 160.0, 4: 160.0},
                                     "eagle3": {1: 192.0, 4: 128.0}}}
# One engine, two models (the numbers): 8B 207 -> 275 tok/s (+33 %), 70B 153 -> 221
# (+44 %); pooled they would read (275 + 221) / (207 + 153) - 1 = +38 %.
MODELS = {("sim", "llama3.1-8b"): {"baseline": {1: 207.0}, "eagle3": {1: 275.0}},
          ("sim", "llama3.3-70b"): {"baseline": {1: 153.0}, "eagle3": {1: 221.0}}}


def test_labels_split_and_pair_within_a_setup():
    assert split("vllm · llama3.1-8b · eagle3") == ("vllm · llama3.1-8b", "eagle3")
    assert split("eagle3") == ("", "eagle3")
    assert baseline_of("vllm · llama3.1-8b · eagle3") == "vllm · llama3.1-8b · baseline"
    assert baseline_of("eagle3") == "baseline"


def test_labels_carry_only_the_axes_that_vary():
    cells, requests = _setups(ENGINES)
    axes, labelled, (reqs,) = label_setups(cells, requests)
    assert axes == ["engine"]  # one model: it tells no pair apart
    assert set(labelled.variant) == {"sglang · baseline", "sglang · eagle3", "vllm · baseline",
                                     "vllm · eagle3"}
    assert set(reqs.variant) == set(labelled.variant)
    both = pd.concat([cells, cells.assign(model="llama3.3-70b",
                                          cell_id="70b-" + cells.cell_id)])
    axes, labelled, _ = label_setups(both)
    assert axes == ["engine", "model"]
    assert "vllm · llama3.3-70b · eagle3" in set(labelled.variant)
    same, labelled, _ = label_setups(grid({"baseline": {1: 1.0}})[0])
    assert same == [] and list(labelled.variant) == ["baseline"]


def test_two_engines_each_variant_against_its_own_engines_baseline():
    cells, requests = _setups(ENGINES)
    decision = decide(analyse_cells(cells, requests, replicates=300))
    table = decision.speedups.set_index(["variant", "load"])
    assert set(table.baseline) == {"sglang · baseline", "vllm · baseline"}
    assert table.baseline[("vllm · eagle3", 1)] == "vllm · baseline"
    assert table.speedup[("vllm · eagle3", 1)] == pytest.approx(0.20, abs=0.03)
    assert table.speedup[("vllm · eagle3", 4)] == pytest.approx(-0.20, abs=0.03)
    assert table.speedup[("sglang · eagle3", 1)] == pytest.approx(0.30, abs=0.03)
    assert list(table.verdict[("vllm · eagle3", slice(None))]) == ["faster", "slower"]
    # the engines, baseline to baseline: vLLM's +60 % at both loads, a section of its own
    engines = decision.setups.set_index("load")
    assert set(engines.axis) == {"engine"}
    assert (set(engines.value), set(engines.reference)) == ({"vllm"}, {"sglang"})
    for c in (1, 4):
        assert engines.speedup[c] == pytest.approx(0.60, abs=0.04)
        assert engines.verdict[c] == "faster"
    lines = decision.lines()
    assert any(line.startswith("vllm · eagle3 vs baseline on coding: c=1 +") for line in lines)
    assert not any("vs sglang · baseline" in line for line in lines)
    assert any(line.strip().startswith("engine vllm vs sglang, baseline to baseline on coding")
               for line in lines)
    (rec,) = [r for r in decision.recommendations if r["variant"] == "vllm · eagle3"]
    assert rec["speculative_disable_above_batch"] == 1  # pays at c=1, loses at c=4


def test_two_models_are_never_pooled():
    cells, requests = _setups(MODELS)
    decision = decide(analyse_cells(cells, requests, replicates=300))
    table = decision.speedups.set_index("variant")
    assert sorted(table.index) == ["llama3.1-8b · eagle3", "llama3.3-70b · eagle3"]
    assert table.speedup["llama3.1-8b · eagle3"] == pytest.approx(275 / 207 - 1, abs=0.03)
    assert table.speedup["llama3.3-70b · eagle3"] == pytest.approx(221 / 153 - 1, abs=0.03)
    (models,) = decision.setups.to_dict("records")
    assert (models["axis"], models["value"], models["reference"]) == (
        "model", "llama3.3-70b", "llama3.1-8b")
    assert models["speedup"] == pytest.approx(153 / 207 - 1, abs=0.03)
    text = "\n".join(decision.lines())
    assert "llama3.1-8b · eagle3 vs baseline on coding: c=1 +" in text
    assert "\neagle3 vs baseline" not in "\n" + text  # no pooled line
    as_json = decision.as_json()
    assert {r["baseline"] for r in as_json["speedups"]} == {"llama3.1-8b · baseline",
                                                           "llama3.3-70b · baseline"}
    assert as_json["setup_comparisons"][0]["axis"] == "model"


def test_per_domain_and_per_workload_speedups_use_the_own_setups_baseline():
    cells, requests = _setups(ENGINES)
    domains = domain_table(requests, cells).set_index(["variant", "concurrency"])
    # a request's own rate: 192 / 160 on vLLM, 130 / 100 on SGLang (each over its own)
    assert domains.speedup[("vllm · eagle3", 1)] == pytest.approx(1.20, abs=0.03)
    assert domains.speedup[("vllm · eagle3", 4)] == pytest.approx(0.80, abs=0.03)
    assert domains.speedup[("sglang · eagle3", 1)] == pytest.approx(1.30, abs=0.03)
    per_workload = workload_speedups(cells).set_index(["variant", "concurrency"])
    assert per_workload.speedup[("vllm · eagle3", 4)] == pytest.approx(128 / 160, rel=1e-9)
    assert per_workload.speedup[("sglang · eagle3", 1)] == pytest.approx(130 / 100, rel=1e-9)
