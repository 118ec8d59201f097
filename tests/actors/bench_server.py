"""The fixed-schedule bench server (bench/fixed_schedule_server.py) as a module, for the load
generator's tests that run it in-process over real sockets."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def bench_server_module() -> ModuleType:
    """bench/fixed_schedule_server.py, imported once (bench/ is not a package)."""
    name = "fixed_schedule_server"
    if name in sys.modules:
        return sys.modules[name]
    sys.path.insert(0, str(ROOT / "bench"))  # where the script finds its helper, bench/_common.py
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod
