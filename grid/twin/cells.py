"""A run's committed closed-loop cells as `MeasuredCell`s (engines/twin_data.py), read through
grid.loader: each cell's figures and server record from the cells table, its prompt and output
lengths and prompt domains from its ok requests."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from engines.twin_data import MeasuredCell
from grid.cli.runrecord import RUN_RECORD, read_run_record
from grid.loader import load_cells, load_requests, load_turns
from grid.plan.config import ConfigError

REQUEST_COLUMNS = ["cell_id", "status", "input_tokens", "output_tokens", "domain"]


def _num(value: Any) -> float | None:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _positions(value: Any) -> tuple[float, ...] | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    out = tuple(float(v) for v in value)
    return out or None


def measured_cells(run_dir: Path, saturated: bool = False
                   ) -> tuple[list[MeasuredCell], list[str]]:
    """(the done closed-loop cells, one line per cell left out and why). A cell whose load
    generator could not keep up (`client_saturated`) measured the client, not the server: left
    out unless ``saturated``."""
    cells = load_cells(run_dir)
    if not len(cells):
        return [], []
    done = cells[cells.status == "done"]
    skipped = []
    conversations = set(load_turns(run_dir, columns=["cell_id"]).cell_id)
    requests = load_requests(run_dir, columns=REQUEST_COLUMNS)
    requests = requests[requests.status == "ok"]
    by_cell = {cid: g for cid, g in requests.groupby("cell_id")}
    out = []
    for rec in done.to_dict("records"):
        row: dict[str, Any] = {str(k): v for k, v in rec.items()}
        cid = str(row["cell_id"])
        why = None
        if _num(row["rate"]) is not None or _num(row["concurrency"]) is None:
            why = "open loop (a twin fits closed-loop cells)"
        elif cid in conversations:
            why = "conversation replay"
        elif cid not in by_cell:
            why = "no ok requests"
        elif "--speculative-adaptive" in str(row["server_command"] or ""):
            why = ("speculation switched by batch size (speculative_disable_above_batch): "
                   "not modelled by the twin")
        elif bool(row["client_saturated"]) and not saturated:
            why = ("client saturated: its numbers measure the load generator "
                   f"({row['saturation_reason']}; --saturated keeps it)")
        if why:
            skipped.append(f"{cid} {row['variant']} {row['workload']}: {why}")
            continue
        out.append(_measured(row, by_cell[cid]))
    return out, skipped


def _text(value: Any) -> str | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) \
        else str(value)


def _measured(row: dict[str, Any], reqs: pd.DataFrame) -> MeasuredCell:
    prompt = reqs.input_tokens.dropna()
    output = reqs.output_tokens.dropna()
    domains = reqs.domain.dropna().astype(str)
    shares = {str(k): float(v) for k, v in domains.value_counts(normalize=True).items()}
    return MeasuredCell(
        cell_id=str(row["cell_id"]), variant=str(row["variant"]),
        workload=str(row["workload"]), engine=str(row["engine"]),
        engine_version=_text(row["engine_version"]), model=str(row["model"]),
        concurrency=int(_num(row["concurrency"]) or 1),
        num_requests=int(_num(row["requests_ok"]) or len(reqs)),
        temperature=_num(row["temperature"]) or 0.0,
        server_command=_text(row["server_command"]) or "",
        server_info=_text(row["server_info"]),
        output_tok_s=_num(row["output_tok_s"]), ttft_p50_s=_num(row["ttft_p50_s"]),
        tpot_p50_s=_num(row["tpot_p50_s"]), accept_length=_num(row["accept_length"]),
        accept_length_decode=_num(row["accept_length_decode"]),
        acceptance_per_position=_positions(row["acceptance_per_position"]),
        prompt_tokens=(float(prompt.mean()), int(prompt.min()), int(prompt.max()))
        if len(prompt) else (1.0, 1, 1),
        output_tokens=(float(output.mean()), int(output.min()), int(output.max()))
        if len(output) else (1.0, 1, 1),
        domains=shares)


def recorded_hardware(run_dir: Path) -> str | None:
    """The node's hardware profile as the run recorded it: its `hardware=NAME` override
    (run.json), else `cpu` when every cell ran on the CPU (the cells' `device`), else None."""
    if (run_dir / RUN_RECORD).is_file():
        try:
            overrides = read_run_record(run_dir)
        except ConfigError:
            overrides = []
        for o in overrides:
            key, sep, value = o.lstrip("+").partition("=")
            if sep and key in ("hardware", "hardware.name") and "," not in value:
                return value
    cells = load_cells(run_dir)
    devices = set(cells.device.dropna().astype(str)) if "device" in cells else set()
    return "cpu" if devices == {"cpu"} else None
