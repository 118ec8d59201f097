"""The load generator's settings in the grid config (grid/config.py LoadConfig): bad values are
one clear line before anything starts."""

from __future__ import annotations

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
