"""Forced acceptance, engine-neutral: the speculative variant's acceptance fixed by the engine
instead of measured from its drafter, so a cell measures the system's side of speculation alone
(the step costs at a known acceptance). Two forms, as vLLM 0.32.0 takes them
(`vllm/config/speculative.py`): a mean length L in [1, k + 1], or per-position unconditional
rates r_1 >= ... >= r_k (mean length 1 + sum(r_i)); a length becomes rates by the
minimum-variance schedule (vLLM's `_acceptance_length_to_rates`: 1 for the first floor(L - 1)
positions, the fraction next, 0 after). Each engine's spelling, the token modes and why a
forced cell is performance only: docs/engines.md "Forced acceptance"."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

TokenMode = Literal["real-draft-token", "fixed"]
"""SGLang 0.5.23's SGLANG_SIMULATE_ACC_TOKEN_MODE values (`srt/speculative/spec_utils.py`
`check_simulate_acc_token_mode`)."""
TOKEN_MODES: tuple[str, ...] = get_args(TokenMode)
DEFAULT_TOKEN_MODE: TokenMode = "real-draft-token"
"""The verify's cost stays that of real text (module docstring)."""

FORCED_LABEL = "forced acceptance: performance only"
"""How every table, listing and file labels a forced cell."""


@dataclass(frozen=True)
class ForcedAcceptance:
    """A checked forced acceptance: exactly one of `length` and `rates`."""

    steps: int
    """Draft tokens per verify step (k, the variant's speculative_num_steps)."""
    length: float | None = None
    """Mean accept length per verify step, in [1, k + 1]."""
    rates: tuple[float, ...] | None = None
    """Per-position unconditional acceptance rates, k of them, non-increasing, in [0, 1]."""
    token_mode: TokenMode = DEFAULT_TOKEN_MODE
    """Which tokens a forced step commits on SGLang (module docstring)."""

    @property
    def mean_length(self) -> float:
        """Tokens per verify step the engine is asked for (the bonus token included)."""
        return self.length if self.length is not None else 1.0 + sum(self.rates or ())

    def per_position(self) -> tuple[float, ...]:
        """The unconditional rate of each position (the length by the minimum-variance
        schedule)."""
        if self.rates is not None:
            return self.rates
        assert self.length is not None
        drafts = self.length - 1.0
        full = int(drafts)
        return tuple(([1.0] * full + [drafts - full] + [0.0] * self.steps)[:self.steps])

    def describe(self) -> str:
        if self.rates is not None:
            return f"rates {list(self.rates)} (mean length {self.mean_length:g})"
        return f"length {self.length:g}"


def speculative_steps(args: Mapping[str, Any]) -> int | None:
    """Draft tokens per verify step of a variant's args (SGLang's names): its
    speculative_num_steps (default 1 when an algorithm is set; None without speculation)."""
    if not args.get("speculative_algorithm"):
        return None
    steps = args.get("speculative_num_steps")
    return int(steps) if steps not in (None, "") else 1


def forced_acceptance(raw: Mapping[str, Any] | None, args: Mapping[str, Any],
                      by_batch: Sequence[str] = ()) -> ForcedAcceptance | None:
    """The checked forced acceptance of a variant (`variant.forced_acceptance`, its `args`;
    `by_batch`: the variant's settings that change the depth by batch size, which it does not
    go with: one depth k is forced); None when neither length nor rates is set. ValueError (one
    line) for a variant without speculation or with a depth by batch size, both or a malformed
    value, a length outside [1, k + 1], rates of another count than k, outside [0, 1] or
    increasing, a token mode SGLang does not name, or one without anything forced."""
    raw = raw or {}
    length, rates, mode = raw.get("length"), raw.get("rates"), raw.get("token_mode")
    if mode is not None and mode not in TOKEN_MODES:
        raise ValueError(f"forced_acceptance.token_mode must be one of "
                         f"{', '.join(TOKEN_MODES)} (SGLang's SGLANG_SIMULATE_ACC_TOKEN_MODE), "
                         f"got {mode!r}")
    if length is None and rates is None:
        if mode is not None:
            raise ValueError("forced_acceptance.token_mode without length or rates: nothing "
                             "is forced")
        return None
    token_mode: TokenMode = mode if mode is not None else DEFAULT_TOKEN_MODE
    steps = speculative_steps(args)
    if steps is None:
        raise ValueError("forced_acceptance needs a speculative variant "
                         "(args.speculative_algorithm): there is no acceptance to force")
    if by_batch:
        raise ValueError(f"forced_acceptance with {by_batch[0]}: the acceptance is forced at "
                         "one depth (speculative_num_steps); give a fixed depth")
    if length is not None and rates is not None:
        raise ValueError("forced_acceptance: give length or rates, not both")
    if length is not None:
        value = _number(length, "length")
        if not 1.0 <= value <= steps + 1:
            raise ValueError(f"forced_acceptance.length must be in [1, {steps + 1}] "
                             f"(k = speculative_num_steps = {steps}), got {length}")
        return ForcedAcceptance(steps=steps, length=value, token_mode=token_mode)
    return ForcedAcceptance(steps=steps, rates=_rates(rates, steps), token_mode=token_mode)


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool):
        raise ValueError(f"forced_acceptance.{what} must be a number, got {value!r}")
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"forced_acceptance.{what} must be a number, got {value!r}") from None
    if out != out:
        raise ValueError(f"forced_acceptance.{what} must be a number, got {value!r}")
    return out


def _rates(rates: Any, steps: int) -> tuple[float, ...]:
    if isinstance(rates, str) or not isinstance(rates, Sequence):
        raise ValueError(f"forced_acceptance.rates must be a list of {steps} numbers, "
                         f"got {rates!r}")
    values = tuple(_number(r, "rates") for r in rates)
    if len(values) != steps:
        raise ValueError(f"forced_acceptance.rates must have {steps} entries (k = "
                         f"speculative_num_steps), got {len(values)}: {list(values)}")
    if any(not 0.0 <= v <= 1.0 for v in values):
        raise ValueError(f"forced_acceptance.rates must lie in [0, 1], got {list(values)}")
    rising = next((i for i in range(1, len(values)) if values[i] > values[i - 1]), None)
    if rising is not None:
        raise ValueError(f"forced_acceptance.rates must not increase (unconditional rates: "
                         f"position {rising + 1} above position {rising}), got "
                         f"{list(values)}")
    return values


def forced_record(variant: Mapping[str, Any]) -> str | None:
    """A cell's `forced_acceptance` column: the forced length or rates, the mean length and the
    token mode as JSON (`{"length": 2.5, "mean_length": 2.5, "token_mode":
    "real-draft-token"}`), None for a cell that forces nothing."""
    forced = forced_acceptance(variant.get("forced_acceptance"), variant.get("args") or {})
    if forced is None:
        return None
    given: dict[str, Any] = ({"rates": list(forced.rates)} if forced.rates is not None
                             else {"length": forced.length})
    return json.dumps({**given, "mean_length": forced.mean_length,
                       "token_mode": forced.token_mode}, sort_keys=True)
