"""The break-even acceptance (docs/report.md "Break-even acceptance"), pure: per configuration,
workload and load, the accept length at which the throughput equals the baseline's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from grid.analysis.bootstrap import interval
from grid.analysis.breakeven_cells import CurveCells, Length, configuration, ladder_refusals
from grid.analysis.cellstats import CellStats
from grid.analysis.points import Point, points

PAYS, NOT = "pays", "does not pay"
CHECKS = ("agree", "disagree", "no_sign", "unknown")


@dataclass(frozen=True)
class Crossing:
    value: float
    """The break-even length (the end measured when it lies outside)."""
    where: str
    """`inside` the lengths measured, `below` (pays at all) or `above` (pays at none)."""


def crossing(lengths: Sequence[float] | np.ndarray, ratios: Sequence[float] | np.ndarray
             ) -> Crossing:
    """Where the ratio (ascending `lengths`) first reaches 1, linearly interpolated."""
    if ratios[0] >= 1.0:
        return Crossing(float(lengths[0]), "below")
    for i in range(1, len(lengths)):
        if ratios[i] >= 1.0:
            a0, a1, r0, r1 = lengths[i - 1], lengths[i], ratios[i - 1], ratios[i]
            return Crossing(float(a0 + (1.0 - r0) * (a1 - a0) / (r1 - r0)), "inside")
    return Crossing(float(lengths[-1]), "above")


def judge(length: float, bound: float, where: str) -> str:
    """A length against a break-even bound: `pays`, `does not pay`, or `unknown above / below X`
    past the lengths measured."""
    if where == "above" and length > bound:
        return f"unknown above {bound:.2f}"
    if where == "below":
        return PAYS if length >= bound else f"unknown below {bound:.2f}"
    return PAYS if length > bound else NOT


def agrees(verdict: str, ratio_interval: tuple[float, float]) -> bool | None:
    """Whether a verdict has the sign of a measured speedup (None: no sign or no verdict)."""
    lo, hi = ratio_interval
    if lo <= 1.0 <= hi or verdict not in (PAYS, NOT):
        return None
    return (verdict == PAYS) == (lo > 1.0)


def check(verdict: str, ratio_interval: tuple[float, float]) -> str:
    """A held-out verdict against the measured speedup: one of CHECKS."""
    a = agrees(verdict, ratio_interval)
    return ("unknown" if verdict not in (PAYS, NOT) else "no_sign" if a is None
            else "agree" if a else "disagree")


def held_out(levels: Sequence[Level]) -> dict[str, int]:
    """The ladder levels' rungs' held-out verdicts (`check`), counted."""
    found = [check(v, ri) for lv in levels
             for v, ri in zip(lv.held_out_verdicts, lv.rung_ratios, strict=True)]
    return {k: found.count(k) for k in CHECKS}


def left_one_out(lengths: Sequence[float], ratios: Sequence[float]) -> tuple[str, ...]:
    """Each point's verdict by the curve through the others only (point estimates)."""
    without = [crossing([*lengths[:i], *lengths[i + 1:]], [*ratios[:i], *ratios[i + 1:]])
               for i in range(len(lengths))]
    return tuple(judge(a, c.value, c.where) for a, c in zip(lengths, without, strict=True))


@dataclass
class Level:
    """The break-even length of one configuration at one load."""

    configuration: str
    workload: str
    load: float
    lengths: tuple[float, ...]
    """The measured decode accept length of each point, ascending."""
    ratios: tuple[float, ...]
    """Throughput over the baseline's at each length (point estimates)."""
    value: float
    where: str
    lo: float
    hi: float
    lo_open: bool = False
    """The interval's lower end is a replicate's shortest length: a* may be lower still."""
    hi_open: bool = False
    """Its upper end is a replicate's longest length: a* may be higher still."""
    lo_above: bool = False
    """Its lower end too is a replicate's longest length: the interval lies past them."""
    hi_below: bool = False
    """Its upper end too is a replicate's shortest length: the interval lies short of them."""
    cell_ids: list[str] = field(default_factory=list)
    kind: str = "forced"
    """`forced` (lengths asked of the engine) or `ladder` (one drafter per length)."""
    depth: int | None = None
    """speculative_num_steps of the curve's cells (None: not recorded)."""
    left_out: tuple[str, ...] = ()
    """Forced cells at this load the engine did not honour, left out of the curve: why."""
    rungs: tuple[str, ...] = ()
    """Ladder: the variant label at each length."""
    rung_ratios: tuple[tuple[float, float], ...] = ()
    """Ladder: each rung's ratio interval (bootstrap, 95 %)."""
    rung_lengths: tuple[tuple[float, float], ...] = ()
    """Ladder: each rung's accept-length interval (the same replicates)."""
    held_out_verdicts: tuple[str, ...] = ()
    """Ladder: each rung's verdict by the curve fitted without it (`left_one_out`)."""

    def describe(self) -> str:
        text = (f"<= {self.value:.2f} (pays at every length measured)" if self.where == "below"
                else f">= {self.value:.2f} (pays at no length measured)" if self.where == "above"
                else f"{self.value:.2f}")
        lo = ("<=" if self.lo_open else "") + f"{self.lo:.2f}"
        hi = (">=" if self.hi_open else "") + f"{self.hi:.2f}"
        return f"{text} [{lo}, {hi}]"

    def verdict(self, length: float) -> str:
        """A drafter of this length by the curve (`judge` against a*)."""
        return judge(length, self.value, self.where)

    def surely(self, lo: float) -> str:
        """A length's lower end `lo` against a*'s upper end (`judge`)."""
        return judge(lo, self.hi, "above" if self.hi_open else "below" if self.hi_below
                     else "inside")

    def maybe(self, hi: float) -> str:
        """A length's upper end `hi` against a*'s lower end (`judge`)."""
        return judge(hi, self.lo, "below" if self.lo_open else "above" if self.lo_above
                     else "inside")

    def held_out(self) -> dict[str, int]:
        """Ladder: the rungs' held-out verdicts against their speedup's sign, counted."""
        return held_out([self])

    def as_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "load": self.load, "kind": self.kind, "break_even_length": self.value,
            "where": self.where, "interval": [self.lo, self.hi],
            "interval_open": [self.lo_open, self.hi_open], "lengths": list(self.lengths),
            "ratios": list(self.ratios), "depth": self.depth, "left_out": list(self.left_out),
            "cells": self.cell_ids}
        if self.kind == "ladder":
            out.update(rungs=self.rung_rows(), held_out=self.held_out())
        return out

    def rung_rows(self) -> list[dict[str, Any]]:
        """Ladder: each rung's figures and its held-out verdict against its speedup."""
        return [{"variant": v, "accept_length": a, "accept_length_interval": list(ai),
                 "ratio": r, "ratio_interval": list(ri), "held_out_verdict": h,
                 "held_out_agrees": agrees(h, ri)}
                for v, a, ai, r, ri, h in zip(self.rungs, self.lengths, self.rung_lengths,
                                              self.ratios, self.rung_ratios,
                                              self.held_out_verdicts, strict=True)]


def _level(config: str, workload: str, load: float, lengths: Sequence[float],
           ratios: Sequence[float] | np.ndarray, found: Sequence[Crossing], lo: float,
           hi: float) -> Level:
    """The level of the point estimates' crossing, the interval [lo, hi] of the replicates'
    crossings `found`, open where one of them lies past the lengths."""
    point = crossing(lengths, ratios)
    return Level(config, workload, load, tuple(lengths), tuple(float(r) for r in ratios),
                 point.value, point.where, lo, hi,
                 lo_open=any(c.where == "below" and c.value >= lo for c in found),
                 hi_open=any(c.where == "above" and c.value <= hi for c in found),
                 lo_above=any(c.where == "above" and c.value <= lo for c in found),
                 hi_below=any(c.where == "below" and c.value >= hi for c in found))


def level(config: str, workload: str, load: float, xs: Sequence[Length], spec: Sequence[Point],
          base: Point, metric: str = "output_tok_s") -> Level:
    """The break-even length at one load from the configuration's points (`spec`) at their
    measured lengths (`xs`, ascending) and the baseline's point, replicate by replicate."""
    with np.errstate(invalid="ignore", divide="ignore"):
        reps = np.stack([p.replicates[metric] for p in spec]) / base.replicates[metric]
    found = []
    for x, r in zip(np.stack([r for _, r in xs]).T, reps.T, strict=True):
        if np.all(np.isfinite(r)) and np.all(np.isfinite(x)):
            order = np.argsort(x, kind="stable")  # two rungs may swap in a replicate
            found.append(crossing(x[order], r[order]))
    lv = _level(config, workload, load, [x for x, _ in xs],
                np.array([p.values[metric] for p in spec]) / base.values[metric], found,
                *interval(np.array([c.value for c in found])))
    lv.cell_ids = [c for p in (*spec, base) for c in p.cell_ids]
    return lv


Key = tuple[str, str, str, float]
"""(kind, configuration, workload, load)."""


def curves(stats: CellStats, cells: pd.DataFrame, baseline: str = "baseline") -> list[Level]:
    """Every (kind, configuration, workload, closed-loop load) with the baseline and two
    lengths or more measured (forced cells honoured, ladders of one shape), sorted."""
    if cells.empty:
        return []
    read = CurveCells.of(stats, cells)
    refused = ladder_refusals(cells)
    pts = [p for p in points(stats, ("output_tok_s",)) if p.load_kind == "concurrency"]
    base = {(p.workload, p.load): p for p in pts if p.variant == baseline}
    found: dict[Key, list[tuple[Length, Point]]] = {}
    left: dict[Key, list[str]] = {}
    for p in pts:
        kind = read.kind(p)
        if kind is None or (kind == "ladder" and configuration(p.variant) in refused):
            continue
        key = (kind, configuration(p.variant), p.workload, p.load)
        if bad := (read.not_honoured(p) if kind == "forced" else []):
            left.setdefault(key, []).extend(bad)
        elif (x := read.length(p)) is not None:
            found.setdefault(key, []).append((x, p))
    out = []
    for key, entries in sorted(found.items(), key=lambda kv: kv[0]):
        b = base.get((key[2], key[3]))
        if b is None or len(entries) < 2:
            continue
        entries.sort(key=lambda e: e[0][0])
        lv = level(key[1], key[2], key[3], [x for x, _ in entries], [p for _, p in entries], b)
        lv.kind, lv.left_out, lv.depth = key[0], tuple(left.get(key, ())), read.depth(lv.cell_ids)
        if lv.kind == "ladder":
            lv.rungs = tuple(p.variant for _, p in entries)
            with np.errstate(invalid="ignore", divide="ignore"):
                lv.rung_ratios = tuple(interval(p.replicates["output_tok_s"]
                                                / b.replicates["output_tok_s"]) for _, p in entries)
            lv.rung_lengths = tuple(interval(x[1]) for x, _ in entries)
            lv.held_out_verdicts = left_one_out(lv.lengths, lv.ratios)
        out.append(lv)
    return out
