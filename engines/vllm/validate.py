"""Check vLLM command lines with vLLM's own parser, before any server starts (engines/validation.py
runs the checker below in a subprocess of a Python with vLLM, built by `scripts/engine_envs.sh`).

Per command line, as `python -m vllm.entrypoints.openai.api_server` itself does it in 0.32.0
(`vllm/entrypoints/launchers/api_server/entry.py` main):
    parser = make_arg_parser(FlexibleArgumentParser()); args = parser.parse_args(argv)
    validate_parsed_serve_args(args)
then, where the command has a speculative config with a batch-size schedule, vLLM's own check
of that schedule (`vllm/v1/spec_decode/dynamic/utils.py`
validate_and_normalize_dynamic_sd_schedule), and where it forces acceptance (synthetic
rejection sampling), vLLM's own check of the length or rates
(`vllm/config/speculative.py` `SpeculativeConfig._resolve_synthetic_acceptance_rates`).
Nothing resolves the model (no `EngineArgs` config creation: that reads the model's config and
probes the device), so the result says `constructed: false`.
- argparse errors (unknown flag, bad choice, bad int, bad JSON) exit with status 2; the
  message argparse writes to stderr is captured and the flag it names is reported.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence

from engines.validation import (
    FlagProblem,
    ValidationUnavailable,
    flags_from,
    installed_version,
    run_checker,
)

_CHECKER = r"""
import vllm
from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
from vllm.utils.argparse_utils import FlexibleArgumentParser
from vllm.v1.spec_decode.dynamic.utils import validate_and_normalize_dynamic_sd_schedule
VERSION, CONSTRUCTED = vllm.__version__, False
def parse(argv):
    args = make_arg_parser(FlexibleArgumentParser(prog="vllm")).parse_args(argv)
    validate_parsed_serve_args(args)
    spec = args.speculative_config
    if isinstance(spec, dict) and spec.get("num_speculative_tokens_per_batch_size"):
        validate_and_normalize_dynamic_sd_schedule(
            spec["num_speculative_tokens_per_batch_size"])
    if isinstance(spec, dict) and spec.get("rejection_sample_method") == "synthetic":
        from vllm.config.speculative import SpeculativeConfig
        SpeculativeConfig._resolve_synthetic_acceptance_rates(
            int(spec.get("num_speculative_tokens") or 0),
            spec.get("synthetic_acceptance_rates"), spec.get("synthetic_acceptance_length"))
"""


def vllm_available(python: str, timeout_s: float = 120.0) -> str | None:
    """vLLM's version importable by `python`, or None if it has none."""
    return installed_version(python, "vllm", timeout_s)


def check_batch(argvs: Mapping[str, Sequence[str]], python: str = sys.executable,
                timeout_s: float = 300.0) -> tuple[str, bool, list[FlagProblem]]:
    """Parse every labelled command line in ONE subprocess of `python`. Returns (vLLM version,
    False: parsed and checked, not constructed, problems). Raises ValidationUnavailable."""
    flags = {label: flags_from(argv) for label, argv in argvs.items()}
    return run_checker(_CHECKER, flags, python, "vLLM", timeout_s)


__all__ = ["FlagProblem", "ValidationUnavailable", "check_batch", "vllm_available"]
