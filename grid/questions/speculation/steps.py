"""The surface search's steps (pure): which cells measure the node's step cost surface
c(B, k) (docs/questions.md) with few cells and few server starts: by default the drafter's
own cells, unforced (rate index OWN: each a point c = L T_b / T_v at its measured accept
length, its profile besides), with `grid.search.forced=true` forced cells at rates[0]
(`SurfaceSpace.rate`, the surface's rate index; the length check and the profiling cell only
then).

A **point** is (load B, depth k, rate index r): the speculative variant at
`speculative_num_steps = k`, its acceptance forced to the chain of an i.i.d. drafter whose
every draft is accepted with probability a = rates[r] (the first i drafts all accepted with
probability a^i: per-position unconditional rates a, a^2, ..., a^k, mean length
1 + a + ... + a^k), at concurrency B; depth 0 is the baseline at B; rate index OWN (-1) the
variant unforced, its drafter's own acceptance (what profiles the run's drafter). Where the
engine forces a mean length only (SGLang), the chain's mean length is forced instead. Every
(k, r) is one server (the depth and the forced acceptance are set at start, on every engine),
so a step asks for whole servers: each serves all its loads of the step once, and a step's
starts are its servers.

The surface's cells form a rectangle, its loads x its depths at the surface's rate, measured in
steps: coarse, check the fit (leave one out along each axis: `checks`), refine where a cell
disagrees or the best depth asks (`best_changes`), stop on `fits`, `resolution` or `budget`;
docs/questions.md ("The steps") says each step's rule in full.

Nothing but the measured costs carries the state: `steps_of` rebuilds every step from them."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from grid.analysis.search import nearest
from grid.questions.steps import replay

Point = tuple[int, int, int]
"""(load, depth, rate index): one cell; depth 0 the baseline, rate index OWN unforced."""
Est = tuple[float, float, float]
"""A measured cost: (value, interval low, interval high)."""
OWN = -1
"""The rate index of the drafter's own acceptance (nothing forced)."""
SWITCH = -1_000_000
"""The rate index of the threshold's confirmation: point (load, depth, SWITCH - T) is the
drafter's own cell at `depth`, unforced, with speculative_disable_above_batch = T applied
(confirm.py). Far below the other drafters' indices (`rung`: OWN - 1 - i), so the two never
meet."""
FITS, RESOLUTION, BUDGET = "fits", "resolution", "budget"
STOPS = {
    FITS: "every measured cell agrees with the surface its neighbours give (within its 95 % "
          "interval or the tolerance)",
    RESOLUTION: "cells disagree with their neighbours' surface, but no depth or load is left "
                "between them: the surface there is the measured cells",
    BUDGET: "grid.search.max_cells is spent before every check agreed",
}


@dataclass(frozen=True)
class SurfaceSpace:
    """What the surface search may measure and spend."""

    lattice: tuple[int, ...]
    """Every load it may choose, ascending."""
    coarse: tuple[int, ...]
    """The loads of the first step (the lattice's ends among them)."""
    depths: tuple[int, ...]
    """Every speculative depth it may choose, ascending, from 1."""
    rates: tuple[float, ...]
    """The forced chains' acceptance per draft a (i.i.d.): the surface's first, the length
    check's after."""
    max_cells: int
    tolerance: float
    """Relative difference a disagreeing cell exceeds besides its interval (min_effect)."""
    profile: bool = True
    """Measure the drafter's own acceptance (no profile file given)."""
    forced: bool = True
    """The surface from forced cells at rates[0] (`grid.search.forced=true`); else from the
    drafter's own cells, unforced (c = L T_b / T_v at their measured length)."""
    zero: bool = False
    """The engine runs depth 0 (speculation configured, no drafts): measure c(B, 0), the step
    a threshold's upper tier and a depth-0 tier run, at `check_loads` (point (B, 0, OWN))."""
    drafters: tuple[str, ...] = ()
    """Other draft models (`grid.search.drafters`), each measured unforced at the coarse loads
    x depths: drafter i is the rate index `rung(i)`, named by `drafter_name`."""

    @property
    def rate(self) -> int:
        """The surface's rate index: 0 (forced at rates[0]) or OWN (the drafter's own)."""
        return 0 if self.forced else OWN

    @property
    def coarse_depths(self) -> tuple[int, ...]:
        return ends_and_middle(self.depths)

    @property
    def check_depth(self) -> int:
        """The length check's depth: the coarse depths' middle."""
        c = self.coarse_depths
        return c[len(c) // 2]

    @property
    def check_loads(self) -> tuple[int, ...]:
        return ends_and_middle(self.coarse)

    def chain(self, depth: int, rate: int) -> tuple[float, ...]:
        return chain(self.rates[rate], depth)

    def length(self, depth: int, rate: int) -> float:
        return chain_length(self.rates[rate], depth)

    @property
    def dense_cells(self) -> int:
        """The dense grid of the lattice and depths (forced: at every rate), the baseline at
        every load."""
        return len(self.lattice) * self.dense_starts

    @property
    def dense_starts(self) -> int:
        return 1 + len(self.depths) * ((len(self.rates) if self.forced else 1)
                                       + len(self.drafters))


def rung(i: int) -> int:
    """The rate index of the i-th of `grid.search.drafters` (below OWN)."""
    return OWN - 1 - i


def is_rung(rate: int) -> bool:
    """Whether a rate index is one of `grid.search.drafters`' (not a switched point's)."""
    return SWITCH < rate < OWN


def drafter_name(space: SurfaceSpace, rate: int) -> str:
    """The other drafter at a rate index below OWN: its folder's name."""
    return space.drafters[OWN - 1 - rate].rstrip("/").rsplit("/", 1)[-1]


def chain(a: float, depth: int) -> tuple[float, ...]:
    """The forced per-position unconditional rates of the i.i.d. chain at a depth: a, a^2,
    ..., a^depth (4 decimals, as the cells force them)."""
    return tuple(round(a ** i, 4) for i in range(1, depth + 1))


def chain_length(a: float, depth: int) -> float:
    """Its mean accept length: 1 + its rates (4 decimals)."""
    return round(1.0 + sum(chain(a, depth)), 4)


def ends_and_middle(values: Sequence[int]) -> tuple[int, ...]:
    """The first, middle (the lower of two) and last of `values`."""
    return tuple(sorted({values[0], values[(len(values) - 1) // 2], values[-1]}))


def servers(points: Sequence[Point]) -> int:
    """The server starts the points need: one per (depth, rate)."""
    return len({(k, r) for _, k, r in points})


@dataclass(frozen=True)
class Check:
    """One measured cell against the cost its two neighbours along one axis give."""

    load: int
    depth: int
    axis: str
    """`depth`: from the depths either side at this load; `load`: the loads either side at
    this depth."""
    between: tuple[int, int]
    value: float
    lo: float
    hi: float
    fit: float
    agrees: bool

    def as_json(self) -> dict[str, Any]:
        return {"load": self.load, "depth": self.depth, "axis": self.axis,
                "between": list(self.between), "cost": round(self.value, 4),
                "interval": [round(self.lo, 4), round(self.hi, 4)], "fit": round(self.fit, 4),
                "agrees": self.agrees}


def _disagree(value: float, lo: float, hi: float, fit: float, tolerance: float) -> bool:
    return not lo <= fit <= hi and abs(fit - value) > tolerance * abs(value)


def _key(axis: str, fixed: int, x: int) -> tuple[int, int]:
    """(load, depth) of the cell at `x` along `axis` on the line held at `fixed`."""
    return (fixed, x) if axis == "depth" else (x, fixed)


def checks(costs: Mapping[tuple[int, int], Est], tolerance: float) -> list[Check]:
    """Every leave-one-out check the measured costs allow (module docstring, 2): linear in k
    along a load, in log B along a depth."""
    out = []
    for axis in ("depth", "load"):
        lines: dict[int, list[int]] = {}
        for b, k in costs:
            fixed, x = (b, k) if axis == "depth" else (k, b)
            lines.setdefault(fixed, []).append(x)
        coord = float if axis == "depth" else math.log
        for fixed, along in sorted(lines.items()):
            xs = sorted(along)
            for x0, x, x1 in zip(xs, xs[1:], xs[2:], strict=False):
                w = (coord(x) - coord(x0)) / (coord(x1) - coord(x0))
                fit = (1 - w) * costs[_key(axis, fixed, x0)][0] + w * costs[
                    _key(axis, fixed, x1)][0]
                value, lo, hi = costs[_key(axis, fixed, x)]
                b, k = _key(axis, fixed, x)
                out.append(Check(b, k, axis, (x0, x1), value, lo, hi, fit,
                                 not _disagree(value, lo, hi, fit, tolerance)))
    return out


def _split(have: Sequence[int], choices: Sequence[int], gaps: Sequence[tuple[int, int]],
           log: bool) -> list[int]:
    """For each gap (a, b) of neighbours in `have`, in order: the choice strictly between
    nearest its middle (geometric for loads), the lower on a tie; none where no choice lies
    between; each once."""
    out: list[int] = []
    for a, b in gaps:
        inside = [c for c in choices if a < c < b and c not in have]
        if inside:
            pick = (nearest(inside, math.sqrt(a * b)) if log else
                    min(inside, key=lambda c: (abs(c - (a + b) / 2), c)))
            out += [] if pick in out else [pick]
    return out


@dataclass(frozen=True)
class SurfaceStep:
    """One step: the points it measures (or why the search stopped)."""

    number: int
    why: str
    points: tuple[Point, ...]
    cells_before: int
    stop: str | None = None
    checks: tuple[Check, ...] = ()
    """The checks the cells measured before this step allow."""

    @property
    def starts(self) -> int:
        return servers(self.points)

    def as_json(self) -> dict[str, Any]:
        return {"number": self.number, "why": self.why, "points": [list(p) for p in self.points],
                "cells_before": self.cells_before, "starts": self.starts, "stop": self.stop,
                "disagree": [c.as_json() for c in self.checks if not c.agrees]}


def coarse_points(space: SurfaceSpace) -> list[Point]:
    """Step 1 (module docstring): the baseline, the coarse rectangle, and (forced) the length
    check and the drafter's own acceptance, each server's loads ascending."""
    points: list[Point] = [(b, 0, 0) for b in space.coarse]
    points += [(b, k, space.rate) for k in space.coarse_depths for b in space.coarse]
    points += [(b, 0, OWN) for b in space.check_loads if space.zero]
    points += [(b, k, rung(i)) for i in range(len(space.drafters)) for k in space.coarse_depths
               for b in space.coarse]
    if not space.forced:  # the rectangle is the drafter's own: its profile, no forced length
        return points
    points += [(b, space.check_depth, r) for r in range(1, len(space.rates))
               for b in space.check_loads]
    if space.profile:
        points.append((space.lattice[0], space.depths[-1], OWN))
    return points


def coarse_why(space: SurfaceSpace) -> str:
    zero = (f"; depth 0 (speculation configured, no drafts) at loads "
            f"{' '.join(map(str, space.check_loads))}" if space.zero else "") + (
        f"; {len(space.drafters)} other drafter(s) at the same loads x depths"
        if space.drafters else "")
    if not space.forced:
        return (f"coarse: the drafter's own cells at loads {' '.join(map(str, space.coarse))} "
                f"x depths {' '.join(map(str, space.coarse_depths))} and the baseline" + zero)
    check = ", ".join(f"{space.rates[r]:g}" for r in range(1, len(space.rates)))
    own = (f"; the drafter's own acceptance at depth {space.depths[-1]}, c={space.lattice[0]}"
           if space.profile else "")
    return (f"coarse: loads {' '.join(map(str, space.coarse))} x depths "
            f"{' '.join(map(str, space.coarse_depths))} and the baseline"
            + (f"; the length check at depth {space.check_depth}, a={check}, loads "
               f"{' '.join(map(str, space.check_loads))}" if check else "") + own + zero)


def _rectangle(chosen: set[Point], rate: int) -> tuple[list[int], list[int]]:
    forced = [(b, k) for b, k, r in chosen if k > 0 and r == rate]
    return sorted({b for b, _ in forced}), sorted({k for _, k in forced})


def best_changes(space: SurfaceSpace, loads: Sequence[int], depths: Sequence[int],
                 best: Mapping[int, int]) -> tuple[list[int], list[int]]:
    """Where the best depth (load -> the depth the surface so far predicts best) asks for
    more: each best depth not measured (the choice rests on an interpolated cost), and the
    load between each two neighbouring measured loads whose best depths differ (where the
    schedule changes tier). (new depths, new loads)."""
    new_k = sorted({k for k in best.values() if k > 0 and k not in depths})
    gaps = [(a, b) for a, b in zip(loads, loads[1:], strict=False)
            if a in best and b in best and best[a] != best[b]]
    return new_k, _split(loads, space.lattice, gaps, log=True)


def next_step(space: SurfaceSpace, chosen: set[Point], costs: Mapping[tuple[int, int], Est],
              number: int = 1, best: Mapping[int, int] | None = None) -> SurfaceStep:
    """The step after the points `chosen` so far, from their measured costs at the surface's
    rate and (`best`) the best depth per load the surface so far predicts."""
    n = len(chosen)
    if not chosen:
        return SurfaceStep(number, coarse_why(space), tuple(coarse_points(space)), 0)
    loads, depths = _rectangle(chosen, space.rate)
    seen = checks({key: v for key, v in costs.items()
                   if key[0] in loads and key[1] in depths}, space.tolerance)
    bad = sorted((c for c in seen if not c.agrees), key=lambda c: -abs(c.fit - c.value))
    gap: dict[str, list[tuple[int, int]]] = {"depth": [], "load": []}
    for c in bad:  # the largest disagreement first
        x = c.depth if c.axis == "depth" else c.load
        gap[c.axis] += [(c.between[0], x), (x, c.between[1])]
    new_k = _split(depths, space.depths, gap["depth"], log=False)
    new_b = _split(loads, space.lattice, gap["load"], log=True)
    best_k, best_b = best_changes(space, loads, depths, best or {})
    new_k += [k for k in best_k if k not in new_k]
    new_b = sorted({*new_b, *best_b})
    where = "; ".join(f"c={c.load} k={c.depth} ({c.axis})" for c in bad[:4]) + (
        f"; {len(bad) - 4} more" if len(bad) > 4 else "")
    if not bad and not best_k and not best_b:
        return SurfaceStep(number, f"all {len(seen)} checks agree", (), n, FITS, tuple(seen))
    if not new_k and not new_b:
        return SurfaceStep(number, f"{len(bad)} cell(s) disagree ({where}) with nothing "
                           "left between", (), n, RESOLUTION, tuple(seen))
    r = space.rate
    points = [(b, k, r if k else 0) for b in new_b for k in (0, *depths)]
    points += [(b, k, r) for k in new_k for b in sorted({*loads, *new_b})]
    why = ((f"{len(bad)} cell(s) disagree ({where})" if bad else "every check agrees")
           + ("; the best depth changes or rests on no measured cell"
              if best_k or best_b else "") + ": " + ", ".join(
        [f"depth {k}" for k in sorted(new_k)] + [f"load c={b}" for b in new_b]))
    room = space.max_cells - n
    if len(points) > room:  # the new depths that fit, each a whole server at every load
        fit_k = new_k[:room // len(loads)]
        points = [(b, k, r) for k in fit_k for b in loads]
        if not points:
            return SurfaceStep(number, f"{why}: does not fit the budget ({room} cell(s) "
                               "left)", (), n, BUDGET, tuple(seen))
        why += f" (only depth(s) {', '.join(map(str, sorted(fit_k)))} fit the budget)"
    return SurfaceStep(number, why, tuple(sorted(points, key=lambda p: (p[1], p[2], p[0]))),
                       n, None, tuple(seen))


BestOf = Callable[[set[tuple[int, int]]], Mapping[int, int] | None]
"""The best depth per load the surface of the measured (load, depth)s predicts (None: none
yet, e.g. no profile)."""


def steps_of(space: SurfaceSpace, measured: set[Point], costs: Mapping[tuple[int, int], Est],
             best_of: BestOf | None = None) -> list[SurfaceStep]:
    """Every step given the points measured and their costs (at the surface's rate); each step
    sees only the costs of the points its predecessors chose, and (`best_of`) the best depth
    per load they predict."""
    def after(chosen: set, number: int) -> SurfaceStep:
        seen = {(b, k): v for (b, k), v in costs.items() if (b, k, space.rate) in chosen}
        best = best_of(set(seen)) if best_of is not None and seen else None
        return next_step(space, chosen, seen, number, best)
    return replay(after, measured)


def result(space: SurfaceSpace, steps: Sequence[SurfaceStep]) -> dict[str, Any]:
    """The outcome: the stop, the cells and starts spent (each step's servers: an upper bound,
    a server the previous step ended on is kept) against the dense grid's, the rectangle
    measured and the last checks."""
    last = steps[-1]
    done = [s for s in steps if s.stop is not None or s is not last]
    chosen = {p for s in done for p in s.points}
    loads, depths = _rectangle(chosen, space.rate)
    return {"stop": last.stop, "stop_meaning": STOPS.get(last.stop or "", ""),
            "cells": len(chosen), "starts": sum(s.starts for s in done),
            "max_cells": space.max_cells, "dense_cells": space.dense_cells,
            "dense_starts": space.dense_starts, "design": {"loads": loads, "depths": depths},
            "checks": [c.as_json() for c in last.checks]}
