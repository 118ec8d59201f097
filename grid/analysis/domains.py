"""The report's view of the drafter's training distribution: accept length and speedup per
prompt domain and per workload, and a plain statement for every speculative variant measured
off the drafter's distribution. Definitions: docs/workloads.md (`distribution_summary`).
Pure pandas: callable by the report and by notebooks."""

from __future__ import annotations

from typing import cast

import pandas as pd

from grid.analysis.forced import forced_mask
from grid.analysis.setups import is_baseline, relabel, setups, split

REQUEST_COLUMNS = ["cell_id", "variant", "workload", "concurrency", "domain", "status",
                   "output_tokens", "e2e_s", "spec_verify_ct"]
"""Request columns this module reads (pass them to grid.store.loader.load_requests)."""


def _labelled(cells: pd.DataFrame) -> pd.DataFrame:
    """`cells` with `setup` and each variant labelled by it."""
    _, setup = setups(cells)
    return cells.assign(setup=setup.to_numpy(dtype=object),
                        variant=relabel(cells.variant, setup).to_numpy(dtype=object))


def _ok(requests: pd.DataFrame, cells: pd.DataFrame) -> pd.DataFrame:
    done = requests[(requests.status == "ok") & (requests.e2e_s > 0)].copy()
    done["rate"] = done.output_tokens / done.e2e_s
    for col in ("variant", "workload", "domain"):
        done[col] = done[col].astype(str)
    if "cell_id" in cells and len(done):
        labelled = _labelled(cells)
        names = dict(zip(labelled.cell_id.astype(str), labelled.variant, strict=True))
        done["variant"] = done.cell_id.astype(str).map(names).fillna(done.variant)
    done["setup"] = pd.Series([split(v)[0] for v in done.variant], index=done.index,
                              dtype=object)
    return done


def domain_table(requests: pd.DataFrame, cells: pd.DataFrame,
                 baseline: str = "baseline") -> pd.DataFrame:
    """One row per speculative variant x workload x concurrency x domain: requests, accept
    length, speedup over the baseline (None without a baseline cell), the cell's alignment.
    Forced-acceptance cells are left out: their acceptance is not the drafter's."""
    done = _ok(requests[~requests.cell_id.isin(set(cells.cell_id[forced_mask(cells)]))], cells)
    spec = done[done.spec_verify_ct.notna() & (done.spec_verify_ct > 0)]
    base = done[done.variant.map(lambda v: is_baseline(v, baseline)).astype(bool)]
    base_rate = base.groupby(["setup", "workload", "concurrency", "domain"]).rate.mean()
    align = _alignments(cells)
    rows = []
    for keys, group in spec.groupby(["variant", "workload", "concurrency", "domain"]):
        variant, workload, domain = str(keys[0]), str(keys[1]), str(keys[3])
        conc = int(cast(int, keys[2]))
        reference = base_rate.get((split(variant)[0], workload, conc, domain))
        value, ok = align.get((variant, workload), (None, None))
        rows.append({
            "variant": variant, "workload": workload, "concurrency": conc,
            "domain": domain, "requests": len(group),
            "accept_length": group.output_tokens.sum() / group.spec_verify_ct.sum(),
            "speedup": group.rate.mean() / reference if reference else None,
            "alignment": value, "alignment_ok": ok,
        })
    return pd.DataFrame(rows, columns=["variant", "workload", "concurrency", "domain",
                                       "requests", "accept_length", "speedup", "alignment",
                                       "alignment_ok"])


def _alignments(cells: pd.DataFrame) -> dict[tuple[str, str], tuple[float | None, bool | None]]:
    if "alignment" not in cells or cells.empty:
        return {}
    out: dict[tuple[str, str], tuple[float | None, bool | None]] = {}
    known = _labelled(cells)[cells.alignment.notna().to_numpy()]
    for (variant, workload), group in known.groupby(["variant", "workload"], observed=True):
        out[(str(variant), str(workload))] = (float(group.alignment.iloc[0]),
                                              bool(group.alignment_ok.iloc[0]))
    return out


def workload_speedups(cells: pd.DataFrame, baseline: str = "baseline") -> pd.DataFrame:
    """Speculative variant x workload x concurrency: output tok/s over the baseline's."""
    done = _labelled(cells)[((cells.status == "done") & cells.rate.isna()).to_numpy()].copy()
    for col in ("variant", "workload"):
        done[col] = done[col].astype(str)
    # Each setup's baseline's mean over its repeats (the `repeat` axis) at each workload and
    # load.
    base = done[done.variant.map(lambda v: is_baseline(v, baseline)).astype(bool)].groupby(
        ["setup", "workload", "concurrency"]).output_tok_s.mean()
    rows = []
    for _, row in done[done.accept_length.notna()].iterrows():
        reference = base.get((row.setup, row.workload, row.concurrency))
        rows.append({"variant": row.variant, "workload": row.workload,
                     "concurrency": int(row.concurrency), "accept_length": row.accept_length,
                     "speedup": row.output_tok_s / reference if reference else None,
                     "alignment": row.get("alignment"), "alignment_ok": row.get("alignment_ok")})
    return pd.DataFrame(rows, columns=["variant", "workload", "concurrency", "accept_length",
                                       "speedup", "alignment", "alignment_ok"])


def off_distribution_statements(cells: pd.DataFrame) -> list[str]:
    """One sentence per speculative variant x workload measured off the drafter's distribution."""
    out = []
    for (variant, workload), (value, ok) in sorted(_alignments(cells).items()):
        if ok is False:
            out.append(f"{variant} on {workload} was measured OFF the drafter's training "
                       f"distribution (alignment {value:.2f}): its numbers measure the mismatch "
                       "between prompts and drafter, not speculative decoding itself.")
    return out


def prompt_gap(cells: pd.DataFrame, baseline: str = "baseline") -> list[str]:
    """"How much of the gap is the prompts": per speculative variant and concurrency, the mean
    speedup on aligned workloads against off-distribution ones."""
    table = workload_speedups(cells, baseline)
    table = table[table.speedup.notna() & table.alignment_ok.notna()]
    out = []
    for (variant, conc), group in table.groupby(["variant", "concurrency"]):
        on = group[group.alignment_ok.astype(bool)]
        off = group[~group.alignment_ok.astype(bool)]
        if on.empty or off.empty:
            continue
        s_on, s_off = on.speedup.mean(), off.speedup.mean()
        out.append(f"{variant} at c={conc}: {100 * (s_on - 1):+.0f}% on the drafter's "
                   f"distribution ({', '.join(on.workload)}) vs {100 * (s_off - 1):+.0f}% off it "
                   f"({', '.join(off.workload)}): the prompts account for "
                   f"{100 * (s_on - s_off):.0f} points of speedup")
    return out


def distribution_summary(requests: pd.DataFrame, cells: pd.DataFrame,
                         baseline: str = "baseline") -> str:
    """The section the report prints (empty when no speculative request was measured)."""
    table = domain_table(requests, cells, baseline)
    if table.empty:
        return ""
    wide = max(16, *(len(v) for v in table.variant))
    lines = ["accept length and speedup over the baseline by prompt domain:",
             f"  {'variant':<{wide}} {'workload':<14} {'c':>4} {'domain':<13} {'n':>4} "
             f"{'accept':>7} {'speedup':>8} {'alignment':>10}"]
    for _, r in table.sort_values(["variant", "concurrency", "workload", "domain"]).iterrows():
        speed = "-" if r.speedup is None or pd.isna(r.speedup) else f"{100 * (r.speedup - 1):+.0f}%"
        align = "-" if r.alignment is None or pd.isna(r.alignment) else (
            f"{r.alignment:.2f}{'' if r.alignment_ok else ' OFF'}")
        lines.append(f"  {r.variant:<{wide}} {r.workload:<14} {r.concurrency:>4} {r.domain:<13} "
                     f"{r.requests:>4} {r.accept_length:>7.2f} {speed:>8} {align:>10}")
    gap = prompt_gap(cells, baseline)
    if gap:
        lines += ["", "how much of the gap is the prompts:"] + [f"  {g}" for g in gap]
    off = off_distribution_statements(cells)
    if off:
        lines += [""] + off
    return "\n".join(lines)
