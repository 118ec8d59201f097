"""Fit and check the simulator's efficiency factors offline:
``python -m engines.sim.calibrate [--anchor default|h100-llama3.1-8b] [--write]``.

The same ``SimEngine`` and ``BatchCore`` the server runs are driven without a clock
(``serve``: a closed loop whose steps are planned and committed and their durations summed;
also the interior's cells, engines/sim/interior.py, and the twin's check of its closed form,
``closed_loop``). An *anchor* is a published measurement (hardware + model, scenarios, targets)
and the efficiency factors (engines/sim/roofline.py ``Efficiency``) fitted to it by least
squares on log(model / target); the anchors, their scenarios and what they fit:
docs/simulator.md "Fitted factors" and "Anchors: published vs simulated".
tests/engines/sim/test_calibration.py measures the same scenarios over HTTP with a wall clock.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from engines.sim.cli import resolve
from engines.sim.core import SimEngine
from engines.sim.model import prompt_tokens
from engines.sim.profile import HARDWARE_DIR, MODEL_DIR, Profile, load_profile
from engines.sim.scheduler import SimRequest
from specgrid_metrics.window import steady_window, tokens_in_window
from workloads import PROMPTS_DIR
from workloads.loaders import read_prompt_file

_CODE_WORDS = (
    "def parse(self, value): return a dict of each key and index; implement the cache class "
    "with a list and a loop; check the test for the error and the type of the buffer; "
).split()
_CHAT_WORDS = (
    "please write a short friendly letter to a neighbour about the garden party next weekend "
    "and mention the music the food and the time we should meet near the old oak tree "
).split()


def _padded(text: str, words: list[str], start: int, step: int, chars: int) -> str:
    """``text`` followed by every ``step``-th word of ``words`` from ``start``, cut at ``chars``."""
    j = start
    while len(text) < chars:
        text += " " + words[j % len(words)]
        j += step
    return text[:chars]


def coding_prompt(i: int, chars: int = 512) -> str:
    """A distinct coding prompt of exactly ``chars`` characters (``chars / 4`` prompt tokens)."""
    return _padded(f"Write a Python function solve_{i}(data) and a pytest unit test for it.",
                   _CODE_WORDS, i, 7, chars)


def chat_prompt(i: int, chars: int = 512) -> str:
    """A distinct general-chat prompt (no domain keyword: MT-bench-like writing) of ``chars``
    characters."""
    return _padded(f"Note {i}:", _CHAT_WORDS, i, 5, chars)


PROMPTS = {"coding": coding_prompt, "general": chat_prompt}


def make_engine(profile: Profile, argv: Sequence[str], seed: int = 0,
                env: Mapping[str, str] | None = None) -> SimEngine:
    """A simulator engine on ``profile`` for a server line ``argv`` and its environment
    ``env`` (e.g. a forced acceptance, SGLANG_SIMULATE_ACC_LEN)."""
    cfg = resolve([*argv, "--sim-seed", str(seed)], env=dict(env or {}))
    cfg.profile = profile
    return SimEngine(cfg)


Sent = list[tuple[float, SimRequest]]
"""The requests a clockless loop served, each with the modelled time it was sent."""


def serve(engine: SimEngine, prompt: Callable[[int], str], output_tokens: int, streams: int,
          requests: int) -> tuple[Sent, float]:
    """Serve ``requests`` requests (the i-th of ``prompt(i)``, ``output_tokens`` each,
    ignore_eos, temperature 0) as a closed loop of ``streams`` streams on the engine's own
    scheduler core, without a clock: each stream sends its next request the moment its last
    ends, the profile's ``request_overhead_ms`` later at the scheduler (as the server does);
    steps are planned and committed and their modelled durations summed. (The requests sent
    with their send times, the modelled time the last step ended.) One stream: one request
    after another; as many streams as requests: all of them at once."""
    core = engine.core
    delay = engine.roofline.hw.efficiency.request_overhead_ms / 1000
    now = 0.0
    sent: Sent = []
    pending: list[tuple[float, SimRequest]] = []

    def send() -> None:
        text = prompt(len(sent))
        req = engine.new_request(prompt_text=text, prompt_tokens=prompt_tokens(text),
                                 max_new_tokens=output_tokens, ignore_eos=True,
                                 temperature=0.0, rid=f"offline-{len(sent)}")
        req.arrival = now
        sent.append((now, req))
        pending.append((now + delay, req))

    for _ in range(min(streams, requests)):
        send()
    while pending or core.has_work():
        ready = [r for at, r in pending if at <= now]
        pending[:] = [(at, r) for at, r in pending if at > now]
        for req in ready:
            core.submit(req)
        step = core.plan()
        if step is None:  # idle until the next arrival
            now = min(at for at, _ in pending)
            continue
        now += step.duration_s
        for req in core.commit(step, now):
            if req.done and len(sent) < requests:
                send()
    return sent, now


def workload_prompts(name: str) -> list[str]:
    """The texts of a shipped prompt file (workloads/prompts/NAME), in file order: the /generate
    ``text`` the grid's load generator sends for a workload with ``prompts: NAME``."""
    rows, _ = read_prompt_file(PROMPTS_DIR / name)
    return [row.text for row in rows]


def closed_loop_tok_s(engine: SimEngine, prompts: Sequence[str], output_tokens: int,
                      streams: int, requests: int, served: list[Any] | None = None) -> float:
    """Modelled output tok/s of a closed-loop cell as the report computes it: ``streams``
    streams sending ``prompts`` in order, cycling (``serve``), ``requests`` in all; tokens
    inside the steady window (from the streams-th send to the last send) over its length
    (specgrid_metrics/window.py, the report's own code). ``served``, when given, receives
    every request served (their ``n``, ``verify_ct``)."""
    reqs, _ = serve(engine, lambda i: prompts[i % len(prompts)], output_tokens, streams,
                    requests)
    if served is not None:
        served.extend(r for _, r in reqs)
    sent_at = np.array([t for t, _ in reqs])
    ttft = np.array([(r.first_token_at or 0.0) - t for t, r in reqs])
    e2e = np.array([(r.finished_at or 0.0) - t for t, r in reqs])
    window = steady_window(sent_at, sent_at + e2e, streams, closed_loop=True)
    tokens = tokens_in_window(sent_at, ttft, e2e, np.array([r.n for _, r in reqs]), window)
    return float(tokens.sum() / window.length_s)


@dataclass(frozen=True)
class Measured:
    """What a clockless closed loop served (``closed_loop``), over all its requests."""

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
    (``prompt(i, chars)``, 4 characters a token) and ``output_tokens`` on the server ``argv``
    describes (SGLang flags): the twin's closed form (twin/analytic.py) checked against the
    discrete simulator, or a twin's profile served as `engine=sim` would, minus the client."""
    sent, end = serve(make_engine(profile, argv, seed), lambda i: prompt(i, prompt_tokens * 4),
                      output_tokens, concurrency, concurrency * requests_per_stream)
    done = [r for _, r in sent]
    tokens = sum(r.n for r in done)
    verify = sum(r.verify_ct for r in done)
    ttft = [(r.first_token_at or 0.0) - r.arrival for r in done]
    tpot = [((r.finished_at or 0.0) - (r.first_token_at or 0.0)) / (r.n - 1) for r in done
            if r.n > 1]
    return Measured(output_tok_s=tokens / end, ttft_p50_s=statistics.median(ttft),
                    tpot_p50_s=statistics.median(tpot),
                    accept_length=(tokens - len(done)) / verify if verify else None)


def spec_argv(spec: Mapping[str, Any]) -> list[str]:
    return ["--speculative-algorithm", "EAGLE3",
            "--speculative-num-steps", str(spec["speculative_num_steps"]),
            "--speculative-eagle-topk", str(spec["speculative_eagle_topk"]),
            "--speculative-num-draft-tokens", str(spec["speculative_num_draft_tokens"])]


def measure(profile: Profile, case: Mapping[str, Any], reps: int = 4) -> float:
    """Modelled tok/s of one case, the mean over ``reps`` simulator seeds. A case with
    ``prompts`` (a shipped prompt file) is a closed-loop cell: ``{"argv", "prompts",
    "streams", "requests", "output_tokens"}``; otherwise synthetic prompts served all at once
    or one after another: ``{"argv", "requests", "concurrent", "prompt_tokens",
    "output_tokens", "domain"}``. An optional ``env`` is the server's environment."""
    out = int(case["output_tokens"])
    env = case.get("env")
    if "prompts" in case:
        texts = workload_prompts(str(case["prompts"]))
        got = [closed_loop_tok_s(make_engine(profile, case["argv"], seed, env), texts, out,
                                 int(case["streams"]), int(case["requests"]))
               for seed in range(reps)]
        return sum(got) / len(got)
    make = PROMPTS[case.get("domain", "coding")]
    prompts = [make(i, int(case["prompt_tokens"]) * 4) for i in range(int(case["requests"]))]
    streams = len(prompts) if case["concurrent"] else 1
    secs = [serve(make_engine(profile, case["argv"], seed, env), prompts.__getitem__, out,
                  streams, len(prompts))[1] for seed in range(reps)]
    return len(prompts) * out / (sum(secs) / len(secs))


def default_cases(profile: Profile) -> dict[str, dict[str, Any]]:
    """The four scenarios of profiles/default.json ``calibration.scenario``: what the default
    sweep (conf/sweep/concurrency.yaml) sends, closed loop, at its two ends."""
    sc = profile.data["calibration"]["scenario"]
    common = {"prompts": sc["prompts"], "output_tokens": sc["output_tokens"]}
    n = int(sc["saturated_streams"])
    single = {**common, "streams": 1, "requests": sc["single_stream_requests"]}
    sat = {**common, "streams": n, "requests": n * int(sc["saturated_requests_per_stream"])}
    base = ["--max-running-requests", str(sc["max_running_requests"])]
    eagle = [*base, *spec_argv(sc["eagle3"]), "--sim-drafter-train-mix",
             json.dumps(sc["drafter_train_mix"], sort_keys=True)]
    return {"baseline_single": {**single, "argv": base},
            "baseline_saturated": {**sat, "argv": base},
            "eagle3_single": {**single, "argv": eagle},
            "eagle3_saturated": {**sat, "argv": eagle}}


def anchor_cases(anchor: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Cases of a model profile's ``anchor`` block (h100-llama3.1-8b)."""
    sc = anchor["scenario"]
    hw = ["--sim-hardware", anchor["hardware"], "--sim-model", anchor["model"]]
    common = {"prompt_tokens": sc["prompt_tokens"], "output_tokens": sc["output_tokens"],
              "domain": sc["domain"]}
    cases: dict[str, dict[str, Any]] = {
        "baseline_single": {**common, "requests": sc["single_stream_requests"],
                            "concurrent": False, "argv": hw},
        "eagle3_single": {**common, "requests": sc["single_stream_requests"],
                          "concurrent": False, "argv": [*hw, *spec_argv(sc["eagle3_single"])]},
    }
    for b in anchor["batch_gain"]["batch_sizes"]:
        cap = ["--max-running-requests", str(b)]
        cases[f"baseline_bs{b}"] = {**common, "requests": b, "concurrent": True,
                                    "argv": [*hw, *cap]}
        cases[f"eagle3_bs{b}"] = {**common, "requests": b, "concurrent": True,
                                  "argv": [*hw, *cap, *spec_argv(sc["eagle3_batch"])]}
    return cases


ANCHORS = ("default", "h100-llama3.1-8b")
BOUNDS: dict[str, tuple[float, float]] = {
    "bandwidth": (0.2, 0.95), "compute": (0.01, 0.9), "pass_overhead_ms": (0.05, 20.0),
    "spec_step_overhead_ms": (0.05, 50.0), "spec_token_overhead_us": (0.1, 5000.0),
    "request_overhead_ms": (0.0, 1000.0),
}
"""Physical ranges of the fitted factors (an efficiency above 1 would beat the datasheet)."""


def anchor(name: str) -> tuple[Profile, dict[str, dict[str, Any]], dict[str, float], list[str]]:
    """(profile, cases, targets, fitted factor names) of an anchor."""
    if name == "default":
        prof = load_profile("default")
        cal = prof.data["calibration"]
        return prof, default_cases(prof), dict(cal["targets_tok_s"]), list(cal["fitted"])
    if name == "h100-llama3.1-8b":
        md = json.loads((MODEL_DIR / "llama3.1-8b.json").read_text())
        anc = md["anchor"]
        prof = load_profile("default", anc["hardware"], anc["model"])
        targets = {k: v for k, v in anc["targets_tok_s"].items() if k in anc["fit_on"]}
        return prof, anchor_cases(anc), targets, list(anc["fitted"])
    raise ValueError(f"unknown anchor {name!r}; known: {ANCHORS}")


def published_targets(name: str) -> dict[str, float]:
    """Every published figure of an anchor (fitted on or predicted)."""
    if name == "h100-llama3.1-8b":
        md = json.loads((MODEL_DIR / "llama3.1-8b.json").read_text())
        return dict(md["anchor"]["targets_tok_s"])
    return dict(load_profile("default").data["calibration"]["targets_tok_s"])


def results(profile: Profile, cases: Mapping[str, Mapping[str, Any]],
            reps: int = 4) -> dict[str, float]:
    """tok/s of every case, plus ``gain_bs<N>`` = EAGLE-3 / baseline at batch N."""
    got = {k: measure(profile, c, reps) for k, c in cases.items()}
    for k in list(got):
        if k.startswith("eagle3_bs"):
            b = k.removeprefix("eagle3_bs")
            got[f"gain_bs{b}"] = got[k] / got[f"baseline_bs{b}"]
    return got


def with_efficiency(profile: Profile, **factors: float) -> Profile:
    """``profile`` with efficiency factors replaced (where the anchor's factors live)."""
    hw_name = profile.hardware_data["name"]
    md = json.loads(json.dumps(profile.model_data))
    if hw_name in md.get("efficiency_on", {}):
        md["efficiency_on"][hw_name].update(factors)
        return replace(profile, model_data=md)
    hd = json.loads(json.dumps(profile.hardware_data))
    hd["efficiency"].update(factors)
    return replace(profile, hardware_data=hd)


def fit_factors(profile: Profile, names: Sequence[str],
                residuals: Callable[[Profile], list[float]], max_nfev: int) -> dict[str, float]:
    """Least squares of ``residuals`` (log ratios, of ``profile`` with the named efficiency
    factors set) over those factors, in log space within ``BOUNDS``, from the profile's own
    values; the fitted factors, rounded."""
    from scipy.optimize import least_squares  # type: ignore[import-untyped]  # offline only

    eff = profile.hardware.efficiency
    lo = [math.log(BOUNDS[n][0]) for n in names]
    hi = [math.log(BOUNDS[n][1]) for n in names]
    x0 = [min(max(math.log(max(getattr(eff, n), BOUNDS[n][0])), a + 1e-6), b - 1e-6)
          for n, a, b in zip(names, lo, hi, strict=True)]

    def fun(x: Sequence[float]) -> list[float]:
        return residuals(with_efficiency(
            profile, **{n: math.exp(v) for n, v in zip(names, x, strict=True)}))

    sol = least_squares(fun, x0, bounds=(lo, hi), diff_step=0.02, xtol=1e-4, ftol=1e-6,
                        max_nfev=max_nfev)
    return {n: round(math.exp(v), 4) for n, v in zip(names, sol.x, strict=True)}


def fit(profile: Profile, cases: Mapping[str, Mapping[str, Any]], targets: Mapping[str, float],
        names: Sequence[str], reps: int = 4) -> dict[str, float]:
    """Least-squares fit of the named efficiency factors to ``targets`` (log ratios)."""
    used = {k: c for k, c in cases.items() if k in targets or
            (k.startswith(("baseline_bs", "eagle3_bs")) and
             f"gain_bs{k.split('_bs')[1]}" in targets)}

    def residuals(p: Profile) -> list[float]:
        got = results(p, used, reps)
        return [math.log(got[k] / t) for k, t in targets.items()]

    return fit_factors(profile, names, residuals, max_nfev=60)


def report(profile: Profile, cases: Mapping[str, Mapping[str, Any]],
           targets: Mapping[str, float], reps: int = 4) -> str:
    got = results(profile, cases, reps)
    lines = [f"hardware {profile.hardware_data['name']}, model {profile.model_data['name']} "
             f"-- offline model, {reps} seeds",
             f"{'scenario':<22}{'target':>10}{'model':>12}{'error':>9}"]
    for k, v in got.items():
        t = targets.get(k)
        err = f"{(v - t) / t:>+9.2%}" if t else ""
        lines.append(f"{k:<22}{(f'{t:.2f}' if t else '-'):>10}{v:>12.2f}{err}")
    return "\n".join(lines)


def write_factors(profile: Profile, factors: Mapping[str, float]) -> Path:
    """Store fitted factors where the anchor keeps them (keeps the file's other content)."""
    hw_name = profile.hardware_data["name"]
    if hw_name in profile.model_data.get("efficiency_on", {}):
        path = MODEL_DIR / f"{profile.model_data['name']}.json"
        data = json.loads(path.read_text())
        data["efficiency_on"][hw_name].update(factors)
    else:
        path = HARDWARE_DIR / f"{hw_name}.json"
        data = json.loads(path.read_text())
        data["efficiency"].update(factors)
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m engines.sim.calibrate")
    ap.add_argument("--anchor", default="default", choices=ANCHORS)
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--write", action="store_true", help="store the fitted factors")
    ap.add_argument("--no-fit", action="store_true", help="only report")
    ns = ap.parse_args(argv)
    prof, cases, targets, names = anchor(ns.anchor)
    published = published_targets(ns.anchor)
    print(report(prof, cases, published, ns.reps))
    if ns.no_fit:
        return 0
    factors = fit(prof, cases, targets, names, ns.reps)
    print("fitted:", factors)
    print(report(with_efficiency(prof, **factors), cases, published, ns.reps))
    if ns.write:
        print(f"wrote {write_factors(prof, factors)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
