"""Forced acceptance on SGLang 0.5.23 (engines/forced.py): its benchmark knob, the environment
variables read in `srt/environ.py` (`SGLANG_SIMULATE_ACC_LEN`, a float, -1 = off;
`SGLANG_SIMULATE_ACC_METHOD`, default `match-expected`; `SGLANG_SIMULATE_ACC_TOKEN_MODE`,
default `fixed`, or `real-draft-token`) and applied in `srt/speculative/spec_utils.py`
`generate_simulated_accept_index`: every verify step accepts `sample_simulated_acc_len` tokens,
with `match-expected` floor(L) or ceil(L) so that the mean is L (one draw per step for the
whole batch), and commits the tokens the variant's `forced_acceptance.token_mode` names
(engines/forced.py: `real-draft-token` unless set). SGLang forces a mean length only:
per-position rates are refused. The simulator, which imitates SGLang, reads the same variables
(engines/sim/scheduler.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engines.forced import ForcedAcceptance

SIMULATE_ENV = ("SGLANG_SIMULATE_ACC_LEN", "SGLANG_SIMULATE_ACC_METHOD",
                "SGLANG_SIMULATE_ACC_TOKEN_MODE")
METHOD = "match-expected"
"""The mean of the forced lengths is the forced length (SGLang's `multinomial` rounds a normal
draw, whose mean is not L near the ends)."""

def refuse_raw_env(env: Mapping[str, Any]) -> None:
    """ValueError (one line) when the variant's environment sets SGLang's acceptance knob itself:
    such cells would be forced but neither labelled nor checked."""
    given = [k for k in SIMULATE_ENV if k in env]
    if given:
        raise ValueError(f"variant.env.{given[0]}: force acceptance with "
                         "variant.forced_acceptance.length (labelled and checked), not by hand")


def forced_env(forced: ForcedAcceptance) -> dict[str, str]:
    """SGLang's environment for a forced mean length; ValueError for per-position rates."""
    if forced.length is None:
        raise ValueError("SGLang forces a mean accept length only (SGLANG_SIMULATE_ACC_LEN): "
                         "give variant.forced_acceptance.length, or run the rates on "
                         "engine=vllm or engine=sim")
    return {"SGLANG_SIMULATE_ACC_LEN": repr(float(forced.length)),
            "SGLANG_SIMULATE_ACC_METHOD": METHOD,
            "SGLANG_SIMULATE_ACC_TOKEN_MODE": forced.token_mode}
