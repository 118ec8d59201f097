"""A measured cell as the twin's model sees it (engines/sim/twin/cells.py): the server's shape,
caps and parallelism from what it recorded."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from engines.sim.twin import synthetic
from engines.sim.twin.analytic import predict
from engines.sim.twin.cells import observe, speculative_shape
from engines.sim.twin.fit import fit
from engines.sim.twin.params import Space
from tests.engines.sim.twin.ground_truth import start, truth


def cell():
    return synthetic.cells(truth(), [4], noise=0.0)[0]


def test_the_tensor_parallel_size_comes_from_the_server_command():
    assert observe(cell()).tp_size == 1
    command = "python -m sglang.launch_server --model-path m --tp-size 8"
    assert observe(replace(cell(), server_command=command)).tp_size == 8


def test_the_server_s_own_report_gives_its_cap_and_kv_pool():
    info = json.dumps({"max_running_requests": 48, "max_total_num_tokens": 500_000})
    sc = observe(replace(cell(), server_info=info)).scenario
    assert (sc.max_running, sc.kv_pool) == (48, 500_000)


def test_the_speculative_shape_from_sglang_flags_or_vllm_s_config():
    sglang = ("python -m sglang.launch_server --speculative-algorithm EAGLE3 "
              "--speculative-num-steps 5 --speculative-eagle-topk 8 "
              "--speculative-num-draft-tokens 32")
    assert speculative_shape(sglang, {}) == (5, 8, 32)
    chain = "x --speculative-algorithm EAGLE3 --speculative-num-steps 3"
    assert speculative_shape(chain, {}) == (3, 1, 4)  # topk 1: steps + 1 verified
    vllm = ("vllm serve m --speculative-config "
            """'{"method": "eagle3", "num_speculative_tokens": 2}'""")
    assert speculative_shape(vllm, {}) == (2, 1, 3)
    assert speculative_shape("python -m engines.sim", {}) is None


def test_a_time_scaled_simulator_cell_is_read_at_time_scale_one():
    # hand-worked: at --sim-time-scale 4 every modelled duration is 4x, so 100 tok/s,
    # TTFT 0.4 s and TPOT 0.08 s are 400 tok/s, 0.1 s and 0.02 s of the node at scale 1
    scaled = replace(cell(), server_command="python -m engines.sim --sim-time-scale 4",
                     output_tok_s=100.0, ttft_p50_s=0.4, tpot_p50_s=0.08)
    assert observe(scaled).measured == pytest.approx(
        {"output_tok_s": 400.0, "ttft_p50_s": 0.1, "tpot_p50_s": 0.02})
    same = replace(scaled, server_command="python -m engines.sim")
    assert observe(same).measured == pytest.approx(
        {"output_tok_s": 100.0, "ttft_p50_s": 0.4, "tpot_p50_s": 0.08})


def test_cells_without_modelled_time_are_refused():
    zero = replace(cell(), server_command="python -m engines.sim --sim-time-scale 0")
    with pytest.raises(ValueError, match="time_scale 0"):
        observe(zero)


def test_a_twin_fitted_at_time_scale_4_predicts_the_held_out_loads_of_the_same_run():
    # the generating model's cells at c = 1, 4, 16, 64, measured as a time-scale-4 run
    # would measure them (tok/s / 4, latencies x 4); fitted, it predicts c = 2, 8, 32 of the
    # same run (scaled alike) as the generating model does, not 75 % too fast
    def at_scale_4(c):
        return replace(c, server_command="python -m engines.sim --sim-time-scale 4",
                       output_tok_s=c.output_tok_s / 4, ttft_p50_s=c.ttft_p50_s * 4,
                       tpot_p50_s=c.tpot_p50_s * 4)

    fitted_on = [at_scale_4(c) for c in synthetic.cells(truth(), [1, 4, 16, 64], noise=0.0,
                                                        per_position=True)]
    observed = [observe(c) for c in fitted_on]
    space = Space.for_cells(start(), observed)
    setup = fit(space, observed).setup
    for c in synthetic.cells(truth(), [2, 8, 32], noise=0.0):
        held = observe(at_scale_4(c))
        predicted = predict(setup, held.scenario).output_tok_s
        assert predicted == pytest.approx(held.measured["output_tok_s"], rel=0.02), c.cell_id
        # the figure a time-scale-4 server of the twin serves: the prediction over 4
        assert predicted / 4 == pytest.approx(at_scale_4(c).output_tok_s, rel=0.02)
