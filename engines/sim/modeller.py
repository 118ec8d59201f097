"""The simulator's model behind the modelling interface (engines/modelling.py): its estimate of
a cell (estimate.py), its memory (memory.py), the calibrated envelope its numbers hold in
(envelope.py), the GPUs and the twin its profile stands for (profile.py), its drafter's
acceptance (drafter.py), and the twin fitted to a run and asked for a search's prior (twin/)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from engines.modelling import AssumedInterior, Modeller
from engines.planning import CellWork, EnvelopeFinding, Scenario
from engines.sim import options as sim_options
from engines.sim.drafter import FLOOR_ALIGNMENT, FULL_ACCEPTANCE_AT
from engines.sim.envelope import envelope
from engines.sim.estimate import load_seconds
from engines.sim.memory import memory_fit
from engines.sim.profile import twin_of
from engines.twin_data import MeasuredCell


class SimModeller(Modeller):
    alignment_acceptance = (FLOOR_ALIGNMENT, FULL_ACCEPTANCE_AT)

    def estimate_cell_seconds(self, work: CellWork) -> float:
        """From the simulator's own performance model of the cell's server (estimate.py): the
        simulator runs that model, so it knows its speed before measuring it."""
        return load_seconds(work)

    def fit_problem(self, variant: Mapping[str, Any], options: Mapping[str, Any],
                    tp_size: int) -> str | None:
        """The simulator's own start-up refusal (memory.py), from the profiles it would load:
        the same line its process prints before exiting."""
        fit = memory_fit(sim_options.profile_for(options), tp_size,
                         (variant.get("args") or {}).get("mem_fraction_static"))
        return fit.problem()

    def envelope(self, options: Mapping[str, Any], scenario: Scenario) -> EnvelopeFinding:
        return envelope(options, scenario)

    def modelled_gpus(self, server_info: Mapping[str, Any]) -> float | None:
        """The GPUs its hardware x model profile models (/server_info `sim.hardware.tp`: the
        default profile stands for a whole 8-GPU node behind one server, whatever --tp-size
        says)."""
        try:
            return float(server_info["sim"]["hardware"]["tp"])
        except (KeyError, TypeError, ValueError):
            return None

    def provenance(self, options: Mapping[str, Any]) -> str | None:
        """``twin of RUN`` when the profile (``engine.options.profile``) is a twin
        (docs/twin.md)."""
        run = twin_of(str(options.get("profile") or "default"))
        return f"twin of {run}" if run else None

    def assumed_interior(self, options: Mapping[str, Any]) -> AssumedInterior | None:
        """The default anchor's crossover range over the overhead forms and accept lengths
        that meet it (engines/sim/interior.py, stored in profiles/default.json)."""
        from engines.sim.interior import assumed  # the calibration's engine: only when asked

        return assumed(sim_options.profile_for(options))

    def drafter_options(self, train_data: str | None, train_mix: Mapping[str, float] | None
                        ) -> dict[str, Any]:
        """The simulated drafter follows the model's drafter (engines/sim/drafter.py): its
        training data, else its mix."""
        if train_data:
            return {"drafter_train_data": train_data}
        if train_mix:
            return {"drafter_train_mix": json.dumps(dict(train_mix), sort_keys=True)}
        return {}

    def fit_twin(self, cells: Sequence[MeasuredCell], *, run_id: str,
                 hardware: str | None = None, model: str | None = None,
                 start: str | None = None, seed: int = 0, replicates: int = 20,
                 holdout: Sequence[int] = (), holdout_workloads: Sequence[str] = ()
                 ) -> dict[str, Any]:
        from engines.sim.twin.document import build  # scipy: only when fitting

        return build(cells, run_id=run_id, hardware=hardware, model=model, start=start,
                     seed=seed, replicates=replicates, holdout=holdout,
                     holdout_workloads=holdout_workloads)

    def twin_summary(self, document: Mapping[str, Any], path: str, skipped: Sequence[str]
                     ) -> str:
        from engines.sim.twin.table import summary

        return summary(document, path, skipped)


MODELLER = SimModeller()
