"""The CPU facts the real engines depend on (engines/cpu_support.py), and the rule that nothing
in the project imports an engine's compiled kernel library by name: vLLM picks `_C`,
`_C_AVX512` or `_C_AVX2` for the CPU itself, and importing `_C` by name dies with SIGILL on a CPU
without AVX-512 (it stopped `.ci/run` on an AVX2-only machine)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from engines.cpu_support import parse_cpuinfo, unsupported_line

REPO = Path(__file__).resolve().parents[2]

AVX512_CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 9454 48-Core Processor
flags\t\t: fpu sse sse2 avx avx2 avx512f avx512_bf16 avx512_vnni
processor\t: 1
model name\t: something else
flags\t\t: fpu
"""
AVX2_CPUINFO = """processor\t: 0
model name\t: AMD EPYC
flags\t\t: fpu sse sse2 avx avx2 fma
"""
OLD_CPUINFO = """processor\t: 0
model name\t: Intel(R) Xeon(R) CPU E5-2670
flags\t\t: fpu sse sse2 avx
"""


def test_line_names_model_architecture_and_the_flags_that_pick_a_kernel_library():
    assert (parse_cpuinfo(AVX512_CPUINFO, "x86_64").line()
            == "AMD EPYC 9454 48-Core Processor, x86_64: avx2 avx512f avx512_bf16 avx512_vnni")
    assert parse_cpuinfo(AVX2_CPUINFO, "x86_64").line() == "AMD EPYC, x86_64: avx2"


def test_avx2_and_avx512_cpus_run_the_engines():
    assert unsupported_line(parse_cpuinfo(AVX512_CPUINFO, "x86_64")) is None
    assert unsupported_line(parse_cpuinfo(AVX2_CPUINFO, "x86_64")) is None


def test_a_cpu_without_avx2_gets_one_line_naming_why():
    line = unsupported_line(parse_cpuinfo(OLD_CPUINFO, "x86_64"))
    assert line == ("real engines cannot run on this CPU (Intel(R) Xeon(R) CPU E5-2670, x86_64: "
                    "no AVX2 or AVX-512): no AVX2: vLLM's CPU kernels need at least AVX2 "
                    "(_C_AVX2), and SGLang's CPU path uses them")
    assert "not x86-64" in unsupported_line(parse_cpuinfo("", "aarch64"))


def test_the_module_prints_this_machines_line_and_exits_by_it():
    done = subprocess.run(["python", "-m", "engines.cpu_support"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    text = done.stdout.strip()
    assert len(text.splitlines()) == 1
    assert (done.returncode, text.startswith("CPU: ")) in ((0, True), (1, False))


# Importing a kernel library by name (`_C`, `_C_AVX2`, `_moe_C`, directly, from the package or
# through importlib.import_module), and SGLang's kernel package (CUDA-only
# wheels). A comment or prose that names the library does not match: only import statements.
_LIB = r"(?:vllm\._(?:[a-z0-9]+_)*C(?:_AVX\w*)?|sgl" r"_kernel)\b"
"""vLLM's kernel libraries (`_C`, `_C_AVX2`, `_C_AVX512`, `_moe_C`, ...) and SGLang's kernels."""
COMPILED = re.compile(
    rf"(?:^|[;\"'\s.])(?:import\s+(?:[\w.]+\s*,\s*)*{_LIB}"
    rf"|from\s+{_LIB}[\w.]*\s+import"
    r"|from\s+vllm\s+import\s+_(?:[a-z0-9]+_)*C(?:_AVX\w*)?\b"
    rf"|import_module\(\s*[\"']{_LIB})", re.MULTILINE)


def test_the_pattern_catches_every_spelling_and_spares_prose():
    # the offending spellings are assembled, so this file itself holds none of them
    lib, sgl = "vllm." + "_C", "sgl" + "_kernel"
    for bad in [f'"import vllm, {lib}, transformers"', f"import {lib}_AVX2",
                "x; from vllm import " + "_C", "from vllm." + "_moe_C import ops",
                f'importlib.import_module("{lib}")', f"import {sgl}"]:
        assert COMPILED.search(bad), bad
    for fine in [f"# {lib} is the AVX-512 library", "import vllm._custom_ops",
                 "from vllm.platforms import current_platform", f"`import {lib}` dies"]:
        assert not COMPILED.search(fine), fine


def test_no_script_or_module_imports_an_engines_compiled_library_directly():
    tracked = subprocess.run(["git", "ls-files", "*.py", "*.sh", ".ci/*"], cwd=REPO,
                             capture_output=True, text=True, check=True).stdout.split()
    this = Path(__file__).relative_to(REPO).as_posix()
    assert len(tracked) > 50  # the scan sees the project, not an empty list
    offenders = []
    for name in tracked:
        if name == this:
            continue
        text = (REPO / name).read_text(errors="replace")
        offenders += [f"{name}: {m.group(0).strip()}" for m in COMPILED.finditer(text)]
    assert offenders == [], "let the engine load its kernels (engines/cpu_support.py)"
