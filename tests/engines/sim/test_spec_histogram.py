"""The per-request acceptance histogram a real simulator process sends (SGLang 0.5.23's
``spec_correct_drafts_histogram``, engines/sim/spec_fields.py): it sums to the request's
``spec_verify_ct``, and under forced per-position rates (the variant's
``forced_acceptance.rates`` -> the simulator's FORCED_RATES_ENV) the profile pooled from many
requests' histograms (grid/analysis/surface/profile.py) recovers the forced marginals."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from engines.forced import forced_acceptance
from engines.launch import ServerRequest
from engines.sim.engine import forced_sim_env
from engines.sim.model import FORCED_RATES_ENV
from grid.analysis.surface import histogram_counts, profile_from_counts
from tests.engines.sim.conftest import REPO, LaunchSim, run_generate

ARGS = {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3,
        "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4,
        "max_running_requests": 64}
FLAGS = [f for k, v in ARGS.items() for f in (f"--{k.replace('_', '-')}", str(v))]
RATES = (0.8, 0.5, 0.2)
"""Forced unconditional rates: m_j, the share of steps that accept the first j drafts; the
conditionals are 0.8, 0.5 / 0.8 = 0.625, 0.2 / 0.5 = 0.4."""
TOLERANCE = 0.03
"""How far a pooled marginal may lie from the forced one: 64 requests of 128 tokens give about
127 x 64 / 2.5 = 3,250 verify steps (2.5 tokens a step at these rates), so a marginal's
binomial standard error is at most sqrt(0.25 / 3,250) = 0.009; 0.03 is over three of them."""
HISTOGRAM = "spec_correct_drafts_histogram"


def _texts(n: int) -> list[str]:
    lines = (REPO / "workloads" / "prompts" / "coding.jsonl").read_text().splitlines()
    texts = [json.loads(line)["text"] for line in lines if line.strip()]
    return (texts * (n // len(texts) + 1))[:n]


def test_forced_rates_come_back_from_the_requests_histograms(launch_sim: LaunchSim) -> None:
    forced = forced_acceptance({"rates": list(RATES)}, ARGS)
    env = forced_sim_env(ServerRequest(args=ARGS, env={}, model_path="m", forced=forced))
    assert env == {FORCED_RATES_ENV: "0.8,0.5,0.2"}
    sim = launch_sim([*FLAGS, "--sim-time-scale", "0"], env=env)
    bodies = [{"text": t, "stream": True, "sampling_params": {
        "max_new_tokens": 128, "ignore_eos": True, "temperature": 0}} for t in _texts(64)]
    _, metas = run_generate(sim.url, bodies, concurrent=True)
    for m in metas:
        hist = m[HISTOGRAM]
        assert sum(hist) == m["spec_verify_ct"] and len(hist) <= 4
        assert sum(n * h for n, h in enumerate(hist)) == m["spec_num_correct_drafts"]
    counts = [histogram_counts(m[HISTOGRAM], 3) for m in metas]
    units = pd.DataFrame({"domain": "coding", "accepted": [a for a, _ in counts],
                          "steps": [s for _, s in counts]})
    coding = profile_from_counts(units, replicates=200).domains["coding"]
    assert sum(units.steps) > 3000
    assert coding.marginal == pytest.approx(RATES, abs=TOLERANCE)
    assert coding.conditional == pytest.approx((0.8, 0.625, 0.4), abs=2 * TOLERANCE)
    assert coding.accept_length(3) == pytest.approx(1 + sum(RATES), abs=3 * TOLERANCE)
