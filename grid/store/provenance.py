"""What a cell records about the process that served it: the environment the server really
received (only the variables that shape a GPU server, secrets redacted)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engines.redact import REDACTED, SECRET_PATTERN, redact_env

_RECORDED_PREFIXES = ("NCCL_", "CUDA_", "SGLANG_", "SGL_", "TORCH_", "PYTORCH_", "NVIDIA_",
                      "OMP_", "HF_", "TRANSFORMERS_")


def recorded_env(process_env: Mapping[str, str], variant_env: Mapping[str, str]) -> dict[str, str]:
    """The process environment restricted to GPU-server variables and the variant's own keys,
    sorted, with secrets (tokens, keys, passwords) replaced by ***."""
    keep = {k: v for k, v in process_env.items()
            if k.startswith(_RECORDED_PREFIXES) or k in variant_env}
    return redact_env(dict(sorted(keep.items())))


def redact_info(value: Any) -> Any:
    """A /server_info snapshot with secret-named fields (api_key, hf_token, ...) replaced."""
    if isinstance(value, Mapping):
        return {k: (REDACTED if SECRET_PATTERN.search(str(k)) and v else redact_info(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [redact_info(v) for v in value]
    return value
