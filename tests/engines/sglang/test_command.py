"""Command building for SGLang (both version families) and the simulator; merged env."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from engines.launch import FILES_DIR, ServerRequest
from engines.sglang import adaptive
from engines.sglang.command import (
    Launcher,
    build_sglang_launch,
    build_sim_launch,
    concurrency_warnings,
    sim_flags,
    threshold_warnings,
)
from engines.sglang.logphases import READY_LINE, SGLANG_LOG_PHASES
from engines.validation import FlagError

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
DRAFT = "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
EAGLE3 = {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3,
          "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4,
          "max_running_requests": 64}


def build(tmp_path: Path, args: dict[str, Any], launcher: Launcher = "serve", **kw: Any):
    base: dict[str, Any] = dict(
        args=args, env={}, model_path=MODEL, draft_model_path=DRAFT,
        served_model_name="llama3.1-8b", tp_size=8, version="0.5.23",
        python="/opt/sglang/bin/python", ready_timeout_s=1800)
    base.update(kw)
    return build_sglang_launch(ServerRequest(**base), launcher)


def test_eagle3_serve_0_5_23(tmp_path: Path) -> None:
    spec = build(tmp_path, {**EAGLE3, "cuda_graph_max_bs": 64})
    assert spec.argv == [
        "/opt/sglang/bin/sglang", "serve", "--model-type", "llm",
        "--model-path", MODEL, "--served-model-name", "llama3.1-8b", "--tp-size", "8",
        "--base-gpu-id", "0", "--host", "127.0.0.1", "--max-running-requests", "64",
        "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", DRAFT,
        "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "4",
        "--cuda-graph-max-bs-decode", "64", "--enable-metrics",
    ]
    assert spec.port_flag == "--port" and spec.extra_port_flags == ("--nccl-port",)
    assert spec.health_path == "/health_generate" and spec.ready_timeout_s == 1800
    assert spec.log_phases == SGLANG_LOG_PHASES and spec.api_key is None
    assert "--port" not in spec.argv and "--nccl-port" not in spec.argv


def test_old_family_launch_server(tmp_path: Path) -> None:
    spec = build(tmp_path, {**EAGLE3, "cuda_graph_max_bs": 64}, version="0.5.13",
                 launcher="launch_server", python="python3")
    assert spec.argv[:3] == ["python3", "-m", "sglang.launch_server"]
    assert "--model-type" not in spec.argv
    i = spec.argv.index("--cuda-graph-max-bs")
    assert spec.argv[i + 1] == "64" and "--cuda-graph-max-bs-decode" not in spec.argv


def test_serve_without_directory_uses_path_lookup(tmp_path: Path) -> None:
    assert build(tmp_path, {"max_running_requests": 8}, python="python").argv[:2] == [
        "sglang", "serve"]


def test_baseline_gets_no_draft_and_explicit_cap(tmp_path: Path) -> None:
    spec = build(tmp_path, {"max_running_requests": 32})
    assert "--speculative-draft-model-path" not in spec.argv
    assert spec.argv[spec.argv.index("--max-running-requests") + 1] == "32"


def test_missing_max_running_requests_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FlagError, match="max_running_requests.*48"):
        build(tmp_path, {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3})


@pytest.mark.parametrize("field", ["model_path", "port", "nccl_port", "tp_size", "host",
                                   "base_gpu_id", "api_key", "enable_metrics"])
def test_reserved_fields_rejected(tmp_path: Path, field: str) -> None:
    with pytest.raises(FlagError, match=field):
        build(tmp_path, {"max_running_requests": 8, field: 1})


def test_draft_rules(tmp_path: Path) -> None:
    with pytest.raises(FlagError, match="draft"):
        build(tmp_path, EAGLE3, draft_model_path=None)
    spec = build(tmp_path, {**EAGLE3, "speculative_draft_model_path": "other/draft"})
    assert spec.argv[spec.argv.index("--speculative-draft-model-path") + 1] == "other/draft"
    ngram = build(tmp_path, {"speculative_algorithm": "NGRAM", "max_running_requests": 8})
    assert "--speculative-draft-model-path" not in ngram.argv
    with pytest.raises(FlagError, match="without speculative_algorithm"):
        build(tmp_path, {"max_running_requests": 8, "speculative_draft_model_path": "d"})


def test_threshold_variant(tmp_path: Path) -> None:
    spec = build(tmp_path, EAGLE3, disable_above_batch=16)
    i = spec.argv.index("--speculative-adaptive-config")
    assert "--speculative-adaptive" in spec.argv
    # The config travels as content; the command names it under the actor's files folder.
    assert spec.argv[i + 1].startswith(FILES_DIR + "/adaptive-")
    [(name, content)] = spec.files.items()
    assert spec.argv[i + 1] == f"{FILES_DIR}/{name}"
    assert json.loads(content) == {"1": {"candidate_steps": [3]},
                                   "17": {"candidate_steps": [0]}}
    (tmp_path / name).write_text(content)
    assert spec.argv_in(str(tmp_path))[i + 1] == str(tmp_path / name)
    assert adaptive.steps_for_batch(tmp_path / name, 16) == 3
    assert adaptive.steps_for_batch(tmp_path / name, 17) == 0
    assert list(tmp_path.iterdir()) == [tmp_path / name]  # building wrote nothing
    # the same threshold on another server has the same (content-addressed) name
    assert build(tmp_path, {**EAGLE3, "max_running_requests": 128},
                 disable_above_batch=16).argv[i + 1] == spec.argv[i + 1]
    assert build(tmp_path, EAGLE3, disable_above_batch=8).argv[i + 1] != spec.argv[i + 1]
    with pytest.raises(FlagError, match="0.5.14"):
        build(tmp_path, EAGLE3, disable_above_batch=16, version="0.5.13")
    with pytest.raises(FlagError, match="EAGLE"):
        build(tmp_path, {"max_running_requests": 8}, disable_above_batch=16)


def test_env_strings_and_api_key(tmp_path: Path) -> None:
    spec = build(tmp_path, {"max_running_requests": 8}, api_key="sk-secret",
                 env={"NCCL_P2P_DISABLE": 1, "FLAG": True, "GONE": None})
    assert spec.env == {"NCCL_P2P_DISABLE": "1", "FLAG": "1"}
    assert spec.api_key == "sk-secret" and spec.api_key_flag == "--api-key"
    assert "sk-secret" not in spec.argv  # the ServerActor appends it at launch


def test_bind_host_and_the_run_key(tmp_path: Path) -> None:
    """A server bound beyond loopback gets the run's key unless it has its own; one that only
    its node can reach gets none."""
    local = build(tmp_path, {"max_running_requests": 8})
    assert local.host == "127.0.0.1" and not local.binds_beyond_loopback
    assert local.with_run_key("run-key").api_key is None
    wide = build(tmp_path, {"max_running_requests": 8}, host="0.0.0.0")
    assert wide.argv[wide.argv.index("--host") + 1] == "0.0.0.0"
    assert wide.binds_beyond_loopback and wide.with_run_key("run-key").api_key == "run-key"
    own = build(tmp_path, {"max_running_requests": 8}, host="10.0.0.7", api_key="sk-own")
    assert own.with_run_key("run-key").api_key == "sk-own"


def test_sim_launch(tmp_path: Path) -> None:
    spec = build_sim_launch(ServerRequest(
        args={**EAGLE3, "cuda_graph_max_bs": 64}, env={"X": "1"}, model_path="specgrid/sim-model",
        draft_model_path="specgrid/sim-eagle3-draft", served_model_name="sim-model", tp_size=1,
        python="/venv/bin/python", ready_timeout_s=60, disable_above_batch=16, version="0.5.23"),
        {"profile": "default", "seed": 0, "sim_fast": True, "off": False})
    assert spec.argv[:3] == ["/venv/bin/python", "-m", "engines.sim"]
    assert spec.argv[3:5] == ["--model-path", "specgrid/sim-model"]
    assert spec.argv[-5:] == ["--sim-fast", "--sim-profile", "default", "--sim-seed", "0"]
    assert "--cuda-graph-max-bs" in spec.argv  # no version: spelled as given
    assert "--speculative-adaptive-config" in spec.argv
    assert spec.health_path == "/health" and spec.extra_port_flags == ()
    assert spec.env == {"X": "1"} and spec.ready_timeout_s == 60


def test_sim_flags() -> None:
    assert sim_flags({"sim-seed": 1, "accept_rate": 0.7}) == [
        "--sim-accept-rate", "0.7", "--sim-seed", "1"]


def test_warnings() -> None:
    assert concurrency_warnings(64, [1, 64]) == []
    w = concurrency_warnings(48, [128, 1, 64, 64])
    assert len(w) == 2 and "64 exceeds max_running_requests 48" in w[0] and "128" in w[1]
    assert threshold_warnings(64, 64) and not threshold_warnings(16, 64)


@pytest.mark.parametrize(("line", "label"), [
    ("[2026-01-01 TP0] Load weight begin. avail mem=78.00 GB", "loading weights"),
    ("[TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16", "weights loaded"),
    ("[TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1000", "allocating KV cache"),
    ("[TP0] Capture target decode CUDA graph begin. backend=full", "capturing CUDA graphs"),
    ("[TP0] Capture cuda graph begin. This can take up to several minutes.",
     "capturing CUDA graphs"),
    ("[TP0] Capture draft extend CUDA graph begin. backend=full", "capturing CUDA graphs"),
    ("INFO:     Uvicorn running on http://127.0.0.1:30000", "HTTP listening, warming up"),
    (f"[2026-01-01] {READY_LINE}", "ready"),
])
def test_log_phases_match_sglang_lines(line: str, label: str) -> None:
    assert [p.label for p in SGLANG_LOG_PHASES if re.search(p.pattern, line)] == [label]


def test_revisions_pin_model_and_draft(tmp_path: Path) -> None:
    # SGLang's ServerArgs fields `revision` and `speculative_draft_model_revision`
    # (python/sglang/srt/arg_groups/speculative_hook.py reads the latter for the draft).
    spec = build(tmp_path, EAGLE3, revision="r1", draft_revision="d1")
    argv = spec.argv
    assert argv[argv.index("--revision") + 1] == "r1"
    assert argv[argv.index("--speculative-draft-model-revision") + 1] == "d1"
    plain = build(tmp_path, {"max_running_requests": 8}, revision="r1", draft_revision="d1")
    assert "--speculative-draft-model-revision" not in plain.argv  # no draft model loaded
    assert "--revision" not in build(tmp_path, EAGLE3).argv
    with pytest.raises(FlagError, match="revision is set by the model config"):
        build(tmp_path, {**EAGLE3, "revision": "x"})
