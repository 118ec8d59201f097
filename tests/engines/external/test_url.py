"""External server URLs."""

from __future__ import annotations

import pytest

from engines.external.url import ExternalUrlError, normalize_url


@pytest.mark.parametrize(("url", "expected"), [
    ("http://10.0.0.5:30000", "http://10.0.0.5:30000"),
    ("http://node1:30000/", "http://node1:30000"),
    ("  HTTP://Node1:30000 ", "http://node1:30000"),
    ("localhost:8000", "http://localhost:8000"),
    ("https://llm.example.com", "https://llm.example.com"),
    ("http://[::1]:30000", "http://[::1]:30000"),
])
def test_normalize_url(url: str, expected: str) -> None:
    assert normalize_url(url) == expected


@pytest.mark.parametrize("url", [
    "", "   ", "ftp://host:1", "http://host:30000/v1", "http://host:1?x=1", "http://:30000",
    "http://host:99999", "http://user:pw@host:1", "http://host:port",
])
def test_bad_urls(url: str) -> None:
    with pytest.raises(ExternalUrlError):
        normalize_url(url)
