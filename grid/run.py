"""Entry point: `python -m grid.run +sweep=concurrency [overrides...]`.

Reads top to bottom: compose the config with Hydra, expand the grid into cells (one composed
config each), check everything that can be checked, then (unless plan=true) open the run folder
and its ledger, start or join Ray, run the cells that are not done, and print the summary.
Running the same command again resumes: done cells are skipped."""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import hydra
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

from grid.cells import Cell
from grid.config import ConfigError, check_choices, register_configs
from grid.ledger import DriverLock, RunLockedError
from grid.plan import Plan, build_plan, compose_cells, format_plan
from grid.record import RunRecord
from grid.report import run_summary, write_report
from grid.results import ResultsWriteError

CONF_DIR = Path(__file__).resolve().parent / "conf"
EXIT_FAILED_CELLS = 3
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130


@dataclass
class RunOutcome:
    exit_code: int
    run_dir: Path | None = None
    cell_ids: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)


def main(argv: Sequence[str] | None = None) -> int:
    overrides = list(sys.argv[1:] if argv is None else argv)
    if overrides and overrides[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    return run(overrides).exit_code


def run(overrides: list[str], echo: Callable[[str], None] = print) -> RunOutcome:
    try:
        plan = make_plan(overrides)
    except (ConfigError, ValueError, FileNotFoundError, hydra.errors.HydraException,
            OmegaConfBaseException) as e:
        _error(e)
        return RunOutcome(EXIT_BAD_INPUT)
    if plan.cfg.plan:
        echo(format_plan(plan.plan))
        return RunOutcome(0, plan.plan.run_dir, [c.cell_id for c in plan.plan.cells])
    try:
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


def make_plan(overrides: list[str]) -> _Planned:
    register_configs()
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF_DIR)):
        cfg = compose(config_name="config", overrides=overrides)
        check_choices(cfg)
        cells, prompts = compose_cells(
            cfg, overrides, lambda o: compose(config_name="config", overrides=o))
    results_dir = Path(cfg.results_dir).expanduser().resolve()
    return _Planned(cfg, build_plan(cfg, cells, prompts, results_dir), overrides)


# --- 2. execute ------------------------------------------------------------------------------
def execute(planned: _Planned, echo: Callable[[str], None]) -> RunOutcome:
    cfg, plan = planned.cfg, planned.plan
    try:
        plan.run_dir.mkdir(parents=True, exist_ok=True)
        (plan.run_dir / ".write-check").touch()
        (plan.run_dir / ".write-check").unlink()
    except OSError as e:
        raise ConfigError(f"results folder {plan.run_dir} is not writable: "
                          f"{e.strerror or e}") from None
    with DriverLock(plan.run_dir):
        record = RunRecord(plan.run_dir, plan.run_id)
        try:
            _recover(record, plan.cells, echo)
            todo = _cells_to_run(record, plan.cells, cfg.run.retry_failed, echo)
            for warning in plan.warnings:
                echo(f"warning: {warning}")
            code = _run_cells(cfg, plan, record, todo, echo) if todo else 0
            counts = record.counts(c.cell_id for c in plan.cells)
        finally:
            # No cell stays `running` once the driver leaves, whatever the path (SIGKILL
            # aside: the next start recovers those).
            record.interrupt_running("driver stopped while the cell ran")
            record.close()
    echo("")
    echo(run_summary(plan.run_dir, [c.cell_id for c in plan.cells]))
    write_report(plan.run_dir)
    resume = "python -m grid.run " + " ".join(_quote(o) for o in planned.overrides)
    if code == EXIT_INTERRUPTED:
        echo(f"\ninterrupted; resume with: {resume}")
    elif counts["failed"]:
        echo(f"\n{counts['failed']} cell(s) failed; see python -m grid.status {plan.run_dir}; "
             f"re-run the same command to retry them")
        code = code or EXIT_FAILED_CELLS
    echo(f"results: {plan.run_dir}")
    return RunOutcome(code, plan.run_dir, [c.cell_id for c in plan.cells], counts)


def _quote(text: str) -> str:
    return text if all(ch not in text for ch in " []'\"") else f"'{text}'"


def _recover(record: RunRecord, cells: Sequence[Cell], echo: Callable[[str], None]) -> None:
    """A previous driver that was killed may have left servers running, cells `running` and
    a commit half done; the ledger and the committed files are reconciled both ways."""
    record.recover(cells, echo)


def _cells_to_run(record: RunRecord, cells: Sequence[Cell], retry_failed: bool,
                  echo: Callable[[str], None]) -> list[Cell]:
    statuses = {c.cell_id: record.status(c.cell_id) for c in cells}
    counts: dict[str, int] = {}
    for status in statuses.values():
        counts[status] = counts.get(status, 0) + 1
    todo = [c for c in cells if statuses[c.cell_id] != "done"
            and (retry_failed or statuses[c.cell_id] != "failed")]
    parts = [f"{counts.get('done', 0)} done"]
    if counts.get("failed"):
        parts.append(f"{counts['failed']} failed -> {'re-run' if retry_failed else 'skipped'}")
    if counts.get("interrupted"):
        parts.append(f"{counts['interrupted']} interrupted -> re-run")
    parts.append(f"{counts.get('pending', 0)} pending")
    echo(f"{len(cells)} cells: " + ", ".join(parts) + f"; running {len(todo)}")
    return todo


def _run_cells(cfg: DictConfig, plan: Plan, record: RunRecord, todo: list[Cell],
               echo: Callable[[str], None]) -> int:
    # Imported here: planning and bad-input checks must not pay for importing Ray.
    from grid.cluster import connect
    from grid.controller import Controller, Interrupted

    def on_sigterm(signum: int, frame: object) -> None:
        raise Interrupted(f"signal {signum}")

    previous = signal.getsignal(signal.SIGTERM)
    try:
        connect(cfg, plan)
        # After ray.init: Ray installs a SIGTERM handler of its own that would just exit.
        signal.signal(signal.SIGTERM, on_sigterm)
        Controller(plan, record, max_error_rate=float(cfg.run.max_error_rate),
                   metrics_interval_s=cfg.run.metrics_interval_s, echo=echo).run(todo)
        return 0
    except (Interrupted, KeyboardInterrupt):
        record.interrupt_running("driver interrupted")
        return EXIT_INTERRUPTED
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
