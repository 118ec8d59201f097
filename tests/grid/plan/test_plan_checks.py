"""What the plan checks and builds before anything starts: every cell's load specs, the engine
against its endpoint and URL, open-loop cells, and that planning writes nothing."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from grid.plan.cells import requests_for_cell
from grid.plan.checks import check_model_paths
from grid.plan.config import ConfigError
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


def _cell(model_path: str, engine: str = "vllm", draft: str | None = None,
          args: dict | None = None) -> SimpleNamespace:
    """What check_model_paths reads of a cell: its resolved config."""
    return SimpleNamespace(config={"engine": {"name": engine},
                                   "model": {"model_path": model_path,
                                             "draft_model_path": draft},
                                   "variant": {"args": args or {}}})


def _refusal(cells, kind: str = "local") -> str:
    with pytest.raises(ConfigError) as caught:
        check_model_paths(cells, kind)
    return str(caught.value)


def test_an_absent_model_folder_is_one_line_and_exit_2(tmp_path, capsys):
    results = tmp_path / "results"
    absent = tmp_path / "absent-model"
    outcome = run(["engine=vllm_cpu", f"model.model_path={absent}", "plan=true",
                   f"results_dir={results}"], echo=lambda _: None)
    err = capsys.readouterr().err.strip().splitlines()
    assert outcome.exit_code == EXIT_BAD_INPUT
    assert err == [f"specgrid: error: model.model_path={absent}: no config.json there; "
                   "give the folder of a model saved with its config.json, or a Hugging Face "
                   "repo id (org/name)"]
    assert not results.exists()


def test_tiny_models_not_built_yet_say_how_to_build_them(tmp_path, capsys, monkeypatch):
    """The README's real-engine sweep before scripts/tiny_models.py has run."""
    monkeypatch.setenv("SPECGRID_TINY_MODELS", str(tmp_path / "cache"))
    outcome = run(["+sweep=cpu_engines", "plan=true", f"results_dir={tmp_path / 'r'}"],
                  echo=lambda _: None)
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert outcome.exit_code == EXIT_BAD_INPUT
    assert err.startswith(f"specgrid: error: model.model_path={tmp_path / 'cache'}/")
    assert err.endswith("/target: no config.json there; build the tiny models with "
                        "`python scripts/tiny_models.py`")


def test_which_model_paths_are_checked(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    built = tmp_path / "built"
    built.mkdir()
    (built / "config.json").write_text("{}")
    check_model_paths([_cell(str(built)), _cell("~/built"), _cell("./built")], "local")
    # hub ids are the engine's to resolve; the simulator loads nothing; an external server
    # has its own; a cluster joined elsewhere has the folders on its nodes
    check_model_paths([_cell("meta-llama/Llama-3.1-8B-Instruct"), _cell("org/absent")], "local")
    check_model_paths([_cell("/absent", engine="sim"), _cell("/absent", engine="external")],
                      "local")
    check_model_paths([_cell("/absent")], "ray")
    assert _refusal([_cell("./absent")]).startswith("model.model_path=./absent: no config.json")
    assert _refusal([_cell("~/absent")]).startswith("model.model_path=~/absent: no config.json")
    # a speculative variant's draft model: its own, else the model's
    spec = {"speculative_algorithm": "EAGLE3"}
    assert _refusal([_cell(str(built), draft="/no-draft", args=spec)]).startswith(
        "model.draft_model_path=/no-draft: no config.json there")
    own = {**spec, "speculative_draft_model_path": "./no-head"}
    assert _refusal([_cell(str(built), draft=str(built), args=own)]).startswith(
        "variant.args.speculative_draft_model_path=./no-head: no config.json there")
    check_model_paths([_cell(str(built), draft="/no-draft")], "local")  # baseline: no draft
    # under the project's model cache: how to build them
    cache = tmp_path / ".cache" / "specgrid"
    monkeypatch.delenv("SPECGRID_TINY_MODELS", raising=False)
    assert _refusal([_cell(str(cache / "tiny-models" / "abc" / "target"))]).endswith(
        "build the tiny models with `python scripts/tiny_models.py`")
    assert _refusal([_cell(str(cache / "tiny-models" / "trained-abc" / "target"))]).endswith(
        "build the trained tiny models with `python scripts/train_models.py`")
