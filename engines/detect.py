"""What a server someone else runs offers, decided from what it answered, whichever engine
family it is (engine-neutral: the candidates are SGLang's and vLLM's). Pure: the answers come in
(actors/probe.py `detect` asks for them, once per server), the decision goes out.

A server's optional endpoints are never assumed: an endpoint that answered 404 or 405 is
missing, and every later call to it is skipped with a note (never retried); the metric family
is the prefix of the names its /metrics exposes (`sglang:`, `vllm:`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from engines.metrics import detect_family

FLUSH_CANDIDATES = ("/flush_cache", "/reset_prefix_cache")
"""Cache-flush endpoints in the order tried: SGLang's, then vLLM's (served with
VLLM_SERVER_DEV_MODE=1)."""
INFO_CANDIDATES = ("/server_info", "/get_server_info")
"""Server-info endpoints in the order tried: SGLang 0.5.23 and vLLM's dev mode, then SGLang's
older name."""
MISSING = (404, 405)
"""Statuses that mean "no such endpoint" (definite: not retried)."""


@dataclass(frozen=True)
class Offers:
    """What one external server offers, as recorded in each of its cells (`server_offers`)."""

    family: str | None
    """Its /metrics family (`sglang`, `vllm`), None when it exposes neither."""
    flush_cache: str | None
    """The cache-flush endpoint it answers, None = none (cells run on a warm cache)."""
    server_info: str | None
    """The server-info endpoint it answers, None = none."""
    native_generate: bool | None
    """Whether it serves SGLang's native /generate: an SGLang server does (its metrics or its
    /v1/models say sglang), a vLLM one does not; None = not known."""
    version: str | None = None
    """The version it reports (vLLM's /version, SGLang's server info), if any."""
    notes: list[str] = field(default_factory=list)
    """One line per missing optional endpoint, for the run's output and the cell row."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def decide(metric_names: Iterable[str], flush: Mapping[str, int], info: Mapping[str, int],
           version: str | None = None, owner: str | None = None) -> Offers:
    """The offers from what the server answered: `flush` and `info` map each candidate path
    tried to its HTTP status (200 = there; MISSING = not; anything else: there but busy);
    `owner` is /v1/models' `owned_by` (SGLang and vLLM name themselves there)."""
    names = list(metric_names)
    family = detect_family(names)
    flush_path = next((p for p in FLUSH_CANDIDATES if p in flush and flush[p] not in MISSING),
                      None)
    info_path = next((p for p in INFO_CANDIDATES if info.get(p) == 200), None)
    notes = []
    if flush_path is None:
        notes.append("no cache-flush endpoint (tried " + ", ".join(FLUSH_CANDIDATES) + "): "
                     "cells run on whatever the prefix cache holds")
    if info_path is None:
        notes.append("no server-info endpoint: cells record no server configuration")
    if family is None:
        notes.append("its /metrics has no sglang: or vllm: series: no accept length or queue "
                     "figures from counters")
    kinds = {k for k in (family.family if family else None, owner) if k}
    native = True if "sglang" in kinds else False if kinds else None
    return Offers(family=family.family if family else None, flush_cache=flush_path,
                  server_info=info_path, native_generate=native, version=version, notes=notes)
