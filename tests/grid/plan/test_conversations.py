"""grid/plan/conversations.py: the conversation file read at plan time, each cell's client specs,
the turn rows' aggregates; and a bad conversation file is one line, exit 2, before Ray."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from grid.plan.cells import make_cell
from grid.plan.config import ConfigError
from grid.plan.conversations import conversation_specs, load_conversation_set
from workloads.conversations_data import AGENTIC

REPO = Path(__file__).resolve().parents[3]
WORKLOAD = {"name": "agentic_conversations", "kind": "conversations",
            "conversations": "agentic.jsonl", "format": "auto", "num_conversations": 6}


def _config(**load):
    return {
        "engine": {"name": "sim", "api_key": None},
        "model": {"name": "m", "model_path": "m", "tp_size": 1},
        "variant": {"name": "baseline", "args": {}, "env": {}},
        "workload": {**WORKLOAD, "endpoint": "generate", "time_scale": 1.0, "think_time": "none",
                     "think_time_s": 0.0, "replay": "recorded", "template": "llama3",
                     "max_turns": 3, "max_new_tokens": 8, "temperature": 0.0,
                     "ignore_eos": True},
        "load": {"concurrency": 3, "rate": None, "max_in_flight": None, "arrival": "poisson",
                 "burstiness": 1.0, "clients": 2, "duration_s": None, "request_timeout_s": 30.0,
                 "seed": 7, "transport": "raw", "num_requests": None, "requests_per_stream": 4,
                 "min_requests": 8, "tls_verify": True, "ca_bundle": None,
                 "keepalive_s": 60.0, **load},
    }


def test_shipped_file_loads_with_a_content_digest(tmp_path):
    found = load_conversation_set(WORKLOAD)
    assert len(found.conversations) == 6 and not found.notes
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(AGENTIC.read_bytes())
    same = load_conversation_set({**WORKLOAD, "conversations": str(copy)})
    assert same.digest == found.digest  # the content, not the path
    lines = AGENTIC.read_text().splitlines()
    copy.write_text("\n".join([lines[1], lines[0], *lines[2:]]) + "\n")
    assert load_conversation_set({**WORKLOAD, "conversations": str(copy)}).digest != found.digest


@pytest.mark.parametrize(("content", "message"), [
    (None, "not found"),
    ('{"nothing": "here"}\n', "in no known format"),
    ('{"id": "a", "messages": [{"role": "user"}]}\n', "no usable conversation"),
])
def test_bad_file_is_one_value_error(tmp_path, content, message):
    path = tmp_path / "bad.jsonl"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ValueError, match=message):
        load_conversation_set({**WORKLOAD, "conversations": str(path)})


def test_specs_deal_conversations_and_concurrency_over_clients():
    convs = load_conversation_set(WORKLOAD).conversations
    cell = make_cell({}, _config(), "d")
    specs = conversation_specs(cell, convs, "http://x:1")
    assert [s.concurrency for s in specs] == [2, 1]
    assert [c.conversation_id for c in specs[0].conversations] == \
        [c.conversation_id for c in convs[0::2]]
    assert [c.conversation_id for c in specs[1].conversations] == \
        [c.conversation_id for c in convs[1::2]]
    assert specs[0].closed_loop and specs[0].max_turns == 3 and specs[0].template == "llama3"
    assert specs[0].seed != specs[1].seed
    with pytest.raises(ConfigError, match="load.concurrency=1 is below load.clients=2"):
        conversation_specs(make_cell({}, _config(concurrency=1), "d"), convs, "http://x:1")
    # conversations have no trace arrival times: arrival=trace cannot be planned
    with pytest.raises(ConfigError, match="no arrival time"):
        conversation_specs(make_cell({}, _config(arrival="trace"), "d"), convs, "http://x:1")


def test_bad_conversation_file_exits_2_before_ray(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("this is not json\n")
    code = ("import sys; from grid.run import main; rc = main(sys.argv[1:]); "
            "assert 'ray' not in sys.modules; sys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code, "+sweep=agentic",
                           f"workload.conversations={bad}", f"results_dir={tmp_path / 'r'}"],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("specgrid: error: "), proc.stderr
    assert str(bad) in lines[0]
    assert not (tmp_path / "r").exists()


def test_agentic_sweep_plans_one_conversation_spec_per_cell(tmp_path):
    from grid.plan.build import format_plan
    from grid.run import make_plan

    plan = make_plan(["+sweep=agentic", f"results_dir={tmp_path}"]).plan
    assert len(plan.cells) == 4
    assert all(plan.work(c).unit == "rounds" for c in plan.cells)
    by_cell = {c.cell_id: c for c in plan.cells}
    for cell_id, cell in by_cell.items():
        (spec,) = plan.work(cell).clients
        assert spec.concurrency == by_cell[cell_id].concurrency
        assert len(spec.conversations) == 8 and spec.max_turns == 6
        assert spec.max_new_tokens == 32 and spec.template == "llama3"
    assert format_plan(plan).count("agentic_conversations conversations=8") == 4
    # the file's content is part of the cell id
    copy = tmp_path / "copy.jsonl"
    lines = AGENTIC.read_text().splitlines()
    copy.write_text("\n".join([lines[1], lines[0], *lines[2:]]) + "\n")
    other = make_plan(["+sweep=agentic", f"results_dir={tmp_path}",
                       f"workload.conversations={copy}"]).plan
    assert not {c.cell_id for c in other.cells} & set(by_cell)
    assert not tmp_path.joinpath(plan.run_id).exists()  # planning writes nothing


def test_conversation_specs_carry_the_load_connection_settings(tmp_path):
    """load.tls_verify / ca_bundle / keepalive_s reach conversation cells as they reach prompt
    cells (run_conversations builds its transport from them)."""
    from grid.run import make_plan

    plan = make_plan(["+sweep=agentic", "load.tls_verify=false", "load.keepalive_s=7",
                      f"results_dir={tmp_path}"]).plan
    specs = [s for c in plan.cells for s in plan.work(c).clients]
    assert specs and all(s.tls_verify is False and s.keepalive_s == 7.0 and s.ca_bundle is None
                         for s in specs)
