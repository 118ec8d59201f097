"""The simulator is lossless at temperature 0 (a greedy text depends on the prompt only, never
on speculation or the batch), and `--sim-lossy-rate` breaks that on purpose: a chosen share of
prompts get another token right after their first accepted draft."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from tests.engines.sim.conftest import REPO, start_sim

EAGLE3 = ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3",
          "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]
FAST = ["--sim-time-scale", "0", "--max-running-requests", "64"]


def coding_prompts(n: int) -> list[str]:
    lines = (REPO / "workloads" / "prompts" / "coding.jsonl").read_text().splitlines()
    return [json.loads(line)["text"] for line in lines if line.strip()][:n]


def texts(url: str, prompts: list[str], concurrent: bool) -> list[str]:
    """The non-streamed greedy text of each prompt (32 tokens), all at once or one by one."""

    async def one(client: httpx.AsyncClient, prompt: str) -> str:
        r = await client.post(url + "/generate", json={
            "text": prompt, "sampling_params": {"max_new_tokens": 32, "temperature": 0,
                                                "ignore_eos": True}})
        r.raise_for_status()
        return str(r.json()["text"])

    async def run() -> list[str]:
        async with httpx.AsyncClient(timeout=60) as client:
            if concurrent:
                return list(await asyncio.gather(*(one(client, p) for p in prompts)))
            return [await one(client, p) for p in prompts]

    return asyncio.run(run())


PROMPTS = coding_prompts(12)


@pytest.fixture(scope="module")
def launch():
    """Start simulators (a speculative one computes its drafter's alignment first: seconds on
    a busy machine); all are stopped at the end of the module."""
    procs = []

    def start(args: list[str]) -> str:
        procs.append(start_sim(args, timeout=120))
        return procs[-1].url

    yield start
    for p in procs:
        p.stop()
        p.log_path.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def greedy(launch) -> list[str]:
    """The baseline's greedy texts of PROMPTS, one request at a time."""
    return texts(launch(FAST), PROMPTS, concurrent=False)


def test_greedy_text_is_the_same_with_speculation_and_at_any_batch(launch, greedy):
    prompts = PROMPTS
    base, spec = launch(FAST), launch([*EAGLE3, *FAST])
    alone = greedy
    assert len(set(alone)) == len(prompts)  # distinct prompts, distinct texts
    assert texts(base, prompts, concurrent=True) == alone  # batch of 12
    assert texts(spec, prompts, concurrent=False) == alone  # EAGLE-3, alone
    assert texts(spec, prompts, concurrent=True) == alone  # EAGLE-3, batched


@pytest.mark.slow
def test_lossy_rate_replaces_one_token_after_the_first_accepted_draft(launch, greedy):
    prompts, base = PROMPTS, greedy
    every = texts(launch([*EAGLE3, *FAST, "--sim-lossy-rate", "1"]), prompts, concurrent=True)
    for want, got in zip(base, every, strict=True):
        w, g = want.split(), got.split()  # one token = one word (engines/sim/text.py)
        differ = [i for i, (a, b) in enumerate(zip(w, g, strict=True)) if a != b]
        # coding prompts accept ~2.9 of 4 per verify: every request has an accepted draft
        # early on, and exactly one token after it differs; token 0 comes from the prefill and
        # token 1 is at the earliest the first accepted draft, so the change is at 2 or later
        assert len(differ) == 1 and differ[0] >= 2, (want, got)
    half_url = launch([*EAGLE3, *FAST, "--sim-lossy-rate", "0.5"])
    half = texts(half_url, prompts, concurrent=True)
    changed = [a != b for a, b in zip(base, half, strict=True)]
    assert 0 < sum(changed) < len(prompts)
    # decided per prompt: the same prompts change again, whatever the order (where depends
    # on the acceptance draws, which follow the arrival order)
    again = texts(half_url, prompts[::-1], concurrent=False)[::-1]
    assert [a != b for a, b in zip(base, again, strict=True)] == changed
