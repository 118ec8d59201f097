"""From a server group's resolved config to what the ServerActor launches (None for an external
engine, whose URL is used as it is). The engine-specific command building lives in engines/."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engines.launch import LaunchSpec
from engines.sglang.command import build_sglang_launch, build_sim_launch


def launch_spec(config: Mapping[str, Any], run_dir: Path,
                sglang_version: str | None = None) -> LaunchSpec | None:
    """What to launch for `config`. `sglang_version` spells the flags for that SGLang release
    (engine=sglang; None = as given). A speculation threshold writes its adaptive config JSON
    under `run_dir/adaptive/`."""
    engine, model, variant = config["engine"], config["model"], config["variant"]
    if engine["name"] == "external":
        return None
    tp = variant.get("tp_size") or model["tp_size"]
    common: dict[str, Any] = dict(
        args=variant["args"], env=variant["env"], model_path=model["model_path"],
        draft_model_path=model.get("draft_model_path"),
        served_model_name=model.get("served_model_name"), tp_size=int(tp), run_dir=run_dir,
        ready_timeout_s=float(engine["ready_timeout_s"]),
        stop_timeout_s=float(engine["stop_timeout_s"]),
        disable_above_batch=variant.get("speculative_disable_above_batch"),
        api_key=engine.get("api_key"),
    )
    python = engine.get("python") or sys.executable
    if engine["name"] == "sim":
        return build_sim_launch(python=python, sim_args=engine.get("sim_args") or {}, **common)
    return build_sglang_launch(python=python, version=sglang_version,
                               launcher=engine["launcher"], **common)


def sglang_equivalent(config: Mapping[str, Any], run_dir: Path,
                      version: str | None) -> LaunchSpec:
    """The real-SGLang command a simulator group stands for, so SGLang's parser can check the
    flags that drive the simulator too."""
    as_sglang = dict(config)
    as_sglang["engine"] = {**config["engine"], "name": "sglang", "launcher": "serve"}
    spec = launch_spec(as_sglang, run_dir, version)
    assert spec is not None
    return spec
