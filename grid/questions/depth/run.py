"""The depth search's part of the run loop (grid/execute/search.py runs every question):
the committed cells read as the search's measurements, the search and its confirmation
replayed from them (grid/analysis/depth.py, depth_confirm.py), and its trace. As for the
other searches nothing but the committed cells carries its state."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from grid.analysis import Slo
from grid.analysis.depth import DepthPoint, DepthStep, Throughput, depth_result, schedule
from grid.analysis.depth_confirm import (
    ADAPTIVE,
    SCHEDULE,
    THRESHOLD,
    AnyDepthStep,
    ConfirmStep,
    confirm_loads,
    confirm_result,
    replay_all,
    threshold_schedule,
)
from grid.plan.cells import Cell
from grid.plan.depth import DepthSetup
from grid.questions.measure import cell_throughputs


def _measured(run_dir: Path, points: dict[DepthPoint, Cell], slo: Slo
              ) -> dict[DepthPoint, Throughput]:
    values = cell_throughputs(run_dir, points.values(), slo)
    return {p: values[c.cell_id] for p, c in points.items() if c.cell_id in values}


def depth_steps(setup: DepthSetup, run_dir: Path, slo: Slo
                ) -> tuple[list[AnyDepthStep], set[tuple[int, ...]]]:
    """The depth search replayed from the committed cells, and the points measured so far.
    Once it stops, its schedule names the confirmation's cells: every repeat of them at the
    tiers' loads is read at once, and the second replay is the search."""
    measured = _measured(run_dir, setup.points, slo)
    steps = replay_all(setup.space, setup.confirm_cells, setup.adaptive, measured)
    searched = [s for s in steps if isinstance(s, DepthStep)]
    if searched[-1].stop is None:
        return steps, set(measured)
    levels = searched[-1].levels
    setup.schedule = schedule(levels)
    setup.threshold = threshold_schedule(setup.schedule, setup.space.lattice)
    loads = {load for _, _, load in confirm_loads(setup.schedule, levels, setup.space.lattice)}
    servers = [SCHEDULE] + ([THRESHOLD] if setup.threshold else []) + (
        [ADAPTIVE] if setup.adaptive else [])
    extra = {(c, s, r): setup.cell((c, s, r)) for c in loads for s in servers
             for r in range(setup.space.max_repeats)}
    measured.update(_measured(run_dir, extra, slo))
    steps = replay_all(setup.space, setup.confirm_cells, setup.adaptive, measured)
    return steps, set(measured)


def depth_trace(setup: DepthSetup, steps: Sequence[AnyDepthStep], note: str | None) -> dict:
    """search.json for a depth search: the question, every step and the outcome, with the
    schedule in the engine's words (what to paste)."""
    searched = [s for s in steps if isinstance(s, DepthStep)]
    result = {**depth_result(setup.space, searched), **confirm_result(steps), "note": note}
    result["confirm_cells"] = setup.confirm_cells
    tiers = schedule(searched[-1].levels)
    result["setting"] = setup.setting(tiers) if tiers and max(d for _, d in tiers) > 0 else None
    return {**setup.as_json(), "result": result, "steps": [s.as_json() for s in steps]}


def depth_answer(steps: Sequence[AnyDepthStep]) -> str:
    """What the stop line adds: the schedule, and whether it stands."""
    searched = [s for s in steps if isinstance(s, DepthStep)]
    tiers = schedule(searched[-1].levels)
    text = ", ".join(f"depth {d} from batch {b}" for b, d in tiers) or "none"
    last = steps[-1]
    if isinstance(last, ConfirmStep) and last.checks:
        standing = sum(t.stands for t in last.checks)
        text += f" ({standing} of {len(last.checks)} tier(s) confirmed: {last.stop})"
    return f"; schedule: {text}"
