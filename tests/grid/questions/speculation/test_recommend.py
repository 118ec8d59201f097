"""The recommendation's depth by batch size where the prediction rules out neither the baseline
nor drafting (grid/questions/speculation/recommend.py `undetermined`), on hand-made loads."""

from grid.questions.speculation.recommend import recommendation, undetermined

PART = {"speculative_disable_above_batch": 2, "depth": 2, "status": "predicted",
        "statement": ""}


def test_a_tier_whose_loads_hold_the_baseline_and_a_depth_is_undetermined_between_them():
    settled = {1: (2, "predicted"), 2: (2, "predicted"), 4: (0, "predicted"),
               8: (0, "predicted"), 16: (0, "measured")}
    # c=1 and c=2: depth 2 with 1 and 3 beside it (no baseline: settled, a near-tie in depth);
    # c=4: the baseline with 1 and 2 not ruled out; c=8: the baseline with 3; c=16: the
    # drafter's own cells answered (measured), the prediction's set does not count there
    plausible = {1: (1, 2, 3), 2: (2,), 4: (0, 1, 2), 8: (0, 3), 16: (0, 1)}
    rec = recommendation(settled, PART, {}, "coding", {}, 0.0, plausible=plausible)
    assert rec["schedule"] == [[1, 2], [4, 0]]  # the best depth still makes the schedule
    assert "undetermined" not in rec["tiers"][0]
    assert rec["tiers"][1]["undetermined"] == {"loads": [4, 8], "depths": [1, 2, 3]}
    # how it is known, unchanged: as its least known load (c=4, 8 predicted, c=16 measured)
    assert rec["tiers"][1]["status"] == "predicted"
    assert rec["text"] == ("for coding: set speculative_disable_above_batch=2 at depth 2 "
                           "(predicted); by batch size: depth 2 from batch 1 (predicted), "
                           "baseline from batch 4 (predicted; undetermined between baseline "
                           "and depth 1, 2 or 3 at c=4, c=8)")


def test_a_schedule_that_never_drafts_says_speculation_is_not_shown_to_pay():
    settled = {1: (0, "predicted"), 8: (0, "predicted")}
    part = {**PART, "speculative_disable_above_batch": None, "statement": "none"}
    rec = recommendation(settled, part, {}, "coding", {}, 0.0, plausible={1: (0, 2), 8: (0,)})
    assert rec["text"].endswith("by batch size: baseline from batch 1 (predicted; undetermined "
                                "between baseline and depth 2 at c=1) (speculation shown to "
                                "pay at no load: serve the baseline)")
    settled_off = recommendation(settled, part, {}, "coding", {}, 0.0,
                                 plausible={1: (0,), 8: (0,)})
    assert settled_off["text"].endswith("baseline from batch 1 (predicted) (speculation pays at "
                                        "no load: serve the baseline)")
    assert undetermined([1, 8], {}, {1: "predicted", 8: "predicted"}) is None  # none known
