"""The break-even acceptance: for each load, the accept length at which a speculative
configuration's throughput equals the baseline's, and the user's drafter placed on it. Pure:
numpy and pandas. A curve is measured one of two ways:
- **forced**: one drafter, its acceptance forced by the engine to each length
  (grid/analysis/forced.py); the length is the one asked for;
- **ladder**: drafters of graded quality at the same cost per draft pass (a grid axis over
  `variant.args.speculative_draft_model_path`, e.g. the trained target's noisy copies,
  engines/trained_models.py LADDER_RECIPE), nothing forced; the length is each rung's measured
  decode accept length (its cells' `accept_length_decode`, mean over repeats), taken as known
  (it is a mean over every verify step of the cell, far narrower than the throughput's
  interval).

Definitions, per speculative configuration (a variant label without its forced-acceptance or
draft-model part: `eagle3__forced_len-2.5` is configuration `eagle3` at length 2.5,
`tiny_trained_draft__draft-noise-0.20` configuration `tiny_trained_draft` with one rung) x
workload x load:
- the **ratio** at a length a: the configuration's output tok/s over the baseline's at
  the same load and workload (means over repeats; grid/analysis/decision.py `points`);
- the **break-even length** a*: where the ratio crosses 1, linearly interpolated between the
  two measured lengths around it (the ratio rises with acceptance at a fixed load: a longer
  accept length is more tokens for the same step). The first crossing from below is taken. A
  ratio already >= 1 at the shortest length measured puts a* at or below it (`below`: pays at
  every length measured); one below 1 at the longest, at or above it (`above`);
- its **interval**: the same interpolation in each bootstrap replicate of the throughputs (the
  cells' replicates, grid/analysis/cellstats.py; the baseline's and the configuration's drawn
  independently), the 95 % percentile interval of the replicates' crossings, each clipped to
  the lengths measured (an end at the shortest or longest length is "or beyond").

The drafter (per domain): its decode accept length (Σ(output tokens - 1) / Σ verify steps, the
forced length's own measure) over the requests of the same configuration's **unforced** cells
of the run, or of an earlier run (grid/analysis/drafter_run.py), with a bootstrap interval over
requests. It **pays** at a load where its length exceeds a*; the answer per domain is the
highest load measured where it pays, bracketed by the highest load where it pays for certain
(the length's lower end above a*'s upper end) and the highest where it may (the length's upper
end above a*'s lower end)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from grid.analysis.bootstrap import DEFAULT_REPLICATES, Resample, interval, seed_for
from grid.analysis.cellstats import CellStats
from grid.analysis.decision import Point, points
from grid.analysis.forced import COLUMN, forced_length

FORCED_PART = re.compile(r"__forced_(?:len|rates)-[0-9.]+(?:_[0-9.]+)*")
"""The part grid/plan/cells.py adds to a variant label for a forced-acceptance axis."""
DRAFT_PART = re.compile(r"__draft-.+?(?=__|$)")
"""... and for an axis over the draft model (`__draft-noise-0.20`)."""


def configuration(variant: str) -> str:
    """The speculative configuration of a variant label (its forced and draft parts removed)."""
    return DRAFT_PART.sub("", FORCED_PART.sub("", variant))


@dataclass(frozen=True)
class Crossing:
    value: float
    """The break-even length (the end measured when it lies outside)."""
    where: str
    """`inside` the lengths measured, `below` the shortest (pays at all), `above` the longest
    (pays at none)."""


def crossing(lengths: Sequence[float], ratios: Sequence[float] | np.ndarray) -> Crossing:
    """Where the ratio (ascending `lengths`) first reaches 1, linearly interpolated."""
    if ratios[0] >= 1.0:
        return Crossing(float(lengths[0]), "below")
    for i in range(1, len(lengths)):
        if ratios[i] >= 1.0:
            a0, a1, r0, r1 = lengths[i - 1], lengths[i], ratios[i - 1], ratios[i]
            return Crossing(float(a0 + (1.0 - r0) * (a1 - a0) / (r1 - r0)), "inside")
    return Crossing(float(lengths[-1]), "above")


@dataclass
class Level:
    """The break-even length of one configuration at one load."""

    configuration: str
    workload: str
    load: float
    lengths: tuple[float, ...]
    ratios: tuple[float, ...]
    """Throughput over the baseline's at each length (point estimates)."""
    value: float
    where: str
    lo: float
    hi: float
    lo_open: bool = False
    """The interval's lower end is the shortest length measured: a* may be lower still."""
    hi_open: bool = False
    """Its upper end is the longest length measured: a* may be higher still."""
    cell_ids: list[str] = field(default_factory=list)
    kind: str = "forced"
    """`forced` (lengths asked of the engine) or `ladder` (lengths measured, one per drafter)."""
    rungs: tuple[str, ...] = ()
    """Ladder: the variant label at each length."""
    rung_ratios: tuple[tuple[float, float], ...] = ()
    """Ladder: each rung's ratio interval (bootstrap, 95 %)."""

    def describe(self) -> str:
        if self.where == "below":
            text = f"<= {self.value:.2f} (pays at every length measured)"
        elif self.where == "above":
            text = f">= {self.value:.2f} (pays at no length measured)"
        else:
            text = f"{self.value:.2f}"
        lo = ("<=" if self.lo_open else "") + f"{self.lo:.2f}"
        hi = (">=" if self.hi_open else "") + f"{self.hi:.2f}"
        return f"{text} [{lo}, {hi}]"

    def as_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "load": self.load, "kind": self.kind, "break_even_length": self.value,
            "where": self.where, "interval": [self.lo, self.hi],
            "interval_open": [self.lo_open, self.hi_open], "lengths": list(self.lengths),
            "ratios": list(self.ratios), "cells": self.cell_ids}
        if self.kind == "ladder":
            out["rungs"] = [{"variant": v, "accept_length": a, "ratio": r,
                             "ratio_interval": list(ri), "verdict": self.verdict(a),
                             "agrees": self.agrees(a, ri)}
                            for v, a, r, ri in zip(self.rungs, self.lengths, self.ratios,
                                                   self.rung_ratios, strict=True)]
        return out

    def verdict(self, length: float) -> str:
        """`pays` where a drafter of this length beats the baseline by the curve."""
        return "pays" if length > self.value else "does not pay"

    def agrees(self, length: float, ratio_interval: tuple[float, float]) -> bool | None:
        """Whether a rung's verdict has the sign of its measured speedup (None where the
        speedup's interval holds zero: no sign to agree with)."""
        lo, hi = ratio_interval
        if lo <= 1.0 <= hi:
            return None
        return (self.verdict(length) == "pays") == (lo > 1.0)


def level(config: str, workload: str, load: float, lengths: Sequence[float],
          spec: Sequence[Point], base: Point, metric: str = "output_tok_s") -> Level:
    """The break-even length at one load from the configuration's point at each forced length
    (`spec`, in the order of `lengths`, ascending) and the baseline's point."""
    values = np.array([p.values[metric] for p in spec]) / base.values[metric]
    point = crossing(lengths, values)
    with np.errstate(invalid="ignore", divide="ignore"):
        reps = np.stack([p.replicates[metric] for p in spec]) / base.replicates[metric]
    found = [crossing(lengths, reps[:, j]) for j in range(reps.shape[1])
             if np.all(np.isfinite(reps[:, j]))]
    lo, hi = interval(np.array([c.value for c in found]))
    return Level(config, workload, load, tuple(lengths), tuple(float(v) for v in values),
                 point.value, point.where, lo, hi,
                 lo_open=lo <= lengths[0] and any(c.where == "below" for c in found),
                 hi_open=hi >= lengths[-1] and any(c.where == "above" for c in found),
                 cell_ids=[c for p in (*spec, base) for c in p.cell_ids])


def predicted_level(config: str, workload: str, load: float, lengths: Sequence[float],
                    ratios: Sequence[float]) -> Level:
    """The break-even length at one load from predicted ratios (no replicates: the interval
    is the point)."""
    point = crossing(lengths, ratios)
    return Level(config, workload, load, tuple(lengths), tuple(float(r) for r in ratios),
                 point.value, point.where, point.value, point.value)


def curves(stats: CellStats, cells: pd.DataFrame, baseline: str = "baseline") -> list[Level]:
    """Every (kind, configuration, workload, closed-loop load) with two or more lengths and
    the baseline measured, sorted by kind, configuration, workload and load: forced lengths,
    and ladders (unforced cells whose variant labels differ only in the draft model, at their
    measured decode accept length)."""
    if cells.empty:
        return []
    forced_of = ({str(c): forced_length(v) for c, v in zip(cells.cell_id, cells[COLUMN],
                                                            strict=True)}
                 if COLUMN in cells else {})
    measured_of = ({str(c): float(v) for c, v in zip(cells.cell_id, cells.accept_length_decode,
                                                      strict=True) if pd.notna(v)}
                   if "accept_length_decode" in cells else {})
    pts = [p for p in points(stats, ("output_tok_s",)) if p.load_kind == "concurrency"]
    base = {(p.workload, p.load): p for p in pts if p.variant == baseline}
    found: dict[tuple[str, str, str, float], dict[float, Point]] = {}
    for p in pts:
        length = forced_of.get(p.cell_ids[0])
        if length is not None:
            key = ("forced", configuration(p.variant), p.workload, p.load)
        elif DRAFT_PART.search(p.variant) and all(c in measured_of for c in p.cell_ids):
            length = float(np.mean([measured_of[c] for c in p.cell_ids]))
            key = ("ladder", configuration(p.variant), p.workload, p.load)
        else:
            continue
        found.setdefault(key, {})[length] = p
    out = []
    for (kind, config, workload, load), by_length in sorted(found.items()):
        b = base.get((workload, load))
        if b is None or len(by_length) < 2:
            continue
        lengths = sorted(by_length)
        lv = level(config, workload, load, lengths, [by_length[a] for a in lengths], b)
        if kind == "ladder":
            lv.kind, lv.rungs = kind, tuple(by_length[a].variant for a in lengths)
            lv.rung_ratios = tuple(_ratio_interval(by_length[a], b) for a in lengths)
        out.append(lv)
    return out


def _ratio_interval(spec: Point, base: Point, metric: str = "output_tok_s"
                    ) -> tuple[float, float]:
    with np.errstate(invalid="ignore", divide="ignore"):
        return interval(spec.replicates[metric] / base.replicates[metric])


@dataclass(frozen=True)
class Drafter:
    """The drafter's real acceptance on one prompt domain and where it pays."""

    configuration: str
    workload: str
    domain: str
    requests: int
    length: float
    lo: float
    hi: float
    pays_up_to: float | None
    """The highest load measured where its length exceeds the break-even length (None: at
    none)."""
    surely_up_to: float | None
    """... where its lower end exceeds the break-even interval's upper end."""
    maybe_up_to: float | None
    """... where its upper end exceeds the break-even interval's lower end."""
    source_run: str | None = None
    """The run whose unforced cells measured the length (None: this run's own)."""

    @property
    def name(self) -> str:
        """The domain, with the run its length comes from when that is another run."""
        return self.domain + (f" (run {self.source_run})" if self.source_run else "")

    def describe(self) -> str:
        return (f"{self.name}: accept length {self.length:.2f} [{self.lo:.2f}, {self.hi:.2f}]"
                f" over {self.requests} requests: pays up to {at_load(self.pays_up_to)} "
                f"[{at_load(self.surely_up_to)}, {at_load(self.maybe_up_to)}]")

    def as_json(self) -> dict[str, object]:
        return {"configuration": self.configuration, "workload": self.workload,
                "domain": self.domain, "requests": self.requests,
                "accept_length": self.length, "interval": [self.lo, self.hi],
                "pays_up_to": self.pays_up_to,
                "pays_up_to_interval": [self.surely_up_to, self.maybe_up_to],
                "source_run": self.source_run}


def at_load(load: float | None) -> str:
    """`c=8`, or `none` for no load."""
    return "none" if load is None else f"c={load:g}"


Measured = tuple[int, float, float, float]
"""A drafter's length on one domain: (requests, decode accept length, its interval)."""


def drafter_lengths(requests: pd.DataFrame, cells: pd.DataFrame, config: str,
                    workload: str | None, replicates: int = DEFAULT_REPLICATES, seed: int = 0
                    ) -> dict[str, Measured]:
    """Per prompt domain: (requests, decode accept length, its interval) over the ok requests
    with verify steps of the configuration's unforced cells (the variant label equal to it)
    on the workload (None: on every workload)."""
    ids = set(cells.cell_id[(cells.variant.astype(str) == config)
                            & cells[COLUMN].map(lambda v: forced_length(v) is None)]) \
        if COLUMN in cells else set(cells.cell_id[cells.variant.astype(str) == config])
    req = requests[requests.cell_id.isin(ids) & (requests.status == "ok")
                   & (requests.spec_verify_ct.fillna(0) > 0)]
    if workload is not None:
        req = req[req.workload.astype(str) == workload]
    out = {}
    for domain, group in req.groupby(req.domain.astype(str)):
        decode = (group.output_tokens - 1).to_numpy(dtype=float)
        steps = group.spec_verify_ct.to_numpy(dtype=float)
        draw = Resample.draw(len(group), replicates,
                             seed_for(f"{config}:{workload}:{domain}", seed))
        with np.errstate(invalid="ignore", divide="ignore"):
            reps = draw.sums(decode) / draw.sums(steps)
        lo, hi = interval(reps)
        out[str(domain)] = (len(group), float(decode.sum() / steps.sum()), lo, hi)
    return out


def place(levels: Sequence[Level], config: str, workload: str, domain: str,
          measured: Measured, source_run: str | None = None) -> Drafter:
    """The drafter's length on one domain against the configuration's break-even curve on
    one workload (`source_run`: the run that measured the length, when not this one)."""
    n, length, lo, hi = measured
    mine = [lv for lv in levels if lv.configuration == config and lv.workload == workload
            and lv.kind == "forced"]

    def highest(pays: list[bool]) -> float | None:
        loads = [lv.load for lv, ok in zip(mine, pays, strict=True) if ok]
        return max(loads) if loads else None

    return Drafter(config, workload, domain, n, length, lo, hi,
                   highest([length > lv.value for lv in mine]),
                   highest([lo > lv.hi for lv in mine]),
                   highest([hi > lv.lo for lv in mine]), source_run)


def drafters(levels: Sequence[Level], requests: pd.DataFrame, cells: pd.DataFrame,
             replicates: int = DEFAULT_REPLICATES, seed: int = 0) -> list[Drafter]:
    """The drafter of every configuration with a curve, per workload and prompt domain."""
    out = []
    for config, workload in sorted({(lv.configuration, lv.workload) for lv in levels
                                    if lv.kind == "forced"}):
        found = drafter_lengths(requests, cells, config, workload, replicates, seed)
        out += [place(levels, config, workload, d, m) for d, m in sorted(found.items())
                if math.isfinite(m[1])]
    return out
