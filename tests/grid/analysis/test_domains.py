"""Speedup per workload and concurrency (grid/analysis/domains.py) on cells with repeats."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from grid.analysis.domains import workload_speedups


def test_workload_speedup_averages_the_baseline_over_its_repeats():
    # Two baseline repeats at c=4 (100 and 140 tok/s, mean 120) and one EAGLE-3 cell at 150:
    # 150 / 120 = 1.25.
    cells = pd.DataFrame([
        {"variant": "baseline", "workload": "coding", "concurrency": 4, "rate": np.nan,
         "status": "done", "output_tok_s": 100.0, "accept_length": np.nan},
        {"variant": "baseline", "workload": "coding", "concurrency": 4, "rate": np.nan,
         "status": "done", "output_tok_s": 140.0, "accept_length": np.nan},
        {"variant": "eagle3", "workload": "coding", "concurrency": 4, "rate": np.nan,
         "status": "done", "output_tok_s": 150.0, "accept_length": 2.8},
    ])
    table = workload_speedups(cells)
    assert len(table) == 1
    assert table.speedup.iloc[0] == pytest.approx(1.25)
