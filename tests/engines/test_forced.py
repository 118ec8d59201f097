"""Forced acceptance, engine-neutral (engines/forced.py): the checked length or rates, their
per-position form, and every refusal as one line."""

from __future__ import annotations

import pytest

from engines.forced import forced_acceptance

EAGLE3 = {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3}


def test_a_length_is_the_minimum_variance_schedule_of_rates():
    forced = forced_acceptance({"length": 2.5}, EAGLE3)
    assert forced is not None and forced.steps == 3
    # 1.5 accepted drafts: the first always, the second half the time, the third never
    assert forced.per_position() == (1.0, 0.5, 0.0)
    assert forced.mean_length == 2.5
    assert forced_acceptance({"length": 4.0}, EAGLE3).per_position() == (1.0, 1.0, 1.0)
    assert forced_acceptance({"length": 1.0}, EAGLE3).per_position() == (0.0, 0.0, 0.0)


def test_rates_are_kept_and_give_a_mean_length_of_one_plus_their_sum():
    forced = forced_acceptance({"rates": [0.8, 0.6, 0.4]}, EAGLE3)
    assert forced is not None and forced.rates == (0.8, 0.6, 0.4)
    assert forced.mean_length == pytest.approx(2.8)
    assert forced.describe() == "rates [0.8, 0.6, 0.4] (mean length 2.8)"


def test_nothing_forced_is_none():
    assert forced_acceptance(None, EAGLE3) is None
    assert forced_acceptance({"length": None, "rates": None}, {}) is None


@pytest.mark.parametrize(("raw", "args", "by_batch", "message"), [
    ({"length": 2.0}, {"max_running_requests": 8}, (),
     "forced_acceptance needs a speculative variant"),
    ({"length": 4.5}, EAGLE3, (), r"length must be in \[1, 4\] .*got 4.5"),
    ({"length": 0.9}, EAGLE3, (), r"length must be in \[1, 4\]"),
    ({"length": "x"}, EAGLE3, (), "length must be a number"),
    ({"length": 2.0, "rates": [0.5, 0.4, 0.3]}, EAGLE3, (), "length or rates, not both"),
    ({"rates": [0.5, 0.6, 0.4]}, EAGLE3, (), "rates must not increase .*position 2 above"),
    ({"rates": [0.5, 0.4]}, EAGLE3, (), "rates must have 3 entries"),
    ({"rates": [1.2, 0.4, 0.1]}, EAGLE3, (), r"rates must lie in \[0, 1\]"),
    ({"rates": "0.5"}, EAGLE3, (), "rates must be a list of 3 numbers"),
    ({"length": 2.0}, EAGLE3, ("speculative_depth",),
     "forced_acceptance with speculative_depth: .* one depth"),
    ({"length": 2.0, "token_mode": "real"}, EAGLE3, (),
     "token_mode must be one of real-draft-token, fixed .*got 'real'"),
    ({"token_mode": "fixed"}, EAGLE3, (), "token_mode without length or rates: nothing"),
])
def test_what_cannot_be_forced_is_one_line(raw, args, by_batch, message):
    with pytest.raises(ValueError, match=message) as e:
        forced_acceptance(raw, args, by_batch)
    assert "\n" not in str(e.value)


def test_the_cells_column_records_the_setting_and_its_mean_length():
    import json

    from engines.forced import forced_record

    assert forced_record({"args": EAGLE3}) is None
    assert json.loads(forced_record({"args": EAGLE3, "forced_acceptance": {"length": 2.5}})) \
        == {"length": 2.5, "mean_length": 2.5, "token_mode": "real-draft-token"}
    rates = json.loads(forced_record({"args": EAGLE3, "forced_acceptance": {
        "rates": [0.5, 0.3, 0.1], "token_mode": "fixed"}}))
    assert rates["rates"] == [0.5, 0.3, 0.1] and rates["mean_length"] == pytest.approx(1.9)
    assert rates["token_mode"] == "fixed"


def test_the_token_mode_defaults_to_the_drafters_own_tokens():
    """SGLang 0.5.23 names two modes (srt/speculative/spec_utils.py
    check_simulate_acc_token_mode: 'fixed' or 'real-draft-token'); its own default, 'fixed'
    (srt/environ.py), is not this setting's."""
    default = forced_acceptance({"length": 2.5}, EAGLE3)
    assert default is not None and default.token_mode == "real-draft-token"
    fixed = forced_acceptance({"length": 2.5, "token_mode": "fixed"}, EAGLE3)
    assert fixed is not None and fixed.token_mode == "fixed"
