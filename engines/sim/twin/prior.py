"""What a twin predicts before a search measures (`grid.search.prior`, docs/search.md): the
speedup of a speculative variant over the baseline at each load of the search's lattice, from
the twin's profile through the same closed form the fit uses (analytic.py), so the search can
measure the levels around the predicted crossover first. SIMULATION, like every twin figure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from engines.forced import forced_acceptance
from engines.sim.profile import load_profile, twin_of
from engines.sim.twin.analytic import Scenario, Setup, predict, sim_domain
from engines.twin_data import SpeedupQuestion


def shape(variant: Mapping[str, Any]) -> tuple[int, int, int] | None:
    """(num_steps, eagle_topk, num_draft_tokens) of a variant's args (the variant vocabulary
    every engine reads, docs/engines.md); None for a variant that does not speculate."""
    args = variant.get("args") or {}
    if not args.get("speculative_algorithm"):
        return None
    steps = int(args.get("speculative_num_steps") or 3)
    topk = int(args.get("speculative_eagle_topk") or 1)
    draft = args.get("speculative_num_draft_tokens")
    return steps, topk, (steps + 1 if topk == 1 or draft is None else int(draft))


def scenario(question: SpeedupQuestion, config: Mapping[str, Any]) -> Scenario:
    """One of the question's cells as the closed form sees it, at its lowest load (a forced
    acceptance as its per-position rates: the break-even prediction, grid/plan/
    breakeven_predict.py)."""
    workload, variant = config["workload"], config["variant"]
    shares: dict[str, float] = {}
    for label, share in (question.domains or {"general": 1.0}).items():
        shares[sim_domain(label)] = shares.get(sim_domain(label), 0.0) + float(share)
    cap = (variant.get("args") or {}).get("max_running_requests")
    forced = forced_acceptance(variant.get("forced_acceptance"), variant.get("args") or {})
    return Scenario(
        concurrency=question.loads[0], prompt_tokens=float(question.prompt_tokens),
        output_tokens=float(workload["max_new_tokens"]), spec=shape(variant),
        max_running=int(cap) if cap else None, domains=tuple(sorted(shares.items())),
        temperature=float(workload.get("temperature") or 0.0),
        requests_per_stream=max(1.0, question.requests_per_stream),
        varied_output=not workload.get("ignore_eos", True),
        known_reach=forced.per_position() if forced is not None else None)


def speedups(profile: str, question: SpeedupQuestion) -> tuple[float, ...]:
    """variant / baseline - 1 in output tok/s at each load, as the twin in `profile`
    predicts it. ValueError (one line) for a profile that is not a twin or a variant that
    does not speculate."""
    if twin_of(profile) is None:
        raise ValueError(f"{profile} is not a twin's profile (python -m grid.twin RUN writes "
                         "one: RUN/twin.json)")
    if shape(question.variant["variant"]) is None:
        raise ValueError(f"variant {question.variant['variant']['name']!r} does not "
                         "speculate: there is no speedup to predict")
    setup = Setup.from_profile(load_profile(profile), question.tp_size)
    base, spec = scenario(question, question.baseline), scenario(question, question.variant)
    out = []
    for load in question.loads:
        b = predict(setup, replace(base, concurrency=load)).output_tok_s
        v = predict(setup, replace(spec, concurrency=load)).output_tok_s
        out.append(v / b - 1.0)
    return tuple(out)
