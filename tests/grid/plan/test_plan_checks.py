"""What the plan checks and builds before anything starts: every cell's load specs, the engine
against its endpoint and URL, open-loop cells, and that planning writes nothing."""

from __future__ import annotations

import pytest

from grid.plan.cells import requests_for_cell
from grid.run import EXIT_BAD_INPUT, make_plan, run

LOAD_ERRORS = [
    (["workload.max_new_tokens=-5"], "workload.max_new_tokens must be >= 1, got -5"),
    (["load.warmup_requests=-1"], "load.warmup_requests must be >= 0, got -1"),
    (["load.num_requests=0"], "load.num_requests must be >= 1, got 0"),
    (["+grid.axes.rate=[5]", "load.clients=2", "load.max_in_flight=1"],
     "load.max_in_flight 1 cannot be split over 2 clients"),
    (["load.request_timeout_s=0"], "load.request_timeout_s"),
    (["+grid.axes.rate=[5]", "load.burstiness=0"], "load.burstiness must be > 0"),
    # an option of another engine: the simulator names the options it has
    (["+engine.options.url=http://127.0.0.1:9"],
     "engine.options.url is not an option of engine=sim (its options: crash_after_requests,"),
    (["engine=external", "grid.axes.variant=[baseline]", "engine.options.url=ftp://host:1"],
     "engine.options.url: external server URL must be http:// or https://"),
    (["run.max_server_starts=0"], "run.max_server_starts must be >= 1"),
    (["engine.options.profile=/nonexistent/profile.json"], "simulator profile"),
    (["load.clients=2", "cluster.num_cpus=2"],
     "load.clients=2 x load.client_cpus=1 (+ the server's 0.01) need 2.01 CPUs"),
    (["load.client_cpus=0"], "load.client_cpus must be > 0"),
    (["grid.max_parallel_servers=0"], "grid.max_parallel_servers must be >= 1"),
    # sent as an HTTP header: every request of every cell would fail in the load generator
    (["engine.api_key='s3cr et'"], "engine.api_key must be visible ASCII characters only"),
    (["engine.api_key='s3crét'"], "engine.api_key must be visible ASCII characters only"),
]


@pytest.mark.parametrize(("overrides", "message"), LOAD_ERRORS)
def test_bad_load_is_one_line_before_anything_starts(overrides, message, tmp_path, capsys):
    results = tmp_path / "results"
    outcome = run(["+sweep=smoke", *overrides, f"results_dir={results}"], echo=lambda _: None)
    err = capsys.readouterr().err.strip().splitlines()
    assert outcome.exit_code == EXIT_BAD_INPUT
    assert len(err) == 1 and err[0].startswith("specgrid: error: "), err
    assert message in err[0]
    assert "s3cr" not in err[0]  # a secret is never echoed
    assert not results.exists()


def test_every_cell_has_validated_load_specs(tmp_path):
    plan = make_plan(["+sweep=smoke", "load.clients=2", "cluster.num_cpus=4",
                      f"results_dir={tmp_path}"]).plan
    assert set(plan.works) == {c.cell_id for c in plan.cells}
    for cell in plan.cells:
        specs = plan.work(cell).clients
        assert [s.client_index for s in specs] == [0, 1]
        assert {s.concurrency for s in specs} == {cell.concurrency}
        assert specs[0].num_requests == cell.num_requests == 6


def test_rate_cells_are_open_loop_unbounded_unless_max_in_flight(tmp_path):
    """A rate cell does not inherit load.concurrency (default 1); two clients split it."""
    plan = make_plan(["+sweep=smoke", "+grid.axes.rate=[5]", "load.clients=2",
                      "load.client_cpus=0.5", f"results_dir={tmp_path}"]).plan
    # The concurrency axis does not apply to open-loop cells: c=1 and c=4 are one cell.
    assert len(plan.cells) == 2
    for cell in plan.cells:
        assert cell.rate == 5 and cell.concurrency is None and cell.max_in_flight is None
        specs = plan.work(cell).clients
        assert [s.concurrency for s in specs] == [None, None]
        assert [s.my_rate for s in specs] == [2.5, 2.5]
        assert cell.num_requests == 6  # the smoke sweep's load.num_requests
    capped = make_plan(["+sweep=smoke", "+grid.axes.rate=[5]", "load.max_in_flight=3",
                        f"results_dir={tmp_path}"]).plan
    assert {s.concurrency for c in capped.cells for s in capped.work(c).clients} == {3}
    assert {c.cell_id for c in capped.cells}.isdisjoint({c.cell_id for c in plan.cells})


def test_plan_writes_nothing(tmp_path):
    """Even a threshold sweep (whose servers need an adaptive config file) plans without
    writing: the config travels as content in the launch spec."""
    results = tmp_path / "results"
    lines: list[str] = []
    outcome = run(["+sweep=spec_threshold", "plan=true", f"results_dir={results}"],
                  echo=lines.append)
    assert outcome.exit_code == 0
    assert not results.exists()
    text = "\n".join(lines)
    assert "{files}/adaptive-" in text and '"9":{"candidate_steps":[0]}' in text
    planned = make_plan(["+sweep=spec_threshold", f"results_dir={results}"]).plan
    files = [f for spec in planned.launches.values() if spec for f in spec.files]
    assert len(files) == 4 and all(f.startswith("adaptive-") for f in files)
    assert not results.exists()


def test_open_loop_request_count_follows_the_rate_not_the_concurrency():
    load = {"num_requests": None, "concurrency": 1, "rate": 12.0, "requests_per_stream": 2.0,
            "min_requests": 8}
    assert requests_for_cell(load) == 24  # 2 per stream x 12 arrivals/s (not 2 x c=1 -> 8)
    assert requests_for_cell({**load, "rate": None, "concurrency": 16}) == 32
    assert requests_for_cell({**load, "rate": None}) == 8  # the floor
