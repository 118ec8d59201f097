"""What the simulated server says about itself, in SGLang 0.5.23's shapes: /server_info (its
resolved args, the scheduler's internal state, and the simulator's own `sim` section),
/model_info and /v1/models. Plain functions of the resolved config and the running engine;
the HTTP handlers in server.py answer with them."""

from __future__ import annotations

from typing import Any

from engines.sim.cli import SIM_VERSION, SimConfig
from engines.sim.core import SimEngine

ENGINE_NAME = "specgrid-sim"


def server_info(cfg: SimConfig, engine: SimEngine, *, launch_command: str, status: str,
                startup_time: float) -> dict[str, Any]:
    """/server_info as SGLang 0.5.23 builds it (entrypoints/http_server.py server_info,
    utils/common.py build_server_info, managers/scheduler.py get_init_info), plus `sim`."""
    own = cfg.args
    args = {k: v for k, v in own.items()
            if k not in ("sim", "speculative_adaptive_config_resolved", "api_key")}
    args["api_key"] = "<set>" if own["api_key"] else None
    args.update({k: v for k, v in cfg.extra_flags.items() if k not in args})
    # SGLang 0.5.23 has no cuda_graph_max_bs server arg (renamed cuda_graph_max_bs_decode)
    graph_max_bs = args.pop("cuda_graph_max_bs", None)
    args.setdefault("cuda_graph_max_bs_decode", graph_max_bs)
    return {
        **args,
        "launch_command": launch_command,
        "status": status,
        "max_total_num_tokens": own["max_total_num_tokens"],
        "max_req_input_len": own["context_length"] - 1,
        "startup_time": startup_time,
        "internal_states": [_internal_state(cfg, engine, args, startup_time)],
        "version": SIM_VERSION,
        "frontend": "python",
        "simulated": True,
        "engine": ENGINE_NAME,
        # not in SGLang (its server_info has no such key): the resolved adaptive config
        "sim": {**engine.sim_info(), "speculative_adaptive_config_content":
                own["speculative_adaptive_config_resolved"]},
    }


def _internal_state(cfg: SimConfig, engine: SimEngine, args: dict[str, Any],
                    startup_time: float) -> dict[str, Any]:
    """SGLang 0.5.23 managers/scheduler_components/internal_state.py get_internal_state:
    resolved args + topology, memory_usage (memory_usage.py build_memory_usage),
    disaggregation fields, avg_spec_accept_length for speculative servers."""
    own, st, rl = cfg.args, engine.core.stats, engine.roofline
    weights_gb = rl.weight_bytes_per_gpu() / 1e9
    kv_gb = own["max_total_num_tokens"] * rl.model.kv_token_bytes / 1e9 / rl.kv_split
    internal: dict[str, Any] = {
        **{k: v for k, v in args.items() if k != "max_total_num_tokens"},  # top level only
        "world_size": rl.tp,
        "startup_time": startup_time,
        "effective_max_running_requests_per_dp": own["max_running_requests"],
        "last_gen_throughput": st.last_gen_throughput,
        "memory_usage": {"weight": round(weights_gb, 3), "kvcache": round(kv_gb, 3),
                         "startup_available": round(rl.hw.memory_gib * 2**30 / 1e9, 3),
                         "token_capacity": own["max_total_num_tokens"],
                         "token_capacity_swa": None, "graph": {}},
        "disaggregation_mode": "null",
        "decode_cuda_graph_bs": [] if own["disable_cuda_graph"] else engine.graph_bs,
        "decode_cuda_graph_memory_gb": 0.0,
        # not in SGLang: the simulator's live queue, for tests and debugging
        "num_running_reqs": len(engine.core.running),
        "num_queue_reqs": len(engine.core.waiting),
    }
    if engine.spec is not None:
        internal["avg_spec_accept_length"] = st.avg_spec_accept_length
    return internal


def model_info(cfg: SimConfig) -> dict[str, Any]:
    """/model_info: SGLang 0.5.23 entrypoints/http_server.py model_info's fields, in its
    order."""
    prof_model = cfg.profile.model_data
    return {
        "model_path": cfg.args["model_path"],
        "served_model_name": cfg.args["served_model_name"],
        "tokenizer_path": cfg.args["tokenizer_path"],
        "is_generation": True,
        "preferred_sampling_params": None,
        "weight_version": "default",
        "load_format": "auto",
        "reasoning_parser": None,
        "tool_call_parser": None,
        "disaggregation_mode": "null",
        "has_image_understanding": False,
        "has_audio_understanding": False,
        "model_type": prof_model.get("model_type", "llama"),
        "architectures": prof_model.get("architectures", ["LlamaForCausalLM"]),
        "simulated": True,
        "engine": ENGINE_NAME,
    }


def models(cfg: SimConfig, started_at: float) -> dict[str, Any]:
    """/v1/models: the one served model."""
    return {"object": "list", "data": [{
        "id": cfg.args["served_model_name"], "object": "model", "created": int(started_at),
        "owned_by": "sglang", "root": cfg.args["model_path"],
        "max_model_len": cfg.args["context_length"]}]}
