"""A drafter's acceptance profile: per domain, the conditional acceptance a_i of each draft
position (the probability that draft token i is accepted given that tokens 1..i-1 were) and
the marginal m_j = prod_{i<=j} a_i (the probability that the first j are all accepted, which
is what vLLM's per-position counter measures: accepted tokens at position j / verify steps),
with bootstrap intervals. Pure: numpy and pandas.

The conventions, converted here and nowhere else:
- accept length AL (tokens per verify step, the bonus token included) = 1 + sum_j m_j; at
  depth k, AL(k) = 1 + sum_{j<=k} prod_{i<=j} a_i (`accept_length`);
- acceptance rate (accepted / drafted) = (AL(k) - 1) / k (`acceptance_rate`);
- accepted tokens per step = AL - 1 (`accepted_per_step`).

Pooling over units (`profile_from_counts`: a_j as a ratio of sums, so the marginals never
rise), a run's cells (`profile_from_cells`), its requests' acceptance histograms
(`profile_from_requests`, `histogram_counts`: accepted_j = sum_{n>=j} H[n]) and the profile
file (`profile_text`, `read_profile`) are stated with worked examples in docs/questions.md
("The drafter's profile")."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from grid.analysis.bootstrap import DEFAULT_REPLICATES, LEVEL, Resample, interval, seed_for
from grid.analysis.forced import forced_mask

FORMAT = "specgrid.acceptance_profile/1"
TOLERANCE = 1e-4
"""How far a conditional rate may differ from m_j / m_{j-1}, and a marginal rise, before the
check names it (a hand-written file's rounding to 4 or 5 decimals; this module writes rates
unrounded)."""


def marginal_of(conditional: Sequence[float]) -> tuple[float, ...]:
    """m_j = prod_{i<=j} a_i."""
    return tuple(float(v) for v in np.cumprod(np.asarray(conditional, dtype=float)))


def conditional_of(marginal: Sequence[float]) -> tuple[float, ...]:
    """a_j = m_j / m_{j-1} (m_0 = 1); a position after one never accepted (m_{j-1} = 0)
    gets 0, which gives the same marginals."""
    m = [1.0, *(float(v) for v in marginal)]
    return tuple(m[j] / m[j - 1] if m[j - 1] > 0 else 0.0 for j in range(1, len(m)))


def accept_length(conditional: Sequence[float], depth: int | None = None) -> float:
    """AL(k) = 1 + sum_{j<=k} prod_{i<=j} a_i (k: every position given when None);
    ValueError for a depth beyond the positions given (nothing known there)."""
    k = len(conditional) if depth is None else depth
    if not 0 <= k <= len(conditional):
        raise ValueError(f"accept length at depth {k}: the profile has {len(conditional)} "
                         "position(s)")
    return 1.0 + sum(marginal_of(conditional[:k]))


def acceptance_rate(length: float, depth: int) -> float:
    """Accepted / drafted tokens at depth k: (AL - 1) / k."""
    return (length - 1.0) / depth


def accepted_per_step(length: float) -> float:
    """Accepted draft tokens per verify step: AL - 1 (the bonus token not counted)."""
    return length - 1.0


def check(conditional: Sequence[float], marginal: Sequence[float],
          tolerance: float = TOLERANCE) -> list[str]:
    """What is wrong with a profile, one line each (empty: consistent): a rate outside
    [0, 1], marginals that rise, a conditional rate that is not m_j / m_{j-1}, counts that
    differ."""
    out = []
    if len(conditional) != len(marginal):
        out.append(f"{len(conditional)} conditional rates, {len(marginal)} marginal")
    for name, rates in (("conditional", conditional), ("marginal", marginal)):
        out += [f"{name} rate at position {j + 1} is {v}, outside [0, 1]"
                for j, v in enumerate(rates) if not 0.0 <= v <= 1.0]
    out += [f"marginal rate rises at position {j + 1}: {marginal[j]} after {marginal[j - 1]}"
            for j in range(1, len(marginal)) if marginal[j] > marginal[j - 1] + tolerance]
    implied = conditional_of(marginal)
    out += [f"conditional rate at position {j + 1} is {a}, m_{j + 1} / m_{j} is {b:.6g}"
            for j, (a, b) in enumerate(zip(conditional, implied, strict=False))
            if abs(a - b) > tolerance]
    return out


@dataclass(frozen=True)
class DomainProfile:
    """One domain's per-position acceptance."""

    domain: str
    """The prompts' domain (a request's `domain`, or a cell's workload)."""
    conditional: tuple[float, ...]
    """a_1..a_k."""
    marginal: tuple[float, ...]
    """m_1..m_k (m_j = prod_{i<=j} a_i)."""
    conditional_interval: tuple[tuple[float, float], ...] = ()
    """Each a_j's bootstrap interval (empty: none known)."""
    marginal_interval: tuple[tuple[float, float], ...] = ()
    """Each m_j's bootstrap interval."""
    samples: int = 0
    """Units (requests or cells) the rates pool."""
    replicates: np.ndarray | None = field(default=None, repr=False, compare=False)
    """Bootstrap replicates of the marginals, (replicates, k); None: the rates taken as
    exact."""

    @property
    def positions(self) -> int:
        return len(self.conditional)

    def accept_length(self, depth: int) -> float:
        return accept_length(self.conditional, depth)

    def length_replicates(self, depth: int, n: int) -> np.ndarray:
        """n replicates of AL(depth): the first n of the profile's (each AL(k) = 1 + the sum
        of its first k marginals), or the point value n times without replicates."""
        value = self.accept_length(depth)
        if self.replicates is None:
            return np.full(n, value)
        if len(self.replicates) < n:
            raise ValueError(f"profile {self.domain}: {len(self.replicates)} replicates, "
                             f"{n} asked")
        return 1.0 + self.replicates[:n, :depth].sum(axis=1)


@dataclass(frozen=True)
class Profile:
    """A drafter's acceptance profile over domains."""

    domains: Mapping[str, DomainProfile]
    source: str = ""
    """Where the counts came from (a run folder, a file)."""
    unit: str = "cells"
    """What the bootstrap resampled: `requests` or `cells`."""
    level: float = LEVEL
    """The intervals' level."""


def profile_from_counts(units: pd.DataFrame, unit: str = "requests",
                        replicates: int = DEFAULT_REPLICATES, source: str = "",
                        seed: int = 0) -> Profile:
    """A profile from units with columns `domain`, `accepted` (accepted count per position
    drafted, position 1 first) and `steps` (verify steps): module docstring, Pooling."""
    out = {}
    for domain, group in units.groupby(units.domain.astype(str), sort=True):
        rows = [np.asarray(v, dtype=float) for v in group.accepted]
        k = max(len(r) for r in rows)
        has = np.array([[j < len(r) for j in range(k)] for r in rows], dtype=float)
        acc = np.array([np.pad(r, (0, k - len(r))) for r in rows])
        prev = np.column_stack([group.steps.to_numpy(dtype=float), acc[:, :-1]])
        top, bottom = acc * has, prev * has
        draw = Resample.draw(len(rows), replicates, seed_for(f"profile|{domain}", seed))
        with np.errstate(invalid="ignore", divide="ignore"):
            cond = tuple(float(v) for v in _ratio(top.sum(axis=0), bottom.sum(axis=0)))
            cond_reps = _ratio(draw.sums(top), draw.sums(bottom))
        marg_reps = np.cumprod(cond_reps, axis=1)
        out[str(domain)] = DomainProfile(
            str(domain), cond, marginal_of(cond),
            tuple(interval(cond_reps[:, j]) for j in range(k)),
            tuple(interval(marg_reps[:, j]) for j in range(k)), len(rows), marg_reps)
    return Profile(out, source, unit)


def _ratio(top: np.ndarray, bottom: np.ndarray) -> np.ndarray:
    """top / bottom, 0 where nothing reached the position (bottom 0)."""
    return np.where(bottom > 0, top / np.where(bottom > 0, bottom, 1.0), 0.0)


def profile_from_cells(cells: pd.DataFrame, by: str = "workload",
                       replicates: int = DEFAULT_REPLICATES, source: str = "") -> Profile:
    """A profile from a run's done, unforced cells with `acceptance_per_position` (the
    engine's per-position counter: vLLM's), one domain per value of `by`; ValueError when no
    cell has it."""
    if "acceptance_per_position" not in cells:
        raise ValueError("no cell records acceptance_per_position (the engine's per-position "
                         "counter): no profile")
    keep = cells[(cells.status == "done") & ~forced_mask(cells)]
    keep = keep[keep.acceptance_per_position.map(
        lambda v: v is not None and not isinstance(v, float) and len(v) > 0)]
    if keep.empty:
        raise ValueError("no done, unforced cell records acceptance_per_position: no profile")
    units = pd.DataFrame({"domain": keep[by].astype(str).to_numpy(),
                          "accepted": list(keep.acceptance_per_position), "steps": 1.0})
    return profile_from_counts(units, "cells", replicates, source)


def histogram_counts(histogram: Sequence[int], depth: int | None = None
                     ) -> tuple[list[int], int]:
    """(accepted count at positions 1..depth, verify steps) of one acceptance histogram
    (module docstring, Per request); depth: the positions drafted, len(H) - 1 when None.
    ValueError (one line) for a negative count or a step that accepted more than depth."""
    h = [int(v) for v in histogram]
    if any(v < 0 for v in h):
        raise ValueError(f"acceptance histogram {h}: a negative count")
    k = len(h) - 1 if depth is None else depth
    beyond = next((n for n in range(len(h) - 1, k, -1) if h[n]), None)
    if beyond is not None:
        raise ValueError(f"acceptance histogram {h}: a step accepted {beyond} drafts, more "
                         f"than the depth {k}")
    tail = np.cumsum(h[::-1])[::-1]  # tail[n] = sum_{i >= n} H[i]
    return [int(tail[j]) if j < len(h) else 0 for j in range(1, k + 1)], int(sum(h))


HISTOGRAM = "accept_histogram"
"""The request rows' column (grid/store/schema.py REQUEST_FIELDS)."""


def profile_from_requests(requests: pd.DataFrame, by: str = "domain",
                          cells: pd.DataFrame | None = None, depth: int | None = None,
                          replicates: int = DEFAULT_REPLICATES, source: str = "",
                          seed: int = 0) -> Profile:
    """A profile from a run's request rows (`load_requests`) with an acceptance histogram,
    one domain per value of `by` (`domain` or `workload`), each completed request one unit
    (module docstring, Per request). With the run's `cells`, only requests of done cells
    that force nothing and draft one fixed depth (no threshold, depth schedule or runtime
    adaptation, whose histograms mix steps of several depths) are kept. ValueError (one line)
    when no request is left."""
    if HISTOGRAM not in requests:
        raise ValueError(f"no request records {HISTOGRAM} (the server's per-request acceptance "
                         "histogram): no profile")
    if by not in requests:
        raise ValueError(f"the requests have no column {by!r} to group by")
    keep = requests[(requests.status == "ok") & requests[HISTOGRAM].map(_filled)]
    if cells is not None:
        keep = keep[keep.cell_id.isin(set(cells.cell_id[_fixed_depth(cells)]))]
    keep = keep.assign(_cell=keep.cell_id if "cell_id" in keep else "")
    rows: list[tuple[str, list[int], int]] = []
    for _, group in keep.groupby("_cell", sort=True):
        k = depth if depth is not None else max(len(h) for h in group[HISTOGRAM]) - 1
        for key, h in zip(group[by].astype(str), group[HISTOGRAM], strict=True):
            accepted, steps = histogram_counts(h, k)
            if accepted and steps:
                rows.append((key, accepted, steps))
    if not rows:
        what = "request" if cells is None else "request of a done, unforced, fixed-depth cell"
        raise ValueError(f"no completed {what} has a histogram with a drafted position: "
                         "no profile")
    units = pd.DataFrame(rows, columns=["domain", "accepted", "steps"])
    return profile_from_counts(units, "requests", replicates, source, seed)


def _filled(value: Any) -> bool:
    return value is not None and not isinstance(value, float) and len(value) > 0


def _fixed_depth(cells: pd.DataFrame) -> pd.Series:
    """Done cells that force nothing and draft one depth throughout."""
    mask = (cells.status == "done") & ~forced_mask(cells)
    for column in ("speculative_disable_above_batch", "speculative_depth"):
        if column in cells:
            mask &= cells[column].isna()
    if "speculative_adaptive" in cells:
        mask &= ~cells.speculative_adaptive.fillna(False).astype(bool)
    return mask


def _pairs(values: Sequence[tuple[float, float]]) -> list[list[float]]:
    return [[round(lo, 6), round(hi, 6)] for lo, hi in values]


def profile_json(profile: Profile, with_replicates: bool = True) -> dict[str, Any]:
    """The file's content (module docstring)."""
    domains = {}
    for name, d in profile.domains.items():
        entry: dict[str, Any] = {
            "positions": d.positions, "samples": d.samples,
            "conditional": list(d.conditional),
            "conditional_interval": _pairs(d.conditional_interval),
            "marginal": list(d.marginal),
            "marginal_interval": _pairs(d.marginal_interval),
            "accept_length": [round(d.accept_length(k), 6) for k in range(1, d.positions + 1)]}
        if with_replicates and d.replicates is not None:
            entry["replicates"] = np.round(d.replicates, 6).tolist()
        domains[name] = entry
    return {"format": FORMAT, "source": profile.source, "unit": profile.unit,
            "level": profile.level, "domains": domains}


def profile_text(profile: Profile, with_replicates: bool = True) -> str:
    """The profile file's text (whoever writes it uses the store's writer, grid/store/files.py:
    the analysis writes no file)."""
    return json.dumps(profile_json(profile, with_replicates), indent=1) + "\n"


def read_profile(path: str | Path) -> Profile:
    """A profile file; ValueError (one line) for another format or an inconsistent domain
    (`check`)."""
    raw = json.loads(Path(path).read_text())
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise ValueError(f"{path}: not an acceptance profile (format {FORMAT})")
    out = {}
    for name, d in raw["domains"].items():
        cond, marg = tuple(map(float, d["conditional"])), tuple(map(float, d["marginal"]))
        problems = check(cond, marg)
        if problems:
            raise ValueError(f"{path}: domain {name}: {problems[0]}")
        reps = d.get("replicates")
        out[name] = DomainProfile(
            name, cond, marg, tuple((float(a), float(b)) for a, b in d["conditional_interval"]),
            tuple((float(a), float(b)) for a, b in d["marginal_interval"]),
            int(d.get("samples", 0)), None if reps is None else np.asarray(reps, dtype=float))
    return Profile(out, str(raw.get("source", "")), str(raw.get("unit", "cells")),
                   float(raw.get("level", LEVEL)))
