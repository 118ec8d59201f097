"""Start-up cost per variant: what an operator choosing a variant for autoscaling pays each
time a server of it starts. Pure pandas over the cell rows (grid/store/rows.py ServerFacts).
A start, its total and its phases: docs/report.md ("Start-up per variant")."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

TABLE_COLUMNS = ["variant", "source", "starts", "startup_s", "startup_s_min", "startup_s_max",
                 "phases"]


def _phases(text: Any) -> dict[str, float]:
    try:
        value = json.loads(text) if isinstance(text, str) else {}
    except ValueError:
        return {}
    return {str(k): float(v) for k, v in value.items()} if isinstance(value, dict) else {}


def starts(cells: pd.DataFrame) -> pd.DataFrame:
    """One row per server start recorded in `cells` (variant, source, startup_s, phases)."""
    if cells.empty or "server_startup_s" not in cells:
        return pd.DataFrame(columns=["variant", "source", "startup_s", "phases"])
    known = cells[cells.server_startup_s.notna()]
    first = known.drop_duplicates(["server_key", "server_started_at"])
    return pd.DataFrame({
        "variant": first.variant.astype(str),
        "source": first.source if "source" in first else None,
        "startup_s": first.server_startup_s.astype(float),
        "phases": [_phases(p) for p in first.get("server_startup_phases",
                                                  pd.Series([None] * len(first)))],
    }).reset_index(drop=True)


def startup_table(cells: pd.DataFrame) -> pd.DataFrame:
    """Per variant: starts, the total's median / min / max (s), each phase's median (s)."""
    each = starts(cells)
    rows = []
    for variant, group in each.groupby("variant", sort=True):
        phases: dict[str, list[float]] = {}
        for p in group.phases:
            for name, seconds in p.items():
                phases.setdefault(name, []).append(seconds)
        source = group.source.dropna()
        rows.append({"variant": str(variant),
                     "source": str(source.iloc[0]) if len(source) else None,
                     "starts": len(group), "startup_s": float(group.startup_s.median()),
                     "startup_s_min": float(group.startup_s.min()),
                     "startup_s_max": float(group.startup_s.max()),
                     "phases": {name: float(pd.Series(v).median())
                                for name, v in phases.items()}})
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)
