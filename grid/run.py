"""Entry point: `python -m grid.run +sweep=concurrency [overrides...]` (`--help` lists the
config groups, options and flags).

Reads top to bottom: read the flags, compose the config with Hydra (sweep syntax on the command
line adds grid axes), expand the grid into cells (one composed config each), check everything
that can be checked, then (unless plan=true) open the run folder, record the command line in
its run.json, start or join Ray, run the cells that are not done, and print the summary.
Running the same command again resumes: done cells are skipped; so does
`python -m grid.run --resume RUN_DIR`."""

from __future__ import annotations

import argparse
import signal
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import hydra
from hydra import compose, initialize_config_dir
from hydra._internal.hydra import Hydra
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

from grid.analysis import Slo
from grid.cli.flags import CONFIG_NAME, display, parse_args, search_path_override, wants_display
from grid.cli.runrecord import read_run_record, resume_command, write_run_record
from grid.execute.progress import Progress
from grid.plan.build import (
    Plan,
    build_plan,
    compose_cells,
    compose_grid,
    format_plan,
)
from grid.plan.cells import Cell, group_by_server
from grid.plan.config import ConfigError, register_configs
from grid.plan.overrides import (
    NOT_RECORDED,
    hydra_string,
    override_keys,
    parse_overrides,
    recorded_overrides,
)
from grid.plan.search import (
    SearchError,
    search_kind,
    search_space,
    step_plan,
    universe_grid,
)
from grid.plan.workloads import WorkloadPlan
from grid.questions import Planned, question, schema_keys
from grid.store.files import check_writable
from grid.store.ledger import DriverLock, RunLockedError, Status
from grid.store.measured import measured_cells
from grid.store.record import EXIT_FAILED_CELLS, RunRecord
from grid.store.results import ResultsWriteError

if TYPE_CHECKING:
    from grid.execute.controller import Held


def _conf_dir() -> Path:
    """The Hydra configs: `conf/` at the top of a checkout (also under an editable install),
    mapped into the package as `grid/conf/` in a built wheel (setup.py)."""
    here = Path(__file__).resolve().parent
    packaged = here / "conf"
    return packaged if packaged.is_dir() else here.parent / "conf"


CONF_DIR = _conf_dir()
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
BAD_INPUT = (ConfigError, SearchError, ValueError, FileNotFoundError, hydra.errors.HydraException,
             OmegaConfBaseException)
"""What composing and planning raise for input that cannot run: one line, exit 2."""


@dataclass
class RunOutcome:
    exit_code: int
    run_dir: Path | None = None
    cell_ids: list[str] = field(default_factory=list)
    counts: dict[Status, int] = field(default_factory=dict)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
        if isinstance(args, int):
            return args
        overrides = command_overrides(args)
        if wants_display(args):
            return _display(args, overrides)
    except BAD_INPUT as e:
        _error(e)
        return EXIT_BAD_INPUT
    return run(overrides).exit_code


def command_overrides(args: argparse.Namespace) -> list[str]:
    """The overrides a command line runs with: --config-dir as Hydra's search path, and for
    --resume RUN_DIR the overrides recorded in RUN_DIR/run.json, then those given, then the
    folder as results_dir and run.id."""
    given = list(args.overrides)
    if args.config_dir:
        given.insert(0, search_path_override(args.config_dir))
    if not args.resume:
        return given
    run_dir = Path(args.resume).expanduser().resolve()
    if "=" in args.resume and not run_dir.exists():
        raise ConfigError(f"--resume needs the run folder first (got {args.resume!r})")
    named = [k for k in override_keys(given) if k in NOT_RECORDED and k != "plan"]
    if named:
        raise ConfigError(f"--resume {args.resume} names the run folder; drop "
                          f"{', '.join(named)}")
    return [*read_run_record(run_dir), *given, f"results_dir={hydra_string(str(run_dir.parent))}",
            f"run.id={hydra_string(run_dir.name)}"]


def run(overrides: list[str], echo: Callable[[str], None] = print) -> RunOutcome:
    try:
        plan = make_plan(overrides)
    except BAD_INPUT as e:
        _error(e)
        return RunOutcome(EXIT_BAD_INPUT)
    if plan.cfg.plan:
        if plan.search is not None:  # the search's first step and its budget
            first = plan.search.cells_of(plan.search.first_points())
            echo("\n".join(plan.search.plan_lines()))
            echo(format_plan(step_plan(plan.plan, first)))
            return RunOutcome(0, plan.plan.run_dir, [c.cell_id for c in first])
        echo(format_plan(plan.plan))
        return RunOutcome(0, plan.plan.run_dir, [c.cell_id for c in plan.plan.cells])
    try:
        if plan.cfg.cluster.kind == "ray":
            # A joined cluster's nodes are known once joined: check the placement before the
            # results folder or any server exists (grid/execute/cluster.py).
            from grid.execute.cluster import connect
            connect(plan.cfg, plan.plan)
        return execute(plan, echo)
    except (RunLockedError, ResultsWriteError, PermissionError, ConfigError) as e:
        _error(e)
        return RunOutcome(EXIT_BAD_INPUT)


# --- 1. compose and plan ---------------------------------------------------------------------
@dataclass
class _Planned:
    cfg: DictConfig
    plan: Plan
    overrides: list[str]
    search: Planned | None = None
    """The question an adaptive search asks (grid.search.kind, grid/questions/): `plan` holds
    every cell it may choose but those it plans when chosen (grid/execute/search.py)."""
    workloads: WorkloadPlan | None = None


@contextmanager
def _hydra() -> Iterator[Hydra]:
    """Hydra initialised on specgrid's configs (conf/; package data in a wheel)."""
    register_configs(schema_keys())
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF_DIR),
                               job_name="specgrid"):
        app = GlobalHydra.instance().hydra
        assert app is not None
        yield app


def _compose(overrides: list[str]) -> DictConfig:
    return compose(config_name=CONFIG_NAME, overrides=overrides)


def _group_options(app: Hydra) -> Callable[[str, list[str]], list[str]]:
    def options(group: str, fixed: list[str]) -> list[str]:
        return app.config_loader.get_group_options(group, config_name=CONFIG_NAME,
                                                   overrides=fixed)
    return options


def make_plan(overrides: list[str]) -> _Planned:
    with _hydra() as app:
        line = parse_overrides(overrides, _group_options(app))
        cfg = compose_grid(line, _compose)
        kind = search_kind(cfg)
        asked = None if kind is None else question(kind)  # SearchError: no such question
        if asked is not None:
            asked.check(cfg)
        grid_cfg = cfg if asked is None else universe_grid(cfg, search_space(cfg))
        cells, workloads = compose_cells(grid_cfg, line.fixed, _compose)
        context = None
        if asked is not None:  # every cell the question may choose (its loads, repeats ...)
            cells, context = asked.universe(cfg, cells, workloads)
    results_dir = Path(cfg.results_dir).expanduser().resolve()
    plan = build_plan(cfg, cells, workloads, results_dir)
    # A real engine's cells are estimated from what this run folder, or an earlier run beside
    # it, measured on their server; read only where an engine has no estimate of its own (the
    # simulator always has one: its runs read no Parquet at planning).
    if any(plan.cell_estimate(cell)[1] == "unknown" for cell in plan.cells):
        plan.measured = measured_cells(plan.run_dir, results_dir)
    setup = None if asked is None else asked.setup(cfg, plan.cells, workloads, context)
    return _Planned(cfg, plan, overrides, setup, workloads)


def _display(args: argparse.Namespace, overrides: list[str]) -> int:
    with _hydra() as app:
        line = parse_overrides(overrides, _group_options(app))
        return display(args, app, line.fixed, lambda: compose_grid(
            line, lambda o: compose(config_name=CONFIG_NAME, overrides=o,
                                    return_hydra_config=True)))


# --- 2. execute ------------------------------------------------------------------------------
def execute(planned: _Planned, echo: Callable[[str], None]) -> RunOutcome:
    cfg, plan = planned.cfg, planned.plan
    try:
        check_writable(plan.run_dir)
    except OSError as e:
        raise ConfigError(f"results folder {plan.run_dir} is not writable: "
                          f"{e.strerror or e}") from None
    with DriverLock(plan.run_dir):
        record = RunRecord(plan.run_dir, plan.run_id)
        try:
            write_run_record(plan.run_dir, recorded_overrides(planned.overrides))
            if planned.search is not None:
                code, cells = _search(planned, record, echo)
            else:
                cells = plan.cells
                _recover(record, plan.cells, echo)
                todo = _cells_to_run(record, plan.cells, cfg.run.retry_failed, echo)
                for warning in plan.warnings:
                    echo(f"warning: {warning}")
                code = _run_cells(cfg, plan, record, todo, echo)[0] if todo else 0
            counts = record.counts(c.cell_id for c in cells)
        finally:
            # No cell stays `running` once the driver leaves, whatever the path (SIGKILL
            # aside: the next start recovers those).
            record.interrupt_running("driver stopped while the cell ran")
            record.close()
    echo("")
    _report(cfg, plan, echo)  # the report at the end of every run
    resume = resume_command(plan.run_dir)
    if code == EXIT_INTERRUPTED:
        echo(f"\ninterrupted; resume with: {resume}")
    elif counts[Status.FAILED]:
        echo(f"\n{counts[Status.FAILED]} cell(s) failed; see python -m grid.status {plan.run_dir}; "
             f"retry them with: {resume}")
        code = code or EXIT_FAILED_CELLS
    echo(f"results: {plan.run_dir}")
    return RunOutcome(code, plan.run_dir, [c.cell_id for c in cells], counts)


def _search(planned: _Planned, record: RunRecord, echo: Callable[[str], None]
            ) -> tuple[int, list[Cell]]:
    """An adaptive search: each step's cells run with the normal controller
    (grid/execute/search.py); returns the exit code and every cell the search chose."""
    from grid.execute.search import plan_step, run_search

    cfg, plan, setup = planned.cfg, planned.plan, planned.search
    assert setup is not None
    _recover(record, [], echo)
    for warning in plan.warnings:
        echo(f"warning: {warning}")
    slo = Slo(cfg.slo.ttft_ms, cfg.slo.tpot_ms, cfg.slo.e2e_ms)

    # The servers a step ends on, handed to the next step's controller (Held): the run loop
    # owns them between steps and stops them when the search ends or is interrupted.
    held: Held | None = None

    def run_cells(cells: list[Cell]) -> int:
        nonlocal held
        echo(f"running {len(cells)} cell(s): " + ", ".join(c.describe() for c in cells))
        assert planned.workloads is not None
        step = plan_step(cfg, plan, setup, planned.workloads, cells)
        code, held = _run_cells(cfg, step, record, step.cells, echo, held, hold=True)
        return code

    try:
        outcome = run_search(setup, plan.run_dir, record, slo, run_cells, echo,
                             bool(cfg.run.retry_failed))
    finally:
        if held is not None:
            held.release()
    return outcome.code, outcome.cells


def _report(cfg: DictConfig, plan: Plan, echo: Callable[[str], None]) -> None:
    """The run's report (summary, report.html, decision.json, plots); a report that cannot
    be made is a message, never a failed run: the results are committed."""
    try:
        from grid.report import write_report  # here: matplotlib is ~0.3 s of a CLI start

        slo = Slo(cfg.slo.ttft_ms, cfg.slo.tpot_ms, cfg.slo.e2e_ms)
        report = write_report(plan.run_dir, slo, gpu_hour_usd=cfg.hardware.gpu_hour_usd)
    except Exception as e:  # noqa: BLE001 - the run's results stay valid without a report
        echo(f"report could not be written: {type(e).__name__}: {e}")
        return
    echo(report.summary)
    echo("")
    echo(f"report: {report.html}")
    echo(f"decision: {report.decision}")


def _recover(record: RunRecord, cells: Sequence[Cell], echo: Callable[[str], None]) -> None:
    """A previous driver that was killed may have left servers running, cells `running` and
    a commit half done; the ledger and the committed files are reconciled both ways."""
    record.recover(cells, echo)


def _cells_to_run(record: RunRecord, cells: Sequence[Cell], retry_failed: bool,
                  echo: Callable[[str], None]) -> list[Cell]:
    statuses = {c.cell_id: record.status(c.cell_id) for c in cells}
    counts = Counter(statuses.values())
    todo = [c for c in cells if statuses[c.cell_id] != Status.DONE
            and (retry_failed or statuses[c.cell_id] != Status.FAILED)]
    parts = [f"{counts[Status.DONE]} done"]
    if counts[Status.FAILED]:
        parts.append(f"{counts[Status.FAILED]} failed -> "
                     f"{'re-run' if retry_failed else 'skipped'}")
    if counts[Status.INTERRUPTED]:
        parts.append(f"{counts[Status.INTERRUPTED]} interrupted -> re-run")
    parts.append(f"{counts[Status.PENDING]} pending")
    echo(f"{len(cells)} cells: " + ", ".join(parts) + f"; running {len(todo)}")
    return todo


def _run_cells(cfg: DictConfig, plan: Plan, record: RunRecord, todo: list[Cell],
               echo: Callable[[str], None], held: Held | None = None, hold: bool = False
               ) -> tuple[int, Held | None]:
    """Run `todo` with a new controller: 0 or the exit code of an interruption, and (`hold`:
    a search's step) the servers it kept running for the next step. `held`: the servers the
    previous step kept, which this controller takes (grid/execute/controller.py Held)."""
    # Imported here: planning and bad-input checks must not pay for importing Ray.
    from grid.execute.cluster import connect
    from grid.execute.controller import Controller, Interrupted

    def on_sigterm(signum: int, frame: object) -> None:
        raise Interrupted(f"signal {signum}")

    previous = signal.getsignal(signal.SIGTERM)
    ctl: Controller | None = None
    try:
        node_gpus = connect(cfg, plan)
        # After ray.init: Ray installs a SIGTERM handler of its own that would just exit.
        signal.signal(signal.SIGTERM, on_sigterm)
        # Live progress; plain lines when stdout is not a terminal or echo is captured.
        live = echo is print and sys.stdout.isatty()
        estimates = [plan.cell_seconds(c) for g in group_by_server(todo) for c in g.cells]
        known = [e for e in estimates if e is not None]
        # Unknown ones (a real engine, nothing measured yet): the ETA follows finished cells.
        with Progress(len(todo), known if len(known) == len(estimates) else None, live=live,
                      echo=None if live else echo) as progress:
            ctl = Controller(plan, record, max_error_rate=float(cfg.run.max_error_rate),
                             call_timeout_s=float(cfg.run.call_timeout_s),
                             metrics_interval_s=cfg.run.metrics_interval_s,
                             echo=progress.echo, progress=progress,
                             telemetry_interval_s=cfg.run.telemetry_interval_s,
                             node_gpus=node_gpus, hold_last=hold, held=held)
            ctl.run(todo)
        return 0, ctl.handover() if hold else None
    except (Interrupted, KeyboardInterrupt):
        if ctl is not None:
            ctl.release()
        elif held is not None:
            held.release()
        record.interrupt_running("driver interrupted")
        return EXIT_INTERRUPTED, None
    except ResultsWriteError as e:
        # Nothing of the cell was committed; it runs again on resume.
        record.interrupt_running(f"results could not be written: {e}")
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)


def one_line(e: BaseException) -> str:
    """The first line of an error, with the first line of its cause (Hydra wraps OmegaConf's
    'Key X not in Y' / 'could not be converted' in a generic message), and the options Hydra
    lists for a missing config."""
    text = str(e).strip()
    line = text.splitlines()[0] if text else type(e).__name__
    cause = e.__cause__
    if cause is not None and str(cause).strip():
        line += f": {str(cause).strip().splitlines()[0]}"
    if "Available options in" in text:
        options = text.split("Available options in", 1)[1].split("Config search path")[0]
        names = [o.strip() for o in options.splitlines()[1:] if o.strip()]
        line += f" (available: {', '.join(names)})"
    return line


def _error(e: BaseException) -> None:
    print(f"specgrid: error: {one_line(e)}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
