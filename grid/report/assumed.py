"""Where a simulated run's curve is measured and where it is assumed (`Modeller.assumed_interior`,
engines/modelling.py): the report's line under the SIMULATION banner, and each recommendation
of the run's simulated speculative variants made to follow the assumed range instead of the
simulated cells' crossover (docs/simulator.md, "The assumed interior")."""

from __future__ import annotations

import json
import math
from typing import Any

import engines
from engines.modelling import AssumedInterior
from grid.report.rundata import RunData
from grid.report.validity import extrapolated


def interior_of(data: RunData) -> AssumedInterior | None:
    """The assumed interior of the profile the run's simulated cells were served on (the first
    one that has one; None for a measured run or a profile without one)."""
    cells = data.cells
    if not data.simulated or "engine_options" not in cells:
        return None
    sim = cells[cells.simulated.fillna(False).astype(bool)]
    for engine, options in sim[["engine", "engine_options"]].drop_duplicates().itertuples(
            index=False):
        model = engines.modeller(engine)
        if model is None or not isinstance(options, str):
            continue
        try:
            found = model.assumed_interior(json.loads(options))
        except ValueError:
            continue  # the profile it names is gone or unusable now
        if found is not None:
            return found
    return None


def loads_to_measure(crossover: tuple[float, float], tested: list[float]) -> list[int]:
    """The powers of two from the largest at or below the low end of the range to the
    smallest at or above its high end (1.27-1.31 -> 1, 2), and the tested loads in between."""
    lo = 2 ** math.floor(math.log2(max(crossover[0], 1.0)))
    hi = 2 ** math.ceil(math.log2(max(crossover[1], 1.0)))
    if hi == lo:
        hi = lo * 2
    powers = {2 ** k for k in range(int(math.log2(lo)), int(math.log2(hi)) + 1)}
    return sorted(powers | {int(t) for t in tested if lo <= t <= hi})


def threshold_below(tested: list[float], x: float) -> int:
    """The largest tested concurrency at or below `x` (0 when none is)."""
    below = [t for t in tested if t <= x]
    return int(max(below)) if below else 0


def measured_words(interior: AssumedInterior) -> str:
    """`c=1 and c=64`."""
    return " and ".join(f"c={x:g}" for x in interior.measured_loads)


def note(interior: AssumedInterior) -> str:
    """The report's line under the SIMULATION banner."""
    lo, hi = interior.crossover
    excluded = (f"; not meeting the anchor, so not counted: {'; '.join(interior.excluded)}"
                if interior.excluded else "")
    return (f"assumed interior: the simulator's anchor measured {measured_words(interior)} "
            f"only; the loads in between are the model's assumption. Over the assumptions that "
            f"meet the anchor ({'; '.join(interior.kept)}) the modelled crossover lies at "
            f"concurrency {lo:.2f}-{hi:.2f}{excluded} ({interior.command}; docs/simulator.md "
            f"'The assumed interior'). The simulated cells' crossover interval is their "
            f"sampling noise only")


def bounded(rec: dict[str, Any], interior: AssumedInterior, tested: list[float]
            ) -> dict[str, Any]:
    """One recommendation made to follow the assumed range: a threshold when both ends of the
    range give the same one, else `undetermined` between them; `assumed` says why."""
    lo, hi = interior.crossover
    low, high = threshold_below(tested, lo), threshold_below(tested, hi)
    measure = ",".join(str(c) for c in loads_to_measure(interior.crossover, tested))
    where = (f"the model puts the crossover at concurrency {lo:.2f}-{hi:.2f} under every "
             f"assumption that meets its anchor, which measured {measured_words(interior)} "
             f"only")
    if low == high:
        statement = (f"set speculative_disable_above_batch={low} ({where}; the loads in "
                     f"between are the model's assumption: measure c={measure} on your node "
                     f"to check it)")
        rec = {k: v for k, v in rec.items() if k not in ("undetermined", "settle")}
        return {**rec, "speculative_disable_above_batch": low, "statement": statement,
                "verdict": "off" if low == 0 else "threshold",
                "assumed": {"crossover": [lo, hi], "measure": measure, "text": where}}
    statement = (f"undetermined between speculative_disable_above_batch={low} and {high} "
                 f"({where}): measure c={measure} on your node to settle it")
    return {**rec, "speculative_disable_above_batch": None, "undetermined": [low, high],
            "statement": statement, "verdict": "undetermined",
            "assumed": {"crossover": [lo, hi], "measure": measure, "text": where}}


def apply(data: RunData) -> None:
    """The assumed-interior line after the SIMULATION banner, and each recommendation of a
    simulated variant whose cells are all inside the calibrated envelope bounded by it."""
    interior = interior_of(data)
    if interior is None:
        return
    at = next((i + 1 for i, (_, text) in enumerate(data.validity)
               if text == data.sim_banner()), 0)
    data.validity.insert(at, ("note", note(interior)))  # the run stays quiet: SIMULATION only
    outside = {str(row.variant) for row, _ in extrapolated(data)}
    table = data.decision.speedups
    recs = []
    for rec in data.decision.recommendations:
        if rec["variant"] in outside or data.baseline in outside or table.empty:
            recs.append(rec)
            continue
        rows = table[(table.variant == rec["variant"]) & (table.workload == rec["workload"])
                     & (table.load_kind == "concurrency")]
        recs.append(bounded(rec, interior, sorted(rows.load.astype(float))))
    data.decision.recommendations = recs
    for cross in data.decision.crossovers:
        if cross.load_kind == "concurrency" and cross.variant not in outside \
                and data.baseline not in outside:
            cross.assumed = interior.crossover
