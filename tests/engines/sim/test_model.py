"""Pure model functions: tokenizer rule, domain inference, acceptance draws, step time, env."""

from __future__ import annotations

import itertools
import json
import operator
import random
from collections import Counter

import pytest

from engines.sim.model import (
    acceptance_probs,
    chat_prompt_tokens,
    classify_domain,
    draw_accept_length,
    natural_output_tokens,
    prompt_tokens,
    simulated_accept_length,
    tree_reach,
)
from engines.sim.profile import load_profile
from engines.sim.text import find_stop, make_words, seed_for
from tests.engines.sim.conftest import REPO

PROFILE = load_profile("default")


def test_prompt_token_rule() -> None:
    assert prompt_tokens("") == 1
    assert prompt_tokens("abcd") == 1
    assert prompt_tokens("abcde") == 2
    assert prompt_tokens("x" * 512) == 128
    msgs = [{"role": "system", "content": "abcd"}, {"role": "user", "content": "efgh"}]
    # "abcd\nefgh" = 9 chars -> 3 tokens, + 4 per message + 3 for the reply header
    assert chat_prompt_tokens(msgs) == 3 + 8 + 3
    parts = [{"role": "user", "content": [{"type": "text", "text": "abcd"}]}]
    assert chat_prompt_tokens(parts) == 1 + 4 + 3


def test_domain_classifier_labels_most_of_each_shipped_set() -> None:
    """The keyword classifier only picks the words of a simulated response (acceptance follows
    the drafter, engines/sim/drafter.py). On the shipped sets it gives most prompts of each
    domain their own label; chat has no vocabulary of its own and reads as general."""
    expected = {"coding": "coding", "agentic": "agentic", "math": "math",
                "encyclopedic": "encyclopedic", "chat": "general"}
    for name, label in expected.items():
        lines = (REPO / "workloads" / "prompts" / f"{name}.jsonl").read_text().splitlines()
        got = Counter(classify_domain(json.loads(line)["text"]) for line in lines if line.strip())
        top, count = got.most_common(1)[0]
        assert top == label and count > 0.5 * sum(got.values()), (name, got)


@pytest.mark.parametrize("text,domain", [
    ("Solve the equation x^2 - 5x + 6 = 0 and prove both roots are integers.", "math"),
    ("hello there", "general"),
    ("What is the capital of Australia?", "encyclopedic"),  # "api" inside "capital" is no API
    ("Observation: tests failed. Thought: read the file. Action: read_file", "agentic"),
])
def test_domain_examples(text: str, domain: str) -> None:
    assert classify_domain(text) == domain


def test_acceptance_depends_on_domain_and_draws_match_expectation() -> None:
    coding = acceptance_probs(PROFILE.acceptance, "coding")
    ency = acceptance_probs(PROFILE.acceptance, "encyclopedic")
    # E[accepted tokens per verify] = 1 + sum_i prod_{j<=i} p_j over the first 3 drafts
    e_coding, e_ency = (1 + sum(itertools.accumulate(p[:3], operator.mul)) for p in (coding, ency))
    assert e_coding > 2.8 and e_ency < 2.0
    rng = random.Random(1)
    draws = [draw_accept_length(rng.random, coding, 3) for _ in range(20000)]
    assert min(draws) == 1 and max(draws) == 4  # bonus token counted, at most steps + 1
    assert sum(draws) / len(draws) == pytest.approx(e_coding, rel=0.02)


def test_acceptance_modifiers() -> None:
    base = acceptance_probs(PROFILE.acceptance, "coding")
    hot = acceptance_probs(PROFILE.acceptance, "coding", temperature=1.0, temperature_penalty=0.1)
    tree = acceptance_probs(PROFILE.acceptance, "coding", topk=4, steps=4, draft_tokens=16)
    ngram = acceptance_probs(PROFILE.acceptance, "coding", accept_scale=0.6)
    assert all(h < b for h, b in zip(hot, base, strict=True))
    assert all(b < t for b, t in zip(base[:4], tree[:4], strict=True))  # the tree's 4 levels
    assert tree[4:] == base[4:]
    assert all(n < b for n, b in zip(ngram, base, strict=True))
    assert len(acceptance_probs(PROFILE.acceptance, "unknown-domain", max_positions=20)) == 20


def test_tree_reach_by_hand() -> None:
    # topk 1 is the chain: P(accepted >= d) = p1 ... pd
    assert tree_reach((0.8, 0.5), 2, 1, 3) == pytest.approx((0.8, 0.4))
    # one level, two guesses: 0.5 + (1 - 0.5) x 0.5; a budget of one draft token keeps only
    # the first guess
    assert tree_reach((0.5,), 1, 2, 3) == pytest.approx((0.75,))
    assert tree_reach((0.5,), 1, 2, 2) == pytest.approx((0.5,))
    # later guesses at half the first one's rate: 0.5 + 0.5 x 0.25
    assert tree_reach((0.5,), 1, 2, 3, second_guess=0.5) == pytest.approx((0.625,))
    # two levels, topk 2, 4 draft tokens: candidates 0.5, 0.25 (level 1) and 0.25, 0.125,
    # 0.125, 0.0625 (level 2); the 3 best are 0.5, 0.25 (level 1) and one 0.25 (level 2)
    assert tree_reach((0.5, 0.5), 2, 2, 4) == pytest.approx((0.75, 0.25))


def test_simulated_accept_length_mean() -> None:
    rng = random.Random(0)
    draws = [simulated_accept_length(rng.random, 2.4, 4) for _ in range(10000)]
    assert set(draws) == {2, 3} and sum(draws) / len(draws) == pytest.approx(2.4, abs=0.03)


def test_natural_length_and_text_are_deterministic() -> None:
    a = natural_output_tokens(random.Random(seed_for(0, "p")).random, 220, 0.7)
    b = natural_output_tokens(random.Random(seed_for(0, "p")).random, 220, 0.7)
    assert a == b >= 1
    lengths = [natural_output_tokens(random.Random(i).random, 220, 0.7) for i in range(2000)]
    assert sorted(lengths)[1000] == pytest.approx(220, rel=0.1)
    w1 = make_words(random.Random(5), "coding", 50)
    assert w1 == make_words(random.Random(5), "coding", 50)
    assert all(w.startswith(" ") and w[1:].isalpha() for w in w1)
    assert len("".join(w1).split()) == 50


def test_find_stop() -> None:
    words = [" alpha", " beta", " gamma", " delta"]
    m = find_stop(words, ["gam"])
    assert m is not None and m.tokens == 3 and m.matched == "gam"
    assert "".join(words)[: m.text_chars] == " alpha beta "
    m2 = find_stop(words, ["beta gamma", "delta"])  # spans two tokens
    assert m2 is not None and m2.tokens == 3 and m2.text_chars == len(" alpha ")
    assert find_stop(words, ["zeta"]) is None and find_stop(words, []) is None
