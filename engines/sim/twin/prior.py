"""What a twin predicts before a search measures (`grid.search.prior`, docs/search.md): the
speedup of a speculative variant over the baseline at each load of the search's lattice, from
the twin's profile through the same closed form the fit uses (analytic.py), so the search can
measure the levels around the predicted crossover first; each cell as analytic.cell_scenario
reads its config (a forced acceptance as its per-position rates: the break-even prediction,
grid/plan/breakeven_predict.py). SIMULATION, like every twin figure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engines.sim.profile import load_profile, twin_of
from engines.sim.twin.analytic import Setup, cell_scenario, predict, shape
from engines.twin_data import SpeedupQuestion


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

    def tok_s(config: Mapping[str, Any], load: int) -> float:
        sc = cell_scenario(config, load, question.prompt_tokens, question.domains,
                           question.requests_per_stream)
        return predict(setup, sc).output_tok_s

    return tuple(tok_s(question.variant, c) / tok_s(question.baseline, c) - 1.0
                 for c in question.loads)
