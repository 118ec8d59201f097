"""The flags of `python -m grid.run`: Hydra's own (--help, --hydra-help, --version, --cfg,
--resolve, --package, --info, --config-dir, -m/--multirun, --run) plus --resume, and what the
flags that show something print. Sweep syntax never goes to Hydra's multirun launcher: it
defines grid axes (grid/plan/overrides.py), so -m is accepted and changes nothing.

Hydra's flags are spelled as in `hydra._internal.utils.get_args_parser` (hydra-core 1.3);
--config-path, --config-name, --shell-completion and --experimental-rerun are left out (one
primary config, no per-job pickles)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import hydra
from hydra._internal.hydra import Hydra
from omegaconf import Container, DictConfig, OmegaConf

from grid.cli.runrecord import specgrid_version
from grid.plan.config import ConfigError
from grid.plan.overrides import hydra_string

CONFIG_NAME = "config"


class UsageError(ConfigError):
    """A command line argparse rejects (unknown flag, missing value)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m grid.run", add_help=False, allow_abbrev=False,
                description="specgrid")
    p.add_argument("--help", "-h", action="store_true", help="Application's help")
    p.add_argument("--hydra-help", action="store_true", help="Hydra's help")
    p.add_argument("--version", action="version", help="Show specgrid's and Hydra's version",
                   version=f"specgrid {specgrid_version()} (Hydra {hydra.__version__})")
    p.add_argument("overrides", nargs="*",
                   help="Any key=value arguments to override config values (use dots for "
                        "nested=overrides); sweep syntax (key=a,b,c, range(), glob()) over "
                        "engine, model, variant, workload or load.* makes grid axes")
    p.add_argument("--cfg", "-c", choices=["job", "hydra", "all"],
                   help="Show config instead of running [job|hydra|all]; grid.axes includes "
                        "the command line's sweeps")
    p.add_argument("--resolve", action="store_true",
                   help="Used in conjunction with --cfg, resolve config interpolations before "
                        "printing.")
    p.add_argument("--package", "-p", help="Config package to show")
    p.add_argument("--run", "-r", action="store_true",
                   help="Run the grid (the default)")
    p.add_argument("--multirun", "-m", action="store_true",
                   help="Accepted for Hydra compatibility: sweeps always run as one grid in "
                        "this process (servers shared between cells)")
    p.add_argument("--config-dir", "-cd",
                   help="Adds an additional config dir to the config search path (your own "
                        "variant/, workload/, sweep/ ... options)")
    info_choices = ["all", "config", "defaults", "defaults-tree", "plugins", "searchpath"]
    p.add_argument("--info", "-i", const="all", nargs="?", choices=info_choices,
                   help=f"Print Hydra information [{'|'.join(info_choices)}]")
    p.add_argument("--resume", metavar="RUN_DIR",
                   help="Resume the run in RUN_DIR with the overrides recorded in its "
                        "run.json (more overrides may follow, e.g. run.retry_failed=false)")
    return p


def parse_args(argv: Sequence[str]) -> argparse.Namespace | int:
    """Parse the flags; UsageError (one line) for anything argparse rejects; the exit code
    when a flag already did everything (--version)."""
    try:
        args = build_parser().parse_intermixed_args(list(argv))
    except SystemExit as e:  # argparse's version action prints and exits
        return int(e.code or 0)
    shows = [name for name, on in (("--run", args.run), ("--multirun", args.multirun),
                                   ("--cfg", args.cfg), ("--info", args.info)) if on]
    if len(shows) > 1:
        raise UsageError(f"only one of --run, --multirun, --cfg and --info can be given "
                         f"(got {' and '.join(shows)})")
    if args.resolve and not (args.cfg or args.help):
        raise UsageError("--resolve can only be used together with --cfg or --help")
    return args


def wants_display(args: argparse.Namespace) -> bool:
    return bool(args.help or args.hydra_help or args.cfg or args.info)


def search_path_override(config_dir: str) -> str:
    """--config-dir DIR as the override Hydra reads it (recorded like any other override)."""
    path = Path(config_dir).expanduser().resolve()
    if not path.is_dir():
        raise ConfigError(f"--config-dir {config_dir}: no such folder")
    return f"hydra.searchpath=[{hydra_string('file://' + str(path))}]"


def display(args: argparse.Namespace, hydra_app: Hydra, fixed: list[str],
            compose_grid: Callable[[], DictConfig]) -> int:
    """--help, --hydra-help, --info or --cfg, the way Hydra prints them. `fixed` are the
    overrides without sweeps (which Hydra's run mode would reject as ambiguous);
    `compose_grid()` gives the composed config, hydra node included, with the command line's
    sweeps in grid.axes."""
    parser = build_parser()
    if args.help:
        hydra_app.app_help(config_name=CONFIG_NAME, args_parser=parser,
                           args=argparse.Namespace(overrides=fixed, resolve=args.resolve))
    elif args.hydra_help:
        hydra_app.hydra_help(config_name=CONFIG_NAME, args_parser=parser,
                             args=argparse.Namespace(overrides=fixed))
    elif args.info:
        hydra_app.show_info(args.info, config_name=CONFIG_NAME, overrides=fixed)
    else:
        return _show_cfg(args, hydra_app, compose_grid())
    return 0


def _show_cfg(args: argparse.Namespace, hydra_app: Hydra, full: DictConfig) -> int:
    """Hydra's `show_cfg` (hydra/_internal/hydra.py), with grid.axes as the run sees it."""
    OmegaConf.set_readonly(full.hydra, None)
    cfg = hydra_app.get_sanitized_cfg(full, args.cfg)
    package = None if args.package == "_global_" else args.package
    shown: Any = cfg if package is None else OmegaConf.select(cfg, package)
    if shown is None:
        raise ConfigError(f"package '{package}' not found in config")
    if not isinstance(shown, Container):
        print(shown)
        return 0
    if package is not None:
        print(f"# @package {package}")
    if args.resolve:
        OmegaConf.resolve(shown)
    sys.stdout.write(OmegaConf.to_yaml(shown))
    return 0
