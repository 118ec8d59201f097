"""What pyproject.toml cannot declare without experimental setuptools tables:

* the load generator's C module (actors/loadgen/_native_scan.c says why it is C); pip compiles
  it on install (gcc and the Python headers);
* the Hydra configs: they live in `conf/` at the top of the repository (the layout a Hydra app
  is read by) and install as the package data `grid/conf/` (grid/run.py finds either).

Everything else is in pyproject.toml."""

from setuptools import Extension, find_packages, setup

setup(
    packages=[*find_packages(include=["grid*", "actors*", "engines*", "workloads*",
                                      "specgrid_metrics*"]), "grid.conf"],
    package_dir={"grid.conf": "conf"},  # its files: pyproject.toml's package-data
    ext_modules=[Extension("actors.loadgen._native_scan", ["actors/loadgen/_native_scan.c"])],
)
