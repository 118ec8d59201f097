"""SGLang start-up phases as log-line patterns (shown as progress while a server starts).

The lines, as SGLang 0.5.23 logs them (0.5.13 differs only where noted):
- `Load weight begin. avail mem=...` / `Load weight end. ...`
  (srt/model_executor/model_runner.py)
- `KV Cache is allocated. dtype: ..., #tokens: ...` (srt/mem_cache/memory_pool.py; 0.5.23 may
  prefix an allocation label, or say `VA upper bound` instead of `is allocated`) and
  `Memory pool end. avail mem=...` (srt/mem_cache/kv_cache_configurator.py)
- `Capture target decode CUDA graph begin. ...` / `Capture target verify CUDA graph begin.`
  (0.5.23, srt/model_executor/model_runner_components/cuda_graph_setup.py); 0.5.13 says
  `Capture cuda graph begin. This can take up to several minutes.`
- `Capture draft decode CUDA graph begin.` / `Capture draft extend CUDA graph begin.`
  (srt/speculative/eagle_worker_v2.py; EAGLE's draft graphs)
- `Uvicorn running on ...` (srt/entrypoints/http_server.py: HTTP listens, warm-up follows)
- `The server is fired up and ready to roll!` (srt/entrypoints/http_server.py, after warm-up)

Start-up seconds, as 0.5.23 logs them once per start (srt/entrypoints/engine.py
`_set_startup_time`; the ranks' critical path, srt/observability/startup_time.py):
`Engine startup timings (s): load_weight=1.23, kv_cache_allocation=0.45, scheduler_e2e=3.21,
cuda_graph={prefill=0.00, decode=1.10, ...}, tokenizer_e2e=5.67`. load_weight counts the target's
and the draft model's; scheduler_e2e is a scheduler's whole start, tokenizer_e2e the engine's.
"""

from __future__ import annotations

from engines.launch import LogPhase, StartupTiming

READY_LINE = "The server is fired up and ready to roll!"
"""SGLang logs this once its warm-up request succeeded; /health_generate answers 200 after."""

SGLANG_LOG_PHASES: tuple[LogPhase, ...] = (
    LogPhase(r"Load weight begin", "loading weights"),
    LogPhase(r"Load weight end", "weights loaded"),
    LogPhase(r"KV Cache (is allocated|VA upper bound)", "allocating KV cache"),
    LogPhase(r"(?i)\bCapture .*graph begin", "capturing CUDA graphs"),
    LogPhase(r"Uvicorn running on", "HTTP listening, warming up"),
    LogPhase(r"The server is fired up and ready to roll!", "ready"),
)
"""Phases in start-up order; ServerActor searches each log line for each pattern."""

SGLANG_STARTUP_TIMINGS: tuple[StartupTiming, ...] = (
    StartupTiming(r"Engine startup timings \(s\): load_weight=(?P<load_weight>[0-9.]+), "
                  r"kv_cache_allocation=(?P<kv_cache_allocation>[0-9.]+), "
                  r"scheduler_e2e=(?P<scheduler_e2e>[0-9.]+), "
                  r"cuda_graph=\{(?P<cuda_graph>[^}]*)\}, "
                  r"tokenizer_e2e=(?P<tokenizer_e2e>[0-9.]+)"),
)
"""SGLang's start-up seconds per phase (the CUDA graph phases that took time as
`cuda_graph.<phase>`)."""
