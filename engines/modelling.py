"""The interface of an engine that models its numbers instead of measuring them (the simulator),
beside the one every engine has (engines/base.py). `engines/<name>/modeller.py` implements it
as its MODELLER; `engines.modeller(name)` finds it (None for an engine whose numbers are
measured), and `engines.twin_modeller()` is the one the driver fits twins with, asked by what it
does, not by its name.

A model answers, as pure functions of plain values, what a real server's numbers cannot tell
before they are measured: a cell's duration, its server's memory fit, the calibrated envelope,
the GPUs and the twin its numbers stand for, the drafter's modelled acceptance, and twins fitted
to a run and asked for predictions (docs/engines.md has the table, docs/twin.md the twin).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from engines.planning import CellWork, EnvelopeFinding, Scenario
from engines.twin_data import MeasuredCell


@dataclass(frozen=True)
class AssumedInterior:
    """Where a model's speedup curve is measured and where it is assumed: the loads its anchor
    measured, and the crossover over every assumption that meets those measurements."""

    measured_loads: tuple[float, ...]
    """The concurrencies the anchor measured (the default anchor: 1 and 64)."""
    crossover: tuple[float, float]
    """The lowest and highest crossover concurrency over the assumptions kept."""
    kept: tuple[str, ...]
    """The assumptions that meet the anchor, in words (`excess per verified draft token, accept
    length 2.36-3.12`)."""
    excluded: tuple[str, ...]
    """The assumptions tried that do not meet the anchor, each with by how much."""
    command: str
    """The command that computes it."""


class Modeller(ABC):
    """The model behind an engine whose numbers are modelled (module docstring)."""

    alignment_acceptance: ClassVar[tuple[float, float]]
    """The alignment with the drafter's training data at or below which every prompt gets the
    same off-distribution acceptance, and the one from which acceptance is full."""

    @abstractmethod
    def estimate_cell_seconds(self, work: CellWork) -> float:
        """Seconds the cell's load takes (warm-up included, the driver's per-cell overhead
        not), from the model of the cell's server."""

    @abstractmethod
    def fit_problem(self, variant: Mapping[str, Any], options: Mapping[str, Any],
                    tp_size: int) -> str | None:
        """Why a server of this variant (its config: `args`, ...) cannot start on its GPUs
        with these engine options and tensor-parallel size (its weights leave no room for a
        KV cache), one line; None when it fits."""

    @abstractmethod
    def envelope(self, options: Mapping[str, Any], scenario: Scenario) -> EnvelopeFinding:
        """Where `scenario` stands against what the model was calibrated on. ValueError when
        `options` name a calibration that cannot be read."""

    @abstractmethod
    def modelled_gpus(self, server_info: Mapping[str, Any]) -> float | None:
        """The GPUs a cell's numbers stand for, from its server's /server_info (a profile may
        stand for a whole node behind one server); None = the GPUs the server was given."""

    @abstractmethod
    def provenance(self, options: Mapping[str, Any]) -> str | None:
        """What the numbers stand for beyond the engine's label, from its engine config
        (`options`), e.g. `twin of RUN` on a twin's profile; None when there is nothing to add.
        ValueError for options it cannot read."""

    @abstractmethod
    def drafter_options(self, train_data: str | None, train_mix: Mapping[str, float] | None
                        ) -> dict[str, Any]:
        """Engine options that make the modelled acceptance follow the drafter's training data
        (a resolved path) or mix."""

    @abstractmethod
    def fit_twin(self, cells: Sequence[MeasuredCell], *, run_id: str,
                 hardware: str | None = None, model: str | None = None,
                 start: str | None = None, seed: int = 0, replicates: int = 20,
                 holdout: Sequence[int] = (), holdout_workloads: Sequence[str] = ()
                 ) -> dict[str, Any]:
        """A twin of the server that measured `cells` (docs/twin.md): a profile of the model
        fitted to them, as the JSON document to write beside the run (`twin.json`), with the
        fit's factors and intervals, every cell's fit and the leave-one-load-out error.
        `hardware` / `model` name the profiles that describe the node (datasheet, shapes),
        `start` the profile whose factors the fit starts from; `seed` and `replicates` the
        bootstrap's; `holdout` loads and `holdout_workloads` workloads held out as a split of
        their own (fitted on the other cells, predicted). ValueError (one line) when the cells
        cannot be fitted."""

    def assumed_interior(self, options: Mapping[str, Any]) -> AssumedInterior | None:
        """The crossover range the model's assumptions allow between the loads its anchor
        measured, for the profile `options` name; None where it has none (no anchor, or not
        computed). ValueError for options it cannot read."""
        return None

    @abstractmethod
    def twin_summary(self, document: Mapping[str, Any], path: str, skipped: Sequence[str]
                     ) -> str:
        """The printout of a twin `fit_twin` made and the driver wrote to `path`: its
        factors, every cell's fit, its held-out errors and its envelope, with the cells the
        driver left out (`skipped`, one line each) and how to run on it."""
