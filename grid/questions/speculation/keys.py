"""The speculation question's keys under `grid.search` (joined to the schema by the registry,
grid/questions `schema_keys`; docs/questions.md)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SpeculationKeys:
    depths: list[int] = field(default_factory=lambda: [0, 1, 2, 3, 5, 7])
    """The speculative depths the surface may measure, ascending; 0 is the baseline server
    (not speculating at all), the others the variant with speculative_num_steps = d."""
    rates: list[float] = field(default_factory=lambda: [0.7, 0.9])
    """The forced acceptance per draft a of an i.i.d. chain (depth k forced to the
    per-position rates a, a^2, ..., a^k; a mean length 1 + a + ... + a^k where the engine
    takes a length only), the surface's first, the length check's after."""
    forced: bool = False
    """Measure the surface from forced cells (i.i.d. chains at `rates`, a length check at the
    others, the drafter profiled in one cell); False: from the drafter's own cells, unforced,
    each a cost point c = L T_baseline / T_variant at its measured accept length."""
    profile: str | None = None
    """A drafter's acceptance profile whose speedup the surface predicts: a profile file
    (`python -m grid.profile RUN > p.json`) or a run folder (its drafter's own cells); None:
    the run's own drafter, measured in one cell."""
    min_effect: float = 0.05
    """The relative difference too small to matter (5 %): a measured cell disagrees with the
    surface its neighbours give only beyond its interval and this."""
    confirm_cells: int = 12
    """Cells beyond max_cells: the drafter's own, unforced, where the prediction decides
    (each schedule tier's first load, the configured depth beside the crossover), and at the
    other depths of a load where one disagrees with it."""
    repeat_spread: float | None = None
    """The spread of a cell's throughput between repeats (relative standard deviation, e.g.
    0.058 for the 5.8 % two runs of real vLLM cells spread on a quiet CPU, docs/lesson.md),
    stated by the user: the question measures each cell once, so its intervals cover
    within-run noise only. With it every verdict the recommendation states (the threshold, the
    threshold's confirmation, depth 0 against the baseline) rests on intervals widened by it
    (grid/analysis/verdict.py `between_runs`); None: no sign counts, each of those verdicts reads
    "undetermined (within-run noise only)" and the threshold is given as what the within-run
    intervals alone would set."""
    drafters: list[str] = field(default_factory=list)
    """Other draft models of the variant's cost per pass (a ladder of graded quality,
    docs/lesson.md), each measured unforced at the first step's loads x depths: points
    c = L T_baseline / T_rung at their measured accept lengths, labelled by drafter, beside the
    surface and compared by its length check (on an engine that cannot force acceptance they
    give the lengths at one depth that forced chains give elsewhere); not fitted, not profiled:
    the variant's own drafter is the one the question answers for and confirms."""
    surface: str | None = None
    """An earlier speculation run's folder: predict from its surface, measure nothing (with
    plan=true, before any server starts)."""
