"""Shared fixtures: one real Ray instance for the whole test session (Ray starts in ~10 s)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.vllm_server import serving_vllm


@pytest.fixture(scope="session")
def ray_session():
    import ray

    if not ray.is_initialized():
        ray.init(address="local", num_cpus=2, num_gpus=8, include_dashboard=False,
                 object_store_memory=80 * 2**20, log_to_driver=False)
    yield ray
    ray.shutdown()


REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def engines_python() -> str:
    """The Python of the real-engine environment (vLLM and SGLang on the CPU, built by
    `bash scripts/engine_envs.sh --one`), with the tiny models built. Missing: the test is
    skipped on a developer's machine and FAILS under CI (CI=true), where .ci/run builds both.
    On a CPU the engines cannot run on (engines/cpu_support.py: x86 without AVX2) it skips
    everywhere, with that one line."""
    from engines.cpu_support import this_cpu, unsupported_line
    from engines.tiny_models import model_dir

    cannot = unsupported_line(this_cpu())
    if cannot:  # no build of the engines runs here: a fact of the machine, not a failure
        pytest.skip(cannot)
    python = os.environ.get("SPECGRID_VLLM_PYTHON") or str(REPO / ".venv-engines/bin/python")
    missing = [what for what, ok in (
        (f"the engine environment ({python})", Path(python).exists()),
        (f"the tiny models ({model_dir('target')})", model_dir("target").is_dir())) if not ok]
    if missing:
        _skip_or_fail(f"real engines need {' and '.join(missing)}: run "
                      "`bash scripts/engine_envs.sh --one`")
    return python


def _skip_or_fail(message: str) -> None:
    """A real-engine prerequisite is missing: skip on a developer's machine, fail under CI."""
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session")
def trained_models(engines_python) -> Path:
    """The folder of the models the project trains (scripts/train_models.py, which .ci/run
    runs). Missing: skipped on a developer's machine, a failure under CI."""
    from engines.trained_models import trained_root

    root = trained_root()
    if not (root / "manifest.json").is_file():
        _skip_or_fail(f"the trained models ({root}) are missing: run "
                      "`.venv-engines/bin/python scripts/train_models.py`")
    return root


@pytest.fixture(scope="session")
def plain_vllm(tmp_path_factory, engines_python):
    """One real vLLM server for the session, as someone else would start it (no dev endpoints),
    speculating with the near-copy draft model (4 tokens), serving the tiny target as `tiny` on
    a free loopback port."""
    from actors._process import free_port
    from engines.tiny_models import model_dir

    folder = tmp_path_factory.mktemp("vllm")
    spec = json.dumps({"method": "draft_model", "model": str(model_dir("draft-near")),
                       "num_speculative_tokens": 4})
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind",
           "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "TMPDIR": str(folder),
           "VLLM_CACHE_ROOT": str(folder / "cache")}
    env.pop("VLLM_SERVER_DEV_MODE", None)
    argv = [engines_python, "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(model_dir("target")), "--served-model-name", "tiny",
            "--host", "127.0.0.1", "--port", str(free_port("127.0.0.1")), "--max-num-seqs", "8",
            "--dtype", "bfloat16", "--enforce-eager", "--distributed-executor-backend", "uni",
            "--speculative-config", spec]
    with serving_vllm(argv, env, folder / "vllm.log") as url:
        yield url
