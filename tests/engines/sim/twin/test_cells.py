"""A measured cell as the twin's model sees it (engines/sim/twin/cells.py): the server's shape,
caps and parallelism from what it recorded."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from engines.sim.twin import synthetic
from engines.sim.twin.cells import observe, speculative_shape
from tests.engines.sim.twin.ground_truth import truth


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


def test_a_time_scaled_simulator_cell_is_read_as_recorded():
    # the load generator reports a --sim-time-scale 4 server's figures on its modelled clock
    # (actors/loadgen/timeline.py Clock): 100 tok/s recorded is 100 tok/s of the node at
    # scale 1, not 400
    scaled = replace(cell(), server_command="python -m engines.sim --sim-time-scale 4",
                     output_tok_s=100.0, ttft_p50_s=0.4, tpot_p50_s=0.08)
    assert observe(scaled).measured == pytest.approx(
        {"output_tok_s": 100.0, "ttft_p50_s": 0.4, "tpot_p50_s": 0.08})


def test_cells_without_modelled_time_are_refused():
    zero = replace(cell(), server_command="python -m engines.sim --sim-time-scale 0")
    with pytest.raises(ValueError, match="time_scale 0"):
        observe(zero)
