"""The plan refuses a simulated server whose model cannot fit its GPUs, with the simulator's
own line, before anything starts. Expected numbers by hand from the profiles: Llama-3.3-70B
(70.6 B + 1.2 B EAGLE-3 head, bf16) = 133.7 GiB of weights on one GPU; an H100 of 79.6 GiB at
mem_fraction_static 0.88 = 70.0 GiB per GPU."""

from __future__ import annotations

from grid.run import make_plan
from tests.grid.plan.bad_input import assert_bad_input

ON_H100 = ["+sweep=smoke", "hardware=h100", "model=llama3.3-70b"]


def test_70b_on_one_h100_is_refused_with_the_memory_line(tmp_path, capsys):
    assert_bad_input(
        [*ON_H100, "model.tp_size=1"],
        "variant baseline: Not enough memory: the weights (133.7 GiB per GPU at tp_size 1) "
        "leave no room for the KV cache on h100 (79.6 GiB x mem_fraction_static 0.88 = 70.0 "
        "GiB per GPU); it fits from tp_size 2 (model.tp_size or variant.tp_size)",
        tmp_path / "results", capsys)


def test_the_variant_mem_fraction_static_counts(tmp_path, capsys):
    # at tp 2 the weights take 66.9 GiB per GPU: 0.88 x 79.6 = 70.0 leaves room, 0.8 does not
    assert_bad_input([*ON_H100, "model.tp_size=2", "+variant.args.mem_fraction_static=0.8"],
                     "(79.6 GiB x mem_fraction_static 0.8 = 63.7 GiB per GPU); it fits from "
                     "tp_size 4", tmp_path / "results", capsys)


def test_70b_on_two_h100_plans(tmp_path):
    plan = make_plan([*ON_H100, "model.tp_size=2", f"results_dir={tmp_path}"]).plan
    assert {g.config["model"]["tp_size"] for g in plan.groups} == {2}
    assert not tmp_path.exists() or list(tmp_path.iterdir()) == []
