"""From a server group's resolved config to what the ServerActor launches (or, for an external
engine, the URL to use). The engine-specific command building lives in engines/."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engines.launch import LaunchSpec
from engines.sglang.flags import server_args_to_argv


def launch_spec(config: Mapping[str, Any], run_dir: Path) -> LaunchSpec | None:
    """None for an external engine (nothing to launch)."""
    engine, model, variant = config["engine"], config["model"], config["variant"]
    if engine["name"] == "external":
        return None
    python = engine.get("python") or sys.executable
    args = dict(variant["args"])
    speculative = bool(args.get("speculative_algorithm"))
    args["model_path"] = model["model_path"]
    if speculative and model.get("draft_model_path"):
        args.setdefault("speculative_draft_model_path", model["draft_model_path"])
    if model.get("served_model_name"):
        args["served_model_name"] = model["served_model_name"]
    tp = variant.get("tp_size") or model["tp_size"]
    args["tp_size"] = tp
    if engine.get("api_key"):
        args["api_key"] = engine["api_key"]
    argv = [python, "-m", "engines.sim", *server_args_to_argv(args)]
    for key, value in sorted((engine.get("sim_args") or {}).items()):
        argv += [f"--sim-{key.replace('_', '-')}", str(value)]
    return LaunchSpec(
        argv=argv,
        env={k: str(v) for k, v in variant["env"].items()},
        health_path="/health",
        ready_timeout_s=float(engine["ready_timeout_s"]),
        stop_timeout_s=float(engine["stop_timeout_s"]),
        api_key=engine.get("api_key"),
    )
