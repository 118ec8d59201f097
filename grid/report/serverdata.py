"""The servers' own /metrics over each cell, read by role rather than by name, so a vLLM cell gets
the same figures as an SGLang one: each cell's metric family (engines/metrics.py `MetricNames`)
is the one its engine declares (`Engine.metrics`), else the one its scraped names belong to (a
server someone else runs); its gauges (running batch, queue, KV-cache use) become one series per
role, its counters' increases one column per role, with the server's own tok/s and accept
length beside the client's."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

import engines
from engines.metrics import MetricNames, detect_family
from specgrid_metrics.counters import counter_delta

Families = Mapping[str, MetricNames | None]
"""Cell id -> the metric family its server's /metrics are read with (None: unknown)."""

GAUGES = {"running": "running batch", "waiting": "queue", "kv_usage": "KV cache usage"}
"""Gauge roles (MetricNames fields) the report draws, in panel order, with their axis labels."""
SUMMED = ("running", "waiting")
"""Gauges that count requests: their label sets at one scrape (tensor-parallel ranks, ...) add
up; a ratio (KV-cache use) is their mean."""
COUNTERS = ("generation_tokens", "requests_finished", "spec_steps", "spec_accepted")
"""Counter roles whose increase over the cell is a column of `server_deltas` (NaN where the
engine has no such counter, e.g. SGLang's accepted tokens, or it was scraped fewer than twice)."""
DELTA_COLUMNS = ["cell_id", "family", *COUNTERS, "server_tok_s", "server_accept_length",
                 "server_accept_length_decode"]


def declared(engine: object) -> MetricNames | None:
    """The metric family an engine (`engine=<name>`, the cells' `engine` column) declares; None
    for one that detects it per server (external) or that this checkout does not have (a run
    folder recorded elsewhere)."""
    if not isinstance(engine, str) or not engine:
        return None
    try:
        return engines.get(engine).metrics
    except ValueError:
        return None


def cell_families(cells: pd.DataFrame, metrics: pd.DataFrame) -> dict[str, MetricNames | None]:
    """Per cell: its engine's declared family, else the one detected from the names scraped
    during that cell."""
    scraped: dict[str, list[str]] = {}
    if len(metrics):
        for cell_id, names in metrics.groupby("cell_id").metric.unique().items():
            scraped[str(cell_id)] = [str(n) for n in names]
    if not len(cells):
        return {}
    return {cell_id: declared(engine) or detect_family(scraped.get(cell_id, ()))
            for cell_id, engine in zip(cells.cell_id.astype(str), cells.engine, strict=True)}


def _counter_names(names: MetricNames) -> set[str]:
    """Every counter `server_deltas` reads for a family (the per-position one included)."""
    roles = (*COUNTERS, "spec_draft_tokens", "spec_accepted_per_pos")
    return {n for n in (getattr(names, role) for role in roles) if n}


def server_deltas(metrics: pd.DataFrame, families: Families) -> pd.DataFrame:
    """Per cell with a known family: the increase of each counter role during the cell (summed
    over label sets, counter restarts counted from zero: specgrid_metrics/counters.py), the
    server's output tok/s over the scraped span, and its accept length from
    `MetricNames.accept_length`.

    ``server_accept_length`` is each engine's own definition: vLLM's mean acceptance length
    over decode steps (1 + Δaccepted / Δdrafts) where the family counts accepted tokens, else
    SGLang's completion tokens per verify call (Δgeneration / Δverify; SGLang 0.5.23 adds each
    finished request's tokens and verify count when it finishes, so that is the accept length
    of the requests that finished, warmup included). ``server_accept_length_decode`` is the
    decode-only one for every family."""
    if metrics.empty:
        return pd.DataFrame(columns=DELTA_COLUMNS)
    rows = []
    for cell_id, group in metrics.groupby("cell_id", sort=False):
        names = families.get(str(cell_id))
        if names is None:
            continue
        # Only the counters read: a scrape has hundreds of series (histogram buckets), and
        # every label set would otherwise be parsed from JSON.
        group = group[group.metric.isin(_counter_names(names))]
        samples = list(zip(group.scraped_at, group.metric, group["labels"].map(json.loads),
                           group.value, strict=True))
        row: dict[str, Any] = {"cell_id": cell_id, "family": names.family}
        for role in COUNTERS:
            name = getattr(names, role)
            delta = counter_delta(samples, name) if name else None
            row[role] = math.nan if delta is None else delta
        scraped = group.scraped_at[group.metric == names.generation_tokens]
        span = float(scraped.max() - scraped.min()) if len(scraped) else 0.0
        row["server_tok_s"] = row["generation_tokens"] / span if span > 0 else math.nan
        accept = names.accept_length(samples)
        own = accept["accept_length_decode"] if names.spec_accepted else accept["accept_length"]
        row["server_accept_length"] = math.nan if own is None else own
        decode = accept["accept_length_decode"]
        row["server_accept_length_decode"] = math.nan if decode is None else decode
        rows.append(row)
    return pd.DataFrame(rows, columns=DELTA_COLUMNS)


GAUGE_COLUMNS = ["cell_id", "variant", "role", "scraped_at", "value"]


def server_gauges(metrics: pd.DataFrame, families: Families,
                  variants: Mapping[str, str]) -> pd.DataFrame:
    """One value per cell, gauge role (`GAUGES`) and scrape: the family's gauge for that role,
    its label sets summed (counts) or averaged (ratios). `variants` names each cell's variant
    as the report shows it (labelled with its setup in a grid of several engines or models,
    which the metric files' own variant column is not)."""
    wanted = pd.DataFrame(
        [(cell_id, name, role) for cell_id, names in families.items() if names is not None
         for role in GAUGES if (name := getattr(names, role))],
        columns=["cell_id", "metric", "role"])
    if metrics.empty or wanted.empty:
        return pd.DataFrame(columns=GAUGE_COLUMNS)
    picked = metrics[["cell_id", "metric", "scraped_at", "value"]].astype(
        {"cell_id": str, "metric": str}).merge(wanted, on=["cell_id", "metric"])
    if picked.empty:
        return pd.DataFrame(columns=GAUGE_COLUMNS)
    keys = ["cell_id", "role", "scraped_at"]
    counts = picked[picked.role.isin(SUMMED)].groupby(keys).value.sum()
    ratios = picked[~picked.role.isin(SUMMED)].groupby(keys).value.mean()
    out = pd.concat([counts, ratios]).reset_index()
    out["variant"] = out.cell_id.map(variants)
    return out[GAUGE_COLUMNS]


def load_windows(requests: pd.DataFrame) -> pd.DataFrame:
    """Per cell: its load window, from its first request sent to its last one finished (epoch
    seconds, the clock the scrapes are stamped with)."""
    if requests.empty or "sent_at" not in requests:
        return pd.DataFrame(columns=["start", "end"])
    sent = requests.sent_at.astype(float)
    done = sent + requests.e2e_s.astype(float).fillna(0.0)
    frame = pd.DataFrame({"cell_id": requests.cell_id.astype(str), "sent": sent, "done": done})
    return frame.groupby("cell_id").agg(start=("sent", "min"), end=("done", "max"))


def unsampled(gauges: pd.DataFrame, requests: pd.DataFrame) -> list[str]:
    """The cells whose server was scraped but never inside their load window (a short cell
    between two scrapes): their gauges show the idle server before and after the load, not
    the load."""
    if gauges.empty:
        return []
    windows = load_windows(requests)
    out = []
    for cell_id, group in gauges.groupby("cell_id", sort=True):
        if str(cell_id) not in windows.index:
            continue  # no request timings: nothing to judge
        start, end = windows.loc[str(cell_id)]
        if not ((group.scraped_at >= start) & (group.scraped_at <= end)).any():
            out.append(str(cell_id))
    return out
