"""The simulated drafter's acceptance vs context length (engines/sim/drafter.py ContextDecay,
docs/simulator.md "Acceptance and context length"): flat up to the drafter's training length,
falling linearly in context / training length beyond it, never below the floor; the profile's
fields feed the simulator's version; through HTTP a long-context request accepts less than a
short one of the same domain.

Expected values are worked by hand from the documented formula
f(L) = 1 (L <= T), max(floor, 1 - slope x (L / T - 1)) (L > T)."""

from __future__ import annotations

import json
import shutil

import httpx
import pytest

from engines.sim.drafter import ContextDecay, SimDrafter
from engines.sim.identity import sim_version
from engines.sim.profile import MODEL_DIR, load_profile
from tests.engines.sim.conftest import LaunchSim, run_generate
from tests.engines.sim.test_speculation import EAGLE3, accept_length, body, prompts

T = 2048  # the shipped profiles' train_context_tokens


@pytest.mark.parametrize("tokens,expected", [
    (1, 1.0), (1000, 1.0), (2048, 1.0),  # within the training length: flat
    (3072, 0.9375),                      # 1 - 0.125 x 0.5
    (4096, 0.875),                       # 1 - 0.125 x 1
    (8192, 0.625),                       # 1 - 0.125 x 3
    (12288, 0.375),                      # 1 - 0.125 x 5
    (16384, 0.13),                       # 1 - 0.125 x 7 = 0.125 < floor 0.13
    (131072, 0.13),                      # far beyond: the floor
])
def test_factor_by_hand(tokens, expected):
    assert ContextDecay(T, 0.125, 0.13).factor(tokens) == pytest.approx(expected)


def test_factor_shape_flat_then_decreasing_then_floor():
    lengths = list(range(256, 65536, 256))
    f = [ContextDecay(T, 0.125, 0.13).factor(n) for n in lengths]
    below = [v for n, v in zip(lengths, f, strict=True) if n <= T]
    above = [v for n, v in zip(lengths, f, strict=True) if n > T]
    assert below == [1.0] * len(below)
    assert all(b <= a for a, b in zip(above, above[1:], strict=False))  # monotone
    assert all(v >= 0.13 for v in f) and above[-1] == 0.13
    strictly = [v for v in above if v > 0.13]
    assert all(b < a for a, b in zip(strictly, strictly[1:], strict=False))
    # another training length, slope and floor: 1 - 0.2 x (6000 / 4000 - 1) = 0.9
    assert ContextDecay(4000, 0.2, 0.5).factor(6000) == pytest.approx(0.9)
    assert ContextDecay(4000, 0.2, 0.5).factor(40000) == 0.5
    assert ContextDecay.from_profile({}) is None  # no training length given: no decay


def test_profile_fields_and_refusals():
    decay = load_profile().context_decay
    assert decay == ContextDecay(2048, 0.125, 0.13)
    for model in ("llama3.1-8b", "llama3.3-70b"):
        assert load_profile(model=model).context_decay == ContextDecay(2048, 0.125, 0.13)
    assert ContextDecay.from_profile({}) is None
    for bad in ({"train_context_tokens": 0}, {"train_context_tokens": 2048, "context_floor": 2},
                {"train_context_tokens": 2048, "context_decay_slope": -1}):
        with pytest.raises(ValueError, match="train_context_tokens must be"):
            ContextDecay.from_profile(bad)


def test_chain_scales_every_position():
    acceptance = load_profile().acceptance
    drafter = SimDrafter(acceptance, train_mix={"coding": 1.0},
                         context=ContextDecay(2048, 0.125, 0.13))
    prompt = prompts("coding")[0]
    short = drafter.chain(prompt, 1000)
    # kimi-k2.5-class coding chain 0.82, 0.76, ... x 0.625 at 8192 tokens, x 0.13 at 32k
    assert short[:2] == pytest.approx([0.82, 0.76])
    assert drafter.chain(prompt, 8192)[:2] == pytest.approx([0.5125, 0.475])
    assert drafter.chain(prompt, 32768)[:2] == pytest.approx([0.1066, 0.0988])
    no_decay = SimDrafter(acceptance, train_mix={"coding": 1.0})
    assert no_decay.chain(prompt, 32768) == pytest.approx(short)
    assert drafter.info()["context"] == {"train_context_tokens": 2048,
                                         "context_decay_slope": 0.125, "context_floor": 0.13}


def test_context_fields_feed_the_sim_version(tmp_path):
    model = tmp_path / "m.json"
    shutil.copy(MODEL_DIR / "kimi-k2.5-class.json", model)
    before = sim_version("default", model=str(model))
    data = json.loads(model.read_text())
    for key, value in (("train_context_tokens", 4096), ("context_decay_slope", 0.2),
                       ("context_floor", 0.3)):
        data["drafter"][key] = value
        model.write_text(json.dumps(data))
        after = sim_version("default", model=str(model))
        assert after != before
        before = after
    data["drafter"]["context_floor"] = 1.5
    model.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="context_floor"):
        sim_version("default", model=str(model))


def _long(text: str, tokens: int) -> str:
    """``text`` repeated to about ``tokens`` tokens (the simulator counts characters / 4): the
    same opening, so the same domain and alignment, only longer."""
    return (text + "\n") * (tokens * 4 // (len(text) + 1) + 1)


@pytest.mark.slow
def test_long_context_accepts_less_through_http(launch_sim: LaunchSim):
    sim = launch_sim([*EAGLE3, "--max-running-requests", "64", "--sim-time-scale", "0"])
    texts = prompts("coding")[:8]
    _, short = run_generate(sim.url, [body(t, 128) for t in texts], concurrent=True)
    _, mid = run_generate(sim.url, [body(_long(t, 8192), 128) for t in texts], concurrent=True)
    _, far = run_generate(sim.url, [body(_long(t, 24000), 128) for t in texts], concurrent=True)
    assert max(m["prompt_tokens"] for m in short) < T
    assert all(8192 <= m["prompt_tokens"] < 8800 for m in mid)
    assert all(m["prompt_tokens"] >= 24000 for m in far)
    got = [accept_length(metas) for metas in (short, mid, far)]
    # Expected per 4-token verify with the coding chain 0.82, 0.76, 0.72 (x the context factor
    # f): 1 + p1 + p1 p2 + p1 p2 p3 -> f = 1: 2.89; f = 0.59-0.63 (8.2k-8.8k tokens): 1.80-1.87;
    # f = 0.13: ~1.12. 8 x 128 tokens per length, so a tenth or two of sampling spread.
    assert got[0] > 2.6
    assert 1.55 < got[1] < 2.15
    assert got[2] < 1.3
    # the drafter's context parameters are visible in /server_info
    drafter = httpx.get(sim.url + "/server_info", timeout=10).json()["sim"]["drafter"]
    assert drafter["context"]["train_context_tokens"] == T
