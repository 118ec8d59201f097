"""What a cell records about the process that served it: the environment the server really
received (only the variables that shape a GPU server, secrets redacted)."""

from __future__ import annotations

import re
from collections.abc import Mapping

_RECORDED_PREFIXES = ("NCCL_", "CUDA_", "SGLANG_", "SGL_", "TORCH_", "PYTORCH_", "NVIDIA_",
                      "OMP_", "HF_", "TRANSFORMERS_")
_SECRET = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)


def redact(env: Mapping[str, str]) -> dict[str, str]:
    return {k: ("***" if _SECRET.search(k) else v) for k, v in env.items()}


def recorded_env(process_env: Mapping[str, str], variant_env: Mapping[str, str]) -> dict[str, str]:
    """The process environment restricted to GPU-server variables and the variant's own keys,
    sorted, with secrets (tokens, keys, passwords) replaced by ***."""
    keep = {k: v for k, v in process_env.items()
            if k.startswith(_RECORDED_PREFIXES) or k in variant_env}
    return redact(dict(sorted(keep.items())))
