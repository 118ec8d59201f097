"""How long a cell's load takes on the simulator: the twin's closed form of a closed loop
(twin/analytic.py, the simulator's own step costs and drafter) for the cell's server (the
profile, hardware and model of `engine.options`, the variant's parallelism, environment and
flags), `time_scale` applied. Pure; the plan adds its per-cell overhead
(grid/plan/estimate.py)."""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any

from engines.planning import CellWork, ConversationWork
from engines.sim.profile import load_profile
from engines.sim.twin.analytic import Setup, cell_scenario, predict

PROMPT_TOKENS = 200
"""Typical prompt length of the shipped workloads (tokens), for the prefill share."""


@functools.lru_cache(maxsize=8)
def _profile(name: str, hardware: str | None, model: str | None) -> Any:
    return load_profile(name, hardware, model)


def _seconds(work: CellWork, streams: int, requests: float, prompt: float = PROMPT_TOKENS,
             output: float | None = None) -> float:
    """Modelled seconds of ``requests`` requests of ``prompt`` and ``output`` tokens (the
    workload's max_new_tokens) as a closed loop of ``streams`` streams on the cell's server."""
    config = work.config
    options = config["engine"].get("options") or {}
    profile = _profile(str(options.get("profile") or "default"), options.get("hardware"),
                       options.get("model"))
    variant = config["variant"]
    setup = Setup.from_profile(profile, work.tp_size, variant["env"], variant["args"])
    domain = (config["workload"].get("domains") or ["coding"])[0]
    sc = cell_scenario(config, streams, prompt, {domain: 1.0}, requests / streams)
    if output is not None:
        sc = replace(sc, output_tokens=output)
    return requests * sc.output_tokens / predict(setup, sc).output_tok_s


def _time_scale(config: Any) -> float:
    scale = (config["engine"].get("options") or {}).get("time_scale")
    return 1.0 if scale is None else float(scale)


def load_seconds(work: CellWork) -> float:
    """One cell's load: its requests (warmup included) as a closed loop of `concurrency`
    streams (open loop: the arrival period, plus one request's life at the batch the arrival
    rate settles at). A conversation cell is sized by its rounds instead (see
    _conversation_seconds)."""
    if work.conversation is not None:
        return _conversation_seconds(work, work.conversation)
    config = work.config
    scale = _time_scale(config)
    if work.rate is not None:
        batch = max(1, int(round(work.rate * _seconds(work, 1, 1))))
        return (work.num_requests / work.rate + _seconds(work, batch, batch)) * scale
    streams = max(1, int(work.concurrency or 1))
    warmup = int(config["load"]["warmup_requests"])
    warm = _seconds(work, min(warmup, streams), warmup) if warmup else 0.0
    return (_seconds(work, streams, work.num_requests) + warm) * scale


def _conversation_seconds(work: CellWork, conv: ConversationWork) -> float:
    """Wall seconds of a conversation cell's load: its rounds as a closed loop of the
    conversations in flight, each round a prefill of only its new context (the rest of the
    history is in the prefix cache) plus its output tokens (modelled time, x the simulator's
    time_scale), and the think time spread over the streams. Open loop: the last
    conversation's start plus one conversation's rounds at one stream. Arrivals and think
    times are the client's wall clock: never scaled."""
    if not conv.rounds:
        return 0.0
    scale = _time_scale(work.config)
    out, new = max(1.0, conv.output_tokens / conv.rounds), max(1.0, conv.new_tokens / conv.rounds)
    if conv.open_loop:
        per_conv = conv.rounds / max(1, conv.conversations)
        life = _seconds(work, 1, per_conv, new, out)
        return conv.last_arrival_s + life * scale + conv.think_s / max(1, conv.conversations)
    streams = max(1, min(int(work.concurrency or 1), conv.conversations))
    return _seconds(work, streams, conv.rounds, new, out) * scale + conv.think_s / streams
