from __future__ import annotations

import pandas as pd

from grid.report import domain_acceptance, speculation_verdicts, summary_table


def _cells():
    rows = []
    for c, base, spec in [(1, 89.0, 96.1), (8, 400.0, 420.0), (32, 700.0, 350.0),
                          (64, 773.0, 354.0)]:
        rows.append(dict(variant="baseline", workload="coding", concurrency=c, rate=None,
                         status="done", output_tok_s=base, accept_length=None,
                         ttft_p50_s=0.02, tpot_p50_s=0.011, client_saturated=False))
        rows.append(dict(variant="eagle3", workload="coding", concurrency=c, rate=None,
                         status="done", output_tok_s=spec, accept_length=2.9,
                         ttft_p50_s=0.02, tpot_p50_s=0.011, client_saturated=c == 64))
    return pd.DataFrame(rows)


def test_verdict_finds_where_speculation_stops_paying():
    (line,) = speculation_verdicts(_cells())
    assert line.startswith("eagle3 vs baseline on coding: c=1 +8%, c=8 +5%, c=32 -50%")
    assert line.endswith("speculation pays up to concurrency 8")


def test_summary_marks_saturated_clients():
    text = summary_table(_cells())
    assert "done (client saturated)" in text.splitlines()[-1]


def test_domain_acceptance_is_ratio_of_sums():
    requests = pd.DataFrame({
        "variant": ["eagle3"] * 3, "domain": ["coding", "coding", "encyclopedic"],
        "status": ["ok"] * 3, "output_tokens": [100, 300, 100], "spec_verify_ct": [50, 50, 80]})
    assert domain_acceptance(requests) == [
        "eagle3 / coding: accept length 4.00 (2 requests)",
        "eagle3 / encyclopedic: accept length 1.25 (1 requests)"]
