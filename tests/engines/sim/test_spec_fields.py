"""A request's speculative fields as SGLang 0.5.23 writes them (engines/sim/spec_fields.py),
worked by hand from a request's verify steps."""

from __future__ import annotations

import pytest

from engines.sim.scheduler import SimRequest
from engines.sim.spec_fields import details_json, spec_details, spec_meta


def _request(drafts: list[int], n: int) -> SimRequest:
    r = SimRequest(rid="r", prompt_tokens=8, limit=n, finish_reason={"type": "length"},
                   words=[])
    for d in drafts:
        r.verified(d)
    r.n = n
    return r


def test_each_verify_adds_one_count_at_its_accepted_drafts() -> None:
    # 4 verifies accepting 2, 0, 3, 2 drafts: H = [1, 0, 2, 1], 7 drafts; 12 tokens = the
    # prefill's 1 + 4 verifies' bonus tokens + 7 drafts
    r = _request([2, 0, 3, 2], 12)
    assert (r.histogram, r.verify_ct, r.correct_drafts) == ([1, 0, 2, 1], 4, 7)
    meta = spec_meta(r, 4)  # 3 drafts proposed per verify: 12 in all
    assert list(meta) == ["spec_accept_rate", "spec_accept_length", "spec_num_correct_drafts",
                          "spec_num_proposed_drafts", "spec_verify_ct",
                          "spec_correct_drafts_histogram"]
    assert meta["spec_accept_rate"] == pytest.approx(7 / 12)
    assert meta["spec_accept_length"] == 3.0  # 12 tokens / 4 verifies
    assert (meta["spec_num_proposed_drafts"], meta["spec_verify_ct"]) == (12, 4)
    assert meta["spec_correct_drafts_histogram"] == [1, 0, 2, 1]


def test_the_histogram_is_as_long_as_the_largest_count_seen() -> None:
    assert _request([0, 1, 1], 6).histogram == [1, 2]  # not padded to the depth


def test_zero_draft_tokens_report_the_histogram_alone() -> None:
    r = _request([0] * 5, 6)
    assert spec_meta(r, 1) == {"spec_correct_drafts_histogram": [5]}
    details = spec_details(spec_meta(r, 1))
    assert details is not None
    assert details["spec_verify_ct"] == 0 and details["spec_correct_drafts_histogram"] == [5]
    assert spec_meta(_request([], 1), 4) == {} and spec_details({}) is None


def test_the_details_are_sglangs_bytes() -> None:
    """SGLang 0.5.23's SpecTokensDetails(spec_accept_rate=0.5, spec_accept_length=2.0,
    spec_num_correct_drafts=3, spec_num_proposed_drafts=6, spec_verify_ct=3,
    spec_correct_drafts_histogram=[1, 1, 1]) as its model_dump_json() writes it
    (entrypoints/openai/protocol.py, run once in the engine environment)."""
    meta = {"spec_accept_rate": 0.5, "spec_accept_length": 2, "spec_num_correct_drafts": 3,
            "spec_num_proposed_drafts": 6, "spec_verify_ct": 3,
            "spec_correct_drafts_histogram": [1, 1, 1]}
    details = spec_details(meta)
    assert details is not None
    assert details_json(details) == (
        '{"spec_accept_rate":0.5,"spec_accept_length":2.0,"spec_cap_length":0.0,'
        '"spec_block_accept_length":0.0,"spec_num_correct_drafts":3,'
        '"spec_num_proposed_drafts":6,"spec_verify_ct":3,'
        '"spec_correct_drafts_histogram":[1,1,1],"spec_cap_lens_histogram":[]}')
