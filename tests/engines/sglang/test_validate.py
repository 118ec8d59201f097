"""Command lines checked with SGLang's own parser, in a separate venv.

The parser tests run only where SPECGRID_SGLANG_PYTHON names a Python with SGLang installed
(several may be given, separated by os.pathsep); build one with
`scripts/validate_sglang_venv.sh .venv-sglang [VERSION]`. Each Python is started once for all
its command lines."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from engines.launch import ServerRequest
from engines.sglang.command import build_sglang_launch
from engines.sglang.validate import (
    FlagProblem,
    ValidationUnavailable,
    check_batch,
    named_flag,
    server_flags,
    sglang_available,
)

ROOT = Path(__file__).resolve().parents[3]
PYTHONS = [p for p in os.environ.get("SPECGRID_SGLANG_PYTHON", "").split(os.pathsep) if p]
needs_sglang = pytest.mark.skipif(
    not PYTHONS,
    reason="SPECGRID_SGLANG_PYTHON is not set: build the validation venv with "
           "scripts/validate_sglang_venv.sh .venv-sglang and point it at .venv-sglang/bin/python")

EAGLE3 = {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3,
          "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}


def test_server_flags_cuts_program_and_launcher_flags() -> None:
    argv = ["/v/bin/sglang", "serve", "--model-type", "llm", "--model-path", "m", "--tp-size",
            "8", "--model-type=llm"]
    assert server_flags(argv) == ["--model-path", "m", "--tp-size", "8"]
    assert server_flags(["python", "-m", "sglang.launch_server", "--host", "h"]) == [
        "--host", "h"]


def test_named_flag() -> None:
    assert named_flag("sglang: error: unrecognized arguments: --speculative-num-stepz 3") == (
        "--speculative-num-stepz")
    assert named_flag("sglang: error: ambiguous option: --cuda-graph-max-bs could match "
                      "--cuda-graph-max-bs-decode") == "--cuda-graph-max-bs"
    assert named_flag("ValueError: nothing here") is None
    problem = FlagProblem("eagle3", "--x", "bad")
    assert str(problem) == "eagle3: --x: bad"


def test_python_without_sglang() -> None:
    if sglang_available(sys.executable) is not None:
        pytest.skip("the test Python has SGLang itself")
    with pytest.raises(ValidationUnavailable):
        check_batch({"m": ["--model-path", "m"]}, python=sys.executable)
    assert sglang_available("/nonexistent/python") is None


def _variants() -> dict[str, dict[str, Any]]:
    from omegaconf import OmegaConf

    from grid.plan.config import register_configs
    from grid.questions import schema_keys

    # the variants' `${tiny_model:NAME}` / `${trained_model:NAME}` resolvers
    register_configs(schema_keys())
    out = {}
    for path in sorted((ROOT / "conf" / "variant").glob("*.yaml")):
        cfg = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
        assert isinstance(cfg, dict)
        out[str(cfg.get("name", path.stem))] = cfg
    return out


def _model() -> dict[str, Any]:
    from omegaconf import OmegaConf

    path = ROOT / "conf" / "model" / "llama3.1-8b.yaml"
    cfg = OmegaConf.to_container(OmegaConf.load(path))
    assert isinstance(cfg, dict)
    return cfg


def _launch(python: str, version: str, run_dir: Path, args: dict[str, Any],
            disable_above_batch: int | None = None, tp_size: int = 8) -> list[str]:
    model = _model()
    return build_sglang_launch(ServerRequest(
        args={"max_running_requests": 64, **args}, env={}, model_path=model["model_path"],
        draft_model_path=model["draft_model_path"],
        served_model_name=model["served_model_name"], tp_size=tp_size, version=version,
        python=python, disable_above_batch=disable_above_batch, api_key="sk-test")).argv


@pytest.fixture(scope="module", params=PYTHONS or [None])
def checked(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """One subprocess per validation Python: (version, constructed, labels, problems)."""
    python = request.param
    if python is None:
        pytest.skip("SPECGRID_SGLANG_PYTHON is not set")
    version = sglang_available(python)
    assert version, f"{python} cannot import sglang"
    run_dir = tmp_path_factory.mktemp("validate")
    argvs: dict[str, list[str]] = {}
    for name, variant in _variants().items():
        argvs[f"variant:{name}"] = _launch(
            python, version, run_dir, dict(variant.get("args") or {}),
            variant.get("speculative_disable_above_batch"))
    argvs["graph-bs-renamed"] = _launch(python, version, run_dir,
                                        {**EAGLE3, "cuda_graph_max_bs": 64,
                                         "cuda_graph_bs": [1, 2, 4, 8, 16, 32, 64]})
    argvs["fusion-switch"] = _launch(python, version, run_dir,
                                     {"enable_flashinfer_allreduce_fusion": True})
    argvs["threshold"] = _launch(python, version, run_dir, EAGLE3, disable_above_batch=16)
    argvs["typo"] = _launch(python, version, run_dir,
                            {**EAGLE3, "speculative_num_stepz": 3})
    argvs["raw-old-name"] = ["--model-path", "m", "--cuda-graph-max-bs", "64"]
    argvs["bad-int"] = ["--model-path", "m", "--tp-size", "eight"]
    version, constructed, problems = check_batch(argvs, python)
    return version, constructed, set(argvs), {p.label: p for p in problems}


@needs_sglang
def test_shipped_variants_and_renames_pass(checked) -> None:
    version, _, labels, problems = checked
    ok = [label for label in labels if label.startswith("variant:")]
    ok += ["graph-bs-renamed", "fusion-switch", "threshold"]
    assert len(ok) > 3
    assert {k: str(v) for k, v in problems.items() if k in ok} == {}, version


@needs_sglang
def test_typo_rejected_by_name(checked) -> None:
    _, _, _, problems = checked
    assert problems["typo"].flag == "--speculative-num-stepz"
    assert problems["typo"].stage == "parse"
    assert problems["bad-int"].flag == "--tp-size"
    assert "invalid int" in problems["bad-int"].message


@needs_sglang
def test_old_flag_name_follows_version(checked) -> None:
    from packaging.version import Version

    version, constructed, _, problems = checked
    if Version(version).release >= (0, 5, 20):
        assert problems["raw-old-name"].flag == "--cuda-graph-max-bs"
        assert "ambiguous" in problems["raw-old-name"].message
    else:
        assert "raw-old-name" not in problems  # real flag or deprecated alias
    assert constructed == (Version(version).release >= (0, 5, 19))


_ROUTER = r"""
import json, sys
from sglang.srt.speculative.adaptive_spec_params import AdaptiveSpeculativeParams
req = json.load(sys.stdin)
out = []
for case in req:
    a = AdaptiveSpeculativeParams(initial_steps=case["initial"], cfg_path=case["path"])
    a.set_cuda_graph_bs(case["graphs"])
    out.append([a.get_steps_for_batch(b) for b in case["batches"]])
print("@@" + json.dumps(out))
"""


@pytest.mark.parametrize("python", PYTHONS or [None])
def test_steps_for_batch_matches_sglang_router(python: str | None, tmp_path: Path) -> None:
    """Our router (used by the simulator) against SGLang's AdaptiveSpeculativeParams."""
    import json
    import subprocess

    from engines.sglang import adaptive
    from tests.engines.sglang.test_adaptive import SGLANG_DEFAULT, _config_file

    if python is None:
        pytest.skip("SPECGRID_SGLANG_PYTHON is not set")
    configs = [adaptive.threshold_config(3, 16), adaptive.threshold_config(1, 10),
               adaptive.threshold_config(5, 63), SGLANG_DEFAULT]
    batches = [1, 2, 7, 8, 9, 10, 11, 13, 16, 17, 31, 32, 48, 63, 64, 65, 100, 512]
    cases = [
        {"path": str(_config_file(cfg, tmp_path)), "initial": initial,
         "graphs": graphs, "batches": batches}
        for cfg in configs for initial in (1, 3, 5)
        for graphs in (None, [1, 2, 4, 8, 12, 16, 24, 32, 48, 64])
    ]
    proc = subprocess.run([python, "-c", _ROUTER], input=json.dumps(cases), text=True,
                          capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    theirs = json.loads(proc.stdout.rsplit("@@", 1)[1])
    ours = [[adaptive.steps_for_batch(c["path"], b, initial_steps=c["initial"],
                                      cuda_graph_bs=c["graphs"]) for b in batches]
            for c in cases]
    assert ours == theirs
