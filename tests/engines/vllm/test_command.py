"""vLLM command lines from the shared variant vocabulary (engines/vllm/command.py), as pure
functions; and, where a vLLM is installed (SPECGRID_VLLM_PYTHON), every shipped variant checked
by vLLM's own parser and the speculation threshold by vLLM's own schedule code."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from engines.forced import forced_acceptance
from engines.launch import ServerRequest
from engines.vllm.command import (
    batch_ranges,
    build_vllm_launch,
    cpu_threads,
    threshold_schedule,
)
from engines.vllm.engine import ENGINE
from engines.vllm.validate import check_batch

ROOT = Path(__file__).resolve().parents[3]
VLLM_PYTHON = os.environ.get("SPECGRID_VLLM_PYTHON")
needs_vllm = pytest.mark.skipif(not VLLM_PYTHON, reason="SPECGRID_VLLM_PYTHON is not set")
EAGLE3 = {"max_running_requests": 8, "speculative_algorithm": "EAGLE3",
          "speculative_num_steps": 3, "speculative_eagle_topk": 1,
          "speculative_num_draft_tokens": 4}


def _argv(args: dict, *, disable_above_batch: int | None = None, device: str = "cuda",
          draft: str | None = "/m/draft") -> list[str]:
    return build_vllm_launch(ServerRequest(
        args=args, env={}, model_path="/m/target", draft_model_path=draft,
        served_model_name="tiny", python="py", device=device,  # type: ignore[arg-type]
        disable_above_batch=disable_above_batch)).argv


def _flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_baseline_maps_the_shared_names_to_vllms() -> None:
    argv = _argv({"max_running_requests": 64, "context_length": 4096,
                  "mem_fraction_static": 0.8, "disable_radix_cache": True})
    assert argv[:3] == ["py", "-m", "vllm.entrypoints.openai.api_server"]
    assert _flag(argv, "--max-num-seqs") == "64" and _flag(argv, "--max-model-len") == "4096"
    assert _flag(argv, "--gpu-memory-utilization") == "0.8"
    assert "--no-enable-prefix-caching" in argv and "--speculative-config" not in argv
    # vLLM refuses per-request speculative metrics without speculation (config/vllm.py)
    assert "--per-request-spec-decode-metrics" not in argv
    assert _flag(argv, "--host") == "127.0.0.1" and "--port" not in argv  # the actor adds it


def test_eagle3_is_one_speculative_config() -> None:
    spec = json.loads(_flag(_argv(EAGLE3), "--speculative-config"))
    assert spec == {"method": "eagle3", "num_speculative_tokens": 3, "model": "/m/draft"}
    assert _flag(_argv(EAGLE3), "--per-request-spec-decode-metrics") == "summary"
    draft = json.loads(_flag(_argv({**EAGLE3, "speculative_algorithm": "STANDALONE",
                                    "speculative_draft_model_path": "/m/near"}),
                             "--speculative-config"))
    assert draft["method"] == "draft_model" and draft["model"] == "/m/near"
    ngram = json.loads(_flag(_argv({**EAGLE3, "speculative_algorithm": "NGRAM"}, draft=None),
                             "--speculative-config"))
    assert ngram == {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 1,
                     "prompt_lookup_max": 3}


@pytest.mark.parametrize(("args", "message"), [
    ({**EAGLE3, "speculative_eagle_topk": 4}, "vLLM drafts a chain"),
    ({**EAGLE3, "speculative_algorithm": "LOOKAHEAD"}, "has no vLLM equivalent"),
    ({"max_running_requests": 8, "speculative_algorithm": "EAGLE3"}, "needs speculative_num"),
    ({"speculative_algorithm": "EAGLE3"}, "max_running_requests must be explicit"),
    ({**EAGLE3, "tensor_parallel_size": 2}, "tensor_parallel_size is set by"),
])
def test_variants_vllm_cannot_run_are_one_line(args: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _argv(args)
    with pytest.raises(ValueError, match="needs a draft model"):
        _argv(EAGLE3, draft=None)


def test_threshold_schedule_is_speculation_off_above_n() -> None:
    assert threshold_schedule(16, 3, 64) == [[1, 16, 3], [17, 64, 0]]
    assert threshold_schedule(64, 3, 64) == [[1, 64, 3]]  # never off: one range
    spec = json.loads(_flag(_argv(EAGLE3, disable_above_batch=2), "--speculative-config"))
    assert spec["num_speculative_tokens_per_batch_size"] == [[1, 2, 3], [3, 8, 0]]


def test_cpu_device_runs_eager_in_one_process_with_private_folders() -> None:
    spec = build_vllm_launch(ServerRequest(args={"max_running_requests": 8}, env={},
                                           model_path="/m", device="cpu", python="py"))
    assert "--enforce-eager" in spec.argv and _flag(spec.argv, "--dtype") == "bfloat16"
    assert _flag(spec.argv, "--distributed-executor-backend") == "uni"
    env = spec.env_in("/srv")
    assert env["TMPDIR"] == "/srv" and env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert env["VLLM_SERVER_DEV_MODE"] == "1"  # what serves /reset_prefix_cache
    assert spec.endpoints.flush_cache == "/reset_prefix_cache"
    assert spec.health_path == "/health"
    # one core left to the API server and the load generators; a variant's env overrides it
    assert env["OMP_NUM_THREADS"] == str(max(1, len(os.sched_getaffinity(0)) - 1))
    assert env["VLLM_CPU_OMP_THREADS_BIND"] == "nobind"
    mine = build_vllm_launch(ServerRequest(args={"max_running_requests": 8},
                                           env={"OMP_NUM_THREADS": 3}, model_path="/m",
                                           device="cpu", python="py"))
    assert mine.env_in("/srv")["OMP_NUM_THREADS"] == "3"


def test_cpu_threads_leave_the_core_vllm_keeps_for_its_scheduler(monkeypatch) -> None:
    for cores, threads in (({0, 1}, 1), ({0, 1, 2, 3, 4, 5, 6, 7}, 7), ({3}, 1)):
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid, cores=cores: cores)
        assert cpu_threads() == threads


@needs_vllm
def test_vllms_parser_accepts_every_shipped_variant_and_names_a_typo() -> None:
    argvs = {}
    for path in sorted((ROOT / "conf" / "variant").glob("*.yaml")):
        variant = yaml.safe_load(path.read_text())
        args = {k: v for k, v in variant["args"].items() if "${" not in str(v)}
        if args.get("speculative_num_steps") == 0:  # eagle3_k0: vLLM 0.32.0 takes no k = 0
            with pytest.raises(ValueError, match="speculative_num_steps must be >= 1 on vLLM"):
                _argv(args)
            continue
        argvs[path.stem] = _argv(args, disable_above_batch=variant.get(
            "speculative_disable_above_batch"))
    argvs["threshold"] = _argv(EAGLE3, disable_above_batch=2)
    argvs["typo"] = _argv({**EAGLE3, "max_num_seqz": 3})
    assert VLLM_PYTHON
    version, _, problems = check_batch(argvs, VLLM_PYTHON)
    assert version == "0.32.0"
    assert [(p.label, p.flag) for p in problems] == [("typo", "--max-num-seqz")]


@needs_vllm
def test_vllms_own_schedule_code_drafts_up_to_n_and_nothing_above() -> None:
    """vLLM's build_dynamic_sd_schedule_lookup (vllm/v1/spec_decode/dynamic/utils.py) expands
    our schedule into its per-batch-size token counts."""
    schedule = threshold_schedule(16, 3, 64)
    code = ("import json, sys; from vllm.v1.spec_decode.dynamic.utils import "
            "build_dynamic_sd_schedule_lookup as b; "
            "print(json.dumps(b(json.loads(sys.argv[1]), 64, 3)))")
    assert VLLM_PYTHON
    out = subprocess.run([VLLM_PYTHON, "-c", code, json.dumps(schedule)], capture_output=True,
                         text=True, timeout=120, check=True).stdout.splitlines()[-1]
    dense = json.loads(out)  # index = batch size (0 unused)
    assert dense[1:17] == [3] * 16 and dense[17:65] == [0] * 48


SCHEDULE = ((1, 5), (9, 3), (33, 1), (65, 0))
# By hand: each tier runs from its start to the next start - 1, the last to max_num_seqs;
# with max_num_seqs 64 the tier from 65 is never reached and left out.
RANGES_64 = [[1, 8, 5], [9, 32, 3], [33, 64, 1]]
RANGES_128 = [[1, 8, 5], [9, 32, 3], [33, 64, 1], [65, 128, 0]]


def _request(args: dict, **kw) -> ServerRequest:
    return ServerRequest(args=args, env={}, model_path="/m/target", draft_model_path="/m/draft",
                         python="py", **kw)


def test_a_depth_schedule_is_vllms_batch_size_schedule() -> None:
    assert batch_ranges(SCHEDULE, 64) == RANGES_64
    assert batch_ranges(SCHEDULE, 128) == RANGES_128
    # the threshold is the two-tier schedule [[1, k], [N+1, 0]]
    assert threshold_schedule(16, 3, 64) == batch_ranges(((1, 3), (17, 0)), 64)
    argv = build_vllm_launch(_request({**EAGLE3, "max_running_requests": 128},
                                      depth_schedule=SCHEDULE)).argv
    spec = json.loads(_flag(argv, "--speculative-config"))
    # num_speculative_tokens sizes vLLM's buffers: the largest depth (the variant said 3)
    assert spec["num_speculative_tokens"] == 5
    assert spec["num_speculative_tokens_per_batch_size"] == RANGES_128
    setting = ENGINE.depth_setting(_request({**EAGLE3, "max_running_requests": 128},
                                            depth_schedule=SCHEDULE))
    assert setting is not None and setting.flags[0] == "--speculative-config"
    assert json.loads(setting.flags[1]) == spec
    assert setting.tiers == ((1, 8, 5), (9, 32, 3), (33, 64, 1), (65, None, 0))


def test_runtime_adaptation_and_two_depth_settings_are_one_line() -> None:
    with pytest.raises(ValueError, match="vLLM 0.32.0 has no runtime adaptation"):
        build_vllm_launch(_request(EAGLE3, adaptive=True))
    with pytest.raises(ValueError, match="both set the speculative depth by batch size"):
        build_vllm_launch(_request(EAGLE3, depth_schedule=SCHEDULE, disable_above_batch=8))


@needs_vllm
def test_vllm_accepts_the_schedule_and_looks_up_each_batchs_depth() -> None:
    """vLLM's parser and schedule validator accept the command; vLLM's own
    build_dynamic_sd_schedule_lookup (vllm/v1/spec_decode/dynamic/utils.py, what the scheduler
    indexes by the number of scheduled requests) gives each batch size its tier's depth."""
    argv = build_vllm_launch(_request({**EAGLE3, "max_running_requests": 128},
                                      depth_schedule=SCHEDULE)).argv
    assert VLLM_PYTHON
    _, _, problems = check_batch({"schedule": argv}, VLLM_PYTHON)
    assert problems == []
    code = ("import json, sys; from vllm.v1.spec_decode.dynamic.utils import "
            "build_dynamic_sd_schedule_lookup as b; "
            "print(json.dumps(b(json.loads(sys.argv[1]), 128, 5)))")
    spec = json.loads(_flag(argv, "--speculative-config"))
    out = subprocess.run([VLLM_PYTHON, "-c", code,
                          json.dumps(spec["num_speculative_tokens_per_batch_size"])],
                         capture_output=True, text=True, timeout=300, check=True)
    dense = json.loads(out.stdout.splitlines()[-1])  # index = batch size (0 unused)
    assert dense[1:] == [5] * 8 + [3] * 24 + [1] * 32 + [0] * 64


def _forced(raw: dict, device: str = "cuda") -> dict:
    spec = build_vllm_launch(_request(EAGLE3, device=device,
                                      forced=forced_acceptance(raw, EAGLE3)))
    return json.loads(_flag(spec.argv, "--speculative-config"))


def test_forced_acceptance_is_vllms_synthetic_rejection_sampler() -> None:
    assert _forced({"length": 2.5}) == {
        "method": "eagle3", "num_speculative_tokens": 3, "model": "/m/draft",
        "rejection_sample_method": "synthetic", "synthetic_acceptance_length": 2.5}
    rates = _forced({"rates": [0.8, 0.6, 0.4]})
    assert rates["rejection_sample_method"] == "synthetic"
    assert rates["synthetic_acceptance_rates"] == [0.8, 0.6, 0.4]
    assert "synthetic_acceptance_length" not in rates


def test_forced_acceptance_on_vllms_cpu_is_refused() -> None:
    # vLLM 0.32.0's config accepts it there; its engine core then asserts at the first request
    with pytest.raises(ValueError, match="Synthetic acceptance not supported with CPU"):
        _forced({"length": 2.5}, device="cpu")


@needs_vllm
def test_vllms_own_resolver_checks_the_forced_fields() -> None:
    good = build_vllm_launch(_request(
        EAGLE3, forced=forced_acceptance({"length": 2.5}, EAGLE3))).argv
    bad = list(good)
    i = bad.index("--speculative-config") + 1
    spec = json.loads(bad[i])
    spec["synthetic_acceptance_length"] = 7.0  # beyond k + 1 = 4: vLLM's own message
    bad[i] = json.dumps(spec)
    assert VLLM_PYTHON
    _, _, problems = check_batch({"good": good, "bad": bad}, VLLM_PYTHON)
    assert [p.label for p in problems] == ["bad"]
    assert "synthetic_acceptance_length must be in [1, 4]" in problems[0].message
