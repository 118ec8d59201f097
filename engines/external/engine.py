"""A server someone else runs behind the engine interface (engines/base.py): nothing to launch or
validate, no GPUs reserved. What it offers is not assumed: engines/detect.py finds out,
once per server, which engine family its /metrics belong to and which optional endpoints it
answers, and the cells record what was found."""

from __future__ import annotations

from engines.base import Engine


class External(Engine):
    name = "external"
    label = "external server"
    launches = False
    start_estimate_s = 1.0


ENGINE = External()
