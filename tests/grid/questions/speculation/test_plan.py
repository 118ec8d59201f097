"""The speculation question's plan (grid/questions/speculation/plan.py) on the simulator: the
threshold's confirmation has a cell for every threshold it may confirm, the switch applied, at
the load at it and just above it; each maps back to its point; none is a planned cell until a
step chooses it."""

from __future__ import annotations

from grid.questions.speculation.steps import SWITCH
from grid.run import make_plan


def test_the_universe_holds_the_switched_cells_of_every_threshold_it_may_confirm():
    planned = make_plan(["+sweep=speculation", "grid.search.concurrency=[1,4]",
                         "grid.search.depths=[0,1,3]"])
    question = planned.search
    depth = question.depth if question.depth in (1, 3) else 3
    switched = {p: c for p, c in question.points.items() if p[2] <= SWITCH}
    # lattice 1 2 4: threshold 1 at c=1 and 2, threshold 2 at c=2 and 4; 4 has nothing above
    assert set(switched) == {(1, depth, SWITCH - 1), (2, depth, SWITCH - 1),
                             (2, depth, SWITCH - 2), (4, depth, SWITCH - 2)}
    for (load, k, rate), cell in switched.items():
        variant = cell.config["variant"]
        assert variant["speculative_disable_above_batch"] == SWITCH - rate
        assert variant["args"]["speculative_num_steps"] == k and cell.concurrency == load
    # not among the run's planned cells (a step that chooses them plans them): the plan's
    # warnings hold no threshold the user did not ask for
    assert not any(c.config["variant"].get("speculative_disable_above_batch") is not None
                   for c in planned.plan.cells)
