"""SGLang's adaptive speculative decoding (``--speculative-adaptive``) as a running 0.5.23 server
does it: each tier's step count follows an EMA of accepted drafts (``AdaptiveStepSlot``, SGLang's
rules) and ``AdaptiveController`` routes batches. The config format, its validation and the
routing are engines/sglang/adaptive.py's (docs/engines.md), one file for both servers.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from engines.sglang.semantics import DEFAULT_ADAPTIVE_CONFIG, load_tiers, route


def load_adaptive_config(path: str | Path | None) -> dict[str, Any]:
    """The config in ``path`` (validated, ValueError if bad), or SGLang's default for None."""
    if path is None:
        return json.loads(json.dumps(DEFAULT_ADAPTIVE_CONFIG))
    cfg = json.loads(Path(path).read_text())
    load_tiers(cfg)
    return cfg


class AdaptiveStepSlot:
    """One tier's step choice: EMA of accepted drafts per verify, as SGLang's AdaptiveStepSlot.

    target rule: after ``warmup_batches``, every ``update_interval`` verifies, step down while
    ema <= (prev candidate - 0.5 + down_hysteresis) (0.5 when the previous candidate is 0),
    else step up while ema > (current - 0.5 + up_hysteresis); from 0 it probes the next one up.
    """

    def __init__(self, initial_steps: int, cfg: Mapping[str, Any]) -> None:
        self.candidate_steps: list[int] = sorted(set(cfg["candidate_steps"]))
        self.ema_alpha = float(cfg.get("ema_alpha", 0.2))
        self.update_interval = int(cfg.get("update_interval", 5))
        self.warmup_batches = int(cfg.get("warmup_batches", 10))
        self.down_hysteresis = float(cfg.get("down_hysteresis", -0.25))
        self.up_hysteresis = float(cfg.get("up_hysteresis", 0.0))
        self.ceiling_coeff = float(cfg.get("ceiling_coeff", 0))
        if initial_steps in self.candidate_steps:
            self.current_steps = initial_steps
        else:
            self.current_steps = self.candidate_steps[len(self.candidate_steps) // 2]
        self.ema_accept_len = float(self.current_steps - 1)
        self._batch_count = 0

    def update(self, correct_drafts_per_req: Sequence[int]) -> bool:
        """Feed one verify's accepted-draft counts; True when the step count changed."""
        if not correct_drafts_per_req:
            return False
        if self.current_steps > 0:
            avg = sum(correct_drafts_per_req) / len(correct_drafts_per_req)
            self.ema_accept_len = (1 - self.ema_alpha) * self.ema_accept_len + self.ema_alpha * avg
        self._batch_count += 1
        if self._batch_count <= self.warmup_batches:
            return False
        if (self._batch_count - self.warmup_batches) % self.update_interval != 0:
            return False
        return self._recompute()

    def _recompute(self) -> bool:
        old = self.current_steps
        idx = self.candidate_steps.index(old)
        old_idx = idx
        if old == 0:
            idx = min(idx + 1, len(self.candidate_steps) - 1)
            target = self.candidate_steps[idx]
            if target > 0 and self.ema_accept_len < 0:
                self.ema_accept_len = float(target - 1)
            self.current_steps = target
            return target != old
        while idx > 0:
            prev = self.candidate_steps[idx - 1]
            drop = (0.5 if prev == 0 else prev - 0.5) + self.down_hysteresis
            if self.ema_accept_len <= drop:
                idx -= 1
            else:
                break
        if idx >= old_idx:
            while idx < len(self.candidate_steps) - 1:
                if self.ema_accept_len > self.candidate_steps[idx] - 0.5 + self.up_hysteresis:
                    idx += 1
                else:
                    break
        target = self.candidate_steps[idx]
        if self.ceiling_coeff > 0:
            ceiling = max(1, math.ceil(self.ema_accept_len * self.ceiling_coeff))
            if ceiling < target <= old:
                while idx > 0 and self.candidate_steps[idx] > ceiling:
                    idx -= 1
                target = self.candidate_steps[idx]
        self.current_steps = target
        return target != old


class AdaptiveController:
    """Routes a batch size to its tier's slot (SGLang's AdaptiveSpeculativeParams)."""

    def __init__(
        self,
        cfg: Mapping[str, Any],
        initial_steps: int,
        cuda_graph_bs: Sequence[int] | None = None,
    ) -> None:
        tiers = load_tiers(cfg)
        shared = {k: v for k, v in cfg.items() if not str(k).isdigit()}
        entries = {int(k): v for k, v in cfg.items() if str(k).isdigit()}
        self.keys: list[int] = sorted(tiers)
        self.slots: dict[int, AdaptiveStepSlot] = {
            k: AdaptiveStepSlot(
                initial_steps, {**shared, **entries[k], "candidate_steps": tiers[k]})
            for k in self.keys
        }
        self.cuda_graph_bs = sorted(cuda_graph_bs) if cuda_graph_bs else None

    def slot(self, batch: int) -> AdaptiveStepSlot:
        return self.slots[route(self.keys, batch, self.cuda_graph_bs)]

    def steps_for_batch(self, batch: int) -> int:
        return self.slot(batch).current_steps

    def on_verify(self, batch: int, correct_drafts_per_req: Sequence[int]) -> None:
        self.slot(batch).update(correct_drafts_per_req)

