"""A server someone else runs: specgrid only sends it load. Pure checks, no sockets."""

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
