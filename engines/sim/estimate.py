"""How long a cell's load takes on the simulator, from its own performance model (model.py) of
the cell's server: the profile, hardware and model of `engine.options`, the variant's
parallelism, environment and flags, `time_scale` applied. Pure; the plan adds its per-cell
overhead (grid/plan/estimate.py)."""

from __future__ import annotations

import functools
import math
from typing import Any

from engines.forced import forced_acceptance
from engines.planning import CellWork, ConversationWork
from engines.sim.model import PerfModel, acceptance_probs, expected_accept_length
from engines.sim.profile import load_profile

PROMPT_TOKENS = 200
"""Typical prompt length of the shipped workloads (tokens), for the prefill share."""


@functools.lru_cache(maxsize=8)
def _profile(name: str, hardware: str | None, model: str | None) -> Any:
    return load_profile(name, hardware, model)


def _perf(work: CellWork) -> tuple[Any, PerfModel]:
    """(profile, performance model) of this cell's server: the simulator's roofline for the
    cell's hardware, model, parallelism, environment and flags."""
    options = work.config["engine"].get("options") or {}
    profile = _profile(str(options.get("profile") or "default"), options.get("hardware"),
                       options.get("model"))
    variant = work.config["variant"]
    roofline, _ = profile.roofline(work.tp_size, dict(variant["env"]), dict(variant["args"]))
    return profile, PerfModel(roofline)


def _token_seconds(work: CellWork, batch: int) -> float:
    """Modelled seconds per output token of one stream at this running batch: a decode step
    for plain decoding; a speculative step divided by the expected accept length with EAGLE
    (the forced mean length where the variant forces acceptance, engines/forced.py), a
    no-drafting step above a speculation-disable threshold."""
    config = work.config
    profile, model = _perf(work)
    args = config["variant"]["args"]
    if not args.get("speculative_algorithm"):
        return model.decode_s(batch)
    steps = int(args.get("speculative_num_steps") or 3)
    draft = int(args.get("speculative_num_draft_tokens") or steps + 1)
    off_above = config["variant"].get("speculative_disable_above_batch")
    if off_above is not None and batch > int(off_above):
        return model.spec_step_s(batch, 0, draft)
    forced = forced_acceptance(config["variant"].get("forced_acceptance"), args)
    domain = (config["workload"].get("domains") or ["coding"])[0]
    accept = forced.mean_length if forced is not None else expected_accept_length(
        acceptance_probs(profile.acceptance, domain), steps)
    return model.spec_step_s(batch, steps, draft) / accept


def _time_scale(config: Any) -> float:
    scale = (config["engine"].get("options") or {}).get("time_scale")
    return 1.0 if scale is None else float(scale)


def load_seconds(work: CellWork) -> float:
    """One cell's load: its requests (warmup included) in waves of `concurrency` streams
    (open loop: at the arrival rate), each wave a prefill plus max_new_tokens steps at that
    batch. A conversation cell is sized by its rounds instead (see _conversation_seconds)."""
    if work.conversation is not None:
        return _conversation_seconds(work, work.conversation)
    config = work.config
    load, tokens = config["load"], int(config["workload"]["max_new_tokens"])
    cap = config["variant"]["args"].get("max_running_requests") or 1024
    scale = _time_scale(config)
    warmup = int(load["warmup_requests"])
    if work.rate is not None:
        # Open loop: the arrival period, plus one request's life at the batch it settles at.
        period = work.num_requests / work.rate
        batch = max(1, min(cap, int(round(work.rate * tokens * _token_seconds(work, 1)))))
        life = tokens * _token_seconds(work, batch)
        return (period + life) * scale
    streams = max(1, min(int(work.concurrency or 1), cap))
    _, model = _perf(work)
    waves = math.ceil(work.num_requests / streams)
    wave_s = tokens * _token_seconds(work, streams) + model.prefill_s(streams * PROMPT_TOKENS)
    warm_batch = max(1, min(warmup, streams))
    warm_s = math.ceil(warmup / warm_batch) * (tokens * _token_seconds(work, warm_batch)) \
        if warmup else 0.0
    return (waves * wave_s + warm_s) * scale


def _conversation_seconds(work: CellWork, conv: ConversationWork) -> float:
    """Wall seconds of a conversation cell's load: its rounds in waves of the conversations
    in flight, each round a prefill of only its new context (the rest of the history is in the
    prefix cache) plus its output tokens at that batch (modelled time, x the simulator's
    time_scale), and the think time spread over the streams. Open loop: the last
    conversation's start plus one conversation's life at batch 1. Arrivals and think times
    are the client's wall clock: never scaled."""
    if not conv.rounds:
        return 0.0
    _, model = _perf(work)
    scale = _time_scale(work.config)
    out, new = conv.output_tokens / conv.rounds, conv.new_tokens / conv.rounds
    if conv.open_loop:
        per_conv = conv.rounds / max(1, conv.conversations)
        life = per_conv * (out * _token_seconds(work, 1) + model.prefill_s(max(1, round(new))))
        return conv.last_arrival_s + life * scale + conv.think_s / max(1, conv.conversations)
    cap = work.config["variant"]["args"].get("max_running_requests") or 1024
    streams = max(1, min(int(work.concurrency or 1), cap, conv.conversations))
    waves = math.ceil(conv.rounds / streams)
    wave_s = out * _token_seconds(work, streams) + model.prefill_s(max(1, round(streams * new)))
    return waves * wave_s * scale + conv.think_s / streams
