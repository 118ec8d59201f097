"""A run folder whose cells are `MeasuredCell`s of known figures (engines/sim/twin/synthetic.py),
committed through the real results writer, for the twin command's tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from engines.twin_data import MeasuredCell
from grid.store.results import write_cell
from grid.store.schema import CELL_FIELDS, REQUEST_FIELDS


def write_run(run_dir: Path, cells: Sequence[MeasuredCell], status: str = "done",
              extra: Mapping[str, Mapping[str, object]] | None = None) -> None:
    """`extra`: more cell-row fields by cell id."""
    for cell in cells:
        n = cell.num_requests
        requests = []
        for i in range(n):
            row = {k: None for k in REQUEST_FIELDS.names}
            row.update(run_id=run_dir.name, cell_id=cell.cell_id, attempt=1, engine="sim",
                       simulated=True, concurrency=cell.concurrency, request_id=f"r{i}",
                       status="ok", input_tokens=cell.prompt_tokens[1],
                       output_tokens=cell.output_tokens[1], itl_s=[],
                       domain=next(iter(cell.domains)))
            requests.append(row)
        row = {k: None for k in CELL_FIELDS.names}
        row.update(run_id=run_dir.name, cell_id=cell.cell_id, server_key=cell.variant,
                   attempt=1, status=status, engine="sim", simulated=True, model=cell.model,
                   concurrency=cell.concurrency, num_requests=n, requests_ok=n,
                   temperature=cell.temperature, output_tok_s=cell.output_tok_s,
                   ttft_p50_s=cell.ttft_p50_s, tpot_p50_s=cell.tpot_p50_s,
                   accept_length_decode=cell.accept_length_decode,
                   server_command=cell.server_command, server_info=cell.server_info,
                   client_saturated=False, source="SIMULATION",
                   engine_version="sim 0.5.23-sim (specgrid 0), profile default on h200 / "
                                  "llama3.1-8b@000000000000")
        row.update((extra or {}).get(cell.cell_id, {}))
        write_cell(run_dir, variant=cell.variant, workload=cell.workload, cell_id=cell.cell_id,
                   attempt=1, requests=requests, cell_row=row)
