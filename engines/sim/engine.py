"""The simulator behind the engine interface (engines/base.py): `python -m engines.sim` with the
same SGLang flags a real server would get (spelled as given: it has no version), plus its
`--sim-*` flags from `engine.options` (engines/sim/options.py); SGLang's metric names,
endpoints, parser and plan warnings (it stands in for SGLang); its identity from its profiles'
content (identity.py) and the calibrated envelope its numbers hold in (envelope.py)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from engines.base import (
    SGLANG_METRICS,
    CellWork,
    DepthSetting,
    Engine,
    EnvelopeFinding,
    MeasuredCell,
    Scenario,
    ServerRequest,
    SpeedupQuestion,
)
from engines.launch import Endpoints, LaunchSpec
from engines.sglang.adaptive import honoured_thresholds
from engines.sglang.command import build_sim_launch, speculation_on
from engines.sglang.engine import (
    adaptive_problem,
    schedule_setting,
    sglang_warnings,
    speculation_kwargs,
)
from engines.sglang.forced import forced_env, refuse_raw_env
from engines.sim import options as sim_options
from engines.sim.drafter import FLOOR_ALIGNMENT, FULL_ACCEPTANCE_AT
from engines.sim.envelope import envelope
from engines.sim.estimate import load_seconds
from engines.sim.identity import sim_version
from engines.sim.memory import memory_fit
from engines.sim.model import FORCED_RATES_ENV
from engines.sim.profile import gpu_memory_gib, twin_of


class Sim(Engine):
    name = "sim"
    label = "simulated SGLang"
    simulated = True
    start_estimate_s = 4.0
    endpoints = Endpoints()
    metrics = SGLANG_METRICS
    options = sim_options.OPTIONS
    flags_of = "sglang"
    alignment_acceptance = (FLOOR_ALIGNMENT, FULL_ACCEPTANCE_AT)

    def launch_spec(self, request: ServerRequest) -> LaunchSpec:
        options = dict(request.options)
        profile = str(options.get("profile") or "")
        if profile.endswith(".json") or "/" in profile:  # a file: the server's cwd may differ
            options["profile"] = str(Path(profile).resolve())
        spec = build_sim_launch(
            args=request.args, env=forced_sim_env(request), model_path=request.model_path,
            draft_model_path=request.draft_model_path,
            served_model_name=request.served_model_name, tp_size=request.tp_size,
            python=request.python, ready_timeout_s=request.ready_timeout_s,
            disable_above_batch=request.disable_above_batch,
            sim_options=options, host=request.host,
            api_key=request.api_key, stop_timeout_s=request.stop_timeout_s,
            revision=request.revision, draft_revision=request.draft_revision,
            **speculation_kwargs(request))
        return replace(spec, endpoints=self.endpoints)

    def check_options(self, options: Mapping[str, Any]) -> None:
        """The `--sim-*` flags it has, with values they take, and profiles that load."""
        sim_options.check(options)

    def drafter_options(self, train_data: str | None, train_mix: Mapping[str, float] | None
                        ) -> dict[str, Any]:
        """The simulated drafter follows the model's drafter (engines/sim/drafter.py): its
        training data, else its mix."""
        if train_data:
            return {"drafter_train_data": train_data}
        if train_mix:
            return {"drafter_train_mix": json.dumps(dict(train_mix), sort_keys=True)}
        return {}

    def version_label(self, options: Mapping[str, Any], version: str | None) -> str | None:
        """The simulator's release and its profiles' content (identity.py); the SGLang
        version it imitates is its own, whatever `version` says."""
        return sim_version(str(options.get("profile") or "default"), options.get("hardware"),
                           options.get("model"))

    def envelope(self, options: Mapping[str, Any], scenario: Scenario) -> EnvelopeFinding | None:
        return envelope(options, scenario)

    def modelled_gpus(self, server_info: Mapping[str, Any]) -> float | None:
        """The GPUs its hardware x model profile models (/server_info `sim.hardware.tp`: the
        default profile stands for a whole 8-GPU node behind one server, whatever --tp-size
        says)."""
        try:
            return float(server_info["sim"]["hardware"]["tp"])
        except (KeyError, TypeError, ValueError):
            return None

    def gpus(self, tp_size: int, device: str) -> int:
        """The simulator models GPUs it does not use: it reserves the logical GPUs of its
        placement, so parallel server groups pack as they would on a real node."""
        return tp_size

    def plan_warnings(self, variant: Mapping[str, Any], concurrencies: Sequence[int]
                      ) -> list[str]:
        return sglang_warnings(variant, concurrencies)

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

    def threshold_values(self, variant: Mapping[str, Any], hardware: str | None = None
                         ) -> list[int] | None:
        """As SGLang's (the simulator routes batches the same way, engines/sim/core.py), with
        the max_bs SGLang would pick for the modelled GPU's memory."""
        args = variant.get("args") or {}
        if not speculation_on(args):
            return None
        memory = gpu_memory_gib(hardware) if hardware else None
        return honoured_thresholds(args, None if memory is None else memory * 1024)

    def provenance(self, options: Mapping[str, Any]) -> str | None:
        """``twin of RUN`` when the profile (``engine.options.profile``) is a twin
        (docs/twin.md)."""
        run = twin_of(str(options.get("profile") or "default"))
        return f"twin of {run}" if run else None

    def fit_twin(self, cells: Sequence[MeasuredCell], *, run_id: str,
                 hardware: str | None = None, model: str | None = None,
                 start: str | None = None, seed: int = 0, replicates: int = 20,
                 holdout: Sequence[int] = (), holdout_workloads: Sequence[str] = ()
                 ) -> dict[str, Any]:
        from engines.sim.twin.document import build  # scipy: only when fitting

        return build(cells, run_id=run_id, hardware=hardware, model=model, start=start,
                     seed=seed, replicates=replicates, holdout=holdout,
                     holdout_workloads=holdout_workloads)

    def predict_speedups(self, profile: str, question: SpeedupQuestion
                         ) -> tuple[float, ...] | None:
        from engines.sim.twin.prior import speedups

        return speedups(profile, question)

    def depth_setting(self, request: ServerRequest) -> DepthSetting | None:
        """As SGLang's, with the max_bs SGLang would pick for the modelled GPU's memory (the
        simulator pads and routes the same way, engines/sim/core.py)."""
        hardware = request.options.get("hardware")
        memory = gpu_memory_gib(str(hardware)) if hardware else None
        return schedule_setting(self.name, request, None if memory is None else memory * 1024)

    def adaptive_refusal(self, variant: Mapping[str, Any]) -> str | None:
        return adaptive_problem(variant)


ENGINE = Sim()


def forced_sim_env(request: ServerRequest) -> dict[str, Any]:
    """The variant's environment with its forced acceptance in the simulator's words: a mean
    length as SGLang's SGLANG_SIMULATE_ACC_* (which the simulator honours as SGLang does),
    per-position rates as its own FORCED_RATES_ENV (its drafter replaced, step costs kept)."""
    refuse_raw_env(request.env)
    if FORCED_RATES_ENV in request.env:
        raise ValueError(f"variant.env.{FORCED_RATES_ENV}: force acceptance with "
                         "variant.forced_acceptance.rates (labelled and checked), not by hand")
    forced = request.forced
    if forced is None:
        return dict(request.env)
    if forced.rates is None:
        return {**request.env, **forced_env(forced)}
    return {**request.env, FORCED_RATES_ENV: ",".join(repr(r) for r in forced.rates)}
