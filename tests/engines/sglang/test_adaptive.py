"""The speculation threshold as SGLang's adaptive config, and the router the simulator uses."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from engines.sglang import adaptive
from engines.validation import FlagError

# SGLang 0.5.23's DEFAULT_ADAPTIVE_CONFIG (python/sglang/srt/speculative/adaptive_spec_params.py)
SGLANG_DEFAULT = {
    "1": {"candidate_steps": [1, 3, 5, 7], "up_hysteresis": 0.0, "down_hysteresis": -0.25,
          "ceiling_coeff": 0},
    "8": {"candidate_steps": [0, 1, 3], "up_hysteresis": 0.0, "down_hysteresis": 0.0,
          "ceiling_coeff": 0},
    "32": {"candidate_steps": [0, 1], "up_hysteresis": 0.0, "down_hysteresis": 0.0,
           "ceiling_coeff": 0},
    "64": {"candidate_steps": [0], "up_hysteresis": 0.0, "down_hysteresis": 0.0,
           "ceiling_coeff": 0},
}

EAGLE3 = {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3,
          "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}


def test_threshold_config_format() -> None:
    assert adaptive.threshold_config(3, 16) == {
        "1": {"candidate_steps": [3]}, "17": {"candidate_steps": [0]}}
    assert adaptive.candidate_steps(adaptive.threshold_config(3, 16)) == [0, 3]


@pytest.mark.parametrize(("steps", "n"), [(0, 4), (3, 0), (True, 4), (3, 2.5)])
def test_threshold_config_rejects_bad_values(steps: object, n: object) -> None:
    with pytest.raises(FlagError):
        adaptive.threshold_config(steps, n)  # type: ignore[arg-type]


def test_steps_for_batch_threshold() -> None:
    cfg = adaptive.threshold_config(3, 16)
    assert [adaptive.steps_for_batch(cfg, b) for b in (0, 1, 8, 16, 17, 64, 1000)] == [
        3, 3, 3, 3, 0, 0, 0]


def test_steps_for_batch_cuda_graph_padding() -> None:
    cfg = adaptive.threshold_config(3, 10)
    graphs = [1, 2, 4, 8, 12, 16]
    # 9 pads to 12 > 10: speculation already off; past the largest graph the size stays
    assert adaptive.steps_for_batch(cfg, 8, cuda_graph_bs=graphs) == 3
    assert adaptive.steps_for_batch(cfg, 9, cuda_graph_bs=graphs) == 0
    assert adaptive.steps_for_batch(cfg, 40, cuda_graph_bs=graphs) == 0


def test_steps_for_batch_sglang_default_tiers() -> None:
    # tiers 1-7 -> [1,3,5,7]; 8-31 -> [0,1,3]; 32-63 -> [0,1]; >=64 -> [0]
    got = [adaptive.steps_for_batch(SGLANG_DEFAULT, b, initial_steps=3)
           for b in (1, 7, 8, 31, 32, 63, 64, 512)]
    assert got == [3, 3, 3, 3, 1, 1, 0, 0]  # 3 not in [0, 1] -> middle candidate (1)
    assert adaptive.steps_for_batch(SGLANG_DEFAULT, 1) == 5  # no initial: middle of 4
    assert adaptive.candidate_steps(SGLANG_DEFAULT) == [0, 1, 3, 5, 7]


def test_load_tiers_is_robust(tmp_path: Path) -> None:
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps({"ema_alpha": 0.3, "strategy": "ema", **SGLANG_DEFAULT}))
    assert adaptive.load_tiers(path) == {1: [1, 3, 5, 7], 8: [0, 1, 3], 32: [0, 1], 64: [0]}
    assert adaptive.steps_for_batch(str(path), 100) == 0
    assert adaptive.load_tiers({1: {"candidate_steps": [3, 3]}}) == {1: [3]}  # int keys ok
    for bad in ({"1": {"candidate_steps": []}}, {"1": {"candidate_steps": [-1]}},
                {"1": {"candidate_steps": "3"}}, {"1": {}}, {"ema_alpha": 0.2}):
        with pytest.raises(ValueError):
            adaptive.load_tiers(bad)
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="JSON object"):
        adaptive.load_tiers(path)


@pytest.mark.parametrize(("override", "field"), [
    ({"speculative_algorithm": "NGRAM"}, "speculative_algorithm"),
    ({"speculative_algorithm": None}, "speculative_algorithm"),
    ({"speculative_eagle_topk": 4}, "speculative_eagle_topk"),
    ({"speculative_num_steps": None}, "speculative_num_steps"),
    ({"speculative_adaptive": True}, "speculative_adaptive"),
])
def test_threshold_needs_eagle_topk1_steps(override: dict, field: str) -> None:
    with pytest.raises(FlagError) as e:
        adaptive.check_threshold_args({**EAGLE3, **override}, 16, "0.5.23")
    assert e.value.field == field


def test_threshold_needs_zero_step_support() -> None:
    with pytest.raises(FlagError, match=r"0\.5\.13.*0\.5\.14"):
        adaptive.check_threshold_args(EAGLE3, 16, "0.5.13")
    assert adaptive.check_threshold_args(EAGLE3, 16, None) == 3
    assert adaptive.check_threshold_args({**EAGLE3, "speculative_eagle_topk": None,
                                          "speculative_algorithm": "EAGLE"}, 16, "0.5.14") == 3


# --------------------------------------------------------------------------- vs SGLang itself
SGLANG_PYTHON = os.environ.get("SPECGRID_SGLANG_PYTHON", "").split(os.pathsep)[0]
needs_sglang = pytest.mark.skipif(
    not SGLANG_PYTHON, reason="SPECGRID_SGLANG_PYTHON is not set: build the validation venv "
    "with scripts/validate_sglang_venv.sh")

# Runs inside the validation env: SGLang's own capture-list function and its own router
# (python/sglang/srt/arg_groups/cuda_graph_hook.py generate_decode_cuda_graph_batch_sizes,
# python/sglang/srt/speculative/adaptive_spec_params.py AdaptiveSpeculativeParams._route).
_SGLANG_PROBE = r"""
import json, sys, types
try:
    import safetensors.torch  # noqa: F401
except ImportError:  # the parser-only validation env lacks it; these functions never use it
    st = types.ModuleType("safetensors"); st.torch = types.ModuleType("safetensors.torch")
    st.torch.load = st.torch.save = None
    sys.modules["safetensors"], sys.modules["safetensors.torch"] = st, st.torch
from sglang.srt.arg_groups import cuda_graph_hook, overrides
from sglang.srt.speculative import adaptive_spec_params as asp
req = json.load(sys.stdin)
out = {"lists": {}, "routes": {}}
for key, (max_bs, spec, nopad) in req["lists"].items():
    sa = types.SimpleNamespace(speculative_algorithm="EAGLE3" if spec else None,
                               disable_cuda_graph_padding=nopad)
    overrides.resolving_view = lambda s: s
    cuda_graph_hook.resolving_view = lambda s: s
    out["lists"][key] = cuda_graph_hook.generate_decode_cuda_graph_batch_sizes(sa, max_bs)
asp.log_info_on_rank0 = lambda *a, **k: None
for key, (path, graphs, top) in req["routes"].items():
    p = asp.AdaptiveSpeculativeParams(initial_steps=3, cfg_path=path)
    p.set_cuda_graph_bs(graphs)
    out["routes"][key] = [p.get_steps_for_batch(b) for b in range(1, top + 1)]
print(json.dumps(out))
"""


def _config_file(config: dict, folder: Path) -> Path:
    """`config` as an adaptive-config file SGLang reads, one per distinct config."""
    text = json.dumps(config, sort_keys=True)
    path = folder / f"adaptive-{abs(hash(text))}.json"
    path.write_text(text)
    return path


def _sglang(request: dict[str, object]) -> dict[str, object]:
    proc = subprocess.run([SGLANG_PYTHON, "-c", _SGLANG_PROBE], input=json.dumps(request),
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


SHIPPED_THRESHOLDS = (8, 16, 32, 64)
"""conf/sweep/spec_threshold.yaml's speculative_disable_above_batch values."""


@needs_sglang
def test_capture_lists_and_threshold_routing_match_sglang(tmp_path: Path) -> None:
    lists = {f"{b}-{s}-{p}": (b, s, p) for b in (48, 160, 256, 512)
             for s in (True, False) for p in (False,)}
    lists["64-True-True"] = (64, True, True)
    graphs = adaptive.decode_capture_sizes(512, speculative=True)
    routes = {}
    thresholds = (*SHIPPED_THRESHOLDS, 6, 9, 10, 20, 30, 33, 100)
    for n in thresholds:
        routes[str(n)] = (str(_config_file(adaptive.threshold_config(3, n), tmp_path)),
                          graphs, 600)
    got = _sglang({"lists": lists, "routes": routes})
    for key, (max_bs, spec, nopad) in lists.items():
        assert adaptive.decode_capture_sizes(max_bs, speculative=spec,
                                             disable_padding=nopad) == got["lists"][key], key
    for n in thresholds:
        ours = [adaptive.steps_for_batch(adaptive.threshold_config(3, n), b,
                                         initial_steps=3, cuda_graph_bs=graphs)
                for b in range(1, 601)]
        assert ours == got["routes"][str(n)], n
        ranges, warning = adaptive.threshold_ranges(3, n, graphs)
        drafting = [b for b in range(1, 601) if got["routes"][str(n)][b - 1] == 3]
        assert [b for lo, hi in ranges for b in range(lo, hi + 1)] == drafting, n
        assert (warning is None) == (drafting[-1] == n), n


def test_threshold_ranges() -> None:
    graphs = adaptive.decode_capture_sizes(48, speculative=True)
    assert graphs[:12] == [1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16]
    assert adaptive.threshold_ranges(3, 10, graphs) == ([(1, 10)], None)
    ranges, warning = adaptive.threshold_ranges(3, 9, graphs)
    assert ranges == [(1, 8)] and warning is not None and "8 and 10" in warning
    assert adaptive.default_decode_max_bs(80 * 1024, 1, None) == 256
    assert adaptive.default_decode_max_bs(97_887, 8, 48) == 48


def test_threshold_notes_for_the_plan() -> None:
    variant = {"speculative_disable_above_batch": 9,
               "args": {**EAGLE3, "max_running_requests": 64}}
    lines = adaptive.threshold_notes("eagle3__off_above-9", variant)
    assert lines[0] == ("eagle3__off_above-9: drafts 3 steps at running batch 1-8; no drafting "
                        "above (speculative CUDA-graph sizes up to 64)")
    assert len(lines) == 2 and lines[1].startswith("eagle3__off_above-9: ")
    assert "between the captured CUDA-graph batch sizes 8 and 10" in lines[1]
    even = {"speculative_disable_above_batch": 16, "args": {**EAGLE3}}
    assert adaptive.threshold_notes("t16", even) == [
        "t16: drafts 3 steps at running batch 1-16; no drafting above (speculative CUDA-graph "
        "sizes up to 48)"]
    assert adaptive.threshold_notes("plain", {"args": EAGLE3}) == []


EAGLE3_ARGS = {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3,
               "speculative_eagle_topk": 1}


@needs_sglang
def test_honoured_thresholds_are_the_distinct_behaviours_of_sglang(tmp_path: Path) -> None:
    # Every threshold 1..99 routed by SGLang's own AdaptiveSpeculativeParams over the capture
    # list of max_bs 48: the honoured values are exactly the thresholds up to which SGLang
    # drafts as asked (one per distinct drafting set), captured sizes up to 48, every
    # integer past it (a batch larger than max_bs is not padded).
    graphs = adaptive.decode_capture_sizes(48, speculative=True)
    routes = {str(n): (str(_config_file(adaptive.threshold_config(3, n), tmp_path)),
                       graphs, 100) for n in range(1, 100)}
    got = _sglang({"lists": {}, "routes": routes})["routes"]
    drafting = {n: tuple(b for b in range(1, 101) if got[str(n)][b - 1] == 3)
                for n in range(1, 100)}
    exact = [n for n in range(1, 100) if drafting[n][-1] == n]
    honoured = adaptive.honoured_thresholds(
        {**EAGLE3_ARGS, "max_running_requests": 100, "cuda_graph_max_bs": 48})
    assert honoured == exact
    assert len(set(drafting.values())) == len(honoured)


def test_honoured_thresholds_by_memory_and_cap() -> None:
    # SGLang's default max_bs for a 131 GiB GPU is 256, lowered to the running cap (64):
    # captured sizes below 64 (1..8, 10..32 step 2, 40..60 step 4).
    got = adaptive.honoured_thresholds({**EAGLE3_ARGS, "max_running_requests": 64},
                                       gpu_memory_mib=131 * 1024)
    assert got == [*range(1, 9), *range(10, 33, 2), 40, 44, 48, 52, 56, 60]
    with pytest.raises(FlagError, match="needs speculative_algorithm EAGLE or EAGLE3"):
        adaptive.honoured_thresholds({**EAGLE3_ARGS, "speculative_algorithm": "NGRAM"})
