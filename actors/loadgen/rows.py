"""What one client's measured window hands back, from its timelines (pure: no sockets):
request rows (actors/loadgen/spec.py ROW_KEYS), the self-check's inputs, arrival rates."""

from __future__ import annotations

import hashlib
from typing import Any

from actors.loadgen.spec import ROW_KEYS, LoadSpec, Prompt
from actors.loadgen.streams import Timeline
from specgrid_metrics.acceptance import accept_length_decode
from specgrid_metrics.requests import accept_length, request_timing

Result = tuple[int, int, Timeline]
"""(global request index, prompt index, timeline)."""

OUTPUT_TEXT_CHARS = 16384
"""The most characters of a greedy request's output kept in its row (``output_text``): enough
to place the first divergence from the baseline's output within any output the shipped
workloads ask for (512 tokens are ~2,500 characters); ``output_hash`` covers the whole text."""


def output_hash(text: str) -> str:
    """blake2b-128 of the output text's UTF-8 bytes, hex: equal outputs, equal hashes."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def chunk_gaps(chunk_times: list[float]) -> list[float]:
    """Per-chunk gaps: time between consecutive content events, whatever their token count
    (vLLM's and GuideLLM's notion of ITL; ``itl_s`` splits each over its tokens, SGLang's)."""
    return [b - a for a, b in zip(chunk_times, chunk_times[1:], strict=False)]


def request_row(spec: LoadSpec, n: int, pidx: int, tl: Timeline, offset: float) -> dict[str, Any]:
    prompt: Prompt = spec.prompts[pidx]
    ok = tl.error is None
    text = tl.output_text
    timing = request_timing(tl.sent, tl.chunk_times, tl.chunk_tokens, tl.end, tl.output_tokens)
    sent = tl.sent
    row = {
        "request_id": f"c{spec.client_index}-{n}",
        "prompt_id": prompt.prompt_id,
        "domain": prompt.domain,
        "status": "ok" if ok else "error",
        "error": tl.error,
        "input_tokens": tl.input_tokens,
        "output_tokens": tl.output_tokens,
        "scheduled_at": tl.scheduled + offset,
        "sent_at": sent + offset,
        "ttft_s": timing["ttft_s"],
        "e2e_s": timing["e2e_s"],
        "tpot_s": timing["tpot_s"] if ok else None,
        "itl_s": timing["itl_s"],
        "accept_length": accept_length(tl.output_tokens, tl.spec_verify_ct) if ok else None,
        "spec_verify_ct": tl.spec_verify_ct,
        "finish_reason": tl.finish_reason,
        "accept_length_decode": (accept_length_decode(tl.output_tokens, tl.spec_verify_ct)
                                 if ok else None),
        "accept_histogram": tl.accept_histogram if ok else None,
        "chunk_offset_us": [round((t - sent) * 1e6) for t in tl.chunk_times],
        "chunk_tokens": list(tl.chunk_tokens),
        "chunk_gap_s": chunk_gaps(tl.chunk_times),
        "merged_reads": tl.merged,
        "server_queue_s": tl.server_queue_s,
        "server_ttft_s": tl.server_ttft_s,
        # what was generated, for the losslessness check (grid/analysis/lossless.py): a hash
        # of every completed request's text and, at temperature 0 (greedy, where speculative
        # decoding must reproduce the baseline), the text itself to find where it diverges
        "output_hash": output_hash(text) if ok and text is not None else None,
        "output_chars": len(text) if ok and text is not None else None,
        "output_text": (text[:OUTPUT_TEXT_CHARS] if ok and text is not None
                        and spec.temperature == 0 else None),
    }
    assert tuple(row) == ROW_KEYS
    return row


def rates(spec: LoadSpec, results: list[Result], offset: float
           ) -> dict[str, Any]:
    """Offered arrival rate (this client's share of an open-loop cell's rate; None in closed
    loop) and achieved: requests sent over the span of their sends. ``first_sent_at`` /
    ``last_sent_at`` (epoch s) let a cell combine clients."""
    sends = sorted(tl.sent for _, _, tl in results)
    achieved = ((len(sends) - 1) / (sends[-1] - sends[0])
                if len(sends) >= 2 and sends[-1] > sends[0] else None)
    return {
        "offered_rate_req_s": spec.my_rate,
        "achieved_rate_req_s": achieved,
        "sent_requests": len(sends),
        "first_sent_at": sends[0] + offset if sends else None,
        "last_sent_at": sends[-1] + offset if sends else None,
    }


