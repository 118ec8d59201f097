"""Fit and check a profile's calibration offline: ``python -m engines.sim.calibrate [--write]``.

The same ``SimEngine`` and ``BatchCore`` the server runs are driven without a clock: each
scenario's requests are submitted, steps are planned and committed, and step durations are
summed. With every request arriving at t=0 (or one after another) the schedule does not depend
on the durations, so the total time is *linear* in the step-cost constants: the fit evaluates
the scenarios at three parameter points and solves a 2x2 system, first for the baseline
(``decode_base_ms``, ``decode_per_token_ms``), then for EAGLE-3 (``spec_overhead_base_ms``,
``verify_token_cost_ratio``). Expected values average ``reps`` seeds.

The scenario definitions live in the profile (``calibration.scenario``) and are documented in
engines/sim/profile.py; tests/engines/sim/test_calibration.py measures the same scenarios over
HTTP with a wall clock.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from engines.sim.cli import resolve
from engines.sim.engine import SimEngine
from engines.sim.profile import Profile, load_profile

_CODE_WORDS = (
    "def parse(self, value): return a dict of each key and index; implement the cache class "
    "with a list and a loop; check the test for the error and the type of the buffer; "
).split()


def coding_prompt(i: int, chars: int = 512) -> str:
    """A distinct coding prompt of exactly ``chars`` characters (``chars / 4`` prompt tokens)."""
    text = f"Write a Python function solve_{i}(data) and a pytest unit test for it."
    j = i
    while len(text) < chars:
        text += " " + _CODE_WORDS[j % len(_CODE_WORDS)]
        j += 7
    return text[:chars]


def baseline_argv(scenario: Mapping[str, Any]) -> list[str]:
    return []


def eagle3_argv(scenario: Mapping[str, Any]) -> list[str]:
    e = scenario["eagle3"]
    return ["--speculative-algorithm", "EAGLE3",
            "--speculative-num-steps", str(e["speculative_num_steps"]),
            "--speculative-eagle-topk", str(e["speculative_eagle_topk"]),
            "--speculative-num-draft-tokens", str(e["speculative_num_draft_tokens"])]


def make_engine(profile: Profile, argv: Sequence[str], seed: int = 0) -> SimEngine:
    cfg = resolve([*argv, "--sim-seed", str(seed)], env={})
    cfg.profile = profile
    return SimEngine(cfg)


def offline_seconds(engine: SimEngine, prompts: Sequence[str], output_tokens: int,
                    concurrent: bool) -> float:
    """Modelled seconds to serve ``prompts``: all at t=0 (concurrent) or one after another."""
    core = engine.core
    total = 0.0

    def new(i: int, text: str) -> Any:
        return engine.new_request(prompt_text=text, prompt_tokens=len(text) // 4,
                                  max_new_tokens=output_tokens, ignore_eos=True,
                                  temperature=0.0, rid=f"cal-{i}")

    def drain() -> float:
        t = 0.0
        while (step := core.plan()) is not None:
            t += step.duration_s
            core.commit(step, 0.0)
        return t

    if concurrent:
        for i, p in enumerate(prompts):
            core.submit(new(i, p))
        total = drain()
    else:
        for i, p in enumerate(prompts):
            core.submit(new(i, p))
            total += drain()
    return total


def scenario_tok_s(profile: Profile, reps: int = 8) -> dict[str, float]:
    """Expected tok/s of the four calibration scenarios under ``profile``."""
    sc = profile.data["calibration"]["scenario"]
    out_tok = int(sc["output_tokens"])
    chars = int(sc["prompt_tokens"]) * 4
    single = [coding_prompt(i, chars) for i in range(int(sc["single_stream_requests"]))]
    sat = [coding_prompt(i, chars) for i in range(int(sc["saturated_streams"]))]
    result: dict[str, float] = {}
    for name, argv in (("baseline", baseline_argv(sc)), ("eagle3", eagle3_argv(sc))):
        for kind, prompts, conc in (("single", single, False), ("saturated", sat, True)):
            secs = [offline_seconds(make_engine(profile, argv, seed), prompts, out_tok, conc)
                    for seed in range(reps)]
            result[f"{name}_{kind}"] = len(prompts) * out_tok / (sum(secs) / len(secs))
    return result


def _with_costs(profile: Profile, **costs: float) -> Profile:
    data = copy.deepcopy(dict(profile.data))
    data["step_costs"].update(costs)
    return replace(profile, data=data)


def _solve2(a: Sequence[Sequence[float]], b: Sequence[float]) -> tuple[float, float]:
    det = a[0][0] * a[1][1] - a[0][1] * a[1][0]
    return ((b[0] * a[1][1] - a[0][1] * b[1]) / det, (a[0][0] * b[1] - b[0] * a[1][0]) / det)


def fit(profile: Profile, reps: int = 8) -> Profile:
    """A copy of ``profile`` with the four fitted constants solved for the targets."""
    sc = profile.data["calibration"]["scenario"]
    targets = profile.data["calibration"]["targets_tok_s"]
    out_tok = int(sc["output_tokens"])
    chars = int(sc["prompt_tokens"]) * 4
    n_single, n_sat = int(sc["single_stream_requests"]), int(sc["saturated_streams"])
    single = [coding_prompt(i, chars) for i in range(n_single)]
    sat = [coding_prompt(i, chars) for i in range(n_sat)]

    def times(p: Profile, argv: list[str]) -> tuple[float, float]:
        t1 = sum(offline_seconds(make_engine(p, argv, s), single, out_tok, False)
                 for s in range(reps)) / reps
        t2 = sum(offline_seconds(make_engine(p, argv, s), sat, out_tok, True)
                 for s in range(reps)) / reps
        return t1, t2

    def linear_fit(p: Profile, argv: list[str], names: tuple[str, str],
                   keys: tuple[str, str]) -> Profile:
        base = times(p, argv)
        c = p.data["step_costs"]
        d0 = times(_with_costs(p, **{names[0]: c[names[0]] + 1.0}), argv)
        d1 = times(_with_costs(p, **{names[1]: c[names[1]] + 1.0}), argv)
        want = (n_single * out_tok / targets[keys[0]], n_sat * out_tok / targets[keys[1]])
        a = [[d0[i] - base[i], d1[i] - base[i]] for i in range(2)]
        rhs = [want[i] - base[i] for i in range(2)]
        x0, x1 = _solve2(a, rhs)
        return _with_costs(p, **{names[0]: round(c[names[0]] + x0, 4),
                                 names[1]: round(c[names[1]] + x1, 5)})

    p = linear_fit(profile, baseline_argv(sc), ("decode_base_ms", "decode_per_token_ms"),
                   ("baseline_single", "baseline_saturated"))
    return linear_fit(p, eagle3_argv(sc), ("spec_overhead_base_ms", "verify_token_cost_ratio"),
                      ("eagle3_single", "eagle3_saturated"))


def report(profile: Profile, reps: int = 8) -> str:
    targets = profile.data["calibration"]["targets_tok_s"]
    got = scenario_tok_s(profile, reps)
    lines = [f"profile {profile.name} ({profile.path}) -- offline model, {reps} seeds",
             f"{'scenario':<22}{'target tok/s':>14}{'model tok/s':>14}{'error':>9}"]
    for k, v in got.items():
        t = float(targets[k])
        lines.append(f"{k:<22}{t:>14.1f}{v:>14.1f}{(v - t) / t:>+9.2%}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m engines.sim.calibrate")
    ap.add_argument("--profile", default="default")
    ap.add_argument("--reps", type=int, default=8)
    ap.add_argument("--write", action="store_true", help="store the fitted constants")
    ns = ap.parse_args(argv)
    prof = load_profile(ns.profile)
    print(report(prof, ns.reps))
    fitted = fit(prof, ns.reps)
    names = fitted.data["calibration"]["fitted"]
    print("fitted:", {k: fitted.data["step_costs"][k] for k in names})
    print(report(fitted, ns.reps))
    if ns.write:
        data = json.loads(prof.path.read_text())
        for k in names:
            data["step_costs"][k] = fitted.data["step_costs"][k]
        text = prof.path.read_text()
        for k in names:  # keep the file's hand formatting: replace the numbers in place
            text = re.sub(rf'("{k}":\s*)[-0-9.eE]+', rf"\g<1>{data['step_costs'][k]}", text)
        prof.path.write_text(text)
        print(f"wrote {prof.path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
