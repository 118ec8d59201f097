"""The one check every bad-input test makes: exit 2, one `specgrid: error:` line naming the
problem, and no results folder."""

from __future__ import annotations

from pathlib import Path

from grid.run import EXIT_BAD_INPUT, run


def assert_bad_input(overrides: list[str], message: str, results: Path, capsys) -> None:
    outcome = run([*overrides, f"results_dir={results}"], echo=lambda _: None)
    err = capsys.readouterr().err.strip().splitlines()
    assert outcome.exit_code == EXIT_BAD_INPUT
    assert len(err) == 1 and err[0].startswith("specgrid: error: "), err
    assert message in err[0]
    assert not results.exists()
