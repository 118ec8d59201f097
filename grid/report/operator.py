"""The operator's view of a run (grid/analysis/pareto.py and capacity.py do the statistics):
the GPUs that served each cell, read from what the cell recorded; the frontier table, capacity
under the SLOs and the variant that serves the most there, with dollars per million tokens
(with a price per GPU-hour) and joules per token (where NVML power was read); their lines for
the terminal and their part of decision.json."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import pandas as pd

import engines
from grid.analysis.capacity import ATTAINMENT, Capacity, capacities, serves_most
from grid.analysis.cellstats import CellStats
from grid.analysis.jsonsafe import json_safe
from grid.analysis.pareto import pareto
from grid.analysis.winners import best_share


def cell_gpus(cells: pd.DataFrame) -> dict[str, float | None]:
    """Cell id -> the GPUs that served it. A simulated cell: the GPUs its engine models, from
    its /server_info (`Modeller.modelled_gpus`: the simulator's default profile stands for a
    whole 8-GPU node behind one server, whatever --tp-size says); any other: the GPUs Ray
    assigned its server (`gpu_ids`). None where neither was recorded (a server someone else
    runs) or none were used (a CPU)."""
    out: dict[str, float | None] = {}
    for row in cells.itertuples():
        gpus: float | None = None
        if bool(getattr(row, "simulated", False)):
            model = engines.modeller(getattr(row, "engine", None))
            try:
                info = json.loads(getattr(row, "server_info", None) or "{}")
            except (ValueError, TypeError):
                info = {}
            gpus = model.modelled_gpus(info) if model is not None and isinstance(info, dict) \
                else None
        else:
            ids = getattr(row, "gpu_ids", None)
            if isinstance(ids, str) and ids.strip():
                gpus = float(len([g for g in ids.split(",") if g.strip()]))
        out[str(row.cell_id)] = gpus if gpus else None
    return out


@dataclass
class OperatorView:
    """Frontier, capacity and cost of one run."""

    frontier: pd.DataFrame
    """grid/analysis/pareto.py `pareto`: one row per closed-loop point."""
    capacities: list[Capacity]
    best: list[dict]
    """grid/analysis/capacity.py `serves_most`."""
    gpu_hour_usd: float | None = None
    """The price per GPU-hour the user set (None: no dollar figures)."""
    target: float = ATTAINMENT
    gpus_unknown: list[str] = field(default_factory=list)
    """Variants with a cell whose GPUs were not recorded (no per-GPU or dollar figures)."""

    def capacity(self, variant: str, workload: str, load_kind: str) -> Capacity | None:
        return next((c for c in self.capacities
                     if (c.variant, c.workload, c.load_kind) == (variant, workload, load_kind)),
                    None)

    def lines(self) -> list[str]:
        out = []
        for c in self.capacities:
            extra = []
            if c.served and math.isfinite(c.goodput_per_gpu):
                extra.append(f"{c.goodput_per_gpu:.1f} good tok/s per GPU on {c.gpus:g} GPU(s)")
            if math.isfinite(c.usd_per_mtok):
                extra.append(f"${c.usd_per_mtok:.2f} per million output tokens "
                             f"(${c.usd_per_good_mtok:.2f} per million within the SLOs)")
            if math.isfinite(c.j_per_token):
                extra.append(f"{c.j_per_token:.2f} J/token")
            out.append("capacity: " + c.describe() + ("; " + "; ".join(extra) if extra else ""))
        for b in self.best:
            unit = "good tok/s per GPU" if b["metric"].endswith("per_gpu") else "good tok/s"
            word = "serves the most" if b["verdict"] == "winner" else \
                "leads (no significant difference)"
            out.append(f"at the SLO on {b['workload']}: {b['winner']} {word}, {b['value']:.1f} "
                       f"{unit} at its capacity vs {b['runner_up']} {b['runner_up_value']:.1f} "
                       f"({100 * b['margin']:+.0f}% [{100 * b['lo']:+.0f}%, "
                       f"{100 * b['hi']:+.0f}%]){best_share(b.get('wins_share'))}")
        on = self.frontier[self.frontier.frontier] if len(self.frontier) else self.frontier
        for workload, group in on.groupby("workload", sort=True):
            pts = ", ".join(f"{r.variant} c={r.concurrency:g} ({r.tok_s_per_user:.1f} tok/s/user, "
                            f"{r.tok_s_per_gpu:.1f} tok/s/GPU)"
                            for r in group.sort_values("tok_s_per_user").itertuples())
            out.append(f"Pareto frontier on {workload} (per user vs per GPU): {pts}")
        if self.gpus_unknown:
            out.append("GPUs not recorded for " + ", ".join(self.gpus_unknown)
                       + ": no per-GPU or dollar figures for them")
        if self.gpu_hour_usd is None and len(self.frontier):
            out.append("cost: no price set (hardware.gpu_hour_usd, or python -m grid.report "
                       "--gpu-hour-usd): no dollar figures")
        return out

    def as_json(self) -> dict:
        rows = [] if self.frontier.empty else [
            {str(k): v for k, v in r.items()} for r in self.frontier.to_dict("records")]
        return json_safe({"pareto": rows,
                "capacity": {"target_attainment": self.target,
                             "per_variant": [c.as_json() for c in self.capacities],
                             "serves_most": self.best},
                "cost": {"gpu_hour_usd": self.gpu_hour_usd,
                         "gpus_unknown": self.gpus_unknown}})


def operator_view(stats: CellStats, cells: pd.DataFrame, energy: pd.DataFrame,
                  gpu_hour_usd: float | None = None,
                  target: float = ATTAINMENT) -> OperatorView:
    """The view of one analysed run: `cells` the loader's cells (what each recorded about its
    server), `energy` the report's joules per token per cell (grid/report/data.py)."""
    gpus = cell_gpus(cells) if len(cells) else {}
    joules = (dict(zip(energy.cell_id, energy.j_per_token, strict=True)) if len(energy)
              else {})
    caps = capacities(stats, gpus, target, gpu_hour_usd, joules)
    table = stats.table
    done = table[table.status == "done"] if len(table) else table
    unknown = sorted({str(v) for v, c in zip(done.get("variant", []), done.get("cell_id", []),
                                             strict=True) if gpus.get(str(c)) is None})
    return OperatorView(pareto(stats, gpus, gpu_hour_usd, joules), caps, serves_most(caps),
                        gpu_hour_usd, target, unknown)
