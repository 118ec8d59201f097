"""A rough duration of each cell, from the simulator's performance model of the cell's server (a
real engine's cells are estimated as its SGLang equivalent on the same profile). Pure."""

from __future__ import annotations

import functools
import math
from typing import Any

from grid.plan.cells import Cell
from grid.plan.conversations import ConversationWork

RUN_OVERHEAD_S = 15.0
"""Starting (or joining) Ray and the first actors, measured on the development machine."""
CELL_OVERHEAD_S = 1.5
"""Per cell: cache flush, metric and telemetry start/stop, committing Parquet."""
PROMPT_TOKENS = 200
"""Typical prompt length of the shipped workloads (tokens), for the prefill share."""


@functools.lru_cache(maxsize=8)
def _profile(name: str, hardware: str | None, model: str | None) -> Any:
    from engines.sim.profile import load_profile

    return load_profile(name, hardware, model)


def _perf(cell: Cell) -> tuple[Any, Any]:
    """(profile, performance model) the estimate uses for this cell's engine: the simulator's
    roofline for the cell's hardware, model, parallelism, environment and flags."""
    from engines.sim.model import PerfModel

    sim_args = cell.config["engine"].get("sim_args") or {}
    profile = _profile(str(sim_args.get("profile") or "default"), sim_args.get("hardware"),
                       sim_args.get("model"))
    variant = cell.config["variant"]
    roofline, _ = profile.roofline(cell.tp_size, dict(variant["env"]), dict(variant["args"]))
    return profile, PerfModel(roofline)


def _token_seconds(cell: Cell, batch: int) -> float:
    """Modelled seconds per output token of one stream at this running batch, from the
    simulator's performance profile (the default profile is calibrated to a published 8-GPU
    measurement, so it also sizes real SGLang runs roughly): a decode step for plain
    decoding; a speculative step divided by the expected accept length with EAGLE, a
    no-drafting step above a speculation-disable threshold."""
    from engines.sim.model import acceptance_probs, expected_accept_length

    config = cell.config
    profile, model = _perf(cell)
    args = config["variant"]["args"]
    if not args.get("speculative_algorithm"):
        return model.decode_s(batch)
    steps = int(args.get("speculative_num_steps") or 3)
    draft = int(args.get("speculative_num_draft_tokens") or steps + 1)
    off_above = config["variant"].get("speculative_disable_above_batch")
    if off_above is not None and batch > int(off_above):
        return model.spec_step_s(batch, 0, draft)
    domain = (config["workload"].get("domains") or ["coding"])[0]
    accept = expected_accept_length(acceptance_probs(profile.acceptance, domain), steps)
    return model.spec_step_s(batch, steps, draft) / accept


def _time_scale(config: dict[str, Any]) -> float:
    scale = (config["engine"].get("sim_args") or {}).get("time_scale")
    return 1.0 if scale is None or config["engine"]["name"] != "sim" else float(scale)


def estimate_cell_seconds(cell: Cell, work: ConversationWork | None = None) -> float:
    """One cell's wall time: its requests (warmup included) in waves of `concurrency`
    streams (open loop: at the arrival rate), each wave a prefill plus max_new_tokens steps
    at that batch, plus the per-cell overhead. A conversation cell (`work`, from its planned
    specs) is sized by its rounds instead (see _conversation_seconds)."""
    if work is not None:
        return _conversation_seconds(cell, work) + CELL_OVERHEAD_S
    config = cell.config
    load, tokens = config["load"], int(config["workload"]["max_new_tokens"])
    cap = config["variant"]["args"].get("max_running_requests") or 1024
    scale = _time_scale(config)
    warmup = int(load["warmup_requests"])
    if cell.rate is not None:
        # Open loop: the arrival period, plus one request's life at the batch it settles at.
        period = cell.num_requests / cell.rate
        batch = max(1, min(cap, int(round(cell.rate * tokens * _token_seconds(cell, 1)))))
        life = tokens * _token_seconds(cell, batch)
        return (period + life) * scale + CELL_OVERHEAD_S
    streams = max(1, min(int(cell.concurrency or 1), cap))
    _, model = _perf(cell)
    waves = math.ceil(cell.num_requests / streams)
    wave_s = tokens * _token_seconds(cell, streams) + model.prefill_s(streams * PROMPT_TOKENS)
    warm_batch = max(1, min(warmup, streams))
    warm_s = math.ceil(warmup / warm_batch) * (tokens * _token_seconds(cell, warm_batch)) \
        if warmup else 0.0
    return (waves * wave_s + warm_s) * scale + CELL_OVERHEAD_S


def _conversation_seconds(cell: Cell, work: ConversationWork) -> float:
    """Wall seconds of a conversation cell's load: its rounds in waves of the conversations
    in flight, each round a prefill of only its new context (the rest of the history is in the
    prefix cache) plus its output tokens at that batch (modelled time, x the simulator's
    time_scale), and the think time spread over the streams. Open loop: the last
    conversation's start plus one conversation's life at batch 1. Arrivals and think times
    are the client's wall clock: never scaled."""
    if not work.rounds:
        return 0.0
    _, model = _perf(cell)
    scale = _time_scale(cell.config)
    out, new = work.output_tokens / work.rounds, work.new_tokens / work.rounds
    if work.open_loop:
        per_conv = work.rounds / max(1, work.conversations)
        life = per_conv * (out * _token_seconds(cell, 1) + model.prefill_s(max(1, round(new))))
        return work.last_arrival_s + life * scale + work.think_s / max(1, work.conversations)
    cap = cell.config["variant"]["args"].get("max_running_requests") or 1024
    streams = max(1, min(int(cell.concurrency or 1), cap, work.conversations))
    waves = math.ceil(work.rounds / streams)
    wave_s = out * _token_seconds(cell, streams) + model.prefill_s(max(1, round(streams * new)))
    return waves * wave_s * scale + work.think_s / streams
