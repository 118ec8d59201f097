"""The one thing pyproject.toml cannot declare without an experimental setuptools table: the
load generator's C module (actors/loadgen/_native_scan.c says why it is C). pip compiles it
on install (gcc and the Python headers); everything else is in pyproject.toml."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("actors.loadgen._native_scan", ["actors/loadgen/_native_scan.c"])])
