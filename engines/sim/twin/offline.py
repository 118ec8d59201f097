"""A closed-loop cell on the simulator's own scheduler core, without a clock or HTTP: C streams
each send their next request the moment the previous one finishes, and the steps' modelled
durations are summed (as engines/sim/calibrate.py does for its batch scenarios). It checks the
twin's closed-form model (engines/sim/twin/analytic.py) against the discrete simulator, and
measures a twin's profile the way `engine=sim` would serve it, minus the client."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engines.sim.calibrate import coding_prompt, make_engine
from engines.sim.profile import Profile


@dataclass(frozen=True)
class Measured:
    output_tok_s: float
    ttft_p50_s: float
    tpot_p50_s: float
    accept_length: float | None
    """Decode tokens per verify step (Σ(completion - 1) / Σ verify steps), as the counters
    give it."""


def closed_loop(profile: Profile, argv: Sequence[str], concurrency: int, prompt_tokens: int,
                output_tokens: int, requests_per_stream: int = 2, seed: int = 0,
                prompt: Callable[[int, int], str] = coding_prompt) -> Measured:
    """Serve ``concurrency`` streams x ``requests_per_stream`` requests of ``prompt_tokens``
    (``prompt(i, chars)``, 4 characters a token) and ``output_tokens`` (ignore_eos,
    temperature 0) on the server ``argv`` describes (SGLang flags, as calibrate.py takes)."""
    engine = make_engine(profile, argv, seed)
    core = engine.core
    now, sent = 0.0, 0
    done = []

    def send() -> None:
        nonlocal sent
        text = prompt(sent, prompt_tokens * 4)
        req = engine.new_request(prompt_text=text, prompt_tokens=len(text) // 4,
                                 max_new_tokens=output_tokens, ignore_eos=True,
                                 temperature=0.0, rid=f"twin-{sent}")
        req.arrival = now
        core.submit(req)
        sent += 1

    for _ in range(concurrency):
        send()
    total = concurrency * requests_per_stream
    while (step := core.plan()) is not None:
        now += step.duration_s
        for req in core.commit(step, now):
            if req.done:
                done.append(req)
                if sent < total:
                    send()
    tokens = sum(r.n for r in done)
    verify = sum(r.verify_ct for r in done)
    ttft = [(r.first_token_at or 0.0) - r.arrival for r in done]
    tpot = [((r.finished_at or 0.0) - (r.first_token_at or 0.0)) / (r.n - 1) for r in done
            if r.n > 1]
    return Measured(output_tok_s=tokens / now, ttft_p50_s=statistics.median(ttft),
                    tpot_p50_s=statistics.median(tpot),
                    accept_length=(tokens - len(done)) / verify if verify else None)
