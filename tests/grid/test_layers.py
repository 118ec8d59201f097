"""The import-linter contract "the driver names no engine" (pyproject.toml) forbids grid/ each
engine's own package by name; a package added under engines/ must be named there too, or the
driver could import it unnoticed. The contract itself runs in CI (`lint-imports`)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_engine_package_is_forbidden_to_the_driver():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    [names_no_engine] = [c for c in contracts if c["name"].startswith("The driver names no")]
    assert names_no_engine["source_modules"] == ["grid"]
    # an engine is a package with its Engine in engine.py (docs/engines.md, "Adding an engine")
    packages = {f"engines.{p.parent.name}" for p in (ROOT / "engines").glob("*/engine.py")}
    assert packages >= {"engines.sim", "engines.sglang", "engines.vllm", "engines.external"}
    assert set(names_no_engine["forbidden_modules"]) == packages
