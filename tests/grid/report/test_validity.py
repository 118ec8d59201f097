"""The validity findings (grid/report/validity.py): one line per kind of issue."""

from __future__ import annotations

from types import SimpleNamespace

from grid.report.validity import extrapolation_line, merged_reasons


def _cell(variant: str, concurrency: int, workload: str = "coding") -> SimpleNamespace:
    return SimpleNamespace(variant=variant, workload=workload, concurrency=concurrency,
                           rate=None)


WHY = "96 output tokens outside 256"


def test_extrapolated_cells_are_named_once_per_server_in_one_line():
    found = [(_cell("baseline", c), WHY) for c in (64, 1, 4)] + \
            [(_cell("eagle3", c), WHY) for c in (4, 1)]
    line = extrapolation_line(found)
    assert line == ("extrapolation: 5 simulated cell(s) outside their profile's calibrated "
                    "envelope (docs/simulator.md 'Calibrated envelope'): baseline on coding at "
                    f"c=1,4,64; eagle3 on coding at c=1,4 ({WHY})")
    assert line.count(WHY) == 1


def test_servers_with_other_reasons_keep_their_own():
    other = "prompts of 30-627 tokens outside 128"
    found = [(_cell("baseline", 1), WHY), (_cell("eagle3", 1), other),
             (_cell("eagle3", 2, "chat"), other)]
    line = extrapolation_line(found)
    assert line.endswith(f"baseline on coding at c=1 ({WHY}); eagle3 on coding at c=1, on chat "
                         f"at c=2 ({other})")


def test_reasons_that_differ_only_in_their_numbers_are_said_once_as_a_range():
    """Each cell's prompts span other lengths: the line gives the overall range, once."""
    found = [(_cell("baseline", 1), f"{WHY}; prompts of 30-593 tokens outside 128"),
             (_cell("baseline", 4), f"{WHY}; prompts of 42-627 tokens outside 128"),
             (_cell("eagle3", 1), f"{WHY}; prompts of 36-488 tokens outside 128")]
    line = extrapolation_line(found)
    assert line.endswith("baseline on coding at c=1,4; eagle3 on coding at c=1 "
                         f"({WHY}; prompts of 30-627 tokens outside 128)")
    assert merged_reasons(["concurrency 128 outside 1-64", "concurrency 100 outside 1-64",
                           "speculative_adaptive (no anchor measured the adaptive switch)"]) \
        == ("concurrency 100-128 outside 1-64; speculative_adaptive (no anchor measured the "
            "adaptive switch)")
