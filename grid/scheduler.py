"""The driver loop: for each server group, reserve its GPUs (a STRICT_PACK placement group on one
node), start its ServerActor and LoadGenActors there, run its cells one after another, commit each
cell's Parquet and mark it done; the server is stopped in a `finally`. Only the driver writes."""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import ray
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from actors.loadgen.actor import START_MARGIN_S, LoadGenActor
from actors.loadgen.cellstats import cell_columns, merge_client_stats
from actors.loadgen.spec import LoadSpec, Prompt
from engines.launch import LaunchSpec
from engines.sglang.command import redact_argv
from grid.cells import Cell, ServerGroup, group_by_server
from grid.ledger import Ledger
from grid.metrics import summarize_cell
from grid.provenance import recorded_env, redact_info
from grid.results import write_cell
from grid.serverhandle import (
    PG_CPU,
    ServerDown,
    ServerHandle,
    server_death,
    start_server,
    stop_server,
)


class Interrupted(BaseException):
    """The driver got SIGINT/SIGTERM."""


@dataclass
class RunContext:
    run_id: str
    run_dir: Path
    ledger: Ledger
    prompts: dict[str, tuple[Prompt, ...]]
    """Workload name -> prompts."""
    launches: dict[str, LaunchSpec | None]
    """Server key -> what to launch (None: external), as the plan built and validated it."""
    max_error_rate: float
    metrics_interval_s: float | None
    total_cells: int
    echo: Callable[[str], None] = print


def run_groups(ctx: RunContext, cells: Sequence[Cell]) -> None:
    """Run `cells` (the ones still to do), grouped by server, in grid order."""
    done = 0
    for group in group_by_server(cells):
        done = _run_group(ctx, group, done)


def _run_group(ctx: RunContext, group: ServerGroup, done: int) -> int:
    config = group.config
    spec = ctx.launches[group.server_key]  # built (and validated) by the plan
    clients = int(config["load"]["clients"])
    bundles = ([{"GPU": group.tp_size, "CPU": PG_CPU}] if spec else [])
    bundles += [{"CPU": PG_CPU}] * clients
    pg = placement_group(bundles, strategy="STRICT_PACK")
    server: ServerHandle | None = None
    loadgens: list[Any] = []
    try:
        start_failure: ServerDown | None = None
        if pg.wait(timeout_seconds=60):
            first = 1 if spec else 0
            loadgens = [LoadGenActor.options(
                num_cpus=PG_CPU, scheduling_strategy=PlacementGroupSchedulingStrategy(
                    pg, placement_group_bundle_index=first + i)).remote() for i in range(clients)]
        else:
            start_failure = ServerDown(
                f"cannot place {group.variant}: {group.tp_size} GPU(s) plus {clients} client(s)"
                " do not fit on one node of the Ray cluster")
        for cell in group.cells:
            done += 1
            prefix = f"[{done}/{ctx.total_cells}] {_cell_name(cell)}"
            attempt = ctx.ledger.start_attempt(cell.cell_id)
            try:
                if start_failure is not None:
                    # One start failure fails the group: a model load can take half an hour.
                    raise ServerDown(f"server did not start: {start_failure}",
                                     start_failure.log_tail)
                if server is None:
                    try:
                        server = start_server(group, spec, pg, ctx.run_dir, ctx.ledger,
                                              ctx.echo, prefix)
                    except ServerDown as e:
                        start_failure = e
                        raise
                row, requests, metrics, log_tail = _run_cell(ctx, cell, attempt, server,
                                                             loadgens)
            except ServerDown as e:
                ctx.ledger.finish(cell.cell_id, "failed", str(e), e.log_tail)
                _write_failed(ctx, cell, attempt, server, str(e))
                ctx.echo(f"{prefix}: FAILED: {e}")
                if server is not None:
                    stop_server(ctx.ledger, server)
                    server = None
                continue
            except (Interrupted, KeyboardInterrupt):
                ctx.ledger.finish(cell.cell_id, "interrupted", "driver interrupted")
                raise
            write_cell(ctx.run_dir, variant=cell.variant, workload=cell.workload,
                       cell_id=cell.cell_id, attempt=attempt, requests=requests, cell_row=row,
                       server_metrics=metrics)
            ctx.ledger.finish(cell.cell_id, row["status"], row["error"], log_tail)
            ctx.echo(f"{prefix}: {_describe(row)}")
            if log_tail is not None and server is not None:
                stop_server(ctx.ledger, server)  # it died during the cell: relaunch for the next
                server = None
    finally:
        if server is not None:
            stop_server(ctx.ledger, server)
        for actor in loadgens:
            ray.kill(actor)
        remove_placement_group(pg)
    return done


def _cell_name(cell: Cell) -> str:
    load = f"c={cell.concurrency}" if cell.rate is None else f"rate={cell.rate}/s"
    if cell.rate is not None and cell.concurrency:
        load += f" c<={cell.concurrency}"
    return f"{cell.variant} {load} {cell.workload}"


def _describe(row: dict[str, Any]) -> str:
    parts = [f"{row['output_tok_s']:.1f} tok/s" if row.get("output_tok_s") is not None else "",
             _ms("TTFT p50", row.get("ttft_p50_s")), _ms("TPOT p50", row.get("tpot_p50_s"))]
    if row.get("accept_length") is not None:
        parts.append(f"accept {row['accept_length']:.2f}")
    if row.get("requests_error"):
        parts.append(f"{row['requests_error']} errors")
    if row.get("client_saturated"):
        parts.append(f"CLIENT SATURATED ({row.get('saturation_reason')})")
    text = ", ".join(p for p in parts if p)
    if row["status"] != "done":
        text += f" — {row['status'].upper()}: {row.get('error')}"
    return f"{text} ({row['duration_s']:.1f} s)" if row.get("duration_s") else text


def _ms(label: str, seconds: float | None) -> str:
    return "" if seconds is None else f"{label} {seconds * 1000:.1f} ms"


# --- servers ---------------------------------------------------------------------------------
def _run_cell(ctx: RunContext, cell: Cell, attempt: int, server: ServerHandle,
              loadgens: Sequence[Any]) -> tuple[dict, list[dict], list[dict], str | None]:
    """Run one cell's load; returns its cell row, request rows, server metric samples and,
    if the server died during the cell, its log tail (the cell is then failed, its rows kept
    for the record)."""
    started = time.time()
    server.flush_cache()
    specs = _load_specs(ctx, cell, server.url, len(loadgens))
    try:  # barrier: every client warmed up, then one shared start (actors/loadgen/actor.py)
        ray.get([actor.prepare.remote(spec) for actor, spec in zip(loadgens, specs, strict=True)])
        server.start_metrics(ctx.metrics_interval_s)
        start_at = time.time() + START_MARGIN_S
        results = ray.get([actor.run.remote(start_at) for actor in loadgens])
    except ray.exceptions.RayActorError as e:
        raise ServerDown(f"load generator died: {e}") from None
    finally:
        samples = server.stop_metrics()
    died, log_tail = server_death(server)
    rows = [row for result in results for row in result.rows]
    stats = merge_client_stats([result.stats for result in results])
    window_s = max(stats["window_end"] - stats["window_start"], 1e-9)
    summary = summarize_cell(rows, window_s, stats)
    status, error = "done", None
    if died:
        status, error = "failed", died
    elif summary["error_rate"] > ctx.max_error_rate:
        status = "failed"
        error = (f"error rate {summary['error_rate']:.0%} above run.max_error_rate "
                 f"{ctx.max_error_rate:.0%}; first error: "
                 f"{next((r['error'] for r in rows if r['status'] != 'ok'), None)}")
    row = _cell_row(ctx, cell, attempt, None if died else server, status, error, started)
    if died:
        row["server_command"] = shlex.join(redact_argv(server.info["argv"]))
    row.update(summary)
    row.update(cell_columns(rows, stats, samples, cell.config["workload"]["endpoint"]))
    row["status"], row["error"] = status, error
    metrics = [{"run_id": ctx.run_id, "cell_id": cell.cell_id, "attempt": attempt,
                "scraped_at": t, "metric": name, "labels": json.dumps(labels, sort_keys=True),
                "value": value} for t, name, labels, value in samples]
    return row, [_request_row(ctx, cell, attempt, r) for r in rows], metrics, log_tail


def _load_specs(ctx: RunContext, cell: Cell, url: str, clients: int) -> list[LoadSpec]:
    config = cell.config
    load, workload, model = config["load"], config["workload"], config["model"]
    base = LoadSpec(
        url=url,
        prompts=ctx.prompts[cell.workload],
        endpoint=workload["endpoint"],
        concurrency=load["concurrency"],
        rate=load["rate"],
        arrival=load["arrival"],
        burstiness=float(load["burstiness"]),
        num_requests=cell.num_requests,
        duration_s=load["duration_s"],
        warmup_requests=int(load["warmup_requests"]),
        max_new_tokens=int(workload["max_new_tokens"]),
        temperature=float(workload["temperature"]),
        ignore_eos=bool(workload["ignore_eos"]),
        request_timeout_s=float(load["request_timeout_s"]),
        model=model.get("served_model_name") or model["model_path"],
        api_key=config["engine"].get("api_key"),
        seed=int(load["seed"]),
        num_clients=clients,
        transport=load["transport"],
        tls_verify=bool(load["tls_verify"]),
        ca_bundle=load["ca_bundle"],
        keepalive_s=float(load["keepalive_s"]),
    )
    return [replace(base, client_index=i) for i in range(clients)]


def _cell_row(ctx: RunContext, cell: Cell, attempt: int, server: ServerHandle | None, status: str,
              error: str | None, started: float) -> dict[str, Any]:
    config = cell.config
    info = server.server_info() if server is not None else {}
    return {
        "run_id": ctx.run_id, "cell_id": cell.cell_id, "server_key": cell.server_key,
        "attempt": attempt, "status": status, "error": error,
        "engine": config["engine"]["name"], "simulated": config["engine"]["name"] == "sim",
        "model": config["model"]["name"], "concurrency": cell.concurrency, "rate": cell.rate,
        "num_requests": cell.num_requests, "factors": json.dumps(cell.factors, default=str),
        "started_at": started, "finished_at": time.time(),
        "server_command": shlex.join(redact_argv(server.info["argv"])) if server else None,
        "server_env": json.dumps(recorded_env(server.info["env"], config["variant"]["env"]))
        if server else None,
        "engine_version": str(info.get("version")) if info.get("version") else None,
        "server_info": json.dumps(redact_info(info), default=str) if info else None,
        "cuda_visible_devices": server.info.get("cuda_visible_devices") if server else None,
    }


def _request_row(ctx: RunContext, cell: Cell, attempt: int, row: dict[str, Any]) -> dict:
    out = dict(row)
    out.update(run_id=ctx.run_id, cell_id=cell.cell_id, attempt=attempt,
               engine=cell.config["engine"]["name"],
               simulated=cell.config["engine"]["name"] == "sim",
               concurrency=cell.concurrency, rate=cell.rate)
    return out


def _write_failed(ctx: RunContext, cell: Cell, attempt: int, server: ServerHandle | None,
                  error: str) -> None:
    """A failed attempt still gets its cell row (status failed, the error) for the record."""
    row = _cell_row(ctx, cell, attempt, None, "failed", error, time.time())
    if server is not None:
        row["server_command"] = shlex.join(redact_argv(server.info["argv"]))
    write_cell(ctx.run_dir, variant=cell.variant, workload=cell.workload, cell_id=cell.cell_id,
               attempt=attempt, requests=[], cell_row=row)
