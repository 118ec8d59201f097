"""The user's drafter on the break-even curve (grid/analysis/breakeven.py): per prompt domain,
its decode accept length (Σ(output tokens - 1) / Σ verify steps, the curve's own measure) over
the requests of the configuration's unforced cells of the run, with a bootstrap interval, and
the loads at which it pays."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from grid.analysis.bootstrap import DEFAULT_REPLICATES, Resample, interval, seed_for
from grid.analysis.breakeven import NOT, PAYS, Level
from grid.analysis.forced import forced_mask


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
    verdicts: tuple[tuple[float, str, str, str], ...]
    """Per load of the curve, ascending: (load, the length's verdict (`Level.verdict`), its lower
    end's (`surely`), its upper end's (`maybe`))."""

    def _up_to(self, k: int) -> tuple[float | None, int]:
        """(the last load of the contiguous range of loads, from the lowest, where the verdict
        in column k (1: the length's, 2: surely, 3: maybe) is `pays`, None: not even the
        lowest; the index of the first load past it)."""
        last = None
        for i, v in enumerate(self.verdicts):
            if v[k] != PAYS:
                return last, i
            last = v[0]
        return last, len(self.verdicts)

    @property
    def pays_up_to(self) -> float | None:
        """The end of the contiguous range of loads, from the lowest, where it pays."""
        return self._up_to(1)[0]

    @property
    def surely_up_to(self) -> float | None:
        """... where its lower end clears the break-even interval's upper end."""
        return self._up_to(2)[0]

    @property
    def maybe_up_to(self) -> float | None:
        """... where its upper end clears the break-even interval's lower end."""
        return self._up_to(3)[0]

    @property
    def stop(self) -> str:
        """Where the range ends on an unknown verdict (`c=16: unknown above 3.50`), else ''."""
        _, i = self._up_to(1)
        if i == len(self.verdicts) or self.verdicts[i][1] == NOT:
            return ""
        return f"c={self.verdicts[i][0]:g}: {self.verdicts[i][1]}"

    @property
    def note(self) -> str:
        """Loads past the range's end where it pays again (not claimed), else ''."""
        _, i = self._up_to(1)
        again = [v[0] for v in self.verdicts[i:] if v[1] == PAYS]
        return (f"pays again at {', '.join(f'c={c:g}' for c in again)} after c="
                f"{self.verdicts[i][0]:g} (not claimed)") if again else ""

    def describe(self) -> str:
        tail = "".join(f"; {t}" for t in (self.stop, self.note) if t)
        return (f"{self.domain}: accept length {self.length:.2f} [{self.lo:.2f}, {self.hi:.2f}]"
                f" over {self.requests} requests: pays up to {at_load(self.pays_up_to)} "
                f"[{at_load(self.surely_up_to)}, {at_load(self.maybe_up_to)}]{tail}")

    def as_json(self) -> dict[str, object]:
        return {"configuration": self.configuration, "workload": self.workload,
                "domain": self.domain, "requests": self.requests,
                "accept_length": self.length, "interval": [self.lo, self.hi],
                "pays_up_to": self.pays_up_to,
                "pays_up_to_interval": [self.surely_up_to, self.maybe_up_to],
                "verdicts": [{"load": c, "verdict": v, "surely": s, "maybe": m}
                             for c, v, s, m in self.verdicts],
                "stop": self.stop or None, "note": self.note or None}


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
    ids = set(cells.cell_id[(cells.variant.astype(str) == config) & ~forced_mask(cells)])
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
            lo, hi = interval(draw.sums(decode) / draw.sums(steps))
        out[str(domain)] = (len(group), float(decode.sum() / steps.sum()), lo, hi)
    return out


def place(levels: Sequence[Level], config: str, workload: str, domain: str,
          measured: Measured) -> Drafter:
    """The drafter's length on one domain against the configuration's forced break-even curve
    on one workload."""
    n, length, lo, hi = measured
    mine = sorted((lv for lv in levels if lv.configuration == config
                   and lv.workload == workload and lv.kind == "forced"), key=lambda lv: lv.load)
    return Drafter(config, workload, domain, n, length, lo, hi,
                   tuple((lv.load, lv.verdict(length), lv.surely(lo), lv.maybe(hi))
                         for lv in mine))


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
