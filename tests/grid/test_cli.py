"""The command line of `python -m grid.run`: Hydra's flags, sweep syntax as grid axes,
collisions, --resume and the printed resume commands. Real Hydra composition over conf/;
the end-to-end resume test runs the smoke sweep on real Ray and simulator processes."""

from __future__ import annotations

import json
import logging
import re
import shlex
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from grid.cli.flags import parse_args
from grid.plan.overrides import recorded_overrides
from grid.run import CONF_DIR, EXIT_BAD_INPUT, command_overrides, main, make_plan, run

REPO = Path(__file__).resolve().parents[2]
SMOKE_AS_SWEEP_SYNTAX = ["variant=baseline,eagle3", "load.concurrency=1,4", "workload=coding",
                         "workload.max_new_tokens=16", "load.num_requests=6",
                         "load.warmup_requests=1"]
"""The cells of conf/sweep/smoke.yaml, written as command-line sweeps."""


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grid.run", *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd or REPO)


def _main(capsys: pytest.CaptureFixture[str], *args: str) -> subprocess.CompletedProcess:
    """`python -m grid.run ARGS` in this process (`main`, what the module runs), its output
    captured: a flag's output without a second interpreter's start-up (~2 s each). The tests
    that need the real process (--help, sweep syntax as the shell passes it, nothing imported
    before a bad input) use `_cli`."""
    capsys.readouterr()
    handlers = {name: list(logging.getLogger(name).handlers) for name in ("", "hydra")}
    try:
        code = main(list(args))
    finally:  # Hydra's --info sets up logging on the captured stream, closed after the test
        for name, kept in handlers.items():
            logging.getLogger(name).handlers[:] = kept
    out = capsys.readouterr()
    return subprocess.CompletedProcess(list(args), code, out.out, out.err)


def _cell_ids(plan_text: str) -> list[str]:
    return re.findall(r"^  cell ([0-9a-f]{16}):", plan_text, flags=re.MULTILINE)


def _run_cli(argv: list[str]):
    """What `python -m grid.run ARGV` runs, with the outcome (main returns only the code)."""
    args = parse_args(argv)
    return run(command_overrides(args), echo=lambda line: None)


def _one_error_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("specgrid: error: ")
    return lines[0]


# --- Hydra's flags ---------------------------------------------------------------------------
def test_help_lists_config_groups_flags_and_config():
    proc = _cli("--help")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    options = {group: sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))
               for group in ("engine", "model", "sweep", "variant", "workload")}
    for group, names in options.items():
        assert f"{group}: {', '.join(names)}" in out
    for flag in ("--cfg,-c", "--info,-i", "--resolve", "--multirun,-m", "--resume",
                 "--config-dir,-cd"):
        assert flag in out
    assert "load:\n  concurrency: 1" in out  # the composed config, as Hydra's help shows it
    assert proc.stderr == ""


def test_cfg_job_prints_the_composed_grid_without_starting_anything(tmp_path, monkeypatch,
                                                                      capsys):
    results = tmp_path / "r"
    monkeypatch.chdir(tmp_path)
    proc = _main(capsys, "--cfg", "job", "variant=baseline,eagle3", "load.concurrency=1,8,64",
                 "workload.max_new_tokens=8", f"results_dir={results}")
    assert proc.returncode == 0, proc.stderr
    cfg = yaml.safe_load(proc.stdout)
    assert "hydra" not in cfg
    assert cfg["grid"]["axes"] == {"variant": ["baseline", "eagle3"],
                                   "concurrency": [1, 8, 64]}
    assert cfg["workload"]["max_new_tokens"] == 8
    assert not results.exists() and list(tmp_path.iterdir()) == []


def test_cfg_hydra_all_and_package(capsys):
    hydra_only = yaml.safe_load(_main(capsys, "--cfg", "hydra").stdout)
    assert list(hydra_only) == ["hydra"] and hydra_only["hydra"]["job"]["name"] == "specgrid"
    both = yaml.safe_load(_main(capsys, "--cfg", "all", "+sweep=smoke").stdout)
    assert "hydra" in both and both["grid"]["axes"]["concurrency"] == [1, 4]
    proc = _main(capsys, "--cfg", "job", "-p", "load", "--resolve", "+sweep=smoke")
    assert proc.stdout.startswith("# @package load\n")
    assert yaml.safe_load(proc.stdout)["num_requests"] == 6


def test_info_and_version(capsys):
    info = _main(capsys, "--info", "defaults", "+sweep=smoke")
    assert info.returncode == 0 and "Defaults List" in info.stdout
    assert re.search(r"\| sweep/smoke\s+\|", info.stdout)
    version = _main(capsys, "--version")
    assert version.returncode == 0 and re.match(r"specgrid \S+ \(Hydra 1\.3\.\d+\)",
                                                version.stdout)


# --- sweep syntax = grid axes ----------------------------------------------------------------
def test_sweep_syntax_gives_the_cells_of_the_sweep_file(tmp_path):
    from_file = make_plan(["+sweep=smoke", f"results_dir={tmp_path}"]).plan
    from_line = make_plan([*SMOKE_AS_SWEEP_SYNTAX, f"results_dir={tmp_path}"]).plan
    assert len(from_file.cells) == 4
    assert [c.cell_id for c in from_line.cells] == [c.cell_id for c in from_file.cells]
    assert [g.variant for g in from_line.groups] == ["baseline", "eagle3"]


@pytest.mark.parametrize("flag", [[], pytest.param(["-m"], marks=pytest.mark.slow),
                                  pytest.param(["--multirun"], marks=pytest.mark.slow)])
def test_sweep_syntax_on_the_real_command_line_with_or_without_multirun(flag, tmp_path):
    smoke = make_plan(["+sweep=smoke", f"results_dir={tmp_path}"]).plan
    proc = _cli(*flag, *SMOKE_AS_SWEEP_SYNTAX, "plan=true", f"results_dir={tmp_path}")
    assert proc.returncode == 0, proc.stderr
    assert len(smoke.cells) == 4
    assert _cell_ids(proc.stdout) == [c.cell_id for c in smoke.cells]
    assert not any(tmp_path.iterdir())


def test_a_sweep_replaces_the_axis_of_the_sweep_file(tmp_path):
    plan = make_plan(["+sweep=smoke", "load.concurrency=2,8", f"results_dir={tmp_path}"]).plan
    assert [(c.variant, c.concurrency) for c in plan.cells] == [
        ("baseline", 2), ("baseline", 8), ("eagle3", 2), ("eagle3", 8)]


def test_range_and_glob_sweeps(tmp_path):
    plan = make_plan(["variant=glob(*)", "load.concurrency=range(1,4)", "load.num_requests=2",
                      f"results_dir={tmp_path}"]).plan
    variants = sorted(p.stem for p in (CONF_DIR / "variant").glob("*.yaml"))
    assert sorted({c.variant for c in plan.cells}) == variants
    assert sorted({c.concurrency for c in plan.cells}) == [1, 2, 3]
    assert len(plan.cells) == 3 * len(variants)


def test_dotted_axes_and_typed_values_give_the_cells_of_the_sweep_file(tmp_path):
    """The env sweep narrowed with one-value sweeps (choice(x)) vs the same grid written with
    fixed overrides plus one command-line axis: same cells, env values as strings either way."""
    from_file = make_plan([
        "+sweep=env", "variant.env.NCCL_PROTO=choice(Simple)",
        "variant.env.CUDA_DEVICE_MAX_CONNECTIONS=choice(1)",
        "variant.args.enable_flashinfer_allreduce_fusion=choice(false)",
        "load.concurrency=choice(1)", f"results_dir={tmp_path}"]).plan
    from_line = make_plan([
        "variant=baseline", "load.requests_per_stream=4", "load.min_requests=8",
        "variant.env.NCCL_ALGO=Ring,Tree", "+variant.env.NCCL_PROTO=Simple",
        "+variant.env.NCCL_P2P_LEVEL=NVL", "+variant.env.CUDA_DEVICE_MAX_CONNECTIONS=1",
        "+variant.args.enable_flashinfer_allreduce_fusion=false",
        f"results_dir={tmp_path}"]).plan
    assert len(from_file.cells) == 2 and len(from_file.groups) == 2
    assert [c.cell_id for c in from_line.cells] == [c.cell_id for c in from_file.cells]
    assert [c.variant for c in from_line.cells] == ["baseline__nccl_algo-Ring",
                                                    "baseline__nccl_algo-Tree"]
    assert from_line.cells[0].config["variant"]["env"]["CUDA_DEVICE_MAX_CONNECTIONS"] == "1"


COLLISIONS = [
    (["+sweep=smoke", "load.concurrency=8"], "load.concurrency=8", "concurrency=[1, 4]",
     "sweep smoke"),
    (["+sweep=smoke", "variant=eagle3"], "variant=eagle3", "variant=['baseline', 'eagle3']",
     "sweep smoke"),
    (["+sweep=env", "+variant.env.NCCL_ALGO=Ring"], "+variant.env.NCCL_ALGO=Ring",
     "variant.env.NCCL_ALGO=['Ring', 'Tree']", "sweep env"),
    (["+grid.axes.concurrency=[1,2]", "load.concurrency=4"], "load.concurrency=4",
     "concurrency=[1, 2]", "grid.axes"),
    (["load.concurrency=1,2", "load.concurrency=4"], "load.concurrency=4",
     "concurrency=[1, 2]", "the command line"),
]


@pytest.mark.parametrize(("overrides", "override", "axis", "where"), COLLISIONS)
def test_override_colliding_with_an_axis_is_an_error_naming_both(
        overrides, override, axis, where, tmp_path, capsys):
    results = tmp_path / "r"
    outcome = run([*overrides, f"results_dir={results}"], echo=lambda line: None)
    assert outcome.exit_code == EXIT_BAD_INPUT
    line = _one_error_line(capsys.readouterr().err)
    assert f"override {override} collides with axis {axis} of {where}" in line
    assert not results.exists()


def test_override_colliding_with_an_extra_cell_is_an_error(tmp_path, capsys):
    extra = "grid.include=[{variant:eagle3,concurrency:16,workload.max_new_tokens:32}]"
    assert make_plan(["+sweep=smoke", extra, f"results_dir={tmp_path}"]).plan.cells[-1] \
        .config["workload"]["max_new_tokens"] == 32
    outcome = run(["+sweep=smoke", extra, "workload.max_new_tokens=8",
                   f"results_dir={tmp_path / 'r'}"], echo=lambda line: None)
    assert outcome.exit_code == EXIT_BAD_INPUT
    assert ("override workload.max_new_tokens=8 collides with workload.max_new_tokens=32 of an "
            "extra cell (grid.include) of sweep smoke") in _one_error_line(capsys.readouterr().err)


BAD_COMMAND_LINES = [
    (["--bogus"], "unrecognized arguments: --bogus"),
    (["--cfg", "yaml"], "argument --cfg/-c: invalid choice: 'yaml'"),
    (["--resume"], "--resume needs the run folder first"),  # it took results_dir=...
    (["--resolve", "+sweep=smoke"], "--resolve can only be used together with --cfg or --help"),
    (["-m", "--cfg", "job"], "only one of --run, --multirun, --cfg and --info"),
    (["load.concurrency=1,"], "cannot parse override 'load.concurrency=1,'"),
    (["variant=[baseline"], "cannot parse override 'variant=[baseline'"),
    (["load.concurrency"], "cannot parse override 'load.concurrency': missing EQUAL"),
    (["load.concurrency=interval(1,8)"], "interval() needs a sampling sweeper"),
    (["run.max_error_rate=0.1,0.2"], "run.max_error_rate cannot be a grid axis"),
    (["+sweep=smoke,concurrency"], "sweep cannot be a grid axis"),
    (["~load.rate=1,2"], "a deletion cannot be swept"),
    (["load.concurrency=1,2", "load.concurrency=4,8"], "sweeps load.concurrency a second time"),
    (["load.bogus=1,2"], "grid axis load.bogus: Key 'bogus' not in 'LoadConfig'"),
    (["engine.host=127.0.0.1,0.0.0.0"],
     "grid axis engine.host: engine.host changes how a run is operated"),
    (["load.request_timeout_s=10,20"],
     "grid axis load.request_timeout_s: load.request_timeout_s changes how a run is operated"),
    (["+sweep=smoke", "grid.include=[{variant:eagle3,load.bogus:1}]"],
     "grid axis load.bogus: Key 'bogus' not in 'LoadConfig'"),
]


@pytest.mark.parametrize(("argv", "message"), BAD_COMMAND_LINES)
def test_bad_command_line_is_one_clean_line_before_anything_starts(argv, message, tmp_path,
                                                                   capsys):
    results = tmp_path / "r"
    code = main([*argv, f"results_dir={results}"])
    assert code == EXIT_BAD_INPUT
    assert message in _one_error_line(capsys.readouterr().err)
    assert not results.exists()


def test_bad_input_exits_before_ray_is_imported(tmp_path):
    """A real process: an unknown flag and a collision exit 2 without importing Ray, nor the
    libraries only a plan or a report needs (scikit-learn, scipy.stats, matplotlib: ~2 s of a
    start on a laptop core)."""
    for argv in (["--nope"], ["+sweep=smoke", "load.concurrency=8"],
                 ["--resume", str(tmp_path)]):
        code = ("import sys; from grid.run import main; rc = main(sys.argv[1:]); "
                "heavy = {'ray', 'sklearn', 'scipy.stats', 'matplotlib'} & set(sys.modules); "
                "assert not heavy, heavy; sys.exit(rc)")
        proc = subprocess.run([sys.executable, "-c", code, *argv,
                               f"results_dir={tmp_path / 'r'}"],
                              capture_output=True, text=True, timeout=120, cwd=REPO)
        assert proc.returncode == EXIT_BAD_INPUT, proc.stderr
        _one_error_line(proc.stderr)
    assert list(tmp_path.iterdir()) == []


def test_config_dir_adds_options_and_is_recorded_as_a_search_path(tmp_path):
    conf = tmp_path / "my conf"
    (conf / "variant").mkdir(parents=True)
    (conf / "variant" / "capped.yaml").write_text(
        "name: capped\nargs:\n  max_running_requests: 16\n")
    argv = ["--config-dir", str(conf), "variant=baseline,capped", "load.num_requests=2",
            "plan=true", f"results_dir={tmp_path / 'r'}"]
    outcome = _run_cli(argv)
    assert outcome.exit_code == 0 and len(outcome.cell_ids) == 2
    globbed = make_plan(command_overrides(parse_args(
        ["--config-dir", str(conf), "variant=glob(*)", "load.num_requests=2",
         f"results_dir={tmp_path / 'r'}"]))).plan
    shipped = [p.stem for p in (CONF_DIR / "variant").glob("*.yaml")]
    assert sorted({c.variant for c in globbed.cells}) == sorted([*shipped, "capped"])
    first = command_overrides(parse_args(argv))[0]
    assert first == f"hydra.searchpath=['file://{conf.resolve()}']"
    assert first in recorded_overrides(command_overrides(parse_args(argv)))


# --- resume from the folder ------------------------------------------------------------------
def test_recorded_overrides_leave_out_what_names_the_folder():
    given = ["+sweep=smoke", "run.fresh=true", "load.concurrency=2,8", "run.id=x",
             "results_dir=/tmp/y", "plan=false", "run.retry_failed=false"]
    assert recorded_overrides(given) == ["+sweep=smoke", "load.concurrency=2,8",
                                         "run.retry_failed=false"]


def test_resume_composes_the_recorded_grid_in_that_folder(tmp_path):
    run_dir = tmp_path / "results" / "my run"
    run_dir.mkdir(parents=True)
    recorded = ["+sweep=smoke", "load.concurrency=2,8", "workload.max_new_tokens=12"]
    (run_dir / "run.json").write_text(json.dumps({"overrides": recorded}))
    original = make_plan([*recorded, f"results_dir={tmp_path / 'elsewhere'}"]).plan

    outcome = _run_cli(["--resume", str(run_dir), "plan=true"])
    assert outcome.exit_code == 0
    assert outcome.run_dir == run_dir.resolve()
    assert outcome.cell_ids == [c.cell_id for c in original.cells]
    assert sorted(p.name for p in run_dir.iterdir()) == ["run.json"]  # plan wrote nothing
    assert not (tmp_path / "elsewhere").exists()


@pytest.mark.parametrize("extra", ["run.id=other", "results_dir=/tmp", "run.fresh=true"])
def test_resume_rejects_overrides_that_name_another_folder(extra, tmp_path, capsys):
    (tmp_path / "run.json").write_text(json.dumps({"overrides": ["+sweep=smoke"]}))
    assert main(["--resume", str(tmp_path), extra]) == EXIT_BAD_INPUT
    assert "names the run folder" in _one_error_line(capsys.readouterr().err)


def test_resume_of_a_broken_record_is_one_line(tmp_path, capsys):
    (tmp_path / "run.json").write_text("{not json")
    assert main(["--resume", str(tmp_path)]) == EXIT_BAD_INPUT
    assert "is not a run record" in _one_error_line(capsys.readouterr().err)


def _printed_run_cli(lines: list[str]) -> list[str]:
    hits = [line.split("retry them with: ", 1)[1] for line in lines if "retry them with: " in line]
    assert len(hits) == 1, "\n".join(lines)
    argv = shlex.split(hits[0])
    assert argv[:3] == ["python", "-m", "grid.run"]
    return argv[3:]


@pytest.mark.slow
def test_printed_resume_command_after_fresh_run_resumes_that_folder(tmp_path, ray_session):
    """run.fresh=true makes a new timestamped folder; the command printed after its failed
    cells must resume that folder (not start another), with the same cells; grid.status
    prints the same command."""
    results = tmp_path / "results"
    first = ["+sweep=smoke", "run.fresh=true", f"results_dir={results}",
             "engine.options.error_rate=1.0"]  # every request fails -> every cell fails
    lines: list[str] = []
    outcome = run(first, echo=lines.append)
    assert outcome.exit_code != 0 and outcome.counts["failed"] == 4, "\n".join(lines)
    assert [p.name for p in results.iterdir()] == [outcome.run_dir.name]
    record = json.loads((outcome.run_dir / "run.json").read_text())
    assert record["overrides"] == ["+sweep=smoke", "engine.options.error_rate=1.0"]

    argv = _printed_run_cli(lines)
    assert argv == ["--resume", str(outcome.run_dir.resolve())]
    status = subprocess.run([sys.executable, "-m", "grid.status", str(outcome.run_dir)],
                            capture_output=True, text=True, timeout=60, cwd=REPO)
    assert f"resume with: python -m grid.run {shlex.join(argv)}" in status.stdout

    before = (outcome.run_dir / "run.json").read_text()
    assert _run_cli([*argv, "plan=true"]).cell_ids == outcome.cell_ids
    assert (outcome.run_dir / "run.json").read_text() == before  # plan=true records nothing

    again = _run_cli(argv)
    assert again.run_dir == outcome.run_dir and again.cell_ids == outcome.cell_ids
    assert [p.name for p in results.iterdir()] == [outcome.run_dir.name]
    with sqlite3.connect(outcome.run_dir / "_ledger.sqlite") as db:
        attempts = [a for (a,) in db.execute("SELECT attempts FROM cells")]
    assert attempts == [2, 2, 2, 2]
