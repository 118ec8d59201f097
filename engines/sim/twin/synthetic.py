"""Cells with known factors: what a run would hold if the server were exactly the simulator's
closed-form model of one profile, with seeded measurement noise. The twin's recovery test and
its benchmark fit to these and compare the fitted factors with the generating ones."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import replace

from engines.sim.twin.analytic import Setup, predict
from engines.sim.twin.cells import observe
from engines.twin_data import MeasuredCell

EAGLE3 = (3, 1, 4)
"""The shipped eagle3 variant's shape (conf/variant/eagle3.yaml)."""


def server_info(spec: tuple[int, int, int] | None, cap: int | None) -> str:
    """The /server_info fields the twin reads (SGLang's resolved args)."""
    info: dict[str, object] = {"max_running_requests": cap}
    if spec is not None:
        info.update(speculative_algorithm="EAGLE3", speculative_num_steps=spec[0],
                    speculative_eagle_topk=spec[1], speculative_num_draft_tokens=spec[2])
    return json.dumps(info)


def cells(truth: Setup, loads: Sequence[int],
          variants: Mapping[str, tuple[int, int, int] | None] | None = None, *,
          prompt_tokens: int = 128, output_tokens: int = 256, domain: str = "coding",
          requests_per_stream: int = 4, cap: int | None = 256, noise: float = 0.02,
          seed: int = 0, per_position: bool = False) -> list[MeasuredCell]:
    """One cell per variant x load, measured as ``truth`` predicts times a lognormal error
    of ``noise`` (seeded), accept length and per-position shares included (``per_position``:
    as an engine that counts positions reports them)."""
    rng = random.Random(seed)
    variants = {"baseline": None, "eagle3": EAGLE3} if variants is None else variants
    out = []
    for name, spec in variants.items():
        for c in loads:
            cell = MeasuredCell(
                cell_id=f"{name}-c{c}", variant=name, workload=domain, engine="sim",
                engine_version=None, model="llama3.1-8b",
                concurrency=c, num_requests=requests_per_stream * c, temperature=0.0,
                server_command="python -m engines.sim", server_info=server_info(spec, cap),
                output_tok_s=None, ttft_p50_s=None, tpot_p50_s=None, accept_length=None,
                accept_length_decode=None, acceptance_per_position=None,
                prompt_tokens=(float(prompt_tokens), prompt_tokens, prompt_tokens),
                output_tokens=(float(output_tokens), output_tokens, output_tokens),
                domains={domain: 1.0})
            pred = predict(truth, observe(cell).scenario)

            def noisy(v: float) -> float:
                return v * float(random.Random(rng.random()).lognormvariate(0.0, noise))

            out.append(replace(
                cell, output_tok_s=noisy(pred.output_tok_s), ttft_p50_s=noisy(pred.ttft_p50_s),
                tpot_p50_s=noisy(pred.tpot_p50_s),
                accept_length_decode=noisy(pred.accept_length) if pred.accept_length else None,
                acceptance_per_position=tuple(noisy(v) for v in pred.acceptance_per_position)
                if per_position and pred.acceptance_per_position else None))
    return out
