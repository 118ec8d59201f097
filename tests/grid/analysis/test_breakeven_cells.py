"""What the break-even curve reads from cells (grid/analysis/breakeven_cells.py): each length's
replicates drawn with the throughput's (grid/analysis/cellstats.py `decode_replicates`, through
the real per-cell analysis), the depth a configuration was served at."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from grid.analysis.breakeven_cells import depth_of
from grid.analysis.cellstats import DECODE_FACTOR, analyse_cell
from grid.analysis.goodput import Slo


def test_a_cells_length_replicates_draw_the_same_requests_as_its_throughput():
    # an open-loop cell of two requests of 101 tokens: A sent at 0 s, done in 1 s with 20
    # verify steps (decode length 100 / 20 = 5), B sent at 1 s, done in 2 s with 50 (100 / 50
    # = 2). Its window is A's second (few requests: the whole span up to the first end), so a
    # replicate drawing A k times and B 2 - k times makes k x 101 tok/s, and its length is
    # 200 / (20 k + 50 (2 - k)): k = 0: 2, k = 1: 2.857, k = 2: 5; relative to the whole
    # sample's 200 / 70 = 2.857 (the factor the cell's own figure is multiplied by): 0.7, 1,
    # 1.75
    req = pd.DataFrame({"cell_id": "x", "status": "ok", "sent_at": [0.0, 1.0],
                        "ttft_s": [0.1, 0.1], "tpot_s": [0.009, 0.019], "e2e_s": [1.0, 2.0],
                        "output_tokens": [101, 101], "spec_verify_ct": [20, 50]})
    _, reps = analyse_cell(req, None, False, Slo(), 1000, seed=7)
    pairs = {(round(float(a), 4), round(float(t), 4))
             for a, t in zip(reps[DECODE_FACTOR], reps["output_tok_s"], strict=True)}
    # drawn together: each length with its own draw's throughput (drawn apart, up to 9 pairs)
    assert pairs == {(0.7, 0.0), (1.0, 101.0), (1.75, 202.0)}


def test_a_cell_without_verify_steps_has_no_length_replicates():
    req = pd.DataFrame({"cell_id": "x", "status": "ok", "sent_at": [0.0], "ttft_s": [0.1],
                        "tpot_s": [0.01], "e2e_s": [1.0], "output_tokens": [101],
                        "spec_verify_ct": [np.nan]})
    assert DECODE_FACTOR not in analyse_cell(req, 1, True, Slo(), 100, seed=7)[1]


def test_the_depth_is_the_one_the_cells_record():
    def args(steps):
        return json.dumps({"speculative_algorithm": "EAGLE3", "speculative_num_steps": steps})

    assert depth_of(pd.DataFrame({"server_args": [args(3), args(3)]})) == 3
    # default 1 with an algorithm and no steps set (engines/forced.py speculative_steps)
    assert depth_of(pd.DataFrame({"server_args": [json.dumps(
        {"speculative_algorithm": "EAGLE3"})]})) == 1
    assert depth_of(pd.DataFrame({"server_args": [args(3), args(5)]})) is None  # not one
    assert depth_of(pd.DataFrame({"server_args": [None]})) is None  # not recorded
    assert depth_of(pd.DataFrame({"variant": ["a"]})) is None
