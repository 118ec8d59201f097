"""A server someone else runs behind the engine interface (engines/base.py): nothing to launch or
validate, no GPUs reserved. What it offers is not assumed: engines/detect.py finds out,
once per server, which engine family its /metrics belong to and which optional endpoints it
answers, and the cells record what was found."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engines.base import Engine
from engines.external.url import normalize_url
from engines.options import Option

OPTIONS: dict[str, Option] = {
    "url": Option("the base URL of the server someone else runs (http://host:port)",
                  types=(str,), required=True, parse=normalize_url),
}
"""What an external engine needs (`engine.options`): where the server is."""


class External(Engine):
    name = "external"
    label = "external server"
    launches = False
    start_estimate_s = 1.0
    options = OPTIONS

    def server_url(self, options: Mapping[str, Any]) -> str | None:
        """The URL, normalized (engines/external/url.py); ValueError for one that cannot be
        used (`check_options` has refused it already)."""
        return normalize_url(str(options.get("url") or ""))


ENGINE = External()
