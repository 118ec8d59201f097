"""A prepared check for a machine with real GPUs: Ray, GPU assignment and NVML, no model weights.

    python scripts/gpu_check.py [--out DIR] [--timeout-s 240]

What it checks, in one run of well under five minutes:
1. Ray starts on this node and reports its GPUs (`ray.cluster_resources()["GPU"]`).
2. One Ray actor per GPU (at most 8) with `num_gpus=1`: each spawns a child process (as the
   ServerActor spawns an SGLang server), which reports the CUDA_VISIBLE_DEVICES it inherited
   and, through the CUDA driver API (libcuda via ctypes; no torch needed), how many devices it
   sees and their PCI bus ids. PASS needs: the child's CUDA_VISIBLE_DEVICES equals
   `ray.get_gpu_ids()` of its actor, it sees exactly one device, and actors got distinct GPUs.
3. NVML readings per GPU (name, memory, utilisation, temperature, power, PCI bus id) through
   pynvml (nvidia-ml-py, or the copy Ray vendors), else `nvidia-smi --query-gpu=...`. A GPU
   whose NVML PCI bus id differs from what its child saw under CUDA is reported (a warning:
   CUDA's default device order need not be PCI order).
Prints a PASS/FAIL summary and exits 0/1; `--out DIR` also writes DIR/gpu_check.json.
Without a GPU it fails at once with a clear message (it never waits for GPUs that don't exist).
`--logical-gpus N` is a dry run for machines without GPUs: Ray gets N logical GPUs, the NVML
and CUDA-device checks are skipped, and only Ray's CUDA_VISIBLE_DEVICES hand-down is checked.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

CHILD = r"""
import ctypes, json, os
out = {"pid": os.getpid(), "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
try:
    cuda = ctypes.CDLL("libcuda.so.1")
    rc = cuda.cuInit(0)
    n = ctypes.c_int(0)
    rc = rc or cuda.cuDeviceGetCount(ctypes.byref(n))
    out["cuda_init_rc"] = rc
    out["cuda_device_count"] = n.value if rc == 0 else None
    buses = []
    for i in range(n.value if rc == 0 else 0):
        dev = ctypes.c_int(0)
        buf = ctypes.create_string_buffer(64)
        if cuda.cuDeviceGet(ctypes.byref(dev), i) == 0 and \
                cuda.cuDeviceGetPCIBusId(buf, 64, dev) == 0:
            buses.append(buf.value.decode())
    out["pci_bus_ids"] = buses
except OSError as e:
    out["cuda_error"] = f"libcuda not loadable: {e}"
print(json.dumps(out))
"""

NVSMI_FIELDS = ("index,name,pci.bus_id,memory.used,memory.total,utilization.gpu,"
                "temperature.gpu,power.draw,driver_version")


def nvml_readings() -> tuple[str, list[dict[str, Any]]]:
    """(source, one dict per GPU) from pynvml, Ray's vendored pynvml, or nvidia-smi."""
    nvml = None
    for name in ("pynvml", "ray._private.thirdparty.pynvml"):
        try:
            nvml = __import__(name, fromlist=["nvmlInit"])
            nvml.nvmlInit()
            source = name
            break
        except Exception:
            nvml = None
    if nvml is not None:
        rows = []
        for i in range(nvml.nvmlDeviceGetCount()):
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            mem = nvml.nvmlDeviceGetMemoryInfo(h)
            row: dict[str, Any] = {"index": i, "name": _s(nvml.nvmlDeviceGetName(h)),
                                   "pci_bus_id": _s(nvml.nvmlDeviceGetPciInfo(h).busId),
                                   "memory_used_mib": mem.used // 2**20,
                                   "memory_total_mib": mem.total // 2**20}
            for key, fn, args in (
                ("utilization_gpu_pct", nvml.nvmlDeviceGetUtilizationRates, (h,)),
                ("temperature_c", nvml.nvmlDeviceGetTemperature, (h, 0)),
                ("power_w", nvml.nvmlDeviceGetPowerUsage, (h,)),
            ):
                try:
                    value = fn(*args)
                    row[key] = (value.gpu if key == "utilization_gpu_pct"
                                else value / 1000 if key == "power_w" else value)
                except Exception as e:  # not every board reports everything
                    row[key] = f"n/a ({type(e).__name__})"
            rows.append(row)
        nvml.nvmlShutdown()
        return source, rows
    if shutil.which("nvidia-smi") is None:
        return "none", []
    proc = subprocess.run(["nvidia-smi", f"--query-gpu={NVSMI_FIELDS}",
                           "--format=csv,noheader,nounits"],
                          capture_output=True, text=True, timeout=60)
    keys = NVSMI_FIELDS.split(",")
    rows = [dict(zip(keys, (v.strip() for v in line.split(",")), strict=False))
            for line in proc.stdout.splitlines() if line.strip()]
    return "nvidia-smi", rows


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _bus(bus: str) -> str:
    """Normalise PCI bus ids: NVML says 00000000:1B:00.0, CUDA 0000:1b:00.0."""
    parts = bus.lower().split(":")
    return ":".join([parts[0][-4:]] + parts[1:]) if len(parts) == 3 else bus.lower()


def run(timeout_s: float, logical_gpus: int | None = None) -> dict[str, Any]:
    report: dict[str, Any] = {"checks": [], "warnings": [], "logical_gpus": logical_gpus}

    def check(name: str, ok: bool, detail: str) -> bool:
        report["checks"].append({"name": name, "ok": ok, "detail": detail})
        print(f"[{'PASS' if ok else 'FAIL'}] {name}: {detail}", flush=True)
        return ok

    source, gpus = nvml_readings() if logical_gpus is None else ("skipped (logical GPUs)", [])
    report["nvml_source"], report["nvml"] = source, gpus
    print(f"NVML ({source}):", flush=True)
    for g in gpus:
        print("  " + json.dumps(g), flush=True)
    if logical_gpus is None and not check("NVML sees GPUs", bool(gpus),
                 f"{len(gpus)} GPU(s) via {source}" if gpus else
                 "no GPU found (no NVML library, no nvidia-smi, or zero devices): this check "
                 "needs a machine with NVIDIA GPUs"):
        return report

    import ray

    t0 = time.monotonic()
    ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False,
             num_gpus=logical_gpus)
    try:
        resources = ray.cluster_resources()
        n_gpu = int(resources.get("GPU", 0))
        report["ray_resources"] = resources
        print(f"Ray up in {time.monotonic() - t0:.1f}s; resources: {resources}", flush=True)
        expected = len(gpus) if logical_gpus is None else logical_gpus
        if not check("Ray sees GPUs", n_gpu > 0 and n_gpu == expected,
                     f"Ray: {n_gpu} GPU(s), expected {expected} ({source})"):
            if n_gpu == 0:
                return report

        @ray.remote(num_gpus=1, num_cpus=0)
        class Probe:
            def probe(self) -> dict[str, Any]:
                proc = subprocess.run([sys.executable, "-c", CHILD], capture_output=True,
                                      text=True, timeout=60, env=dict(os.environ))
                lines = proc.stdout.strip().splitlines()
                child = json.loads(lines[-1]) if lines else {"error": proc.stderr[-500:]}
                return {"ray_gpu_ids": [str(g) for g in ray.get_gpu_ids()],
                        "actor_cvd": os.environ.get("CUDA_VISIBLE_DEVICES"), "child": child}

        n_actors = min(n_gpu, 8)
        actors = [Probe.remote() for _ in range(n_actors)]
        deadline = max(10.0, timeout_s - (time.monotonic() - t0))
        results = ray.get([a.probe.remote() for a in actors], timeout=deadline)
        report["actors"] = results
        seen: list[str] = []
        for i, r in enumerate(results):
            ids, child = r["ray_gpu_ids"], r["child"]
            print(f"actor {i}: " + json.dumps(r), flush=True)
            cvd = child.get("cuda_visible_devices")
            check(f"actor {i} child CUDA_VISIBLE_DEVICES", cvd == ",".join(ids) and len(ids) == 1,
                  f"Ray assigned {ids}, child got {cvd!r}")
            if logical_gpus is None:
                check(f"actor {i} child sees one CUDA device",
                      child.get("cuda_device_count") == 1,
                      f"cuda_device_count={child.get('cuda_device_count')} "
                      f"{child.get('cuda_error', '')}".strip())
            seen += ids
            if len(ids) == 1 and ids[0].isdigit() and int(ids[0]) < len(gpus):
                nv = _bus(str(gpus[int(ids[0])].get("pci_bus_id", "")))
                cu = [_bus(b) for b in child.get("pci_bus_ids", [])]
                if cu and nv != cu[0]:
                    report["warnings"].append(
                        f"actor {i}: Ray GPU {ids[0]} is {cu[0]} under CUDA, NVML index "
                        f"{ids[0]} is {nv} (CUDA order differs from NVML order)")
        check("actors got distinct GPUs", len(seen) == len(set(seen)) == n_actors,
              f"{seen}")
        for a in actors:
            ray.kill(a)
    finally:
        ray.shutdown()
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, help="also write gpu_check.json here")
    parser.add_argument("--timeout-s", type=float, default=240.0)
    parser.add_argument("--logical-gpus", type=int, default=None,
                        help="dry run without GPUs: Ray gets N logical GPUs, NVML/CUDA skipped")
    ns = parser.parse_args()
    t0 = time.monotonic()
    try:
        report = run(ns.timeout_s, ns.logical_gpus)
    except Exception as e:  # a crash is a FAIL with its reason, not a traceback only
        report = {"checks": [{"name": "gpu_check ran", "ok": False,
                              "detail": f"{type(e).__name__}: {e}"}], "warnings": []}
        print(f"[FAIL] gpu_check crashed: {type(e).__name__}: {e}", flush=True)
    failed = [c["name"] for c in report["checks"] if not c["ok"]]
    report["ok"] = bool(report["checks"]) and not failed
    report["wall_s"] = round(time.monotonic() - t0, 1)
    for w in report["warnings"]:
        print(f"[WARN] {w}")
    dry = " (dry run: logical GPUs, no NVML/CUDA)" if ns.logical_gpus is not None else ""
    print(f"GPU CHECK: {'PASS' if report['ok'] else 'FAIL'}{dry} "
          f"({len(report['checks']) - len(failed)}/{len(report['checks'])} checks, "
          f"{report['wall_s']}s)" + (f"; failed: {', '.join(failed)}" if failed else ""))
    if ns.out:
        ns.out.mkdir(parents=True, exist_ok=True)
        (ns.out / "gpu_check.json").write_text(json.dumps(report, indent=2, default=str))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
