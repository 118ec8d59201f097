"""A run's measured cells (engines/twin_data.py ``MeasuredCell``, plain values the driver reads from
the run folder) as the twin's model sees them: a ``Scenario`` per cell, its measured figures,
and what the server itself reported about its limits."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engines.sim.twin.analytic import Scenario, sim_shares
from engines.twin_data import MeasuredCell

METRICS = ("output_tok_s", "ttft_p50_s", "tpot_p50_s", "accept_length")
"""The figures a twin is fitted to and judged on (accept length: decode tokens per verify
step, speculative cells only)."""


@dataclass(frozen=True)
class Observed:
    """One cell: its scenario, its measured figures and where they came from."""

    cell: MeasuredCell
    scenario: Scenario
    measured: Mapping[str, float]
    """Metric -> measured value (only those the cell has)."""
    per_position: tuple[float, ...] | None
    """Measured share of verify steps accepting each draft position (None: not counted)."""

    @property
    def load(self) -> int:
        return self.cell.concurrency

    @property
    def speculative(self) -> bool:
        return self.scenario.spec is not None

    @property
    def tp_size(self) -> int:
        """The server's tensor-parallel size (its --tp-size flag, SGLang's and vLLM's names)."""
        flags = server_flags(self.cell.server_command)
        for name in ("--tp-size", "--tp", "--tensor-parallel-size"):
            if _int(flags.get(name)):
                return int(flags[name])
        return 1


def server_flags(command: str) -> dict[str, str]:
    """A recorded server command's ``--flag value`` pairs (a flag without a value: "")."""
    try:
        argv = shlex.split(command or "")
    except ValueError:
        argv = (command or "").split()
    out: dict[str, str] = {}
    for i, arg in enumerate(argv):
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            nxt = argv[i + 1] if i + 1 < len(argv) else ""
            out[name] = value if eq else ("" if nxt.startswith("--") else nxt)
    return out


def _info(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int | None:
    try:
        return int(value) if value not in (None, "") else None
    except (TypeError, ValueError):
        return None


def speculative_shape(command: str, info: Mapping[str, Any]) -> tuple[int, int, int] | None:
    """(num_steps, eagle_topk, num_draft_tokens) of the server: its /server_info's resolved
    args (SGLang, the simulator), else its flags (SGLang's names, or vLLM's
    --speculative-config); None without speculation. A topk-1 chain verifies steps + 1."""
    flags = server_flags(command)
    algo = info.get("speculative_algorithm") or flags.get("--speculative-algorithm")
    if algo:
        steps = _int(info.get("speculative_num_steps")) or _int(
            flags.get("--speculative-num-steps"))
        topk = _int(info.get("speculative_eagle_topk")) or _int(
            flags.get("--speculative-eagle-topk")) or 1
        draft = _int(info.get("speculative_num_draft_tokens")) or _int(
            flags.get("--speculative-num-draft-tokens"))
        if steps is None:
            raise ValueError(f"speculative server without a step count: {command!r}")
        return steps, topk, (steps + 1 if topk == 1 or draft is None else draft)
    config = flags.get("--speculative-config")
    if config:
        try:
            spec = json.loads(config)
        except ValueError:
            raise ValueError(f"--speculative-config is not JSON: {config!r}") from None
        steps = _int(spec.get("num_speculative_tokens"))
        if steps:
            return steps, 1, steps + 1
    return None


def check_timed(flags: Mapping[str, str]) -> None:
    """ValueError for cells of a simulator at `--sim-time-scale` 0 (no step cost: their figures
    carry no timing to fit). At any other scale the load generator has reported the figures
    on the simulator's modelled clock already (actors/loadgen/timeline.py `Clock`): a twin
    models the node at scale 1 and reads them as they are."""
    text = flags.get("--sim-time-scale")
    try:
        scale = float(text) if text not in (None, "") else 1.0
    except ValueError:
        raise ValueError(f"--sim-time-scale is not a number: {text!r}") from None
    if not scale > 0:
        raise ValueError(f"cells of a simulator run at time_scale {text}: no modelled step "
                         "cost to fit a twin to (measure with time_scale > 0)")


def observe(cell: MeasuredCell) -> Observed:
    """The model's view of one measured cell, its durations at the simulator's time scale 1."""
    info = _info(cell.server_info)
    flags = server_flags(cell.server_command)
    spec = speculative_shape(cell.server_command, info)
    cap = _int(info.get("max_running_requests")) or _int(
        flags.get("--max-running-requests")) or _int(flags.get("--max-num-seqs"))
    pool = _int(info.get("max_total_num_tokens"))
    mean_out, fewest, most = cell.output_tokens
    scenario = Scenario(
        concurrency=int(cell.concurrency), prompt_tokens=float(cell.prompt_tokens[0]),
        output_tokens=float(mean_out), spec=spec, max_running=cap, kv_pool=pool,
        domains=sim_shares(cell.domains), temperature=float(cell.temperature),
        requests_per_stream=max(1.0, cell.num_requests / max(1, cell.concurrency)),
        varied_output=most - fewest > 0.05 * mean_out,
        known_reach=cell.known_acceptance if spec is not None else None)
    check_timed(flags)
    measured = {m: float(v) for m, v in (("output_tok_s", cell.output_tok_s),
                                         ("ttft_p50_s", cell.ttft_p50_s),
                                         ("tpot_p50_s", cell.tpot_p50_s)) if v and v > 0}
    if spec is not None and cell.known_acceptance is None:  # known: nothing to fit there
        decode = cell.accept_length_decode
        if decode is None and cell.accept_length and mean_out > 1:
            # per request: completion / verify steps, the first token from prefill
            decode = cell.accept_length * (mean_out - 1) / mean_out
        if decode and decode >= 1:
            measured["accept_length"] = float(decode)
    per_position = tuple(float(v) for v in cell.acceptance_per_position) \
        if spec is not None and cell.acceptance_per_position \
        and cell.known_acceptance is None else None
    return Observed(cell, scenario, measured, per_position)


def envelope(observed: Sequence[Observed], run_id: str, hardware: str, model: str,
             algorithms: Sequence[str] = ("EAGLE3",)) -> dict[str, Any]:
    """The twin's envelope, in the simulator's Envelope format (engines/sim/profile.py): the
    loads, prompt and output lengths, speculative algorithms and shapes and domain labels it
    was fitted on."""
    cells = [o.cell for o in observed]
    shapes = sorted({o.scenario.spec for o in observed if o.scenario.spec is not None})
    labels = sorted({d for o in observed if o.speculative for d in o.cell.domains})
    return {
        "anchor": f"twin of {run_id}", "hardware": hardware, "model": model,
        "concurrency": [min(c.concurrency for c in cells), max(c.concurrency for c in cells)],
        "prompt_tokens": [max(1, min(c.prompt_tokens[1] for c in cells)),
                          max(1, max(c.prompt_tokens[2] for c in cells))],
        "output_tokens": [max(1, min(c.output_tokens[1] for c in cells)),
                          max(1, max(c.output_tokens[2] for c in cells))],
        "domain": "the run's", "workload_domains": labels or ["general"],
        "speculative": [list(s) for s in shapes], "algorithms": list(algorithms),
        "baseline": any(not o.speculative for o in observed),
        "note": f"The loads, prompt and output lengths, EAGLE-3 shapes and prompt domains of "
                f"the {len(cells)} cells of run {run_id} the twin was fitted on "
                "(docs/twin.md); outside them its numbers are extrapolation.",
    }
