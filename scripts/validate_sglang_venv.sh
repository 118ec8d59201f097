#!/usr/bin/env bash
# Create a separate virtual environment in which SGLang's own argument parser runs, so that
# specgrid can check its generated server command lines against the real `ServerArgs` on a
# machine without a GPU (CI included). The orchestrator's venv never needs SGLang.
#
# Usage: scripts/validate_sglang_venv.sh VENV_DIR [SGLANG_VERSION]
#   VENV_DIR        where to create the venv (e.g. .venv-sglang, git-ignored)
#   SGLANG_VERSION  default 0.5.23 (0.5.19 also works; 0.5.13 does not, see below)
#
# Env:
#   PYTHON          interpreter to create the venv with (default python3.11, else python3)
#
# Then: SPECGRID_SGLANG_PYTHON=VENV_DIR/bin/python pytest tests/engines/sglang
#
# What gets installed: sglang itself with --no-deps (its full dependency set pulls CUDA
# kernels and gigabytes), plus only what `from sglang.srt.server_args import ServerArgs` and
# `ServerArgs.from_cli_args` import on a CPU machine. torch is the CPU build (pinned to the
# wheel that lies in the machines' local wheel folder); a CPU torch does not bring triton,
# which SGLang's utils import, so triton is installed separately. pip reports sglang's other
# requirements as missing ("dependency conflicts"); that is expected and harmless here.
# Re-running on an existing venv with the same version is a fast no-op. About 70 s here.
set -euo pipefail

VENV_DIR=${1:?usage: $0 VENV_DIR [SGLANG_VERSION]}
SGLANG_VERSION=${2:-0.5.23}
PY=${PYTHON:-$(command -v python3.11 || command -v python3)}

version_lt() {  # version_lt A B: A < B
    [[ "$1" != "$2" && "$(printf '%s\n' "$1" "$2" | sort -V | head -1)" == "$1" ]]
}

start=$(date +%s)
if [[ -x "$VENV_DIR/bin/python" ]] && "$VENV_DIR/bin/python" - "$SGLANG_VERSION" <<'PYEOF'
import sys
from importlib.metadata import version
sys.exit(0 if version("sglang") == sys.argv[1] else 1)
PYEOF
then
    echo "validate_sglang_venv: $VENV_DIR already has sglang $SGLANG_VERSION"
else
    "$PY" -m venv "$VENV_DIR"
    PIP=("$VENV_DIR/bin/python" -m pip install --quiet --disable-pip-version-check)
    # pip's complaints about sglang's uninstalled requirements are expected: filter them,
    # keep every other message and pip's exit status.
    pip_install() {
        "${PIP[@]}" "$@" 2> >(grep -v "requires\|dependency conflicts\|dependency resolver\|^WARNING: Location" >&2)
    }
    pip_install --no-deps "sglang==$SGLANG_VERSION"
    pip_install \
        "torch==2.13.0" triton \
        numpy msgspec orjson psutil pybase64 requests packaging pillow starlette pydantic \
        pyzmq tqdm ipython aiohttp
    if version_lt "$SGLANG_VERSION" 0.5.20; then
        # Before 0.5.20 the parser's import chain also reaches these, and sglang's utils
        # import torchvision at top level. PyPI's torchvision is built against CUDA torch and
        # cannot load with the CPU torch, so instead that one import is guarded (this venv
        # only ever parses arguments; no server runs from it). Checked with 0.5.19; 0.5.13
        # still fails (its configs register transformers image processors, which need
        # torchvision).
        pip_install openai partial_json_parser xgrammar
        "$VENV_DIR/bin/python" - <<'PYEOF'
import sysconfig
from pathlib import Path

path = Path(sysconfig.get_paths()["purelib"]) / "sglang/srt/utils/common.py"
text = path.read_text()
line = "from torchvision.io import decode_jpeg\n"
guarded = ("try:  # specgrid parser-validation venv: PyPI torchvision needs CUDA torch\n"
           "    from torchvision.io import decode_jpeg\n"
           "except ImportError:\n"
           "    decode_jpeg = None\n")
if line in text and guarded not in text:
    path.write_text(text.replace(line, guarded, 1))
PYEOF
    fi
fi

# Prove the parser works: import, parse a minimal command line, build ServerArgs (only where
# construction does no resolution, i.e. where ServerArgs has resolve_once).
"$VENV_DIR/bin/python" - <<'PYEOF'
import argparse
import time

t0 = time.monotonic()
import sglang
from sglang.srt.server_args import ServerArgs

p = argparse.ArgumentParser()
ServerArgs.add_cli_args(p)
ns = p.parse_args(["--model-path", "dummy/model", "--tp-size", "8"])
if hasattr(ServerArgs, "resolve_once"):
    ServerArgs.from_cli_args(ns)
print(f"validate_sglang_venv: sglang {sglang.__version__} parser OK "
      f"(import+parse {time.monotonic() - t0:.1f}s)")
PYEOF
echo "validate_sglang_venv: ready in $(( $(date +%s) - start ))s: $VENV_DIR/bin/python"
