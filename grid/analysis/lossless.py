"""Does a variant return the baseline's tokens at temperature 0? With greedy sampling,
speculative decoding is meant to be lossless: a broken drafter config, a lossy acceptance mode
or a numerics problem would otherwise show up as a speedup. Pure pandas, from committed
request rows. The reference, the noise floor and the flag: docs/report.md ("Losslessness at
temperature 0"); forced-acceptance cells never enter (grid/analysis/forced.py)."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from grid.analysis.cellstats import repeat_of
from grid.analysis.forced import forced_mask
from grid.analysis.setups import baseline_of, is_baseline, split

REQUEST_COLUMNS = ["cell_id", "prompt_id", "status", "sent_at", "output_hash", "output_text"]
"""Request columns this module reads (pass them to grid.store.loader.load_requests)."""
CELL_COLUMNS = ["cell_id", "status", "variant", "workload", "concurrency", "rate",
                "temperature", "factors", "source"]
ALPHA = 0.05
"""One-sided significance level of the flag."""
TABLE_COLUMNS = ["variant", "baseline", "workload", "source", "compared", "identical",
                 "fraction_identical", "median_divergence_chars", "floor_compared",
                 "floor_identical", "floor_fraction", "floor_median_divergence_chars",
                 "reference_load", "p_value", "flagged"]


def baseline_for(variant: str, variants: set[str], baseline: str) -> str | None:
    """The baseline a variant is compared with: its own setup's (same engine, model, hardware:
    grid/analysis/setups.py); None for a baseline itself or without one in its setup."""
    own = baseline_of(variant, split(baseline)[1])
    if is_baseline(variant, split(baseline)[1]) or own not in variants:
        return None
    return own


def first_divergence(a: str | None, b: str | None) -> int | None:
    """Characters the two texts share from the start (None when either is unknown)."""
    if a is None or b is None:
        return None
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _load_key(cell: pd.Series) -> tuple[int, float, int]:
    """Closed loop before open loop, then the load, then the repeat."""
    rate = cell.get("rate")
    if rate is not None and not pd.isna(rate):
        return (1, float(rate), repeat_of(cell))
    conc = cell.get("concurrency")
    return (0, float(conc) if conc is not None and not pd.isna(conc) else 0.0,
            repeat_of(cell))


def _describe_load(cell: pd.Series) -> str:
    rate = cell.get("rate")
    if rate is not None and not pd.isna(rate):
        return f"{float(rate):g}/s"
    return f"c={int(cell.concurrency)}"


def _compare(rows: pd.DataFrame, refs: pd.DataFrame) -> tuple[int, int, list[int]]:
    """(compared, identical, divergences in characters) of `rows` against `refs` (by
    prompt_id; rows whose prompt has no reference or without a hash are left out)."""
    merged = rows.merge(refs, on="prompt_id", suffixes=("", "_ref"))
    merged = merged[merged.output_hash.notna() & merged.output_hash_ref.notna()]
    same = merged.output_hash == merged.output_hash_ref
    divergences = [d for a, b in zip(merged.output_text[~same], merged.output_text_ref[~same],
                                     strict=True)
                   if (d := first_divergence(_text(a), _text(b))) is not None]
    return len(merged), int(same.sum()), divergences


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _median(values: list[int]) -> float | None:
    return float(pd.Series(values).median()) if values else None


def flag(identical: int, compared: int, floor_identical: int, floor_compared: int
         ) -> tuple[bool | None, float | None]:
    """(flagged, p) by the module's rule; (None, None) with nothing compared."""
    if compared == 0:
        return None, None
    if floor_compared == 0:
        return identical < compared, None
    table = [[identical, compared - identical],
             [floor_identical, floor_compared - floor_identical]]
    from scipy.stats import fisher_exact  # here: scipy.stats adds ~0.7 s to a CLI start
    p = float(fisher_exact(table, alternative="less").pvalue)
    below = identical / compared < floor_identical / floor_compared
    return bool(below and p < ALPHA), p


def lossless_table(requests: pd.DataFrame, cells: pd.DataFrame, baseline: str = "baseline"
                   ) -> pd.DataFrame:
    """One row per non-baseline variant x workload with greedy cells and a greedy baseline
    in the same workload (TABLE_COLUMNS; the rules: the module doc)."""
    if (requests.empty or cells.empty or "output_hash" not in requests
            or "temperature" not in cells):
        return pd.DataFrame(columns=TABLE_COLUMNS)
    keep = [c for c in CELL_COLUMNS if c in cells]
    greedy = cells.loc[(cells.status == "done") & (cells.temperature == 0)
                       & ~forced_mask(cells), keep]  # a forced cell's outputs are not the model's
    ok = requests[(requests.status == "ok") & requests.cell_id.isin(set(greedy.cell_id))]
    ok = ok.sort_values("sent_at", kind="stable")
    variants = {str(v) for v in greedy.variant}
    rows = []
    for workload, in_workload in greedy.groupby("workload", observed=True):
        for variant in sorted({str(v) for v in in_workload.variant}):
            base = baseline_for(variant, variants, baseline)
            base_cells = in_workload[in_workload.variant.astype(str) == base]
            if base is None or base_cells.empty:
                continue
            rows.append(_row(variant, base, str(workload), base_cells,
                             in_workload[in_workload.variant.astype(str) == variant], ok))
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


def _row(variant: str, base: str, workload: str, base_cells: pd.DataFrame,
         var_cells: pd.DataFrame, ok: pd.DataFrame) -> dict[str, Any]:
    ordered = sorted((c for _, c in base_cells.iterrows()), key=_load_key)
    reference = ordered[0]
    base_rows = ok[ok.cell_id.isin(set(base_cells.cell_id))]
    ref_rows = base_rows[base_rows.cell_id == reference.cell_id]
    refs = ref_rows.drop_duplicates("prompt_id")[["prompt_id", "output_hash", "output_text"]]
    # the reference requests themselves are left out of the floor (identical by definition)
    floor_rows = base_rows.drop(index=refs.index)
    fc, fi, fdiv = _compare(floor_rows, refs)
    vc, vi, vdiv = _compare(ok[ok.cell_id.isin(set(var_cells.cell_id))], refs)
    flagged, p = flag(vi, vc, fi, fc)
    source = var_cells.source.dropna() if "source" in var_cells else pd.Series(dtype=str)
    return {"variant": variant, "baseline": base, "workload": workload,
            "source": str(source.iloc[0]) if len(source) else None,
            "compared": vc, "identical": vi,
            "fraction_identical": vi / vc if vc else None,
            "median_divergence_chars": _median(vdiv),
            "floor_compared": fc, "floor_identical": fi,
            "floor_fraction": fi / fc if fc else None,
            "floor_median_divergence_chars": _median(fdiv),
            "reference_load": _describe_load(reference), "p_value": p, "flagged": flagged}


def statement(row: pd.Series | dict[str, Any]) -> str:
    """One line: the variant's fraction identical against the floor, and the verdict."""
    r = dict(row)
    if not r["compared"]:
        return (f"{r['variant']} on {r['workload']}: no greedy request to compare with "
                f"{r['baseline']}'s")
    frac = f"{r['identical']}/{r['compared']} identical ({r['fraction_identical']:.0%})"
    div = r["median_divergence_chars"]
    where = (f", diverging after a median {div:.0f} characters"
             if div is not None and not _nan(div) else "")
    if r["floor_compared"]:
        floor = (f"baseline floor {r['floor_identical']}/{r['floor_compared']} "
                 f"({r['floor_fraction']:.0%})")
    else:
        floor = "no floor measured (one baseline cell: add a load or a repeat)"
    verdict = ("FLAGGED: diverges beyond the baseline's own floor" if r["flagged"]
               else "within the floor")
    return (f"{r['variant']} vs {r['baseline']} on {r['workload']} at temperature 0: {frac}"
            f"{where}; {floor} (reference {r['baseline']} at {r['reference_load']}); "
            f"{verdict}")


def _nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def as_json(table: pd.DataFrame) -> list[dict[str, Any]]:
    """decision.json's `lossless`: the table's rows (NaN as null) with their statement."""
    out = []
    for row in table.to_dict("records"):
        item: dict[str, Any] = {str(k): (None if _nan(v) else v) for k, v in row.items()}
        for k in ("compared", "identical", "floor_compared", "floor_identical"):
            item[k] = int(item[k] or 0)
        item["flagged"] = None if item["flagged"] is None else bool(item["flagged"])
        item["statement"] = statement(item)
        out.append(item)
    return out
