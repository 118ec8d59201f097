"""An external server behind HTTPS with a self-signed certificate: the readiness wait, the
detection, flush, server info and metrics all use the run's TLS settings (load.tls_verify,
load.ca_bundle) as the load generators do; a refused certificate fails at once with one line,
not after engine.ready_timeout_s as "did not answer /health". Every probe runs in the server's
ExternalProbe actor (actors/driver_node.py): real Ray throughout."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.probe import ServerAccess
from grid.execute.server import ExternalServer, ServerDown
from grid.execute.steps import blocking
from grid.loader import load_cells, load_requests
from grid.run import run
from tests.actors.tls_front import self_signed, tls_front
from tests.engines.sim.conftest import start_sim

pytestmark = pytest.mark.usefixtures("ray_session")

@pytest.fixture(scope="module")
def cert_key(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return self_signed(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def https_sim(cert_key: tuple[Path, Path]) -> Iterator[str]:
    sim = start_sim(["--enable-metrics", "--speculative-algorithm", "EAGLE3",
                     "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
                     "--speculative-num-draft-tokens", "4"])
    try:
        with tls_front(sim.port, *cert_key) as url:
            yield url
    finally:
        sim.stop()


def test_a_refused_certificate_fails_the_connect_at_once(https_sim: str) -> None:
    started = time.monotonic()
    with pytest.raises(ServerDown) as caught:
        blocking(ExternalServer.connect(https_sim, ServerAccess(), timeout_s=60))
    assert time.monotonic() - started < 10
    assert str(caught.value).startswith(f"TLS: certificate verify failed for {https_sim}: ")
    assert "(load.tls_verify=false or load.ca_bundle=" in str(caught.value)
    # the end of a cell names it too
    server = ExternalServer(https_sim, ServerAccess())
    end = blocking(server.end_cell(10))
    blocking(server.stop(0))
    assert "TLS: certificate verify failed" in (end.death or "")


@pytest.mark.parametrize("how", ["verify off", "CA bundle"])
def test_an_accepted_certificate_serves_every_call(https_sim: str, how: str,
                                                   cert_key: tuple[Path, Path]) -> None:
    access = (ServerAccess(tls_verify=False) if how == "verify off"
              else ServerAccess(ca_bundle=str(cert_key[0])))
    notes: list[str] = []
    server = blocking(ExternalServer.connect(https_sim, access, timeout_s=10, echo=notes.append))
    assert notes == [] and server.offers is not None and server.offers.family == "sglang"
    blocking(server.flush_cache(10))
    blocking(server.start_metrics(0.05, 10))
    time.sleep(0.2)
    end = blocking(server.end_cell(10))
    assert end.death is None and end.hung is None
    assert any(name.startswith("sglang:") for _, name, _, _ in end.samples)
    facts = server.facts(end)
    assert facts.info and facts.offers["flush_cache"] == "/flush_cache"
    blocking(server.stop(0))


@pytest.mark.slow
def test_an_external_https_run_with_verification_off(https_sim: str, tmp_path: Path) -> None:
    lines: list[str] = []
    outcome = run(["+sweep=smoke", "engine=external", f"engine.options.url={https_sim}",
                   "load.tls_verify=false", "workload.endpoint=chat",
                   "grid.axes.variant=[eagle3]", f"results_dir={tmp_path}"], echo=lines.append)
    assert outcome.exit_code == 0, lines
    requests = load_requests(outcome.run_dir)
    assert len(requests) and (requests.status == "ok").all()
    cells = load_cells(outcome.run_dir)
    assert (cells.engine == "external").all()


def test_an_external_https_run_with_verification_on_fails_in_seconds(https_sim: str,
                                                                     tmp_path: Path) -> None:
    lines: list[str] = []
    started = time.monotonic()
    outcome = run(["+sweep=smoke", "engine=external", f"engine.options.url={https_sim}",
                   "workload.endpoint=chat", "grid.axes.variant=[eagle3]",
                   f"results_dir={tmp_path}"], echo=lines.append)
    assert outcome.exit_code != 0
    assert time.monotonic() - started < 60  # engine.ready_timeout_s would be minutes
    assert any(f"TLS: certificate verify failed for {https_sim}" in line for line in lines), lines
    assert not any("did not answer /health" in line for line in lines)
