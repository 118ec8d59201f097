"""The speculation question's confirmation (pure): once the surface stops, the user's drafter,
unforced, at the decision points its prediction rests on (each schedule tier's first load, the
configured depth beside the predicted crossover); where a confirming cell's speedup interval
and the predicted one do not overlap, the drafter's own cells at the other depths of that load,
and the answer there rests on them (`settle`); then the threshold T the answer sets, with the
switch applied (speculative_disable_above_batch = T: the switch in use, where a real one may
thrash as the running batch crosses T), at T and the load just above it, against the baseline
(`switch_steps`, `switch_verdict`). A point is (load, depth, OWN), as the surface's
(grid/questions/speculation/steps.py), or (load, depth, SWITCH - T) for a switched one."""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from grid.analysis.surface import Schedule
from grid.analysis.verdict import FASTER, SLOWER, UNDETERMINED, WITHIN_ONLY, judged
from grid.questions import steps as shared
from grid.questions.speculation.answers import single_depth
from grid.questions.speculation.steps import OWN, SWITCH

Est = tuple[float, float, float]
"""A speedup over the baseline at one (load, depth): (value, 95 % low, high)."""
CONFIRMED, CONFIRM_BUDGET = "confirmed", "confirm_budget"
CONFIRM_STOPS = {
    CONFIRMED: "the drafter's own cells measured where the prediction decides; where one "
               "disagreed with it beyond both intervals, the answer there rests on them",
    CONFIRM_BUDGET: "grid.search.confirm_cells is spent before every decision point was "
                    "measured",
}
PREDICTED, CONFIRMS, MEASURED = "predicted", "confirmed", "measured"
"""How a load's answer is known: the surface's prediction alone, the prediction with a
confirming cell of the drafter's that agrees, the drafter's own cells (the prediction was off)."""


def crossover_neighbours(point: float | None, lattice: Sequence[int]) -> tuple[int, ...]:
    """The lattice loads either side of a crossover inside the lattice's span (none outside)."""
    if point is None or not math.isfinite(point):
        return ()
    below = [b for b in lattice if b <= point]
    above = [b for b in lattice if b > point]
    return tuple(([below[-1]] if below else []) + ([above[0]] if above else []))


def targets(tiers: Schedule, crossover: Sequence[int], depth: int, lattice: Sequence[int]
            ) -> list[tuple[int, int]]:
    """(load, depth) to confirm: each tier's first load (on the lattice) at its depth, at the
    depth before it where the tier turns speculation off (the configured `depth` where none
    drafts before it); the configured depth at the crossover's neighbours. In that order,
    each once."""
    out: list[tuple[int, int]] = []
    before = depth
    for start, k in tiers:
        load = min((b for b in lattice if b >= start), default=lattice[-1])
        if (k or before) > 0:
            out.append((load, k or before))
        before = k or before
    out += [(b, depth) for b in crossover]
    return list(dict.fromkeys(out))


def agrees(measured: Est, predicted: Est) -> bool:
    """The two speedup intervals overlap."""
    return measured[1] <= predicted[2] and predicted[1] <= measured[2]


def contradicts(key: tuple[int, int], measured: Est, decided: Mapping[int, int]) -> bool:
    """A confirming cell against the decision at its load, whatever the values: it pays
    surely (its interval above 1) where the baseline was chosen, or loses surely where its
    depth was."""
    load, depth = key
    chosen = decided.get(load)
    return (chosen == 0 and measured[1] > 1.0) or (chosen == depth and measured[2] < 1.0)


@dataclass(frozen=True)
class ConfirmStep:
    number: int
    why: str
    points: tuple[tuple[int, int, int], ...]
    cells_before: int
    stop: str | None = None
    disagree: tuple[tuple[int, int], ...] = ()
    phase: str = "confirm"

    def as_json(self) -> dict[str, Any]:
        return {"number": self.number, "phase": self.phase, "why": self.why,
                "points": [list(p) for p in self.points], "cells_before": self.cells_before,
                "stop": self.stop, "disagree": [list(d) for d in self.disagree]}


def _where(keys: Sequence[tuple[int, int]]) -> str:
    return ", ".join(f"c={b} k={k}" for b, k in keys)


def confirm_steps(number: int, cells_before: int, wanted: Sequence[tuple[int, int]],
                  own: Mapping[tuple[int, int], Est], predicted: Mapping[tuple[int, int], Est],
                  depths: Sequence[int], budget: int, decided: Mapping[int, int] | None = None,
                  baselines: Container[int] | None = None) -> list[ConfirmStep]:
    """The confirmation's steps after the surface's last (`number` on): the wanted points
    (with the baseline at each of their loads not in `baselines`, the loads whose baseline the
    surface chose; None: every load's: a speedup needs both; from what was chosen, not what is
    measured, so that a replay gives the same steps), then the drafter's own cells at
    `depths` of each load where one disagrees with the prediction beyond both intervals or
    contradicts the decision there (`decided`: load -> the predicted best depth), then the
    stop; `budget` cells at most (grid.search.confirm_cells)."""
    # Each wanted cell with the baseline its speedup needs (once per load), kept or cut
    # together: an own cell whose baseline the budget cut could never be read.
    units, seen = [], set()
    for b, k in wanted:
        units.append([(b, k, OWN)] + ([(b, 0, 0)] if baselines is not None
                                      and b not in baselines and b not in seen else []))
        seen.add(b)
    first = [p for u, used in zip(units, itertools.accumulate(map(len, units)), strict=True)
             if used <= budget for p in u]
    missing = [b for b, k, r in first if (k, r) == (0, 0)]
    why = (f"confirm the prediction on the drafter's own cells at "
           f"{_where([(b, k) for b, k, r in first if r == OWN] or wanted)}"
           + (f" (and the baseline at {', '.join(f'c={b}' for b in missing)})" if missing
              else ""))
    total = sum(map(len, units))
    if 0 < len(first) < total:
        why += f" (only {len(first)} of {total} cell(s) fit grid.search.confirm_cells)"
    points, why, stop = shared.fit(first, budget if first else 0, why,
                                   "grid.search.confirm_cells is spent", CONFIRM_BUDGET)
    out = [ConfirmStep(number, why, points, cells_before, stop)]
    asked = {(b, k) for b, k, r in points if r == OWN}
    if stop or any(key not in own for key in asked):
        return out
    off = tuple(key for key in dict.fromkeys((b, k) for b, k, r in points if r == OWN)
                if (key in predicted and not agrees(own[key], predicted[key]))
                or contradicts(key, own[key], decided or {}))
    loads = sorted({b for b, _ in off})
    more = [(b, k, OWN) for b in loads for k in depths if (b, k) not in asked]
    used = len(points)
    if more:
        why = (f"{_where(off)} disagree(s) with the prediction beyond both intervals: the "
               f"drafter's own cells at depths {' '.join(map(str, depths))} there")
        extra, why, stop = shared.fit(more, budget - used, why, "grid.search.confirm_cells "
                                      "is spent", CONFIRM_BUDGET, "cell(s)",
                                      "grid.search.confirm_cells")
        out.append(ConfirmStep(number + 1, why, extra, cells_before + used, stop, off))
        used += len(extra)
        if stop or any((b, k) not in own for b, k, _ in extra):
            return out
    agree = len(asked) - len(off)
    out.append(ConfirmStep(number + len(out), f"{agree} of {len(asked)} confirming cell(s) "
                           "agree with the prediction" + (f"; {_where(off)} rest(s) on the "
                                                         "drafter's own cells" if off else ""),
                           (), cells_before + used, CONFIRMED, off))
    return out


def settle(best: Mapping[int, int], own: Mapping[tuple[int, int], Est],
           confirmed: Sequence[tuple[int, int]], off: Sequence[tuple[int, int]]
           ) -> dict[int, tuple[int, str]]:
    """Load -> (its depth, how it is known): where a confirming cell disagreed, the depth of
    the highest measured speedup of the drafter's own cells there whose interval lies above 1
    (else the baseline), `measured`; where one agreed, the predicted depth, `confirmed`; else
    the predicted depth, `predicted`."""
    bad = {b for b, _ in off}
    seen = {b for b, _ in confirmed}
    out: dict[int, tuple[int, str]] = {}
    for b, k in sorted(best.items()):
        if b in bad:
            pays = {d: e[0] for (load, d), e in own.items() if load == b and e[1] > 1.0}
            out[b] = (max(pays, key=lambda d: (pays[d], -d)) if pays else 0, MEASURED)
        else:
            out[b] = (k, CONFIRMS if b in seen else PREDICTED)
    return out


CONTRADICTED = "contradicted"
ABOUT = "about the baseline"
"""Above the threshold: within min_effect of the baseline or faster (the switch switches off)."""


def single_cells(single: Mapping[str, Any] | None) -> list[tuple[int, int]]:
    """Where the best single depth (answers.py `single_depth`) decides: its depth at the last
    load where it pays and the one just above it, where it stops."""
    if not single:
        return []
    loads = [single["last"]] + ([single["next"]] if single["next"] is not None else [])
    return [(int(b), int(single["depth"])) for b in loads]


def single_status(single: Mapping[str, Any] | None, asked: Container[tuple[int, int]],
                  off: Sequence[tuple[int, int]]) -> dict[str, Any] | None:
    """The best single depth with how it is known: `contradicted` where a cell of its
    (`single_cells`) disagreed with the prediction (`off`), `confirmed` where each was a
    confirming cell measured (`asked`) and agreed, else `predicted`."""
    if not single:
        return None
    cells = single_cells(single)
    status = (CONTRADICTED if any(c in off for c in cells)
              else CONFIRMS if all(c in asked for c in cells) else PREDICTED)
    return {**single, "status": status}


def rechosen(single: Mapping[str, Any], predicted: Mapping[tuple[int, int], Est],
             own: Mapping[tuple[int, int], Est], zero: Mapping[int, float]) -> dict[str, Any]:
    """A contradicted single depth chosen again (answers.py `single_depth`) with the drafter's
    own cells in place of the prediction wherever they were measured: `measured`, the
    contradicted depth beside it (`instead_of`); depth None where no depth then pays at the
    lowest load."""
    again = single_depth({**predicted, **{key: e for key, e in own.items() if key[1] > 0}},
                         zero)
    found = again or {"depth": None, "last": None, "next": None, "mean_speedup": None}
    return {**found, "status": MEASURED, "instead_of": single["depth"]}


def switch_point(load: int, depth: int, threshold: int) -> tuple[int, int, int]:
    return (load, depth, SWITCH - threshold)


def switched(rate: int) -> int | None:
    """The threshold a point's rate index applies (None: not a switch's point)."""
    return SWITCH - rate if rate <= SWITCH else None


def switch_loads(threshold: int | None, lattice: Sequence[int]) -> tuple[int, ...]:
    """Where the threshold T is confirmed: the lattice load at T (the highest at or below it:
    speculating, and where a real switch may thrash as the running batch crosses T) and the
    one just above it (switched off); () for no threshold, 0 (speculation off) or one at or
    above the lattice's top (nothing above it to switch off)."""
    if threshold is None or threshold < lattice[0] or threshold >= lattice[-1]:
        return ()
    return (max(b for b in lattice if b <= threshold), min(b for b in lattice if b > threshold))


def _ends(est: Est) -> str:
    return f"{est[0]:.2f}x [{est[1]:.2f}, {est[2]:.2f}]"


def switch_verdict(threshold: int, at: tuple[int, Est], above: tuple[int, Est],
                   tolerance: float, spread: float | None) -> dict[str, Any]:
    """The threshold T confirmed with the switch applied, from the switched server's speedups
    over the baseline (load, (value, 95 % low, high)) at T and just above it. At T it
    speculates: `faster` confirms, `slower` contradicts. Above T it runs switched off and
    should run at about the baseline: the interval's low end at or above 1 - `tolerance`
    (min_effect) confirms, its top below 1 - tolerance contradicts (the switch costs more than
    min_effect there). `confirmed` where both confirm, `contradicted` where either
    contradicts, else `undetermined`. Each interval widened by the stated spread between
    repeats (grid/analysis/verdict.py `judged`); with none, no sign counts and the verdict is
    `undetermined (within-run noise only)`, the within-run readings given beside it."""
    (b_at, e_at), (b_up, e_up) = at, above
    v_at, lo_at, hi_at = judged(*e_at, spread if spread is not None else 0.0)
    _, lo_up, hi_up = judged(*e_up, spread if spread is not None else 0.0)
    floor = 1.0 - tolerance
    up = ABOUT if lo_up >= floor else SLOWER if hi_up < floor else UNDETERMINED
    if v_at == SLOWER or up == SLOWER:
        verdict = CONTRADICTED
    elif v_at == FASTER and up != UNDETERMINED:
        verdict = CONFIRMED
    else:
        verdict = UNDETERMINED
    if spread is None:
        verdict = WITHIN_ONLY
    said = {ABOUT: f"within {100 * tolerance:.0f} % of it",
            SLOWER: f"more than {100 * tolerance:.0f} % slower", UNDETERMINED: UNDETERMINED}[up]
    words = (f"with speculative_disable_above_batch={threshold} applied: {_ends(e_at)} of the "
             f"baseline at c={b_at} ({v_at}), {_ends(e_up)} at c={b_up} above it ({said})")
    return {"threshold": threshold, "verdict": verdict, "tolerance": tolerance,
            "at": {"load": b_at, "speedup": round(e_at[0], 4),
                   "interval": [round(lo_at, 4), round(hi_at, 4)], "verdict": v_at},
            "above": {"load": b_up, "speedup": round(e_up[0], 4),
                      "interval": [round(lo_up, 4), round(hi_up, 4)], "verdict": up},
            "text": f"{verdict} {words}"}


def switch_steps(last: ConfirmStep, points: Sequence[tuple[int, int, int]],
                 measured: Container[tuple[int, int, int]], room: int, threshold: int
                 ) -> list[ConfirmStep]:
    """The threshold's confirmation after the confirmation's last step (`last`, stopped
    `confirmed`): the switched server's `points` (with the baseline's where the surface has
    none) within `room` cells (grid.search.confirm_cells left), then `last` again after it;
    `last` alone, saying so, when they do not all fit (half of them confirm nothing)."""
    if not points:
        return [last]
    if len(points) > room:
        return [dataclasses.replace(last, why=f"{last.why}; the threshold's confirmation with "
                                    f"the switch applied ({len(points)} cells) does not fit "
                                    f"grid.search.confirm_cells ({room} left)")]
    loads = sorted({b for b, _, _ in points})
    step = ConfirmStep(last.number, f"confirm speculative_disable_above_batch={threshold} with "
                       f"the switch applied, at c={' and c='.join(map(str, loads))}",
                       tuple(points), last.cells_before)
    if any(p not in measured for p in points):
        return [step]
    return [step, dataclasses.replace(last, number=last.number + 1,
                                      cells_before=last.cells_before + len(points))]
