"""What a twin is fitted from (`MeasuredCell`, one committed cell of a run), as plain values:
the driver reads them out of a run folder, the engine that models servers fits them
(engines/modelling.py, docs/twin.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class MeasuredCell:
    """One committed closed-loop cell of a run, as plain values, for fitting a twin
    (`Modeller.fit_twin`): what the run's cells and requests tables hold about it."""

    cell_id: str
    variant: str
    workload: str
    engine: str
    """The engine that measured it (`sim`, `sglang`, `vllm`, `external`)."""
    engine_version: str | None
    model: str
    """The model config's name (`model.name`)."""
    concurrency: int
    num_requests: int
    temperature: float
    server_command: str
    """The server's command line as recorded (its flags say the speculative shape and cap)."""
    server_info: str | None
    """The server's /server_info JSON as recorded (its resolved caps and KV pool)."""
    output_tok_s: float | None
    ttft_p50_s: float | None
    tpot_p50_s: float | None
    accept_length: float | None
    """Per-request accept length (completion tokens / verify steps)."""
    accept_length_decode: float | None
    """Decode tokens per verify step from the server's counters."""
    acceptance_per_position: tuple[float, ...] | None
    """Share of verify steps whose i-th draft token was accepted (engines that count it)."""
    prompt_tokens: tuple[float, int, int]
    """Server-counted prompt tokens of its ok requests: (mean, shortest, longest)."""
    output_tokens: tuple[float, int, int]
    """Output tokens of its ok requests: (mean, fewest, most)."""
    domains: Mapping[str, float]
    """Share of its ok requests per prompt-domain label (empty: the requests carry none)."""
    known_acceptance: tuple[float, ...] | None = None
    """The cell's acceptance taken as known, not modelled (a twin of the system alone,
    `python -m grid.twin --known-acceptance`): per draft position, the share of verify steps
    that accepted it (unconditional, non-increasing): the forced rates of a forced cell, or
    the engine's own per-position counts. None: the twin models the drafter's acceptance."""
    repeat: int = 0
    """The cell's repeat index (`load.repeat`): cells equal but for it measure the same thing
    twice, and their difference is the spread a twin cannot beat."""

