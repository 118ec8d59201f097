"""The load generator's settings in the grid config (grid/plan/config.py LoadConfig): bad values are
one clear line before anything starts."""

from __future__ import annotations

import subprocess

import pytest

from grid.run import EXIT_BAD_INPUT, run

BAD_LOAD = [
    (["load.transport=curl"], "load.transport='curl' is not one of raw, aiohttp, httpx"),
    (["load.ca_bundle=/nonexistent/ca.pem"], "load.ca_bundle=/nonexistent/ca.pem is not a file"),
    (["load.keepalive_s=0"], "load.keepalive_s must be positive"),
    (["load.tls_verify=maybe"], "tls_verify"),
]


@pytest.mark.parametrize(("overrides", "message"), BAD_LOAD)
def test_bad_load_settings_are_one_clear_line(overrides: list[str], message: str, tmp_path,
                                              capsys) -> None:
    results = tmp_path / "results"
    outcome = run(["+sweep=smoke", *overrides, f"results_dir={results}"],
                  echo=lambda line: None)
    err = capsys.readouterr().err.strip().splitlines()
    assert outcome.exit_code == EXIT_BAD_INPUT
    assert len(err) == 1 and err[0].startswith("specgrid: error: ")
    assert message in err[0]
    assert not results.exists()


def test_load_settings_reach_the_plan(tmp_path) -> None:
    from grid.run import make_plan

    plan = make_plan(["+sweep=smoke", "load.transport=aiohttp", "load.tls_verify=false",
                      "load.keepalive_s=5", f"results_dir={tmp_path / 'r'}"])
    loads = [cell.config["load"] for cell in plan.plan.cells]  # type: ignore[attr-defined]
    assert loads and all(ld["transport"] == "aiohttp" and ld["tls_verify"] is False
                         and ld["keepalive_s"] == 5.0 for ld in loads)


def _one_error_line(overrides: list[str], tmp_path, capsys) -> str:
    results = tmp_path / "results"
    outcome = run(["+sweep=smoke", *overrides, f"results_dir={results}"],
                  echo=lambda line: None)
    err = capsys.readouterr().err.strip().splitlines()
    assert outcome.exit_code == EXIT_BAD_INPUT
    assert len(err) == 1 and err[0].startswith("specgrid: error: "), err
    assert not results.exists()
    return err[0]


NOT_PEM = ["not a certificate\n", "",
           "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"]


@pytest.mark.parametrize("content", NOT_PEM)
def test_a_ca_bundle_that_is_no_pem_fails_the_plan(content: str, tmp_path, capsys) -> None:
    """The plan builds the TLS context the load generator would build (whatever the transport,
    and with tls_verify off too): a bundle it cannot load fails before anything starts, not
    every request of the first cell."""
    bundle = tmp_path / "ca.pem"
    bundle.write_text(content)
    for transport in ("raw", "aiohttp"):
        line = _one_error_line([f"load.ca_bundle={bundle}", f"load.transport={transport}",
                                "load.tls_verify=false"], tmp_path, capsys)
        assert f"load.ca_bundle={bundle} is not a PEM file of CA certificates" in line


def test_a_pem_ca_bundle_plans(tmp_path) -> None:
    from grid.run import make_plan

    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=127.0.0.1"],
                   check=True, capture_output=True)
    plan = make_plan(["+sweep=smoke", f"load.ca_bundle={cert}", f"results_dir={tmp_path / 'r'}"])
    cells = plan.plan.cells  # type: ignore[attr-defined]
    assert {c.config["load"]["ca_bundle"] for c in cells} == {str(cert)}


@pytest.mark.parametrize(("value", "message"), [
    ("http://[::1", "HTTP_PROXY='http://[::1' is not a URL"),
    ("proxy.example:3128", "HTTP_PROXY='proxy.example:3128' is not an http://host:port proxy"),
    ("https://proxy.example:3128", "is not an http://host:port proxy"),
])
def test_an_unusable_proxy_fails_the_plan_on_aiohttp(value: str, message: str, tmp_path, capsys,
                                                     monkeypatch) -> None:
    """aiohttp reads the proxy variables per request: a malformed one would fail every request,
    an https:// one would be skipped (requests sent direct)."""
    for var in ("http_proxy", "https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HTTP_PROXY", value)
    line = _one_error_line(["load.transport=aiohttp"], tmp_path, capsys)
    assert "load.transport=aiohttp: " in line and message in line


def test_proxy_variables_do_not_concern_the_raw_transport(tmp_path, monkeypatch) -> None:
    from grid.run import make_plan

    monkeypatch.setenv("HTTP_PROXY", "http://[::1")
    plan = make_plan(["+sweep=smoke", "load.transport=raw", f"results_dir={tmp_path / 'r'}"])
    assert plan.plan.cells  # type: ignore[attr-defined]
