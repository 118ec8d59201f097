"""Every call to a server goes through one ServerAccess (TLS verification, a CA bundle, the
key): against a real HTTPS server on 127.0.0.1 with a self-signed certificate (the simulator
behind a TLS front), a refused certificate is one clear line at once; verification off, or the
certificate as CA bundle, and health, detection, flush, server info and metrics all work."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors import probe
from actors.probe import ServerAccess, TLSError
from tests.actors.tls_front import self_signed, tls_front
from tests.engines.sim.conftest import start_sim


@pytest.fixture(scope="module")
def cert_key(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return self_signed(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def https_sim(cert_key: tuple[Path, Path]) -> Iterator[str]:
    sim = start_sim(["--api-key", "sk-tls", "--enable-metrics"])
    try:
        with tls_front(sim.port, *cert_key) as url:
            yield url
    finally:
        sim.stop()


def test_verify_on_is_a_named_certificate_error_at_once(https_sim: str) -> None:
    access = ServerAccess(api_key="sk-tls")
    started = time.monotonic()
    for call in (lambda: probe.health(https_sim, access),
                 lambda: probe.detect(https_sim, access),
                 lambda: probe.get_json(https_sim, "/server_info", access),
                 lambda: probe.flush_cache(https_sim, access),
                 lambda: probe.MetricsSampler(https_sim, access, 0.1).start()):
        with pytest.raises(TLSError) as caught:
            call()
        line = str(caught.value)
        assert line.startswith(f"TLS: certificate verify failed for {https_sim}: ")
        assert "self-signed certificate" in line and "\n" not in line
        assert "load.tls_verify=false or load.ca_bundle=" in line
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("how", ["verify off", "CA bundle"])
def test_probes_work_when_the_certificate_is_accepted(https_sim: str, how: str,
                                                      cert_key: tuple[Path, Path]) -> None:
    access = (ServerAccess(tls_verify=False, api_key="sk-tls") if how == "verify off"
              else ServerAccess(ca_bundle=str(cert_key[0]), api_key="sk-tls"))
    assert probe.health(https_sim, access) is None
    offers = probe.detect(https_sim, access)
    assert (offers.family, offers.flush_cache, offers.server_info) == (
        "sglang", "/flush_cache", "/server_info")
    probe.flush_cache(https_sim, access)
    assert probe.get_json(https_sim, "/server_info", access)
    sampler = probe.MetricsSampler(https_sim, access, 0.05).start()
    time.sleep(0.2)
    samples = sampler.stop()
    assert len({t for t, *_ in samples}) >= 3  # before, during, after
    assert any(name.startswith("sglang:") for _, name, _, _ in samples)


def test_the_key_is_sent_with_every_probe(https_sim: str) -> None:
    keyless = ServerAccess(tls_verify=False)
    assert probe.health(https_sim, keyless) is None  # /health stays open
    with pytest.raises(probe.ProbeError, match="401"):
        probe.flush_cache(https_sim, keyless, timeout_s=0)


def test_access_from_config_and_plain_http() -> None:
    config = {"load": {"tls_verify": False, "ca_bundle": None}, "engine": {"api_key": "k"}}
    access = ServerAccess.from_config(config)
    assert access == ServerAccess(tls_verify=False, ca_bundle=None, api_key="k")
    assert ServerAccess.from_config(config, api_key="run-key").api_key == "run-key"
    assert access.client_options("http://127.0.0.1:1") == {
        "headers": {"Authorization": "Bearer k"}}  # no TLS context for plain http
    options = access.client_options("https://127.0.0.1:1")
    assert options["verify"].verify_mode.name == "CERT_NONE"
    # a CA bundle path is only read for an https URL (a launched server's node may lack it)
    assert "verify" not in ServerAccess(ca_bundle="/nowhere.pem").client_options("http://x")
