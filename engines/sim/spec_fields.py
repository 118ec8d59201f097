"""A speculative request's own counts as SGLang 0.5.23 reports them, and as the simulator does:
on the native /generate stream's final ``meta_info`` (``_calculate_spec_decoding_metrics``'s five
fields, then ``spec_correct_drafts_histogram``: H[n] = the request's verify steps that accepted
exactly n drafts) and, when the request asks with ``return_spec_tokens_details: true``, in the
OpenAI endpoints' ``sglext.spec_tokens_details``. Which fields when, and SGLang's source for
each: docs/simulator.md "Wire format (SGLang 0.5.23)".
"""

from __future__ import annotations

import json
from typing import Any

from engines.sim.scheduler import SimRequest

HISTOGRAM = "spec_correct_drafts_histogram"

_DETAIL_DEFAULTS: tuple[tuple[str, Any], ...] = (
    ("spec_accept_rate", 0.0), ("spec_accept_length", 0.0), ("spec_cap_length", 0.0),
    ("spec_block_accept_length", 0.0), ("spec_num_correct_drafts", 0),
    ("spec_num_proposed_drafts", 0), ("spec_verify_ct", 0), (HISTOGRAM, []),
    ("spec_cap_lens_histogram", []))
"""SpecTokensDetails' fields in its order, with the default each absent one is written as."""


def spec_meta(req: SimRequest, draft_tokens: int) -> dict[str, Any]:
    """The finished request's speculative ``meta_info`` fields (module docstring), SGLang's
    names, order and formulas; ``draft_tokens``: the server's speculative_num_draft_tokens."""
    vct = req.verify_ct
    if not vct:
        return {}
    proposed = vct * max(0, draft_tokens - 1)
    out: dict[str, Any] = {}
    if proposed:
        out.update(spec_accept_rate=req.correct_drafts / proposed,
                   spec_accept_length=req.n / vct, spec_num_correct_drafts=req.correct_drafts,
                   spec_num_proposed_drafts=proposed, spec_verify_ct=vct)
    if req.histogram:
        out[HISTOGRAM] = list(req.histogram)
    return out


def spec_details(meta: dict[str, Any]) -> dict[str, Any] | None:
    """``sglext.spec_tokens_details`` of a request whose final speculative fields are ``meta``
    (None when it has none: SGLang then sends no sglext chunk)."""
    if not meta:
        return None
    return {name: meta.get(name) or default for name, default in _DETAIL_DEFAULTS}


def details_json(details: dict[str, Any]) -> str:
    """Compact JSON of the details, floats written as floats (pydantic's ``2.0``)."""
    return json.dumps({k: float(v) if isinstance(d, float) else v
                       for (k, d), v in zip(_DETAIL_DEFAULTS, details.values(), strict=True)},
                      separators=(",", ":"))
