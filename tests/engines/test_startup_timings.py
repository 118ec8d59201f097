"""Start-up phases' seconds as the engines log them (engines/launch.py `startup_timings`, the
patterns in engines/sglang/logphases.py and engines/vllm/logphases.py). The lines are the
installed engines' format strings filled in (SGLang 0.5.23, vLLM 0.32.0); the real-engine sweep
(tests/grid/engines/test_cpu_engines.py) checks the phases of real start-ups."""

from __future__ import annotations

from engines.launch import StartupTiming, startup_timings
from engines.sglang.logphases import SGLANG_STARTUP_TIMINGS
from engines.vllm.logphases import VLLM_STARTUP_TIMINGS

# SGLang 0.5.23's line, as srt/entrypoints/engine.py `_set_startup_time` formats it
SGLANG_LINE = ("[2026-12-01 10:00:09] Engine startup timings (s): load_weight=1.23, "
               "kv_cache_allocation=0.45, scheduler_e2e=3.21, cuda_graph={prefill=0.00, "
               "decode=2.50, target_verify=0.75, draft_prefill=0.00, draft_decode=0.00, "
               "draft_extend=0.00}, tokenizer_e2e=5.67\n")
# vLLM 0.32.0 with a draft model, one engine-core process (the lines as its loggers format
# them: default_loader.py, gpu_model_runner.py, v1/engine/core.py)
_CORE = "(EngineCore_DP0 pid=4242) INFO 12-01 10:00:0"
VLLM_LOG = (
    f"{_CORE}1 [default_loader.py:267] Loading weights took 0.40 seconds\n"
    f"{_CORE}2 [default_loader.py:267] Loading weights took 0.10 seconds\n"
    f"{_CORE}2 [gpu_model_runner.py:2653] Model loading took 1.2 GiB memory and 0.612345 "
    "seconds\n"
    f"{_CORE}9 [gpu_model_runner.py:3500] Graph capturing finished in 4 secs, took 0.50 GiB\n"
    f"{_CORE}9 [core.py:210] init engine (profile, create kv cache, warmup model) took 7.80 s "
    "(compilation: 3.10 s)\n")


def test_sglang_line_gives_its_phases_and_the_cuda_graphs_that_took_time():
    assert startup_timings("noise\n" + SGLANG_LINE + "more noise\n",
                           SGLANG_STARTUP_TIMINGS) == {
        "load_weight": 1.23, "kv_cache_allocation": 0.45, "scheduler_e2e": 3.21,
        "cuda_graph.decode": 2.5, "cuda_graph.target_verify": 0.75, "tokenizer_e2e": 5.67}


def test_vllm_lines_add_the_models_weights_within_one_process():
    assert startup_timings(VLLM_LOG, VLLM_STARTUP_TIMINGS) == {
        "load_weights": 0.5,  # the target's 0.40 then the draft model's 0.10
        "model_loading": 0.612345, "cuda_graphs": 4.0, "init_engine": 7.8,
        "compilation": 3.1}


def test_vllm_tensor_parallel_workers_take_the_slowest():
    log = ("(Worker_TP0 pid=1) INFO Loading weights took 2.00 seconds\n"
           "(Worker_TP1 pid=2) INFO Loading weights took 3.00 seconds\n"
           "(Worker_TP1 pid=2) INFO Loading weights took 0.50 seconds\n")  # TP1's drafter
    assert startup_timings(log, VLLM_STARTUP_TIMINGS) == {"load_weights": 3.5}


def test_vllm_cpu_init_without_compilation():
    line = "INFO 12-01 [core.py:210] init engine (profile, create kv cache, warmup model) " \
           "took 12.34 s\n"
    assert startup_timings(line, VLLM_STARTUP_TIMINGS) == {"init_engine": 12.34}


def test_a_log_without_the_lines_gives_no_phases():
    assert startup_timings("Uvicorn running on http://127.0.0.1:30000\n",
                           (*SGLANG_STARTUP_TIMINGS, *VLLM_STARTUP_TIMINGS)) == {}
    assert startup_timings("x took 3 s", (StartupTiming(r"x took (?P<x>[0-9.]+) s"),)) == \
        {"x": 3.0}

