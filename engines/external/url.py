"""A server someone else runs: specgrid only sends it load. Pure checks, no sockets.

An external server is one fixed configuration, so a sweep whose cells need distinct server
configs (several variants, env factors, tp sizes: several server keys) cannot run against it.
"""

from __future__ import annotations

from urllib.parse import urlsplit


class ExternalUrlError(ValueError):
    """An external server URL that specgrid cannot use; the message says why."""


def normalize_url(url: str) -> str:
    """`http://host:port` (or https) with no path, query or trailing slash. A bare
    `host:port` gets `http://`; a missing port is allowed (the scheme's default). IPv6 hosts
    keep their brackets. Raises ExternalUrlError for anything else."""
    if not isinstance(url, str) or not url.strip():
        raise ExternalUrlError(f"external server URL is empty: {url!r}")
    text = url.strip()
    if "://" not in text:
        text = "http://" + text
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https"):
        raise ExternalUrlError(f"external server URL must be http:// or https://, got {url!r}")
    if parts.username or parts.password:
        raise ExternalUrlError("external server URL must not carry credentials; use api_key")
    if parts.query or parts.fragment or parts.path not in ("", "/"):
        raise ExternalUrlError(
            f"external server URL must be the server's base (http://host:port), got {url!r}")
    try:
        host, port = parts.hostname, parts.port
    except ValueError as e:
        raise ExternalUrlError(f"external server URL has a bad port: {url!r}") from e
    if not host:
        raise ExternalUrlError(f"external server URL has no host: {url!r}")
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme}://{host}" + (f":{port}" if port is not None else "")


def distinct_server_keys_error(n_server_keys: int) -> str | None:
    """Why a sweep cannot run against one external URL (it needs `n_server_keys` distinct
    server configurations), or None when it can (at most one)."""
    if n_server_keys <= 1:
        return None
    return (
        f"the sweep needs {n_server_keys} distinct server configurations (variants, env or "
        "tp_size differ), but an external engine is one server someone else runs: sweep only "
        "client-side axes (concurrency, rate, workload) against it, or use engine=sglang"
    )
