"""The plan sizes a conversation cell by its real work: conversations x rounds (from the
conversation file read at plan time), for the request count the progress shows and for the
duration estimate. Real Hydra configs (`+sweep=agentic`), nothing started."""

from __future__ import annotations

from dataclasses import replace

import pytest

from grid.plan.build import format_plan
from grid.plan.conversations import conversation_work
from grid.plan.estimate import CELL_OVERHEAD_S, estimate_cell
from grid.run import make_plan
from workloads.conversations import Conversation, Turn, load_conversations
from workloads.conversations_data import AGENTIC


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    return make_plan(["+sweep=agentic", f"results_dir={tmp_path_factory.mktemp('r')}"]).plan


def _cell(plan, variant, concurrency):
    (cell,) = [c for c in plan.cells if c.variant == variant and c.concurrency == concurrency]
    return cell


def _same_turns(n_convs: int, n_turns: int) -> tuple[Conversation, ...]:
    """Conversations whose rounds all cost the same: 400 characters in, 32 tokens out."""
    turn = Turn(messages=({"role": "user", "content": "x" * 400},), output_tokens=32)
    return tuple(Conversation(f"c{i}", (turn,) * n_turns) for i in range(n_convs))


def test_the_total_of_a_conversation_cell_is_its_rounds(plan):
    convs, _ = load_conversations(AGENTIC)
    rounds = sum(min(len(c.turns), 6) for c in convs[:8])  # the sweep: 8 conversations, <= 6
    assert rounds > 8 * 5 - 1
    for cell in plan.cells:
        assert plan.work(cell).total == rounds and plan.work(cell).unit == "rounds"
        assert plan.work(cell).total != cell.num_requests  # not the prompt cells' count
        work = plan.work(cell).conversation
        assert work is not None and work.conversations == 8 and work.rounds == rounds
        assert work.output_tokens == 32 * rounds  # the trace gives no length: max_new_tokens
    text = format_plan(plan)
    assert f"conversations=8 rounds={rounds}" in text


def _cost(plan, cell, n_convs: int, n_turns: int) -> float:
    """Estimated seconds of `cell` replaying n_convs x n_turns identical rounds."""
    (spec,) = plan.work(cell).clients
    spec = replace(spec, conversations=_same_turns(n_convs, n_turns), max_turns=None)
    work = conversation_work([spec])
    assert work.rounds == n_convs * n_turns
    seconds, _ = estimate_cell(cell, work)
    assert seconds is not None
    return seconds - CELL_OVERHEAD_S


@pytest.mark.parametrize(("variant", "concurrency"),
                         [("baseline", 1), ("baseline", 4), ("eagle3", 1)])
def test_estimate_scales_with_conversations_times_rounds(plan, variant, concurrency):
    cell = _cell(plan, variant, concurrency)
    base = _cost(plan, cell, 4, 3)
    assert base > 0
    assert _cost(plan, cell, 8, 3) == pytest.approx(2 * base)  # twice the conversations
    assert _cost(plan, cell, 4, 6) == pytest.approx(2 * base)  # twice the rounds each
    assert _cost(plan, cell, 8, 6) == pytest.approx(4 * base)


def test_a_speculative_batchs_later_waves_cost_more(plan):
    # four streams of EAGLE-3 drift apart (requests need different numbers of verify steps,
    # engines/sim/twin/analytic.py): twice the waves cost a little more than twice the time
    cell = _cell(plan, "eagle3", 4)
    base = _cost(plan, cell, 4, 3)
    assert 2 * base < _cost(plan, cell, 8, 3) < 2.2 * base


def test_estimate_ignores_the_prompt_cells_request_count(tmp_path):
    a = make_plan(["+sweep=agentic", f"results_dir={tmp_path}"]).plan
    b = make_plan(["+sweep=agentic", "load.requests_per_stream=100",
                   f"results_dir={tmp_path}"]).plan
    fewer = make_plan(["+sweep=agentic", "workload.num_conversations=4",
                       f"results_dir={tmp_path}"]).plan
    for cell_a, cell_b, cell_f in zip(a.cells, b.cells, fewer.cells, strict=True):
        assert cell_b.num_requests != cell_a.num_requests
        assert b.cell_seconds(cell_b) == pytest.approx(a.cell_seconds(cell_a))
        assert fewer.cell_seconds(cell_f) < a.cell_seconds(cell_a)


def test_open_loop_work_ends_with_the_last_arrival(plan):
    cell = _cell(plan, "baseline", 1)
    (spec,) = plan.work(cell).clients
    spec = replace(spec, conversations=_same_turns(4, 2), rate=2.0, arrival="constant",
                   concurrency=None)
    work = conversation_work([spec])
    assert work.last_arrival_s == pytest.approx(1.5)  # 4 starts, 0.5 s apart
    assert work.open_loop
    life, _ = estimate_cell(cell, replace(work, last_arrival_s=0.0))
    # arrivals are the client's wall clock: not scaled by the simulator's time_scale
    assert life is not None
    assert estimate_cell(cell, work) == (pytest.approx(life + 1.5), "engine")
    closed = conversation_work([replace(spec, rate=None, concurrency=1)])
    assert not closed.open_loop and closed.last_arrival_s == 0.0
