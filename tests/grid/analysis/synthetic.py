"""Constructed cells whose answers are known: closed-loop request timelines with a chosen
per-stream speed, for the analysis and report tests."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd


def cell_requests(cell_id: str, concurrency: int, stream_tok_s: float, per_stream: int = 8,
                  tokens: int = 100, jitter: float = 0.02, seed: int = 0,
                  t0: float = 1000.0) -> pd.DataFrame:
    """`concurrency` streams, each sending `per_stream` requests back to back; a request of
    `tokens` tokens lasts tokens / stream_tok_s (x (1 + jitter N(0,1))), TTFT 5 % of it."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(concurrency):
        t = t0 + s * 1e-3
        for i in range(per_stream):
            e2e = tokens / stream_tok_s * max(0.2, 1 + jitter * rng.standard_normal())
            ttft = 0.05 * e2e
            rows.append({"cell_id": cell_id, "status": "ok", "sent_at": t, "ttft_s": ttft,
                         "e2e_s": e2e, "tpot_s": (e2e - ttft) / (tokens - 1),
                         "output_tokens": tokens, "spec_verify_ct": None,
                         "request_id": f"{cell_id}-{s}-{i}", "domain": "coding",
                         "scheduled_at": t})
            t += e2e
    return pd.DataFrame(rows)


def grid(speeds: dict[str, dict[int, float]], jitter: float = 0.02, per_stream: int = 8,
         workload: str = "coding", spec_accept: float = 3.0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """cells and requests frames for variant -> {concurrency: per-stream tok/s}; variants
    other than `baseline` report speculation (spec_verify_ct = tokens / spec_accept)."""
    cells, reqs = [], []
    n = 0
    for variant, by_c in speeds.items():
        for c, speed in by_c.items():
            n += 1
            cid = f"{variant}-c{c}"
            r = cell_requests(cid, c, speed, per_stream, jitter=jitter, seed=n)
            if variant != "baseline":
                r["spec_verify_ct"] = int(round(100 / spec_accept))
            r["variant"], r["workload"], r["concurrency"], r["rate"] = variant, workload, c, None
            reqs.append(r)
            cells.append({"cell_id": cid, "variant": variant, "workload": workload,
                          "concurrency": c, "rate": np.nan, "status": "done", "engine": "sim",
                          "simulated": True, "client_saturated": False, "error_rate": 0.0,
                          "requests_error": 0, "num_requests": c * per_stream,
                          "factors": json.dumps({"concurrency": c}), "attempt": 1,
                          "output_tok_s": c * speed,
                          "accept_length": spec_accept if variant != "baseline" else None})
    requests = pd.concat(reqs, ignore_index=True)
    requests["spec_verify_ct"] = requests.spec_verify_ct.astype("Int64")
    return pd.DataFrame(cells), requests


def on_setup(cells: pd.DataFrame, requests: pd.DataFrame, engine: str, model: str
             ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The frames of `grid` as one setup of a grid with an engine or model axis: its engine and
    model set, each cell id (and request id) prefixed with them."""
    prefix = f"{engine}-{model}-"
    cells = cells.assign(engine=engine, model=model, cell_id=prefix + cells.cell_id)
    requests = requests.assign(cell_id=prefix + requests.cell_id,
                               request_id=prefix + requests.request_id)
    return cells, requests


def write_run(run_dir, speeds: dict[str, dict[int, float]], telemetry=None, cell_fields=None,
              server_metrics=None, engine: str = "sim", model: str = "kimi-k2.5-class",
              **kw) -> None:
    """The constructed grid written through the real results writer (grid/store/results.py);
    `telemetry` / `server_metrics`: cell id -> telemetry / server_metrics rows committed with
    that cell; `cell_fields`: cell row columns set on every cell (e.g. the server_info a
    simulated server records); `engine` / `model` other than the defaults: the cells of one
    setup (`on_setup`), so several calls into one folder make a grid with that axis."""
    from grid.store.results import write_cell
    from grid.store.schema import CELL_FIELDS, REQUEST_FIELDS

    cells, requests = grid(speeds, **kw)
    if (engine, model) != ("sim", "kimi-k2.5-class"):
        cells, requests = on_setup(cells, requests, engine, model)
    for cell in cells.to_dict("records"):
        req = requests[requests.cell_id == cell["cell_id"]]
        rows = []
        for r in req.to_dict("records"):
            row = {k: r.get(k) for k in REQUEST_FIELDS.names}
            row.update(run_id=run_dir.name, attempt=1, engine=engine, simulated=True,
                       input_tokens=100, itl_s=[], rate=None,
                       spec_verify_ct=None if pd.isna(r["spec_verify_ct"])
                       else int(r["spec_verify_ct"]))
            rows.append(row)
        row = {k: cell.get(k) for k in CELL_FIELDS.names}
        own = (engine, model) != ("sim", "kimi-k2.5-class")
        row.update(run_id=run_dir.name, model=model, engine=engine,
                   server_key=f"{engine}-{model}-{cell['variant']}" if own else cell["variant"],
                   rate=None, server_command=f"python -m engines.sim --{cell['variant']}")
        row.update(cell_fields or {})
        write_cell(run_dir, variant=cell["variant"], workload=cell["workload"],
                   cell_id=cell["cell_id"], attempt=1, requests=rows, cell_row=row,
                   telemetry=(telemetry or {}).get(cell["cell_id"], ()),
                   server_metrics=(server_metrics or {}).get(cell["cell_id"], ()))

