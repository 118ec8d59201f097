"""The draft-model ladder on a real engine, the slice CI runs: real vLLM 0.32.0 on the CPU
serves the trained target, baseline and with three rungs of the ladder (the target with noise
0, 0.2 and 0.6 on every weight: `+sweep=cpu_breakeven`, docs/lesson.md "A ladder of
drafters"). What it pins is vLLM's own counting of the rungs' acceptance, greedy: the target
as its own drafter is accepted at every position, more noise is accepted less, and the report
turns the rungs into a break-even curve at their measured lengths. Throughputs are not
asserted (they move with the machine's load: docs/lesson.md has two runs 1.7 tokens apart).

Marked `real_engine`; .ci/run trains the models and the ladder (scripts/train_models.py)."""

from __future__ import annotations

import json

import pytest

from grid.loader import load_cells
from grid.run import run

pytestmark = [pytest.mark.real_engine, pytest.mark.usefixtures("ray_session"),
              pytest.mark.timeout(900)]


def test_the_ladder_is_graded_by_vllms_own_counts(tmp_path, engines_python, trained_models):
    assert (trained_models / "ladder" / "manifest.json").is_file(), \
        "the ladder is missing: run `.venv-engines/bin/python scripts/train_models.py`"
    lines: list[str] = []
    rungs = ",".join(f"'${{trained_model:ladder/noise-{n}}}'" for n in ("0.00", "0.20", "0.60"))
    outcome = run(["+sweep=cpu_breakeven", f"results_dir={tmp_path}",
                   f"engine.python={engines_python}", "load.requests_per_stream=4",
                   "load.min_requests=8",
                   f"grid.axes={{variant:[tiny_trained_draft],"
                   f"variant.args.speculative_draft_model_path:[{rungs}],concurrency:[2],repeat:[0]}}",
                   "grid.include=[{variant:baseline,concurrency:2}]"], echo=lines.append)
    log = "\n".join(lines)
    assert outcome.exit_code == 0, log
    cells = load_cells(outcome.run_dir)
    assert len(cells) == 4 and (cells.status == "done").all(), log
    length = dict(zip(cells.variant, cells.accept_length_decode, strict=True))
    # k = 4 drafts per step: at most 5 tokens. The target drafting for itself is accepted at
    # every position (5.00 measured; bf16 kernels of another batch shape may differ on a rare
    # token); noise 0.2 about 2.8 and 0.6 about 1.2 (greedy, docs/lesson.md), margins wide
    # enough for another CPU's kernels
    full = length["tiny_trained_draft__draft-noise-0.00"]
    middle = length["tiny_trained_draft__draft-noise-0.20"]
    poor = length["tiny_trained_draft__draft-noise-0.60"]
    assert full >= 4.5 and 2.0 <= middle <= 3.8 and 1.0 <= poor <= 1.8, length
    # the report: one ladder curve at c=2, its rungs at their measured lengths, ascending
    decision = json.loads((outcome.run_dir / "decision.json").read_text())
    (curve,) = decision["breakeven"]["curves"]
    assert (curve["kind"], curve["configuration"], curve["load"]) == \
        ("ladder", "tiny_trained_draft", 2.0)
    assert curve["lengths"] == pytest.approx([poor, middle, full])
    assert [r["variant"].rsplit("__", 1)[-1] for r in curve["rungs"]] == \
        ["draft-noise-0.60", "draft-noise-0.20", "draft-noise-0.00"]
    assert "break-even acceptance (drafter ladder, real acceptance" in log
