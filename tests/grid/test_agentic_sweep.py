"""`+sweep=agentic` end to end on the simulator: Hydra -> conversation cells -> real Ray
LoadGenActors replaying multi-turn conversations against real simulator processes -> the turns
dataset committed with each attempt -> the report's conversation section."""

from __future__ import annotations

import json
import re

import pytest

from grid.loader import load_cells, load_turns
from grid.run import run

pytestmark = [pytest.mark.usefixtures("ray_session"), pytest.mark.slow]


def test_agentic_sweep_end_to_end(tmp_path):
    lines: list[str] = []
    outcome = run(["+sweep=agentic", f"results_dir={tmp_path}"], echo=lines.append)
    assert outcome.exit_code == 0, "\n".join(lines)
    cells = load_cells(outcome.run_dir)
    assert len(cells) == 4 and (cells.status == "done").all()
    turns = load_turns(outcome.run_dir)
    assert set(turns.cell_id) == set(cells.cell_id)
    assert (turns.status == "ok").all()
    # 8 conversations of at most 6 rounds per cell, every round in order
    per_conv = turns.groupby(["cell_id", "conversation_id"]).turn_index
    assert per_conv.count().groupby(level=0).size().eq(8).all()
    assert per_conv.apply(lambda s: sorted(s) == list(range(len(s)))).all()
    assert turns.turn_index.max() == 5 and (turns.output_tokens == 32).all()
    # history grows round by round, and later rounds hit the prefix cache
    later = turns[turns.turn_index > 0]
    assert (later.cached_tokens > 0).all()
    assert (later.cached_tokens < later.context_tokens).all()
    ordered = turns.sort_values(["cell_id", "conversation_id", "turn_index"])
    assert ordered.groupby(["cell_id", "conversation_id"]).context_tokens.apply(
        lambda s: s.is_monotonic_increasing).all()
    eagle = turns[turns.variant == "eagle3"]
    assert (eagle.accept_length > 1).all() and turns[turns.variant == "baseline"] \
        .accept_length.isna().all()
    # the cell row's aggregates come from its rounds
    for cell in cells.itertuples():
        mine = turns[turns.cell_id == cell.cell_id]
        assert cell.requests_ok == len(mine) and cell.num_requests == len(mine)
        assert cell.cache_hit_rate == pytest.approx(
            mine.cached_tokens.sum() / mine.context_tokens.sum())
        assert cell.output_tok_s > 0 and cell.ttft_p50_s > 0
    text = "\n".join(lines)
    assert "conversations (turns dataset): concurrency c = conversations in flight" in text
    assert "by context length (decode = per-stream decode tok/s" in text
    assert "eagle3: prefix-cache hit rate" in text and "eagle3 c=4:" in text
    # progress counts a cell's rounds (8 conversations x their rounds), as planned
    assert all(f"started ({n} rounds)" in text for n in turns.groupby("cell_id").size())
    # the summary table has numbers for conversation cells (tok/s with an interval)
    rows = [line for line in text.splitlines() if line.split()[1:2] == ["agentic_conversations"]]
    assert len(rows) == 4 and all(re.search(r"c=[14]\s+\d+ \[\d+, \d+\]", r) for r in rows)
    page = (outcome.run_dir / "report.html").read_text()
    section = page[page.index("<h2>Conversations</h2>"):page.index("<h2>Cells</h2>")]
    assert "SIMULATION" in section and section.count('<img alt="conversation_') == 2
    decision = json.loads((outcome.run_dir / "decision.json").read_text())
    assert {(s["variant"], s["load"]) for s in decision["speedups"]} == {("eagle3", 1.0),
                                                                         ("eagle3", 4.0)}
    assert {p["concurrency"] for p in decision["conversations"]["stops_paying"]} == {1, 4}
