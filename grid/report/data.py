"""What a report is made of, read from one run folder through the loader and analysed: the
cells with windowed metrics and intervals, the decision, server metrics per cell (with counter
deltas), telemetry, validity findings and provenance."""

from __future__ import annotations

import json
import math
import platform
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import numpy as np
import pandas as pd

from grid.analysis import CellStats, Decision, Slo, analyse_cells, decide
from grid.analysis.cellstats import REQUEST_COLUMNS
from grid.analysis.domains import REQUEST_COLUMNS as DISTRIBUTION_COLUMNS
from grid.report.operator import OperatorView, operator_view
from grid.store.loader import (
    DamagedFileError,
    load_cells,
    load_requests,
    load_server_metrics,
    load_telemetry,
    load_turns,
    set_aside_attempts,
)
from grid.store.schema import REQUEST_FIELDS, TURN_FIELDS
from specgrid_metrics.counters import counter_deltas

SIM_BANNER = "SIMULATION — numbers come from specgrid's simulated SGLang server, not a GPU."
CPU_BANNER = ("{label} — measured on real {engines} servers running {models} on a CPU: they "
              "show what the engines do (acceptance, scheduling, streaming), not how fast a GPU "
              "serves a real model.")
CPU_MODELS = {"tiny model": "the project's tiny model",
              "tiny trained models": "models the project trained on its own shipped text"}
"""What each CPU source's models are (grid/store/rows.py source_label), for the banner."""
DECISION_FILE = "decision.json"
SERVER_GAUGES = {"sglang:num_running_reqs": "running batch", "sglang:num_queue_reqs": "queue",
                 "sglang:token_usage": "KV cache usage", "sglang:spec_accept_rate":
                 "spec accept rate"}
SERVER_COUNTERS = {"sglang:generation_tokens_total": "generation_tokens",
                   "sglang:spec_verify_calls_total": "spec_verify_calls",
                   "sglang:num_retracted_requests_total": "retractions",
                   "sglang:num_requests_total": "requests"}
_REQUEST_EXTRA = ["variant", "workload", "concurrency", "domain"]
TURN_COLUMNS = [name for name in TURN_FIELDS.names if name != "itl_s"] + ["variant", "workload"]
"""The turn columns the report reads (not the per-token gaps: the cell row has ITL
percentiles)."""
SENT_ROUNDS = ("ok", "error")
"""Rounds that reached the server (skipped / not_run ones never did): a conversation cell's
requests."""
_ALIGNMENT = "alignment_ok"


@dataclass
class RunData:
    run_dir: Path
    cells: pd.DataFrame
    """The loader's cells (latest attempt each)."""
    requests: pd.DataFrame
    """The request columns the analysis needs (no per-token lists)."""
    turns: pd.DataFrame
    """One row per round of each conversation cell (workload.kind=conversations; empty
    without); its sent rounds are the cell's requests in `stats`."""
    stats: CellStats
    decision: Decision
    server_metrics: pd.DataFrame
    server_deltas: pd.DataFrame
    """Per cell: counter deltas and the server's own tok/s and accept length."""
    telemetry: pd.DataFrame
    energy: pd.DataFrame
    """Per cell: GPU energy (J) and J per output token, where power was readable."""
    slo: Slo
    validity: list[tuple[str, str]] = field(default_factory=list)
    """(level: `warning` | `note`, text) — shown at the top of every report."""
    baseline: str = "baseline"
    """The variant the others are compared to."""
    damaged: list[str] = field(default_factory=list)
    """One line per damaged file of the run (its cell left out of the report): files that
    cannot be read, and attempts set aside as damaged that no later attempt replaced."""
    gpu_hour_usd: float | None = None
    """The price of one GPU-hour in dollars the user set (hardware.gpu_hour_usd); None = no
    dollar figures."""
    operator: OperatorView | None = None
    """Frontier, capacity under the SLOs and cost (grid/report/operator.py)."""

    @property
    def simulated(self) -> bool:
        return bool(len(self.cells)) and bool(self.cells.simulated.fillna(False).any())

    @property
    def on_cpu(self) -> bool:
        """Whether real engines served (some of) the run on a CPU."""
        return "source" in self.cells and bool(
            self.cells.source.fillna("").str.startswith("real engine, CPU").any())

    @property
    def label(self) -> str | None:
        """What a figure title is prefixed with: where the numbers come from, when not GPUs."""
        if self.simulated:
            return "SIMULATION"
        return " / ".join(s.upper() for s in self._cpu_sources()) if self.on_cpu else None

    def _cpu_sources(self) -> list[str]:
        return sorted(str(s) for s in self.cells.source.dropna().unique()
                      if str(s).startswith("real engine, CPU"))

    def cpu_banner(self) -> str:
        names = sorted(str(e) for e in self.cells.engine.dropna().unique()
                       if e not in ("sim", "external"))
        sources = self._cpu_sources()
        models = [CPU_MODELS.get(s.removeprefix("real engine, CPU, "), "a model") for s in sources]
        return CPU_BANNER.format(label=" / ".join(s.upper() for s in sources),
                                 engines=" and ".join(names) or "inference",
                                 models=" and ".join(models))


def saved_slo(run_dir: Path) -> Slo | None:
    """The SLO the run's last report used (decision.json), so a re-render keeps it."""
    try:
        saved = json.loads((run_dir / DECISION_FILE).read_text())["slo"]
        return Slo(**{k: saved.get(k) for k in ("ttft_ms", "tpot_ms", "e2e_ms")})
    except (OSError, ValueError, KeyError, TypeError):
        return None


def saved_price(run_dir: Path) -> float | None:
    """The price per GPU-hour the run's last report used (decision.json), so a re-render
    keeps it."""
    try:
        price = json.loads((run_dir / DECISION_FILE).read_text())["cost"]["gpu_hour_usd"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return float(price) if isinstance(price, int | float) and price > 0 else None


def load_run(run_dir: Path, slo: Slo | None = None, baseline: str = "baseline",
             replicates: int = 1000, seed: int = 0,
             gpu_hour_usd: float | None = None) -> RunData:
    """The run folder loaded and analysed; `slo` and `gpu_hour_usd` default to those its last
    report used."""
    run_dir = Path(run_dir)
    slo = slo or saved_slo(run_dir) or Slo()
    gpu_hour_usd = gpu_hour_usd if gpu_hour_usd is not None else saved_price(run_dir)
    unreadable: list[DamagedFileError] = []  # each loader leaves damaged files out, listed here
    cells = load_cells(run_dir, damaged=unreadable)
    extra = [c for c in (_ALIGNMENT,) if c in REQUEST_FIELDS.names]
    wanted = REQUEST_COLUMNS + _REQUEST_EXTRA + extra + DISTRIBUTION_COLUMNS
    requests = load_requests(run_dir, columns=list(dict.fromkeys(wanted + ["engine"])),
                             damaged=unreadable)
    turns = load_turns(run_dir, columns=TURN_COLUMNS, damaged=unreadable)
    metrics = load_server_metrics(run_dir, damaged=unreadable)
    telemetry = load_telemetry(run_dir, damaged=unreadable)
    # A cell with any damaged file is left out whole: its other files alone would mislead.
    damaged_ids = {d.cell_id for d in unreadable}
    if damaged_ids:
        cells, requests, turns, metrics, telemetry = (
            f[~f.cell_id.isin(damaged_ids)].reset_index(drop=True)
            for f in (cells, requests, turns, metrics, telemetry))
    engines = sorted(str(e) for e in cells.engine.dropna().unique()) if len(cells) else []
    if len(engines) > 1:
        # One grid, several engines: each engine's variants are their own (vllm/eagle3), and
        # every speedup is against one engine's baseline, so engines compare on the same load.
        for frame in (cells, requests, turns):
            if len(frame) and "engine" in frame:
                frame["variant"] = frame.engine.astype(str) + "/" + frame.variant.astype(str)
        if baseline == "baseline":
            baseline = next((f"{e}/baseline" for e in engines
                             if f"{e}/baseline" in set(cells.variant)), baseline)
    stats = analyse_cells(cells, with_rounds(requests, turns), slo, replicates, seed)
    data = RunData(run_dir, cells, requests, turns, stats, decide(stats, baseline), metrics,
                   server_deltas(metrics, stats.table), telemetry,
                   energy_per_token(telemetry, cells, stats.table), slo, baseline=baseline,
                   damaged=damage_lines(run_dir, unreadable), gpu_hour_usd=gpu_hour_usd)
    data.operator = operator_view(stats, cells, data.energy, gpu_hour_usd)
    data.validity = validity(data)
    return data


def damage_lines(run_dir: Path, unreadable: list[DamagedFileError]) -> list[str]:
    """One line per damaged file: those the loaders could not read, then the attempts set
    aside as damaged (grid/store/results.py) that no later committed attempt replaced."""
    lines = [f"{d.shown} (cell {d.cell_id}, attempt {d.attempt}): {d.reason}"
             for d in unreadable]
    for path, cell_id, attempt in set_aside_attempts(run_dir):
        lines.append(f"{path.relative_to(run_dir)} (cell {cell_id}, attempt {attempt}): set "
                     "aside as damaged, not measured again yet")
    return lines


def with_rounds(requests: pd.DataFrame, turns: pd.DataFrame) -> pd.DataFrame:
    """The requests the cell analysis reads: the prompt cells' requests and, for conversation
    cells, their sent rounds (a round is one request: sent, timed, streamed like any other;
    specgrid_metrics/requests.py's definitions apply unchanged)."""
    rounds = turns[turns.status.isin(SENT_ROUNDS)]
    if rounds.empty:
        return requests
    rounds = rounds[[c for c in REQUEST_COLUMNS if c in rounds]]
    return rounds if requests.empty else pd.concat([requests, rounds], ignore_index=True)


def server_deltas(metrics: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """Per cell: the increase of SGLang's counters during the cell (summed over label sets,
    counter resets handled), the server's own output tok/s over the scraped span and accept
    length (generation tokens / verify calls), beside the client's. SGLang 0.5.23 adds each
    finished request's generation tokens and spec_verify_ct to these counters
    (sglang/srt/observability/metrics_collector.py, observe_one_finished_request), so their
    ratio is the accept length of the requests that finished (warmup included)."""
    if metrics.empty:
        return pd.DataFrame(columns=["cell_id", *SERVER_COUNTERS.values()])
    rows = []
    wanted = metrics[metrics.metric.isin(list(SERVER_COUNTERS))]
    for cell_id, group in wanted.groupby("cell_id", sort=False):
        deltas = counter_deltas(zip(group.scraped_at, group.metric,
                                    group["labels"].map(json.loads), group.value, strict=True))
        row: dict = {"cell_id": cell_id}
        for name, short in SERVER_COUNTERS.items():
            row[short] = sum(v for (n, _), v in deltas.items() if n == name)
        span = group.scraped_at.max() - group.scraped_at.min()
        row["server_tok_s"] = row["generation_tokens"] / span if span > 0 else math.nan
        row["server_accept_length"] = (row["generation_tokens"] / row["spec_verify_calls"]
                                       if row["spec_verify_calls"] else math.nan)
        rows.append(row)
    return pd.DataFrame(rows)


def energy_per_token(telemetry: pd.DataFrame, cells: pd.DataFrame, table: pd.DataFrame
                     ) -> pd.DataFrame:
    """Per cell: energy of the server's GPUs (trapezoid over the power samples; the GPUs in
    the cell's CUDA_VISIBLE_DEVICES when recorded, else every sampled GPU) and joules per
    output token of the cell's completed requests."""
    power = telemetry[telemetry.metric == "power_w"] if len(telemetry) else telemetry
    if power.empty:
        return pd.DataFrame(columns=["cell_id", "energy_j", "j_per_token"])
    visible = dict(zip(cells.cell_id, cells.cuda_visible_devices, strict=True))
    tokens = dict(zip(table.cell_id, table.get("measured_tokens", pd.Series(dtype=float)),
                      strict=False))
    rows = []
    for cell_id, group in power.groupby("cell_id", sort=False):
        devices = visible.get(cell_id)
        if isinstance(devices, str) and devices:
            ids = {int(x) for x in devices.split(",") if x.strip().isdigit()}
            group = group[group.gpu.isin(ids)] if ids else group
        energy = 0.0
        for _, gpu in group.groupby(["node", "gpu"]):
            gpu = gpu.sort_values("sampled_at")
            energy += float(np.trapezoid(gpu.value, gpu.sampled_at)) if len(gpu) > 1 else 0.0
        n = tokens.get(cell_id)
        rows.append({"cell_id": cell_id, "energy_j": energy,
                     "j_per_token": energy / n if n else math.nan})
    return pd.DataFrame(rows)


def engine_versions(table: pd.DataFrame) -> list[str]:
    """The distinct engine versions of a run's cells, sorted ("unknown" where none is
    recorded); more than one means the cells table must name each cell's version."""
    if "engine_version" not in table:
        return []
    return sorted(table.engine_version.astype(object).fillna("unknown").unique())


def server_clock_check(cells: pd.DataFrame) -> list[tuple[str, str]]:
    """The client's TTFT against the server's own first-token latency (SGLang's native stream):
    the client can only be later; a client reading earlier than the server's clock says its
    timestamps are wrong."""
    if "ttft_minus_server_p50_s" not in cells or cells.ttft_minus_server_p50_s.isna().all():
        return []
    p50 = cells.ttft_minus_server_p50_s.dropna()
    early = cells[cells.ttft_minus_server_p50_s < -0.001]
    if len(early):
        return [("warning", f"client TTFT below the server's own first-token latency in "
                            f"{len(early)} cell(s): the client's timestamps are suspect")]
    return [("note", f"client TTFT minus the server's own first-token latency: median of the "
                     f"cells {p50.median() * 1e3:.1f} ms (largest p99 "
                     f"{cells.ttft_minus_server_p99_s.max() * 1e3:.1f} ms, {len(p50)} cells)")]


def validity(data: RunData) -> list[tuple[str, str]]:
    """What limits the evidence, most important first."""
    out: list[tuple[str, str]] = []
    table = data.stats.table
    if data.simulated:
        out.append(("warning", SIM_BANNER))

    def extrapolated() -> list[str]:
        """Simulated cells outside their hardware x model pair's calibrated envelope
        (engines/sim/profile.py Envelope; the profile named by the cell's engine_version, as
        it is now), from what the run recorded: concurrency (an open-loop cell: its mean
        running batch from the server's gauge), the most output tokens and the shortest and
        longest prompt of its requests (server-counted), the EAGLE-3 shape of its server
        command and its prompts' domains. The plan checks the same from the config."""
        import numbers
        import re
        import shlex

        from engines.sim.profile import load_profile
        from grid.store.loader import load_requests

        cells = data.cells
        if not len(cells) or "engine_version" not in cells:
            return []
        sim = cells[cells.simulated.fillna(False).astype(bool)]
        if not len(sim):
            return []
        try:
            reqs = load_requests(data.run_dir, columns=["cell_id", "status", "input_tokens",
                                                        "output_tokens", "domain"])
        except Exception:  # noqa: BLE001 - damaged files are reported above
            reqs = pd.DataFrame(columns=["cell_id", "status", "input_tokens",
                                         "output_tokens", "domain"])
        reqs = reqs[reqs.status == "ok"]
        gauge = data.server_metrics
        running = (gauge[gauge.metric == "sglang:num_running_reqs"].groupby("cell_id").value
                   .mean() if len(gauge) and "metric" in gauge else pd.Series(dtype=float))
        conversations = set(data.turns.cell_id) if len(data.turns) else set()
        found = []
        for row in sim.itertuples():
            m = re.search(r"profile (\S+) on (\S+) / ([^@\s]+)@", str(row.engine_version or ""))
            if m is None:
                continue
            try:
                env = load_profile(m[1], m[2], m[3]).envelope
            except ValueError:
                continue
            if env is None:
                found.append((row, f"no anchor covers {m[2]} / {m[3]}"))
                continue
            mine = reqs[reqs.cell_id == row.cell_id]
            argv = shlex.split(str(row.server_command or ""))
            flags = {a: argv[i + 1] for i, a in enumerate(argv[:-1]) if a.startswith("--")}
            algorithm = flags.get("--speculative-algorithm", "").upper()
            shape = None
            why = []
            if algorithm:
                try:
                    shape = tuple(int(flags[f"--speculative-{k}"]) for k in
                                  ("num-steps", "eagle-topk", "num-draft-tokens"))
                except (KeyError, ValueError):
                    why.append(f"speculative algorithm {algorithm} without an explicit shape")
                if algorithm != "EAGLE3":
                    why.append(f"speculative algorithm {algorithm}")
            cid, given = str(row.cell_id), row.concurrency
            concurrency = float(given) if isinstance(given, numbers.Real) and given == given \
                else (round(float(running[cid]), 1) if cid in running else None)
            if cid in conversations:
                why.append("multi-turn conversation replay")
            lengths = mine.input_tokens.dropna()
            outputs = mine.output_tokens.dropna()
            why += env.outside(
                concurrency=concurrency,
                output_tokens=int(outputs.max()) if len(outputs) else None,
                prompt_tokens=(int(lengths.min()), int(lengths.max())) if len(lengths) else None,
                speculative=shape if len(shape or ()) == 3 else None,  # type: ignore[arg-type]
                domains=sorted(mine.domain.dropna().astype(str).unique()) if algorithm else ())
            if why:
                found.append((row, "; ".join(why)))
        return [f"{r.variant} {_load(r)} {r.workload} ({why})" for r, why in found]

    outside = extrapolated() if data.simulated else []
    if outside:
        shown = "; ".join(outside[:8]) + (f" and {len(outside) - 8} more"
                                          if len(outside) > 8 else "")
        out.append(("warning", f"extrapolation: {len(outside)} simulated cell(s) outside the "
                               "calibrated envelope of their hardware x model profile (the "
                               "scenarios its published anchor covers, docs/simulator.md "
                               f"'Calibrated envelope'): {shown}"))
    if data.on_cpu:
        out.append(("warning", data.cpu_banner()))
    if data.damaged:
        shown = "; ".join(data.damaged[:8])
        more = len(data.damaged) - 8
        out.append(("warning", f"{len(data.damaged)} damaged file(s), their cells left out of "
                               f"this report: {shown}" + (f" and {more} more" if more > 0
                                                          else "")
                               + f"; python -m grid.status {data.run_dir} --verify checks "
                                 "every file, and running the run's command again measures "
                                 "the damaged cells again"))
    if table.empty:
        return out + [("warning", "no committed cells")]

    def names(frame: pd.DataFrame) -> str:
        shown = [f"{r.variant} {_load(r)}" for r in frame.itertuples()][:8]
        more = len(frame) - len(shown)
        return ", ".join(shown) + (f" and {more} more" if more > 0 else "")

    conversation_ids = set(data.turns.cell_id) if len(data.turns) else set()
    saturated = table[table.client_saturated.fillna(False).astype(bool)]
    if len(saturated):
        out.append(("warning", f"client saturated in {len(saturated)} cell(s) (latency there "
                               f"includes the client's own delay): {names(saturated)}"))
    out += server_clock_check(data.cells)
    failed = table[table.status != "done"]
    if len(failed):
        out.append(("warning", f"{len(failed)} cell(s) not done (left out of every "
                               f"comparison): {names(failed)}"))
    errors = table[(table.status == "done") & (table.requests_error.fillna(0) > 0)]
    if len(errors):
        out.append(("warning", f"{len(errors)} cell(s) with request errors: {names(errors)}"))
    versions = engine_versions(table)
    if len(versions) > 1:
        out.append(("warning", "cells of several engine versions in this run ("
                    + ", ".join(versions)
                    + "): the cells table names each cell's version; compare versions with "
                      "python -m grid.report RUN_A RUN_B"))
    off = off_distribution(data)
    if off:
        out.append(("warning", off))
    elif not (_recorded(data.requests, _ALIGNMENT) or _recorded(data.cells, _ALIGNMENT)):
        out.append(("note", "workload alignment with the drafter's training distribution "
                            "was not recorded in this run"))
    loose = table[table.get("loose_interval", pd.Series(False, index=table.index))
                  .fillna(False).astype(bool) & (table.status == "done")]
    if len(loose):
        out.append(("warning", f"too few requests for a tight interval (throughput ±10 % or "
                               f"fewer than 10 requests in the steady window) in "
                               f"{len(loose)} cell(s): {names(loose)}; raise "
                               f"load.requests_per_stream"
                               + (" (conversation cells: more rounds, workload."
                                  "num_conversations / workload.max_turns)"
                                  if loose.cell_id.isin(conversation_ids).any() else "")))
    if len(conversation_ids):
        out.append(("note", f"{len(conversation_ids)} conversation cell(s): their requests are "
                            "the rounds sent; intervals resample rounds as if independent, but "
                            "the rounds of one conversation share its growing context, so "
                            "these intervals are likely too narrow"))
    unsteady = table[(table.get("steady", pd.Series(True, index=table.index)) == False)  # noqa: E712
                     & (table.status == "done")]
    if len(unsteady):
        out.append(("note", f"no steady state (one wave of requests) in {len(unsteady)} "
                            f"cell(s): their window is the whole span: {names(unsteady)}"))
    repeats = table.groupby(["variant", "workload", "concurrency", "rate"], dropna=False
                            ).repeat.nunique()
    if (repeats > 1).any():
        out.append(("note", f"repeated cells: up to {int(repeats.max())} repeats per point; "
                            "points average them and the spread is shown"))
    if data.telemetry.empty or (data.telemetry.metric == "unavailable").all():
        note = "GPU telemetry unavailable (no NVML on the node)"
        if len(data.telemetry):
            note += f": {data.telemetry.note.dropna().iloc[0]}"
        out.append(("note", note))
    return out


def _recorded(frame: pd.DataFrame, column: str) -> bool:
    """The column exists and holds at least one value (cells of workloads without a drafter
    check leave it null)."""
    return column in frame and bool(frame[column].notna().any())


def off_distribution(data: RunData) -> str | None:
    """Cells whose prompts were not all on the drafter's training distribution (when the
    workload recorded `alignment_ok` per request)."""
    cells = data.cells
    if _ALIGNMENT in cells and len(cells):
        off_cells = cells[(cells.status == "done") & (cells[_ALIGNMENT] == False)]  # noqa: E712
        if len(off_cells):
            return (f"off-distribution workload (not matching the drafter's training data) in "
                    f"{len(off_cells)} cell(s): acceptance there measures the mismatch, not "
                    f"the method")
    if not _recorded(data.requests, _ALIGNMENT):
        return None
    req = data.requests[data.requests.status == "ok"]
    share = req.groupby("cell_id")[_ALIGNMENT].apply(lambda s: float((s == False).mean()))  # noqa: E712
    bad = share[share > 0]
    if bad.empty:
        return None
    return (f"off-distribution prompts (not matching the drafter's training data) in "
            f"{len(bad)} cell(s), up to {100 * bad.max():.0f} % of their requests: acceptance "
            f"there measures the mismatch, not the method")


def _load(row: object) -> str:
    rate = getattr(row, "rate", None)
    if rate is None or pd.isna(rate):
        return f"c={int(getattr(row, 'concurrency', 0) or 0)}"
    return f"{rate:g}/s"


def provenance(data: RunData) -> dict:
    """Versions, server command lines and environments per variant, hardware."""
    cells = data.cells
    servers = []
    if len(cells):
        for _, group in cells.groupby("server_key", sort=False):
            row = group.iloc[0]
            servers.append({"variant": str(row.variant), "engine": row.engine,
                            "engine_version": row.engine_version, "model": row.model,
                            "command": row.server_command, "env": row.server_env,
                            "cuda_visible_devices": row.cuda_visible_devices})
    versions = {}
    for package in ("specgrid", "ray", "pandas", "pyarrow", "numpy", "matplotlib", "duckdb",
                    "prometheus-client", "nvidia-ml-py"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = "not installed"
    tel = data.telemetry
    gpus = tel[tel.gpu >= 0][["node", "gpu"]].drop_duplicates() if len(tel) else tel
    hardware = (f"{len(gpus)} GPU(s) sampled on {gpus.node.nunique()} node(s)" if len(gpus)
                else "GPUs not sampled (NVML unavailable)")
    return {"run": data.run_dir.name, "servers": servers, "versions": versions,
            "report_host": f"{platform.node()} ({platform.platform()}, Python "
                           f"{platform.python_version()})",
            "hardware": hardware}
