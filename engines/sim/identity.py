"""What a simulated server's numbers depend on besides its flags, as one string that is part of
every simulated cell's identity: the specgrid release, the SGLang version the simulator
imitates and a digest of the CONTENT of its server, hardware and model profiles (a profile
edited between two plans gives new cells)."""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import tomllib
from pathlib import Path

from engines.sim.cli import SIM_VERSION
from engines.sim.profile import load_profile


def sim_version(profile: str, hardware: str | None = None, model: str | None = None) -> str:
    """The simulator's identity for these profiles; ValueError when one is missing or
    unusable. Read anew each time: a profile edited between two plans must give new cells."""
    prof = load_profile(profile, hardware, model)
    content = json.dumps([prof.data, prof.hardware_data, prof.model_data], sort_keys=True)
    digest = hashlib.sha256(content.encode()).hexdigest()[:12]
    return (f"sim {SIM_VERSION} (specgrid {specgrid_release()}), profile {prof.path.stem} "
            f"on {prof.hardware_data.get('name')} / {prof.model_data.get('name')}@{digest}")


@functools.lru_cache(maxsize=1)
def specgrid_release() -> str:
    """The installed package's version; in a source checkout, pyproject.toml's."""
    try:
        return importlib.metadata.version("specgrid")
    except importlib.metadata.PackageNotFoundError:
        pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
        try:
            return str(tomllib.loads(pyproject.read_text())["project"]["version"])
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            return "unknown"
